package rollups

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/mfhq/mf/storage"
)

// accountsTable is a keyed table: rows by id, sorted by (team, id).
func accountsTable(keyed bool) *Table {
	fields := []arrow.Field{
		{Name: "team", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: &arrow.FixedSizeBinaryType{ByteWidth: 4}},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "balance", Type: arrow.PrimitiveTypes.Int64},
	}
	t := &Table{Name: "accounts", SortKey: []string{"team", "id"}}
	if keyed {
		fields = append(fields,
			arrow.Field{Name: RevColumn, Type: arrow.PrimitiveTypes.Int64},
			arrow.Field{Name: DeletedColumn, Type: arrow.FixedWidthTypes.Boolean})
		t.Key = []string{"id"}
	}
	t.Schema = arrow.NewSchema(fields, nil)
	return t
}

// account is a row of accounts; del marks a deleted row.
type account struct {
	team    string
	id      uint32
	name    string
	balance int64
	rev     int64
	del     bool
}

func (a account) String() string {
	return fmt.Sprintf("%s/%08x %q %d", a.team, a.id, a.name, a.balance)
}

func accountsRecord(t *Table, rows []account) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, t.Schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.team)
		b.Field(1).(*array.FixedSizeBinaryBuilder).Append([]byte{byte(r.id >> 24), byte(r.id >> 16), byte(r.id >> 8), byte(r.id)})
		if r.name == "" {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(r.name)
		}
		b.Field(3).(*array.Int64Builder).Append(r.balance)
		if len(t.Key) > 0 {
			b.Field(4).(*array.Int64Builder).Append(r.rev)
			b.Field(5).(*array.BooleanBuilder).Append(r.del)
		}
	}
	return b.NewRecord()
}

