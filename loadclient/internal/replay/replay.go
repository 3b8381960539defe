// Package replay serves recorded page archives (quicbench's content/har.py lays them out as
// replay/<key>/index.json plus one file per body) over HTTP/1.1, HTTP/2 and HTTP/3: every
// origin under its own name, with the recorded status, headers and body.
//
// Requests are matched as web-page-replay matches them: by method, host, port, path and query;
// when no entry has the same query, the entry of the same method, host, port and path whose
// query is closest (most parameters equal, then most names equal) is served, so that a
// cache-busting query value (?t=<now>) still finds its response. A request that matches
// nothing gets 404 with X-Qb-Replay: miss; a served entry carries X-Qb-Replay: hit.
package replay

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Entry is one recorded response, as index.json lists it.
type Entry struct {
	Entry   int         `json:"entry"`
	Method  string      `json:"method"`
	Host    string      `json:"host"`
	Port    int         `json:"port"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers"`
	Body    string      `json:"body"`
	Size    int         `json:"size"`

	Source string `json:"-"` // the index it came from
	Data   []byte `json:"-"`
}

type index struct {
	Format   string   `json:"format"`
	Page     string   `json:"page"`
	Recorded int      `json:"recorded"`
	Entries  []*Entry `json:"entries"`
}

// Archive is every entry of the indexes served together.
type Archive struct {
	exact  map[string]*Entry
	byPath map[string][]*Entry
	hosts  map[string]bool
	Ports  map[int]bool
	Count  int
}

func exactKey(method, host string, port int, path, query string) string {
	return fmt.Sprintf("%s %s:%d %s?%s", method, host, port, path, query)
}

func pathKey(method, host string, port int, path string) string {
	return fmt.Sprintf("%s %s:%d %s", method, host, port, path)
}

// New builds an archive from entries (their bodies already in Data).
func New(entries []*Entry) *Archive {
	a := &Archive{exact: map[string]*Entry{}, byPath: map[string][]*Entry{}, hosts: map[string]bool{},
		Ports: map[int]bool{}}
	for _, e := range entries {
		e.Method = strings.ToUpper(e.Method)
		e.Host = strings.ToLower(e.Host)
		k := exactKey(e.Method, e.Host, e.Port, e.Path, e.Query)
		if _, dup := a.exact[k]; dup {
			continue
		}
		a.exact[k] = e
		pk := pathKey(e.Method, e.Host, e.Port, e.Path)
		a.byPath[pk] = append(a.byPath[pk], e)
		a.hosts[e.Host] = true
		a.Ports[e.Port] = true
		a.Count++
	}
	for _, list := range a.byPath {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Entry < list[j].Entry })
	}
	return a
}

// Load reads every root/replay/*/index.json and the bodies it names.
func Load(root string) (*Archive, error) {
	files, err := filepath.Glob(filepath.Join(root, "replay", "*", "index.json"))
	if err != nil {
		return nil, err
	}
	var all []*Entry
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var idx index
		if err := json.Unmarshal(raw, &idx); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if idx.Format != "quicbench-replay/1" {
			return nil, fmt.Errorf("%s: format %q, want quicbench-replay/1", f, idx.Format)
		}
		dir := filepath.Dir(f)
		for _, e := range idx.Entries {
			if strings.Contains(e.Body, "..") || filepath.IsAbs(e.Body) {
				return nil, fmt.Errorf("%s: entry %d: body path %q outside the archive", f, e.Entry, e.Body)
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Body))
			if err != nil {
				return nil, fmt.Errorf("%s: entry %d: %w", f, e.Entry, err)
			}
			if len(data) != e.Size {
				return nil, fmt.Errorf("%s: entry %d: body of %d bytes, index says %d", f, e.Entry, len(data), e.Size)
			}
			e.Data, e.Source = data, f
			all = append(all, e)
		}
	}
	return New(all), nil
}

// HasHost says whether the archive records any request to host.
func (a *Archive) HasHost(host string) bool { return a.hosts[strings.ToLower(host)] }

// Match finds the entry that answers a request: the exact one, else the closest query of the
// same method, host, port and path; nil when none. exact says which.
func (a *Archive) Match(method, host string, port int, path, query string) (e *Entry, exact bool) {
	method, host = strings.ToUpper(method), strings.ToLower(host)
	if e := a.exact[exactKey(method, host, port, path, query)]; e != nil {
		return e, true
	}
	cands := a.byPath[pathKey(method, host, port, path)]
	if len(cands) == 0 {
		return nil, false
	}
	want, _ := url.ParseQuery(query)
	best, bestScore := cands[0], -1
	for _, c := range cands {
		if s := queryScore(want, c.Query); s > bestScore {
			best, bestScore = c, s
		}
	}
	return best, false
}

// queryScore: 2 per parameter of the request equal in the candidate, 1 per name present with
// another value, minus 1 per name of the candidate the request lacks.
func queryScore(want url.Values, candidate string) int {
	have, _ := url.ParseQuery(candidate)
	score := 0
	for k, vs := range want {
		hv, ok := have[k]
		switch {
		case !ok:
		case strings.Join(hv, "\x00") == strings.Join(vs, "\x00"):
			score += 2
		default:
			score++
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			score--
		}
	}
	return score
}
