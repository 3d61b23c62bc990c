package processor

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// TestEraseColdDays erases every other person of a project from a live
// processor that holds most of the project's days cold or final (its
// history spans April to August, the late window is 31 days), one person
// at a time, and checks that
//   - the tables equal those of a replay from the log, which applies each
//     erasure in log order to the whole history in memory: their rows are
//     gone from every day, in memory, cold or final, and nobody else's
//     changed;
//   - no row of the tables holds an erased person's ref;
//   - late events behind the erasures, which need the days read back,
//     do not bring them back;
//   - a person who shares no visit or browser with anyone needs no day
//     read back into memory (only the partitions of their own days are
//     read and rewritten), and the erasure records count their events.
func TestEraseColdDays(t *testing.T) {
	c, all := inTimeOrder(exactlyOnceInput(t))
	project := c.project.ID
	e := newEnv(t, "")
	e.provision(c)
	seqs := e.publish(all...)
	r := e.start(nil, nil)
	defer func() {
		if r != nil {
			r.stop(t)
		}
	}()
	e.waitCheckpoint(project, seqs[len(seqs)-1])
	if st := r.p.Stats(); st.TooLate != 0 {
		t.Fatalf("%d events too late: a replay of the log would keep them", st.TooLate)
	}

	people := peopleRefs(t, e, project)
	if len(people) < 4 {
		t.Fatalf("the input has %d people: too few to erase half of them", len(people))
	}
	deps := ErasureDeps{Bucket: e.bucket, Reader: e.reader, Log: e.log.Publisher(), Catalog: e.cat, Topic: eventlog.TopicBatches}
	// Every other person, the one seen last at the end: the late events
	// behind that erasure fall on their days.
	var erase []personSeen
	for i, ps := range people {
		if i%2 == 0 {
			erase = append(erase, ps)
		}
	}
	latest := 0
	for i, ps := range erase {
		if ps.lastSeen > erase[latest].lastSeen {
			latest = i
		}
	}
	last := erase[latest]
	erase = append(slices.Delete(erase, latest, latest+1), last)
	var erased []records.UUID
	alone, events := 0, 0
	for i, ps := range erase {
		ref := ps.ref
		before := r.p.Stats()
		rec, err := RequestErasure(context.Background(), deps, project, ref.String(), time.Now())
		if err != nil {
			t.Fatalf("erasure of %s: %v", ref, err)
		}
		if i == len(erase)-1 {
			// Late events right behind the last erasure: their days are
			// read back while its rows may still be on their way out.
			seqs = append(seqs, e.publish(lateBatch(all, 25))...)
		}
		var done Erasure
		waitFor(t, "erasure "+rec.ID+" done", func() bool {
			done, err = ErasureStatus(context.Background(), e.bucket, project, rec.ID)
			return err == nil && done.State == ErasureDone
		})
		after := r.p.Stats()
		thawed, read := after.ThawedDays-before.ThawedDays, after.ErasedDaysRead-before.ErasedDaysRead
		t.Logf("person %s: %d events erased, %d days read back, %d days rewritten from the tables", ref, done.Events, thawed, read)
		if done.Events > 0 && thawed == 0 && read > 0 {
			alone++
		}
		events += done.Events
		erased = append(erased, ref)
	}
	if alone == 0 {
		t.Fatal("no erasure went without reading days back: the case does not test erasure from days not in memory")
	}
	if events == 0 {
		t.Fatal("the erasures erased no event")
	}
	e.waitCheckpoint(project, seqs[len(seqs)-1])
	if st := r.p.Stats(); st.TooLate != 0 {
		t.Fatalf("%d events too late: a replay of the log would keep them", st.TooLate)
	}
	r.stop(t)
	r = nil

	live := e.tableDump(project)
	for _, ref := range erased {
		if s := base64.StdEncoding.EncodeToString(ref[:]); strings.Contains(live, s) {
			t.Errorf("the tables still hold erased person %s", ref)
		}
	}
	e.checkReplayOfLog(project, live, "the tables after the erasures")
}

