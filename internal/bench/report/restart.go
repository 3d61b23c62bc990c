package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/storage/records"
)

// restartPoll is how often the restart measurement looks at the
// processor's commits and samples the live heap: the resolution of the
// figure.
const restartPoll = 20 * time.Millisecond

// restartTimeout bounds the wait for the first commit after a restart.
const restartTimeout = 30 * time.Minute

// restartResult is what the restart measurement (--restart) found.
type restartResult struct {
	// Seq is the log position of the batch published before the start.
	Seq uint64
	// FirstCommit is the time from the processor's start until the
	// project's checkpoint covered Seq (seen by polling every restartPoll).
	FirstCommit time.Duration
	// Load is the processor's own "project state rebuilt from its tables"
	// line: how long the rebuild took, how many events it read (all of
	// them folded, or those read back after the state table was restored:
	// LoadHow "folded" or "restored") and when it was logged (from the
	// start); Loaded is false when it never came.
	Loaded     bool
	Load       time.Duration
	LoadEvents int64
	LoadHow    string
	LoadedAt   time.Duration
	// CommitLogged is when the processor logged the commit covering Seq
	// (from the start), CommitTook and CommitFlush how long that commit
	// and its Flush took by its line; 0 when it did not log it.
	CommitLogged, CommitTook, CommitFlush time.Duration
	// PeakRSSKB is the process's peak RSS from the processor's start (the
	// kernel's VmHWM, reset at the start); PeakHeap the largest live heap
	// sampled; BaseRSS what the process held before the start.
	PeakRSSKB int64
	PeakHeap  uint64
	BaseRSS   string
	Stats     processor.Stats
}

// benchRestart is --restart: on the built dataset in dir it publishes one
// new batch (an event after the dataset's end, received now), starts the
// real processor as `mf process` does and times its first commit covering
// the batch: the time a restarted processor takes to commit new events
// after the project's history (issue 14). It then records the batch in
// dir's dataset.json and returns, without timing the API.
func benchRestart(ctx context.Context, cfg Config, dir string, ds Dataset, out, stderr io.Writer) error {
	var inner slog.Handler = slog.NewTextHandler(io.Discard, nil)
	if cfg.Verbose {
		inner = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	lines := newRestartLog(inner, ds.Project)
	logger := slog.New(lines)
	fmt.Fprintf(out, "restart bench in %s: the dataset built %s (seed %d): %d events, %d people, %d batches\n",
		dir, ds.BuiltAt.Format(time.RFC3339), ds.Seed, ds.Truth.Events, ds.Truth.People, ds.Truth.Batches)
	start := time.Now()
	e, err := openEnv(ctx, dir, logger, cfg.APICacheBytes)
	if err != nil {
		return err
	}
	defer e.close()
	fmt.Fprintf(out, "log, catalog and object store open in %v\n", time.Since(start).Round(time.Millisecond))
	cp, err := e.checkpoint(ctx, ds.Project)
	if err != nil {
		return err
	}
	if cp < ds.LastSeq {
		return fmt.Errorf("the tables in %s cover the log to %d, not to the dataset's last batch %d; remove the directory and build again", dir, cp, ds.LastSeq)
	}
	if err := e.purgeBatches(ctx, cp); err != nil { // what the tables cover: the processor reads none of it again
		return err
	}
	now := time.Now()
	b := restartBatch(ds, now, rand.New(rand.NewPCG(uint64(now.UnixNano()), ds.Seed)))
	seq, err := publish(ctx, e.log.Publisher(), b)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "published one batch of %d event at %s (the dataset ends %s) at log position %d; the tables cover %d\n",
		len(b.Events), time.UnixMilli(b.Events[0].Time).Format(time.RFC3339), time.UnixMilli(ds.End).Format(time.RFC3339), seq, cp)

	res, err := timeRestart(ctx, e, lines, ds.Project, seq, cfg.RestartCPUProfile)
	if err != nil {
		return err
	}
	printRestart(out, res, cfg.RestartCPUProfile)

	// The dataset now holds the batch: record it, so that later runs
	// (and the truth check) count it, and drop it from the log as a
	// build does.
	if err := e.purgeBatches(ctx, seq); err != nil {
		return err
	}
	ds.LastSeq = seq
	addRestartTruth(&ds.Truth, b)
	return writeDataset(dir, ds)
}

