package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	_ "github.com/quic-go/quic-go/qlog" // registers the QUIC qlog event schema written in the trace header
	"github.com/quic-go/quic-go/qlogwriter"
	"golang.org/x/net/http2"
)

// QUIC flow-control windows for h3 (see README.md, "Transports").
// They mirror Go's HTTP/2 client (4 MiB per stream) and give the connection
// enough room for P parallel streams, so flow control is not what limits
// throughput on emulated high-BDP paths.
const (
	quicInitialStreamWindow = 4 << 20
	quicMaxStreamWindow     = 16 << 20
	quicInitialConnWindow   = 32 << 20
	quicMaxConnWindow       = 128 << 20
)

func nowNs() int64 { return time.Now().UnixNano() }

// connInfo describes one transport connection (TCP+TLS or QUIC).
type connInfo struct {
	id                                 int
	connectStart, connectDone, tlsDone int64
	claimed                            bool // a request has already used it
	// session reports, once the handshake is complete, whether the TLS session resumed a
	// ticket and (QUIC only, else nil) whether the server accepted 0-RTT data
	session func(ctx context.Context) (resumed bool, earlyData *bool)
}

// connTracker assigns small ids to connections and remembers their
// handshake timings. Connections are registered by our dial functions and
// looked up in httptrace's GotConn: h1/h2 by the *tls.Conn, h3 by the slot
// that dialed it (http3 hands GotConn a fresh wrapper each time, and each h3
// slot holds one QUIC connection at a time).
type connTracker struct {
	mu    sync.Mutex
	conns []*connInfo       // every connection established, in order
	byKey map[any]*connInfo // h3: a slot's most recent connection
}

func newConnTracker() *connTracker { return &connTracker{byKey: map[any]*connInfo{}} }

