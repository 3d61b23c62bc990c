// Command report is the reporting benchmark (`go tool task
// bench:report`): it generates a shop's 90 days of traffic (10 million
// events, 1 million people, fixed seed), publishes it to an embedded log as
// ingest does, provisions the catalog, builds the tables with the real
// processor, serves the reporting API on a loopback listener and times
// overview, a 4-step funnel, channels and the first people page over HTTP,
// then answers the same questions with DuckDB over the same Parquet files
// and prints both, with a check that the numbers agree. With --restart it
// instead times a restarted processor's first commit of a new batch on a
// built dataset (restart.go). See docs/bench-report.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/mfhq/mf/api"
	"github.com/mfhq/mf/rollups"
)

// Config is the bench's configuration (its flags).
type Config struct {
	// Dir holds the dataset (log/, objects/, dataset.json). A directory
	// with a complete dataset is reused (steps 1 to 3 skipped); an empty or
	// missing one is built. "" builds in a temporary directory removed at
	// the end.
	Dir string
	// Seed, People, Events and Days shape the dataset (GenConfig).
	Seed           uint64
	People, Events int
	Days           int
	// Warmup calls, then N timed calls per question and side.
	Warmup, N int
	// DuckDB runs the DuckDB side; DuckDir holds bench.mjs.
	DuckDB  bool
	DuckDir string
	// Verbose logs the parts' own lines to stderr.
	Verbose bool
	// Dashboard times the dashboard's overview in headless Chromium
	// (api/dashboard/e2e/measure.mjs).
	Dashboard bool
	// CPUProfile, when set, is where a CPU profile of the API timing
	// (step 4) is written.
	CPUProfile string
	// APICacheBytes is the reporting API's memory for decoded tables, as
	// mf's --api-cache-bytes and by default as mf's default (0: the
	// packages' defaults).
	APICacheBytes int64
	// MemProfile, when set, is where a heap profile is written after the
	// API timing, before the API stops.
	MemProfile string
	// BuildMemProfile, when set, is where a heap profile of the build's
	// peak (the processor's) is written.
	BuildMemProfile string
	// Settle compacts every partition before the API timing as the
	// processor does once it has been quiet for CompactQuietAfter (settle):
	// the tables a live system has an hour after the load, rather than
	// those a build just wrote. It changes the dataset for good.
	Settle bool
	// Restart measures a restart instead of the API (docs/bench-report.md
	// "Restart"): on the built dataset in Dir, one new batch is published
	// and the real processor started; the time to its first commit, the
	// state's rebuild and the memory are printed. It adds the batch to the
	// dataset for good.
	Restart bool
	// RestartCPUProfile, when set, is where a CPU profile of the restart
	// (from the processor's start to its first commit) is written.
	RestartCPUProfile string
}

// DefaultConfig is issue 7's bench.
func DefaultConfig() Config {
	return Config{Seed: 20260701, People: 1_000_000, Events: 10_000_000, Days: 90, Warmup: 3, N: 50, DuckDB: true, Dashboard: true,
		APICacheBytes: api.DefaultCacheBudget()}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.People < 1 || c.Events < c.People:
		return errors.New("people must be at least 1 and events at least people")
	case c.Days < 31:
		return errors.New("days must be at least 31 (the 30-day questions need history before them)")
	case c.N < 1 || c.Warmup < 0:
		return errors.New("n must be at least 1 and warmup at least 0")
	case c.APICacheBytes < 0:
		return errors.New("api-cache-bytes must be at least 0")
	case c.Restart && c.Dir == "":
		return errors.New("restart needs --dir with a built dataset")
	case c.RestartCPUProfile != "" && !c.Restart:
		return errors.New("restart-cpuprofile needs --restart")
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("reportbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Dir, "dir", "", "dataset directory: reused when it holds a built dataset, else built there (default: a temporary directory, removed at the end)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "generator seed")
	fs.IntVar(&cfg.People, "people", cfg.People, "people to generate")
	fs.IntVar(&cfg.Events, "events", cfg.Events, "events to generate (about)")
	fs.IntVar(&cfg.Days, "days", cfg.Days, "days of traffic, ending today")
	fs.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "untimed calls per question before timing")
	fs.IntVar(&cfg.N, "n", cfg.N, "timed calls per question")
	fs.BoolVar(&cfg.DuckDB, "duckdb", cfg.DuckDB, "answer the same questions with DuckDB (Node, npm @duckdb/node-api)")
	fs.StringVar(&cfg.DuckDir, "duckdb-dir", "", "directory of bench.mjs (default: duckdb/ beside this tool's source)")
	fs.BoolVar(&cfg.Dashboard, "dashboard", cfg.Dashboard, "time the dashboard's overview in headless Chromium (Node, playwright-core)")
	fs.BoolVar(&cfg.Verbose, "v", false, "log the parts' own lines (processor, log, API) to stderr")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the API timing to this file")
	fs.Int64Var(&cfg.APICacheBytes, "api-cache-bytes", cfg.APICacheBytes, "the reporting API's memory for decoded tables, as mf's --api-cache-bytes (0: the packages' defaults)")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write a heap profile after the API timing to this file")
	fs.StringVar(&cfg.BuildMemProfile, "build-memprofile", "", "write a heap profile of the build's peak (the processor's) to this file")
	fs.BoolVar(&cfg.Settle, "settle", false, "before timing the API, compact every partition as the processor does once it is quiet for an hour (changes the dataset in dir for good)")
	fs.BoolVar(&cfg.Restart, "restart", false, "instead of timing the API, time a restart on the built dataset in dir: publish one new batch, start the processor, report the time to its first commit (adds the batch to the dataset for good)")
	fs.StringVar(&cfg.RestartCPUProfile, "restart-cpuprofile", "", "with --restart, write a CPU profile from the processor's start to its first commit to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "reportbench: %v\n", err)
		return 2
	}
	if err := bench(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "reportbench: %v\n", err)
		return 1
	}
	return 0
}

