package rollups

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// readFile reads a whole data file as one record of schema (columns the
// file lacks are nulls).
func (s *Store) readFile(ctx context.Context, project string, f DataFile, schema *arrow.Schema) (arrow.Record, error) {
	key := s.layout.file(project, f.Ref())
	src, err := openSource(ctx, s.bucket, key, f.Bytes, math.MaxInt64, nil)
	if err != nil {
		return nil, err
	}
	fs, err := fileSchema(src.meta)
	if err != nil {
		return nil, fmt.Errorf("cannot read the schema of data file %q: %w", key, err)
	}
	fr, err := src.arrowReader()
	if err != nil {
		return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
	}
	var cols []int
	for _, fld := range schema.Fields() {
		if idx := fs.FieldIndices(fld.Name); len(idx) == 1 {
			if !arrow.TypeEqual(fs.Field(idx[0]).Type, fld.Type) {
				return nil, fmt.Errorf("%w: column %q of %q is %s, the table says %s", ErrSchemaMismatch, fld.Name, key, fs.Field(idx[0]).Type, fld.Type)
			}
			cols = append(cols, idx[0])
		}
	}
	rows := src.meta.NumRows
	rgs := make([]int, len(src.meta.RowGroups))
	for i := range rgs {
		rgs[i] = i
	}
	arrs, err := readColumns(ctx, fr, rgs, cols)
	if err != nil {
		return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
	}
	out := make([]arrow.Array, schema.NumFields())
	defer releaseAll(out)
	j := 0
	for i, fld := range schema.Fields() {
		if len(fs.FieldIndices(fld.Name)) != 1 {
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fld.Type, int(rows))
			continue
		}
		out[i] = arrs[j]
		j++
	}
	if int64(out[0].Len()) != rows {
		return nil, errors.New("row count of " + key + " differs from its footer")
	}
	return array.NewRecord(schema, out, rows), nil
}
