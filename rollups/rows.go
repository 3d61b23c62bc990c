package rollups

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// rowRef addresses one row among several arrays or records.
type rowRef struct {
	src int32
	row int32
}

// valuer is a typed Arrow array.
type valuer[T any] interface {
	arrow.Array
	Value(int) T
}

// appender is a typed Arrow builder.
type appender[T any] interface {
	Append(T)
	AppendNull()
}

// rowCmp compares row i of a with row j of b (same type), nulls first.
type rowCmp func(a arrow.Array, i int, b arrow.Array, j int) int

func nullsFirst(a arrow.Array, i int, b arrow.Array, j int) (int, bool) {
	an, bn := a.IsNull(i), b.IsNull(j)
	switch {
	case an && bn:
		return 0, true
	case an:
		return -1, true
	case bn:
		return 1, true
	}
	return 0, false
}

func cmpOrdered[T cmp.Ordered, A valuer[T]](a arrow.Array, i int, b arrow.Array, j int) int {
	if c, done := nullsFirst(a, i, b, j); done {
		return c
	}
	return cmp.Compare(a.(A).Value(i), b.(A).Value(j))
}

func cmpBytes[A valuer[[]byte]](a arrow.Array, i int, b arrow.Array, j int) int {
	if c, done := nullsFirst(a, i, b, j); done {
		return c
	}
	return bytes.Compare(a.(A).Value(i), b.(A).Value(j))
}

