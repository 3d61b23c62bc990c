package main

import (
	"math"
	"time"
)

// Hist is a histogram of durations with logarithmic buckets: each bucket
// is histGrowth times as wide as the one before, so a percentile read
// from it is within half a percent of the exact one, in a fixed 2,300
// counters whatever the number of samples (a 30-minute soak answers
// about 3.6 million requests). Durations under histMin count in the first
// bucket, over histMax in the last. Not safe for concurrent use.
type Hist struct {
	counts [histBuckets]int64
	n      int64
	max    time.Duration
}

const (
	histMin     = time.Microsecond
	histMax     = 1000 * time.Second
	histGrowth  = 1.01
	histBuckets = 2100 // ceil(log(histMax/histMin) / log(histGrowth)) + 1
)

var logGrowth = math.Log(histGrowth)

func bucketOf(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(d)/float64(histMin)) / logGrowth))
	return min(i, histBuckets-1)
}

// bucketValue is the middle of bucket i (geometric), the value a
// percentile in it is reported as.
func bucketValue(i int) time.Duration {
	if i == 0 {
		return histMin
	}
	return time.Duration(float64(histMin) * math.Pow(histGrowth, float64(i)-0.5))
}

// Add counts one duration.
func (h *Hist) Add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.max = max(h.max, d)
}

// Merge adds the counts of o.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count is the number of durations counted.
func (h *Hist) Count() int64 { return h.n }

// Max is the longest duration counted (exact).
func (h *Hist) Max() time.Duration { return h.max }

// Quantile is the q-quantile (0 < q <= 1) by nearest rank: the smallest
// duration that at least q of the samples do not exceed, to the
// histogram's precision (never above Max). 0 without samples.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketValue(i), h.max)
		}
	}
	return h.max
}
