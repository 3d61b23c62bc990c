package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/storage"
)

// retentionCase is a case of testdata/retention/cases.json: steps run one
// after the other on the same tables, each with the plan in force and the
// processor's clock, and the first retained day the step must leave (""
// when nothing may be deleted).
type retentionCase struct {
	Name  string
	Steps []struct {
		Plan string
		Now  time.Time
		Cut  string
	}
}

// TestRetention runs the processor with an injected clock over a
// project's history (April to August), moves the clock and the plan step
// by step, and checks after each step that deletes: no Parquet file in the
// store holds a row, time or event id before the step's cut; once the
// batches withheld until the last step are committed (processing went on
// beside retention), the tables are those that processing only the
// retained events gives (data inside the retention untouched, people
// recomputed); and a replay from the archive gives the same tables.
func TestRetention(t *testing.T) {
	raw, err := os.ReadFile("testdata/retention/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []retentionCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("testdata/retention/cases.json: %v", err)
	}
	for _, rc := range cases {
		t.Run(rc.Name, func(t *testing.T) { runRetentionCase(t, rc) })
	}
}

func runRetentionCase(t *testing.T, rc retentionCase) {
	c, all := exactlyOnceInput(t)
	project := c.project.ID
	held := 3 // the last batches (August) wait for the last step
	e := newEnv(t, "")
	now := newStepClock(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) // nothing is past any retention
	e.clock = now.Now
	e.plan = rc.Steps[0].Plan
	e.provision(c)
	seqs := e.publish(all[:len(all)-held]...)
	r := e.start(func(cfg *Config) { cfg.RetentionInterval = 20 * time.Millisecond }, nil)
	defer func() {
		if r != nil {
			r.stop(t)
		}
	}()
	e.waitCheckpoint(project, seqs[len(seqs)-1])

	eng := e.catalogEngine(project)
	var cut int32
	for i, s := range rc.Steps {
		if s.Plan != e.plan {
			e.plan = s.Plan
			e.provision(c)
			waitFor(t, "the catalog to hold plan "+s.Plan, func() bool {
				st := e.cat.State()
				o, ok := st.Organization("0195f3b4-0000-7000-8000-00000000ff01")
				return ok && o.Plan == s.Plan
			})
		}
		before := r.p.Stats()
		now.Step(s.Now)
		if i == len(rc.Steps)-1 {
			seqs = append(seqs, e.publish(all[len(all)-held:]...)...)
		}
		if s.Cut == "" {
			// Two whole looks after the change: nothing went.
			waitFor(t, "two looks at retention", func() bool { return r.p.Stats().RetentionLooks >= before.RetentionLooks+2 })
			if got := r.p.Stats().Retentions; got != before.Retentions {
				t.Fatalf("step %d: %d retention runs, want none (nothing is past retention and grace)", i, got-before.Retentions)
			}
			continue
		}
		d, err := facts.ParseDay(s.Cut)
		if err != nil {
			t.Fatal(err)
		}
		cut = d
		waitFor(t, "the retention run of step "+s.Cut, func() bool { return r.p.Stats().Retentions > before.Retentions })
		checkRetainedFiles(t, e, project, cut, eng.DayStart(cut))
	}
	e.waitCheckpoint(project, seqs[len(seqs)-1])
	r.stop(t)
	r = nil
	if cut != 0 {
		checkRetainedFiles(t, e, project, cut, eng.DayStart(cut))
	}

	// The tables are those of the retained events alone.
	want := e.catalogEngine(project)
	kept := 0
	for _, b := range all {
		nb := *b
		nb.Events = nil
		for _, ev := range b.Events {
			if want.DayOf(ev.Time) >= cut {
				nb.Events = append(nb.Events, ev)
			}
		}
		kept += len(nb.Events)
		want.AddBatch(&nb)
	}
	if kept == 0 {
		t.Fatal("the case keeps no event: it would pass on empty tables")
	}
	live := e.tableDump(project)
	if w := engineDump(t, want, c.project.ReportingCurrency); live != w {
		t.Fatalf("tables after retention differ from processing the retained events only:\n%s", diffLines(live, w))
	}
	// Replay after the deletion equals live.
	deps := ReplayDeps{Store: e.store, Reader: e.reader, Catalog: e.cat, Log: e.log, Logger: testLogger(), Bucket: e.bucket}
	if _, err := Replay(context.Background(), DefaultConfig(), deps, ReplayOptions{Project: project}); err != nil {
		t.Fatal(err)
	}
	if got := e.tableDump(project); got != live {
		t.Fatalf("replay after retention gives other tables:\n%s", diffLines(got, live))
	}
}

