package rollups

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
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
		if diff := parquetDiff(direct, dense); diff != "" {
			t.Errorf("%d rows, row groups of %d: direct dictionaries write %d bytes, the encoder's own dictionaries %d: %s",
				c.rows, c.rowGroup, len(direct), len(dense), diff)
		}
		// The comparison itself sees a changed byte.
		changed := slices.Clone(dense)
		changed[len(changed)/3] ^= 1
		if parquetDiff(direct, changed) == "" {
			t.Errorf("%d rows: a changed byte went unnoticed", c.rows)
		}
	}
}

// parquetDiff says how two Parquet files differ, or "" when they are the
// same: every byte before the footer, and in the footer every field of
// every column chunk. The one freedom is the order of a column chunk's
// page-encoding statistics, which arrow-go writes in the iteration order
// of a map: a column whose dictionary outgrew its page limit has two
// (dictionary and plain data pages), in either order from one run to the
// next, even for the same writer and input.
func parquetDiff(a, b []byte) (diff string) {
	// A damaged footer can make the reader panic.
	defer func() {
		if r := recover(); r != nil {
			diff = fmt.Sprintf("footer unreadable: %v", r)
		}
	}()
	footer := func(x []byte) int {
		if len(x) < 12 {
			return -1
		}
		return int(binary.LittleEndian.Uint32(x[len(x)-8:]))
	}
	fa, fb := footer(a), footer(b)
	if fa < 0 || fb < 0 || len(a) != len(b) || fa != fb {
		return fmt.Sprintf("sizes %d and %d, footers %d and %d bytes", len(a), len(b), fa, fb)
	}
	body := len(a) - 8 - fa
	if i := firstDiff(a[:body], b[:body]); i >= 0 {
		return fmt.Sprintf("data pages differ from byte %d", i)
	}
	ra, err := file.NewParquetReader(bytes.NewReader(a))
	if err != nil {
		return err.Error()
	}
	defer ra.Close()
	rb, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return err.Error()
	}
	defer rb.Close()
	ma, mb := ra.MetaData(), rb.MetaData()
	switch {
	case ma.NumRows != mb.NumRows || len(ma.RowGroups) != len(mb.RowGroups):
		return fmt.Sprintf("%d and %d rows in %d and %d row groups", ma.NumRows, mb.NumRows, len(ma.RowGroups), len(mb.RowGroups))
	case ma.Schema.String() != mb.Schema.String():
		return "schemas differ"
	case keyValues(ma.KeyValueMetadata()) != keyValues(mb.KeyValueMetadata()):
		return "key-value metadata differ"
	}
	for g := range len(ma.RowGroups) {
		ga, gb := ma.RowGroup(g), mb.RowGroup(g)
		if ga.NumRows() != gb.NumRows() || ga.TotalByteSize() != gb.TotalByteSize() || ga.NumColumns() != gb.NumColumns() {
			return fmt.Sprintf("row group %d differs", g)
		}
		for c := range ga.NumColumns() {
			ca, err := ga.ColumnChunk(c)
			if err != nil {
				return err.Error()
			}
			cb, err := gb.ColumnChunk(c)
			if err != nil {
				return err.Error()
			}
			if d := chunkSummary(ca); d != chunkSummary(cb) {
				return fmt.Sprintf("row group %d column %d: %s against %s", g, c, d, chunkSummary(cb))
			}
		}
	}
	return ""
}

// chunkSummary prints what a column chunk's metadata says, its
// page-encoding statistics sorted.
func chunkSummary(c *metadata.ColumnChunkMetaData) string {
	stats := c.EncodingStats()
	slices.SortFunc(stats, func(x, y metadata.PageEncodingStats) int {
		return cmp.Or(cmp.Compare(x.PageType, y.PageType), cmp.Compare(x.Encoding, y.Encoding))
	})
	s := fmt.Sprintf("%v type %v values %d codec %v encodings %v stats %v offsets %d/%d/%d sizes %d/%d",
		c.PathInSchema(), c.Type(), c.NumValues(), c.Compression(), c.Encodings(), stats,
		c.FileOffset(), c.DictionaryPageOffset(), c.DataPageOffset(), c.TotalCompressedSize(), c.TotalUncompressedSize())
	if ok, _ := c.StatsSet(); ok {
		st, err := c.Statistics()
		if err != nil {
			return s + " statistics: " + err.Error()
		}
		s += fmt.Sprintf(" min %x max %x nulls %d", st.EncodeMin(), st.EncodeMax(), st.NullCount())
	}
	return s
}

func keyValues(kv metadata.KeyValueMetadata) string {
	var s strings.Builder
	for _, x := range kv {
		fmt.Fprintf(&s, "%q=%q;", x.Key, x.GetValue())
	}
	return s.String()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
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