// timeRestart starts the processor and waits until the project's
// checkpoint covers seq.
func timeRestart(ctx context.Context, e *env, lines *restartLog, project string, seq uint64, cpuProfile string) (restartResult, error) {
	res := restartResult{Seq: seq}
	runtime.GC()
	res.BaseRSS = memoryNow()
	resetPeakRSS()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return res, fmt.Errorf("cannot write the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, fmt.Errorf("cannot start the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile() // also on failure; stopping twice is a no-op
	}
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	t0 := time.Now()
	p, done, stop, err := e.startProcessor(ctx, e.logger)
	if err != nil {
		return res, err
	}
	tick := time.NewTicker(restartPoll)
	defer tick.Stop()
	for {
		res.PeakHeap = max(res.PeakHeap, liveHeap())
		if p.Stats().Commits > 0 {
			cp, err := e.checkpoint(ctx, project)
			if err != nil {
				_ = stop()
				return res, err
			}
			if cp >= seq {
				res.FirstCommit = time.Since(t0)
				break
			}
		}
		select {
		case err := <-done:
			return res, fmt.Errorf("the processor stopped before its checkpoint reached %d: %v", seq, err)
		case <-ctx.Done():
			_ = stop()
			return res, fmt.Errorf("no commit covering log position %d within %v of the start: %w", seq, restartTimeout, ctx.Err())
		case <-tick.C:
		}
	}
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	res.PeakRSSKB, _ = peakRSS()
	res.Stats = p.Stats()
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		return res, fmt.Errorf("processor: %w", err)
	}
	l := lines.result()
	if !l.loadAt.IsZero() {
		res.Loaded, res.Load, res.LoadEvents, res.LoadedAt, res.LoadHow = true, l.load, l.loadEvents, l.loadAt.Sub(t0), l.loadHow
	}
	for _, c := range l.commits {
		if c.seq >= seq {
			res.CommitLogged, res.CommitTook, res.CommitFlush = c.at.Sub(t0), c.took, c.flush
			break
		}
	}
	return res, nil
}

func printRestart(out io.Writer, r restartResult, cpuProfile string) {
	fmt.Fprintf(out, "\nrestart: from the processor's start to the first commit covering log position %d: %.2f s (target: under 10 s, issue 14)\n",
		r.Seq, r.FirstCommit.Seconds())
	if r.Loaded {
		what := "events folded" // the events table read whole
		if r.LoadHow == "restored" {
			what = "events read back (the state table restored)"
		}
		fmt.Fprintf(out, "  project state rebuilt from its tables in %.2f s (the processor's log line, %.2f s after the start): %d %s\n",
			r.Load.Seconds(), r.LoadedAt.Seconds(), r.LoadEvents, what)
	} else {
		fmt.Fprintf(out, "  the processor logged no rebuild of the project's state\n")
	}
	if r.CommitLogged > 0 {
		fmt.Fprintf(out, "  commit logged by the processor %.2f s after the start; the commit took %.2f s (its Flush %.2f s)\n",
			r.CommitLogged.Seconds(), r.CommitTook.Seconds(), r.CommitFlush.Seconds())
	}
	fmt.Fprintf(out, "  memory: before the start %s; from the start to the commit peak RSS %.0f MB, peak live heap %.0f MB (sampled every %v)\n",
		r.BaseRSS, float64(r.PeakRSSKB)/1024, float64(r.PeakHeap)/(1<<20), restartPoll)
	fmt.Fprintf(out, "  processor: %d batches, %d events applied, %d commits; %d cold days thawed for the commit, %d for claims, %d days of visits read back for claims\n",
		r.Stats.Batches, r.Stats.Events, r.Stats.Commits, r.Stats.ThawedDays, r.Stats.ThawedUnitDays, r.Stats.ReclaimDays)
	if cpuProfile != "" {
		fmt.Fprintf(out, "  CPU profile from the start to the commit: %s (go tool pprof -top %s)\n", cpuProfile, cpuProfile)
	}
}

// restartBatch is the batch --restart publishes: one pageview of a new
// visitor arriving directly on the home page, built as the generator
// builds its batches, a second before now and never before the dataset's
// end; received at now.
func restartBatch(ds Dataset, now time.Time, r *rand.Rand) *records.Batch {
	at := max(now.UnixMilli()-1000, ds.End+1)
	b := &records.Batch{Project: ds.Project, Source: benchSource, SourceKind: records.SourceWebsite,
		Mode: records.ModeFull, ID: randomID(r), SentAt: -1, Edge: edges[r.IntN(len(edges))],
		Context: records.Context{SDK: "mf-js/1.4.2", Locale: "de-DE", Timezone: "Europe/Berlin",
			HasScreen: true, ScreenWidth: 1440, ScreenHeight: 900}}
	b.Events = []records.Event{{ID: randomID(r), Name: evPageview, Time: at,
		Page:        records.Page{URL: records.URL{Scheme: "https", Host: siteHost, Path: "/"}, Title: "Shop"},
		AnonymousID: fmt.Sprintf("%016x", r.Uint64()), SessionID: randomID(r)}}
	b.ReceivedAt = max(now.UnixMilli(), at)
	b.Receipt = records.Receipt{Batch: b.ID.String(), Accepted: len(b.Events)}
	return b
}

// addRestartTruth counts restartBatch's batch in t: one batch, pageview,
// visit (direct) and person, new, in the window when its time is.
func addRestartTruth(t *Truth, b *records.Batch) {
	t.Batches++
	for _, e := range b.Events {
		t.Events++
		t.Pageviews++
		t.Visits++
		t.People++
		if e.Time >= t.WindowFrom && e.Time < t.WindowTo {
			t.WindowPeople++
			t.WindowNew++
			if t.WindowVisits == nil {
				t.WindowVisits = map[string]int{}
			}
			t.WindowVisits["direct"]++
		}
	}
}
