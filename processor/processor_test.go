package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// TestProcessorGolden runs every golden case through the real log, the
// real catalog and a real store: the tables must hold exactly the facts
// that the engine derives from the same batches.
func TestProcessorGolden(t *testing.T) {
	for _, c := range loadGoldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "")
			e.provision(c)
			segs, err := NewSegments(e.reader, DefaultSegmentsConfig(), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := e.start(nil, segs)
			// Two halves: the lookup in between makes the processor keep
			// the Segments view current with the changes its commits add.
			half := len(c.batches) / 2
			seqs := e.publish(c.batches[:half]...)
			e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
			if _, err := segs.Lookup(context.Background(), c.project.ID, Unit{UserID: "nobody"}); err != nil {
				t.Fatal(err)
			}
			for _, b := range c.batches[half:] {
				seqs = e.publish(b)
			}
			e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
			r.stop(t)

			want := e.catalogEngine(c.project.ID)
			for _, b := range c.batches {
				want.AddBatch(b)
			}
			if got, w := e.tableDump(c.project.ID), engineDump(t, want, c.project.ReportingCurrency); got != w {
				t.Fatalf("tables differ from the engine's facts:\n%s", diffLines(got, w))
			}
			if c.name == "goals" {
				checkLookups(t, e, segs, c.project.ID)
			}
		})
	}
}

// checkLookups checks segment lookups of the goals case, through the
// processor's updates (segs) and through a fresh reader of the tables.
func checkLookups(t *testing.T, e *env, segs *Segments, project string) {
	refs := map[string]string{}
	for _, s := range e.cat.State().Segments(project) {
		refs[s.Name] = s.Ref
	}
	fresh, err := NewSegments(e.reader, DefaultSegmentsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		unit Unit
		want []string
	}{
		{Unit{UserID: "gina"}, []string{refs["German customers"], refs["Pricing then purchase"]}},
		// A browser gina signed in on answers with her membership.
		{Unit{AnonymousID: "g1"}, []string{refs["German customers"], refs["Pricing then purchase"]}},
		{Unit{AnonymousID: "g2"}, []string{refs["High intent"], refs["Not German customers"]}},
		{Unit{UserID: "hugo"}, []string{refs["Checkout b"]}},
		{Unit{AnonymousID: "never-seen"}, nil},
	} {
		slices.Sort(c.want)
		for name, s := range map[string]*Segments{"processor": segs, "store": fresh} {
			m, err := s.Lookup(context.Background(), project, c.unit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.In, c.want) {
				t.Errorf("%s lookup of %+v: %v, want %v", name, c.unit, m.In, c.want)
			}
			if len(m.Built) != len(refs) || m.RefreshedAt.IsZero() || time.Since(m.RefreshedAt) > 5*time.Minute {
				t.Errorf("%s lookup of %+v: built %v refreshed %v, want all %d segments built just now", name, c.unit, m.Built, m.RefreshedAt, len(refs))
			}
		}
	}
	if _, err := fresh.Lookup(context.Background(), project, Unit{AnonymousID: "a", UserID: "b"}); err == nil {
		t.Error("a lookup with both ids was answered")
	}
}

// exactlyOnceInput is several golden cases as one project, in the order
// their days come (late, sessions, claims, mixed, goals: April to
// August), each batch received when its newest event happened (or right
// after the previous batch): the late events are at most 30 days late, as
// ingest guarantees.
func exactlyOnceInput(t *testing.T) (*goldenCase, []*records.Batch) {
	byName := map[string]*goldenCase{}
	for _, gc := range loadGoldenCases(t) {
		byName[gc.name] = gc
	}
	var all []*records.Batch
	var received int64
	for k, name := range []string{"late", "sessions", "claims", "mixed", "goals"} {
		// Batch and event ids restart in every case: make them unique.
		for _, b := range byName[name].batches {
			nb := *b
			nb.ID[0] = byte(k + 1)
			nb.Events = slices.Clone(b.Events)
			for i := range nb.Events {
				nb.Events[i].ID[0] = byte(k + 1)
				received = max(received, nb.Events[i].Time)
			}
			received += 1000
			nb.ReceivedAt = received
			all = append(all, &nb)
		}
	}
	return byName["goals"], all
}