// defaultDuckDir is duckdb/ beside this file's source, else the path from
// the repository root.
func defaultDuckDir() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Join(filepath.Dir(file), "duckdb")
		if _, err := os.Stat(filepath.Join(d, "bench.mjs")); err == nil {
			return d
		}
	}
	return filepath.Join("internal", "bench", "report", "duckdb")
}

// window30d is the period=30d window at now in loc: from local midnight 29
// days before today to the next local midnight (docs/reporting-api.md
// "Periods").
func window30d(now time.Time, loc *time.Location) (time.Time, time.Time) {
	n := now.In(loc)
	return time.Date(n.Year(), n.Month(), n.Day()-29, 0, 0, 0, 0, loc), time.Date(n.Year(), n.Month(), n.Day()+1, 0, 0, 0, 0, loc)
}

func bench(ctx context.Context, cfg Config, out, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.Verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		return fmt.Errorf("cannot load the project's time zone: %w", err)
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mf-reportbench-*"); err != nil {
			return fmt.Errorf("cannot make a temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	if cfg.Restart {
		ds, built, err := readDataset(dir)
		if err != nil {
			return err
		}
		if !built {
			return fmt.Errorf("%s holds no built dataset (no %s): --restart never builds one; build it first without --restart", dir, markerFile)
		}
		return benchRestart(ctx, cfg, dir, ds, out, stderr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make %s: %w", dir, err)
	}
	ds, built, err := readDataset(dir)
	if err != nil {
		return err
	}
	if !built {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			return fmt.Errorf("%s holds no complete dataset (no %s) but is not empty; remove it or pick another directory", dir, markerFile)
		}
	}
	fmt.Fprintf(out, "report bench in %s\n", dir)
	start := time.Now()
	e, err := openEnv(ctx, dir, logger, cfg.APICacheBytes)
	if err != nil {
		return err
	}
	defer e.close()
	fmt.Fprintf(out, "log, catalog and object store open in %v\n", time.Since(start).Round(time.Millisecond))
	if !built {
		if ds, err = build(ctx, cfg, e, loc, out); err != nil {
			return err
		}
		if err := writeDataset(dir, ds); err != nil {
			return err
		}
		if err := e.purgeBatches(ctx, ds.LastSeq); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "reusing the dataset built %s (seed %d): %d events, %d people, %d batches; processed in %.0f s (%.0f events/s)\n",
			ds.BuiltAt.Format(time.RFC3339), ds.Seed, ds.Truth.Events, ds.Truth.People, ds.Truth.Batches,
			ds.Process, float64(ds.Truth.Events)/ds.Process)
		if ds.Seed != cfg.Seed || ds.People != cfg.People || ds.Events != cfg.Events || ds.Days != cfg.Days {
			fmt.Fprintf(out, "note: --seed, --people, --events and --days do not apply to a reused dataset (built with seed %d, %d people, %d events, %d days)\n",
				ds.Seed, ds.People, ds.Events, ds.Days)
		}
		cp, err := e.checkpoint(ctx, ds.Project)
		if err != nil {
			return err
		}
		if cp < ds.LastSeq {
			return fmt.Errorf("the tables in %s cover the log to %d, not to the dataset's last batch %d; remove the directory and build again", dir, cp, ds.LastSeq)
		}
		if err := e.purgeBatches(ctx, ds.LastSeq); err != nil { // datasets built before builds purged
			return err
		}
	}

	if cfg.Settle {
		if err := settle(ctx, e.bucket, ds.Project, logger, out); err != nil {
			return err
		}
	}

	// 4. The reporting API over HTTP.
	now := time.Now()
	lo, hi := window30d(now, loc)
	fmt.Fprintf(out, "\ntiming the reporting API over HTTP (%d warm-up calls, then %d timed, one after the other); period 30d = [%s, %s)\n",
		cfg.Warmup, cfg.N, lo.Format(time.RFC3339), hi.Format(time.RFC3339))
	base, stopAPI, err := serveAPI(ctx, e, logger)
	if err != nil {
		return err
	}
	qs := questions()
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("cannot write the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cannot start the CPU profile: %w", err)
		}
	}
	ours := timeAPI(ctx, base, ds.Project, qs, cfg.Warmup, cfg.N, out)
	if cfg.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	printMemory(out, built, cfg.Settle)
	if cfg.MemProfile != "" {
		if err := writeHeapProfile(cfg.MemProfile); err != nil {
			stopAPI()
			return err
		}
	}
	if cfg.Dashboard {
		if err := timeDashboard(ctx, base, ds.Project, 10, out); err != nil {
			stopAPI()
			return err
		}
	}
	stopAPI()

	// 5. DuckDB over the same files.
	var duck *duckOutput
	if cfg.DuckDB {
		files, err := e.liveFiles(ctx, ds.Project, duckTables...)
		if err != nil {
			return err
		}
		nfiles := 0
		for _, f := range files {
			nfiles += len(f)
		}
		in := duckInput{Files: files, Keys: tableKeys(duckTables), Lo: lo.UnixMilli(), Hi: hi.UnixMilli(), Warmup: cfg.Warmup, N: cfg.N}
		in.Funnel.Steps, in.Funnel.WindowMs = funnelSteps, funnelWindowDays*86_400_000
		dd := cfg.DuckDir
		if dd == "" {
			dd = defaultDuckDir()
		}
		fmt.Fprintf(out, "\nanswering the same questions with DuckDB (%s) over the live manifest's %d files of %s\n", dd, nfiles, strings.Join(duckTables, ", "))
		if duck, err = runDuckDB(ctx, dd, in); err != nil {
			return err
		}
		fmt.Fprintf(out, "  DuckDB %s, %s threads\n", duck.DuckDB, duck.Threads)
	}
	report(out, qs, ours, duck)
	if duck != nil && ds.Truth.WindowFrom == lo.UnixMilli() && ds.Truth.WindowTo == hi.UnixMilli() {
		truthCheck(out, ds.Truth, duck)
	}
	return nil
}

