package rollups

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// runRow is a row of a sorted-runs case: its key and where it came from.
type runRow struct {
	k        string
	n        int64
	src, row int32
}

// TestSortedOrderRuns orders the records of testdata/sorted-runs.json's
// cases with sortedOrder and compares the order with a stable sort of
// their rows by key.
func TestSortedOrderRuns(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "sorted-runs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name               string
			Records            [][][2]any
			Random, Rows, Keys int
			Seed               uint64
			Unsorted           bool
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("sorted-runs.json: %v", err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var recs [][]runRow
			for _, rec := range c.Records {
				var rows []runRow
				for _, r := range rec {
					rows = append(rows, runRow{k: r[0].(string), n: int64(r[1].(float64))})
				}
				recs = append(recs, rows)
			}
			rng := rand.New(rand.NewPCG(c.Seed, c.Seed))
			for range c.Random {
				rows := make([]runRow, rng.IntN(c.Rows+1))
				for i := range rows {
					rows[i] = runRow{k: fmt.Sprint("k", rng.IntN(c.Keys)), n: int64(rng.IntN(c.Keys))}
				}
				if !c.Unsorted {
					slices.SortStableFunc(rows, func(a, b runRow) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.n, b.n)) })
				}
				recs = append(recs, rows)
			}
			var all []runRow
			records := make([]arrow.Record, len(recs))
			for s, rows := range recs {
				kb := array.NewStringBuilder(memory.DefaultAllocator)
				nb := array.NewInt64Builder(memory.DefaultAllocator)
				for i, r := range rows {
					kb.Append(r.k)
					nb.Append(r.n)
					all = append(all, runRow{r.k, r.n, int32(s), int32(i)})
				}
				ka, na := kb.NewArray(), nb.NewArray()
				records[s] = array.NewRecord(schema, []arrow.Array{ka, na}, int64(len(rows)))
				ka.Release()
				na.Release()
				kb.Release()
				nb.Release()
				defer records[s].Release()
			}
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b runRow) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.n, b.n)) })
			order, sorted, err := sortedOrder(schema, []string{"k", "n"}, records)
			if err != nil {
				t.Fatal(err)
			}
			if len(order) != len(want) {
				t.Fatalf("%d rows, want %d", len(order), len(want))
			}
			for i, o := range order {
				if o.src != want[i].src || o.row != want[i].row {
					t.Fatalf("row %d: record %d row %d, want record %d row %d (%s %d)", i, o.src, o.row, want[i].src, want[i].row, want[i].k, want[i].n)
				}
			}
			in := slices.IsSortedFunc(all, func(a, b runRow) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.n, b.n)) })
			if sorted != in {
				t.Errorf("sorted = %v, but the rows were in order: %v", sorted, in)
			}
		})
	}
}

// BenchmarkSortedOrderRuns orders 8 sorted records of 8,000 random
// 16-byte keys (a people bucket's files before it settles): merged as
// runs (sortedOrder) and sorted whole as before runs.go.
func BenchmarkSortedOrderRuns(b *testing.B) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "ref", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}}}, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	recs := make([]arrow.Record, 8)
	for s := range recs {
		keys := make([][]byte, 8000)
		for i := range keys {
			keys[i] = make([]byte, 16)
			for j := range keys[i] {
				keys[i][j] = byte(rng.UintN(256))
			}
		}
		slices.SortFunc(keys, func(x, y []byte) int { return slices.Compare(x, y) })
		bld := array.NewFixedSizeBinaryBuilder(memory.DefaultAllocator, &arrow.FixedSizeBinaryType{ByteWidth: 16})
		for _, k := range keys {
			bld.Append(k)
		}
		a := bld.NewArray()
		recs[s] = array.NewRecord(schema, []arrow.Array{a}, int64(len(keys)))
		a.Release()
		bld.Release()
		defer recs[s].Release()
	}
	b.Run("runs", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := sortedOrder(schema, []string{"ref"}, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sort", func(b *testing.B) {
		c, err := newSortKeyCmp(schema, []string{"ref"}, recs)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			order := make([]rowRef, 0, 64000)
			for s, r := range recs {
				for i := range int32(r.NumRows()) {
					order = append(order, rowRef{int32(s), i})
				}
			}
			slices.SortFunc(order, func(x, y rowRef) int {
				return cmp.Or(c.compare(x, y), cmp.Compare(x.src, y.src), cmp.Compare(x.row, y.row))
			})
		}
	})
}