func replaySubscriberConfig() eventlog.SubscriberConfig { return eventlog.DefaultSubscriberConfig("") }

// TestExactlyOnce stops and crashes the processor between batches, delivers
// batches again (the same batch id: the log drops it; another batch id
// with the same events: the engine drops them), and checks that the
// tables equal those of one uninterrupted pass.
func TestExactlyOnce(t *testing.T) {
	c, all := exactlyOnceInput(t)
	e := newEnv(t, "")
	e.provision(c)
	third := len(all) / 3
	slow := func(cfg *Config) {
		// Commits rarely: a crash then loses acknowledged batches that
		// the next start must read back from the log.
		cfg.FlushInterval = time.Hour
		cfg.BacklogFlushInterval = time.Hour
		cfg.WatermarkInterval = time.Hour
	}

	// 1: an orderly stop after the first third, and a compaction that
	// merges every partition of the keyed tables (the later commits add
	// their changes on top of it).
	r := e.start(nil, nil)
	var seqs []uint64
	for i := 0; i < third; i += third / 4 {
		// A commit per quarter: partitions of several files.
		seqs = e.publish(all[i:min(i+third/4, third)]...)
		e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	}
	r.stop(t)
	scfg := rollups.DefaultConfig()
	scfg.CompactQuietAfter = time.Nanosecond
	cst, err := rollups.NewStore(e.bucket, scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := cst.Compact(context.Background(), rollups.Live(c.project.ID)); err != nil {
		t.Fatal(err)
	} else if cs.Merges == 0 {
		t.Fatal("nothing to compact after the first third: the test needs partitions of several files")
	}

	// 2: the second third, then a crash before any commit.
	seqs = e.publish(all[third : 2*third]...)
	r = e.start(slow, nil)
	waitHandled(t, r.p, seqs[len(seqs)-1])
	r.crash(t)
	m, _ := e.store.Load(context.Background(), rollups.Live(c.project.ID))
	if cp, _ := parseCheckpoint(m.Checkpoint("processor")); cp.Seq >= seqs[len(seqs)-1] {
		t.Fatalf("the crashed processor committed up to %d; the test needs it not to", cp.Seq)
	}

	// 3: redeliveries: every batch again under its id (the log keeps the
	// first copy only), and a copy of some batches under new ids (the
	// engine drops events it knows), then the last third.
	e.publish(all[:2*third]...)
	var copies []*records.Batch
	for i, b := range all[:2*third] {
		if i%2 == 0 {
			nb := *b
			nb.ID[15] ^= 0xff
			copies = append(copies, &nb)
		}
	}
	e.publish(copies...)
	seqs = e.publish(all[2*third:]...)
	r = e.start(nil, nil)
	e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	st := r.p.Stats()
	r.stop(t)
	if st.Events == 0 || st.TooLate != 0 || st.Corrupt != 0 {
		t.Fatalf("the restarted processor applied nothing, or dropped events: %+v", st)
	}

	want := e.catalogEngine(c.project.ID)
	for _, b := range all {
		want.AddBatch(b)
	}
	if got, w := e.tableDump(c.project.ID), engineDump(t, want, c.project.ReportingCurrency); got != w {
		t.Fatalf("tables after stops, a crash and redeliveries differ from one pass:\n%s\n%v\n%v", diffLines(got, w), partitionList(got), partitionList(w))
	}
}

// waitHandled waits until a processor has applied (not committed) the
// batches up to seq.
func waitHandled(t *testing.T, p interface{ Stats() Stats }, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for p.Stats().LastSeq < seq {
		if time.Now().After(deadline) {
			t.Fatalf("processor handled up to %d, not %d, within 90s", p.Stats().LastSeq, seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShuffledDelivery delivers the same events in a shuffled order, one
// event per batch: the tables must be those of the ordered delivery. The
// shuffle moves events months away from their neighbours, further than
// ingest lets them be late, so the late window is widened to a year.
func TestShuffledDelivery(t *testing.T) {
	c, all := exactlyOnceInput(t)
	wide := func(cfg *Config) { cfg.LateWindow = 400 * 24 * time.Hour }
	ordered := newEnv(t, "")
	ordered.provision(c)
	seqs := ordered.publish(all...)
	r := ordered.start(wide, nil)
	ordered.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)

	singles := explode(all)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(singles), func(i, j int) { singles[i], singles[j] = singles[j], singles[i] })
	for i, b := range singles {
		nb := *b
		nb.ID = records.UUID{0xee, byte(i >> 16), byte(i >> 8), byte(i)}
		singles[i] = &nb
	}
	shuffled := newEnv(t, "")
	shuffled.provision(c)
	seqs = shuffled.publish(singles...)
	r = shuffled.start(wide, nil)
	shuffled.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)

	if got, want := shuffled.segmentIDs(c.project.ID, shuffled.tableDump(c.project.ID)),
		ordered.segmentIDs(c.project.ID, ordered.tableDump(c.project.ID)); got != want {
		t.Fatalf("a shuffled delivery gives other tables:\n%s", diffLines(got, want))
	}
}

// TestColdDaysReadBack delivers the shuffled events of TestShuffledDelivery
// to a processor whose days go cold as soon as their visits end (a hot
// window of zero): nearly every late event then needs days read back from
// the tables (facts.Engine.Thaw), and a restart halfway starts with every
// day cold. The tables must be those of the ordered delivery.
func TestColdDaysReadBack(t *testing.T) {
	c, all := exactlyOnceInput(t)
	wide := func(cfg *Config) { cfg.LateWindow = 400 * 24 * time.Hour }
	ordered := newEnv(t, "")
	ordered.provision(c)
	seqs := ordered.publish(all...)
	r := ordered.start(wide, nil)
	ordered.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)

	singles := explode(all)
	rand.New(rand.NewPCG(coldSeed(), 3)).Shuffle(len(singles), func(i, j int) { singles[i], singles[j] = singles[j], singles[i] })
	for i, b := range singles {
		nb := *b
		nb.ID = records.UUID{0xed, byte(i >> 16), byte(i >> 8), byte(i)}
		// Received in the order delivered, after every event's time, so
		// that every day can go cold between two deliveries.
		nb.ReceivedAt = all[len(all)-1].ReceivedAt + int64(i)*1000
		singles[i] = &nb
	}
	cold := func(cfg *Config) {
		wide(cfg)
		cfg.HotWindow = 0
	}
	shuffled := newEnv(t, "")
	shuffled.provision(c)
	// In steps, each committed before the next is sent: days go cold
	// after a commit, and the next step's late events read them back.
	deliver := func(bs []*records.Batch) {
		step := max(len(bs)/20, 1)
		for i := 0; i < len(bs); i += step {
			seqs := shuffled.publish(bs[i:min(i+step, len(bs))]...)
			shuffled.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
		}
	}
	half := len(singles) / 2
	r = shuffled.start(cold, nil)
	deliver(singles[:half])
	first := r.p.Stats()
	r.stop(t)
	r = shuffled.start(cold, nil)
	deliver(singles[half:])
	second := r.p.Stats()
	r.stop(t)
	if first.ThawedDays == 0 || second.ThawedDays == 0 {
		t.Fatalf("days read back: %d before the restart, %d after; the test needs both to read days back", first.ThawedDays, second.ThawedDays)
	}
	t.Logf("days read back: %d before the restart, %d after (%d single-event batches)", first.ThawedDays, second.ThawedDays, len(singles))

	if got, want := shuffled.segmentIDs(c.project.ID, shuffled.tableDump(c.project.ID)),
		ordered.segmentIDs(c.project.ID, ordered.tableDump(c.project.ID)); got != want {
		t.Fatalf("tables built with days read back differ from the ordered delivery's:\n%s", diffLines(got, want))
	}
	shuffled.checkState(c.project.ID, cold)
}

// TestReplay rebuilds a project from its archive and from the log, and
// while the live processor goes on committing: the tables must be those
// of the live processing.
func TestReplay(t *testing.T) {
	c, all := exactlyOnceInput(t)
	e := newEnv(t, "")
	e.provision(c)
	half := len(all) / 2
	seqs := e.publish(all[:half]...)
	r := e.start(nil, nil)
	e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)
	live := e.tableDump(c.project.ID)

	ctx := context.Background()
	deps := ReplayDeps{Store: e.store, Reader: e.reader, Catalog: e.cat, Log: e.log, Logger: testLogger()}
	st, err := Replay(ctx, DefaultConfig(), deps, ReplayOptions{Project: c.project.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.tableDump(c.project.ID); got != live {
		t.Fatalf("replay from the archive gives other tables:\n%s", diffLines(got, live))
	}
	if st.Generation != 2 || st.Checkpoint != seqs[len(seqs)-1] || st.Events == 0 {
		t.Fatalf("replay stats %+v", st)
	}

	sub, err := e.log.Subscriber(replaySubscriberConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deps.Subscriber = sub
	if _, err := Replay(ctx, DefaultConfig(), deps, ReplayOptions{Project: c.project.ID, Source: ReplayLog}); err != nil {
		t.Fatal(err)
	}
	if got := e.tableDump(c.project.ID); got != live {
		t.Fatalf("replay from the log gives other tables:\n%s", diffLines(got, live))
	}

	// From a day on, while the live processor commits the second half.
	deps.Subscriber = nil
	r = e.start(func(cfg *Config) { cfg.FlushInterval = 5 * time.Millisecond }, nil)
	done := make(chan error, 1)
	go func() {
		_, err := Replay(ctx, DefaultConfig(), deps, ReplayOptions{Project: c.project.ID, From: "2026-05-05"})
		done <- err
	}()
	for _, b := range all[half:] {
		seqs = e.publish(b)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)
	want := e.catalogEngine(c.project.ID)
	for _, b := range all {
		want.AddBatch(b)
	}
	if got, w := e.tableDump(c.project.ID), engineDump(t, want, c.project.ReportingCurrency); got != w {
		t.Fatalf("tables after a replay beside the live processor differ from one pass:\n%s", diffLines(got, w))
	}
}

func partitionList(dump string) []string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if l != "" && l[0] != '{' {
			out = append(out, l)
		}
	}
	return out
}

// A Flush builds its partitions' rows on several goroutines: the rows are
// those built on one, flush after flush (run with -race, this also
// checks that the builders only read the engine).
func TestFlushBuildsInParallelAsSerially(t *testing.T) {
	c := benchCase(t)
	bs, _ := newTraffic(c.project.ID, 7).batches(30_000)
	serial, parallel := c.engineWith(t, 1), c.engineWith(t, 4)
	flushes := 0
	check := func() {
		t.Helper()
		a, b := serial.Flush(), parallel.Flush()
		if da, db := changesDump(a), changesDump(b); da != db {
			t.Fatalf("flush %d: the rows built in parallel differ from those built serially:\n%s", flushes, diffText(db, da))
		}
		if a.Empty() {
			t.Fatalf("flush %d is empty", flushes)
		}
		flushes++
	}
	for i, x := range bs {
		serial.AddBatch(x)
		parallel.AddBatch(x)
		if i%3000 == 2999 {
			check()
		}
	}
	check()
	if a, b := serial.All(), parallel.All(); changesDump(a) != changesDump(b) {
		t.Fatal("All differs between serial and parallel builds")
	}
}

// changesDump is a canonical text of what a Flush returned: the rows of
// each partition, and which partitions are appended to or whole.
func changesDump(ch *facts.Changes) string {
	p := partitions{}
	p.apply(ch)
	return fmt.Sprint(p.dump(), ch.EventAppend, ch.WholeVisitDays, ch.WholePeople, ch.WholeIdentities, ch.WholeMembers)
}

func coldSeed() uint64 {
	if s := os.Getenv("MF_COLD_SEED"); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		return n
	}
	return 11
}

