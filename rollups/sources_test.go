package rollups

import (
	"testing"

	"github.com/mfhq/mf/internal/apptest"
)

// TestScanFetchesASmallFileOnce: a file small enough to be fetched whole
// (ReaderConfig.WholeFileBytes) and cut into many row groups is fetched
// once per scan, not once per row group, whatever the scan's parallelism
// and whether it keeps its columns; a second scan of new columns fetches
// it once more.
func TestScanFetchesASmallFileOnce(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	s := newStore(t, b, func(c *Config) { c.RowGroupRows = 1024 })
	day := mustUTCDay(t, "2026-11-26")
	rows := genPageviews(3, day, 12000)
	f := writeRows(t, s, testProject, "2026-11-26", rows)
	if f.RowGroups < 10 {
		t.Fatalf("the file has %d row groups, want 10 or more", f.RowGroups)
	}
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{f}}); err != nil {
		t.Fatal(err)
	}
	for _, uncached := range []bool{true, false} {
		cb := &countingBucket{Bucket: b}
		r := newReader(t, cb, nil)
		sn, err := r.Refresh(ctx, testProject)
		if err != nil {
			t.Fatal(err)
		}
		cb.take("")
		key := r.layout.file(testProject, f.Ref())
		sameRows(t, "scan", scanRows(t, sn, ScanOptions{Uncached: uncached}), rows)
		if got := cb.take(key); len(got) != 1 {
			t.Fatalf("uncached %v: a scan of %d row groups fetched the file %d times, want once", uncached, f.RowGroups, len(got))
		}
		if got := r.Stats().FileOpens; got != 1 {
			t.Fatalf("uncached %v: %d file opens, want 1", uncached, got)
		}
	}
}
