package rollups

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// keyKindFor reports whether columns of type dt can be key columns of a
// keyed table: integers, timestamps, dates, strings and binaries.
func keyKindFor(dt arrow.DataType) (keyKind, error) {
	switch k := keyKindOf(dt); k {
	case keyInt, keyUint, keyString, keyBytes:
		return k, nil
	}
	return 0, fmt.Errorf("type %s cannot be a key; use an integer, timestamp, date, string or binary column", dt)
}

// appendKey appends row i of a key column to dst: a null as one 0 byte,
// else 1 then the value (variable-length values prefixed with their
// length), so that concatenated keys of several columns never collide.
func appendKey(dst []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	switch a := a.(type) {
	case *array.String:
		dst = binary.AppendUvarint(dst, uint64(len(a.Value(i))))
		return append(dst, a.Value(i)...)
	case *array.LargeString:
		dst = binary.AppendUvarint(dst, uint64(len(a.Value(i))))
		return append(dst, a.Value(i)...)
	case *array.Binary:
		dst = binary.AppendUvarint(dst, uint64(len(a.Value(i))))
		return append(dst, a.Value(i)...)
	case *array.LargeBinary:
		dst = binary.AppendUvarint(dst, uint64(len(a.Value(i))))
		return append(dst, a.Value(i)...)
	case *array.FixedSizeBinary:
		return append(dst, a.Value(i)...)
	}
	k := keyAt(a, i)
	if k.kind == keyUint {
		return binary.BigEndian.AppendUint64(dst, k.u)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(k.i))
}

// keyedColumns are the columns of a keyed table that merging reads
// besides those asked for: the key, the sort key, rev and deleted.
func keyedColumns(def *Table) []string {
	cols := append([]string{}, def.Key...)
	cols = append(cols, def.SortKey...)
	return append(cols, RevColumn, DeletedColumn)
}

// liveRows returns, in sort-key order, the rows of recs (files of one
// partition of keyed table def, in commit order, each with at least the
// columns keyedColumns names, as schema says) that stand for their key:
// per key the row with the highest rev, the one of the later record on
// equal revs, unless it is deleted (kept with keepDeleted: a merge of
// some of a partition's files keeps the deletions, which may stand for
// rows of the other files). Rows without a rev (files written before the
// column) have rev 0; a null deleted is false.
func liveRows(def *Table, schema *arrow.Schema, recs []arrow.Record, keepDeleted bool) ([]rowRef, error) {
	col := func(r arrow.Record, name string) (arrow.Array, error) {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("keyed table %q: no column %q to merge by", def.Name, name)
		}
		return r.Column(idx[0]), nil
	}
	type winner struct {
		rev int64
		at  rowRef
	}
	total := 0
	for _, r := range recs {
		total += int(r.NumRows())
	}
	best := make(map[string]winner, total)
	deleted := make([][]bool, len(recs))
	var buf []byte
	for s, r := range recs {
		keys := make([]arrow.Array, len(def.Key))
		for j, k := range def.Key {
			c, err := col(r, k)
			if err != nil {
				return nil, err
			}
			keys[j] = c
		}
		rc, err := col(r, RevColumn)
		if err != nil {
			return nil, err
		}
		dc, err := col(r, DeletedColumn)
		if err != nil {
			return nil, err
		}
		revs, ok1 := rc.(*array.Int64)
		dels, ok2 := dc.(*array.Boolean)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("keyed table %q: %q must be int64 and %q bool", def.Name, RevColumn, DeletedColumn)
		}
		n := int(r.NumRows())
		deleted[s] = make([]bool, n)
		for i := range n {
			buf = buf[:0]
			for _, k := range keys {
				buf = appendKey(buf, k, i)
			}
			rev := int64(0)
			if revs.IsValid(i) {
				rev = revs.Value(i)
			}
			deleted[s][i] = dels.IsValid(i) && dels.Value(i)
			if w, ok := best[string(buf)]; ok && w.rev > rev {
				continue
			}
			best[string(buf)] = winner{rev: rev, at: rowRef{int32(s), int32(i)}}
		}
	}
	keep := make([][]bool, len(recs))
	for s := range recs {
		keep[s] = make([]bool, recs[s].NumRows())
	}
	for _, w := range best {
		if keepDeleted || !deleted[w.at.src][w.at.row] {
			keep[w.at.src][w.at.row] = true
		}
	}
	order, _, err := sortedOrder(schema, def.SortKey, recs)
	if err != nil {
		return nil, err
	}
	out := order[:0]
	for _, o := range order {
		if keep[o.src][o.row] {
			out = append(out, o)
		}
	}
	return out, nil
}

// mergeKeyed returns one record of schema with the live rows of recs
// (liveRows), built on mem.
func mergeKeyed(mem memory.Allocator, def *Table, schema *arrow.Schema, recs []arrow.Record, keepDeleted bool) (arrow.Record, error) {
	order, err := liveRows(def, schema, recs, keepDeleted)
	if err != nil {
		return nil, err
	}
	return takeRecord(mem, schema, recs, order)
}
