package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// provisionJSON is the bench's catalog: one organization (pro plan), the
// shop project (Europe/Berlin, EUR) with its sources, actions and saved
// funnel, and the analyst with the API key the bench calls with.
//
//go:embed provision.json
var provisionJSON []byte

// The ids of provision.json the bench uses.
const (
	benchProject = "5e1a0000-0000-4000-8000-00000000be03"
	benchSource  = "5e1a0000-0000-4000-8000-00000000be04"
	benchFunnel  = "5e1a0000-0000-4000-8000-00000000be20"
	benchAPIKey  = "mf_pat_bench001_ReportBenchReportBenchReportBenchReportB"
)

// funnelSteps are the saved funnel's steps (pricing, cart, checkout,
// purchase) and funnelWindowDays its window, as provision.json has them.
var funnelSteps = []string{
	"5e1a0000-0000-4000-8000-00000000be12", "5e1a0000-0000-4000-8000-00000000be13",
	"5e1a0000-0000-4000-8000-00000000be14", "5e1a0000-0000-4000-8000-00000000be10",
}

const funnelWindowDays = 7

// markerFile, in the data directory, says a dataset was built completely
// (steps 1 to 3) and describes it.
const markerFile = "dataset.json"

// Dataset describes a built dataset (markerFile).
type Dataset struct {
	Seed    uint64 `json:"seed"`
	Project string `json:"project"`
	// People, Events and Days are the sizes asked for (GenConfig).
	People int `json:"people"`
	Events int `json:"events"`
	Days   int `json:"days"`
	// Start and End bound the traffic (Unix ms); BuiltAt is when it was made.
	Start   int64     `json:"start"`
	End     int64     `json:"end"`
	BuiltAt time.Time `json:"builtAt"`
	Truth   Truth     `json:"truth"`
	// LastSeq is the log position of the last batch.
	LastSeq uint64 `json:"lastSeq"`
	// Timings of the build, seconds.
	GenerateAndPublish float64 `json:"generateAndPublishSeconds"`
	Process            float64 `json:"processSeconds"`
	ProcessStats       processor.Stats
}

// env is the bench's installation in one directory: the embedded log (with
// the catalog on it) under log/, the object store under objects/.
type env struct {
	dir    string
	logger *slog.Logger
	log    *eventlog.Log
	cat    *catalog.Catalog
	bucket storage.Bucket
	store  *rollups.Store
	reader *rollups.Reader
	// dayCache is the reporting data layer's budget (0: its default).
	dayCache int64
}

// openEnv opens (creating when missing) the installation in dir and
// applies the bench's provisioning file.
// openEnv opens the dataset in dir. cacheBytes > 0 is the reporting API's
// memory for decoded tables (mf's --api-cache-bytes): half for the reader's
// column cache, half for the data layer's day cache; 0 keeps the defaults.
func openEnv(ctx context.Context, dir string, logger *slog.Logger, cacheBytes int64) (*env, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &env{dir: dir, logger: logger}
	lcfg := eventlog.DefaultConfig()
	lcfg.Dir = filepath.Join(dir, "log")
	lcfg.StartTimeout = 10 * time.Minute // recovery reads the day's batches back
	lcfg.Timeout = 5 * time.Minute       // purging millions of batches (purgeBatches) takes longer than a publish
	lg, err := eventlog.Open(ctx, lcfg, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot open the log in %s: %w", lcfg.Dir, err)
	}
	e.log = lg
	sub, err := lg.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		e.close()
		return nil, fmt.Errorf("cannot subscribe to the catalog: %w", err)
	}
	cat, err := catalog.Open(ctx, catalog.DefaultConfig(), catalog.Log{
		Publisher: lg.Publisher(), Subscriber: sub, LastSeq: lg.LastSeq, Seq: eventlog.Seq,
	}, logger)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("cannot load the catalog: %w", err)
	}
	e.cat = cat
	if _, err := cat.Apply(ctx, provisionJSON); err != nil {
		e.close()
		return nil, fmt.Errorf("cannot apply the bench's provisioning file: %w", err)
	}
	b, err := storage.Open(ctx, storage.Config{Dir: filepath.Join(dir, "objects")}, logger)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("cannot open the object store: %w", err)
	}
	e.bucket = b
	if e.store, err = rollups.NewStore(b, rollups.DefaultConfig(), logger); err != nil {
		e.close()
		return nil, fmt.Errorf("cannot open the tables for writing: %w", err)
	}
	rcfg := rollups.DefaultReaderConfig()
	if cacheBytes > 0 {
		rcfg.CacheBytes = cacheBytes / 2
		e.dayCache = cacheBytes - rcfg.CacheBytes
	}
	if e.reader, err = rollups.NewReader(b, rcfg, logger); err != nil {
		e.close()
		return nil, fmt.Errorf("cannot open the tables for reading: %w", err)
	}
	return e, nil
}

