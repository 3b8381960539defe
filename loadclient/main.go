// Command qb-load downloads N objects over one forced HTTP protocol
// (HTTP/1.1+TLS, HTTP/2 or HTTP/3) with at most P requests in flight and
// records per-request timings. It is quicbench's equivalent of Go-Quick's
// `getFiles -p P -n N`. See README.md for flags and output schema.
package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	version   = "0.1.0"
	userAgent = "qb-load/" + version
	maxErrors = 20 // entries in the summary's "errors" list
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the validated command line.
type config struct {
	proto        string // h1, h2 or h3
	baseURL      *url.URL
	connect      string // IP:PORT override for every dial, "" = resolve normally
	caFile       string
	insecure     bool
	pathTemplate string
	count        int
	parallel     int
	connections  connPolicy
	manifestFile string
	requestsFile string
	timeout      time.Duration
	keylogFile   string
	qlogDir      string
	resumption   string // none | tickets | 0rtt | 0rtt-token (see README.md, "Session resumption and 0-RTT")
	bindPort     int    // the local port of the one connection (0: any), so that a lab can find its packets
	showVersion  bool
}

// usageError is reported on stderr as one line, with exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// policyKind is how requests are mapped onto connections (--connections).
type policyKind int

const (
	policyShared    policyKind = iota // h2/h3: one connection; h1: up to P, reused
	policyPerObject                   // a new connection (full handshake) per request
	policyPool                        // at most n connections, requests spread over them
)

type connPolicy struct {
	kind policyKind
	n    int    // pool size, policyPool only
	name string // as given on the command line
}

// parsePolicy parses --connections: shared | per-object | pool:N (N >= 1).
func parsePolicy(s string) (connPolicy, error) {
	switch s {
	case "shared":
		return connPolicy{kind: policyShared, name: s}, nil
	case "per-object":
		return connPolicy{kind: policyPerObject, name: s}, nil
	}
	if digits, ok := strings.CutPrefix(s, "pool:"); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
		if n, err := strconv.Atoi(digits); err == nil && n >= 1 {
			return connPolicy{kind: policyPool, n: n, name: s}, nil
		}
	}
	return connPolicy{}, usagef("invalid --connections %q (accepted values: shared, per-object, pool:N with N >= 1)", s)
}

// parseArgs parses and validates args. It returns flag.ErrHelp after printing
// the usage text for -h/--help.
// zeroRTT: h3 dials early and sends its requests in 0-RTT data (--resumption 0rtt, 0rtt-token).
func (c *config) zeroRTT() bool { return c.resumption == "0rtt" || c.resumption == "0rtt-token" }

