package rollups

import (
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/storage/records"
)

// ArchiveTableName is the name of the raw-event archive table.
const ArchiveTableName = "archive"

// ArchiveTable returns the definition of the raw-event archive: every
// accepted batch, as its log record (the storage/records encoding, so a
// replay decodes exactly what the live consumer decoded, whatever fields
// the record format gains), with the columns a replay seeks by. One row
// per batch, sorted by log position; the writer partitions by the day the
// batch was received, in the project's time zone.
func ArchiveTable() *Table {
	return &Table{
		Name: ArchiveTableName,
		Schema: arrow.NewSchema([]arrow.Field{
			// seq is the batch's position in the project's log.
			{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
			{Name: "batch_id", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}},
			{Name: "received_at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
			{Name: "events", Type: arrow.PrimitiveTypes.Int32},
			// record is the batch in the log record encoding
			// (docs/records.md).
			{Name: "record", Type: arrow.BinaryTypes.Binary},
		}, nil),
		SortKey:      []string{"seq"},
		NoDictionary: []string{"seq", "batch_id", "received_at", "record"},
	}
}

// ArchivedBatch is one row of the archive: a batch and its log position.
type ArchivedBatch struct {
	Seq   int64
	Batch *records.Batch
}

// ArchiveRecord encodes batches as rows of the archive table.
func ArchiveRecord(batches []ArchivedBatch) (arrow.Record, error) {
	t := ArchiveTable()
	b := array.NewRecordBuilder(memory.DefaultAllocator, t.Schema)
	defer b.Release()
	seq := b.Field(0).(*array.Int64Builder)
	id := b.Field(1).(*array.FixedSizeBinaryBuilder)
	recv := b.Field(2).(*array.TimestampBuilder)
	events := b.Field(3).(*array.Int32Builder)
	rec := b.Field(4).(*array.BinaryBuilder)
	var buf []byte
	for _, ab := range batches {
		var err error
		buf, err = records.Append(buf[:0], ab.Batch)
		if err != nil {
			return nil, fmt.Errorf("cannot archive batch %x at %d: %w", ab.Batch.ID[:], ab.Seq, err)
		}
		seq.Append(ab.Seq)
		id.Append(ab.Batch.ID[:])
		recv.Append(arrow.Timestamp(ab.Batch.ReceivedAt))
		events.Append(int32(len(ab.Batch.Events)))
		rec.Append(buf)
	}
	return b.NewRecord(), nil
}

// ReadArchive decodes rows of the archive table (a scan of it with every
// column, or at least seq and record).
func ReadArchive(rec arrow.Record) ([]ArchivedBatch, error) {
	seqIdx, recIdx := rec.Schema().FieldIndices("seq"), rec.Schema().FieldIndices("record")
	if len(seqIdx) != 1 || len(recIdx) != 1 {
		return nil, fmt.Errorf("%w: archive rows need the columns seq and record, have %s", ErrSchemaMismatch, columnNames(rec.Schema()))
	}
	seqs, ok1 := rec.Column(seqIdx[0]).(*array.Int64)
	data, ok2 := rec.Column(recIdx[0]).(*array.Binary)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: archive columns seq and record are %s and %s", ErrSchemaMismatch, rec.Column(seqIdx[0]).DataType(), rec.Column(recIdx[0]).DataType())
	}
	out := make([]ArchivedBatch, 0, rec.NumRows())
	for i := range int(rec.NumRows()) {
		b, err := records.Decode(data.Value(i))
		if err != nil {
			return nil, fmt.Errorf("cannot decode archived batch at %d: %w", seqs.Value(i), err)
		}
		out = append(out, ArchivedBatch{Seq: seqs.Value(i), Batch: b})
	}
	return out, nil
}
