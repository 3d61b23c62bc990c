package rollups

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/storage"
)

const testProject = "0b5e6f1c-9a7d-4e2b-8c3f-2d1e0f9a8b7c"

// TestStore runs every store case on the local directory and on MinIO.
func TestStore(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, b storage.Bucket)
	}{
		{"WriteCommitRead", testWriteCommitRead},
		{"CommitRace", testCommitRace},
		{"ConcurrentCommitters", testConcurrentCommitters},
		{"CrashBeforeCommit", testCrashBeforeCommit},
		{"Compaction", testCompaction},
		{"Generations", testGenerations},
		{"RangedReads", testRangedReads},
		{"SplitCommits", testSplitCommits},
		{"SplitRace", testSplitRace},
		{"SplitCollect", testSplitCollect},
		{"Upgrade", testUpgrade},
	}
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.fn(t, be.open(t)) })
			}
		})
	}
}

// byDay groups rows by their UTC day.
func byDay(rows []pageview) map[string][]pageview {
	out := map[string][]pageview{}
	for _, r := range rows {
		d := time.UnixMilli(r.Time).UTC().Format(time.DateOnly)
		out[d] = append(out[d], r)
	}
	return out
}

func testWriteCommitRead(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, nil)
	r := newReader(t, b, nil)
	rows := readPageviews(t)

	// Nothing yet: an empty snapshot, and an empty scan.
	sn, err := r.Snapshot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if sn.Manifest().Version != 0 || len(scanRows(t, sn, ScanOptions{})) != 0 {
		t.Fatalf("empty project: %s", describe(sn.Manifest()))
	}

	days := byDay(rows)
	var ch Change
	for day, dayRows := range days {
		// Two files per day, each in its own (unsorted) order.
		half := len(dayRows) / 2
		ch.Add = append(ch.Add, writeRows(t, s, testProject, day, dayRows[:half]))
		ch.Add = append(ch.Add, writeRows(t, s, testProject, day, dayRows[half:]))
	}
	ch.Checkpoints = map[string]string{"processor": "1042"}
	m, err := s.Commit(ctx, Live(testProject), 0, ch)
	if err != nil {
		t.Fatalf("first commit: %v", err)
	}
	if m.Version != 1 || m.Generation != 1 || m.Checkpoint("processor") != "1042" {
		t.Fatalf("after first commit: %s", describe(m))
	}
	for _, f := range ch.Add {
		if f.Min == nil || f.Max == nil || f.Rows == 0 || f.Bytes == 0 || f.RowGroups != 1 {
			t.Errorf("file %s described as %+v", f.Ref(), f)
		}
	}

	sn, err = r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if sn.Manifest().Version != 1 || sn.Manifest().Checkpoint("processor") != "1042" {
		t.Fatalf("reader sees %s", describe(sn.Manifest()))
	}
	got := scanRows(t, sn, ScanOptions{})
	sameRows(t, "all rows", got, rows)

	// Each batch is sorted by the sort key.
	err = sn.Scan(ctx, "pageviews", ScanOptions{}, func(bt Batch) error {
		ps := pageviewRows(t, bt.Record)
		if !slices.IsSortedFunc(ps, pageview.less) {
			return fmt.Errorf("file %s is not sorted by time, event_id", bt.File)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Day ranges read only their partitions.
	for day, dayRows := range days {
		sameRows(t, "day "+day, scanRows(t, sn, ScanOptions{From: day, To: day}), dayRows)
		sameRows(t, "partition "+day, scanRows(t, sn, ScanOptions{Partitions: []string{day}}), dayRows)
	}
	if n := len(scanRows(t, sn, ScanOptions{From: "2030-01-01"})); n != 0 {
		t.Errorf("scan of future days returned %d rows", n)
	}

	// A key range on the first sort-key column returns exactly its rows.
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, pageview.less)
	lo, hi := sorted[5].Time, sorted[len(sorted)-6].Time
	var want []pageview
	for _, p := range rows {
		if p.Time >= lo && p.Time <= hi {
			want = append(want, p)
		}
	}
	sameRows(t, "key range", scanRows(t, sn, ScanOptions{KeyMin: lo, KeyMax: hi}), want)
	sameRows(t, "key range as time", scanRows(t, sn, ScanOptions{KeyMin: time.UnixMilli(lo), KeyMax: time.UnixMilli(hi)}), want)
	one := sorted[len(sorted)/2]
	var exact []pageview
	for _, p := range rows {
		if p.Time == one.Time {
			exact = append(exact, p)
		}
	}
	sameRows(t, "one key", scanRows(t, sn, ScanOptions{KeyMin: one.Time, KeyMax: one.Time}), exact)

	// Projection returns the columns asked for, in that order.
	var n int64
	var revenue int64
	err = sn.Scan(ctx, "pageviews", ScanOptions{Columns: []string{"revenue_cents", "country"}}, func(bt Batch) error {
		rec := bt.Record
		if rec.NumCols() != 2 || rec.ColumnName(0) != "revenue_cents" || rec.ColumnName(1) != "country" {
			return fmt.Errorf("projected schema %s", rec.Schema())
		}
		n += rec.NumRows()
		rc := rec.Column(0).(*array.Int64)
		for i := range rc.Len() {
			if rc.IsValid(i) {
				revenue += rc.Value(i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var wantRevenue int64
	for _, p := range rows {
		if p.RevenueCents != nil {
			wantRevenue += *p.RevenueCents
		}
	}
	if n != int64(len(rows)) || revenue != wantRevenue {
		t.Errorf("projected scan: %d rows, revenue %d; want %d, %d", n, revenue, len(rows), wantRevenue)
	}
	if err := sn.Scan(ctx, "pageviews", ScanOptions{Columns: []string{"nope"}}, func(Batch) error { return nil }); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("scan of an unknown column: %v, want ErrUnknownColumn", err)
	}

	// A second commit moves the checkpoint together with new data.
	extra := genPageviews(1, mustUTCDay(t, "2026-03-29"), 50)
	f := writeRows(t, s, testProject, "2026-03-29", extra)
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{f}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit over version 0 of a project at version 1: %v, want ErrConflict", err)
	}
	m, err = s.Commit(ctx, Live(testProject), 1, Change{Add: []DataFile{f}, Checkpoints: map[string]string{"processor": "1043"}})
	if err != nil {
		t.Fatal(err)
	}
	// A store in another process learns the manifest from the bucket.
	other := newStore(t, b, nil)
	loaded, err := other.Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Version != 2 || loaded.Checkpoint("processor") != "1043" || !slices.Equal(fileKeys(loaded), fileKeys(m)) {
		t.Fatalf("loaded %s, committed %s", describe(loaded), describe(m))
	}
	sn, err = r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "after second commit", scanRows(t, sn, ScanOptions{}), append(slices.Clone(rows), extra...))
}