func (t *connTracker) add(key any, connectStart, connectDone, tlsDone int64,
	session func(context.Context) (bool, *bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ci := &connInfo{id: len(t.conns) + 1, connectStart: connectStart, connectDone: connectDone, tlsDone: tlsDone,
		session: session}
	t.conns = append(t.conns, ci)
	t.byKey[key] = ci
}

// claim returns the connection for key and whether this is its first
// request. The first request of a connection reports the connection's
// connect/TLS phases.
func (t *connTracker) claim(key any) (ci connInfo, first bool, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byKey[key]
	if c == nil {
		return connInfo{}, false, false
	}
	first = !c.claimed
	c.claimed = true
	return *c, first, true
}

// count is the number of connections that carried a request. net/http may dial
// a connection for a waiting request that another, freed connection then
// serves; such a spare is opened but never used, and is not counted.
func (t *connTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	used := 0
	for _, c := range t.conns {
		if c.claimed {
			used++
		}
	}
	return used
}

// slot is one HTTP transport. The h2 and h3 transports used here hold one
// connection each (h2: StrictMaxConcurrentStreams; h3: one per host), so for
// them a slot is a connection; the h1 transport pools up to MaxConnsPerHost
// connections itself.
type slot struct {
	rt       http.RoundTripper
	close    func() // closes the transport and every connection it opened
	inflight int    // requests currently using the slot, guarded by client.mu
}

// client maps requests onto connections according to the --connections policy.
type client struct {
	proto   string
	policy  connPolicy
	tracker *connTracker
	newSlot func() (*slot, error)
	// maxSlots bounds the slots of shared and pool policies: 1 for h1 (its
	// transport pools connections itself) and for shared, N for h2/h3 pool:N.
	maxSlots int
	finish   func() // after all slots are closed (flushes qlog files)

	mu    sync.Mutex
	slots []*slot
}

// acquire returns the slot request should use and the function that
// releases it once the response body has been read and closed.
//
// per-object: a new transport, closed on release, so the request runs on a
// connection of its own. shared/pool: the least-loaded slot (fewest requests
// in flight, lowest index on ties); a new slot, i.e. a new connection, is
// created only while every existing one is busy and fewer than maxSlots exist.
func (c *client) acquire() (*slot, func(), error) {
	if c.policy.kind == policyPerObject {
		s, err := c.newSlot()
		if err != nil {
			return nil, nil, err
		}
		return s, s.close, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *slot
	for _, s := range c.slots {
		if best == nil || s.inflight < best.inflight {
			best = s
		}
	}
	if (best == nil || best.inflight > 0) && len(c.slots) < c.maxSlots {
		s, err := c.newSlot()
		if err != nil {
			return nil, nil, err
		}
		c.slots = append(c.slots, s)
		best = s
	}
	best.inflight++
	return best, func() {
		c.mu.Lock()
		best.inflight--
		c.mu.Unlock()
	}, nil
}

// close closes every shared/pool slot and their connections.
func (c *client) close() {
	c.mu.Lock()
	slots := c.slots
	c.slots = nil
	c.mu.Unlock()
	for _, s := range slots {
		s.close()
	}
	if c.finish != nil {
		c.finish()
	}
}

// connSet remembers the TCP+TLS connections a transport opened so that they
// can be closed deterministically: CloseIdleConnections alone can race with
// the transport returning a just-finished connection to its idle pool.
type connSet struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

func loadCA(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates found", file)
	}
	return pool, nil
}

// newClient prepares the transports for cfg.proto and cfg.connections; no
// connection is opened before the first request. roots nil means system roots.
func newClient(cfg *config, roots *x509.CertPool, keylog io.Writer, logf func(string, ...any)) (*client, error) {
	tlsConf := &tls.Config{
		ServerName:         cfg.baseURL.Hostname(),
		RootCAs:            roots,
		InsecureSkipVerify: cfg.insecure,
		// No session cache unless --resumption asks for one: without it every
		// connection (whatever the policy) does a full handshake.
		ClientSessionCache: nil,
	}
	if cfg.resumption != "none" {
		tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	if keylog != nil {
		tlsConf.KeyLogWriter = keylog
	}
	pol := cfg.connections
	cl := &client{proto: cfg.proto, policy: pol, tracker: newConnTracker(), maxSlots: 1}
	if pol.kind == policyPool && cfg.proto != "h1" {
		cl.maxSlots = pol.n
	}
	d := &dialer{connect: cfg.connect, tracker: cl.tracker, early: cfg.zeroRTT(), bindPort: cfg.bindPort}
	// 0rtt-token: one store for every connection of the client, filled by the priming connections
	// (one per object): each measured connection presents an address-validation token (NEW_TOKEN);
	// a validated address lifts the server's limit of sending 3x what it received before the
	// handshake completes (RFC 9000, section 8.1), which otherwise holds a 0-RTT response back
	var tokens quic.TokenStore
	if cfg.resumption == "0rtt-token" {
		tokens = quic.NewLRUTokenStore(4, max(4, cfg.count))
	}

	switch cfg.proto {
	case "h1":
		tlsConf.NextProtos = []string{"http/1.1"}
		maxConns := cfg.parallel // shared: up to P connections, reused
		switch pol.kind {
		case policyPool:
			maxConns = pol.n
		case policyPerObject:
			maxConns = 1 // the transport serves one request only
		}
		cl.newSlot = func() (*slot, error) {
			conns := &connSet{}
			tr := &http.Transport{
				DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
					c, err := d.dialTLS(ctx, addr, tlsConf, "h1")
					if err == nil {
						conns.add(c)
					}
					return c, err
				},
				MaxConnsPerHost:     maxConns,
				MaxIdleConnsPerHost: maxConns,
				DisableCompression:  true,
				// A non-nil empty map disables HTTP/2.
				TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
			}
			return &slot{rt: tr, close: func() { tr.CloseIdleConnections(); conns.closeAll() }}, nil
		}
	case "h2":
		tlsConf.NextProtos = []string{"h2"}
		cl.newSlot = func() (*slot, error) {
			conns := &connSet{}
			tr := &http2.Transport{
				TLSClientConfig:            tlsConf,
				DisableCompression:         true,
				StrictMaxConcurrentStreams: true, // queue on the slot's one connection, never dial a second
				DialTLSContext: func(ctx context.Context, _, addr string, c *tls.Config) (net.Conn, error) {
					conn, err := d.dialTLS(ctx, addr, c, "h2")
					if err == nil {
						conns.add(conn)
					}
					return conn, err
				},
			}
			return &slot{rt: tr, close: func() { tr.CloseIdleConnections(); conns.closeAll() }}, nil
		}
	case "h3":
		var qlogs *qlogFiles
		if cfg.qlogDir != "" {
			qlogs = &qlogFiles{dir: cfg.qlogDir, logf: logf}
			cl.finish = func() { qlogs.wait(2 * time.Second) }
		}
		// Each slot has its own UDP socket, as separate clients would.
		cl.newSlot = func() (*slot, error) {
			var local *net.UDPAddr
			if cfg.bindPort != 0 {
				local = &net.UDPAddr{Port: cfg.bindPort}
			}
			udp, err := net.ListenUDP("udp", local)
			if err != nil {
				return nil, fmt.Errorf("h3: opening UDP socket: %w", err)
			}
			qtr := &quic.Transport{Conn: udp}
			qconf := &quic.Config{
				InitialStreamReceiveWindow:     quicInitialStreamWindow,
				MaxStreamReceiveWindow:         quicMaxStreamWindow,
				InitialConnectionReceiveWindow: quicInitialConnWindow,
				MaxConnectionReceiveWindow:     quicMaxConnWindow,
				KeepAlivePeriod:                10 * time.Second, // as http3's default config
				TokenStore:                     tokens,
			}
			if qlogs != nil {
				qconf.Tracer = qlogs.tracer
			}
			s := &slot{}
			tr := &http3.Transport{
				TLSClientConfig:    tlsConf,
				QUICConfig:         qconf,
				DisableCompression: true,
				Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
					return d.dialQUIC(ctx, qtr, s, addr, tc, qc)
				},
			}
			s.rt = tr
			s.close = func() {
				tr.Close() // closes the QUIC connection (waits until it is closed)
				qtr.Close()
				udp.Close()
			}
			return s, nil
		}
	}
	return cl, nil
}

