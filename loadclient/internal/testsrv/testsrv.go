// Package testsrv is a tiny loopback HTTP/1.1+HTTP/2 (TLS/TCP) and HTTP/3
// (QUIC) server with deterministic bodies, used by qb-load's tests and by
// cmd/qb-testserver for manual measurements. It is not a benchmark server.
//
// Paths: /<SIZE>/<anything> serves SIZE bytes (SIZE like 500B, 100KB, 1MB;
// decimal units) of deterministic content derived from the path;
// /slow/... never answers until the client goes away; anything else is 404.
package testsrv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"hash/fnv"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// MaxSize bounds the body size the server will generate.
const MaxSize = 64 << 20

// ParseSize parses "500B", "100KB", "1MB" (decimal units).
func ParseSize(s string) (int, bool) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "KB"):
		mult, s = 1000, strings.TrimSuffix(s, "KB")
	case strings.HasSuffix(s, "MB"):
		mult, s = 1000*1000, strings.TrimSuffix(s, "MB")
	case strings.HasSuffix(s, "B"):
		s = strings.TrimSuffix(s, "B")
	default:
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n*mult > MaxSize {
		return 0, false
	}
	return n * mult, true
}

var (
	bodies      sync.Map     // path -> []byte
	cachedBytes atomic.Int64 // bodies are cached up to maxCached bytes in total
)

const maxCached = 256 << 20

// Body returns the deterministic body for path (with leading slash) and
// whether the path names an object.
func Body(path string) ([]byte, bool) {
	if b, ok := bodies.Load(path); ok {
		return b.([]byte), true
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	size, ok := ParseSize(seg)
	if !ok {
		return nil, false
	}
	h := fnv.New64a()
	h.Write([]byte(path))
	x := h.Sum64() | 1
	b := make([]byte, size+8)
	for i := 0; i < size; i += 8 { // xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	b = b[:size]
	if cachedBytes.Add(int64(size)) <= maxCached {
		bodies.Store(path, b)
	}
	return b, true
}

// SHA256 returns the hex sha256 of the body for path.
func SHA256(path string) string {
	b, _ := Body(path)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Stats counts distinct client connections, keyed by protocol and remote
// address (all streams of one h2/h3 connection share the remote address),
// and the connections accepted per transport.
type Stats struct {
	mu       sync.Mutex
	conns    map[string]map[string]bool // proto -> remote addr
	accepted map[string]int             // "tcp" / "quic" -> connections accepted
}

// Accepted returns the number of connections accepted over network ("tcp":
// TCP connections, h1 and h2; "quic": QUIC connections), whether or not they
// carried a request. Unlike Conns it does not depend on client ports being
// distinct.
func (s *Stats) Accepted(network string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted[network]
}

func (s *Stats) accept(network string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accepted == nil {
		s.accepted = map[string]int{}
	}
	s.accepted[network]++
}

// Conns returns the number of distinct connections seen for proto
// ("HTTP/1.1", "HTTP/2.0", "HTTP/3.0").
func (s *Stats) Conns(proto string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns[proto])
}

func (s *Stats) see(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[string]map[string]bool{}
	}
	if s.conns[r.Proto] == nil {
		s.conns[r.Proto] = map[string]bool{}
	}
	s.conns[r.Proto][r.RemoteAddr] = true
}

// Handler serves the paths described in the package comment.
func Handler(stats *Stats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stats != nil {
			stats.see(r)
		}
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			<-r.Context().Done()
			return
		}
		b, ok := Body(r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
}

// NewCert creates a self-signed CA and a leaf certificate for hosts (DNS
// names or IPs) signed by it. It returns the CA as PEM.
func NewCert(hosts ...string) (caPEM []byte, leaf tls.Certificate, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, leaf, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "quicbench test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, leaf, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, leaf, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, leaf, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, leaf, err
	}
	leaf = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), leaf, nil
}

// Server is a running TLS/TCP server (h1 + h2, or h1 only) and optionally an
// HTTP/3 server on the UDP port of the same number.
type Server struct {
	TCPAddr string // 127.0.0.1:port
	UDPAddr string // "" if no HTTP/3
	Stats   *Stats

	tcp *http.Server
	h3  *http3.Server
}

// Options selects what Start runs.
type Options struct {
	Addr   string // listen address, default 127.0.0.1:0
	H1Only bool   // TCP server offers ALPN http/1.1 only
	NoH3   bool   // do not start the HTTP/3 server
	// Delay holds every response back this long, so that requests overlap
	// even when loopback transfers are fast.
	Delay time.Duration
}

// Start starts the servers with cert. With port 0 the TCP port is random and
// HTTP/3 listens on the same port number over UDP (retrying if it is taken).
func Start(cert tls.Certificate, o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	stats := &Stats{}
	h := Handler(stats)
	if o.Delay > 0 {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(o.Delay):
			case <-r.Context().Done():
			}
			inner.ServeHTTP(w, r)
		})
	}
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", o.Addr)
		if err != nil {
			return nil, err
		}
		s := &Server{TCPAddr: ln.Addr().String(), Stats: stats}
		var udp net.PacketConn
		if !o.NoH3 {
			udp, err = net.ListenPacket("udp", s.TCPAddr)
			if err != nil {
				ln.Close()
				if attempt < 10 && strings.HasSuffix(o.Addr, ":0") {
					continue
				}
				return nil, err
			}
			s.UDPAddr = udp.LocalAddr().String()
		}
		protos := new(http.Protocols)
		protos.SetHTTP1(true)
		protos.SetHTTP2(!o.H1Only)
		s.tcp = &http.Server{
			Handler:   h,
			Protocols: protos,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
			ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
				stats.accept("tcp")
				return ctx
			},
		}
		go s.tcp.ServeTLS(ln, "", "")
		if udp != nil {
			s.h3 = &http3.Server{
				Handler:   h,
				TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
				ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
					stats.accept("quic")
					return ctx
				},
			}
			go s.h3.Serve(udp)
		}
		return s, nil
	}
}

// Close stops the servers.
func (s *Server) Close() error {
	err := s.tcp.Close()
	if s.h3 != nil {
		err = errors.Join(err, s.h3.Close())
	}
	return err
}
