package rollups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

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
	for _, name := range t.SortKey[:min(1, len(t.SortKey))] {
		opts = append(opts, parquet.WithStatsFor(name, true))
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
	var buf bytes.Buffer
	// Encoded and compressed, rows take a fraction of their Arrow size:
	// start there rather than doubling up from nothing.
	buf.Grow(int(min(recordBytes(rec)/4, 256<<20)))
	fw, err := pqarrow.NewFileWriter(t.Schema, &buf, writerProperties(t, rowGroupRows, alloc),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, 0, fmt.Errorf("cannot start Parquet file of table %q: %w", t.Name, err)
	}
	if rec.NumRows() > 0 {
		if err := fw.Write(rec); err != nil {
			_ = fw.Close()
			return nil, 0, fmt.Errorf("cannot encode rows of table %q: %w", t.Name, err)
		}
	}
	if err := fw.Close(); err != nil {
		return nil, 0, fmt.Errorf("cannot finish Parquet file of table %q: %w", t.Name, err)
	}
	groups := int((rec.NumRows() + rowGroupRows - 1) / rowGroupRows)
	return buf.Bytes(), groups, nil
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
}

// openSource opens the data file key of size bytes: whole with one
// request when it is at most wholeBytes, else by ranges. meta, when not
// nil, is the file's footer read earlier.
func openSource(ctx context.Context, b storage.BucketReader, key string, size, wholeBytes int64, meta *metadata.FileMetaData) (*parquetSource, error) {
	var src parquet.ReaderAtSeeker
	if size <= wholeBytes {
		data, _, err := storage.ReadAll(ctx, b, key)
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				err = fmt.Errorf("%w: %w", ErrFileGone, err)
			}
			return nil, fmt.Errorf("cannot read data file %q: %w", key, err)
		}
		src = bytes.NewReader(data)
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
	return &parquetSource{src: src, meta: meta}, nil
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
