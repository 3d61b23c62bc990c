package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is what the soak reads from mf's GET /metrics (docs/metrics.md).
type Scrape struct {
	LagMessages int64   // mf_processor_lag_messages
	LagSeconds  float64 // mf_processor_lag_seconds
	Committed   int64   // mf_processor_events_total
	Heap        int64   // go_memstats_heap_inuse_bytes
	// Partitions is mf_processor_partitions_held: a processor that lost
	// leases (a starved process misses renewals) reports lag only for the
	// partitions it holds, 0 when it holds none.
	Partitions int64
}

// scrapeMetrics reads GET base/metrics (the admin listener, loopback: no
// token needed) and picks the soak's families.
func scrapeMetrics(ctx context.Context, client *http.Client, base string) (Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return Scrape{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Scrape{}, fmt.Errorf("cannot read mf's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Scrape{}, fmt.Errorf("cannot read mf's metrics: GET /metrics answered %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return Scrape{}, fmt.Errorf("cannot parse mf's metrics: %w", err)
	}
	return pickMetrics(fams)
}

// pickMetrics takes the soak's values from parsed families; the
// processor's families must be there (mf serve runs a processor).
func pickMetrics(fams map[string]*dto.MetricFamily) (Scrape, error) {
	var s Scrape
	lagM, ok1 := value(fams, "mf_processor_lag_messages")
	lagS, ok2 := value(fams, "mf_processor_lag_seconds")
	committed, ok3 := value(fams, "mf_processor_events_total")
	if !ok1 || !ok2 || !ok3 {
		return s, fmt.Errorf("mf's metrics lack the processor's lag or events (is a processor running?)")
	}
	parts, ok4 := value(fams, "mf_processor_partitions_held")
	if !ok4 {
		return s, fmt.Errorf("mf's metrics lack mf_processor_partitions_held")
	}
	heap, _ := value(fams, "go_memstats_heap_inuse_bytes")
	s.LagMessages, s.LagSeconds, s.Committed, s.Heap, s.Partitions = int64(lagM), lagS, int64(committed), int64(heap), int64(parts)
	return s, nil
}

// value sums the samples of a gauge or counter family.
func value(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	var v float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, true
}