func parseArgs(args []string, helpOut io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("qb-load", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run() as one line
	var base, connections string
	fs.StringVar(&c.proto, "proto", "", "protocol to force: h1 | h2 | h3 (required)")
	fs.StringVar(&base, "base-url", "https://www.quicbench.test", "scheme+host[:port]; host is used for SNI, Host/:authority and cert verification")
	fs.StringVar(&c.connect, "connect", "", "IP:PORT to send every TCP/UDP connection to, whatever the host resolves to")
	fs.StringVar(&c.caFile, "ca", "", "PEM file of the only CA to trust (no system roots)")
	fs.BoolVar(&c.insecure, "insecure", false, "skip certificate verification (debugging only)")
	fs.StringVar(&c.pathTemplate, "path-template", "/100KB/obj-{i}.bin", "request path; {i} is replaced by the request number 1..N")
	fs.IntVar(&c.count, "count", 1, "number of requests N (>= 1)")
	fs.IntVar(&c.parallel, "parallel", 1, "max requests in flight P (>= 1)")
	fs.StringVar(&connections, "connections", "shared", "connection policy: shared | per-object | pool:N (N >= 1)")
	fs.StringVar(&c.manifestFile, "manifest", "", "JSON manifest {\"files\":[{path,size,sha256}]} to verify bodies against")
	fs.StringVar(&c.requestsFile, "requests", "", "write one JSON line per request to this file")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "overall deadline (Go duration)")
	fs.StringVar(&c.keylogFile, "keylog", "", "append TLS keys (NSS key log format) for all connections to this file")
	fs.StringVar(&c.qlogDir, "qlog-dir", "", "h3 only: write one qlog (JSON-SEQ .sqlog) per QUIC connection here")
	fs.StringVar(&c.resumption, "resumption", "none", "none | tickets (a priming connection gets a TLS session ticket; every measured connection resumes) | 0rtt (tickets, and h3 requests in 0-RTT) | 0rtt-token (0rtt, with one priming connection per object, each leaving h3 an address-validation token)")
	fs.IntVar(&c.bindPort, "bind-port", 0, "the local port of the trial's one connection (0: any): --connections shared, and --parallel 1 for h1")
	fs.BoolVar(&c.showVersion, "version", false, "print versions as JSON and exit")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(helpOut, "usage: qb-load --proto h1|h2|h3 [flags]\n")
			fs.SetOutput(helpOut)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usagef("%v (run qb-load -h for the list of flags)", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (all options are flags, e.g. --proto h3)", fs.Arg(0))
	}
	if c.showVersion {
		return c, nil
	}
	switch c.proto {
	case "h1", "h2", "h3":
	case "":
		return nil, usagef("--proto is required (accepted values: h1, h2, h3)")
	default:
		return nil, usagef("invalid --proto %q (accepted values: h1, h2, h3)", c.proto)
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.User != nil {
		return nil, usagef("invalid --base-url %q (accepted: https://HOST[:PORT], no path)", base)
	}
	u.Path = ""
	c.baseURL = u
	if c.connect != "" {
		host, port, err := net.SplitHostPort(c.connect)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			return nil, usagef("invalid --connect %q (accepted: IP:PORT, e.g. 127.0.0.1:4433 or [::1]:4433)", c.connect)
		}
	}
	if c.count < 1 {
		return nil, usagef("invalid --count %d (accepted: integer >= 1)", c.count)
	}
	if c.parallel < 1 {
		return nil, usagef("invalid --parallel %d (accepted: integer >= 1)", c.parallel)
	}
	if c.connections, err = parsePolicy(connections); err != nil {
		return nil, err
	}
	switch c.resumption {
	case "none", "tickets", "0rtt", "0rtt-token":
	default:
		return nil, usagef("invalid --resumption %q (accepted values: none, tickets, 0rtt, 0rtt-token)", c.resumption)
	}
	if c.bindPort != 0 && (c.bindPort < 1 || c.bindPort > 65535 || c.connections.kind != policyShared ||
		(c.proto == "h1" && c.parallel != 1)) {
		return nil, usagef("invalid --bind-port %d (accepted: 1..65535, with --connections shared and, for h1, --parallel 1: one connection)", c.bindPort)
	}
	if c.timeout <= 0 {
		return nil, usagef("invalid --timeout %v (accepted: positive Go duration, e.g. 60s)", c.timeout)
	}
	if c.pathTemplate == "" {
		return nil, usagef("invalid --path-template \"\" (accepted: a path like /100KB/obj-{i}.bin)")
	}
	if !strings.HasPrefix(c.pathTemplate, "/") {
		c.pathTemplate = "/" + c.pathTemplate
	}
	return c, nil
}

// requestPath returns the path of request i (1-based).
func (c *config) requestPath(i int) string {
	return strings.ReplaceAll(c.pathTemplate, "{i}", strconv.Itoa(i))
}

type versionInfo struct {
	QBLoad string `json:"qb_load"`
	Go     string `json:"go"`
	QuicGo string `json:"quic_go"`
}

// versions reports this tool's, Go's and quic-go's versions; quic-go's comes
// from the module build info ("unknown" if the binary has none).
func versions() versionInfo {
	v := versionInfo{QBLoad: version, Go: runtime.Version(), QuicGo: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/quic-go/quic-go" {
				v.QuicGo = d.Version
				if d.Replace != nil {
					v.QuicGo = d.Replace.Version
				}
			}
		}
	}
	return v
}

// summary is the single JSON object printed on stdout.
type summary struct {
	ProtoRequested   string         `json:"proto_requested"`
	ConnectionPolicy string         `json:"connection_policy"`
	ProtosNegotiated map[string]int `json:"protos_negotiated"`
	Requests         int            `json:"requests"`
	OK               int            `json:"ok"`
	Failed           int            `json:"failed"`
	Bytes            int64          `json:"bytes"`
	StartNs          *int64         `json:"start_ns"`
	EndNs            *int64         `json:"end_ns"`
	DurationS        float64        `json:"duration_s"`
	GoodputMbps      float64        `json:"goodput_mbps"`
	Connections      int            `json:"connections"`
	Errors           []summaryError `json:"errors"`
	CPUUserS         float64        `json:"cpu_user_s"`
	CPUSysS          float64        `json:"cpu_sys_s"`
	ProcessCPUS      float64        `json:"process_cpu_s"` // the whole process so far, start-up included
	CPUWaitS         *float64       `json:"cpu_wait_s"`
	CPUSlices        *int64         `json:"cpu_slices"`
	Versions         versionInfo    `json:"versions"`
}