func (e *env) close() {
	if e.cat != nil {
		_ = e.cat.Close()
	}
	if e.log != nil {
		_ = e.log.Close()
	}
	if e.bucket != nil {
		_ = e.bucket.Close()
	}
}

// publish stores a batch on the log the way ingest does: the encoded
// record as payload, its receipt and project as metadata, deduplicated by
// project and batch id. It returns the batch's log position.
func publish(ctx context.Context, pub *eventlog.Publisher, b *records.Batch) (uint64, error) {
	msg, err := eventlog.NewBatchMessage(b)
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	msg.SetContext(pctx)
	r, err := pub.PublishOnce(pctx, eventlog.BatchSubject(b.Project), eventlog.BatchDedupeID(b.Project, b.ID), msg)
	if err != nil {
		return 0, fmt.Errorf("cannot publish batch %s: %w", b.ID, err)
	}
	return r.Seq, nil
}

// generate runs the generator and publishes every batch, reporting
// progress on out every 10 seconds.
func (e *env) generate(ctx context.Context, g *Generator, truth *Truth, out io.Writer) (uint64, error) {
	pub := e.log.Publisher()
	var last uint64
	start, tick := time.Now(), time.Now()
	err := g.Run(func(b *records.Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		seq, err := publish(ctx, pub, b)
		if err != nil {
			return err
		}
		last = seq
		if time.Since(tick) > 10*time.Second {
			tick = time.Now()
			fmt.Fprintf(out, "  published %d batches, %d events so far (%.0f events/s); at %s\n", truth.Batches, truth.Events,
				float64(truth.Events)/time.Since(start).Seconds(), time.UnixMilli(b.ReceivedAt).Format(time.DateTime))
		}
		truth.Batches++
		return nil
	}, truth)
	return last, err
}

// process runs the real processor until the project's checkpoint covers
// seq, reporting progress on out every 10 seconds, and returns its stats.
// When heapProfile is set, a heap profile is written there each time the
// live heap passes its previous peak by a tenth: the profile left is the
// build's peak.
func (e *env) process(ctx context.Context, project string, seq uint64, out io.Writer, heapProfile string) (processor.Stats, error) {
	p, done, stop, err := e.startProcessor(ctx, e.logger)
	if err != nil {
		return processor.Stats{}, err
	}
	start, tick := time.Now(), time.Now()
	var peakHeap uint64
	for {
		if heapProfile != "" {
			if h := liveHeap(); h > peakHeap+peakHeap/10 {
				peakHeap = h
				if err := writeHeapProfile(heapProfile); err != nil {
					_ = stop()
					return p.Stats(), err
				}
			}
		}
		cp, err := e.checkpoint(ctx, project)
		if err != nil {
			_ = stop()
			return p.Stats(), err
		}
		if cp >= seq {
			break
		}
		select {
		case err := <-done:
			return p.Stats(), fmt.Errorf("the processor stopped before its checkpoint reached %d: %v", seq, err)
		case <-ctx.Done():
			_ = stop()
			return p.Stats(), ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if time.Since(tick) > 10*time.Second {
			tick = time.Now()
			st := p.Stats()
			fmt.Fprintf(out, "  processor: %d events applied (%.0f events/s), %d commits, checkpoint %d of %d, %d events of %d days in memory; %s\n",
				st.Events, float64(st.Events)/time.Since(start).Seconds(), st.Commits, cp, seq, st.HotEvents, st.HotDays, memoryNow())
		}
	}
	st := p.Stats()
	if err := stop(); err != nil {
		return st, fmt.Errorf("processor: %w", err)
	}
	return st, nil
}

// startProcessor starts the real processor on the log as `mf process`
// does, logging to logger. done receives Run's result; stop cancels the
// run and waits for it (at most 5 minutes). The subscriber is closed
// once Run returns.
func (e *env) startProcessor(ctx context.Context, logger *slog.Logger) (*processor.Processor, <-chan error, func() error, error) {
	sub, err := e.log.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot subscribe the processor to the log: %w", err)
	}
	p, err := processor.New(processor.DefaultConfig(), processor.Deps{Subscriber: sub, Log: e.log, Store: e.store,
		Reader: e.reader, Bucket: e.bucket, Catalog: e.cat, Logger: logger})
	if err != nil {
		_ = sub.Close()
		return nil, nil, nil, fmt.Errorf("cannot start the processor: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := p.Run(pctx)
		_ = sub.Close()
		done <- err
	}()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Minute):
			return errors.New("the processor did not stop within 5 minutes")
		}
	}
	return p, done, stop, nil
}

