package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/mfhq/mf/ingest/internal/mfserve"
)

// soak runs the benchmark of cfg and writes its table and summary to out.
func soak(ctx context.Context, cfg Config, out, stderr io.Writer) error {
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "mf-soak-")
		if err != nil {
			return fmt.Errorf("cannot make a data directory: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make the data directory: %w", err)
	}
	prov, target, err := Provision(cfg.Provision, cfg.Key)
	if err != nil {
		return err
	}
	if cfg.Origin != "" {
		target.Origin = cfg.Origin
	}
	provPath := filepath.Join(dir, "soak-provision.json")
	if err := os.WriteFile(provPath, prov, 0o600); err != nil {
		return fmt.Errorf("cannot write the soak's provisioning file: %w", err)
	}

	mcfg := mfserve.DefaultConfig()
	mcfg.Binary, mcfg.Data, mcfg.Provision = cfg.MF, filepath.Join(dir, "mf"), provPath
	mcfg.Args = []string{"--rate-limit-scale", cfg.RateLimitScale, "--log-level", "warn"}
	mcfg.Stderr = stderr
	mf, err := mfserve.Start(ctx, mcfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := mf.Stop(time.Minute); err != nil {
			fmt.Fprintf(stderr, "soak: mf did not stop cleanly: %v\n", err)
		}
	}()
	idle, _ := mf.RSS()
	fmt.Fprintf(out, "mf soak: %s events/s in %d-event batches (%s) over %d connections, %s browsers, for %v (%s events); mf idle RSS %s\n",
		thousands(int64(cfg.Rate)), cfg.Batch, keyKind(target), cfg.Conns, thousands(int64(cfg.Browsers)), cfg.Duration,
		thousands(int64(cfg.Rate*cfg.Duration.Seconds())), mib(idle))

	// RSS: polled four times a second for the peak.
	var rss, peak atomic.Int64
	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if r, err := mf.RSS(); err == nil {
				rss.Store(r)
				if r > peak.Load() {
					peak.Store(r)
				}
			}
			select {
			case <-pollCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stopPoll(); <-pollDone }()

	metricsClient := &http.Client{Timeout: 10 * time.Second}
	load := NewLoad(cfg, target, mf.Ingest)
	start := time.Now()
	stop := start.Add(cfg.Duration)
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); load.Run(loadCtx, start, stop) }()

	fmt.Fprintln(out, header())
	var samples []Sample
	var prevAccepted int64
	prevAt := start
	var aborted string
	var caughtUp drainState
	take := func(drain bool) Sample {
		now := time.Now()
		h := load.takeInterval()
		acc := load.accepted.Load()
		s := Sample{Elapsed: now.Sub(start), Drain: drain, Accepted: acc,
			Missed: load.Missed(), Errors: load.errors.Load(),
			RSS: rss.Load(), PeakRSS: peak.Load(), P50: h.Quantile(0.50), P99: h.Quantile(0.99)}
		if dt := now.Sub(prevAt).Seconds(); dt > 0 {
			s.Rate = float64(acc-prevAccepted) / dt
		}
		prevAccepted, prevAt = acc, now
		if m, err := scrapeMetrics(ctx, metricsClient, mf.Admin); err == nil {
			s.Scraped, s.LagMessages, s.LagSeconds, s.Committed, s.Heap, s.Partitions = true, m.LagMessages, m.LagSeconds, m.Committed, m.Heap, m.Partitions
			caughtUp.observe(m, acc)
		}
		samples = append(samples, s)
		fmt.Fprintln(out, s.line())
		return s
	}

	// The load, a line per sample.
	tick := time.NewTicker(cfg.Sample)
