package main

import (
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// BenchmarkGenerate measures the generator alone (no log): batches of the
// small dataset made and encoded as they would be published.
//
//	go test ./internal/bench/report -run '^$' -bench Generate
func BenchmarkGenerate(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	cfg := GenConfig{Seed: 7, People: 3000, Events: 30000, Days: 40, End: time.Date(2026, 6, 1, 12, 0, 0, 0, loc), Loc: loc,
		Project: benchProject, Source: benchSource}
	b.ReportAllocs()
	events, bytes := 0, 0
	for b.Loop() {
		g, err := NewGenerator(cfg)
		if err != nil {
			b.Fatal(err)
		}
		var t Truth
		if err := g.Run(func(x *records.Batch) error {
			data, err := records.Encode(x)
			bytes += len(data)
			return err
		}, &t); err != nil {
			b.Fatal(err)
		}
		events += t.Events
	}
	b.SetBytes(int64(bytes / b.N))
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
