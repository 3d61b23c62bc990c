package rollups

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/mfhq/mf/storage"
)

// A merge (compaction) streams: each input file is read a batch of
// mergeBatchRows rows at a time, the batches are merged in sort-key order
// into row groups, and each row group is encoded and sent to the store as
// soon as it is full. What a merge holds is a batch per input, the rows
// of the row group being built (in at most two batches per input, else
// copied out) and the encoder's pages, whatever the size of the files
// and however few of their rows a keyed merge keeps (docs/rollups.md,
// "Compaction").
const (
	// mergeBatchRows is how many rows a merge decodes from one input at a
	// time.
	mergeBatchRows = 8192
	// mergeWholeBytes: inputs up to this size are fetched with one
	// request; larger ones by column chunk, as they are read.
	mergeWholeBytes = 8 << 20
)

// mergeFiles merges the group's files in sort-key order (stable: equal
// keys keep the files' commit order) into one new file, streaming (see
// above). A keyed table's group keeps per key its newest row; whole says
// the group is all of the partition, whose merge also drops the deleted
// rows. It returns no file when no row is left, and the most Arrow memory
// the merge held at once.
func (s *Store) mergeFiles(ctx context.Context, project string, def *Table, partition string, group []DataFile, whole bool) ([]DataFile, int64, error) {
	// Decoding uses Go's allocator: the reader expects zeroed buffers,
	// which the pool's reused ones are not. The rows merged and encoded
	// come from the pool, as Write's do. Both count towards the peak.
	alloc := &peakAllocator{Allocator: s.pool, count: &peakCount{}}
	read := &peakAllocator{Allocator: memory.DefaultAllocator, count: alloc.count}
	var keep [][]bool
	if len(def.Key) > 0 {
		// Per key the row with the highest rev, with its rev, so that
		// files committed meanwhile still win over it; deletions are kept
		// unless the group is the whole partition (nothing else can hold
		// a row they stand for).
		k, err := s.keyedWinners(ctx, project, def, group, !whole, read)
		if err != nil {
			return nil, alloc.count.peak.Load(), err
		}
		keep = k
	}
	m, err := newMerger(def, alloc)
	if err != nil {
		return nil, 0, err
	}
	defer m.release()
	for i, f := range group {
		in, err := s.openRows(ctx, project, f, def.Schema, read)
		if err != nil {
			return nil, alloc.count.peak.Load(), err
		}
		c := &mergeCursor{in: in, file: i}
		if keep != nil {
			c.keep = keep[i]
		}
		m.inputs = append(m.inputs, c)
	}
	out := s.newFileSink(ctx, project, def, partition, alloc)
	defer out.abort()
	m.groupRows = int(out.groupRows)
	if err := m.run(out.writeGroup); err != nil {
		return nil, alloc.count.peak.Load(), err
	}
	f, ok, err := out.finish()
	if err != nil || !ok {
		return nil, alloc.count.peak.Load(), err // !ok: every key deleted, the partition empties
	}
	return []DataFile{f}, alloc.count.peak.Load(), nil
}

