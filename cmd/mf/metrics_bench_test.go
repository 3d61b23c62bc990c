package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// BenchmarkIngestMetrics measures what the metrics cost on the ingest hot
// path: 10-event website batches through the ingest service's web handler
// (decode, enrich, publish to an embedded log), without collectors and
// with them (the listener's and the ingest service's), alternately in one
// run. Batches are small so that the per-request cost of the metrics
// weighs the most. It reports events/s of each (from the median request
// time) and the cost in percent.
func BenchmarkIngestMetrics(b *testing.B) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	lcfg := eventlog.DefaultConfig()
	lcfg.Dir = filepath.Join(b.TempDir(), "log")
	lg, err := eventlog.Open(ctx, lcfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	cat, err := openCatalog(ctx, lg, nil, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	raw, err := os.ReadFile(demoFile)
	if err != nil {
		b.Fatal(err)
	}
	f, err := catalog.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cat.ApplyFile(ctx, f); err != nil {
		b.Fatal(err)
	}
	bcfg := storage.DefaultConfig()
	bcfg.Dir = filepath.Join(b.TempDir(), "objects")
	bucket, err := storage.Open(ctx, bcfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer bucket.Close()

	// Two services on the same log, one without and one with the
	// collectors; each op sends one batch through each, alternately, so
	// that both see the same machine (the log's disk, other processes).
	var handlers [2]fasthttp.RequestHandler
	for i, withMetrics := range []bool{false, true} {
		icfg := ingest.DefaultConfig()
		icfg.Limits = icfg.Limits.Scaled(1e9)
		var hm *httpMetrics
		if withMetrics {
			reg := prometheus.NewRegistry()
			if icfg.Metrics, err = ingest.NewMetrics(reg); err != nil {
				b.Fatal(err)
			}
			if hm, err = newHTTPMetrics(reg, time.Now); err != nil {
				b.Fatal(err)
			}
		}
		srv, err := ingest.NewServer(ctx, icfg, ingest.Deps{Catalog: cat, Log: lg.Publisher(), Bucket: bucket}, logger)
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		app := srv.App()
		if hm != nil {
			hm.instrument("ingest", app)
		}
		app.Handler() // builds the routes
		handlers[i] = app.Server().Handler
	}
	const events = 10
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var took [2][]time.Duration
	seq := 0
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		for k := range handlers {
			i := k ^ n&1 // each goes first every other op
			handler := handlers[i]
			seq++
			var evs []string
			for j := 0; j < events; j++ {
				evs = append(evs, fmt.Sprintf(`{"name":"$pageview","anonymousId":"bench-%d","page":{"url":"https://shop.example/p/%d"}}`, seq%1000, j))
			}
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			req.SetRequestURI("/v1/batch/" + demoWebsiteKey)
			req.Header.Set("Origin", "https://shop.example")
			req.Header.Set("User-Agent", browserUA)
			req.Header.SetContentType("application/json")
			req.SetBody(batchBody(fmt.Sprintf("b0b0b0b0-0000-4000-8000-%012d", seq), "full", evs...))
			var rctx fasthttp.RequestCtx
			rctx.Init(&req, addr, nil)
			start := time.Now()
			handler(&rctx)
			took[i] = append(took[i], time.Since(start))
			if c := rctx.Response.StatusCode(); c != 202 {
				b.Fatalf("batch: %d %s", c, rctx.Response.Body())
			}
		}
	}
	// Medians: the log's publish has a long tail (disk syncs) that would
	// drown the difference in sums.
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return d[len(d)/2].Seconds()
	}
	off, on := events/median(took[0]), events/median(took[1])
	b.ReportMetric(off, "events/s-without")
	b.ReportMetric(on, "events/s-with")
	b.ReportMetric(100*(off-on)/off, "cost-%")
}

// BenchmarkHTTPInstrument isolates what the listener's metrics add to one
// request: a route that answers 202 at once, without and with instrument.
func BenchmarkHTTPInstrument(b *testing.B) {
	for _, on := range []bool{false, true} {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Post("/v1/batch/:key", func(c *fiber.Ctx) error { return c.SendStatus(202) })
		if on {
			hm, err := newHTTPMetrics(prometheus.NewRegistry(), time.Now)
			if err != nil {
				b.Fatal(err)
			}
			hm.instrument("ingest", app)
		}
		app.Handler()
		handler := app.Server().Handler
		b.Run(fmt.Sprintf("metrics=%v", on), func(b *testing.B) {
			b.ReportAllocs()
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			req.SetRequestURI("/v1/batch/" + demoWebsiteKey)
			addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
			var rctx fasthttp.RequestCtx
			for b.Loop() {
				rctx.Init(&req, addr, nil)
				handler(&rctx)
			}
		})
	}
}
