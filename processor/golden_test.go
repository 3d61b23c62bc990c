package processor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/records"
)

var update = flag.Bool("update", false, "rewrite the want.json files of testdata/golden")

// goldenCase is one directory of testdata/golden: project.json (time zone,
// reporting currency, actions, segments), input.jsonl (one records.Batch
// per line, in log order) and want.json (the facts expected).
type goldenCase struct {
	name    string
	dir     string
	project goldenProject
	batches []*records.Batch
}

type goldenProject struct {
	ID                string             `json:"id"`
	Timezone          string             `json:"timezone"`
	ReportingCurrency string             `json:"reportingCurrency"`
	Actions           []*catalog.Action  `json:"actions"`
	Segments          []*catalog.Segment `json:"segments"`
	// Flags are provisioned as they are (experiment filters name them).
	Flags json.RawMessage `json:"flags,omitempty"`
}

func loadGoldenCases(t testing.TB) []*goldenCase {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*goldenCase
	for _, dir := range dirs {
		c := &goldenCase{name: filepath.Base(dir), dir: dir}
		data, err := os.ReadFile(filepath.Join(dir, "project.json"))
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if err := d.Decode(&c.project); err != nil {
			t.Fatalf("%s/project.json: %v", dir, err)
		}
		c.batches = readBatches(t, filepath.Join(dir, "input.jsonl"))
		out = append(out, c)
	}
	if len(out) < 8 {
		t.Fatalf("only %d golden cases found", len(out))
	}
	return out
}

// readBatches reads JSON lines of records.Batch.
func readBatches(t testing.TB, path string) []*records.Batch {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*records.Batch
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var b records.Batch
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// Go through the log encoding, as the processor does.
		enc, err := records.Encode(&b)
		if err != nil {
			t.Fatalf("%s: batch %s: %v", path, b.ID, err)
		}
		dec, err := records.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *goldenCase) engine(t testing.TB) *facts.Engine {
	t.Helper()
	return c.engineWith(t, 0)
}