type summaryError struct {
	I     int    `json:"i"`
	Error string `json:"error"`
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "qb-load: %v\n", err)
		return 2
	}
	if cfg.showVersion {
		json.NewEncoder(stdout).Encode(versions())
		return 0
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "qb-load: "+format+"\n", a...) }

	// Inputs and outputs that can fail are opened before any traffic.
	var man manifest
	if cfg.manifestFile != "" {
		if man, err = loadManifest(cfg.manifestFile); err != nil {
			logf("--manifest: %v", err)
			return 2
		}
	}
	var roots *x509.CertPool
	if cfg.caFile != "" {
		if roots, err = loadCA(cfg.caFile); err != nil {
			logf("--ca: %v", err)
			return 2
		}
	}
	if cfg.insecure {
		logf("warning: --insecure: server certificates are NOT verified")
	}
	var reqOut *os.File
	if cfg.requestsFile != "" {
		if reqOut, err = os.Create(cfg.requestsFile); err != nil {
			logf("--requests: %v", err)
			return 2
		}
		defer reqOut.Close()
	}
	var keylog io.Writer // stays a nil interface without --keylog
	if cfg.keylogFile != "" {
		f, err := os.OpenFile(cfg.keylogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			logf("--keylog: %v", err)
			return 2
		}
		defer f.Close()
		keylog = f
	}
	if cfg.qlogDir != "" {
		if cfg.proto != "h3" {
			logf("warning: --qlog-dir only applies to h3; ignored for %s", cfg.proto)
			cfg.qlogDir = ""
		} else if err := os.MkdirAll(cfg.qlogDir, 0o755); err != nil {
			logf("--qlog-dir: %v", err)
			return 2
		}
	}

	cl, err := newClient(cfg, roots, keylog, logf)
	if err != nil {
		logf("%v", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()

	if cfg.resumption != "none" {
		// 0rtt-token: one priming connection per measured object, at once, so that every measured
		// connection finds a token of its own: a connection that closes as soon as its response is
		// in leaves before the server's NEW_TOKEN (sent when the handshake is confirmed) reaches
		// it, so the measured connections cannot pass tokens on to one another
		primes := 1
		if cfg.resumption == "0rtt-token" {
			primes = cfg.count
		}
		errs := make(chan error, primes)
		for i := 0; i < primes; i++ {
			go func() { errs <- cl.prime(ctx, cfg) }()
		}
		for i := 0; i < primes; i++ {
			if err := <-errs; err != nil {
				logf("--resumption %s: a priming connection failed: %v", cfg.resumption, err)
				return 1
			}
		}
	}
	ru0, wait0 := rusage(), runQueue()
	results := fetchAll(ctx, cfg, cl, man)
	cl.close()
	ru1, wait1 := rusage(), runQueue()

	if reqOut != nil {
		if err := writeRequests(reqOut, results); err != nil {
			logf("--requests: %v", err)
		}
	}
	s := summarize(cfg, results, cl.tracker.count())
	s.CPUUserS = ru1.user - ru0.user
	s.CPUSysS = ru1.sys - ru0.sys
	ruEnd := rusage()
	s.ProcessCPUS = ruEnd.user + ruEnd.sys
	if wait0.ok && wait1.ok {
		w := math.Max(0, wait1.waitS-wait0.waitS)
		n := max(0, wait1.slices-wait0.slices)
		s.CPUWaitS, s.CPUSlices = &w, &n
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(s); err != nil {
		logf("writing summary: %v", err)
		return 1
	}
	if s.Failed > 0 {
		return 1
	}
	return 0
}

func summarize(cfg *config, results []*result, conns int) *summary {
	s := &summary{
		ProtoRequested:   cfg.proto,
		ConnectionPolicy: cfg.connections.name,
		ProtosNegotiated: map[string]int{},
		Requests:         len(results),
		Connections:      conns,
		Errors:           []summaryError{},
		Versions:         versions(),
	}
	var start, end int64
	for _, r := range results {
		if r.Proto != nil {
			s.ProtosNegotiated[*r.Proto]++
		}
		s.Bytes += r.Bytes
		if r.Error == nil {
			s.OK++
		} else {
			s.Failed++
			if len(s.Errors) < maxErrors {
				s.Errors = append(s.Errors, summaryError{I: r.I, Error: *r.Error})
			}
		}
		if r.StartNs != nil && (start == 0 || *r.StartNs < start) {
			start = *r.StartNs
		}
		if r.endNs > end {
			end = r.endNs
		}
	}
	if start != 0 && end >= start {
		s.StartNs, s.EndNs = &start, &end
		s.DurationS = float64(end-start) / 1e9
		if s.DurationS > 0 {
			s.GoodputMbps = float64(s.Bytes) * 8 / s.DurationS / 1e6
		}
	}
	return s
}

type cpuTimes struct{ user, sys float64 }

// runQueueTimes is what the scheduler counted of this process's threads so far: seconds they spent
// runnable but waiting for a CPU and the times they were put on a CPU (the second and third fields
// of /proc/self/task/*/schedstat); ok is false where the kernel does not say.
type runQueueTimes struct {
	waitS  float64
	slices int64
	ok     bool
}

func runQueue() runQueueTimes {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return runQueueTimes{}
	}
	var rq runQueueTimes
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		w, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil {
			ns += w
			rq.slices += n
			rq.ok = true
		}
	}
	rq.waitS = float64(ns) / 1e9
	return rq
}

// rusage returns the CPU time used so far by this process.
func rusage() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return cpuTimes{user: tv(ru.Utime), sys: tv(ru.Stime)}
}
