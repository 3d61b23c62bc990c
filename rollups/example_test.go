package rollups_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
)

// A writer stores rows as a data file and commits it together with its
// checkpoint; a reader scans the table.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rollups-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bucket, err := storage.Open(ctx, storage.Config{Dir: dir}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer bucket.Close()

	visits := &rollups.Table{
		Name: "visits_by_path",
		Schema: arrow.NewSchema([]arrow.Field{
			{Name: "path", Type: arrow.BinaryTypes.String},
			{Name: "visits", Type: arrow.PrimitiveTypes.Int64},
		}, nil),
		SortKey: []string{"path"},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, visits.Schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"/pricing", "/", "/blog"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{7, 42, 3}, nil)
	rec := b.NewRecord()
	b.Release()
	defer rec.Release()

	store, err := rollups.NewStore(bucket, rollups.DefaultConfig(), nil)
	if err != nil {
		log.Fatal(err)
	}
	const project = "0b5e6f1c-9a7d-4e2b-8c3f-2d1e0f9a8b7c"
	file, err := store.Write(ctx, project, visits, "2026-03-29", rec)
	if err != nil {
		log.Fatal(err)
	}
	m, err := store.Update(ctx, rollups.Live(project), func(m *rollups.Manifest) (rollups.Change, error) {
		return rollups.Change{Add: []rollups.DataFile{file}, Checkpoints: map[string]string{"example": "1"}}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", m.Version, "checkpoint example", m.Checkpoint("example"))

	reader, err := rollups.NewReader(bucket, rollups.DefaultReaderConfig(), nil)
	if err != nil {
		log.Fatal(err)
	}
	snap, err := reader.Snapshot(ctx, project)
	if err != nil {
		log.Fatal(err)
	}
	err = snap.Scan(ctx, "visits_by_path", rollups.ScanOptions{From: "2026-03-01", To: "2026-03-31"}, func(b rollups.Batch) error {
		paths, counts := b.Record.Column(0).(*array.String), b.Record.Column(1).(*array.Int64)
		for i := range paths.Len() {
			fmt.Println(b.Partition, paths.Value(i), counts.Value(i))
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// version 1 checkpoint example 1
	// 2026-03-29 / 42
	// 2026-03-29 /blog 3
	// 2026-03-29 /pricing 7
}
