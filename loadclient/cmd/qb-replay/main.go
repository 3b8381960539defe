// Command qb-replay serves recorded page archives over HTTP/1.1, HTTP/2 and HTTP/3: the
// quicbench `replay` server (src/quicbench/servers/replay.py; docs/pages.md).
//
//	qb-replay --listen ADDR --port 443 [--port N ...] --root CONTENT --cert ORIGIN.pem ... --key KEY.pem
//
// Every archive under CONTENT/replay/*/index.json is served; each --cert is one origin's
// certificate chain (all with the key of --key), chosen by the client's SNI.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"quicbench/loadclient/internal/replay"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// lineWriter serialises log lines of concurrent handlers.
type lineWriter struct{ mu sync.Mutex }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return os.Stderr.Write(p)
}

func main() {
	var ports, certs list
	listen := flag.String("listen", "127.0.0.1", "address to listen on")
	flag.Var(&ports, "port", "a port to serve (TCP and UDP); repeatable")
	root := flag.String("root", "", "content directory: archives under replay/, other hosts' files")
	flag.Var(&certs, "cert", "an origin's certificate chain (PEM); repeatable")
	key := flag.String("key", "", "the private key of every --cert (PEM)")
	noH3 := flag.Bool("no-h3", false, "TCP only")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("qb-replay 1")
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "qb-replay:", err)
		os.Exit(1)
	}
	if *root == "" || *key == "" || len(certs) == 0 {
		fail(fmt.Errorf("--root, --key and at least one --cert are required"))
	}
	a, err := replay.Load(*root)
	if err != nil {
		fail(err)
	}
	var chain []tls.Certificate
	for _, c := range certs {
		kp, err := tls.LoadX509KeyPair(c, *key)
		if err != nil {
			fail(fmt.Errorf("%s: %w", c, err))
		}
		chain = append(chain, kp)
	}
	want := map[int]bool{}
	for _, p := range ports {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			fail(fmt.Errorf("bad --port %q", p))
		}
		want[n] = true
	}
	for p := range a.Ports {
		want[p] = true
	}
	var order []int
	for p := range want {
		order = append(order, p)
	}
	sort.Ints(order)
	log := &lineWriter{}
	var servers []*replay.Server
	for _, p := range order {
		s, err := replay.Listen(a, *listen, p, chain, *root, !*noH3, log)
		if err != nil {
			fail(err)
		}
		servers = append(servers, s)
	}
	fmt.Fprintf(os.Stderr, "qb-replay: %d entries, ports %v, %d certificates\n", a.Count, order, len(chain))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	for _, s := range servers {
		s.Close()
	}
}