// keyedWinners reads the key, rev and deleted columns of the group's files
// of keyed table def and returns, per file and row, whether the row stands
// for its key (liveRows' rule): the highest rev, the later file or row on
// equal revs, and, unless keepDeleted, not deleted.
func (s *Store) keyedWinners(ctx context.Context, project string, def *Table, group []DataFile, keepDeleted bool, alloc memory.Allocator) ([][]bool, error) {
	var fields []arrow.Field
	for _, name := range append(append([]string{}, def.Key...), RevColumn, DeletedColumn) {
		idx := def.Schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("keyed table %q: no column %q to merge by", def.Name, name)
		}
		fields = append(fields, def.Schema.Field(idx[0]))
	}
	schema := arrow.NewSchema(fields, nil)
	nk := len(def.Key)
	type winner struct {
		rev  int64
		file int32
		row  int64
	}
	best := map[string]winner{}
	deleted := make([][]bool, len(group))
	var buf []byte
	for fi, f := range group {
		in, err := s.openRows(ctx, project, f, schema, alloc)
		if err != nil {
			return nil, err
		}
		var row int64
		for {
			rec, err := in.next()
			if err != nil {
				in.close()
				return nil, err
			}
			if rec == nil {
				break
			}
			revs, ok1 := rec.Column(nk).(*array.Int64)
			dels, ok2 := rec.Column(nk + 1).(*array.Boolean)
			if !ok1 || !ok2 {
				rec.Release()
				in.close()
				return nil, fmt.Errorf("keyed table %q: %q must be int64 and %q bool", def.Name, RevColumn, DeletedColumn)
			}
			for i := range int(rec.NumRows()) {
				buf = buf[:0]
				for k := range nk {
					buf = appendKey(buf, rec.Column(k), i)
				}
				rev := int64(0)
				if revs.IsValid(i) {
					rev = revs.Value(i)
				}
				deleted[fi] = append(deleted[fi], dels.IsValid(i) && dels.Value(i))
				if w, ok := best[string(buf)]; ok && w.rev > rev {
					row++
					continue
				}
				best[string(buf)] = winner{rev: rev, file: int32(fi), row: row}
				row++
			}
			rec.Release()
		}
		in.close()
	}
	keep := make([][]bool, len(group))
	for i := range keep {
		keep[i] = make([]bool, len(deleted[i]))
	}
	for _, w := range best {
		if keepDeleted || !deleted[w.file][w.row] {
			keep[w.file][w.row] = true
		}
	}
	return keep, nil
}

// fileRows reads one data file's rows as records of a schema (columns the
// file lacks are nulls), mergeBatchRows at a time.
type fileRows struct {
	key    string
	schema *arrow.Schema
	alloc  memory.Allocator
	rr     pqarrow.RecordReader
	// pos is, per field of schema, its column in the reader's records,
	// or -1 (not in the file: nulls).
	pos []int
}

func (s *Store) openRows(ctx context.Context, project string, f DataFile, schema *arrow.Schema, alloc memory.Allocator) (*fileRows, error) {
	key := s.layout.file(project, f.Ref())
	src, err := openSource(ctx, s.bucket, key, f.Bytes, mergeWholeBytes, nil)
	if err != nil {
		return nil, err
	}
	fs, err := fileSchema(src.meta)
	if err != nil {
		return nil, fmt.Errorf("cannot read the schema of data file %q: %w", key, err)
	}
	r := &fileRows{key: key, schema: schema, alloc: alloc, pos: make([]int, schema.NumFields())}
	var cols []int
	for i, fld := range schema.Fields() {
		r.pos[i] = -1
		if idx := fs.FieldIndices(fld.Name); len(idx) == 1 {
			if !arrow.TypeEqual(fs.Field(idx[0]).Type, fld.Type) {
				return nil, fmt.Errorf("%w: column %q of %q is %s, the table says %s", ErrSchemaMismatch, fld.Name, key, fs.Field(idx[0]).Type, fld.Type)
			}
			r.pos[i] = len(cols)
			cols = append(cols, idx[0])
		}
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: data file %q has none of the columns %v", ErrSchemaMismatch, key, schema.Fields())
	}
	rdr, err := file.NewParquetReader(src.src, file.WithMetadata(src.meta),
		file.WithReadProps(parquet.NewReaderProperties(alloc)))
	if err != nil {
		return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: mergeBatchRows}, alloc)
	if err != nil {
		return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
	}
	rgs := make([]int, len(src.meta.RowGroups))
	for i := range rgs {
		rgs[i] = i
	}
	if r.rr, err = fr.GetRecordReader(ctx, cols, rgs); err != nil {
		return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
	}
	return r, nil
}

// next returns the next batch (the caller releases it), or nil at the end.
func (r *fileRows) next() (arrow.Record, error) {
	if !r.rr.Next() {
		if err := r.rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("cannot read data file %q: %w", r.key, err)
		}
		return nil, nil
	}
	rec := r.rr.Record()
	n := rec.NumRows()
	cols := make([]arrow.Array, r.schema.NumFields())
	for i, p := range r.pos {
		if p < 0 {
			cols[i] = array.MakeArrayOfNull(r.alloc, r.schema.Field(i).Type, int(n))
			continue
		}
		cols[i] = rec.Column(p)
		cols[i].Retain()
	}
	out := array.NewRecord(r.schema, cols, n)
	releaseAll(cols)
	return out, nil
}

