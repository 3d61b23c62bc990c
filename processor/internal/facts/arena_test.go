package facts

import (
	"strconv"
	"strings"
	"testing"
)

// TestArena stores the cases of testdata/arena.tsv many times over (so
// that strings fill several chunks and land on chunk boundaries) and
// reads every one back; shared repeats must give the same ref.
func TestArena(t *testing.T) {
	type put struct {
		s     string
		share bool
		ref   sref
	}
	var cases []put
	for _, c := range readTSV(t, "testdata/arena.tsv") {
		n, err := strconv.Atoi(c[1])
		if err != nil || len(c[2]) != 1 {
			t.Fatalf("bad case %q", c)
		}
		cases = append(cases, put{s: strings.Repeat(c[2], n), share: c[0] == "1"})
	}
	var a arena
	var puts []put
	for round := range 40 {
		for _, c := range cases {
			// Vary the strings between rounds so that unshared ones differ
			// and shared ones repeat.
			if !c.share && c.s != "" {
				c.s = strconv.Itoa(round) + c.s[len(strconv.Itoa(round)):]
			}
			c.ref = a.put(c.s, c.share)
			puts = append(puts, c)
		}
	}
	if len(a.chunks) < 3 {
		t.Fatalf("the cases filled %d chunks; want several", len(a.chunks))
	}
	shared := map[string]sref{}
	for i, p := range puts {
		if got := a.get(p.ref); got != p.s {
			t.Fatalf("put %d (len %d): got back %d bytes %.20q", i, len(p.s), len(got), got)
		}
		if p.s == "" && p.ref != 0 {
			t.Errorf("put %d: empty string has ref %d, want 0", i, p.ref)
		}
		if !p.share {
			continue
		}
		if r, ok := shared[p.s]; ok && r != p.ref {
			t.Errorf("put %d (len %d): shared repeat has ref %d, first %d", i, len(p.s), p.ref, r)
		}
		shared[p.s] = p.ref
	}
}