// TestSegmentsChangedWhileStopped restarts the processor after the
// segments changed (testdata/segments/changed.json: one segment widened,
// one that depends on it, one new): the memberships restored from the
// state table were evaluated under the old definitions and are evaluated
// again, so the tables equal those of a processor that had the new
// definitions from the start (and the restore equals a fold: the start
// checks it).
func TestSegmentsChangedWhileStopped(t *testing.T) {
	c, all := exactlyOnceInput(t)
	data, err := os.ReadFile(filepath.Join("testdata", "segments", "changed.json"))
	if err != nil {
		t.Fatal(err)
	}
	changed := *c
	changed.project.Segments = nil
	if err := json.Unmarshal(data, &changed.project.Segments); err != nil {
		t.Fatalf("testdata/segments/changed.json: %v", err)
	}

	// Every day goes cold at once: the restart reads no person back,
	// so only the new evaluation changes the restored memberships.
	cold := func(cfg *Config) {
		cfg.LateWindow = 400 * 24 * time.Hour
		cfg.HotWindow = 0
	}
	half := len(all) / 2
	// A batch days after the first half: its visits end, so that no
	// person of it is read back at the restart.
	tick := *all[0]
	tick.ID = records.UUID{0xee, 1}
	tick.Events = slices.Clone(tick.Events)
	at := all[half-1].ReceivedAt + 3*86_400_000
	for i := range tick.Events {
		tick.Events[i].ID = records.UUID{0xee, 2, byte(i)}
		tick.Events[i].Time = at + int64(i)
	}
	tick.ReceivedAt = at + 1000
	all = slices.Insert(slices.Clone(all), half, &tick)
	half++

	e := newEnv(t, "")
	e.provision(c)
	r := e.start(cold, nil)
	seqs := e.publish(all[:half-1]...)
	e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	// Committed after the days went cold: the state written holds them
	// so.
	seqs = e.publish(all[half-1])
	e.waitCheckpoint(c.project.ID, seqs[0])
	r.stop(t)
	if !e.checkpoint(c.project.ID).State {
		t.Fatal("the first run's checkpoint does not say the state table holds the state")
	}
	e.provision(&changed)
	seqs = e.publish(all[half:]...)
	r = e.start(cold, nil)
	e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)

	fresh := newEnv(t, "")
	fresh.provision(&changed)
	seqs = fresh.publish(all...)
	r = fresh.start(cold, nil)
	fresh.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)

	got, want := e.segmentIDs(c.project.ID, e.tableDump(c.project.ID)), fresh.segmentIDs(c.project.ID, fresh.tableDump(c.project.ID))
	if got != want {
		t.Fatalf("tables after the segments changed while stopped differ from those built under the new segments:\n%s", diffLines(got, want))
	}
	if !strings.Contains(want, "segment_members") {
		t.Fatalf("no segment_members rows in the tables:\n%s", want)
	}
	e.checkState(c.project.ID, cold)
}

