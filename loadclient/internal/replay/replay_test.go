package replay

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func archive() *Archive {
	return New([]*Entry{
		{Entry: 0, Method: "GET", Host: "www.a.test", Port: 443, Path: "/", Status: 200, Data: []byte("page")},
		{Entry: 1, Method: "GET", Host: "cdn.b.test", Port: 443, Path: "/app.js", Query: "v=1&t=100", Status: 200, Data: []byte("one")},
		{Entry: 2, Method: "GET", Host: "cdn.b.test", Port: 443, Path: "/app.js", Query: "v=2&t=100", Status: 200, Data: []byte("two")},
		{Entry: 3, Method: "POST", Host: "www.a.test", Port: 443, Path: "/api", Status: 201, Data: []byte("made")},
		{Entry: 4, Method: "GET", Host: "www.a.test", Port: 443, Path: "/gone", Status: 404, Data: []byte("gone"),
			Headers: [][2]string{{"Content-Type", "text/plain"}}},
	})
}

func TestMatchExact(t *testing.T) {
	a := archive()
	e, exact := a.Match("get", "WWW.A.TEST", 443, "/", "")
	if e == nil || !exact || e.Entry != 0 {
		t.Fatalf("exact: %+v %v", e, exact)
	}
	if e, _ := a.Match("GET", "cdn.b.test", 443, "/app.js", "v=2&t=100"); e == nil || e.Entry != 2 {
		t.Fatalf("exact query: %+v", e)
	}
}

func TestMatchCacheBusting(t *testing.T) {
	a := archive()
	// t changed (cache-busting), v decides: v=2 is the closest query
	e, exact := a.Match("GET", "cdn.b.test", 443, "/app.js", "v=2&t=999")
	if e == nil || exact || e.Entry != 2 {
		t.Fatalf("fuzzy: %+v %v", e, exact)
	}
	// no parameter equal: the first recorded of the path
	if e, _ := a.Match("GET", "cdn.b.test", 443, "/app.js", "x=1"); e == nil || e.Entry != 1 {
		t.Fatalf("fallback: %+v", e)
	}
}

func TestMatchMisses(t *testing.T) {
	a := archive()
	for _, c := range []struct {
		method, host string
		port         int
		path         string
	}{
		{"GET", "www.a.test", 443, "/other"},
		{"GET", "www.a.test", 8443, "/"},
		{"GET", "www.c.test", 443, "/"},
		{"POST", "www.a.test", 443, "/"},
		{"GET", "www.a.test", 443, "/api"},
	} {
		if e, _ := a.Match(c.method, c.host, c.port, c.path, ""); e != nil {
			t.Errorf("%v: matched entry %d, want a miss", c, e.Entry)
		}
	}
}

func TestHandler(t *testing.T) {
	var log bytes.Buffer
	h := Handler(archive(), 443, "", true, &log)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "https://www.a.test/gone", nil))
	if rec.Code != 404 || rec.Body.String() != "gone" || rec.Header().Get("X-Qb-Replay") != "hit" ||
		rec.Header().Get("Content-Type") != "text/plain" || rec.Header().Get("Content-Length") != "4" {
		t.Fatalf("recorded 404: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	if !strings.HasPrefix(rec.Header().Get("Alt-Svc"), `h3=":443"`) {
		t.Fatalf("Alt-Svc over TCP: %q", rec.Header().Get("Alt-Svc"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "https://www.a.test/nope?x=1", nil))
	if rec.Code != 404 || rec.Header().Get("X-Qb-Replay") != "miss" {
		t.Fatalf("miss: %d %v", rec.Code, rec.Header())
	}
	if got, _ := io.ReadAll(&log); !strings.Contains(string(got), "miss GET https://www.a.test:443/nope?x=1") {
		t.Fatalf("miss log: %q", got)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "https://unknown.test/", nil))
	if rec.Code != 404 || rec.Header().Get("X-Qb-Replay") != "" {
		t.Fatalf("other host without root: %d %v", rec.Code, rec.Header())
	}
}
