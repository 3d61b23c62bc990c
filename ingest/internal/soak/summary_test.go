package main

import (
	"math"
	"testing"
	"time"
)

// TestSummarize replays testdata/summary.json (RSS in MiB, times in
// seconds, the slope in MiB per minute).
func TestSummarize(t *testing.T) {
	type sample struct {
		S                float64
		RSS, Peak        int64
		LagS             float64
		LagMsgs          int64
		Accepted, Missed int64
		Drain            bool
	}
	var cases []struct {
		Name    string
		WarmupS float64
		Samples []sample
		Want    struct {
			WarmAtS, EndAtS  float64
			WarmRSS, EndRSS  int64
			Slope            float64
			Peak             int64
			MaxLagS          float64
			MaxLagMsgs       int64
			Accepted, Missed int64
			Rate             float64
			Flat             bool
		}
	}
	readCases(t, "testdata/summary.json", &cases)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	for _, c := range cases {
		var in []Sample
		for _, s := range c.Samples {
			in = append(in, Sample{Elapsed: sec(s.S), RSS: s.RSS << 20, PeakRSS: s.Peak << 20, LagSeconds: s.LagS,
				LagMessages: s.LagMsgs, Accepted: s.Accepted, Missed: s.Missed, Drain: s.Drain})
		}
		got := Summarize(in, sec(c.WarmupS))
		w := c.Want
		if got.WarmAt != sec(w.WarmAtS) || got.WarmRSS != w.WarmRSS<<20 || got.EndAt != sec(w.EndAtS) || got.EndRSS != w.EndRSS<<20 {
			t.Errorf("%s: warm %v %d MiB, end %v %d MiB; want %vs %d, %vs %d", c.Name,
				got.WarmAt, got.WarmRSS>>20, got.EndAt, got.EndRSS>>20, w.WarmAtS, w.WarmRSS, w.EndAtS, w.EndRSS)
		}
		if s := got.Slope / (1 << 20); math.Abs(s-w.Slope) > 1e-9 {
			t.Errorf("%s: slope %v MiB/min, want %v", c.Name, s, w.Slope)
		}
		if got.PeakRSS != w.Peak<<20 || got.MaxLagSeconds != w.MaxLagS || got.MaxLagMessages != w.MaxLagMsgs {
			t.Errorf("%s: peak %d MiB, max lag %v s %d msgs; want %d, %v, %d", c.Name,
				got.PeakRSS>>20, got.MaxLagSeconds, got.MaxLagMessages, w.Peak, w.MaxLagS, w.MaxLagMsgs)
		}
		if got.Accepted != w.Accepted || got.Missed != w.Missed || math.Abs(got.Rate-w.Rate) > 1e-9 {
			t.Errorf("%s: accepted %d missed %d rate %v; want %d %d %v", c.Name, got.Accepted, got.Missed, got.Rate, w.Accepted, w.Missed, w.Rate)
		}
		if f := got.Flat(flatTolerance); f != w.Flat {
			t.Errorf("%s: flat %v, want %v", c.Name, f, w.Flat)
		}
	}
}