func cmpBool(a arrow.Array, i int, b arrow.Array, j int) int {
	if c, done := nullsFirst(a, i, b, j); done {
		return c
	}
	x, y := a.(*array.Boolean).Value(i), b.(*array.Boolean).Value(j)
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

// comparer returns the row comparison of a supported type.
func comparer(dt arrow.DataType) (rowCmp, error) {
	switch dt.ID() {
	case arrow.BOOL:
		return cmpBool, nil
	case arrow.INT8:
		return cmpOrdered[int8, *array.Int8], nil
	case arrow.INT16:
		return cmpOrdered[int16, *array.Int16], nil
	case arrow.INT32:
		return cmpOrdered[int32, *array.Int32], nil
	case arrow.INT64:
		return cmpOrdered[int64, *array.Int64], nil
	case arrow.UINT8:
		return cmpOrdered[uint8, *array.Uint8], nil
	case arrow.UINT16:
		return cmpOrdered[uint16, *array.Uint16], nil
	case arrow.UINT32:
		return cmpOrdered[uint32, *array.Uint32], nil
	case arrow.UINT64:
		return cmpOrdered[uint64, *array.Uint64], nil
	case arrow.FLOAT32:
		return cmpOrdered[float32, *array.Float32], nil
	case arrow.FLOAT64:
		return cmpOrdered[float64, *array.Float64], nil
	case arrow.STRING:
		return cmpOrdered[string, *array.String], nil
	case arrow.LARGE_STRING:
		return cmpOrdered[string, *array.LargeString], nil
	case arrow.BINARY:
		return cmpBytes[*array.Binary], nil
	case arrow.LARGE_BINARY:
		return cmpBytes[*array.LargeBinary], nil
	case arrow.FIXED_SIZE_BINARY:
		return cmpBytes[*array.FixedSizeBinary], nil
	case arrow.DATE32:
		return cmpOrdered[arrow.Date32, *array.Date32], nil
	case arrow.DATE64:
		return cmpOrdered[arrow.Date64, *array.Date64], nil
	case arrow.TIMESTAMP:
		return cmpOrdered[arrow.Timestamp, *array.Timestamp], nil
	}
	return nil, fmt.Errorf("type %s has no order", dt)
}

func takeTyped[T any, A valuer[T], B appender[T]](b B, srcs []arrow.Array, order []rowRef) {
	typed := make([]A, len(srcs))
	for i, s := range srcs {
		if s != nil { // nil: a source no row of order is in
			typed[i] = s.(A)
		}
	}
	for _, r := range order {
		a := typed[r.src]
		if a.IsNull(int(r.row)) {
			b.AppendNull()
			continue
		}
		b.Append(a.Value(int(r.row)))
	}
}

// takeColumn builds the array of type dt whose rows are order's rows of
// srcs (arrays of type dt).
func takeColumn(mem memory.Allocator, dt arrow.DataType, srcs []arrow.Array, order []rowRef) (arrow.Array, error) {
	bld := array.NewBuilder(mem, dt)
	defer bld.Release()
	bld.Reserve(len(order))
	switch b := bld.(type) {
	case *array.BooleanBuilder:
		takeTyped[bool, *array.Boolean](b, srcs, order)
	case *array.Int8Builder:
		takeTyped[int8, *array.Int8](b, srcs, order)
	case *array.Int16Builder:
		takeTyped[int16, *array.Int16](b, srcs, order)
	case *array.Int32Builder:
		takeTyped[int32, *array.Int32](b, srcs, order)
	case *array.Int64Builder:
		takeTyped[int64, *array.Int64](b, srcs, order)
	case *array.Uint8Builder:
		takeTyped[uint8, *array.Uint8](b, srcs, order)
	case *array.Uint16Builder:
		takeTyped[uint16, *array.Uint16](b, srcs, order)
	case *array.Uint32Builder:
		takeTyped[uint32, *array.Uint32](b, srcs, order)
	case *array.Uint64Builder:
		takeTyped[uint64, *array.Uint64](b, srcs, order)
	case *array.Float32Builder:
		takeTyped[float32, *array.Float32](b, srcs, order)
	case *array.Float64Builder:
		takeTyped[float64, *array.Float64](b, srcs, order)
	case *array.StringBuilder:
		takeTyped[string, *array.String](b, srcs, order)
	case *array.LargeStringBuilder:
		takeTyped[string, *array.LargeString](b, srcs, order)
	case *array.BinaryBuilder:
		if dt.ID() == arrow.LARGE_BINARY {
			takeTyped[[]byte, *array.LargeBinary](b, srcs, order)
		} else {
			takeTyped[[]byte, *array.Binary](b, srcs, order)
		}
	case *array.FixedSizeBinaryBuilder:
		takeTyped[[]byte, *array.FixedSizeBinary](b, srcs, order)
	case *array.Date32Builder:
		takeTyped[arrow.Date32, *array.Date32](b, srcs, order)
	case *array.Date64Builder:
		takeTyped[arrow.Date64, *array.Date64](b, srcs, order)
	case *array.TimestampBuilder:
		takeTyped[arrow.Timestamp, *array.Timestamp](b, srcs, order)
	default:
		return nil, fmt.Errorf("cannot copy rows of type %s", dt)
	}
	return bld.NewArray(), nil
}

// sortKeyCmp compares rows of records by the columns keys (indices into
// the records' schema).
type sortKeyCmp struct {
	recs []arrow.Record
	keys []int
	cmps []rowCmp
}

func newSortKeyCmp(schema *arrow.Schema, sortKey []string, recs []arrow.Record) (*sortKeyCmp, error) {
	s := &sortKeyCmp{recs: recs}
	for _, name := range sortKey {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: sort column %q missing", ErrSchemaMismatch, name)
		}
		c, err := comparer(schema.Field(idx[0]).Type)
		if err != nil {
			return nil, err
		}
		s.keys = append(s.keys, idx[0])
		s.cmps = append(s.cmps, c)
	}
	return s, nil
}

func (s *sortKeyCmp) compare(x, y rowRef) int {
	for k, col := range s.keys {
		a := s.recs[x.src].Column(col)
		b := s.recs[y.src].Column(col)
		if c := s.cmps[k](a, int(x.row), b, int(y.row)); c != 0 {
			return c
		}
	}
	return 0
}

// sortedOrder returns the rows of recs in sort-key order (stable: equal
// keys keep record order, then row order), and whether that is already
// the order they are in.
func sortedOrder(schema *arrow.Schema, sortKey []string, recs []arrow.Record) ([]rowRef, bool, error) {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	if n > math.MaxInt32 {
		return nil, false, fmt.Errorf("cannot sort %d rows at once; the limit is %d", n, math.MaxInt32)
	}
	order := make([]rowRef, 0, n)
	for s, r := range recs {
		for i := range int32(r.NumRows()) {
			order = append(order, rowRef{int32(s), i})
		}
	}
	if len(sortKey) == 0 {
		return order, true, nil
	}
	c, err := newSortKeyCmp(schema, sortKey, recs)
	if err != nil {
		return nil, false, err
	}
	sorted := true
	for i := 1; i < len(order); i++ {
		if c.compare(order[i-1], order[i]) > 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		if bounds := runBounds(c, order, len(recs)); bounds != nil {
			// Records each sorted (data files are): merged (runs.go).
			return mergeRuns(c, order, bounds), false, nil
		}
		// Ties broken by position: stable, with the faster unstable sort.
		slices.SortFunc(order, func(x, y rowRef) int {
			return cmp.Or(c.compare(x, y), cmp.Compare(x.src, y.src), cmp.Compare(x.row, y.row))
		})
	}
	return order, sorted, nil
}

