package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"quicbench/loadclient/internal/testsrv"
)

// serverNetwork is the testsrv.Stats.Accepted key for proto.
func serverNetwork(proto string) string {
	if proto == "h3" {
		return "quic"
	}
	return "tcp"
}

// maxOverlap is the largest number of requests whose [connect_start_ns,
// last_byte_ns] intervals overlap. Under per-object that interval is the
// connection's life up to its last byte, so this is the number of
// connections in use at once.
func maxOverlap(t *testing.T, reqs []result) int {
	t.Helper()
	type event struct {
		at    int64
		delta int
	}
	var ev []event
	for _, q := range reqs {
		if q.ConnectStartNs == nil || q.LastByteNs == nil {
			t.Fatalf("request %d has no connect start or last byte", q.I)
		}
		ev = append(ev, event{*q.ConnectStartNs, 1}, event{*q.LastByteNs, -1})
	}
	sort.Slice(ev, func(a, b int) bool {
		if ev[a].at != ev[b].at {
			return ev[a].at < ev[b].at
		}
		return ev[a].delta < ev[b].delta // an end before a start at the same instant
	})
	cur, peak := 0, 0
	for _, e := range ev {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

func TestConnectionsPerObject(t *testing.T) {
	const n, p = 8, 3
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			srv, ca := startServer(t, testsrv.Options{Delay: 10 * time.Millisecond}) // requests overlap
			qlogDir := filepath.Join(t.TempDir(), "qlog")
			args := []string{"--proto", proto, "--base-url", "https://" + testHost, "--connect", srv.TCPAddr,
				"--ca", ca, "--path-template", "/64KB/obj-{i}.bin", "--count", fmt.Sprint(n),
				"--parallel", fmt.Sprint(p), "--connections", "per-object", "--timeout", "20s"}
			if proto == "h3" {
				args = append(args, "--qlog-dir", qlogDir)
			}
			r := qb(t, args...)
			if r.code != 0 || r.sum.OK != n || r.sum.ConnectionPolicy != "per-object" {
				t.Fatalf("exit %d, stderr %s\nsummary %s", r.code, r.stderr, r.stdout)
			}
			if r.sum.Connections != n {
				t.Errorf("summary connections=%d, want %d", r.sum.Connections, n)
			}
			if got := srv.Stats.Accepted(serverNetwork(proto)); got != n {
				t.Errorf("server accepted %d connections, want %d", got, n)
			}
			ids := map[int]bool{}
			for _, q := range r.requests {
				if q.ConnID == nil || q.ConnReused == nil || *q.ConnReused || ids[*q.ConnID] {
					t.Fatalf("request %d: conn_id %v conn_reused %v (want a new, distinct connection)", q.I, q.ConnID, q.ConnReused)
				}
				ids[*q.ConnID] = true
				if q.ConnectStartNs == nil || q.ConnectDoneNs == nil || q.TLSDoneNs == nil {
					t.Errorf("request %d: missing handshake phases: %+v", q.I, q)
				}
			}
			if peak := maxOverlap(t, r.requests); peak < 2 || peak > p {
				t.Errorf("%d connections in use at once, want 2..P=%d", peak, p)
			}
			if proto == "h3" {
				files, _ := filepath.Glob(filepath.Join(qlogDir, "*_client.sqlog"))
				if len(files) != n {
					t.Errorf("want %d client qlog files (one per QUIC connection), got %d", n, len(files))
				}
			}
		})
	}
}

func TestConnectionsShared(t *testing.T) {
	for _, proto := range []string{"h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			srv, ca := startServer(t, testsrv.Options{})
			r := qb(t, "--proto", proto, "--base-url", "https://"+testHost, "--connect", srv.TCPAddr,
				"--ca", ca, "--path-template", "/64KB/obj-{i}.bin", "--count", "8", "--parallel", "4",
				"--connections", "shared")
			if r.code != 0 || r.sum.OK != 8 || r.sum.ConnectionPolicy != "shared" {
				t.Fatalf("exit %d, stderr %s\nsummary %s", r.code, r.stderr, r.stdout)
			}
			if got := srv.Stats.Accepted(serverNetwork(proto)); r.sum.Connections != 1 || got != 1 {
				t.Errorf("shared %s: connections=%d, server accepted %d, want 1 and 1", proto, r.sum.Connections, got)
			}
		})
	}
}

