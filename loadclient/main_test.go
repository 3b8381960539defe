package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"quicbench/loadclient/internal/testsrv"
)

const testHost = "www.quicbench.test"

// startServer starts loopback servers with a fresh CA and returns them and
// the CA file.
func startServer(t *testing.T, o testsrv.Options) (*testsrv.Server, string) {
	t.Helper()
	caPEM, cert, err := testsrv.NewCert(testHost, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := testsrv.Start(cert, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, caFile
}

func writeManifest(t *testing.T, entries []manifestEntry) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"files": entries})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// goodEntry is the correct manifest entry for path (with leading slash).
func goodEntry(path string) manifestEntry {
	b, _ := testsrv.Body(path)
	return manifestEntry{Path: strings.TrimPrefix(path, "/"), Size: int64(len(b)), SHA256: testsrv.SHA256(path)}
}

type runResult struct {
	code     int
	stdout   string
	stderr   string
	sum      summary
	requests []result
}

// qb runs qb-load in-process. The --requests file is added and parsed.
func qb(t *testing.T, args ...string) runResult {
	t.Helper()
	reqFile := filepath.Join(t.TempDir(), "requests.jsonl")
	args = append(args, "--requests", reqFile)
	var stdout, stderr bytes.Buffer
	r := runResult{code: run(args, &stdout, &stderr)}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	if r.code == 2 {
		return r
	}
	if strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("stdout must hold exactly one JSON line, got:\n%s", r.stdout)
	}
	if err := json.Unmarshal(stdout.Bytes(), &r.sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, r.stdout)
	}
	f, err := os.Open(reqFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var res result
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("bad requests line %q: %v", sc.Text(), err)
		}
		r.requests = append(r.requests, res)
	}
	return r
}

func TestDownloadEachProtocol(t *testing.T) {
	const n, p = 12, 4
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			srv, ca := startServer(t, testsrv.Options{})
			var entries []manifestEntry
			for i := 1; i <= n; i++ {
				entries = append(entries, goodEntry(fmt.Sprintf("/64KB/obj-%d.bin", i)))
			}
			dir := t.TempDir()
			keylog := filepath.Join(dir, "keys.log")
			qlogDir := filepath.Join(dir, "qlog")
			args := []string{
				"--proto", proto, "--base-url", "https://" + testHost, "--connect", srv.TCPAddr,
				"--ca", ca, "--path-template", "/64KB/obj-{i}.bin", "--count", fmt.Sprint(n),
				"-parallel", fmt.Sprint(p), "--manifest", writeManifest(t, entries),
				"--keylog", keylog, "--timeout", "20s",
			}
			if proto == "h3" {
				args = append(args, "--qlog-dir", qlogDir)
			}
			r := qb(t, args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s\nsummary: %s", r.code, r.stderr, r.stdout)
			}
			s := r.sum
			if s.ProtoRequested != proto || s.ConnectionPolicy != "shared" || s.ProtosNegotiated[proto] != n || len(s.ProtosNegotiated) != 1 ||
				s.Requests != n || s.OK != n || s.Failed != 0 || s.Bytes != n*64000 || len(s.Errors) != 0 {
				t.Errorf("unexpected summary: %s", r.stdout)
			}
			if s.StartNs == nil || s.EndNs == nil || *s.EndNs <= *s.StartNs || s.GoodputMbps <= 0 {
				t.Errorf("bad times in summary: %s", r.stdout)
			}
			if s.CPUWaitS == nil || *s.CPUWaitS < 0 || s.CPUSlices == nil || *s.CPUSlices <= 0 {
				t.Errorf("no run-queue wait or timeslices in summary: %s", r.stdout)
			}
			if s.Versions.QBLoad != version || !strings.HasPrefix(s.Versions.Go, "go") {
				t.Errorf("bad versions: %+v", s.Versions)
			}

			if len(r.requests) != n {
				t.Fatalf("got %d request lines, want %d", len(r.requests), n)
			}
			connFirst := map[int]int{} // conn_id -> requests with conn_reused=false
			for k, q := range r.requests {
				if q.I != k+1 || q.Path != fmt.Sprintf("/64KB/obj-%d.bin", k+1) {
					t.Errorf("line %d: i=%d path=%s", k, q.I, q.Path)
				}
				if q.Error != nil || q.Bytes != 64000 || q.Status == nil || *q.Status != 200 ||
					q.Proto == nil || *q.Proto != proto || q.SHA256OK == nil || !*q.SHA256OK ||
					q.ConnID == nil || q.ConnReused == nil {
					t.Fatalf("bad request line: %+v", q)
				}
				if q.StartNs == nil || q.FirstByteNs == nil || q.LastByteNs == nil ||
					*q.StartNs > *q.FirstByteNs || *q.FirstByteNs > *q.LastByteNs {
					t.Errorf("request %d: bad times start=%v first=%v last=%v", q.I, q.StartNs, q.FirstByteNs, q.LastByteNs)
				}
				if !*q.ConnReused {
					connFirst[*q.ConnID]++
					if q.ConnectStartNs == nil || q.ConnectDoneNs == nil || q.TLSDoneNs == nil ||
						*q.ConnectStartNs > *q.ConnectDoneNs || *q.ConnectDoneNs > *q.TLSDoneNs {
						t.Errorf("request %d: first on its connection but bad phases: %+v", q.I, q)
					}
					if proto == "h3" && *q.ConnectDoneNs != *q.TLSDoneNs {
						t.Errorf("h3: connect_done must equal tls_done")
					}
				} else if q.ConnectStartNs != nil {
					t.Errorf("request %d: reused connection but has connect phases", q.I)
				}
			}
			for id, c := range connFirst {
				if c != 1 {
					t.Errorf("conn %d has %d first requests", id, c)
				}
			}
			if len(connFirst) != s.Connections {
				t.Errorf("summary connections=%d but %d distinct conn ids", s.Connections, len(connFirst))
			}
			serverProto := map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2.0", "h3": "HTTP/3.0"}[proto]
			serverConns := srv.Stats.Conns(serverProto)
			if proto == "h1" {
				if s.Connections < 1 || s.Connections > p || serverConns > p {
					t.Errorf("h1 with P=%d used %d connections (server saw %d)", p, s.Connections, serverConns)
				}
			} else if s.Connections != 1 || serverConns != 1 {
				t.Errorf("%s must use exactly one connection, used %d (server saw %d)", proto, s.Connections, serverConns)
			}

			keys, err := os.ReadFile(keylog)
			if err != nil || !bytes.Contains(keys, []byte("CLIENT_TRAFFIC_SECRET_0 ")) {
				t.Errorf("key log missing or incomplete (err %v): %q", err, keys)
			}
			if proto == "h3" {
				files, _ := filepath.Glob(filepath.Join(qlogDir, "*_client.sqlog"))
				if len(files) != 1 {
					t.Fatalf("want one client qlog file, got %v", files)
				}
				data, _ := os.ReadFile(files[0])
				if len(data) == 0 || data[0] != 0x1e || !bytes.Contains(data, []byte("packet_received")) {
					t.Errorf("qlog file does not look like a complete JSON-SEQ trace (%d bytes)", len(data))
				}
			}
		})
	}
}

