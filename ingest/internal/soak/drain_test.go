package main

import "testing"

// TestDrain replays testdata/drain.json: scrapes as [partitions held, lag
// in messages], and whether the processor counts as caught up after each.
func TestDrain(t *testing.T) {
	var cases []struct {
		Name    string
		Scrapes [][2]int64
		Want    []bool
	}
	readCases(t, "testdata/drain.json", &cases)
	for _, c := range cases {
		var d drainState
		for i, s := range c.Scrapes {
			if got := d.observe(Scrape{Partitions: s[0], LagMessages: s[1]}); got != c.Want[i] {
				t.Errorf("%s: scrape %d %v: caught up %v, want %v", c.Name, i, s, got, c.Want[i])
			}
		}
	}
}
