// Command qb-testserver runs loadclient's tiny loopback test server
// (HTTP/1.1 + HTTP/2 over TLS/TCP and HTTP/3 over UDP, same port) for manual
// qb-load runs. It writes a freshly generated CA to --ca-out.
//
//	go run ./cmd/qb-testserver --listen 127.0.0.1:4433 --ca-out /tmp/qb-ca.pem
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"quicbench/loadclient/internal/testsrv"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4433", "TCP and UDP listen address")
	host := flag.String("host", "www.quicbench.test", "certificate host name")
	caOut := flag.String("ca-out", "qb-test-ca.pem", "where to write the CA certificate (PEM)")
	h1Only := flag.Bool("h1-only", false, "TCP server offers ALPN http/1.1 only")
	duration := flag.Duration("duration", 10*time.Minute, "exit after this long")
	flag.Parse()

	caPEM, cert, err := testsrv.NewCert(*host, "127.0.0.1", "::1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*caOut, caPEM, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := testsrv.Start(cert, testsrv.Options{Addr: *listen, H1Only: *h1Only})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "qb-testserver: tcp %s udp %s host %s ca %s (paths /<SIZE>/<name>, SIZE like 100KB or 1MB)\n",
		srv.TCPAddr, srv.UDPAddr, *host, *caOut)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-sig:
	case <-time.After(*duration):
	}
	srv.Close()
}
