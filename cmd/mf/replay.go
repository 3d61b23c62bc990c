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
	logger interface {
		Info(msg string, args ...any)
	}
}

// replay rebuilds a project's tables (processor.Replay). Errors wrap
// api.ErrNotFound for an unknown project and api.ErrRefused for bad
// options, so the admin API answers 404 and 422.
func (r replayer) replay(ctx context.Context, project, from, source string) (any, error) {
	run, err := r.start(ctx, project, from, source)
	if err != nil {
		return nil, err
	}
	return run(ctx, func(any) {})
}

// start checks a replay's options and returns its work, which reports
// replayProgress as it goes (replay_job.go).
func (r replayer) start(ctx context.Context, project, from, source string) (api.JobRun, error) {
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
	return func(ctx context.Context, progress func(any)) (any, error) {
		return r.run(ctx, project, from, src, progress)
	}, nil
}

// run is the work of a replay: it rebuilds the tables through a Store and
// Reader of its own, whose counters tell its progress.
func (r replayer) run(ctx context.Context, project, from string, src processor.ReplaySource, progress func(any)) (any, error) {
	tracker, err := newReplayTracker(ctx, r.bucket, project)
	if err != nil {
		return nil, err
	}
	defer tracker.follow(progress)()
	scfg := rollups.DefaultConfig()
	scfg.Metrics = tracker.written
	st, err := rollups.NewStore(r.bucket, scfg, nil)
	if err != nil {
		return nil, err
	}
	deps := processor.ReplayDeps{Store: st, Reader: tracker.reader, Catalog: r.cat, Log: r.log}
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
		return replayRemote(ctx, newAdminClient(*sf.adminURL, *sf.adminToken), *project, *from, *source, stdout, stderr)
	}
	logger := newLogger(config{LogLevel: "warn", LogFormat: "text"}, stderr)
	o, err := openOffline(ctx, sf, false, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 1
	}
	defer o.Close()
	run, err := replayer{bucket: o.bucket, log: o.log, cat: o.cat, logger: logger}.start(ctx, *project, *from, *source)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 1
	}
	pp := newProgressPrinter(stderr, "replay", time.Now)
	var last replayProgress
	out, err := run(ctx, func(p any) {
		if rp, ok := p.(replayProgress); ok {
			last = rp
			pp.update(rp)
		}
	})
	pp.done(last, err == nil)
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

// replayRemote runs a replay through a running mf's admin API: it starts
// a replay job and follows its progress until it ends, so that no request
// stays open for the length of the replay. An mf without replay jobs gets
// the single request of before.
func replayRemote(ctx context.Context, admin adminClient, project, from, source string, stdout, stderr io.Writer) int {
	q := url.Values{}
	if from != "" {
		q.Set("from", from)
	}
	q.Set("source", source)
	jobs := "/admin/v1/projects/" + url.PathEscape(project) + "/replays"
	ans, err := admin.call(ctx, http.MethodPost, jobs+"?"+q.Encode())
	code, body := ans.Code, ans.Body
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: cannot reach the admin API: %v\n", err)
		return 1
	}
	if code == http.StatusNotFound && strings.Contains(string(body), "no such admin endpoint") {
		return replayRemoteOnce(ctx, admin, project, q, stdout, stderr)
	}
	if code != http.StatusAccepted {
		fmt.Fprintf(stderr, "mf replay: %d %s: %s\n", code, http.StatusText(code), adminError(body))
		return 1
	}
	var job api.JobState
	if err := json.Unmarshal(body, &job); err != nil || job.ID == "" {
		fmt.Fprintf(stderr, "mf replay: the admin API answered an unreadable job: %s\n", body)
		return 1
	}
	fmt.Fprintf(stderr, "replay job %s started on %s\n", job.ID, admin.base)
	pp := newProgressPrinter(stderr, "replay", time.Now)
	var last replayProgress
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "\nmf replay: stopped following; the replay goes on in mf (GET %s%s/%s)\n", admin.base, jobs, job.ID)
			return 1
		case <-tick.C:
		}
		ans, err := admin.call(ctx, http.MethodGet, jobs+"/"+job.ID)
		code, body := ans.Code, ans.Body
		if err != nil {
			fmt.Fprintf(stderr, "\nmf replay: cannot reach the admin API: %v (the replay goes on in mf: GET %s%s/%s)\n", err, admin.base, jobs, job.ID)
			return 1
		}
		if code != http.StatusOK {
			fmt.Fprintf(stderr, "\nmf replay: %d %s: %s\n", code, http.StatusText(code), adminError(body))
			return 1
		}
		var st struct {
			State    string
			Error    string
			Progress *replayProgress
			Result   *replayReport
		}
		if err := json.Unmarshal(body, &st); err != nil {
			fmt.Fprintf(stderr, "\nmf replay: the admin API answered an unreadable job: %v\n", err)
			return 1
		}
		if st.Progress != nil {
			last = *st.Progress
		}
		switch st.State {
		case api.JobRunning:
			pp.update(last)
		case api.JobDone:
			pp.done(last, true)
			if st.Result == nil {
				fmt.Fprintf(stderr, "mf replay: the job ended without a result\n")
				return 1
			}
			printReplay(stdout, *st.Result)
			return 0
		default:
			pp.done(last, false)
			fmt.Fprintf(stderr, "mf replay: %s\n", st.Error)
			return 1
		}
	}
}

// replayRemoteOnce is the replay of an mf without replay jobs: one request
// that answers when the replay is done.
func replayRemoteOnce(ctx context.Context, admin adminClient, project string, q url.Values, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	req, err := admin.request(ctx, http.MethodPost, "/admin/v1/projects/"+url.PathEscape(project)+"/replay?"+q.Encode(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "mf replay: %v\n", err)
		return 2
	}
	ans, err := admin.send(req)
	if err != nil && ans.Code == 0 {
		fmt.Fprintf(stderr, "mf replay: cannot reach the admin API: %v\n", err)
		return 1
	}
	body := ans.Body
	if ans.Code != http.StatusOK {
		fmt.Fprintf(stderr, "mf replay: %s: %s\n", ans.Status, adminError(body))
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