func TestManifestMismatch(t *testing.T) {
	srv, ca := startServer(t, testsrv.Options{NoH3: true})
	bad := goodEntry("/1KB/obj-1.bin")
	bad.SHA256 = strings.Repeat("0", 64)
	short := goodEntry("/1KB/obj-3.bin")
	short.Size = 999
	// obj-2 has no entry, obj-4 is correct.
	man := writeManifest(t, []manifestEntry{bad, short, goodEntry("/1KB/obj-4.bin")})
	r := qb(t, "--proto", "h2", "--base-url", "https://"+testHost, "--connect", srv.TCPAddr, "--ca", ca,
		"--path-template", "/1KB/obj-{i}.bin", "--count", "4", "--parallel", "2", "--manifest", man)
	if r.code != 1 || r.sum.OK != 1 || r.sum.Failed != 3 || len(r.sum.Errors) != 3 {
		t.Fatalf("exit %d, summary %s", r.code, r.stdout)
	}
	want := map[int]string{1: "sha256 mismatch", 2: "no entry", 3: "size mismatch"}
	for _, e := range r.sum.Errors {
		if !strings.Contains(e.Error, want[e.I]) {
			t.Errorf("request %d: error %q, want it to mention %q", e.I, e.Error, want[e.I])
		}
	}
	if q := r.requests[0]; q.SHA256OK == nil || *q.SHA256OK || q.Bytes != 1000 {
		t.Errorf("request 1: %+v", q)
	}
	if q := r.requests[3]; q.SHA256OK == nil || !*q.SHA256OK || q.Error != nil {
		t.Errorf("request 4: %+v", q)
	}
}

func TestForcedH2AgainstH1OnlyServer(t *testing.T) {
	srv, ca := startServer(t, testsrv.Options{H1Only: true, NoH3: true})
	r := qb(t, "--proto", "h2", "--base-url", "https://"+testHost, "--connect", srv.TCPAddr, "--ca", ca,
		"--path-template", "/1KB/x", "--count", "3", "--parallel", "3", "--timeout", "10s")
	if r.code != 1 || r.sum.OK != 0 || r.sum.Failed != 3 || r.sum.ProtosNegotiated["h2"] != 0 {
		t.Fatalf("exit %d, summary %s", r.code, r.stdout)
	}
	for _, e := range r.sum.Errors {
		if !strings.Contains(e.Error, "protocol mismatch") && !strings.Contains(e.Error, "no application protocol") {
			t.Errorf("request %d: error %q is not a clear ALPN/protocol error", e.I, e.Error)
		}
	}
	// A server that ignores ALPN (negotiates nothing, i.e. HTTP/1.1) must not
	// be spoken h2 to either.
	caPEM, cert, err := testsrv.NewCert(testHost)
	if err != nil {
		t.Fatal(err)
	}
	ca2 := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca2, caPEM, 0o644)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, testsrv.Handler(nil))
	r2 := qb(t, "--proto", "h2", "--base-url", "https://"+testHost, "--connect", ln.Addr().String(), "--ca", ca2,
		"--path-template", "/1KB/x", "--count", "2", "--parallel", "2", "--timeout", "10s")
	if r2.code != 1 || r2.sum.Failed != 2 || len(r2.sum.Errors) != 2 ||
		!strings.Contains(r2.sum.Errors[0].Error, "protocol mismatch: requested h2, got h1") {
		t.Fatalf("ALPN-less server: exit %d, summary %s", r2.code, r2.stdout)
	}

	// The h1-only server is fine for h1.
	r = qb(t, "--proto", "h1", "--base-url", "https://"+testHost, "--connect", srv.TCPAddr, "--ca", ca,
		"--path-template", "/1KB/x", "--count", "3", "--parallel", "3")
	if r.code != 0 || r.sum.ProtosNegotiated["h1"] != 3 {
		t.Fatalf("h1: exit %d, summary %s", r.code, r.stdout)
	}
}