// checkpoint reads the log position the project's live tables cover (the
// processor's checkpoint, docs/processor.md "Exactly once").
func (e *env) checkpoint(ctx context.Context, project string) (uint64, error) {
	m, err := e.store.Load(ctx, rollups.Live(project))
	if err != nil {
		return 0, fmt.Errorf("cannot read the manifest of %s: %w", project, err)
	}
	raw := m.Checkpoint("processor")
	if raw == "" {
		return 0, nil
	}
	var cp struct {
		Seq json.Number `json:"seq"`
	}
	if err := json.Unmarshal([]byte(raw), &cp); err != nil {
		return 0, fmt.Errorf("cannot read the processor checkpoint %q: %w", raw, err)
	}
	n, err := strconv.ParseUint(cp.Seq.String(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot read the processor checkpoint %q: %w", raw, err)
	}
	return n, nil
}

// liveFiles lists the paths of the live data files of the tables, from
// the live manifest, by table.
func (e *env) liveFiles(ctx context.Context, project string, tables ...string) (map[string][]string, error) {
	m, err := e.store.Load(ctx, rollups.Live(project))
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of %s: %w", project, err)
	}
	out := map[string][]string{}
	for _, name := range tables {
		ts := m.Table(name)
		if ts == nil {
			return nil, fmt.Errorf("the live manifest of %s has no table %q", project, name)
		}
		for _, part := range ts.PartitionNames() {
			for _, f := range ts.Partitions[part] {
				// The local bucket keeps key K at <dir>/objects/K (storage
				// local.go); the rollups keys are docs/rollups.md's layout.
				p := filepath.Join(e.dir, "objects", "objects", "rollups", project, "data", name, part, f.Name)
				if _, err := os.Stat(p); err != nil {
					return nil, fmt.Errorf("cannot find the live file %s/%s/%s on disk: %w", name, part, f.Name, err)
				}
				out[name] = append(out[name], p)
			}
		}
	}
	return out, nil
}

// readDataset reads the marker of a built dataset; ok is false when dir
// holds none.
func readDataset(dir string) (Dataset, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, markerFile))
	if errors.Is(err, os.ErrNotExist) {
		return Dataset{}, false, nil
	}
	if err != nil {
		return Dataset{}, false, fmt.Errorf("cannot read %s: %w", markerFile, err)
	}
	var d Dataset
	if err := json.Unmarshal(data, &d); err != nil {
		return Dataset{}, false, fmt.Errorf("cannot read %s: %w", filepath.Join(dir, markerFile), err)
	}
	return d, true, nil
}

func writeDataset(dir string, d Dataset) error {
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", markerFile, err)
	}
	return nil
}

// purgeBatches removes the dataset's batches from the log once the tables
// cover them: the timing needs only the catalog, and an embedded log that
// still holds millions of batches keeps their index and dedupe ids in this
// process's memory (about 1 GB at 10M events), which `mf api` (connected
// to a log it does not host) never holds.
func (e *env) purgeBatches(ctx context.Context, last uint64) error {
	for part := range e.log.Partitions(eventlog.TopicBatches) {
		if err := e.log.PurgePartition(ctx, eventlog.TopicBatches, part, last+1); err != nil {
			return fmt.Errorf("cannot purge the dataset's batches from the log: %w", err)
		}
	}
	return nil
}
