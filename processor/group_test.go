package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// TestGroupSharesPartitions runs processor groups on one log of eight
// partitions and six projects: one group holds every partition; a second
// one joining takes half; the first crashing leaves them all to the
// second once their leases expire; a third one joining takes half again.
// Traffic keeps coming between the moves, and each project's tables must
// equal one pass over all its batches: nothing lost or counted twice.
func TestGroupSharesPartitions(t *testing.T) {
	const parts = 8
	e := newEnvWith(t, "", func(c *eventlog.Config) { c.Streams[0].Partitions = parts })
	base := benchCase(t)
	var cases []*goldenCase
	var batches [][]*records.Batch
	used := map[int]bool{}
	for i := 0; len(cases) < 6; i++ {
		id := fmt.Sprintf("0195f3b4-0000-7000-8000-%012d", 100+i)
		k := eventlog.PartitionOf(id, parts)
		if used[k] {
			continue // six projects in six partitions: moves show
		}
		used[k] = true
		c := &goldenCase{name: id, project: goldenProject{ID: id, Timezone: base.project.Timezone, ReportingCurrency: "EUR"}}
		cases = append(cases, c)
		bs, _ := newTraffic(id, uint64(i+1)).batches(3000)
		batches = append(batches, bs)
	}
	e.provision(cases...)

	fast := func(cfg *Config) {
		cfg.Lease.TTL = 2 * time.Second
		cfg.Lease.Poll = 100 * time.Millisecond
	}
	// publish sends the i-th third of every project's batches and waits
	// until every project's tables hold them.
	publish := func(third int) {
		t.Helper()
		last := map[string]uint64{}
		for j, c := range cases {
			bs := batches[j]
			part := bs[third*len(bs)/3 : (third+1)*len(bs)/3]
			seqs := e.publish(part...)
			last[c.project.ID] = seqs[len(seqs)-1]
		}
		for id, seq := range last {
			e.waitCheckpoint(id, seq)
		}
	}
	waitHeld := func(what string, want map[*running]int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			ok := true
			seen := map[int]int{}
			var got []string
			for r, n := range want {
				held := r.p.Held()
				got = append(got, fmt.Sprint(held))
				if len(held) != n {
					ok = false
				}
				for _, k := range held {
					seen[k]++
				}
			}
			for k, n := range seen {
				if n > 1 {
					t.Fatalf("%s: partition %d held by %d processors at once: %v", what, k, n, got)
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: partitions held %v after a minute", what, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	e.shared = true // several groups on one embedded log
	start := func() *running { return e.start(fast, nil) }

	a := start()
	waitHeld("one processor", map[*running]int{a: parts})
	publish(0)

	b := start()
	waitHeld("a second joins", map[*running]int{a: parts / 2, b: parts / 2})
	publish(1)

	a.crash(t)
	waitHeld("the first crashed", map[*running]int{b: parts})

	c := start()
	waitHeld("a third joins", map[*running]int{b: parts / 2, c: parts / 2})
	publish(2)
	b.stop(t)
	waitHeld("the second stopped", map[*running]int{c: parts})
	c.stop(t)

	for j, cs := range cases {
		want := e.catalogEngine(cs.project.ID)
		for _, bt := range batches[j] {
			want.AddBatch(bt)
		}
		if got, w := e.tableDump(cs.project.ID), engineDump(t, want, "EUR"); got != w {
			t.Fatalf("project %s: tables after partitions moved differ from one pass:\n%s", cs.project.ID, diffLines(got, w))
		}
	}
	if st := c.p.Stats(); st.Batches == 0 {
		t.Fatalf("the third processor applied nothing: %+v", st)
	}
}

// TestParkedProjectDoesNotHoldOthers gives two projects of one partition
// traffic while the first one's manifest cannot be read: the second one's
// batches are committed all the same, the first is parked; once its
// manifest is repaired (removed: it starts afresh) the parked project reads
// its batches back and its tables equal one pass over them.
func TestParkedProjectDoesNotHoldOthers(t *testing.T) {
	e := newEnv(t, "")
	var ids []string
	for i := 0; len(ids) < 2; i++ {
		id := fmt.Sprintf("0195f3b4-0000-7000-8000-%012d", 200+i)
		if len(ids) == 0 || eventlog.PartitionOf(id, eventlog.DefaultPartitions) == eventlog.PartitionOf(ids[0], eventlog.DefaultPartitions) {
			ids = append(ids, id)
		}
	}
	base := benchCase(t)
	var cases []*goldenCase
	var batches [][]*records.Batch
	for i, id := range ids {
		cases = append(cases, &goldenCase{name: id, project: goldenProject{ID: id, Timezone: base.project.Timezone, ReportingCurrency: "EUR"}})
		bs, _ := newTraffic(id, uint64(i+7)).batches(2000)
		batches = append(batches, bs)
	}
	e.provision(cases...)
	ctx := context.Background()
	broken := "rollups/" + ids[0] + "/manifest.json"
	if _, err := e.bucket.Put(ctx, broken, strings.NewReader("{not a manifest")); err != nil {
		t.Fatal(err)
	}
	r := e.start(nil, nil)
	defer r.stop(t)
	var last [2]uint64
	for i := range max(len(batches[0]), len(batches[1])) {
		for j := range 2 {
			if i < len(batches[j]) {
				last[j] = e.publish(batches[j][i])[0]
			}
		}
	}
	e.waitCheckpoint(ids[1], last[1])
	if st := r.p.Stats(); st.Parked != 1 {
		t.Fatalf("%d projects parked, want 1 (the one whose manifest is broken): %+v", st.Parked, st)
	}
	if err := e.bucket.Delete(ctx, broken); err != nil {
		t.Fatal(err)
	}
	e.waitCheckpoint(ids[0], last[0])
	if st := r.p.Stats(); st.Parked != 0 {
		t.Fatalf("%d projects still parked after the repair", st.Parked)
	}
	for j, id := range ids {
		want := e.catalogEngine(id)
		for _, bt := range batches[j] {
			want.AddBatch(bt)
		}
		if got, w := e.tableDump(id), engineDump(t, want, "EUR"); got != w {
			t.Fatalf("project %s: tables differ from one pass:\n%s", id, diffLines(got, w))
		}
	}
}

// TestLogPurgedOnceCommittedAndOld runs a partition with a log retention
// of two seconds: once its batches are committed and older than that, the
// log no longer has them, and the tables still hold every event.
func TestLogPurgedOnceCommittedAndOld(t *testing.T) {
	e := newEnv(t, "")
	id := "0195f3b4-0000-7000-8000-000000000300"
	base := benchCase(t)
	e.provision(&goldenCase{name: id, project: goldenProject{ID: id, Timezone: base.project.Timezone, ReportingCurrency: "EUR"}})
	bs, _ := newTraffic(id, 3).batches(3000)
	r := e.start(func(c *Config) { c.LogRetention, c.PurgeInterval = 2*time.Second, 100*time.Millisecond }, nil)
	defer r.stop(t)
	var seqs []uint64
	for i := range 4 { // in rounds, so that the partition marks positions in between
		seqs = append(seqs, e.publish(bs[i*len(bs)/4:(i+1)*len(bs)/4]...)...)
		e.waitCheckpoint(id, seqs[len(seqs)-1])
		time.Sleep(300 * time.Millisecond)
	}
	ctx := context.Background()
	waitGone := time.Now().Add(time.Minute)
	for {
		_, err := e.log.GetMsg(ctx, eventlog.TopicBatches, seqs[0])
		if errors.Is(err, eventlog.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(waitGone) {
			t.Fatalf("the first batch (position %d) is still in the log a minute after it was committed", seqs[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := e.catalogEngine(id)
	for _, bt := range bs {
		want.AddBatch(bt)
	}
	if got, w := e.tableDump(id), engineDump(t, want, "EUR"); got != w {
		t.Fatalf("tables after the purge differ from one pass:\n%s", diffLines(got, w))
	}
}
