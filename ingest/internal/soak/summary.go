package main

import (
	"time"
)

// Sample is one line of the soak's table: the state at Elapsed since the
// load started. Counters are cumulative; P50, P99 and Rate are over the
// interval since the sample before.
type Sample struct {
	Elapsed time.Duration
	// Drain is true for samples taken after the load stopped.
	Drain bool
	// Accepted events (202 receipts) since the start, and events per
	// second over the interval.
	Accepted int64
	Rate     float64
	// Missed events: slots the pacer gave up since the start (the rate
	// could not be kept).
	Missed int64
	// Errors: requests answered otherwise than 202, or not answered.
	Errors int64
	// RSS of mf now and its peak so far (polled four times a second), in
	// bytes.
	RSS, PeakRSS int64
	// P50 and P99 of the ingest requests answered in the interval.
	P50, P99 time.Duration
	// From mf's /metrics (Scraped false when the scrape failed): the
	// processor's lag in batches and in seconds, the events it has
	// committed, the Go heap in use (bytes) and the partitions of the log
	// the processor holds (the lag counts those only).
	Scraped     bool
	LagMessages int64
	LagSeconds  float64
	Committed   int64
	Heap        int64
	Partitions  int64
}

// Summary is what a soak run comes to.
type Summary struct {
	// Warmup is where the warm-up ends; WarmRSS the RSS of the first load
	// sample at or after it, EndRSS the RSS of the last load sample.
	Warmup          time.Duration
	WarmAt, EndAt   time.Duration
	WarmRSS, EndRSS int64
	// Slope is the RSS growth after the warm-up in bytes per minute: the
	// least-squares line through the load samples from WarmAt on (0 with
	// fewer than two).
	Slope float64
	// PeakRSS over the load and the drain.
	PeakRSS int64
	// MaxLagSeconds and MaxLagMessages over the load samples.
	MaxLagSeconds  float64
	MaxLagMessages int64
	// Accepted and Missed at the end of the load, and the mean rate.
	Accepted, Missed int64
	Rate             float64
	Errors           int64
}

// Summarize computes the summary of samples (in time order) with the
// warm-up ending at warmup.
func Summarize(samples []Sample, warmup time.Duration) Summary {
	s := Summary{Warmup: warmup}
	var xs, ys []float64
	var last *Sample
	for i := range samples {
		x := &samples[i]
		s.PeakRSS = max(s.PeakRSS, x.PeakRSS, x.RSS)
		if x.Drain {
			continue
		}
		last = x
		s.MaxLagSeconds = max(s.MaxLagSeconds, x.LagSeconds)
		s.MaxLagMessages = max(s.MaxLagMessages, x.LagMessages)
		if x.Elapsed >= warmup {
			if len(xs) == 0 {
				s.WarmAt, s.WarmRSS = x.Elapsed, x.RSS
			}
			xs = append(xs, x.Elapsed.Minutes())
			ys = append(ys, float64(x.RSS))
		}
	}
	if last != nil {
		s.EndAt, s.EndRSS = last.Elapsed, last.RSS
		s.Accepted, s.Missed, s.Errors = last.Accepted, last.Missed, last.Errors
		if last.Elapsed > 0 {
			s.Rate = float64(last.Accepted) / last.Elapsed.Seconds()
		}
	}
	s.Slope = slope(xs, ys)
	return s
}

// slope is the least-squares slope of ys over xs; 0 with fewer than two
// distinct xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// Flat reports whether RSS stayed flat after the warm-up: the growth the
// slope gives over the time after it is at most tolerance (a fraction) of
// the RSS at the warm-up's end.
func (s Summary) Flat(tolerance float64) bool {
	grown := s.Slope * (s.EndAt - s.WarmAt).Minutes()
	return grown <= tolerance*float64(s.WarmRSS)
}
