package processor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// testLogger is the tests' logger (apptest.Logger: debug lines on stderr
// when MF_TEST_LOG=1).
func testLogger() *slog.Logger { return apptest.Logger() }

// env is the real parts of one process (apptest.Stack: the embedded log,
// the catalog on it, a local object store) with the rollups store and
// reader on its bucket.
type env struct {
	t      testing.TB
	dir    string
	stack  *apptest.Stack
	log    *eventlog.Log
	cat    *catalog.Catalog
	bucket storage.Bucket
	store  *rollups.Store
	reader *rollups.Reader
	// plan is the organization's plan provision gives ("pro" when empty).
	plan string
	// clock, when set, is the processors' clock (Deps.Clock).
	clock func() time.Time
	// shared: the processors started share the embedded log as separate
	// processes share an external one (no takeover of leases at start).
	shared bool
}

// newEnv opens an environment in dir (a new temporary directory when "").
func newEnv(t testing.TB, dir string) *env {
	t.Helper()
	return newEnvWith(t, dir, nil)
}

// newEnvWith is newEnv with the log's configuration edited.
func newEnvWith(t testing.TB, dir string, editLog func(*eventlog.Config)) *env {
	t.Helper()
	st := apptest.Start(t, apptest.Options{Dir: dir, Log: editLog})
	store, err := rollups.NewStore(st.Bucket, rollups.DefaultConfig(), st.Logger)
	if err != nil {
		t.Fatal(err)
	}
	rcfg := rollups.DefaultReaderConfig()
	rcfg.Freshness = 0
	rd, err := rollups.NewReader(st.Bucket, rcfg, st.Logger)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, dir: st.Dir, stack: st, log: st.Log, cat: st.Catalog, bucket: st.Bucket, store: store, reader: rd}
}

// close closes the parts before the test ends (a second env on the same
// directory opens them again).
func (e *env) close() { _ = e.stack.Close() }

// provision applies a provisioning file with one project per case (its
// id, time zone, currency, actions and segments) and the two sources the
// golden inputs use.
func (e *env) provision(cases ...*goldenCase) {
	e.t.Helper()
	var projects []string
	for i, c := range cases {
		acts, _ := json.Marshal(c.project.Actions)
		var segs []string
		for _, s := range c.project.Segments {
			fs, _ := json.Marshal(s.Filters)
			segs = append(segs, fmt.Sprintf(`{"id":%q,"name":%q,"filters":%s}`, s.ID, s.Name, fs))
		}
		projects = append(projects, fmt.Sprintf(`{"id":%q,"slug":"p%d","name":"P%d","timezone":%q,"reportingCurrency":%q,
			"createdAt":"2026-01-05T10:00:00Z","sources":[
			{"id":"0195f3b4-0000-7000-8000-%010xa1","name":"Web","kind":"website","mode":"full","key":"mf_web%05d_k"},
			{"id":"0195f3b4-0000-7000-8000-%010xa2","name":"Srv","kind":"server","mode":"full","key":"mf_srv%05d_k"}],
			"actions":%s,"segments":[%s],"flags":%s}`, c.project.ID, i, i, c.project.Timezone, c.project.ReportingCurrency, i, i, i, i,
			stripProject(acts), strings.Join(segs, ","), flagsOf(c)))
	}
	file := fmt.Sprintf(`{"organizations":[{"id":"0195f3b4-0000-7000-8000-00000000ff01","slug":"org","name":"Org","plan":%q,"featureFlags":true,"projects":[%s]}]}`,
		cmp.Or(e.plan, "pro"), strings.Join(projects, ","))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.cat.Apply(ctx, []byte(file)); err != nil {
		e.t.Fatalf("cannot provision: %v\n%s", err, file)
	}
}

func flagsOf(c *goldenCase) string {
	if len(c.project.Flags) == 0 {
		return "[]"
	}
	return string(c.project.Flags)
}