func (r *fileRows) close() {
	if r.rr != nil {
		r.rr.Release()
		r.rr = nil
	}
}

// mergeCursor is one input of a merge: its current batch (an index into
// the merger's batches) and row.
type mergeCursor struct {
	in *fileRows
	// file is the input's place in the group: equal keys go to the
	// earlier file first.
	file  int
	batch int32
	row   int32
	// rows is how many rows of the file come before the current batch;
	// keep (keyed tables) says per row of the file whether it is kept.
	rows int64
	keep []bool
	done bool
}

// merger merges its inputs' rows in sort-key order into records of at
// most groupRows rows.
type merger struct {
	def       *Table
	alloc     memory.Allocator
	groupRows int
	cmp       *sortKeyCmp
	inputs    []*mergeCursor
	// batches are the records the rows of order and the inputs' current
	// rows point into (nil: let go of), refs per batch how many rows of
	// order are in it, held how many are not nil.
	batches []arrow.Record
	refs    []int
	held    int
	order   []rowRef
	// pieces are the rows of the row group being built that were copied
	// out of their batches (settle), in order, before the rows of order.
	pieces []arrow.Record
}

func newMerger(def *Table, alloc memory.Allocator) (*merger, error) {
	c, err := newSortKeyCmp(def.Schema, def.SortKey, nil)
	if err != nil {
		return nil, err
	}
	return &merger{def: def, alloc: alloc, cmp: c}, nil
}

func (m *merger) release() {
	for _, b := range m.batches {
		if b != nil {
			b.Release()
		}
	}
	m.batches = nil
	for _, p := range m.pieces {
		p.Release()
	}
	m.pieces = nil
	for _, c := range m.inputs {
		c.in.close()
	}
}

func (m *merger) less(a, b *mergeCursor) bool {
	return cmp.Or(m.cmp.compare(rowRef{a.batch, a.row}, rowRef{b.batch, b.row}), cmp.Compare(a.file, b.file)) < 0
}

// advance moves c to its next kept row, reading its next batch when the
// current one is used up; c.done at the end of its file. A file whose
// rows are out of sort-key order is an error: the merge would write them
// out of order.
func (m *merger) advance(c *mergeCursor, first bool) error {
	prev := rowRef{c.batch, c.row}
	// A batch the cursor leaves with no row in order is let go of at
	// once (after the order check, for prev's): a keyed merge skips
	// whole batches of rows that newer files replace.
	leave := func(b int32) {
		if b >= 0 && m.refs[b] == 0 && m.batches[b] != nil {
			m.batches[b].Release()
			m.batches[b] = nil
			m.held--
		}
	}
	defer func() {
		if prev.src >= 0 && prev.src != c.batch {
			leave(prev.src)
		}
	}()
	for {
		if !first {
			c.row++
		}
		first = false
		if c.batch < 0 || int64(c.row) >= m.batches[c.batch].NumRows() {
			if c.batch >= 0 {
				c.rows += m.batches[c.batch].NumRows()
				if c.batch != prev.src {
					leave(c.batch)
				}
			}
			rec, err := c.in.next()
			if err != nil {
				return err
			}
			if rec == nil {
				c.done = true
				return nil
			}
			m.batches = append(m.batches, rec)
			m.refs = append(m.refs, 0)
			m.held++
			m.cmp.recs = m.batches
			c.batch, c.row = int32(len(m.batches)-1), 0
		}
		if c.keep != nil && !c.keep[c.rows+int64(c.row)] {
			continue
		}
		if prev.src >= 0 && m.cmp.compare(prev, rowRef{c.batch, c.row}) > 0 {
			return fmt.Errorf("data file %q is not sorted by %v", c.in.key, m.def.SortKey)
		}
		return nil
	}
}