// engineWith is engine with Config.BuildWorkers set to workers.
func (c *goldenCase) engineWith(t testing.TB, workers int) *facts.Engine {
	t.Helper()
	loc, err := time.LoadLocation(c.project.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := channels.Default()
	if err != nil {
		t.Fatal(err)
	}
	e, err := facts.New(facts.Config{
		Project:           c.project.ID,
		Location:          loc,
		ReportingCurrency: c.project.ReportingCurrency,
		Actions:           c.project.Actions,
		Segments:          c.project.Segments,
		Classifier:        cl,
		VisitTimeout:      30 * time.Minute,
		BuildWorkers:      workers,
		CheckActivity:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// partitions accumulates the partitions that successive Flushes return,
// the latest version of each, as a table store would hold them.
type partitions map[string]any

func (p partitions) apply(ch *facts.Changes) {
	for d, rows := range ch.EventDays {
		if ch.EventAppend[d] {
			p.add("events/"+facts.DayName(d), rows)
			p.add("conversions/"+facts.DayName(d), ch.ConversionDays[d])
			continue
		}
		p.set("events/"+facts.DayName(d), rows)
	}
	for d, rows := range ch.ConversionDays {
		if !ch.EventAppend[d] {
			p.set("conversions/"+facts.DayName(d), rows)
		}
	}
	for d, rows := range ch.VisitDays {
		applyKeyed(p, "visits/"+facts.DayName(d), ch.WholeVisitDays[d], rows,
			func(r facts.VisitRow) (string, bool) { return string(r.ID[:]), r.Deleted })
	}
	for b, rows := range ch.People {
		applyKeyed(p, "people/"+tables.BucketName(b), ch.WholePeople[b], rows,
			func(r *facts.PersonRow) (string, bool) { return string(r.Ref[:]), r.Deleted })
	}
	for b, rows := range ch.Identities {
		applyKeyed(p, "identities/"+tables.BucketName(b), ch.WholeIdentities[b], rows,
			func(r facts.IdentityRow) (string, bool) { return string(r.Unit[:]), r.Deleted })
	}
	for b, rows := range ch.Members {
		applyKeyed(p, "members/"+tables.BucketName(b), ch.WholeMembers[b], rows,
			func(r facts.MemberRow) (string, bool) { return r.Segment + "/" + string(r.Person[:]), r.Deleted })
	}
}

// applyKeyed merges the rows of a keyed table's partition into it, as the
// store's readers do: a whole partition replaces it, changed rows replace
// the rows of their keys, deletions remove them. A deletion of a key the
// partition does not hold, or a whole partition with one, is an error of
// the engine's: it is kept as a row, so the dump shows it.
func applyKeyed[T any](p partitions, k string, whole bool, rows []T, key func(T) (string, bool)) {
	m, _ := p[k].(map[string]string)
	if whole || m == nil {
		m = map[string]string{}
	}
	for _, r := range rows {
		id, deleted := key(r)
		line, _ := json.Marshal(r)
		if deleted && !whole {
			if _, ok := m[id]; ok {
				delete(m, id)
				continue
			}
			m[id] = "stray deletion " + string(line)
			continue
		}
		m[id] = string(line)
	}
	if len(m) == 0 {
		delete(p, k)
		return
	}
	p[k] = m
}

// set replaces a partition's rows; rows are kept as sorted JSON lines, so
// that rows added in several files compare with rows written at once.
func (p partitions) set(k string, rows any) {
	delete(p, k)
	p.add(k, rows)
}

// add adds rows to a partition.
func (p partitions) add(k string, rows any) {
	b, _ := json.Marshal(rows)
	var list []json.RawMessage
	_ = json.Unmarshal(b, &list)
	if len(list) == 0 {
		return
	}
	var lines []string
	if old, ok := p[k].([]string); ok {
		lines = old
	}
	for _, r := range list {
		lines = append(lines, string(r))
	}
	slices.Sort(lines)
	p[k] = lines
}

// dump is a canonical text of all partitions, for comparing runs.
func (p partitions) dump() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		lines, ok := p[k].([]string)
		if !ok {
			lines = slices.Sorted(maps.Values(p[k].(map[string]string)))
		}
		fmt.Fprintf(&b, "%s\n%s\n", k, strings.Join(lines, "\n"))
	}
	return b.String()
}

func allPartitions(e *facts.Engine) partitions {
	p := partitions{}
	p.apply(e.All())
	return p
}

// TestGolden runs every case of testdata/golden: in log order with a
// flush after each batch, then in shuffled orders, split into single
// events, with random flush points, and across a restart from the
// tables; every run must give the same tables, and the facts must be
// those of want.json.
func TestGolden(t *testing.T) {
	for _, c := range loadGoldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			// In log order, one flush per batch.
			e := c.engine(t)
			flushed := partitions{}
			for _, b := range c.batches {
				e.AddBatch(b)
				flushed.apply(e.Flush())
			}
			want := allPartitions(e)
			if got := flushed.dump(); got != want.dump() {
				t.Fatalf("the partitions written flush by flush differ from the final state:\n%s", diffText(got, want.dump()))
			}
			view := goldenViewOf(t, c, e)
			checkGolden(t, filepath.Join(c.dir, "want.json"), view)

			// Shuffled single events, random flushes.
			singles := explode(c.batches)
			for seed := uint64(1); seed <= 6; seed++ {
				r := rand.New(rand.NewPCG(seed, 0x5eed))
				order := slices.Clone(singles)
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				e := c.engine(t)
				flushed := partitions{}
				for _, b := range order {
					e.AddBatch(b)
					if r.IntN(3) == 0 {
						flushed.apply(e.Flush())
					}
				}
				flushed.apply(e.Flush())
				if got := flushed.dump(); got != want.dump() {
					t.Fatalf("seed %d: a shuffled run gives other tables:\n%s", seed, diffText(got, want.dump()))
				}
			}

			// A restart half way: a new engine rebuilt from the events
			// table, then the rest of the batches (and the first half once
			// more, as a redelivery).
			half := len(c.batches) / 2
			e1 := c.engine(t)
			for _, b := range c.batches[:half] {
				e1.AddBatch(b)
			}
			stored := partitions{}
			stored.apply(e1.Flush())
			e2 := rebuild(t, c, e1.All())
			for _, b := range c.batches {
				e2.AddBatch(b)
			}
			stored.apply(e2.Flush())
			if got := stored.dump(); got != want.dump() {
				t.Fatalf("a run across a restart gives other tables:\n%s", diffText(got, want.dump()))
			}
		})
	}
}

// rebuild makes a new engine from the events table rows, as the processor
// does after a restart.
func rebuild(t testing.TB, c *goldenCase, all *facts.Changes) *facts.Engine {
	e := c.engine(t)
	days := make([]int32, 0, len(all.EventDays))
	for d := range all.EventDays {
		days = append(days, d)
	}
	slices.Sort(days)
	for _, d := range days {
		for _, r := range all.EventDays[d] {
			ev := r.Event()
			ev.Client = e.Client(*ev.Client)
			if !e.Add(ev) {
				t.Fatalf("event %s of the events table was not added again", ev.ID)
			}
		}
	}
	e.Settle()
	return e
}

// explode splits batches into one batch per event.
func explode(bs []*records.Batch) []*records.Batch {
	var out []*records.Batch
	for _, b := range bs {
		for _, ev := range b.Events {
			nb := *b
			nb.Events = []records.Event{ev}
			out = append(out, &nb)
		}
		// A redelivery of the whole batch.
		out = append(out, b)
	}
	return out
}

func diffText(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got: %.600s\nwant: %.600s", i+1, a, b)
		}
	}
	return "(no difference found)"
}

func checkGolden(t *testing.T, path string, view []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, view, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it, then review it)", err)
	}
	if !bytes.Equal(view, want) {
		t.Fatalf("facts differ from %s:\n%s", path, diffText(string(view), string(want)))
	}
}

