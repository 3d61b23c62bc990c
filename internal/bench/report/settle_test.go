package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/rollups"
)

// keyedFiles returns, for each keyed table of the live manifest, the
// most files any of its partitions holds.
func keyedFiles(t *testing.T, ctx context.Context, st *rollups.Store) map[string]int {
	t.Helper()
	m, err := st.Load(ctx, rollups.Live(benchProject))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for name, ts := range m.Tables {
		if len(ts.Key) == 0 {
			continue
		}
		for _, part := range ts.PartitionNames() {
			out[name] = max(out[name], len(ts.Partitions[part]))
		}
	}
	return out
}

// answers serves the reporting API of e and returns each question's
// answer, with the links' address replaced by BASE.
func answers(t *testing.T, ctx context.Context, e *env) map[string]string {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	base, stop, err := serveAPI(ctx, e, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out := map[string]string{}
	for name, tm := range timeAPI(ctx, base, benchProject, questions(), 0, 1, io.Discard) {
		if tm.Err != nil || tm.Status != 200 {
			t.Fatalf("%s: status %d, %v: %s", name, tm.Status, tm.Err, tm.Body)
		}
		out[name] = strings.ReplaceAll(string(tm.Body), base, "BASE") // links name the listener's port
	}
	return out
}

// TestSettleKeepsTheAnswers builds testdata/datasets.json's "settle"
// dataset and loads "settle-more" over it, answers the bench's questions, settles the tables (settle),
// restarts and answers again: every answer is the same, and each
// partition of a keyed table is down to one file, where the build had
// left several in some.
func TestSettleKeepsTheAnswers(t *testing.T) {
	cases := loadDatasets(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e, err := openEnv(ctx, dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"settle", "settle-more"} { // two loads: a file of each per keyed partition
		c := cases[name]
		cfg := DefaultConfig()
		cfg.Seed, cfg.People, cfg.Events, cfg.Days = c.Seed, c.People, c.Events, c.Days
		if _, err := build(ctx, cfg, e, berlin(t), io.Discard); err != nil {
			e.close()
			t.Fatal(err)
		}
	}
	before := answers(t, ctx, e)
	unsettled := keyedFiles(t, ctx, e.store)
	several := false
	for _, n := range unsettled {
		several = several || n > 1
	}
	if !several {
		e.close()
		t.Fatalf("the build left one file per keyed partition (%v): nothing to settle, so this test would prove nothing", unsettled)
	}
	var log bytes.Buffer
	if err := settle(ctx, e.bucket, benchProject, nil, &log); err != nil {
		e.close()
		t.Fatal(err)
	}
	e.close()
	t.Logf("%s", log.String())

	e, err = openEnv(ctx, dir, nil, 0) // a restart: nothing read yet
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	settled := keyedFiles(t, ctx, e.store)
	for name, n := range settled {
		if n != 1 {
			t.Errorf("%s: a settled partition holds %d files (before settling: at most %d); want 1", name, n, unsettled[name])
		}
	}
	after := answers(t, ctx, e)
	for name, want := range before {
		if after[name] != want {
			t.Errorf("%s after settling:\n%s\nbefore:\n%s", name, after[name], want)
		}
	}
}
