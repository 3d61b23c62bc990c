package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mfhq/mf/api"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// replayReport is what `mf replay` prints and the admin API answers.
type replayReport struct {
	Project    string  `json:"project"`
	From       string  `json:"from,omitempty"`
	Source     string  `json:"source"`
	Events     int64   `json:"events"`
	Batches    int64   `json:"batches,omitempty"`
	CatchUps   int     `json:"catchUps"`
	Checkpoint uint64  `json:"checkpoint"`
	Version    int64   `json:"version"`
	Generation int64   `json:"generation"`
	Seconds    float64 `json:"seconds"`
}

// replayer runs replays on the parts of a process.
type replayer struct {
	bucket storage.Bucket
	log    *eventlog.Log
	cat    *catalog.Catalog
	reader *rollups.Reader
	logger interface {
		Info(msg string, args ...any)
	}
}

// replay rebuilds a project's tables (processor.Replay). Errors wrap
// api.ErrNotFound for an unknown project and api.ErrRefused for bad
// options, so the admin API answers 404 and 422.
func (r replayer) replay(ctx context.Context, project, from, source string) (any, error) {
	if _, ok := r.cat.State().Project(project); !ok {
		return nil, fmt.Errorf("%w: no project %q in the catalog", api.ErrNotFound, project)
	}
	if from != "" {
		if _, err := time.Parse(time.DateOnly, from); err != nil {
			return nil, fmt.Errorf("%w: from %q is not a day YYYY-MM-DD", api.ErrRefused, from)
		}
	}
	src := processor.ReplaySource(source)
	switch src {
	case "":
		src = processor.ReplayArchive
	case processor.ReplayArchive, processor.ReplayLog:
	default:
		return nil, fmt.Errorf("%w: source %q is neither %q nor %q", api.ErrRefused, source, processor.ReplayArchive, processor.ReplayLog)
	}
	st, err := rollups.NewStore(r.bucket, rollups.DefaultConfig(), nil)
	if err != nil {
		return nil, err
	}
	deps := processor.ReplayDeps{Store: st, Reader: r.reader, Catalog: r.cat, Log: r.log}
	if src == processor.ReplayLog {
		sub, err := r.log.Subscriber(eventlog.DefaultSubscriberConfig(""))
		if err != nil {
			return nil, fmt.Errorf("cannot read the log: %w", err)
		}
		defer sub.Close()
		deps.Subscriber = sub
	}
	stats, err := processor.Replay(ctx, processor.DefaultConfig(), deps, processor.ReplayOptions{Project: project, From: from, Source: src})
	if errors.Is(err, processor.ErrNoProject) {
		return nil, fmt.Errorf("%w: %v (nothing was processed for it yet)", api.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	r.logger.Info("replay done", "project", project, "from", from, "source", src, "events", stats.Events, "took", stats.Took)
	return replayReport{Project: project, From: from, Source: string(src), Events: stats.Events, Batches: stats.Batches,
		CatchUps: stats.CatchUps, Checkpoint: stats.Checkpoint, Version: stats.Version, Generation: stats.Generation,
		Seconds: stats.Took.Seconds()}, nil
}

// replayMain is `mf replay --project ID [--from DATE]`: it rebuilds a
// project's tables from its archived history, through a running mf's admin
// API (--admin-url) or directly on --data / --log and --store.
func replayMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", "", "id of the project to rebuild (required)")
	from := fs.String("from", "", "first day YYYY-MM-DD to rewrite; earlier days are kept as they are (people are always rebuilt)")
	source := fs.String("source", "archive", "where the history is read: archive (the events table) or log (every batch the log keeps)")
	sf := addStoreFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mf replay --project ID [--from YYYY-MM-DD] [--source archive|log] [--data DIR | --log nats://… --store s3://… | --admin-url URL]")
		fs.PrintDefaults()
	}
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if *project == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *sf.adminURL != "" {
		return replayRemote(ctx, strings.TrimRight(*sf.adminURL, "/"), *sf.adminToken, *project, *from, *source, stdout, stderr)
	}
	logger := newLogger(config{LogLevel: "warn", LogFormat: "text"}, stderr)
	o, err := openOffline(ctx, sf, false, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 1
	}
	defer o.Close()
	rd, err := rollups.NewReader(o.bucket, rollups.DefaultReaderConfig(), logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 1
	}
	out, err := replayer{bucket: o.bucket, log: o.log, cat: o.cat, reader: rd, logger: logger}.replay(ctx, *project, *from, *source)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 1
	}
	printReplay(stdout, out.(replayReport))
	return 0
}

func printReplay(w io.Writer, r replayReport) {
	fmt.Fprintf(w, "replayed project %s from the %s: %d events, tables at log position %d (manifest version %d, generation %d) in %.1fs\n",
		r.Project, r.Source, r.Events, r.Checkpoint, r.Version, r.Generation, r.Seconds)
}

func replayRemote(ctx context.Context, base, token, project, from, source string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	q := url.Values{}
	if from != "" {
		q.Set("from", from)
	}
	q.Set("source", source)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/v1/projects/"+url.PathEscape(project)+"/replay?"+q.Encode(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 2
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: cannot reach the admin API: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		fmt.Fprintf(stderr, "mf replay: %s: %s\n", resp.Status, e.Error)
		return 1
	}
	var r replayReport
	if err := json.Unmarshal(body, &r); err != nil {
		fmt.Fprintf(stderr, "mf replay: the admin API answered an unreadable body: %v\n", err)
		return 1
	}
	printReplay(stdout, r)
	return 0
}
