package main

import "testing"

// TestDrain replays testdata/drain.json: scrapes as [partitions held, lag
// in batches, lag in seconds, events committed], and whether the
// processor counts as caught up after each.
func TestDrain(t *testing.T) {
	var cases []struct {
		Name     string
		Accepted int64
		Scrapes  [][4]float64
		Want     []bool
	}
	readCases(t, "testdata/drain.json", &cases)
	for _, c := range cases {
		var d drainState
		for i, s := range c.Scrapes {
			m := Scrape{Partitions: int64(s[0]), LagMessages: int64(s[1]), LagSeconds: s[2], Committed: int64(s[3])}
			if got := d.observe(m, c.Accepted); got != c.Want[i] {
				t.Errorf("%s: scrape %d %v: caught up %v, want %v", c.Name, i, s, got, c.Want[i])
			}
		}
	}
}