// stripProject drops the "project" field of actions (the file nests them).
func stripProject(acts []byte) string {
	var list []map[string]any
	d := json.NewDecoder(bytes.NewReader(acts))
	d.UseNumber()
	_ = d.Decode(&list)
	for _, a := range list {
		delete(a, "project")
		if a["role"] == "" {
			delete(a, "role")
		}
		if a["description"] == nil {
			delete(a, "description")
		}
	}
	out, _ := json.Marshal(list)
	if string(out) == "null" {
		return "[]"
	}
	return string(out)
}

// publish stores batches on the log as ingest does (the batch message,
// dedupe by project and batch id) and returns their positions.
func (e *env) publish(bs ...*records.Batch) []uint64 {
	e.t.Helper()
	pub := e.log.Publisher()
	seqs := make([]uint64, len(bs))
	for i, b := range bs {
		msg, err := eventlog.NewBatchMessage(b)
		if err != nil {
			e.t.Fatal(err)
		}
		// A minute per message, not for all: a benchmark publishes half a
		// million batches on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r, err := pub.PublishOnce(ctx, eventlog.BatchSubject(b.Project), eventlog.BatchDedupeID(b.Project, b.ID), msg)
		cancel()
		if err != nil {
			e.t.Fatalf("cannot publish: %v", err)
		}
		seqs[i] = r.Seq
	}
	return seqs
}

// running is a processor group running in the background.
type running struct {
	p      *Group
	cancel context.CancelFunc
	done   chan error
	sub    *eventlog.Subscriber
}

// start runs a processor.
func (e *env) start(edit func(*Config), segs *Segments) *running {
	e.t.Helper()
	cfg := DefaultConfig()
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.BacklogFlushInterval = 200 * time.Millisecond
	// Claims that move are written to cold visits at every commit, so a
	// test's last checkpoint has them (TestColdDaysWithResidents also
	// runs with them pending across a restart).
	cfg.ReclaimInterval = 0
	cfg.stateRoundTrip = os.Getenv("MF_STATE_ROUND_TRIP") != ""
	cfg.checkActivity = true
	cfg.checkRestore = true
	if edit != nil {
		edit(&cfg)
	}
	sub, err := e.log.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := NewGroup(cfg, Deps{Subscriber: sub, Log: e.log, Store: e.store, Reader: e.reader, Bucket: e.bucket,
		Catalog: e.cat, Segments: segs, Logger: testLogger(), Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	p.noTakeover = e.shared
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1), sub: sub}
	go func() { r.done <- p.Run(ctx) }()
	return r
}

// stop ends a processor the orderly way (it commits what it applied).
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("processor: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("processor did not stop within 2 minutes")
	}
	r.sub.Close()
}

// crash ends a processor as a crash would: no final commit; messages
// acknowledged but not committed stay so.
func (r *running) crash(t testing.TB) {
	t.Helper()
	r.p.crash.Store(true)
	r.stop(t)
}

// waitCheckpoint waits until the project's tables hold every batch up to
// seq, polling the store.
// checkpoint reads the project's checkpoint from its live manifest.
func (e *env) checkpoint(project string) checkpoint {
	e.t.Helper()
	m, err := e.store.Load(context.Background(), rollups.Live(project))
	if err != nil {
		e.t.Fatal(err)
	}
	cp, err := parseCheckpoint(m.Checkpoint("processor"))
	if err != nil {
		e.t.Fatal(err)
	}
	return cp
}

func (e *env) waitCheckpoint(project string, seq uint64) *rollups.Manifest {
	e.t.Helper()
	return e.waitCheckpointWhile(project, seq, nil)
}

