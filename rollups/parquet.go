package rollups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/mfhq/mf/storage"
)

// createdBy is the writer name recorded in every Parquet footer.
const createdBy = "mf rollups (parquet-go 17)"

// writerProperties are the Parquet settings of a table's files: zstd,
// dictionary encoding except for NoDictionary columns (delta encoding for
// their integers and timestamps), row groups of at most rowGroupRows
// rows, statistics on.
func writerProperties(t *Table, rowGroupRows int64, alloc memory.Allocator) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(compress.DefaultCompressionLevel),
		parquet.WithMaxRowGroupLength(rowGroupRows),
		parquet.WithDictionaryDefault(true),
		parquet.WithStats(false),
		parquet.WithCreatedBy(createdBy),
		parquet.WithAllocator(alloc),
	}
	if key := statsColumn(t); key != "" {
		opts = append(opts, parquet.WithStatsFor(key, true))
	}
	for _, name := range t.NoDictionary {
		opts = append(opts, parquet.WithDictionaryFor(name, false))
		idx := t.Schema.FieldIndices(name)
		if len(idx) != 1 {
			continue
		}
		switch t.Schema.Field(idx[0]).Type.ID() {
		case arrow.INT32, arrow.INT64, arrow.UINT32, arrow.UINT64, arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
			opts = append(opts, parquet.WithEncodingFor(name, parquet.Encodings.DeltaBinaryPacked))
		}
	}
	return parquet.NewWriterProperties(opts...)
}

// encodeParquet writes rec (rows already in order) as a Parquet file; the
// encoder's buffers come from alloc.
func encodeParquet(t *Table, rec arrow.Record, rowGroupRows int64, alloc memory.Allocator) ([]byte, int, error) {
	return encodeParquetAs(t, rec, rowGroupRows, alloc, true, nil)
}

// encodeParquetAs is encodeParquet with direct dictionaries on or off
// (writeRowGroups; the files are the same either way), writing into out
// (its capacity; nil: a new buffer).
func encodeParquetAs(t *Table, rec arrow.Record, rowGroupRows int64, alloc memory.Allocator, direct bool, out []byte) ([]byte, int, error) {
	buf := bytes.NewBuffer(out[:0])
	if out == nil {
		// Encoded and compressed, rows take a fraction of their Arrow
		// size: start there rather than doubling up from nothing.
		buf.Grow(int(min(recordBytes(rec)/4, 256<<20)))
	}
	props := writerProperties(t, rowGroupRows, alloc)
	limit := 0
	if direct {
		limit = int(props.DictionaryPageSizeLimit())
	}
	fw, err := pqarrow.NewFileWriter(t.Schema, buf, props,
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, 0, fmt.Errorf("cannot start Parquet file of table %q: %w", t.Name, err)
	}
	if err := writeRowGroups(fw, t, rec, rowGroupRows, alloc, limit); err != nil {
		_ = fw.Close()
		return nil, 0, fmt.Errorf("cannot encode rows of table %q: %w", t.Name, err)
	}
	if err := fw.Close(); err != nil {
		return nil, 0, fmt.Errorf("cannot finish Parquet file of table %q: %w", t.Name, err)
	}
	groups := int((rec.NumRows() + rowGroupRows - 1) / rowGroupRows)
	return buf.Bytes(), groups, nil
}

// statsColumn is the one column whose Parquet statistics are written: the
// first sort-key column, by which readers prune row groups. Statistics of
// other columns cost a comparison per value and are read by nobody.
func statsColumn(t *Table) string {
	if len(t.SortKey) == 0 {
		return ""
	}
	return t.SortKey[0]
}

// writeRowGroups writes rec as row groups of rowGroupRows rows, as
// pqarrow's FileWriter.Write does. With a limit (the dictionary page size
// limit; 0 turns this off), string columns that are
// dictionary encoded (and carry no statistics) are handed to the encoder
// as Arrow dictionary arrays built here (dictionaryOf), whose dictionary
// and indices it writes as they are. Otherwise pqarrow turns every value
// into a slice header (24 bytes of pointers the collector tracks, in a
// fresh array per column) and hashes it through an interface, which took
// a sixth of the processor's CPU. The file is the same byte for byte
// (but for the order of a column chunk's page-encoding statistics in the
// footer, which arrow-go takes from a map, run to run):
// the dictionary is in order of first appearance as the encoder's would
// be, and a column whose dictionary would reach the page size limit
// (where the encoder falls back to plain encoding) is handed over dense.
func writeRowGroups(fw *pqarrow.FileWriter, t *Table, rec arrow.Record, rowGroupRows int64, alloc memory.Allocator, limit int) error {
	direct := limit > 0
	dict := make([]bool, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		dict[i] = direct && f.Type.ID() == arrow.STRING && f.Name != statsColumn(t) && !slices.Contains(t.NoDictionary, f.Name)
	}
	n := rec.NumRows()
	for lo := int64(0); lo < n; lo += rowGroupRows {
		hi := min(lo+rowGroupRows, n)
		fw.NewRowGroup()
		for i, col := range rec.Columns() {
			part := array.NewSlice(col, lo, hi)
			if dict[i] {
				if d := dictionaryOf(part.(*array.String), alloc, limit); d != nil {
					part.Release()
					part = d
				}
			}
			err := fw.WriteColumnData(part)
			part.Release()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// dictionaryOf returns a dictionary array of the values of a (int32
// indices, the distinct values in order of first appearance), or nil when
// the dictionary would take limit bytes or more as a Parquet dictionary
// page (4 bytes of length per value).
func dictionaryOf(a *array.String, alloc memory.Allocator, limit int) arrow.Array {
	n := a.Len()
	seen := make(map[string]int32, 256)
	values := array.NewStringBuilder(alloc)
	defer values.Release()
	indices := array.NewInt32Builder(alloc)
	defer indices.Release()
	indices.Reserve(n)
	size := 0
	for i := range n {
		if a.IsNull(i) {
			indices.UnsafeAppendBoolToBitmap(false)
			continue
		}
		// v points into a's buffer, which outlives the map.
		v := a.Value(i)
		k, ok := seen[v]
		if !ok {
			size += len(v) + 4
			if size >= limit {
				return nil
			}
			k = int32(len(seen))
			seen[v] = k
			values.Append(v)
		}
		indices.UnsafeAppend(k)
	}
	dv := values.NewArray()
	defer dv.Release()
	iv := indices.NewArray()
	defer iv.Release()
	return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, iv, dv)
}

// recordBytes is the in-memory size of a record's buffers.
func recordBytes(rec arrow.Record) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += arraySize(c)
	}
	return n
}

