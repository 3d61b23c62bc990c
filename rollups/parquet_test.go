package rollups

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// dictTestRecord has string columns of every kind writeRowGroups meets:
// few distinct values with nulls, thousands of distinct values, a column
// whose dictionary passes the page size limit part way, one that is not
// dictionary encoded, and a string sort key (which keeps statistics).
func dictTestRecord(t *testing.T, n int) (*Table, arrow.Record) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "time", Type: arrow.PrimitiveTypes.Int64},
		{Name: "low", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "mid", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "high", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "empty", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "plain", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	tbl := &Table{Name: "dict_test", Schema: schema, SortKey: []string{"key", "time"}, NoDictionary: []string{"plain"}}
	if err := tbl.Validate(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("k%03d", i*1000/n))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
		str := func(f int, v string, null bool) {
			if null {
				b.Field(f).AppendNull()
			} else {
				b.Field(f).(*array.StringBuilder).Append(v)
			}
		}
		str(2, []string{"", "de", "fr", "us"}[r.IntN(4)], r.IntN(5) == 0)
		str(3, fmt.Sprintf("/page/%d", r.IntN(3000)), r.IntN(50) == 0)
		// About 40 distinct bytes per row: the 1 MiB dictionary limit is
		// passed after some 26,000 rows.
		str(4, fmt.Sprintf("%016x%016x-%d", r.Uint64(), r.Uint64(), i), r.IntN(10) == 0)
		str(5, "", true)
		str(6, fmt.Sprintf("v%d", r.IntN(10)), false)
	}
	return tbl, b.NewRecord()
}

// TestDirectDictionariesWriteTheSameFile checks that handing string
// columns to the Parquet encoder as dictionary arrays gives the very file
// that the encoder's own dictionary encoding gives, with one or several
// row groups, nulls, and a dictionary that outgrows the page limit.
func TestDirectDictionariesWriteTheSameFile(t *testing.T) {
	for _, c := range []struct{ rows, rowGroup int }{{1, 100}, {500, 100}, {60_000, 1 << 20}, {60_000, 25_000}} {
		tbl, rec := dictTestRecord(t, c.rows)
		direct, groups, err := encodeParquetAs(tbl, rec, int64(c.rowGroup), memory.DefaultAllocator, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		dense, groups2, err := encodeParquetAs(tbl, rec, int64(c.rowGroup), memory.DefaultAllocator, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if groups != groups2 {
			t.Errorf("%d rows: %d row groups, the encoder's own way %d", c.rows, groups, groups2)
		}
		if !bytes.Equal(direct, dense) {
			t.Errorf("%d rows, row groups of %d: direct dictionaries write %d bytes, the encoder's own dictionaries %d, and they differ",
				c.rows, c.rowGroup, len(direct), len(dense))
		}
	}
}

func TestDictionaryOf(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues([]string{"b", "a", "b", "", "c", "a"}, []bool{true, true, true, false, true, true})
	a := b.NewStringArray()
	defer a.Release()

	d := dictionaryOf(a, memory.DefaultAllocator, 1<<20)
	if d == nil {
		t.Fatal("no dictionary under the limit")
	}
	defer d.Release()
	da := d.(*array.Dictionary)
	if got := da.Dictionary().(*array.String); got.Len() != 3 || got.Value(0) != "b" || got.Value(1) != "a" || got.Value(2) != "c" {
		t.Errorf("dictionary %v, want [b a c] in order of first appearance", got)
	}
	if da.Len() != a.Len() || da.NullN() != 1 || !da.IsNull(3) {
		t.Errorf("%d values, %d nulls; want %d values and a null at 3", da.Len(), da.NullN(), a.Len())
	}
	for i, want := range []int{0, 1, 0, -1, 2, 1} {
		if want >= 0 && da.GetValueIndex(i) != want {
			t.Errorf("index %d is %d, want %d", i, da.GetValueIndex(i), want)
		}
	}
	// "b", "a", "c": 3 bytes and 4 of length each, 15 in all.
	if dictionaryOf(a, memory.DefaultAllocator, 15) != nil {
		t.Error("a dictionary of 15 bytes was built under a limit of 15")
	}
	if d := dictionaryOf(a, memory.DefaultAllocator, 16); d == nil {
		t.Error("no dictionary of 15 bytes under a limit of 16")
	} else {
		d.Release()
	}
}