// waitCheckpointWhile is waitCheckpoint where progress, when not nil,
// also counts as progress when the number it returns grows (the
// processor's handled position: on a loaded machine one commit of a large
// backlog can take longer than 90s).
func (e *env) waitCheckpointWhile(project string, seq uint64, progress func() uint64) *rollups.Manifest {
	e.t.Helper()
	// Fails only when the checkpoint stops moving for 90s: a large
	// backlog may take longer than that on a loaded machine.
	deadline := time.Now().Add(90 * time.Second)
	var last, lastProgress uint64
	for {
		if progress != nil {
			if n := progress(); n > lastProgress {
				lastProgress, deadline = n, time.Now().Add(90*time.Second)
			}
		}
		m, err := e.store.Load(context.Background(), rollups.Live(project))
		if err != nil {
			e.t.Fatal(err)
		}
		cp, _ := parseCheckpoint(m.Checkpoint("processor"))
		if cp.Seq >= seq {
			return m
		}
		if cp.Seq > last {
			last, deadline = cp.Seq, time.Now().Add(90*time.Second)
		}
		if time.Now().After(deadline) {
			// Say where everything stands, to tell a stall from slowness.
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			e.t.Logf("goroutines:\n%s", buf)
			e.t.Fatalf("project %s: checkpoint %d, still not %d after 90s without progress", project, cp.Seq, seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tableDump reads every table of a project (but the build times of the
// segments table) as canonical text: per partition, the rows as JSON.
func (e *env) tableDump(project string) string {
	e.t.Helper()
	ctx := context.Background()
	sn, err := e.reader.Refresh(ctx, project)
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	m := sn.Manifest()
	names := make([]string, 0, len(m.Tables))
	for n := range m.Tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == TableSegments || name == TableState {
			continue // the state: checkState
		}
		for _, part := range m.Tables[name].PartitionNames() {
			// Keyed tables are read merged (a partition whose rows were
			// all deleted reads as none); their revs depend on the
			// commits that wrote them, not on the facts.
			var rows strings.Builder
			err := sn.Scan(ctx, name, rollups.ScanOptions{Partitions: []string{part}, Columns: factColumns(m.Tables[name].Schema())},
				func(bt rollups.Batch) error {
					return array.RecordToJSON(bt.Record, &rows)
				})
			if rows.Len() > 0 {
				fmt.Fprintf(&b, "%s/%s\n%s", name, part, rows.String())
			}
			if err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return sortRows(b.String())
}

// segmentIDs replaces the segment refs in a dump (random, made by each
// catalog) by the segments' ids, to compare two environments.
func (e *env) segmentIDs(project, dump string) string {
	for _, s := range e.cat.State().Segments(project) {
		dump = strings.ReplaceAll(dump, `"`+s.Ref+`"`, `"segment:`+s.ID+`"`)
	}
	return sortRows(dump)
}

// sortRows sorts the rows of each partition of a dump: a partition may
// hold several files (rows appended), and rows sorted by segment ref come
// in another order in another environment.
func sortRows(dump string) string {
	var out []string
	var block []string
	flush := func() {
		slices.Sort(block)
		out = append(out, block...)
		block = nil
	}
	for _, l := range strings.Split(dump, "\n") {
		if l != "" && l[0] == '{' {
			block = append(block, l)
			continue
		}
		flush()
		out = append(out, l)
	}
	flush()
	return strings.Join(out, "\n")
}

// engineDump is what tableDump should read for an engine's facts.
// checkState loads the project as a restart does, from its state table,
// and by folding its events table, and fails unless both give the same
// state (facts.Engine.State).
func (e *env) checkState(project string, edit func(*Config)) {
	e.t.Helper()
	ctx := context.Background()
	load := func(fold bool) []facts.StateRow {
		cfg := DefaultConfig()
		if edit != nil {
			edit(&cfg)
		}
		cfg.foldOnly = fold
		sub, err := e.log.Subscriber(eventlog.DefaultSubscriberConfig(""))
		if err != nil {
			e.t.Fatal(err)
		}
		defer sub.Close()
		p, err := New(cfg, Deps{Subscriber: sub, Log: e.log, Store: e.store, Reader: e.reader, Bucket: e.bucket, Catalog: e.cat,
			Logger: testLogger(), Clock: e.clock})
		if err != nil {
			e.t.Fatal(err)
		}
		ps, err := p.load(ctx, project)
		if err != nil {
			e.t.Fatal(err)
		}
		return ps.engine.State()
	}
	cp := e.checkpoint(project)
	if !cp.State {
		e.t.Fatalf("the checkpoint %+v does not say the state table holds the state", cp)
	}
	restored, folded := load(false), load(true)
	if diff := facts.DiffStates(restored, folded); diff != "" {
		e.t.Fatalf("state restored from the state table (%d rows) differs from the state folded from the events table (%d rows): %s",
			len(restored), len(folded), diff)
	}
}

func engineDump(t testing.TB, eng *facts.Engine, reporting string) string {
	t.Helper()
	// Built on a pool, checked: every buffer a record takes is given back.
	alloc := memory.NewCheckedAllocator(rollups.NewBufferPool(64 << 20))
	defer alloc.AssertSize(t, 0)
	parts := recordsOf(alloc, eng.All(), nil, reporting, 1)
	byTable := map[string][]partitionRows{}
	for _, p := range parts {
		if p.build != nil && p.table != TableState {
			byTable[p.table] = append(byTable[p.table], p)
		}
	}
	var b strings.Builder
	for _, name := range slices.Sorted(mapsKeys(byTable)) {
		ps := byTable[name]
		slices.SortFunc(ps, func(a, b partitionRows) int { return strings.Compare(a.partition, b.partition) })
		for _, p := range ps {
			fmt.Fprintf(&b, "%s/%s\n", name, p.partition)
			// The store sorts rows by the sort key; the engine's rows are
			// in that order already.
			rec := p.build()
			facts := withColumns(rec, factColumns(rec.Schema()))
			if err := array.RecordToJSON(facts, &b); err != nil {
				t.Fatal(err)
			}
			facts.Release()
			rec.Release()
		}
	}
	return sortRows(b.String())
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// catalogEngine is a pure engine with the catalog's view of a project (the
// refs of its segments as the catalog made them).
func (e *env) catalogEngine(project string) *facts.Engine {
	e.t.Helper()
	cl, err := channels.Default()
	if err != nil {
		e.t.Fatal(err)
	}
	cfg, ok := engineConfig(project, e.cat.State(), cl, 30*time.Minute)
	if !ok {
		e.t.Fatalf("catalog has no project %s", project)
	}
	eng, err := facts.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return eng
}

// rewriteProject returns copies of batches for another project id.
func rewriteProject(bs []*records.Batch, project string) []*records.Batch {
	out := make([]*records.Batch, len(bs))
	for i, b := range bs {
		nb := *b
		nb.Project = project
		out[i] = &nb
	}
	return out
}

func diffLines(got, want string) string { return diffText(got, want) }

// factColumns are the columns of a table's schema but the rev and
// deleted columns of keyed tables and the activity table's sets (their
// person numbers are each engine's own; their sizes are compared, and
// Config.CheckActivity checks the sets against the persons at every
// Flush).
func factColumns(s *arrow.Schema) []string {
	var out []string
	activity := s.Equal(tables.ActivitySchema)
	for _, f := range s.Fields() {
		if activity && f.Name == tables.ColPeople {
			continue
		}
		if f.Name != rollups.RevColumn && f.Name != rollups.DeletedColumn {
			out = append(out, f.Name)
		}
	}
	return out
}

// withColumns returns the named columns of rec.
func withColumns(rec arrow.Record, names []string) arrow.Record {
	fields := make([]arrow.Field, len(names))
	cols := make([]arrow.Array, len(names))
	for i, n := range names {
		j := rec.Schema().FieldIndices(n)[0]
		fields[i], cols[i] = rec.Schema().Field(j), rec.Column(j)
	}
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}