// checkReplayOfLog replays the project from the whole log, which applies
// each erasure in its place with the whole history in memory, and fails
// unless the tables come out as live (a tableDump), what names them.
func (e *env) checkReplayOfLog(project, live, what string) {
	e.t.Helper()
	sub, err := e.log.Subscriber(replaySubscriberConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	defer sub.Close()
	rdeps := ReplayDeps{Store: e.store, Reader: e.reader, Catalog: e.cat, Log: e.log, Subscriber: sub, Logger: testLogger(), Bucket: e.bucket}
	if _, err := Replay(context.Background(), DefaultConfig(), rdeps, ReplayOptions{Project: project, Source: ReplayLog}); err != nil {
		e.t.Fatal(err)
	}
	if got := e.tableDump(project); got != live {
		e.t.Fatalf("%s differ from a replay of the log:\n%s", what, diffLines(live, got))
	}
}

// inTimeOrder returns the batches in the order of their newest event,
// each received a second after it: the input as it would arrive in real
// time (nothing too late), so that the days before its last month are
// final by the end.
func inTimeOrder(c *goldenCase, all []*records.Batch) (*goldenCase, []*records.Batch) {
	newest := func(b *records.Batch) int64 {
		var t int64
		for _, ev := range b.Events {
			t = max(t, ev.Time)
		}
		return t
	}
	out := slices.Clone(all)
	slices.SortStableFunc(out, func(a, b *records.Batch) int { return cmp.Compare(newest(a), newest(b)) })
	var received int64
	for i, b := range out {
		nb := *b
		received = max(received+1, newest(b)+1000)
		nb.ReceivedAt = received
		out[i] = &nb
	}
	return c, out
}

// lateBatch returns a batch received a second after the last of all with
// a pageview of a new browser at noon of each of the span days before:
// every cold day of the span is read back for it.
func lateBatch(all []*records.Batch, span int) *records.Batch {
	last := all[len(all)-1]
	for i := len(all) - 1; i >= 0; i-- {
		for _, ev := range all[i].Events {
			if ev.Name != "$pageview" || ev.AnonymousID == "" || ev.UserID != "" || !ev.SessionID.IsZero() {
				continue
			}
			nb := *all[i]
			nb.ID = records.UUID{0xee, 0xee, 0xee}
			nb.ReceivedAt = last.ReceivedAt + 1000
			nb.Events = nil
			noon := last.ReceivedAt/86_400_000*86_400_000 + 12*3_600_000
			for d := 1; d <= span; d++ {
				x := ev
				x.ID = records.UUID{0xee, byte(d)}
				x.Time = noon - int64(d)*86_400_000
				x.AnonymousID = fmt.Sprintf("late-browser-%d", d)
				nb.Events = append(nb.Events, x)
			}
			return &nb
		}
	}
	panic("the input has no anonymous pageview to copy")
}

// personSeen is a person's ref and when they were last seen (epoch ms).
type personSeen struct {
	ref      records.UUID
	lastSeen int64
}

// peopleRefs returns a project's people, sorted by ref.
func peopleRefs(t testing.TB, e *env, project string) []personSeen {
	t.Helper()
	sn, err := e.reader.Refresh(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	var out []personSeen
	err = sn.Scan(context.Background(), TablePeople, rollups.ScanOptions{Columns: []string{"ref", "last_seen"}}, func(b rollups.Batch) error {
		refs := b.Record.Column(0).(*array.FixedSizeBinary)
		seen := b.Record.Column(1).(*array.Timestamp)
		for i := range int(b.Record.NumRows()) {
			out = append(out, personSeen{ref: records.UUID(refs.Value(i)), lastSeen: int64(seen.Value(i))})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b personSeen) int { return slices.Compare(a.ref[:], b.ref[:]) })
	return out
}
