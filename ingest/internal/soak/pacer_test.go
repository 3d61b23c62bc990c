package main

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestPacer replays testdata/pacer.json: each step takes a slot at atMs
// (from the start) and expects the wait and the slots given up so far.
func TestPacer(t *testing.T) {
	var cases []struct {
		Name       string
		IntervalMs int64
		Burst      int
		Steps      []struct{ AtMs, WaitMs, Missed int64 }
	}
	readCases(t, "testdata/pacer.json", &cases)
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			p := NewPacer(start, time.Duration(c.IntervalMs)*time.Millisecond, c.Burst)
			for i, s := range c.Steps {
				wait := p.Take(start.Add(time.Duration(s.AtMs) * time.Millisecond))
				if want := time.Duration(s.WaitMs) * time.Millisecond; wait != want || p.Missed() != s.Missed {
					t.Errorf("step %d at %d ms: wait %v, missed %d; want %v, %d", i, s.AtMs, wait, p.Missed(), want, s.Missed)
				}
			}
		})
	}
}

// TestPacerRate: senders that are always on time take exactly the rate's
// slots, whatever the batch size.
func TestPacerRate(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		batch int
	}{{20000, 10}, {20000, 1}, {1000, 7}, {333, 10}} {
		start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		p := NewPacer(start, SlotInterval(c.rate, c.batch), 10)
		now, slots := start, 0
		for end := start.Add(10 * time.Second); ; slots++ {
			now = now.Add(p.Take(now))
			if !now.Before(end) {
				break
			}
		}
		want := c.rate * 10 / float64(c.batch)
		if got := float64(slots); got < want*0.999 || got > want*1.001+1 || p.Missed() != 0 {
			t.Errorf("%v events/s in batches of %d: %d slots in 10 s (missed %d), want %.0f", c.rate, c.batch, slots, p.Missed(), want)
		}
	}
}

func readCases(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
