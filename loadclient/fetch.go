package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// result is one line of the --requests file. Absent times are null.
type result struct {
	I              int     `json:"i"`
	Path           string  `json:"path"`
	StartNs        *int64  `json:"start_ns"`
	ConnectStartNs *int64  `json:"connect_start_ns"`
	ConnectDoneNs  *int64  `json:"connect_done_ns"`
	TLSDoneNs      *int64  `json:"tls_done_ns"`
	FirstByteNs    *int64  `json:"first_byte_ns"`
	LastByteNs     *int64  `json:"last_byte_ns"`
	Bytes          int64   `json:"bytes"`
	Status         *int    `json:"status"`
	Proto          *string `json:"proto"`
	ConnID         *int    `json:"conn_id"`
	ConnReused     *bool   `json:"conn_reused"`
	SHA256OK       *bool   `json:"sha256_ok"`
	Error          *string `json:"error"`
	// the longest time the body stood still between two deliveries after the first byte, and
	// every such stall of at least 1 ms as [start, end] (at most maxGaps): streams of one
	// connection that all stand still together show head-of-line blocking (one lost TCP
	// segment holds every h2 stream); streams that stall alone do not
	// the first request of a connection: did its TLS session resume a ticket, and (h3) was
	// 0-RTT data accepted by the server
	Resumed       *bool      `json:"resumed"`
	EarlyData     *bool      `json:"early_data"`
	StallNs       *int64     `json:"stall_ns"`
	Gaps          [][2]int64 `json:"gaps_ns,omitempty"`
	GapsTruncated bool       `json:"gaps_truncated,omitempty"`

	endNs int64 // last byte, or when the request failed
}

func ptr[T any](v T) *T { return &v }

// manifest maps a relative path (no leading slash) to its expected content.
type manifest map[string]manifestEntry

type manifestEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func loadManifest(file string) (manifest, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Files []manifestEntry `json:"files"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	m := manifest{}
	for _, e := range doc.Files {
		m[strings.TrimPrefix(e.Path, "/")] = e
	}
	return m, nil
}

// fetchAll runs cfg.count requests, issued in order 1..N, with at most
// cfg.parallel in flight. results[k] is request k+1.
func fetchAll(ctx context.Context, cfg *config, cl *client, man manifest) []*result {
	results := make([]*result, cfg.count)
	next := make(chan int)
	go func() {
		defer close(next)
		for i := 1; i <= cfg.count; i++ {
			next <- i
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < min(cfg.parallel, cfg.count); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for i := range next {
				results[i-1] = fetchOne(ctx, cfg, cl, man, i, buf)
			}
		}()
	}
	wg.Wait()
	return results
}

// errString maps an error to the result's error text; anything that fails
// after the overall deadline is reported as "timeout".
func errString(ctx context.Context, prefix string, err error) *string {
	if ctx.Err() != nil {
		return ptr("timeout")
	}
	return ptr(prefix + err.Error())
}

func fetchOne(ctx context.Context, cfg *config, cl *client, man manifest, i int, buf []byte) *result {
	r := &result{I: i, Path: cfg.requestPath(i)}
	if ctx.Err() != nil { // deadline passed before the request could start
		r.Error, r.endNs = ptr("timeout"), nowNs()
		return r
	}

	s, release, err := cl.acquire()
	if err != nil {
		r.Error, r.endNs = ptr(err.Error()), nowNs()
		return r
	}
	// Deferred first so that it runs after the body is closed: per-object
	// then closes the request's connection before the worker takes the next.
	defer release()

	// Trace hooks may run on transport goroutines: they only touch these.
	var mu sync.Mutex
	var conn *connInfo
	var connFirst bool
	var firstByte atomic.Int64
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			var key any = info.Conn
			if cl.proto == "h3" { // http3 hands out a fresh wrapper each time
				key = s
			}
			if ci, first, ok := cl.tracker.claim(key); ok {
				mu.Lock()
				conn, connFirst = &ci, first
				mu.Unlock()
			}
		},
		GotFirstResponseByte: func() { firstByte.CompareAndSwap(0, nowNs()) },
	}
	u := *cfg.baseURL
	u.Path = r.Path
	method := http.MethodGet
	if cfg.zeroRTT() && cl.proto == "h3" {
		method = http3.MethodGet0RTT // sent in 0-RTT when the connection is still in its handshake
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, u.String(), nil)
	if err != nil {
		r.Error, r.endNs = ptr(err.Error()), nowNs()
		return r
	}
	req.Header.Set("User-Agent", userAgent)

	r.StartNs = ptr(nowNs())
	resp, err := s.rt.RoundTrip(req)
	headersNs := nowNs()
	mu.Lock()
	if conn != nil {
		r.ConnID, r.ConnReused = ptr(conn.id), ptr(!connFirst)
		if connFirst {
			r.ConnectStartNs, r.ConnectDoneNs, r.TLSDoneNs = ptr(conn.connectStart), ptr(conn.connectDone), ptr(conn.tlsDone)
		}
	}
	mu.Unlock()
	if err != nil {
		r.Error, r.endNs = errString(ctx, "", err), headersNs
		return r
	}
	defer resp.Body.Close()

	got := "h" + fmt.Sprint(resp.ProtoMajor)
	if resp.ProtoMajor == 1 {
		got = "h1"
	}
	r.Proto, r.Status = ptr(got), ptr(resp.StatusCode)
	// h1/h2: httptrace fires on the first byte of the response head.
	// h3: quic-go only fires it on the first body read, so use the moment
	// the response headers were decoded (RoundTrip returned).
	fb := firstByte.Load()
	if cl.proto == "h3" || fb == 0 {
		fb = headersNs
	}
	r.FirstByteNs = ptr(fb)

	// Always read the whole body.
	var h hash.Hash
	var w io.Writer = io.Discard
	if man != nil {
		h = sha256.New()
		w = h
	}
	// The wrappers hide ReaderFrom/WriterTo so that buf (64 KiB) is used.
	body := &stallReader{r: resp.Body, last: fb}
	n, readErr := io.CopyBuffer(struct{ io.Writer }{w}, body, buf)
	r.endNs = nowNs()
	r.Bytes = n
	if conn != nil && connFirst && conn.session != nil && cfg.resumption != "none" {
		resumed, early := conn.session(ctx)
		r.Resumed, r.EarlyData = ptr(resumed), early
	}
	if readErr == nil {
		r.LastByteNs = ptr(r.endNs)
		r.StallNs, r.Gaps, r.GapsTruncated = ptr(body.stall), body.gaps, body.truncated
	}

	var entry manifestEntry
	var inManifest bool
	if man != nil {
		entry, inManifest = man[strings.TrimPrefix(r.Path, "/")]
		r.SHA256OK = ptr(inManifest && hex.EncodeToString(h.Sum(nil)) == strings.ToLower(entry.SHA256))
	}

	switch {
	case cl.policy.kind == policyPerObject && r.ConnReused != nil && *r.ConnReused:
		r.Error = ptr("connection reused under per-object policy")
	case got != cfg.proto:
		r.Error = ptr(fmt.Sprintf("protocol mismatch: requested %s, got %s", cfg.proto, got))
	case readErr != nil:
		r.Error = errString(ctx, "reading body: ", readErr)
	case resp.StatusCode != http.StatusOK:
		r.Error = ptr(fmt.Sprintf("status %d", resp.StatusCode))
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		r.Error = ptr(fmt.Sprintf("short body: got %d of %d bytes", n, resp.ContentLength))
	case man != nil && !inManifest:
		r.Error = ptr(fmt.Sprintf("manifest: no entry for %q", strings.TrimPrefix(r.Path, "/")))
	case man != nil && n != entry.Size:
		r.Error = ptr(fmt.Sprintf("manifest: size mismatch: got %d bytes, want %d", n, entry.Size))
	case man != nil && !*r.SHA256OK:
		r.Error = ptr("manifest: sha256 mismatch")
	}
	return r
}

func writeRequests(f *os.File, results []*result) error {
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}

const (
	minGapNs = int64(time.Millisecond) // shorter gaps are the reader's own scheduling
	maxGaps  = 4096                    // per request: 64 KiB of JSON at most
)

// stallReader notes the gaps between reads that returned data (from the first byte on): the
// longest, and every one of at least minGapNs.
type stallReader struct {
	r         io.Reader
	last      int64
	stall     int64
	gaps      [][2]int64
	truncated bool
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		now := nowNs()
		gap := now - s.last
		s.stall = max(s.stall, gap)
		if gap >= minGapNs {
			if len(s.gaps) < maxGaps {
				s.gaps = append(s.gaps, [2]int64{s.last, now})
			} else {
				s.truncated = true
			}
		}
		s.last = now
	}
	return n, err
}
