package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// TestUndecodableBatchParksItsProject gives two projects of one partition
// traffic with an undecodable batch of the first in the middle: the
// second's batches are all committed, the first is parked from the bad
// batch on (its tables hold exactly the batches before it, nothing after
// is lost: the watermark stays below), and a processor started again
// parks it again rather than skipping the batch.
func TestUndecodableBatchParksItsProject(t *testing.T) {
	e := newEnv(t, "")
	var ids []string
	for i := 0; len(ids) < 2; i++ {
		id := fmt.Sprintf("0195f3b4-0000-7000-8000-%012d", 400+i)
		if len(ids) == 0 || eventlog.PartitionOf(id, eventlog.DefaultPartitions) == eventlog.PartitionOf(ids[0], eventlog.DefaultPartitions) {
			ids = append(ids, id)
		}
	}
	base := benchCase(t)
	var cases []*goldenCase
	var batches [][]*records.Batch
	for i, id := range ids {
		cases = append(cases, &goldenCase{name: id, project: goldenProject{ID: id, Timezone: base.project.Timezone, ReportingCurrency: "EUR"}})
		bs, _ := newTraffic(id, uint64(i+11)).batches(600)
		batches = append(batches, bs)
	}
	e.provision(cases...)
	r := e.start(nil, nil)
	half := len(batches[0]) / 2
	e.publish(batches[0][:half]...)
	bad := message.NewMessage("0b5e55ed-0000-4000-8000-000000000002", []byte("\x00 not a batch"))
	bad.Metadata.Set(eventlog.MetaProject, ids[0])
	if err := e.log.Publisher().Publish(eventlog.BatchSubject(ids[0]), bad); err != nil {
		t.Fatal(err)
	}
	e.publish(batches[0][half:]...)
	last := e.publish(batches[1]...)
	e.waitCheckpoint(ids[1], last[len(last)-1])
	waitUntil(t, func() bool { return r.p.Stats().Parked == 1 })
	if st := r.p.Stats(); st.Corrupt != 1 {
		t.Errorf("Stats.Corrupt %d, want 1", st.Corrupt)
	}
	r.stop(t)

	want := e.catalogEngine(ids[0])
	for _, b := range batches[0][:half] {
		want.AddBatch(b)
	}
	if got, w := e.tableDump(ids[0]), engineDump(t, want, "EUR"); got != w {
		t.Fatalf("the parked project's tables are not the batches before the bad one:\n%s", diffLines(got, w))
	}

	// Started again, it reads the bad batch again: parked again.
	r = e.start(nil, nil)
	defer r.stop(t)
	waitUntil(t, func() bool { return r.p.Stats().Parked == 1 })
}

// waitUntil polls cond for up to a minute.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
