package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkFreshnessThroughBinary measures, through the real binary on
// embedded defaults, how long an accepted event takes to be readable in the
// tables: from sending a one-event batch (202) to the events table holding
// it, read through a rollups reader on the same object store as the
// reporting API reads it. It reports p50 and p99 in milliseconds.
func BenchmarkFreshnessThroughBinary(b *testing.B) {
	data := b.TempDir()
	p := startMF(b, data, "serve", "--provision", demoFile, "--rate-limit-scale", "1000")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("0f0f0f0f-0000-4000-8000-%012x", i)
		body := batchBody(id, "full", fmt.Sprintf(`{"name":"$pageview","anonymousId":"fresh-%d","page":{"url":"https://shop.example/"}}`, i))
		start := time.Now()
		code, _, resp := do(b, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			b.Fatalf("batch: %d %s", code, resp)
		}
		for eventsStored(data) < i+1 {
			if time.Since(start) > time.Minute {
				b.Fatalf("event %d not readable after a minute", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		// Idle between events, as the freshness target assumes.
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	p.stop(time.Minute)
}
