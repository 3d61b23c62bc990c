package main

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// The table: one line per sample.

func header() string {
	return fmt.Sprintf("%-6s %8s %12s %8s %8s %8s %8s %8s %8s %9s %7s %5s %12s %10s %7s",
		"phase", "elapsed", "accepted", "ev/s", "rss MiB", "peak", "heap", "p50 ms", "p99 ms", "lag msgs", "lag s", "parts", "committed", "behind", "errors")
}

func (s Sample) line() string {
	phase := "load"
	if s.Drain {
		phase = "drain"
	}
	lagM, lagS, parts, committed, heap := "-", "-", "-", "-", "-"
	if s.Scraped {
		lagM, lagS = thousands(s.LagMessages), strconv.FormatFloat(s.LagSeconds, 'f', 1, 64)
		parts, committed, heap = strconv.FormatInt(s.Partitions, 10), thousands(s.Committed), strconv.FormatInt(s.Heap>>20, 10)
	}
	return fmt.Sprintf("%-6s %8s %12s %8s %8d %8d %8s %8s %8s %9s %7s %5s %12s %10s %7d",
		phase, s.Elapsed.Round(time.Second), thousands(s.Accepted), thousands(int64(s.Rate)), s.RSS>>20, s.PeakRSS>>20, heap,
		ms(s.P50), ms(s.P99), lagM, lagS, parts, committed, thousands(s.Missed), s.Errors)
}

// writeSummary writes the end of the report.
func writeSummary(out io.Writer, cfg Config, s Summary, l *Load, drain time.Duration, drained bool, last Sample, afterCheck int64) {
	l.mu.Lock()
	total := l.total
	firstFail := l.firstFail
	l.mu.Unlock()
	fmt.Fprintln(out, "summary:")
	fmt.Fprintf(out, "  load: %s events accepted in %v, %s events/s (target %s)", thousands(s.Accepted), s.EndAt.Round(100*time.Millisecond),
		thousands(int64(s.Rate)), thousands(int64(cfg.Rate)))
	if s.Missed > 0 {
		fmt.Fprintf(out, "; could not keep the rate: %s events (%.1f%%) not sent in time", thousands(s.Missed),
			100*float64(s.Missed)/(float64(s.Accepted)+float64(s.Missed)))
	}
	fmt.Fprintln(out)
	if d, p, u, r := l.dropped.Load(), l.partial.Load(), l.unanswered.Load(), l.rejected.Load(); s.Errors+d+p+u+r > 0 {
		fmt.Fprintf(out, "  errors: %d attempts not answered 202; events dropped by receipts %d, given up %d, refused %d (first: %s)\n",
			s.Errors, d, u, r, firstFail)
	}
	fmt.Fprintf(out, "  ingest latency: p50 %s ms, p99 %s ms, max %s ms over %s requests\n",
		ms(total.Quantile(0.5)), ms(total.Quantile(0.99)), ms(total.Max()), thousands(total.Count()))
	fmt.Fprintf(out, "  RSS: %s at the warm-up's end (%v), %s at the end (%v), growth after the warm-up %+.1f MiB/min; peak %s (target under 2 GiB: %s; flat: %s)\n",
		mib(s.WarmRSS), s.WarmAt.Round(time.Second), mib(s.EndRSS), s.EndAt.Round(time.Second), s.Slope/(1<<20), mib(s.PeakRSS),
		verdict(s.PeakRSS < 2<<30), verdict(s.Flat(flatTolerance)))
	caught := "caught up"
	if !drained {
		caught = "not caught up"
	}
	fmt.Fprintf(out, "  processor lag: max %.1f s, %s batches during the load; %s %v after it (committed %s events); RSS %s after the reporting check\n",
		s.MaxLagSeconds, thousands(s.MaxLagMessages), caught, drain.Round(time.Second), thousands(last.Committed), mib(afterCheck))
}

// flatTolerance: RSS is flat when what it grows after the warm-up (by its
// least-squares slope) is at most this share of the RSS at the warm-up's
// end.
const flatTolerance = 0.10

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func mib(b int64) string {
	return strconv.FormatInt(b>>20, 10) + " MiB"
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