// TestStopCommitsTheDaysThatWentCold: days go cold after a commit
// (Freeze follows it), so the state rows of the last commit name them as
// days in memory; a processor that stops commits them as cold, and the
// next start reads back only the days that were still in memory.
func TestStopCommitsTheDaysThatWentCold(t *testing.T) {
	c, all := exactlyOnceInput(t)
	cold := func(cfg *Config) {
		cfg.LateWindow = 400 * 24 * time.Hour
		cfg.HotWindow = 0
	}
	e := newEnv(t, "")
	e.provision(c)
	seqs := e.publish(all...)
	r := e.start(cold, nil)
	e.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	r.stop(t)
	live := r.p.Stats()
	cfg := DefaultConfig()
	cold(&cfg)
	sub, err := e.log.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	p, err := New(cfg, Deps{Subscriber: sub, Log: e.log, Store: e.store, Reader: e.reader, Bucket: e.bucket, Catalog: e.cat,
		Logger: testLogger(), Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := p.load(t.Context(), c.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	days := map[string]bool{}
	for _, b := range all {
		for _, ev := range b.Events {
			days[time.UnixMilli(ev.Time).UTC().Format(time.DateOnly)] = true
		}
	}
	st := ps.engine.Stats()
	t.Logf("%d days with events, %d in memory when the processor stopped; the start read back %d days, %d events", len(days), live.HotDays, st.ThawedDays, st.ThawedEvents)
	if live.HotDays >= int64(len(days)) || st.ThawedDays > live.HotDays {
		t.Fatalf("the start read back %d days, the processor stopped with %d in memory; want at most those, fewer than the %d days with events",
			st.ThawedDays, live.HotDays, len(days))
	}
}