// dialer opens connections, honouring --connect, timing the handshake and
// registering each connection with the tracker.
type dialer struct {
	connect  string
	tracker  *connTracker
	early    bool // QUIC: DialEarly, so that requests can go in 0-RTT
	bindPort int  // TCP: the local port (0: any)
}

// target returns the address to dial for addr (host:port from the URL),
// resolved to IP:PORT so that DNS time is not part of connect time.
func (d *dialer) target(ctx context.Context, addr string) (string, error) {
	if d.connect != "" {
		addr = d.connect
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("no address for %s", host)
	}
	return net.JoinHostPort(ips[0].String(), port), nil
}

func (d *dialer) dialTLS(ctx context.Context, addr string, conf *tls.Config, want string) (net.Conn, error) {
	target, err := d.target(ctx, addr)
	if err != nil {
		return nil, err
	}
	var nd net.Dialer
	if d.bindPort != 0 {
		nd.LocalAddr = &net.TCPAddr{Port: d.bindPort}
	}
	connectStart := nowNs()
	raw, err := nd.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	connectDone := nowNs()
	tc := tls.Client(raw, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS handshake with %s (ALPN offered %v): %w", target, conf.NextProtos, err)
	}
	tlsDone := nowNs()
	// With a custom DialTLS hook neither net/http nor x/net/http2 checks
	// ALPN, so do it here: never speak h2 over an h1 connection or vice versa.
	alpn := tc.ConnectionState().NegotiatedProtocol
	if got := alpnProto(alpn); got != want {
		tc.Close()
		return nil, fmt.Errorf("protocol mismatch: requested %s, got %s (ALPN %q)", want, got, alpn)
	}
	d.tracker.add(tc, connectStart, connectDone, tlsDone, func(context.Context) (bool, *bool) {
		return tc.ConnectionState().DidResume, nil // crypto/tls has no client 0-RTT
	})
	return tc, nil
}

