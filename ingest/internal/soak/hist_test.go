package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestQuantile replays testdata/quantiles.json: the histogram's quantile
// is within its precision (half a percent) of the exact nearest-rank one.
func TestQuantile(t *testing.T) {
	var cases []struct {
		Name   string
		Us     []int64
		Q      float64
		WantUs int64
	}
	readCases(t, "testdata/quantiles.json", &cases)
	for _, c := range cases {
		var h Hist
		for _, us := range c.Us {
			h.Add(time.Duration(us) * time.Microsecond)
		}
		got, want := h.Quantile(c.Q), time.Duration(c.WantUs)*time.Microsecond
		if !near(got, want) {
			t.Errorf("%s: q%v = %v, want %v", c.Name, c.Q, got, want)
		}
	}
}

// TestQuantileRandom compares the histogram with exact quantiles of
// random latencies (log-normal, as request times are), also after a
// merge.
func TestQuantileRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b Hist
	var all []time.Duration
	for i := range 100000 {
		d := time.Duration(float64(2*time.Millisecond) * (0.2 + rng.ExpFloat64()*rng.ExpFloat64()*3))
		all = append(all, d)
		if i%3 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
	}
	a.Merge(&b)
	slices.Sort(all)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		want := all[int(q*float64(len(all))+0.999999)-1]
		if got := a.Quantile(q); !near(got, want) {
			t.Errorf("q%v = %v, exact %v", q, got, want)
		}
	}
	if a.Count() != int64(len(all)) || a.Max() != all[len(all)-1] {
		t.Errorf("count %d max %v, want %d %v", a.Count(), a.Max(), len(all), all[len(all)-1])
	}
}

// near: within the histogram's precision (a bucket is 1% wide, its
// middle half a percent from either end).
func near(got, want time.Duration) bool {
	if want == 0 {
		return got == 0
	}
	r := float64(got) / float64(want)
	return r >= 0.995 && r <= 1.005
}