// run merges every input and hands each record of up to groupRows rows to
// emit (which must not keep it).
func (m *merger) run(emit func(arrow.Record) error) error {
	h := &cursorHeap{m: m}
	for _, c := range m.inputs {
		c.batch = -1
		if err := m.advance(c, true); err != nil {
			return err
		}
		if !c.done {
			h.cs = append(h.cs, c)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		c := h.cs[0]
		m.order = append(m.order, rowRef{c.batch, c.row})
		m.refs[c.batch]++
		if err := m.advance(c, false); err != nil {
			return err
		}
		if c.done {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
		if m.rows() >= m.groupRows {
			if err := m.flush(emit); err != nil {
				return err
			}
		} else if m.held > 2*len(m.inputs) {
			// The rows of the group point into more batches than the
			// inputs read: where inputs interleave sparsely (a keyed
			// merge keeping few of the rows it reads) they would hold
			// every batch read until the group is full.
			if err := m.settle(); err != nil {
				return err
			}
		}
	}
	return m.flush(emit)
}

// rows is how many rows the row group being built has.
func (m *merger) rows() int {
	n := len(m.order)
	for _, p := range m.pieces {
		n += int(p.NumRows())
	}
	return n
}

// settle copies the rows of order into a piece and lets go of the
// batches no input still reads.
func (m *merger) settle() error {
	if len(m.order) > 0 {
		rec, err := takeRecord(m.alloc, m.def.Schema, m.batches, m.order)
		if err != nil {
			return err
		}
		m.pieces = append(m.pieces, rec)
		m.order = m.order[:0]
	}
	m.dropRead()
	return nil
}

// flush hands the rows of the group (pieces, then order) to emit as one
// record, then lets go of the batches no input still reads.
func (m *merger) flush(emit func(arrow.Record) error) error {
	if len(m.pieces) > 0 {
		if err := m.settle(); err != nil {
			return err
		}
		rec, err := concatRecords(m.alloc, m.def.Schema, m.pieces)
		for _, p := range m.pieces {
			p.Release()
		}
		m.pieces = m.pieces[:0]
		if err != nil {
			return err
		}
		err = emit(rec)
		rec.Release()
		return err
	}
	if len(m.order) > 0 {
		rec, err := takeRecord(m.alloc, m.def.Schema, m.batches, m.order)
		if err != nil {
			return err
		}
		err = emit(rec)
		rec.Release()
		if err != nil {
			return err
		}
		m.order = m.order[:0]
	}
	m.dropRead()
	return nil
}

// dropRead lets go of the batches that no input still reads; order must
// be empty.
func (m *merger) dropRead() {
	kept := make([]arrow.Record, 0, len(m.inputs))
	for _, c := range m.inputs {
		if c.batch >= 0 && !c.done {
			kept = append(kept, m.batches[c.batch])
			m.batches[c.batch] = nil
			c.batch = int32(len(kept) - 1)
		}
	}
	for _, b := range m.batches {
		if b != nil {
			b.Release()
		}
	}
	m.batches = kept
	m.refs = append(m.refs[:0], make([]int, len(kept))...)
	m.held = len(kept)
	m.cmp.recs = kept
}

// cursorHeap orders a merge's inputs by their current rows.
type cursorHeap struct {
	m  *merger
	cs []*mergeCursor
}

func (h *cursorHeap) Len() int           { return len(h.cs) }
func (h *cursorHeap) Less(i, j int) bool { return h.m.less(h.cs[i], h.cs[j]) }
func (h *cursorHeap) Swap(i, j int)      { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *cursorHeap) Push(x any)         { h.cs = append(h.cs, x.(*mergeCursor)) }
func (h *cursorHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}

// peakAllocator counts the bytes allocated through it and not yet freed,
// and the most at once.
type peakAllocator struct {
	memory.Allocator
	count *peakCount
}

// peakCount is what peakAllocators sharing it hold, now and at most.
type peakCount struct{ cur, peak atomic.Int64 }

func (a *peakAllocator) add(n int64) {
	c := a.count.cur.Add(n)
	for {
		p := a.count.peak.Load()
		if c <= p || a.count.peak.CompareAndSwap(p, c) {
			return
		}
	}
}

func (a *peakAllocator) Allocate(size int) []byte {
	a.add(int64(size))
	return a.Allocator.Allocate(size)
}

func (a *peakAllocator) Reallocate(size int, b []byte) []byte {
	a.add(int64(size - len(b)))
	return a.Allocator.Reallocate(size, b)
}

func (a *peakAllocator) Free(b []byte) {
	a.add(-int64(len(b)))
	a.Allocator.Free(b)
}

// fileSink writes a new data file of one partition row group by row
// group, streaming it to the store as it is encoded. The object is
// started with the first row group: a merge with no rows writes nothing.
type fileSink struct {
	s         *Store
	ctx       context.Context
	project   string
	def       *Table
	alloc     memory.Allocator
	groupRows int64
	f         DataFile
	fw        *pqarrow.FileWriter
	limit     int
	pw        *io.PipeWriter
	sent      *countingWriter
	done      chan error
}

func (s *Store) newFileSink(ctx context.Context, project string, def *Table, partition string, alloc memory.Allocator) *fileSink {
	groupRows := s.cfg.RowGroupRows
	if def.RowGroupRows > 0 {
		groupRows = def.RowGroupRows
	}
	now := s.now()
	return &fileSink{s: s, ctx: ctx, project: project, def: def, alloc: alloc, groupRows: groupRows,
		f: DataFile{Table: def.Name, Partition: partition, Name: newID(now) + parquetExt, WrittenAt: now.UTC(), def: def}}
}

// writeGroup encodes rec (sorted, at most groupRows rows, after the rows
// written before) as the file's next row group.
func (w *fileSink) writeGroup(rec arrow.Record) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if w.fw == nil {
		if err := w.start(); err != nil {
			return err
		}
	}
	if err := writeRowGroups(w.fw, w.def, rec, w.groupRows, w.alloc, w.limit); err != nil {
		return fmt.Errorf("cannot encode rows of table %q: %w", w.def.Name, err)
	}
	w.f.Rows += rec.NumRows()
	w.f.RowGroups++
	if len(w.def.SortKey) > 0 {
		col := rec.Column(w.def.Schema.FieldIndices(w.def.SortKey[0])[0])
		// Sorted with nulls first: the first non-null row is the least.
		if w.f.Min == nil && col.NullN() < col.Len() {
			w.f.Min = keyAt(col, col.NullN()).json()
		}
		if col.IsValid(col.Len() - 1) {
			w.f.Max = keyAt(col, col.Len()-1).json()
		}
	}
	return nil
}

func (w *fileSink) start() error {
	key := w.s.layout.file(w.project, w.f.Ref())
	pr, pw := io.Pipe()
	w.pw, w.sent, w.done = pw, &countingWriter{w: pw}, make(chan error, 1)
	go func() {
		_, err := w.s.bucket.PutIf(w.ctx, key, pr, storage.IfAbsent())
		if err != nil {
			err = fmt.Errorf("cannot store data file %q: %w", key, err)
			pr.CloseWithError(err)
		} else {
			pr.Close()
		}
		w.done <- err
	}()
	props := writerProperties(w.def, w.groupRows, w.alloc)
	w.limit = int(props.DictionaryPageSizeLimit())
	fw, err := pqarrow.NewFileWriter(w.def.Schema, w.sent, props,
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return fmt.Errorf("cannot start Parquet file of table %q: %w", w.def.Name, err)
	}
	w.fw = fw
	return nil
}

// finish writes the footer and waits for the store; ok is false when no
// row was written (and so no file).
func (w *fileSink) finish() (f DataFile, ok bool, err error) {
	if w.fw == nil {
		return DataFile{}, false, nil
	}
	fw := w.fw
	w.fw = nil
	if err := fw.Close(); err != nil {
		w.pw.CloseWithError(err)
		<-w.done
		w.pw = nil
		return DataFile{}, false, fmt.Errorf("cannot finish Parquet file of table %q: %w", w.def.Name, err)
	}
	w.pw.Close()
	err = <-w.done
	w.pw = nil
	if err != nil {
		return DataFile{}, false, err
	}
	if w.f.Min == nil || w.f.Max == nil {
		w.f.Min, w.f.Max = nil, nil
	}
	w.f.Bytes = w.sent.n
	w.s.cfg.Metrics.written(w.f)
	return w.f, true, nil
}

// abort gives up a file not finished: the store never sees it whole.
func (w *fileSink) abort() {
	if w.pw == nil {
		return
	}
	w.pw.CloseWithError(errors.New("merge abandoned"))
	<-w.done
	w.pw = nil
	if w.fw != nil {
		_ = w.fw.Close() // frees the encoder's buffers; the pipe is closed
		w.fw = nil
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