// checkRetainedFiles reads back every Parquet file of the project in the
// store: none may hold a time before cutStart (epoch ms: event and
// conversion times, visit starts and ends, first and last seen, claims,
// purchases) or sit in a day partition before cut (a day number).
func checkRetainedFiles(t *testing.T, e *env, project string, cut int32, cutStart int64) {
	t.Helper()
	root := filepath.Join(e.dir, "objects")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since it was listed (a commit the retention run refused)
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") || !strings.Contains(path, project) {
			return err
		}
		files++
		for _, part := range strings.Split(filepath.ToSlash(path), "/") {
			if day, err := facts.ParseDay(part); err == nil && day < cut {
				t.Errorf("%s: a day partition before the cut %s", path, facts.DayName(cut))
			}
		}
		for name, ms := range parquetTimes(t, path) {
			if name == "built_at" {
				continue // a segment's build time, not history
			}
			if ms < cutStart {
				t.Errorf("%s: column %s holds %s, before the cut %s", path, name,
					time.UnixMilli(ms).UTC().Format(time.RFC3339), time.UnixMilli(cutStart).UTC().Format(time.RFC3339))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Parquet file of the project in the store: the check would pass on nothing")
	}
}

// parquetTimes returns the lowest value of each timestamp column of a
// Parquet file (epoch ms), by column name.
func parquetTimes(t *testing.T, path string) map[string]int64 {
	t.Helper()
	f, err := file.OpenParquetFile(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted since it was listed (a commit the retention run refused)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	r, err := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tbl, err := r.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer tbl.Release()
	out := map[string]int64{}
	for i := range int(tbl.NumCols()) {
		col := tbl.Column(i)
		ts, ok := col.DataType().(*arrow.TimestampType)
		if !ok {
			continue
		}
		for _, chunk := range col.Data().Chunks() {
			a := chunk.(*array.Timestamp)
			for j := range a.Len() {
				if a.IsNull(j) {
					continue
				}
				ms := a.Value(j).ToTime(ts.Unit).UnixMilli()
				if cur, ok := out[col.Name()]; !ok || ms < cur {
					out[col.Name()] = ms
				}
			}
		}
	}
	return out
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRetainAccessRecords: the reporting API's access records go once
// older than the longest retention of their user's organizations and the
// grace (testdata/retention/access.json).
func TestRetainAccessRecords(t *testing.T) {
	raw, err := os.ReadFile("testdata/retention/access.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Now       time.Time
		Provision json.RawMessage
		Records   []struct {
			Why, Key, Age, Name string
			Kept                bool
		}
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("testdata/retention/access.json: %v", err)
	}
	e := newEnv(t, "")
	ctx := context.Background()
	if _, err := e.cat.Apply(ctx, c.Provision); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(c.Records))
	for i, r := range c.Records {
		name := r.Name
		if name == "" {
			age, err := time.ParseDuration(r.Age)
			if err != nil {
				t.Fatal(err)
			}
			name = fmt.Sprintf("%020d-p%d.jsonl", c.Now.Add(-age).UnixNano(), i)
		}
		keys[i] = accessRecordsPrefix + r.Key + "/" + name
		if _, err := e.bucket.Put(ctx, keys[i], strings.NewReader(`{"at":"2026-01-01T00:00:00Z"}`+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := retainAccess(ctx, e.bucket, e.cat.State(), c.Now, DefaultConfig().RetentionGrace)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, r := range c.Records {
		_, _, err := storage.ReadAll(ctx, e.bucket, keys[i])
		switch {
		case r.Kept && err != nil:
			t.Errorf("%s: deleted (%v), want kept", r.Why, err)
		case !r.Kept && !errors.Is(err, storage.ErrNotFound):
			t.Errorf("%s: kept, want deleted", r.Why)
		}
		if !r.Kept {
			want++
		}
	}
	if gone != want {
		t.Errorf("retainAccess says %d deleted, want %d", gone, want)
	}
}

// stepClock is a processor clock that a test moves forward to given
// times and that advances with the wall clock in between, as the
// processor's clock must (it measures intervals on it). It never goes
// back: a step to a time it has passed leaves it where it is.
type stepClock struct {
	mu   sync.Mutex
	base time.Time // the time it showed at set
	set  time.Time // the wall clock then
}

func newStepClock(at time.Time) *stepClock { return &stepClock{base: at, set: time.Now()} }

// Now is the clock's time.
func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(time.Since(c.set))
}

// Step moves the clock forward to at.
func (c *stepClock) Step(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.base.Add(time.Since(c.set))) {
		c.base, c.set = at, time.Now()
	}
}
