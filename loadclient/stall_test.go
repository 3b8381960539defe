package main

import (
	"io"
	"testing"
	"time"
)

// pausingReader returns one byte per read, sleeping before the reads listed in pauses.
type pausingReader struct {
	reads  int
	total  int
	pauses map[int]time.Duration
}

func (p *pausingReader) Read(b []byte) (int, error) {
	if p.reads == p.total {
		return 0, io.EOF
	}
	time.Sleep(p.pauses[p.reads])
	p.reads++
	b[0] = 'x'
	return 1, nil
}

func TestStallReaderKeepsTheLongestGap(t *testing.T) {
	src := &pausingReader{total: 5, pauses: map[int]time.Duration{1: 20 * time.Millisecond, 3: 60 * time.Millisecond}}
	s := &stallReader{r: src, last: nowNs()}
	n, err := io.Copy(io.Discard, s)
	end := nowNs()
	if err != nil || n != 5 {
		t.Fatalf("copied %d, %v", n, err)
	}
	if s.stall < int64(60*time.Millisecond) || s.stall > int64(200*time.Millisecond) {
		t.Fatalf("longest stall %v, want the 60 ms pause", time.Duration(s.stall))
	}
	if len(s.gaps) != 2 || s.gaps[0][1]-s.gaps[0][0] < int64(20*time.Millisecond) ||
		s.gaps[1][1]-s.gaps[1][0] != s.stall || s.gaps[1][1] > end || s.gaps[0][1] > s.gaps[1][0] {
		t.Fatalf("gaps %v, want the 20 ms and the 60 ms pauses in order", s.gaps)
	}
}
