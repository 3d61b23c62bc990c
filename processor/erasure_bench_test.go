package processor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// BenchmarkErasure measures the erasure of one person in a project of a
// million events of typical traffic over 30 days (a tenth of the browsers
// sign in): from the request (RequestErasure) to its record saying done,
// with a live processor that holds the project (its days cold but the
// last hours, so the person's days are read back first). It reports the
// bytes of the live files the erasure rewrote (its commit's files merged
// by the purge into whole partitions), the bytes its commit wrote, the
// partitions rewritten, the cold days read back from the events table
// (days-read-back/op), and the project's size for scale. Each iteration
// erases another person. Run it with:
//
//	go test ./processor -run '^$' -bench BenchmarkErasure -benchtime 5x
func BenchmarkErasure(b *testing.B) {
	c := benchCase(b)
	events := 1_000_000
	if testing.Short() {
		events = 100_000
	}
	// The project is built once (its tables written straight from a fact
	// engine, not through the log: the benchmark measures the erasure, not
	// the backlog) and kept by every run of the sub-benchmark.
	dir := b.TempDir()
	if err := buildErasureBench(b, dir, c, events); err != nil {
		b.Fatal(err)
	}
	b.Run("events="+strconv.Itoa(events), func(b *testing.B) { benchErasure(b, dir, c, events) })
}

func benchErasure(b *testing.B, dir string, c *goldenCase, events int) {
	project := c.project.ID
	e := newEnv(b, dir)
	ctx := context.Background()

	// A live processor that holds the project: one more batch loads it.
	r := e.start(nil, nil)
	defer r.stop(b)
	tr := newTraffic(project, uint64(time.Now().UnixNano()))
	tr.start = time.Date(2026, 9, 30, 12, 0, 0, 0, time.UTC)
	tr.days = 1
	more, _ := tr.batches(1)
	seqs := e.publish(more[0])
	e.waitCheckpoint(project, seqs[0])

	people := knownPeople(b, e, project)
	if len(people) < b.N {
		b.Fatalf("%d signed-in people left, the benchmark needs %d", len(people), b.N)
	}
	deps := ErasureDeps{Bucket: e.bucket, Reader: e.reader, Log: e.log.Publisher(), Catalog: e.cat, Topic: eventlog.TopicBatches}
	var rewritten, committed, partitions, erased, thawed int64
	var total int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		before, err := e.store.Load(ctx, rollups.Live(project))
		if err != nil {
			b.Fatal(err)
		}
		total, _ = storedBytes(before)
		written0 := r.p.Stats().BytesWritten
		thawed0 := r.p.Stats().ThawedDays
		b.StartTimer()
		rec, err := RequestErasure(ctx, deps, project, people[i].String(), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		for {
			st, err := ErasureStatus(ctx, e.bucket, project, rec.ID)
			if err != nil {
				b.Fatal(err)
			}
			if st.State == ErasureDone {
				erased += int64(st.Events)
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		b.StopTimer()
		after, err := e.store.Load(ctx, rollups.Live(project))
		if err != nil {
			b.Fatal(err)
		}
		old := map[string]bool{}
		for name, ts := range before.Tables {
			for _, fs := range ts.Partitions {
				for _, f := range fs {
					old[name+"/"+f.Ref().String()] = true
				}
			}
		}
		for name, ts := range after.Tables {
			for _, fs := range ts.Partitions {
				touched := false
				for _, f := range fs {
					if !old[name+"/"+f.Ref().String()] {
						rewritten += f.Bytes
						touched = true
					}
				}
				if touched {
					partitions++
				}
			}
		}
		committed += r.p.Stats().BytesWritten - written0
		thawed += r.p.Stats().ThawedDays - thawed0
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(rewritten)/n, "rewritten-B/op")
	b.ReportMetric(float64(committed)/n, "committed-B/op")
	b.ReportMetric(float64(partitions)/n, "partitions/op")
	b.ReportMetric(float64(erased)/n, "events-erased/op")
	b.ReportMetric(float64(thawed)/n, "days-read-back/op")
	b.ReportMetric(float64(total), "project-B")
	b.Logf("%d erasures in a project of %d events (%d bytes of tables): %.0f bytes rewritten (%.2f%% of the project), %.0f committed, %.1f partitions, %.1f events erased, %.1f days read back per erasure",
		b.N, events, total, float64(rewritten)/n, 100*float64(rewritten)/n/float64(total), float64(committed)/n, float64(partitions)/n, float64(erased)/n, float64(thawed)/n)
}

// buildErasureBench writes the tables of events events of typical traffic
// over 30 days into dir, as one commit of a fact engine's output.
func buildErasureBench(b *testing.B, dir string, c *goldenCase, events int) error {
	e := newEnv(b, dir)
	defer e.close()
	e.provision(c)
	pid := c.project.ID
	tr := newTraffic(pid, 7)
	tr.days = 30
	bs, _ := tr.batches(events)
	eng := e.catalogEngine(pid)
	var received int64
	for _, x := range bs {
		eng.AddBatch(x)
		received = max(received, x.ReceivedAt)
	}
	bs = nil
	all := eng.All()
	eng.Settle()
	cp := checkpoint{Received: received, Segments: eng.SegmentsFingerprint(), Rev: 1}
	segs := segmentBuilds(e.cat.State(), &project{id: pid, engine: eng}, time.Now().UnixMilli())
	parts := recordsOf(e.store.Allocator(), all, segs, c.project.ReportingCurrency, cp.Rev)
	all.DropRows()
	_, _, err := commit(context.Background(), e.store, Tables(), pid, rollups.Live(pid), parts, DefaultConfig().Checkpoint, cp.String(),
		func(*rollups.Manifest) error { return nil }, nil)
	return err
}

// knownPeople returns the refs of the project's signed-in people.
func knownPeople(b *testing.B, e *env, project string) []records.UUID {
	sn, err := e.reader.Refresh(context.Background(), project)
	if err != nil {
		b.Fatal(err)
	}
	var out []records.UUID
	err = sn.Scan(context.Background(), TablePeople, rollups.ScanOptions{Columns: []string{"ref", "user_id"}}, func(bt rollups.Batch) error {
		refs := bt.Record.Column(0).(*array.FixedSizeBinary)
		for i := range int(bt.Record.NumRows()) {
			if !bt.Record.Column(1).IsNull(i) {
				out = append(out, records.UUID(refs.Value(i)))
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}
