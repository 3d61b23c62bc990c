package rollups

import (
	"fmt"
	"slices"
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
			// The inputs are written in row groups as large as the files
			// (a commit's file is one row group up to 131,072 rows): a
			// merge must not hold an input's whole column chunks.
			w := newStore(t, b, func(c *Config) { c.RowGroupRows = 1 << 17 })
			day := "2026-03-29"
			var all []pageview
			var add []DataFile
			for i := range 8 {
				rs := genPageviews(uint64(100+i), mustUTCDay(t, day), rows)
				all = append(all, rs...)
				f := writeRows(t, w, testProject, day, rs)
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

// A merge reads at most CompactMaxFiles files: a settled partition of
// more files merges in rounds, each file holding its rows in order, until
// one file is left; a keyed partition's rounds keep their deletions until
// the last, whole merge drops them.
func TestCompactionFanIn(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	s := newStore(t, b, func(c *Config) {
		c.CompactMinFiles = 2
		c.CompactMaxFiles = 4
		c.CompactQuietAfter = 1
	})
	day := "2026-03-29"
	var all []pageview
	var add []DataFile
	for i := range 11 {
		rs := genPageviews(uint64(300+i), mustUTCDay(t, day), 50)
		all = append(all, rs...)
		add = append(add, writeRows(t, s, testProject, day, rs))
	}
	rounds := commitAndSettle(t, s, add, 4)
	sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if files := sn.Manifest().Files(pageviewTable().Name, day); len(files) != 1 || rounds < 2 {
		t.Fatalf("%d files after %d rounds; want 1 file after at least 2 rounds (11 files, 4 a merge)", len(files), rounds)
	}
	sameRows(t, "after the rounds", scanRows(t, sn, ScanOptions{}), all)

	// A keyed partition of 7 files of changes (updates and deletions).
	def := accountsTable(true)
	model := accountsModel{}
	add = nil
	for i := range 7 {
		var rows []account
		for id := range uint32(12) {
			if (int(id)+i)%3 == 0 {
				continue
			}
			a := account{team: "blue", id: id, name: fmt.Sprintf("v%d", i), balance: int64(i), rev: int64(i + 1)}
			if (int(id)*7+i)%5 == 0 {
				a = account{id: id, rev: int64(i + 1), del: true}
			}
			rows = append(rows, a)
		}
		model.apply(rows)
		rec := accountsRecord(def, rows)
		f, err := s.Write(ctx, testProject, def, "k", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		add = append(add, f)
	}
	rounds = commitAndSettle(t, s, add, 4)
	if sn, err = newReader(t, b, nil).Refresh(ctx, testProject); err != nil {
		t.Fatal(err)
	}
	files := sn.Manifest().Files("accounts", "k")
	if len(files) != 1 || rounds < 2 {
		t.Fatalf("keyed: %d files after %d rounds; want 1 after at least 2 (7 files, 4 a merge)", len(files), rounds)
	}
	if got, want := scanAccounts(t, sn, ScanOptions{Partitions: []string{"k"}}), model.lines(); !slices.Equal(got, want) {
		t.Fatalf("keyed rows after the rounds:\n got %v\nwant %v", got, want)
	}
	rec, err := s.readFile(ctx, testProject, files[0], def.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if anyDeleted(rec, def.Schema) || int(rec.NumRows()) != len(model.lines()) {
		t.Fatalf("the last file has %d rows (want %d) or deleted rows", rec.NumRows(), len(model.lines()))
	}
}

// commitAndSettle commits the files add, then compacts until nothing is
// left to merge, requiring every merge to read at most maxFiles files,
// and returns the rounds it took.
func commitAndSettle(t *testing.T, s *Store, add []DataFile, maxFiles int) int {
	t.Helper()
	ctx := t.Context()
	if _, err := s.Update(ctx, Live(testProject), func(*Manifest) (Change, error) { return Change{Add: add}, nil }); err != nil {
		t.Fatal(err)
	}
	for rounds := 0; ; rounds++ {
		st, err := s.Compact(ctx, Live(testProject))
		if err != nil {
			t.Fatal(err)
		}
		if st.Merges == 0 {
			return rounds
		}
		if st.MaxInputs > maxFiles || rounds > 10 {
			t.Fatalf("round %d: a merge read %d files (at most %d), or no end", rounds+1, st.MaxInputs, maxFiles)
		}
	}
}

// A keyed merge whose inputs are mostly rows that other files replace
// streams too: a batch none of whose rows is kept is let go of when the
// merge leaves it, and the kept rows are copied out of their batches as
// the merge goes rather than holding every batch a row of the row group
// being built is in. Eight files each write the same 400,000 keys (a
// partition of a table whose rows change every commit, as the
// processor's state does); the newest row of a key is in one of the
// first four files, a different one key by key, and the last four files
// have none. The merge keeps one row in eight and must hold under a sixth
// of the decoded files at once (holding the kept rows' batches to the
// end of the row group takes a third, reading the last four files whole
// two thirds).
func TestKeyedCompactionStreams(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	s := newStore(t, b, func(c *Config) { c.CompactQuietAfter = 1 })
	def := accountsTable(true)
	const keys, files = 400_000, 8
	model := accountsModel{}
	var add []DataFile
	var decoded int64
	for i := range files {
		rows := make([]account, keys)
		for id := range rows {
			rev := int64(i + 1)
			if id%4 == i {
				rev = 100
			}
			rows[id] = account{team: "blue", id: uint32(id), name: fmt.Sprintf("name %d of file %d", id, i), balance: int64(i), rev: rev}
		}
		model.apply(rows)
		rec := accountsRecord(def, rows)
		decoded += recordBytes(rec)
		f, err := s.Write(ctx, testProject, def, "k", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		add = append(add, f)
	}
	if _, err := s.Update(ctx, Live(testProject), func(*Manifest) (Change, error) { return Change{Add: add}, nil }); err != nil {
		t.Fatal(err)
	}
	st, err := s.Compact(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files of %d keys: peak %d bytes, files decoded %d bytes", files, keys, st.PeakBytes, decoded)
	if st.Merges != 1 || st.Inputs != files || st.Rows != keys {
		t.Fatalf("compaction stats %+v, want the %d files merged into %d rows", st, files, keys)
	}
	if st.PeakBytes <= 0 || st.PeakBytes > decoded/6 {
		t.Fatalf("a keyed merge of files of %d decoded bytes held %d at once", decoded, st.PeakBytes)
	}
	sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := scanAccounts(t, sn, ScanOptions{Partitions: []string{"k"}}), model.lines(); !slices.Equal(got, want) {
		t.Fatalf("keyed rows after the merge: %d rows, want %d (first differences: %v)", len(got), len(want), firstLineDiff(got, want))
	}
}

func firstLineDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d: %q, want %q", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
