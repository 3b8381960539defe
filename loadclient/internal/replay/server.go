package replay

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/quic-go/quic-go/http3"
)

// Handler answers from the archive the requests to its hosts; other hosts get files of root
// (the lab's own content, when root is not empty), else 404. log receives one line per miss.
func Handler(a *Archive, port int, root string, h3 bool, log io.Writer) http.Handler {
	var files http.Handler
	if root != "" {
		files = http.FileServer(http.Dir(root))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if h3 && r.ProtoMajor < 3 {
			// the replay's own HTTP/3, on the port the request came to (recorded Alt-Svc is dropped)
			w.Header().Set("Alt-Svc", fmt.Sprintf(`h3=":%d"; ma=86400`, port))
		}
		if !a.HasHost(host) {
			if files == nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "no-cache, no-store, must-revalidate")
			files.ServeHTTP(w, r)
			return
		}
		e, _ := a.Match(r.Method, host, port, r.URL.EscapedPath(), r.URL.RawQuery)
		if e == nil && r.Method == http.MethodHead {
			e, _ = a.Match(http.MethodGet, host, port, r.URL.EscapedPath(), r.URL.RawQuery)
		}
		if e == nil {
			fmt.Fprintf(log, "miss %s https://%s:%d%s\n", r.Method, host, port, r.URL.RequestURI())
			w.Header().Set("X-Qb-Replay", "miss")
			w.Header().Set("Timing-Allow-Origin", "*")
			http.Error(w, "not in the page archive", http.StatusNotFound)
			return
		}
		hdr := w.Header()
		for _, kv := range e.Headers {
			hdr.Add(kv[0], kv[1])
		}
		hdr.Set("X-Qb-Replay", "hit")
		// cross-origin Resource Timing (protocol, sizes) and LCP render times need it
		hdr.Set("Timing-Allow-Origin", "*")
		bodyless := r.Method == http.MethodHead || e.Status == 204 || e.Status == 304 || e.Status < 200
		if !bodyless {
			hdr.Set("Content-Length", strconv.Itoa(len(e.Data)))
		}
		w.WriteHeader(e.Status)
		if !bodyless {
			w.Write(e.Data)
		}
	})
}

// Server is the TCP (h1, h2) and UDP (h3) listeners of one port.
type Server struct {
	tcp *http.Server
	h3  *http3.Server
}

// Listen serves the archive on addr:port over TCP (HTTP/1.1 and HTTP/2) and, with h3, UDP.
func Listen(a *Archive, addr string, port int, certs []tls.Certificate, root string, h3 bool, log io.Writer) (*Server, error) {
	hp := net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(port))
	ln, err := net.Listen("tcp", hp)
	if err != nil {
		return nil, err
	}
	h := Handler(a, port, root, h3, log)
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	s := &Server{tcp: &http.Server{Handler: h, Protocols: protos, TLSConfig: &tls.Config{Certificates: certs}}}
	go s.tcp.ServeTLS(ln, "", "")
	if h3 {
		udp, err := net.ListenPacket("udp", hp)
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.h3 = &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: certs})}
		go s.h3.Serve(udp)
	}
	return s, nil
}

// Close stops both listeners.
func (s *Server) Close() {
	s.tcp.Close()
	if s.h3 != nil {
		s.h3.Close()
	}
}