func TestConnectionsPool(t *testing.T) {
	const n, p, pool = 24, 8, 3
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			// The delay keeps P requests in flight at once; without it one h1
			// connection can serve every request before a second handshake ends.
			srv, ca := startServer(t, testsrv.Options{Delay: 20 * time.Millisecond})
			r := qb(t, "--proto", proto, "--base-url", "https://"+testHost, "--connect", srv.TCPAddr,
				"--ca", ca, "--path-template", "/64KB/obj-{i}.bin", "--count", fmt.Sprint(n),
				"--parallel", fmt.Sprint(p), "--connections", fmt.Sprintf("pool:%d", pool), "--timeout", "20s")
			if r.code != 0 || r.sum.OK != n || r.sum.ConnectionPolicy != fmt.Sprintf("pool:%d", pool) {
				t.Fatalf("exit %d, stderr %s\nsummary %s", r.code, r.stderr, r.stdout)
			}
			accepted := srv.Stats.Accepted(serverNetwork(proto))
			if r.sum.Connections < 2 || r.sum.Connections > pool || accepted > pool {
				t.Errorf("pool:%d with P=%d: connections=%d, server accepted %d (want 2..%d)",
					pool, p, r.sum.Connections, accepted, pool)
			}
			perConn := map[int]int{}
			for _, q := range r.requests {
				if q.ConnID == nil {
					t.Fatalf("request %d has no conn_id", q.I)
				}
				perConn[*q.ConnID]++
			}
			if len(perConn) != r.sum.Connections {
				t.Errorf("%d distinct conn_ids, summary connections=%d", len(perConn), r.sum.Connections)
			}
		})
	}
}

// A per-object run whose requests end up on one connection must fail them:
// the policy is enforced, not just assumed.
func TestPerObjectReuseIsAnError(t *testing.T) {
	srv, ca := startServer(t, testsrv.Options{NoH3: true})
	cfg, err := parseArgs([]string{"--proto", "h2", "--base-url", "https://" + testHost, "--connect", srv.TCPAddr,
		"--ca", ca, "--path-template", "/1KB/obj-{i}.bin", "--count", "3", "--connections", "per-object"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := loadCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := newClient(cfg, roots, nil, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := cl.newSlot()
	if err != nil {
		t.Fatal(err)
	}
	defer shared.close()
	// Hand every request the same transport, i.e. the same connection.
	cl.newSlot = func() (*slot, error) { return &slot{rt: shared.rt, close: func() {}}, nil }
	results := fetchAll(context.Background(), cfg, cl, nil)
	cl.close()
	if results[0].Error != nil {
		t.Errorf("request 1 (first on its connection) failed: %s", *results[0].Error)
	}
	for _, q := range results[1:] {
		if q.Error == nil || !strings.Contains(*q.Error, "connection reused under per-object policy") {
			t.Errorf("request %d: error %v, want a per-object reuse error", q.I, q.Error)
		}
	}
	if s := summarize(cfg, results, cl.tracker.count()); s.Failed != 2 || s.Connections != 1 {
		t.Errorf("summary: failed=%d connections=%d, want 2 and 1", s.Failed, s.Connections)
	}
}

func TestConnectionsUsageErrors(t *testing.T) {
	for _, v := range []string{"pool:0", "pool:x", "pool:", "pool:-1", "pool:+2", "pool: 2", "pool", "per-request", "Shared", ""} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"--proto", "h2", "--connections", v}, &stdout, &stderr)
		want := fmt.Sprintf("qb-load: invalid --connections %q (accepted values: shared, per-object, pool:N with N >= 1)\n", v)
		if code != 2 || stdout.Len() != 0 || stderr.String() != want {
			t.Errorf("--connections %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", v, code, stdout.String(), stderr.String(), want)
		}
	}
	for _, v := range []string{"shared", "per-object", "pool:1", "pool:6"} {
		if _, err := parseArgs([]string{"--proto", "h1", "--connections", v}, io.Discard); err != nil {
			t.Errorf("--connections %q rejected: %v", v, err)
		}
	}
}