loading:
	for {
		select {
		case <-loadDone:
			break loading
		case <-mf.Done():
			cancelLoad()
			<-loadDone
			tick.Stop()
			return fmt.Errorf("mf exited during the load: %v", mf.ExitErr())
		case <-ctx.Done():
			cancelLoad()
			<-loadDone
			tick.Stop()
			return ctx.Err()
		case <-tick.C:
			s := take(false)
			if cfg.MaxRSS > 0 && s.PeakRSS > cfg.MaxRSS && aborted == "" {
				aborted = fmt.Sprintf("mf's RSS passed -max-rss (%s) at %v: load stopped", mib(cfg.MaxRSS), s.Elapsed.Round(time.Second))
				fmt.Fprintln(out, aborted)
				cancelLoad()
			}
		}
	}
	tick.Stop()
	take(false)

	// The drain: until the processor has caught up (polled once a
	// second), a line per sample.
	drainStart := time.Now()
	lastLine := drainStart
	var notDrained error
	for caught := false; !caught; {
		if m, err := scrapeMetrics(ctx, metricsClient, mf.Admin); err == nil {
			caught = caughtUp.observe(m, load.accepted.Load())
		}
		if caught {
			break
		}
		if time.Since(drainStart) > cfg.Drain {
			notDrained = fmt.Errorf("the processor did not catch up within -drain %v after the load", cfg.Drain)
			fmt.Fprintln(out, notDrained)
			break
		}
		if time.Since(lastLine) >= cfg.Sample {
			take(true)
			lastLine = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-mf.Done():
			return fmt.Errorf("mf exited while the processor caught up: %v", mf.ExitErr())
		case <-time.After(time.Second):
		}
	}
	drainTook := time.Since(drainStart)
	last := take(true)

	// The count: the reporting API against the receipts.
	sent := load.Sent()
	partial, unanswered := load.partial.Load(), load.unanswered.Load()
	got, diff, err := countUntilEqual(ctx, target, cfg.APIKey, mf.API, start.Add(-time.Minute), time.Now(), sent, partial, unanswered)
	afterCheck := rss.Load()

	sum := Summarize(samples, cfg.warmup())
	writeSummary(out, cfg, sum, load, drainTook, notDrained == nil, last, afterCheck)
	if err == nil {
		fmt.Fprintf(out, "reporting API: %s events (%s pageviews) over the run's days; accepted %s\n",
			thousands(got.Total()), thousands(got[0]), thousands(sent.Total()+partial))
	}
	if err != nil {
		return err
	}
	if aborted != "" {
		return errors.New(aborted)
	}
	if notDrained != nil {
		return notDrained
	}
	if diff != "" {
		return fmt.Errorf("not every accepted event is counted: %s", diff)
	}
	if r := load.rejected.Load(); r > 0 {
		return fmt.Errorf("%d events were refused (first: %s)", r, load.firstFail)
	}
	fmt.Fprintln(out, "count check: every accepted event is counted by the reporting API")
	return nil
}

// countUntilEqual asks the reporting API for the counts until they agree
// with the receipts, for up to a minute after the processor caught up (the
// API may read the tables of the commit before), at most one request every
// two seconds (its limit is 120 a minute). It returns the last counts and
// what differs ("" when nothing).
func countUntilEqual(ctx context.Context, t Target, token, api string, from, to time.Time, sent Counts, partial, unanswered int64) (Counts, string, error) {
	client := &http.Client{Timeout: 5 * time.Minute}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := readCounts(ctx, client, api, token, t, from, to)
		wait := 2 * time.Second
		var rl rateLimited
		switch {
		case errors.As(err, &rl):
			wait = rl.wait
		case err != nil:
			return got, "", err
		default:
			diff := Check(got, sent, partial, unanswered)
			if diff == "" || time.Now().After(deadline) {
				return got, diff, nil
			}
		}
		if time.Now().After(deadline) {
			return got, "", err
		}
		select {
		case <-ctx.Done():
			return got, "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

func keyKind(t Target) string {
	if t.Website {
		return "website key, Origin " + t.Origin
	}
	return "server key"
}