// build makes the dataset in e (steps 1 to 3).
func build(ctx context.Context, cfg Config, e *env, loc *time.Location, out io.Writer) (Dataset, error) {
	now := time.Now()
	gcfg := GenConfig{Seed: cfg.Seed, People: cfg.People, Events: cfg.Events, Days: cfg.Days, End: now, Loc: loc,
		Project: benchProject, Source: benchSource}
	ds := Dataset{Seed: cfg.Seed, People: cfg.People, Events: cfg.Events, Days: cfg.Days, Project: benchProject, Start: gcfg.Start().UnixMilli(), End: now.UnixMilli(), BuiltAt: now}
	lo, hi := window30d(now, loc)
	ds.Truth.WindowFrom, ds.Truth.WindowTo = lo.UnixMilli(), hi.UnixMilli()
	t0 := time.Now()
	g, err := NewGenerator(gcfg)
	if err != nil {
		return ds, err
	}
	fmt.Fprintf(out, "1. generating %d people's traffic over %d days from %s (seed %d): %d visits scheduled in %v; publishing to the log\n",
		cfg.People, cfg.Days, gcfg.Start().Format(time.DateOnly), cfg.Seed, g.Visits(), time.Since(t0).Round(time.Millisecond))
	fmt.Fprintf(out, "2. catalog provisioned: project %s (Europe/Berlin, EUR), saved funnel %s\n", benchProject, benchFunnel)
	last, err := e.generate(ctx, g, &ds.Truth, out)
	if err != nil {
		return ds, err
	}
	ds.LastSeq = last
	ds.GenerateAndPublish = time.Since(t0).Seconds()
	t := ds.Truth
	fmt.Fprintf(out, "   %d events (%d pageviews, %d orders) of %d people in %d visits, %d batches; generated and published in %.1f s (%.0f events/s, %.0f batches/s)\n",
		t.Events, t.Pageviews, t.Orders, t.People, t.Visits, t.Batches, ds.GenerateAndPublish,
		float64(t.Events)/ds.GenerateAndPublish, float64(t.Batches)/ds.GenerateAndPublish)
	fmt.Fprintf(out, "3. building the tables with the processor from the backlog\n")
	t1 := time.Now()
	st, err := e.process(ctx, benchProject, last, out, cfg.BuildMemProfile)
	if err != nil {
		return ds, err
	}
	ds.Process = time.Since(t1).Seconds()
	ds.ProcessStats = st
	fmt.Fprintf(out, "   processed %d events in %d batches in %.1f s: %.0f events/s (%d commits, %d bytes written)\n",
		st.Events, st.Batches, ds.Process, float64(st.Events)/ds.Process, st.Commits, st.BytesWritten)
	cs, err := e.store.Compact(ctx, rollups.Live(benchProject))
	if err != nil {
		return ds, fmt.Errorf("cannot compact the tables: %w", err)
	}
	fmt.Fprintf(out, "   compacted: %+v\n", cs)
	return ds, nil
}

