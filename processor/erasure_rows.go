package processor

import (
	"context"
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/records"
)

// Erasure from days not in memory (docs/privacy.md, "Erasing a person").
//
// A person whose cold visits are theirs alone is erased without reading
// their cold days back into the engine (facts.Engine.Erase): the commit
// rewrites each events and conversions partition of a day not in memory
// that held rows of theirs from its stored rows, without the rows whose
// unit is one of their browsers or their user (Changes.EraseRows). Only
// the partitions of the days the person was active on are read, not the
// days their visits chain to through other people's visits.

// erasedPartitions returns the new contents of the partitions of the
// events and conversions tables that ch.EraseRows names: their stored rows
// (snapshot sn) but those of the units named. A partition that held none
// of them is left out.
func erasedPartitions(ctx context.Context, sn *rollups.Snapshot, defs map[string]*rollups.Table, alloc memory.Allocator,
	ch *facts.Changes) ([]partitionRows, error) {
	var out []partitionRows
	for _, d := range sortedKeys(ch.EraseRows) {
		units := make(map[records.UUID]bool, len(ch.EraseRows[d]))
		for _, u := range ch.EraseRows[d] {
			units[u] = true
		}
		for _, table := range []string{TableEvents, TableConversions} {
			pr, err := withoutUnits(ctx, sn, defs[table], facts.DayName(d), units, alloc)
			if err != nil {
				return nil, err
			}
			if pr != nil {
				out = append(out, *pr)
			}
		}
	}
	return out, nil
}

// withoutUnits reads partition part of table def and returns its rows but
// those whose unit is in units; nil when it holds none of theirs.
func withoutUnits(ctx context.Context, sn *rollups.Snapshot, def *rollups.Table, part string, units map[records.UUID]bool,
	alloc memory.Allocator) (*partitionRows, error) {
	var keep []arrow.Record
	release := func() {
		for _, r := range keep {
			r.Release()
		}
		keep = nil
	}
	dropped := 0
	err := sn.Scan(ctx, def.Name, rollups.ScanOptions{Partitions: []string{part}, Uncached: true}, func(b rollups.Batch) error {
		rec := b.Record
		idx := rec.Schema().FieldIndices(tables.ColUnit)
		if len(idx) == 0 {
			return fmt.Errorf("partition %q of table %q has no column %q", part, def.Name, tables.ColUnit)
		}
		col := rec.Column(idx[0])
		n := int(rec.NumRows())
		start := 0
		for i := 0; i <= n; i++ {
			if i < n && !units[records.UUID(tables.RefAt(col, i))] {
				continue
			}
			if i > start {
				keep = append(keep, rec.NewSlice(int64(start), int64(i)))
			}
			if i < n {
				dropped++
			}
			start = i + 1
		}
		return nil
	})
	if err != nil || dropped == 0 {
		release()
		if err != nil {
			return nil, fmt.Errorf("cannot read partition %q of table %q to erase rows: %w", part, def.Name, err)
		}
		return nil, nil
	}
	pr := &partitionRows{table: def.Name, partition: part}
	if len(keep) > 0 {
		rec, err := concatRecords(def.Schema, keep, alloc)
		release()
		if err != nil {
			return nil, fmt.Errorf("cannot erase rows from partition %q of table %q: %w", part, def.Name, err)
		}
		pr.build = func() arrow.Record { return rec }
	}
	return pr, nil
}

// concatRecords puts recs (of schema) end to end in one record.
func concatRecords(schema *arrow.Schema, recs []arrow.Record, alloc memory.Allocator) (arrow.Record, error) {
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	var rows int64
	for _, r := range recs {
		if !r.Schema().Equal(schema) {
			return nil, fmt.Errorf("rows read with schema %s, want %s", r.Schema(), schema)
		}
		rows += r.NumRows()
	}
	for i := range schema.NumFields() {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, alloc)
		if err != nil {
			return nil, fmt.Errorf("cannot concatenate column %q: %w", schema.Field(i).Name, err)
		}
		cols = append(cols, c)
	}
	return array.NewRecord(schema, cols, rows), nil
}