// takeRecord builds a record of schema whose rows are order's rows of recs
// (records of that schema).
func takeRecord(mem memory.Allocator, schema *arrow.Schema, recs []arrow.Record, order []rowRef) (arrow.Record, error) {
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	srcs := make([]arrow.Array, len(recs))
	for i, f := range schema.Fields() {
		for s, r := range recs {
			srcs[s] = nil
			if r != nil {
				srcs[s] = r.Column(i)
			}
		}
		col, err := takeColumn(mem, f.Type, srcs, order)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols[i] = col
	}
	return array.NewRecord(schema, cols, int64(len(order))), nil
}

// concatRecords returns one record of recs' rows in order (recs share
// schema).
func concatRecords(mem memory.Allocator, schema *arrow.Schema, recs []arrow.Record) (arrow.Record, error) {
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(recs))
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for i, f := range schema.Fields() {
		for s, r := range recs {
			parts[s] = r.Column(i)
		}
		col, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols[i] = col
	}
	return array.NewRecord(schema, cols, rows), nil
}

// key is one value of a column of a supported type, for comparing with
// bounds. Integers, dates and timestamps use i (or u), floats f, strings
// and binaries s.
type key struct {
	kind keyKind
	i    int64
	u    uint64
	f    float64
	s    string
}

type keyKind uint8

const (
	keyInt keyKind = iota + 1
	keyUint
	keyFloat
	keyString
	keyBytes
	keyBool
)

func keyKindOf(dt arrow.DataType) keyKind {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP:
		return keyInt
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return keyUint
	case arrow.FLOAT32, arrow.FLOAT64:
		return keyFloat
	case arrow.STRING, arrow.LARGE_STRING:
		return keyString
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		return keyBytes
	case arrow.BOOL:
		return keyBool
	}
	return 0
}

// keyAt returns the value of row i (not null) of a.
func keyAt(a arrow.Array, i int) key {
	switch a := a.(type) {
	case *array.Int8:
		return key{kind: keyInt, i: int64(a.Value(i))}
	case *array.Int16:
		return key{kind: keyInt, i: int64(a.Value(i))}
	case *array.Int32:
		return key{kind: keyInt, i: int64(a.Value(i))}
	case *array.Int64:
		return key{kind: keyInt, i: a.Value(i)}
	case *array.Date32:
		return key{kind: keyInt, i: int64(a.Value(i))}
	case *array.Date64:
		return key{kind: keyInt, i: int64(a.Value(i))}
	case *array.Timestamp:
		return key{kind: keyInt, i: int64(a.Value(i))}
	case *array.Uint8:
		return key{kind: keyUint, u: uint64(a.Value(i))}
	case *array.Uint16:
		return key{kind: keyUint, u: uint64(a.Value(i))}
	case *array.Uint32:
		return key{kind: keyUint, u: uint64(a.Value(i))}
	case *array.Uint64:
		return key{kind: keyUint, u: a.Value(i)}
	case *array.Float32:
		return key{kind: keyFloat, f: float64(a.Value(i))}
	case *array.Float64:
		return key{kind: keyFloat, f: a.Value(i)}
	case *array.String:
		return key{kind: keyString, s: a.Value(i)}
	case *array.LargeString:
		return key{kind: keyString, s: a.Value(i)}
	case *array.Binary:
		return key{kind: keyBytes, s: string(a.Value(i))}
	case *array.LargeBinary:
		return key{kind: keyBytes, s: string(a.Value(i))}
	case *array.FixedSizeBinary:
		return key{kind: keyBytes, s: string(a.Value(i))}
	case *array.Boolean:
		if a.Value(i) {
			return key{kind: keyBool, i: 1}
		}
		return key{kind: keyBool}
	}
	return key{}
}

func cmpKeys(a, b key) int {
	switch a.kind {
	case keyInt, keyBool:
		return cmp.Compare(a.i, b.i)
	case keyUint:
		return cmp.Compare(a.u, b.u)
	case keyFloat:
		return cmp.Compare(a.f, b.f)
	}
	return cmp.Compare(a.s, b.s)
}