// dialQUIC is http3.Transport's Dial hook. QUIC merges the transport and TLS
// handshakes: connect_done = tls_done = handshake complete.
// The connection is registered under key (its slot).
func (d *dialer) dialQUIC(ctx context.Context, qtr *quic.Transport, key any, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
	target, err := d.target(ctx, addr)
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	start := nowNs()
	dial := qtr.Dial // returns once the handshake is complete
	if d.early {
		dial = qtr.DialEarly // returns as soon as 0-RTT data can be sent (or the handshake completed)
	}
	conn, err := dial(ctx, ua, tc, qc)
	if err != nil {
		return nil, fmt.Errorf("QUIC handshake with %s: %w", target, err)
	}
	done := nowNs()
	d.tracker.add(key, start, done, done, func(ctx context.Context) (bool, *bool) {
		select { // whether 0-RTT was accepted is known once the handshake is complete
		case <-conn.HandshakeComplete():
		case <-ctx.Done():
		}
		st := conn.ConnectionState()
		return st.TLS.DidResume, &st.Used0RTT
	})
	return conn, nil
}

// alpnProto normalises a negotiated ALPN value ("" means HTTP/1.1).
func alpnProto(alpn string) string {
	switch alpn {
	case "", "http/1.1":
		return "h1"
	case "h2":
		return "h2"
	case "h3":
		return "h3"
	}
	return alpn
}

// qlogFiles writes one JSON-SEQ qlog file per QUIC connection into dir,
// like qlog.DefaultConnectionTracer does for $QLOGDIR
// (file name <odcid>_client.sqlog), and lets us wait until they are flushed.
type qlogFiles struct {
	dir  string
	logf func(string, ...any)
	wg   sync.WaitGroup
}

func (q *qlogFiles) tracer(_ context.Context, isClient bool, connID quic.ConnectionID) qlogwriter.Trace {
	role := "server"
	if isClient {
		role = "client"
	}
	path := filepath.Join(q.dir, fmt.Sprintf("%s_%s.sqlog", connID, role))
	f, err := os.Create(path)
	if err != nil {
		q.logf("qlog: %v", err)
		return nil
	}
	q.wg.Add(1)
	fs := qlogwriter.NewConnectionFileSeq(&flushCloser{w: bufio.NewWriter(f), f: f, done: q.wg.Done}, isClient, connID)
	go fs.Run()
	return fs
}

// wait blocks until all qlog files are closed or the timeout expires.
func (q *qlogFiles) wait(timeout time.Duration) {
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		q.logf("qlog: files not closed after %v", timeout)
	}
}

type flushCloser struct {
	w    *bufio.Writer
	f    *os.File
	done func()
	once sync.Once
}

func (c *flushCloser) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *flushCloser) Close() error {
	err := errors.New("already closed")
	c.once.Do(func() {
		err = errors.Join(c.w.Flush(), c.f.Close())
		c.done()
	})
	return err
}

// prime makes one request on a connection of its own, before the measured ones and not
// recorded, so that the session cache holds the server's ticket (--resumption): the server
// sends it after the handshake, and reading a whole response lets the client take it in.
func (c *client) prime(ctx context.Context, cfg *config) error {
	s, err := c.newSlot()
	if err != nil {
		return err
	}
	defer s.close()
	u := *cfg.baseURL
	u.Path = cfg.requestPath(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := s.rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d for %s", resp.StatusCode, u.Path)
	}
	return nil
}