// TestFlushAppendsNewVisits checks, on generated traffic (browsers,
// sessions, sign-ins, orders), that a Flush appends the rows of events
// that start new visits instead of rewriting their day: in log order,
// every Flush after the first only appends. Out of order (batches shuffled
// within windows of a few minutes, so that events land before events
// already output), days are rewritten where rows changed; in both runs the
// partitions written flush by flush equal the final state.
func TestFlushAppendsNewVisits(t *testing.T) {
	c := benchCase(t)
	bs, _ := newTraffic(c.project.ID, 7).batches(30_000)

	e := c.engine(t)
	flushed := partitions{}
	step := len(bs) / 15
	appended, rewritten := 0, 0
	for i := 0; i < len(bs); i += step {
		for _, b := range bs[i:min(i+step, len(bs))] {
			e.AddBatch(b)
		}
		ch := e.Flush()
		for d := range ch.EventDays {
			switch {
			case ch.EventAppend[d]:
				appended++
			case i > 0:
				rewritten++
				t.Errorf("flush at batch %d rewrote day %s, in log order", i, facts.DayName(d))
			}
		}
		flushed.apply(ch)
	}
	if appended < 15 {
		t.Errorf("%d appends in 16 flushes of traffic in log order", appended)
	}
	want := allPartitions(e)
	if got := flushed.dump(); got != want.dump() {
		t.Fatalf("in log order, the partitions written flush by flush differ from the final state:\n%s", diffText(got, want.dump()))
	}

	// Out of order: shuffle within windows of 200 batches.
	r := rand.New(rand.NewPCG(3, 0x5eed))
	order := slices.Clone(bs)
	for i := 0; i < len(order); i += 200 {
		w := order[i:min(i+200, len(order))]
		r.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
	}
	e = c.engine(t)
	flushed = partitions{}
	rewritten = 0
	for i := 0; i < len(order); i += step / 3 {
		for _, b := range order[i:min(i+step/3, len(order))] {
			e.AddBatch(b)
		}
		ch := e.Flush()
		for d := range ch.EventDays {
			if !ch.EventAppend[d] && i > 0 {
				rewritten++
			}
		}
		flushed.apply(ch)
	}
	if rewritten == 0 {
		t.Errorf("no day rewritten with events out of order: the test shuffles too little")
	}
	if got, want := flushed.dump(), allPartitions(e).dump(); got != want {
		t.Fatalf("out of order, the partitions written flush by flush differ from the final state:\n%s", diffText(got, want))
	}
	if want.dump() != allPartitions(e).dump() {
		t.Fatalf("the order of delivery changed the tables")
	}
}

// TestRestoreAfterDropRows checks that the changes a commit keeps once
// it dropped their rows (their keys) are enough to write every partition
// again after a failed commit: Restore, then the next Flush returns the
// same partitions, with rows.
func TestRestoreAfterDropRows(t *testing.T) {
	c := benchCase(t)
	bs, _ := newTraffic(c.project.ID, 5).batches(3_000)
	e := c.engine(t)
	for _, b := range bs {
		e.AddBatch(b)
	}
	ch := e.Flush()
	want := partitions{}
	want.apply(ch)
	ch.DropRows()
	for d, rows := range ch.EventDays {
		if rows != nil || ch.ConversionDays[d] != nil {
			t.Fatalf("day %s keeps its rows after DropRows", facts.DayName(d))
		}
	}
	if len(ch.EventDays) == 0 || len(ch.VisitDays) == 0 || len(ch.People) == 0 || len(ch.Identities) == 0 {
		t.Fatalf("DropRows dropped partitions: %d event days, %d visit days, %d people buckets, %d identity buckets",
			len(ch.EventDays), len(ch.VisitDays), len(ch.People), len(ch.Identities))
	}
	e.Restore(ch)
	again := partitions{}
	again.apply(e.Flush())
	if got := again.dump(); got != want.dump() {
		t.Fatalf("after Restore, the next Flush writes other partitions:\n%s", diffText(got, want.dump()))
	}
}

// TestAddBatchKeepsNoBatchBytes feeds an engine batches decoded without
// copies (records.DecodeShared, as the processor does), scribbling over
// each record's bytes once it is added: the engine must have copied what
// it keeps, so its tables equal those of an engine fed copied batches.
func TestAddBatchKeepsNoBatchBytes(t *testing.T) {
	c := benchCase(t)
	bs, _ := newTraffic(c.project.ID, 9).batches(5_000)
	shared, copied := c.engine(t), c.engine(t)
	var b records.Batch
	for i, x := range bs {
		data, err := records.Encode(x)
		if err != nil {
			t.Fatal(err)
		}
		own, err := records.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		copied.AddBatch(own)
		if err := records.DecodeShared(data, &b); err != nil {
			t.Fatal(err)
		}
		shared.AddBatch(&b)
		for j := range data {
			data[j] = 'x'
		}
		if i%500 == 0 {
			shared.Flush()
			copied.Flush()
		}
	}
	if got, want := engineDump(t, shared, c.project.ReportingCurrency), engineDump(t, copied, c.project.ReportingCurrency); got != want {
		t.Fatalf("an engine fed shared batches kept bytes of them:\n%s", diffText(got, want))
	}
}