// objectReaderAt reads an object by ranged requests: the Parquet reader
// asks for the footer, then for each column chunk it needs.
type objectReaderAt struct {
	ctx    context.Context
	bucket storage.BucketReader
	key    string
	size   int64
	pos    int64
	// fetched counts the bytes requested (for tests and metrics).
	fetched int64
}

func (r *objectReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	obj, err := r.bucket.GetRange(r.ctx, r.key, off, want)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrFileGone, err)
		}
		return 0, err
	}
	defer obj.Close()
	n, err := io.ReadFull(obj, p[:want])
	r.fetched += int64(n)
	if err != nil {
		return n, fmt.Errorf("cannot read %d bytes at %d of %q: %w", want, off, r.key, err)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

func (r *objectReaderAt) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, fmt.Errorf("bad whence %d", whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek to %d before the start", offset)
	}
	r.pos = offset
	return offset, nil
}

// parquetSource is a data file opened for reading: its footer and the
// bytes (whole, or by ranges).
type parquetSource struct {
	src  parquet.ReaderAtSeeker
	meta *metadata.FileMetaData
	// data is the file, when fetched whole (src reads it).
	data []byte
}

// fork returns a source of the same file for another goroutine: readers
// seek their source, so a whole file gets a reader of its own over the
// same bytes. A source read by ranges is returned as it is (not shared).
func (s *parquetSource) fork() *parquetSource {
	if s.data == nil {
		return s
	}
	return &parquetSource{src: bytes.NewReader(s.data), meta: s.meta, data: s.data}
}

// openSource opens the data file key of size bytes: whole with one
// request when it is at most wholeBytes, else by ranges. meta, when not
// nil, is the file's footer read earlier.
func openSource(ctx context.Context, b storage.BucketReader, key string, size, wholeBytes int64, meta *metadata.FileMetaData) (*parquetSource, error) {
	var src parquet.ReaderAtSeeker
	var whole []byte
	if size <= wholeBytes {
		data, _, err := storage.ReadAll(ctx, b, key)
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				err = fmt.Errorf("%w: %w", ErrFileGone, err)
			}
			return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
		}
		src, whole = bytes.NewReader(data), data
	} else {
		src = &objectReaderAt{ctx: ctx, bucket: b, key: key, size: size}
	}
	if meta == nil {
		rdr, err := file.NewParquetReader(src)
		if err != nil {
			return nil, fmt.Errorf("cannot read the footer of data file %q: %w", key, err)
		}
		meta = rdr.MetaData()
	}
	return &parquetSource{src: src, meta: meta, data: whole}, nil
}

// arrowReader returns a pqarrow reader of the source.
func (s *parquetSource) arrowReader() (*pqarrow.FileReader, error) {
	rdr, err := file.NewParquetReader(s.src, file.WithMetadata(s.meta),
		file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
	if err != nil {
		return nil, err
	}
	return pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
}

// readColumns reads the columns cols (indices into the file's schema,
// which is flat) of the row groups rgs, one array each (the caller
// releases them). Columns are read one by one, without the library's
// goroutine fan-out, whose error and cancellation paths dereference
// missing results (parquet-go 17).
func readColumns(ctx context.Context, fr *pqarrow.FileReader, rgs []int, cols []int) ([]arrow.Array, error) {
	out := make([]arrow.Array, 0, len(cols))
	fail := func(err error) ([]arrow.Array, error) {
		releaseAll(out)
		return nil, err
	}
	for _, c := range cols {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		rdr, err := fr.GetFieldReader(ctx, c, map[int]bool{c: true}, rgs)
		if err != nil {
			return fail(err)
		}
		chunked, err := fr.ReadColumn(rgs, rdr)
		rdr.Release()
		if err != nil {
			return fail(err)
		}
		chunks := chunked.Chunks()
		var a arrow.Array
		switch len(chunks) {
		case 0:
			a = array.MakeArrayOfNull(memory.DefaultAllocator, chunked.DataType(), 0)
		case 1:
			a = chunks[0]
			a.Retain()
		default:
			a, err = array.Concatenate(chunks, memory.DefaultAllocator)
		}
		chunked.Release()
		if err != nil {
			return fail(err)
		}
		out = append(out, a)
	}
	return out, nil
}

// fileSchema returns the Arrow schema stored in a file's footer.
func fileSchema(meta *metadata.FileMetaData) (*arrow.Schema, error) {
	return pqarrow.FromParquet(meta.Schema, nil, meta.KeyValueMetadata())
}
