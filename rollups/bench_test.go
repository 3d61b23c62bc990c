package rollups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/records"
)

// Benchmarks run on the local directory backend (t.TempDir()).
//
//	go test -run '^$' -bench . -benchmem ./rollups/

func benchBucket(b *testing.B) storage.Bucket {
	b.Helper()
	return apptest.OpenBucket(b, b.TempDir())
}

func benchStore(b *testing.B, bk storage.Bucket) *Store {
	b.Helper()
	s, err := NewStore(bk, DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkWrite measures writing a day's file of pageview-like rows
// (unsorted input, so the sort is included): rows/s, and the bytes stored
// per row (stored-B/row), the figure behind the target of under
// 40 bytes per event.
func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			bk := benchBucket(b)
			s := benchStore(b, bk)
			rec := pageviewRecord(b, genPageviews(1, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), n))
			defer rec.Release()
			var stored int64
			b.SetBytes(recordBytes(rec))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f, err := s.Write(b.Context(), testProject, pageviewTable(), "2026-03-29", rec)
				if err != nil {
					b.Fatal(err)
				}
				stored = f.Bytes
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(stored)/float64(n), "stored-B/row")
		})
	}
}

// BenchmarkScan measures scanning 30 days of 20,000 rows each through a
// Reader: "cold" with the cache off (every scan reads and decodes the
// files), "cached" with decoded columns served from memory; all columns,
// and two columns (projection).
func BenchmarkScan(b *testing.B) {
	bk := benchBucket(b)
	s := benchStore(b, bk)
	ctx := context.Background()
	const days, perDay = 30, 20_000
	var adds []DataFile
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for d := range days {
		day := start.AddDate(0, 0, d)
		rec := pageviewRecord(b, genPageviews(uint64(d), day, perDay))
		f, err := s.Write(ctx, testProject, pageviewTable(), day.Format(time.DateOnly), rec)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		adds = append(adds, f)
	}
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: adds}); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		cache int64
	}{{"cold", 0}, {"cached", 1 << 30}} {
		for _, cols := range []struct {
			name string
			cols []string
		}{{"all", nil}, {"two", []string{"time", "country"}}} {
			b.Run(mode.name+"/"+cols.name, func(b *testing.B) {
				cfg := DefaultReaderConfig()
				cfg.CacheBytes = mode.cache
				r, err := NewReader(bk, cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				sn, err := r.Refresh(ctx, testProject)
				if err != nil {
					b.Fatal(err)
				}
				scan := func() int64 {
					var rows, size int64
					err := sn.Scan(ctx, "pageviews", ScanOptions{Columns: cols.cols}, func(bt Batch) error {
						rows += bt.Record.NumRows()
						size += recordBytes(bt.Record)
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					if rows != days*perDay {
						b.Fatalf("scanned %d rows, want %d", rows, days*perDay)
					}
					return size
				}
				b.SetBytes(scan()) // warms the cache in "cached" mode
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					scan()
				}
				b.ReportMetric(float64(days*perDay)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkCommit measures the latency of one commit (one file added, one
// checkpoint moved) on the local backend: with the manifest known from
// the previous commit (one conditional put), and with a manifest of many
// live files (the encoding cost grows with it).
func BenchmarkCommit(b *testing.B) {
	for _, files := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			bk := benchBucket(b)
			s := benchStore(b, bk)
			ctx := context.Background()
			f := writeRowsB(b, s)
			// Grow the manifest with references (one data object is enough
			// for commit latency: commits do not read data files).
			var adds []DataFile
			for i := range files {
				g := f
				g.Name = fmt.Sprintf("%012x-%020x%s", i, i, parquetExt)
				g.Partition = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i%1000).Format(time.DateOnly)
				adds = append(adds, g)
			}
			m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: adds})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				g := f
				g.Name = fmt.Sprintf("%012x-%020x%s", files+i, i, parquetExt)
				g.WrittenAt = time.Now()
				i++
				m, err = s.Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{g}, Checkpoints: map[string]string{"processor": fmt.Sprint(i)}})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/commit")
		})
	}
}

func writeRowsB(b *testing.B, s *Store) DataFile {
	rec := pageviewRecord(b, genPageviews(1, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), 100))
	defer rec.Release()
	f, err := s.Write(context.Background(), testProject, pageviewTable(), "2026-03-29", rec)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkArchive measures archiving pageview batches (10 events each,
// website source, full mode) in the log record encoding: rows/s of
// batches and the bytes stored per event.
func BenchmarkArchive(b *testing.B) {
	const batches, perBatch = 5_000, 10
	rows := genPageviews(3, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), batches*perBatch)
	abs := make([]ArchivedBatch, batches)
	for i := range abs {
		bt := &records.Batch{
			Project: testProject, Source: "1c2d3e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5",
			SourceKind: records.SourceWebsite, Mode: records.ModeFull,
			ReceivedAt: rows[i*perBatch].Time, SentAt: rows[i*perBatch].Time - 20,
			Edge:    records.Edge{Country: rows[i*perBatch].Country, Device: rows[i*perBatch].Device, Browser: rows[i*perBatch].Browser, OS: "Linux"},
			Context: records.Context{SDK: "mf-js/1.0.0", Locale: "de-DE", Timezone: "Europe/Berlin", HasScreen: true, ScreenWidth: 1920, ScreenHeight: 1080},
		}
		copy(bt.ID[:], uuidBytes(b, rows[i*perBatch].EventID))
		for _, r := range rows[i*perBatch : (i+1)*perBatch] {
			e := records.Event{Name: "$pageview", Time: r.Time, AnonymousID: "b-" + r.EventID[:8]}
			copy(e.ID[:], uuidBytes(b, r.EventID))
			if r.VisitID != nil {
				copy(e.SessionID[:], uuidBytes(b, *r.VisitID))
			}
			e.Page.URL = records.URL{Scheme: "https", Host: "shop.example", Path: r.Path}
			e.Page.Title = "Shop – " + r.Path
			if r.Referrer != nil {
				e.Page.Referrer = records.URL{Scheme: "https", Host: *r.Referrer, Path: "/"}
			}
			bt.Events = append(bt.Events, e)
		}
		bt.Receipt = records.Receipt{Batch: rows[i*perBatch].EventID, Accepted: perBatch}
		abs[i] = ArchivedBatch{Seq: int64(i), Batch: bt}
	}
	s := benchStore(b, benchBucket(b))
	var stored int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec, err := ArchiveRecord(abs)
		if err != nil {
			b.Fatal(err)
		}
		f, err := s.Write(b.Context(), testProject, ArchiveTable(), "2026-03-29", rec)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		stored = f.Bytes
	}
	b.ReportMetric(float64(batches*perBatch)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(stored)/float64(batches*perBatch), "stored-B/event")
}