func TestRequestErrors(t *testing.T) {
	srv, ca := startServer(t, testsrv.Options{})
	base := []string{"--base-url", "https://" + testHost, "--connect", srv.TCPAddr, "--ca", ca}

	// Non-200 status; the body is read all the same.
	r := qb(t, append(base, "--proto", "h1", "--path-template", "/missing/{i}", "--count", "2")...)
	if r.code != 1 || r.sum.Failed != 2 || r.requests[0].Status == nil || *r.requests[0].Status != 404 ||
		!strings.Contains(*r.requests[0].Error, "status 404") || r.requests[0].Bytes == 0 {
		t.Errorf("404: exit %d, summary %s, first request %+v", r.code, r.stdout, r.requests[0])
	}

	// Overall deadline: requests still running fail with "timeout".
	for _, proto := range []string{"h2", "h3"} {
		r = qb(t, append(base, "--proto", proto, "--path-template", "/slow/{i}", "--count", "3",
			"--parallel", "2", "--timeout", "300ms")...)
		if r.code != 1 || r.sum.Failed != 3 {
			t.Errorf("%s timeout: exit %d, summary %s", proto, r.code, r.stdout)
		}
		for _, q := range r.requests {
			if q.Error == nil || *q.Error != "timeout" {
				t.Errorf("%s timeout: request %d error %v", proto, q.I, q.Error)
			}
		}
	}

	// Without {i} the same path is fetched N times; the base URL's host is
	// resolved normally when --connect is absent.
	r = qb(t, "--proto", "h3", "--base-url", "https://"+srv.UDPAddr, "--ca", ca,
		"--path-template", "1KB/same.bin", "--count", "5", "--parallel", "2")
	if r.code != 0 || r.sum.OK != 5 || r.sum.Connections != 1 {
		t.Fatalf("same path: exit %d, summary %s, stderr %s", r.code, r.stdout, r.stderr)
	}
	for _, q := range r.requests {
		if q.Path != "/1KB/same.bin" {
			t.Errorf("request %d path %q", q.I, q.Path)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	badJSON := filepath.Join(dir, "m.json")
	os.WriteFile(badJSON, []byte("{"), 0o644)
	cases := []struct {
		args []string
		want string // must appear in the one-line message
	}{
		{[]string{"--count", "3"}, "--proto"},
		{[]string{"--proto", "h4"}, "h1, h2, h3"},
		{[]string{"--proto", "h1", "--count", "0"}, "--count"},
		{[]string{"--proto", "h1", "--count", "many"}, "-count"},
		{[]string{"--proto", "h1", "--parallel", "0"}, "--parallel"},
		{[]string{"--proto", "h1", "--timeout", "soon"}, "-timeout"},
		{[]string{"--proto", "h1", "--timeout", "-1s"}, "--timeout"},
		{[]string{"--proto", "h1", "--base-url", "http://x.test"}, "--base-url"},
		{[]string{"--proto", "h1", "--base-url", "https://x.test/path"}, "--base-url"},
		{[]string{"--proto", "h1", "--connect", "127.0.0.1"}, "--connect"},
		{[]string{"--proto", "h1", "--manifest", filepath.Join(dir, "missing.json")}, "--manifest"},
		{[]string{"--proto", "h1", "--manifest", badJSON}, "--manifest"},
		{[]string{"--proto", "h1", "--ca", filepath.Join(dir, "missing.pem")}, "--ca"},
		{[]string{"--proto", "h1", "--ca", notPEM}, "--ca"},
		{[]string{"--proto", "h1", "--bogus"}, "-bogus"},
		{[]string{"--proto", "h1", "extra"}, "extra"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || stdout.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want exit 2 and one line mentioning %q)",
				c.args, code, stdout.String(), msg, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var v map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v["qb_load"] != "0.1.0" || !strings.HasPrefix(v["go"], "go1.") || v["quic_go"] == "" || len(v) != 3 {
		t.Errorf("bad version output %q", stdout.String())
	}
}
