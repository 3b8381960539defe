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

// QUIC flow-control windows for h3 (see README.md, "Connection policy").
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
}

// connTracker assigns small ids to connections and remembers their
// handshake timings. Connections are registered by our dial functions and
// looked up by identity in httptrace's GotConn.
type connTracker struct {
	mu      sync.Mutex
	byKey   map[any]*connInfo
	current *connInfo // h3: the most recently dialed QUIC connection
	n       int
}

func newConnTracker() *connTracker { return &connTracker{byKey: map[any]*connInfo{}} }

func (t *connTracker) add(key any, connectStart, connectDone, tlsDone int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	ci := &connInfo{id: t.n, connectStart: connectStart, connectDone: connectDone, tlsDone: tlsDone}
	t.byKey[key] = ci
	t.current = ci
}

// claim returns the connection for key (nil key: the current h3 connection)
// and whether this is its first request. The first request of a connection
// reports the connection's connect/TLS phases.
func (t *connTracker) claim(key any) (ci connInfo, first bool, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.current
	if key != nil {
		c = t.byKey[key]
	}
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
	for _, c := range t.byKey {
		if c.claimed {
			used++
		}
	}
	return used
}

// client is one configured transport for the forced protocol.
type client struct {
	proto   string
	rt      http.RoundTripper
	tracker *connTracker
	close   func()
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

// newClient builds the transport for cfg.proto. roots nil means system roots.
func newClient(cfg *config, roots *x509.CertPool, keylog io.Writer, logf func(string, ...any)) (*client, error) {
	tlsConf := &tls.Config{
		ServerName:         cfg.baseURL.Hostname(),
		RootCAs:            roots,
		InsecureSkipVerify: cfg.insecure,
		ClientSessionCache: nil, // every connection does a full handshake
	}
	if keylog != nil {
		tlsConf.KeyLogWriter = keylog
	}
	cl := &client{proto: cfg.proto, tracker: newConnTracker()}
	d := &dialer{connect: cfg.connect, tracker: cl.tracker}

	switch cfg.proto {
	case "h1":
		tlsConf.NextProtos = []string{"http/1.1"}
		tr := &http.Transport{
			DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return d.dialTLS(ctx, addr, tlsConf, "h1")
			},
			MaxConnsPerHost:     cfg.parallel,
			MaxIdleConnsPerHost: cfg.parallel,
			DisableCompression:  true,
			// A non-nil empty map disables HTTP/2.
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
		}
		cl.rt, cl.close = tr, tr.CloseIdleConnections
	case "h2":
		tlsConf.NextProtos = []string{"h2"}
		tr := &http2.Transport{
			TLSClientConfig:            tlsConf,
			DisableCompression:         true,
			StrictMaxConcurrentStreams: true, // queue on the one connection, never dial a second
			DialTLSContext: func(ctx context.Context, _, addr string, c *tls.Config) (net.Conn, error) {
				return d.dialTLS(ctx, addr, c, "h2")
			},
		}
		cl.rt, cl.close = tr, tr.CloseIdleConnections
	case "h3":
		udp, err := net.ListenUDP("udp", nil)
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
		}
		var qlogs *qlogFiles
		if cfg.qlogDir != "" {
			qlogs = &qlogFiles{dir: cfg.qlogDir, logf: logf}
			qconf.Tracer = qlogs.tracer
		}
		tr := &http3.Transport{
			TLSClientConfig:    tlsConf,
			QUICConfig:         qconf,
			DisableCompression: true,
			Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				return d.dialQUIC(ctx, qtr, addr, tc, qc)
			},
		}
		cl.rt = tr
		cl.close = func() {
			tr.Close() // closes the QUIC connection(s)
			qtr.Close()
			udp.Close()
			if qlogs != nil {
				qlogs.wait(2 * time.Second)
			}
		}
	}
	return cl, nil
}

// dialer opens connections, honouring --connect, timing the handshake and
// registering each connection with the tracker.
type dialer struct {
	connect string
	tracker *connTracker
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
	d.tracker.add(tc, connectStart, connectDone, tlsDone)
	return tc, nil
}

// dialQUIC is http3.Transport's Dial hook. QUIC merges the transport and TLS
// handshakes: connect_done = tls_done = handshake complete.
func (d *dialer) dialQUIC(ctx context.Context, qtr *quic.Transport, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
	target, err := d.target(ctx, addr)
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	start := nowNs()
	conn, err := qtr.Dial(ctx, ua, tc, qc) // returns once the handshake is complete
	if err != nil {
		return nil, fmt.Errorf("QUIC handshake with %s: %w", target, err)
	}
	done := nowNs()
	d.tracker.add(conn, start, done, done)
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
