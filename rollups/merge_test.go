package rollups

import (
	"fmt"
	"testing"

	"github.com/mfhq/mf/internal/apptest"
)

// A merge streams: the Arrow memory it holds at once follows the number
// of its inputs and the row group size, not the size of the files. The
// same eight files merged at four times the rows hold about the same
// peak, far below the decoded size of the files (a merge that read its
// inputs whole would hold all of them and the merged copy). The merged
// rows are those written, in order.
func TestCompactionStreams(t *testing.T) {
	ctx := t.Context()
	peak := map[int]int64{}
	decoded := map[int]int64{}
	for _, rows := range []int{16_000, 64_000} {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			b := apptest.OpenBucket(t, t.TempDir())
			s := newStore(t, b, func(c *Config) {
				c.RowGroupRows = 4096
				c.CompactQuietAfter = 1 // every partition settled: merged whole
			})
			day := "2026-03-29"
			var all []pageview
			var add []DataFile
			for i := range 8 {
				rs := genPageviews(uint64(100+i), mustUTCDay(t, day), rows)
				all = append(all, rs...)
				f := writeRows(t, s, testProject, day, rs)
				rec, err := s.readFile(ctx, testProject, f, pageviewTable().Schema)
				if err != nil {
					t.Fatal(err)
				}
				decoded[rows] += recordBytes(rec)
				rec.Release()
				add = append(add, f)
			}
			if _, err := s.Update(ctx, Live(testProject), func(*Manifest) (Change, error) { return Change{Add: add}, nil }); err != nil {
				t.Fatal(err)
			}
			st, err := s.Compact(ctx, Live(testProject))
			if err != nil {
				t.Fatal(err)
			}
			if st.Merges != 1 || st.Inputs != 8 || st.Rows != int64(8*rows) {
				t.Fatalf("compaction stats %+v, want the 8 files of %d rows merged into one", st, rows)
			}
			peak[rows] = st.PeakBytes
			t.Logf("%d rows a file: peak %d bytes, files decoded %d bytes", rows, st.PeakBytes, decoded[rows])
			if st.PeakBytes <= 0 {
				t.Fatalf("compaction stats %+v: no peak counted", st)
			}
			sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
			if err != nil {
				t.Fatal(err)
			}
			if files := sn.Manifest().Files(pageviewTable().Name, day); len(files) != 1 || files[0].RowGroups != (8*rows+4095)/4096 {
				t.Fatalf("merged into %v, want one file of row groups of 4096 rows", files)
			}
			sameRows(t, "after the merge", scanRows(t, sn, ScanOptions{}), all)
		})
	}
	if peak[64_000] > decoded[64_000]/2 {
		t.Fatalf("a merge of files of %d decoded bytes held %d at once", decoded[64_000], peak[64_000])
	}
	if peak[64_000] > peak[16_000]*3/2 {
		t.Fatalf("the peak grew with the files: %d bytes for 16,000 rows a file, %d for 64,000", peak[16_000], peak[64_000])
	}
}
