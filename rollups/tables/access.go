package tables

import (
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
)

// Accessors of a scanned record's columns. Each reads row i of a column
// and answers the zero value for a null, and for a column of another type
// than the table's (a file written by an older schema), so that a reader
// never panics on a table it did not write.

// ColumnsOf returns the record's columns by name, in the order of names.
func ColumnsOf(rec arrow.Record, names []string) ([]arrow.Array, error) {
	s := rec.Schema()
	out := make([]arrow.Array, len(names))
	for i, n := range names {
		idx := s.FieldIndices(n)
		if len(idx) == 0 {
			return nil, fmt.Errorf("column %q is missing", n)
		}
		out[i] = rec.Column(idx[0])
	}
	return out, nil
}

// StrAt reads a string column ("" for null).
func StrAt(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return ""
	}
	switch s := a.(type) {
	case *array.String:
		return s.Value(i)
	case *array.LargeString:
		return s.Value(i)
	}
	return ""
}

// RefAt reads a ref (uuid) column (zero for null).
func RefAt(a arrow.Array, i int) (r [16]byte) {
	if a.IsNull(i) {
		return r
	}
	if b, ok := a.(*array.FixedSizeBinary); ok {
		copy(r[:], b.Value(i))
	}
	return r
}

// BoolAt reads a boolean column (false for null).
func BoolAt(a arrow.Array, i int) bool {
	b, ok := a.(*array.Boolean)
	return ok && !a.IsNull(i) && b.Value(i)
}

// TimeAt reads a timestamp column as Unix ms (0 for null).
func TimeAt(a arrow.Array, i int) int64 {
	t, ok := a.(*array.Timestamp)
	if !ok || a.IsNull(i) {
		return 0
	}
	return int64(t.Value(i))
}

// Int64At reads an int64 column; ok is false for null.
func Int64At(a arrow.Array, i int) (v int64, ok bool) {
	c, ok := a.(*array.Int64)
	if !ok || a.IsNull(i) {
		return 0, false
	}
	return c.Value(i), true
}

// Int32At reads an int32 column (0 for null).
func Int32At(a arrow.Array, i int) int32 {
	c, ok := a.(*array.Int32)
	if !ok || a.IsNull(i) {
		return 0
	}
	return c.Value(i)
}