// scanAccounts reads the live accounts of a partition as text lines, in
// the order the scan returns them.
func scanAccounts(t *testing.T, sn *Snapshot, opts ScanOptions) []string {
	t.Helper()
	var out []string
	err := sn.Scan(t.Context(), "accounts", opts, func(b Batch) error {
		rec := b.Record
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for i := range int(rec.NumRows()) {
			id := col("id").(*array.FixedSizeBinary).Value(i)
			name := ""
			if n := col("name"); n.IsValid(i) {
				name = n.(*array.String).Value(i)
			}
			a := account{team: col("team").(*array.String).Value(i), id: uint32(id[0])<<24 | uint32(id[1])<<16 | uint32(id[2])<<8 | uint32(id[3]),
				name: name, balance: col("balance").(*array.Int64).Value(i)}
			out = append(out, a.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// accountsModel is what a keyed partition must read as: the latest row
// of each id, deleted ones gone, in (team, id) order.
type accountsModel map[uint32]account

func (m accountsModel) apply(rows []account) {
	for _, r := range rows {
		if old, ok := m[r.id]; ok && old.rev > r.rev {
			continue
		}
		m[r.id] = r
	}
}

func (m accountsModel) lines() []string {
	rows := slices.Collect(maps.Values(m))
	rows = slices.DeleteFunc(rows, func(a account) bool { return a.del })
	slices.SortFunc(rows, func(a, b account) int {
		if c := strings.Compare(a.team, b.team); c != 0 {
			return c
		}
		return int(int64(a.id) - int64(b.id))
	})
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.String()
	}
	return out
}

// TestKeyedTable writes random changes of a keyed table file by file, a
// rev per commit (updates, deletes, keys deleted and written again,
// changes of the sort key), and after each commit reads it merged: it
// must equal the model, also through a key range and a column subset,
// also after compactions between the commits and a compaction that a
// commit overtakes (its output listed after newer files), whole or of all
// files but the oldest, and a last compaction leaves one file per
// partition without deleted rows.
func TestKeyedTable(t *testing.T) {
	ctx := context.Background()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	st := newStore(t, b, func(c *Config) { c.CompactMinFiles, c.CompactQuietAfter = 3, time.Hour })
	rd := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	def := accountsTable(true)
	r := rand.New(rand.NewPCG(11, 12))
	models := map[string]accountsModel{"p0": {}, "p1": {}}
	teams := []string{"blue", "green", "red"}
	rev := int64(0)
	for step := range 40 {
		rev++
		var add []DataFile
		for part, m := range models {
			var rows []account
			seen := map[uint32]bool{}
			for range 1 + r.IntN(30) {
				id := uint32(r.IntN(60))
				if seen[id] {
					continue // one row per key and file
				}
				seen[id] = true
				a := account{team: teams[r.IntN(len(teams))], id: id, name: fmt.Sprintf("n%d", r.IntN(5)), balance: r.Int64N(1000), rev: rev}
				switch r.IntN(5) {
				case 0:
					a = account{team: "", id: id, rev: rev, del: true}
				case 1:
					a.name = ""
				}
				rows = append(rows, a)
			}
			rec := accountsRecord(def, rows)
			f, err := st.Write(ctx, "p", def, part, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			add = append(add, f)
			m.apply(rows)
		}
		switch step % 5 {
		case 3:
			// A compaction that a commit overtakes: the partitions merge
			// as they were, this step's files are committed, then the
			// merge: its output is listed after them, and their rows,
			// with higher revs, must still win.
			m, err := st.Load(ctx, Live("p"))
			if err != nil {
				t.Fatal(err)
			}
			// Every other time the merge leaves the oldest file out: it
			// must keep its deletions, which may stand for rows of that
			// file.
			whole := step%10 == 3
			var merged Change
			for part := range models {
				files := m.Files("accounts", part)
				if !whole && len(files) > 1 {
					files = files[1:]
				}
				out, _, err := st.mergeFiles(ctx, "p", def, part, files, whole)
				if err != nil {
					t.Fatal(err)
				}
				merged.Add = append(merged.Add, out...)
				for _, f := range files {
					merged.Remove = append(merged.Remove, f.Ref())
				}
			}
			if _, err := st.Update(ctx, Live("p"), func(*Manifest) (Change, error) { return Change{Add: add}, nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Update(ctx, Live("p"), func(*Manifest) (Change, error) { return merged, nil }); err != nil {
				t.Fatal(err)
			}
		case 4:
			if _, err := st.Update(ctx, Live("p"), func(*Manifest) (Change, error) { return Change{Add: add}, nil }); err != nil {
				t.Fatal(err)
			}
			before, err := st.Load(ctx, Live("p"))
			if err != nil {
				t.Fatal(err)
			}
			cs, err := st.Compact(ctx, Live("p"))
			if err != nil {
				t.Fatal(err)
			}
			if cs.Merges == 0 && len(before.Files("accounts", "p0")) >= 3 {
				t.Fatalf("step %d: no merge of a partition of %d files", step, len(before.Files("accounts", "p0")))
			}
		default:
			if _, err := st.Update(ctx, Live("p"), func(*Manifest) (Change, error) { return Change{Add: add}, nil }); err != nil {
				t.Fatal(err)
			}
		}
		sn, err := rd.Refresh(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		for part, m := range models {
			got := scanAccounts(t, sn, ScanOptions{Partitions: []string{part}})
			if want := m.lines(); !slices.Equal(got, want) {
				t.Fatalf("step %d partition %s (%d files):\n got %d rows %v\nwant %d rows %v", step, part,
					len(sn.Manifest().Files("accounts", part)), len(got), got, len(want), want)
			}
			// A key range on the first sort-key column bounds the merged rows.
			var green []string
			for _, l := range m.lines() {
				if strings.HasPrefix(l, "green/") {
					green = append(green, l)
				}
			}
			if got := scanAccounts(t, sn, ScanOptions{Partitions: []string{part}, KeyMin: "green", KeyMax: "green"}); !slices.Equal(got, green) {
				t.Fatalf("step %d partition %s, team green:\n got %v\nwant %v", step, part, got, green)
			}
		}
		// Columns asked for: the merge still sees key, rev and deleted.
		n := 0
		err = sn.Scan(ctx, "accounts", ScanOptions{Partitions: []string{"p1"}, Columns: []string{"balance"}}, func(b Batch) error {
			if b.Record.NumCols() != 1 {
				t.Fatalf("%d columns, asked for 1", b.Record.NumCols())
			}
			n += int(b.Record.NumRows())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := len(models["p1"].lines()); n != want {
			t.Fatalf("step %d: %d rows with one column, want %d", step, n, want)
		}
	}
	// A last compaction of quiet partitions leaves one file each, no
	// deleted row in it, and the same rows.
	st.cfg.CompactQuietAfter = 0
	if _, err := st.Compact(ctx, Live("p")); err != nil {
		t.Fatal(err)
	}
	sn, err := rd.Refresh(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for part, m := range models {
		files := sn.Manifest().Files("accounts", part)
		if len(files) != 1 {
			t.Fatalf("partition %s has %d files after a compaction of a quiet partition", part, len(files))
		}
		if got, want := scanAccounts(t, sn, ScanOptions{Partitions: []string{part}}), m.lines(); !slices.Equal(got, want) {
			t.Fatalf("after the last compaction, partition %s:\n got %v\nwant %v", part, got, want)
		}
		rec, err := st.readFile(ctx, "p", files[0], def.Schema)
		if err != nil {
			t.Fatal(err)
		}
		if anyDeleted(rec, def.Schema) || int(rec.NumRows()) != len(m.lines()) {
			t.Fatalf("the compacted file of %s has %d rows (want %d) or deleted rows", part, rec.NumRows(), len(m.lines()))
		}
		rec.Release()
	}
}

// TestKeyedTableOverOldFiles reads a keyed table whose first files were
// written before it was keyed (no rev and deleted columns): their rows
// count as rev 0, not deleted, and rows written since replace them.
func TestKeyedTableOverOldFiles(t *testing.T) {
	ctx := context.Background()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	st := newStore(t, b, nil)
	rd := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	old, keyed := accountsTable(false), accountsTable(true)
	write := func(def *Table, rows ...account) {
		rec := accountsRecord(def, rows)
		defer rec.Release()
		f, err := st.Write(ctx, "p", def, "all", rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(ctx, Live("p"), func(*Manifest) (Change, error) { return Change{Add: []DataFile{f}}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	write(old, account{team: "a", id: 1, balance: 10}, account{team: "a", id: 2, balance: 20}, account{team: "b", id: 3, balance: 30})
	write(keyed, account{team: "a", id: 2, balance: 21, rev: 1}, account{team: "a", id: 3, del: true, rev: 1})
	sn, err := rd.Refresh(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(sn.Manifest().Table("accounts").Key) != 1 {
		t.Fatalf("the manifest does not record the key: %+v", sn.Manifest().Table("accounts"))
	}
	want := []string{`a/00000001 "" 10`, `a/00000002 "" 21`}
	if got := scanAccounts(t, sn, ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestKeyedTableValidation refuses keyed tables without their columns.
func TestKeyedTableValidation(t *testing.T) {
	bad := accountsTable(false)
	bad.Key = []string{"id"}
	if err := bad.Validate(); err == nil {
		t.Fatal("a keyed table without rev and deleted was accepted")
	}
	bad = accountsTable(true)
	bad.Key = []string{"nope"}
	if err := bad.Validate(); err == nil {
		t.Fatal("a key column that does not exist was accepted")
	}
	if err := accountsTable(true).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPickKeyedMerges checks the choice of merges in a keyed partition:
// the size tiers of any table while changes arrive, all of its files,
// large ones too, once it is quiet.
func TestPickKeyedMerges(t *testing.T) {
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	st := newStore(t, b, func(c *Config) { c.CompactMinFiles, c.CompactQuietAfter = 3, time.Hour })
	now := time.Now()
	st.now = func() time.Time { return now }
	files := []DataFile{{Name: "base", Bytes: 200 << 20, WrittenAt: now.Add(-2 * time.Hour)}}
	for i := range 4 {
		files = append(files, DataFile{Name: fmt.Sprint("d", i), Bytes: 2 << 10, WrittenAt: now.Add(-time.Duration(10-i) * time.Minute)})
	}
	groups := st.pickKeyedMerges(files)
	if len(groups) != 1 || len(groups[0]) != 4 || slices.ContainsFunc(groups[0], func(f DataFile) bool { return f.Name == "base" }) {
		t.Fatalf("while changes arrive: %v, want the four small files", groups)
	}
	now = now.Add(2 * time.Hour)
	groups = st.pickKeyedMerges(files)
	if len(groups) != 1 || len(groups[0]) != len(files) {
		t.Fatalf("once quiet: %v, want every file", groups)
	}
	if g := st.pickKeyedMerges(files[:1]); g != nil {
		t.Fatalf("a partition of one file: %v", g)
	}
}