// json encodes a key for the manifest: a number for integers, dates,
// timestamps and floats, a string for strings, lower-case hex for
// binaries, true or false for booleans. NaN and infinities have no bound
// (nil).
func (k key) json() json.RawMessage {
	switch k.kind {
	case keyInt:
		return json.RawMessage(strconv.FormatInt(k.i, 10))
	case keyUint:
		return json.RawMessage(strconv.FormatUint(k.u, 10))
	case keyFloat:
		if math.IsNaN(k.f) || math.IsInf(k.f, 0) {
			return nil
		}
		return json.RawMessage(strconv.FormatFloat(k.f, 'g', -1, 64))
	case keyBool:
		return json.RawMessage(strconv.FormatBool(k.i == 1))
	case keyBytes:
		b, _ := json.Marshal(hex.EncodeToString([]byte(k.s)))
		return b
	case keyString:
		b, _ := json.Marshal(k.s)
		return b
	}
	return nil
}

// keyFromJSON reads a bound written by key.json for a column of type dt.
func keyFromJSON(dt arrow.DataType, raw json.RawMessage) (key, error) {
	kind := keyKindOf(dt)
	k := key{kind: kind}
	var err error
	switch kind {
	case keyInt:
		k.i, err = strconv.ParseInt(string(raw), 10, 64)
	case keyUint:
		k.u, err = strconv.ParseUint(string(raw), 10, 64)
	case keyFloat:
		k.f, err = strconv.ParseFloat(string(raw), 64)
	case keyBool:
		var b bool
		err = json.Unmarshal(raw, &b)
		if b {
			k.i = 1
		}
	case keyString:
		err = json.Unmarshal(raw, &k.s)
	case keyBytes:
		var h string
		if err = json.Unmarshal(raw, &h); err == nil {
			var b []byte
			b, err = hex.DecodeString(h)
			k.s = string(b)
		}
	default:
		err = fmt.Errorf("type %s has no bounds", dt)
	}
	if err != nil {
		return key{}, fmt.Errorf("cannot read bound %s: %w", raw, err)
	}
	return k, nil
}

// keyFromValue converts a Go value given in a KeyRange to a key for a
// column of type dt: integers for integer columns, dates and timestamps
// (in the column's unit) or a time.Time for dates and timestamps, floats,
// strings for string columns, []byte or [16]byte for binaries, bool.
func keyFromValue(dt arrow.DataType, v any) (key, error) {
	kind := keyKindOf(dt)
	k := key{kind: kind}
	bad := func() (key, error) {
		return key{}, fmt.Errorf("a %T cannot bound a column of type %s", v, dt)
	}
	if t, ok := v.(time.Time); ok {
		switch dt := dt.(type) {
		case *arrow.TimestampType:
			ts, err := arrow.TimestampFromTime(t, dt.Unit)
			if err != nil {
				return key{}, err
			}
			k.i = int64(ts)
		case *arrow.Date32Type:
			k.i = int64(arrow.Date32FromTime(t))
		case *arrow.Date64Type:
			k.i = int64(arrow.Date64FromTime(t))
		default:
			return bad()
		}
		return k, nil
	}
	switch kind {
	case keyInt:
		switch v := v.(type) {
		case int:
			k.i = int64(v)
		case int32:
			k.i = int64(v)
		case int64:
			k.i = v
		case arrow.Timestamp:
			k.i = int64(v)
		case arrow.Date32:
			k.i = int64(v)
		default:
			return bad()
		}
	case keyUint:
		switch v := v.(type) {
		case uint:
			k.u = uint64(v)
		case uint32:
			k.u = uint64(v)
		case uint64:
			k.u = v
		case int:
			if v < 0 {
				return bad()
			}
			k.u = uint64(v)
		default:
			return bad()
		}
	case keyFloat:
		switch v := v.(type) {
		case float64:
			k.f = v
		case float32:
			k.f = float64(v)
		case int:
			k.f = float64(v)
		default:
			return bad()
		}
	case keyString:
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		k.s = s
	case keyBytes:
		switch v := v.(type) {
		case []byte:
			k.s = string(v)
		case [16]byte:
			k.s = string(v[:])
		case string:
			k.s = v
		default:
			return bad()
		}
	case keyBool:
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		if b {
			k.i = 1
		}
	default:
		return bad()
	}
	return k, nil
}