// report prints the table of both sides and the agreement of the numbers.
func report(out io.Writer, qs []question, ours map[string]*timing, duck *duckOutput) {
	fmt.Fprintf(out, "\n%-22s %10s %10s %10s %10s %12s  %s\n", "endpoint", "ours p50", "ours p95", "DuckDB p50", "DuckDB p95", "ours/DuckDB", "numbers")
	var notes []string
	for _, q := range qs {
		o := ours[q.Name]
		op50, op95 := "-", "-"
		if o.Err == nil && o.Status == 200 {
			op50, op95 = fmt.Sprintf("%.2f", pct(o.Ms, 50)), fmt.Sprintf("%.2f", pct(o.Ms, 95))
		}
		dp50, dp95, ratio, agree := "-", "-", "-", "-"
		if duck != nil {
			if r, ok := duck.Results[q.Name]; ok {
				dp50, dp95 = fmt.Sprintf("%.2f", pct(r.Ms, 50)), fmt.Sprintf("%.2f", pct(r.Ms, 95))
				if op50 != "-" {
					ratio = fmt.Sprintf("%.3g", pct(o.Ms, 50)/pct(r.Ms, 50))
					diffs, n, err := compare(q.Name, o.Body, r.Rows)
					switch {
					case err != nil:
						agree = "CANNOT COMPARE"
						notes = append(notes, fmt.Sprintf("%s: %v", q.Label, err))
					case len(diffs) == 0:
						agree = fmt.Sprintf("equal (%d)", n)
					default:
						agree = fmt.Sprintf("MISMATCH %d of %d", len(diffs), n)
						for _, d := range diffs[:min(len(diffs), 12)] {
							notes = append(notes, fmt.Sprintf("%s: %s: API %s, DuckDB %s", q.Label, d.What, d.API, d.Duck))
						}
						if len(diffs) > 12 {
							notes = append(notes, fmt.Sprintf("%s: … %d more", q.Label, len(diffs)-12))
						}
					}
				} else {
					agree = "API not answering"
				}
			}
		}
		fmt.Fprintf(out, "%-22s %10s %10s %10s %10s %12s  %s\n", q.Label, op50, op95, dp50, dp95, ratio, agree)
	}
	fmt.Fprintf(out, "(milliseconds; targets: overview p95 < 100 ms, funnel p95 < 500 ms)\n")
	if o := ours["overview"]; o.Status == 200 {
		fmt.Fprintf(out, "overview p95 %.2f ms: %s\n", pct(o.Ms, 95), verdict(pct(o.Ms, 95) < 100))
	}
	if o := ours["funnel"]; o.Status == 200 {
		fmt.Fprintf(out, "funnel p95 %.2f ms: %s\n", pct(o.Ms, 95), verdict(pct(o.Ms, 95) < 500))
	}
	if len(notes) > 0 {
		fmt.Fprintf(out, "\n!!! THE API AND DUCKDB DISAGREE:\n")
		for _, n := range notes {
			fmt.Fprintf(out, "!!!   %s\n", n)
		}
	}
	if duck != nil {
		fmt.Fprintf(out, "\nDuckDB's answers:\n")
		for _, q := range qs {
			if r, ok := duck.Results[q.Name]; ok {
				rows := r.Rows
				more := ""
				if len(rows) > 3 && q.Name == "people" {
					rows, more = rows[:3], fmt.Sprintf(" … (%d rows)", len(r.Rows))
				}
				fmt.Fprintf(out, "  %-22s %v%s\n", q.Label, rows, more)
			}
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "target met"
	}
	return "TARGET MISSED"
}

// truthCheck compares DuckDB's overview and visits per channel with what
// the generator knows it made (only when the 30-day window is the one of
// the build day).
func truthCheck(out io.Writer, t Truth, duck *duckOutput) {
	fmt.Fprintf(out, "\ngenerator's own count for the same window: %d people active, %d new, %d signed in, %d buyers, revenue %v (micro), visits %v\n",
		t.WindowPeople, t.WindowNew, t.WindowKnown, t.WindowBuyers, t.WindowRevenue, t.WindowVisits)
}
