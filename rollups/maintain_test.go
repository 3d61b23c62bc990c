package rollups

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
)

// testCompaction: merging small files keeps every row, keeps files sorted,
// survives commits racing it, and leaves old snapshots readable until the
// retired files are collected.
func testCompaction(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, func(c *Config) { c.CompactMinFiles = 4 })
	r := newReader(t, b, nil)
	day, other := "2026-03-29", "2026-03-30"
	var all []pageview
	for i := range 10 {
		rows := genPageviews(uint64(100+i), mustUTCDay(t, day), 120)
		all = append(all, rows...)
		f := writeRows(t, s, testProject, day, rows)
		if _, err := s.Update(ctx, Live(testProject), func(*Manifest) (Change, error) {
			return Change{Add: []DataFile{f}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	otherRows := genPageviews(7, mustUTCDay(t, other), 40)
	all = append(all, otherRows...)
	fo := writeRows(t, s, testProject, other, otherRows)
	if _, err := s.Commit(ctx, Live(testProject), 10, Change{Add: []DataFile{fo}, Checkpoints: map[string]string{"processor": "11"}}); err != nil {
		t.Fatal(err)
	}
	old, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "before compaction", scanRows(t, old, ScanOptions{}), all)

	// Commits race the compaction: they add files to the same partition.
	var added []pageview
	var wg sync.WaitGroup
	var raceErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := newStore(t, b, nil)
		for i := range 3 {
			rows := genPageviews(uint64(500+i), mustUTCDay(t, day), 20)
			rec := pageviewRecord(t, rows)
			f, err := w.Write(ctx, testProject, pageviewTable(), day, rec)
			rec.Release()
			if err == nil {
				_, err = w.Update(ctx, Live(testProject), func(*Manifest) (Change, error) { return Change{Add: []DataFile{f}}, nil })
			}
			if err != nil {
				raceErr = err
				return
			}
			added = append(added, rows...)
		}
	}()
	st, err := s.Compact(ctx, Live(testProject))
	wg.Wait()
	if err != nil || raceErr != nil {
		t.Fatalf("compaction: %v; racing commits: %v", err, raceErr)
	}
	if st.Merges < 1 || st.Inputs < 10 || st.Lost != 0 {
		t.Fatalf("compaction stats %+v, want the 10 small files merged", st)
	}
	m, err := s.Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	if m.Checkpoint("processor") != "11" {
		t.Errorf("compaction changed the checkpoint to %q", m.Checkpoint("processor"))
	}
	if len(m.Retired) != st.Inputs {
		t.Errorf("%d retired files, want %d", len(m.Retired), st.Inputs)
	}
	if n := len(m.Files("pageviews", day)); n > 1+3 {
		t.Errorf("partition %s has %d files after compaction", day, n)
	}
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(all), added...)
	sameRows(t, "after compaction", scanRows(t, sn, ScanOptions{}), want)
	err = sn.Scan(ctx, "pageviews", ScanOptions{}, func(bt Batch) error {
		if !slices.IsSortedFunc(pageviewRows(t, bt.Record), pageview.less) {
			return fmt.Errorf("file %s is not sorted", bt.File)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The snapshot from before still reads: its files are retired, not gone.
	oldReader := newReader(t, b, func(c *ReaderConfig) { c.CacheBytes = 0 })
	oldSnap := &Snapshot{r: oldReader, m: old.m}
	sameRows(t, "old snapshot", scanRows(t, oldSnap, ScanOptions{}), all)
	if st, err := s.Collect(ctx, testProject); err != nil || st.Retired != 0 {
		t.Fatalf("collect within the grace: %+v, %v", st, err)
	}

	// After the grace the retired files go, and the manifest forgets them.
	gc := newStore(t, b, nil)
	gc.now = func() time.Time { return time.Now().Add(gc.cfg.RetireGrace + time.Minute) }
	cst, err := gc.Collect(ctx, testProject)
	if err != nil || cst.Retired != st.Inputs || cst.Orphans != 0 {
		t.Fatalf("collect after the grace: %+v, %v; want %d retired", cst, err, st.Inputs)
	}
	m, err = s.Load(ctx, Live(testProject))
	if err != nil || len(m.Retired) != 0 {
		t.Fatalf("retired list after collection: %v, %v", m.Retired, err)
	}
	err = oldSnap.Scan(ctx, "pageviews", ScanOptions{}, func(Batch) error { return nil })
	if !errors.Is(err, ErrFileGone) {
		t.Fatalf("scan of a snapshot older than the grace: %v, want ErrFileGone", err)
	}
	sn, err = r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "after collection", scanRows(t, sn, ScanOptions{}), want)

	// A settled (quiet) partition merges whatever small files it has.
	quiet := newStore(t, b, nil)
	quiet.now = func() time.Time { return time.Now().Add(quiet.cfg.CompactQuietAfter + time.Minute) }
	if _, err := quiet.Compact(ctx, Live(testProject)); err != nil {
		t.Fatal(err)
	}
	m, err = s.Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Files("pageviews", day)); n != 1 {
		t.Fatalf("quiet partition has %d files, want 1", n)
	}
	sn, err = r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "after settling", scanRows(t, sn, ScanOptions{}), want)
}

// testGenerations: a rebuild stages a new generation while readers keep
// reading the live one; promotion swaps them in one step.
func testGenerations(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, nil)
	r := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	archive := pageviewTable()
	archive.Name = "archive"
	d1, d2 := "2026-03-28", "2026-03-29"
	rows1 := genPageviews(1, mustUTCDay(t, d1), 30)
	rows2 := genPageviews(2, mustUTCDay(t, d2), 30)
	write := func(tbl *Table, day string, rows []pageview) DataFile {
		rec := pageviewRecord(t, rows)
		defer rec.Release()
		f, err := s.Write(ctx, testProject, tbl, day, rec)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	live1 := []DataFile{write(pageviewTable(), d1, rows1), write(pageviewTable(), d2, rows2), write(archive, d1, rows1)}
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: live1, Checkpoints: map[string]string{"processor": "100"}}); err != nil {
		t.Fatal(err)
	}

	// Rebuild from d2 on: keep d1 of pageviews, nothing else.
	g, err := s.StartGeneration(ctx, testProject, GenerationOptions{
		Keep:        func(table, part string) bool { return table == "pageviews" && part < d2 },
		Checkpoints: map[string]string{"replay": "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	gens, err := s.Generations(ctx, testProject)
	if err != nil || len(gens) != 1 || gens[0] != g {
		t.Fatalf("Generations = %v, %v; want [%v]", gens, err, g)
	}
	rebuilt := genPageviews(3, mustUTCDay(t, d2), 25)
	if _, err := s.Update(ctx, g, func(m *Manifest) (Change, error) {
		if m.Version != 1 || len(m.Files("pageviews", d1)) != 1 || len(m.Files("pageviews", d2)) != 0 || m.Table("archive") != nil {
			return Change{}, fmt.Errorf("staged generation starts as %s", describe(m))
		}
		return Change{Add: []DataFile{write(pageviewTable(), d2, rebuilt)}, Checkpoints: map[string]string{"replay": "7"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Meanwhile the live consumer goes on.
	archived := write(archive, d2, rows2)
	if _, err := s.Commit(ctx, Live(testProject), 1, Change{Add: []DataFile{archived}, Checkpoints: map[string]string{"processor": "101"}}); err != nil {
		t.Fatal(err)
	}
	sn, err := r.Snapshot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "live while rebuilding", scanRows(t, sn, ScanOptions{}), append(slices.Clone(rows1), rows2...))

	// Promotion prepared against version 1 fails: the live one moved.
	if _, err := s.Promote(ctx, g, PromoteOptions{ExpectLive: 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("promote over a moved live manifest: %v, want ErrConflict", err)
	}
	m, err := s.Promote(ctx, g, PromoteOptions{ExpectLive: 2, CarryTables: []string{"archive"}, CarryCheckpoints: []string{"processor"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Generation != 2 || m.Version != 3 || m.Checkpoint("processor") != "101" || m.Checkpoint("replay") != "7" || len(m.Files("archive", d2)) != 1 {
		t.Fatalf("promoted: %s", describe(m))
	}
	if len(m.Retired) != 1 || m.Retired[0].FileRef != live1[1].Ref() {
		t.Fatalf("promotion retired %v, want only the old %s", m.Retired, live1[1].Ref())
	}
	sn, err = r.Snapshot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "live after promotion", scanRows(t, sn, ScanOptions{}), append(slices.Clone(rows1), rebuilt...))
	if _, err := s.Commit(ctx, g, 2, Change{Checkpoints: map[string]string{"replay": "8"}}); !errors.Is(err, ErrGenerationGone) {
		t.Fatalf("commit to a promoted generation: %v, want ErrGenerationGone", err)
	}

	// Files of a staged generation are kept while it exists, and become
	// orphans when it is aborted.
	g2, err := s.StartGeneration(ctx, testProject, GenerationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	staged := write(pageviewTable(), d1, rows1)
	if _, err := s.Commit(ctx, g2, 1, Change{Add: []DataFile{staged}}); err != nil {
		t.Fatal(err)
	}
	gc := newStore(t, b, nil)
	gc.now = func() time.Time { return time.Now().Add(gc.cfg.OrphanGrace + time.Minute) }
	if _, err := gc.Collect(ctx, testProject); err != nil {
		t.Fatal(err)
	}
	stagedKey := s.layout.file(testProject, staged.Ref())
	if !exists(t, b, stagedKey) {
		t.Fatal("collect deleted a file of a staged generation")
	}
	if err := s.AbortGeneration(ctx, g2); err != nil {
		t.Fatal(err)
	}
	st, err := gc.Collect(ctx, testProject)
	if err != nil || st.Orphans != 1 || exists(t, b, stagedKey) {
		t.Fatalf("collect after abort: %+v, %v", st, err)
	}
	// An abandoned generation expires.
	if _, err := s.StartGeneration(ctx, testProject, GenerationOptions{}); err != nil {
		t.Fatal(err)
	}
	gc.now = func() time.Time { return time.Now().Add(gc.cfg.StagingExpiry + time.Hour) }
	if st, err := gc.Collect(ctx, testProject); err != nil || st.Generations != 1 {
		t.Fatalf("collect of an abandoned generation: %+v, %v", st, err)
	}
	if gens, err := s.Generations(ctx, testProject); err != nil || len(gens) != 0 {
		t.Fatalf("generations left: %v, %v", gens, err)
	}
	sn, err = r.Snapshot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "live after collection", scanRows(t, sn, ScanOptions{}), append(slices.Clone(rows1), rebuilt...))
}

// testRangedReads: a large file is read by ranges (footer and the column
// chunks needed), and decoded data is served from the cache afterwards.
func testRangedReads(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, func(c *Config) { c.RowGroupRows = 2048 })
	day := "2026-03-29"
	rows := genPageviews(42, mustUTCDay(t, day), 20000)
	f := writeRows(t, s, testProject, day, rows)
	if f.RowGroups != 10 {
		t.Fatalf("%d row groups, want 10", f.RowGroups)
	}
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{f}}); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, b, func(c *ReaderConfig) { c.WholeFileBytes = 0 })
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	count := func(sn *Snapshot, opts ScanOptions) int64 {
		var n int64
		if err := sn.Scan(ctx, "pageviews", opts, func(bt Batch) error { n += bt.Record.NumRows(); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(sn, ScanOptions{Columns: []string{"country"}}); n != int64(len(rows)) {
		t.Fatalf("scan returned %d rows, want %d", n, len(rows))
	}
	st := r.Stats()
	if st.BytesFetched == 0 || st.BytesFetched > f.Bytes/3 {
		t.Fatalf("one column of a %d-byte file fetched %d bytes; want a small part", f.Bytes, st.BytesFetched)
	}
	// Again: all from the cache.
	count(sn, ScanOptions{Columns: []string{"country"}})
	if st2 := r.Stats(); st2.BytesFetched != st.BytesFetched || st2.CacheHits <= st.CacheHits {
		t.Fatalf("second scan fetched %d more bytes, %d more cache hits", st2.BytesFetched-st.BytesFetched, st2.CacheHits-st.CacheHits)
	}
	// A key range reads the rows within it, from every row group.
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, pageview.less)
	lo, hi := sorted[3000].Time, sorted[9000].Time
	var want []pageview
	for _, p := range rows {
		if p.Time >= lo && p.Time <= hi {
			want = append(want, p)
		}
	}
	sameRows(t, "key range", scanRows(t, sn, ScanOptions{KeyMin: lo, KeyMax: hi}), want)
	sameRows(t, "all", scanRows(t, sn, ScanOptions{}), rows)

	// A narrow key range skips the row groups whose statistics miss it:
	// a fresh reader fetches far less than for the whole file.
	point := sorted[len(sorted)/2]
	fresh := newReader(t, b, func(c *ReaderConfig) { c.WholeFileBytes = 0 })
	fsn, err := fresh.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	var exact []pageview
	for _, p := range rows {
		if p.Time == point.Time {
			exact = append(exact, p)
		}
	}
	sameRows(t, "point lookup", scanRows(t, fsn, ScanOptions{KeyMin: point.Time, KeyMax: point.Time}), exact)
	if st := fresh.Stats(); st.BytesFetched > f.Bytes/4 {
		t.Fatalf("a point lookup in a %d-byte file of 10 row groups fetched %d bytes", f.Bytes, st.BytesFetched)
	}

	// A small cache stays within its bound.
	small := newReader(t, b, func(c *ReaderConfig) { c.WholeFileBytes = 0; c.CacheBytes = 64 << 10 })
	ssn, err := small.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "small cache", scanRows(t, ssn, ScanOptions{}), rows)
	if st := small.Stats(); st.CacheBytes > 64<<10 || st.CacheEvictions == 0 {
		t.Fatalf("small cache: %+v", st)
	}
}

// TestReaderFreshness: a reader looks at the manifest's ETag when its view
// is older than Freshness, and fetches the manifest only when it changed.
func TestReaderFreshness(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	s := newStore(t, b, nil)
	day := "2026-03-29"
	commit := func(expect int64, seed uint64) {
		f := writeRows(t, s, testProject, day, genPageviews(seed, mustUTCDay(t, day), 5))
		if _, err := s.Commit(ctx, Live(testProject), expect, Change{Add: []DataFile{f}}); err != nil {
			t.Fatal(err)
		}
	}
	commit(0, 1)
	always := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	lazy := newReader(t, b, func(c *ReaderConfig) { c.Freshness = time.Hour })
	version := func(r *Reader) int64 {
		sn, err := r.Snapshot(ctx, testProject)
		if err != nil {
			t.Fatal(err)
		}
		return sn.Manifest().Version
	}
	if version(always) != 1 || version(lazy) != 1 {
		t.Fatal("readers do not see version 1")
	}
	for range 3 {
		version(always)
	}
	if st := always.Stats(); st.ManifestChecks != 4 || st.ManifestGets != 1 {
		t.Fatalf("unchanged manifest: %d checks, %d gets; want 4 and 1", st.ManifestChecks, st.ManifestGets)
	}
	commit(1, 2)
	if v := version(always); v != 2 {
		t.Fatalf("reader with Freshness 0 sees version %d, want 2", v)
	}
	if st := always.Stats(); st.ManifestGets != 2 {
		t.Fatalf("changed manifest fetched %d times in all, want 2", st.ManifestGets)
	}
	if v := version(lazy); v != 1 {
		t.Fatalf("reader with Freshness 1h looked again: version %d", v)
	}
	sn, err := lazy.Refresh(ctx, testProject)
	if err != nil || sn.Manifest().Version != 2 {
		t.Fatalf("Refresh: %v", err)
	}
	if v := version(lazy); v != 2 {
		t.Fatalf("after Refresh, Snapshot gives version %d", v)
	}
}

// TestConcurrentScans: scans racing on one reader (shared cache, shared
// loads of the same row groups, evictions) all see every row.
func TestConcurrentScans(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	s := newStore(t, b, func(c *Config) { c.RowGroupRows = 1024 })
	var adds []DataFile
	var all []pageview
	for d := range 3 {
		day := mustUTCDay(t, "2026-03-27").AddDate(0, 0, d)
		rows := genPageviews(uint64(d), day, 3000)
		all = append(all, rows...)
		adds = append(adds, writeRows(t, s, testProject, day.Format(time.DateOnly), rows))
	}
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: adds}); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []int64{0, 256 << 10, 64 << 20} {
		r := newReader(t, b, func(c *ReaderConfig) { c.CacheBytes = cache; c.WholeFileBytes = 32 << 10 })
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sn, err := r.Snapshot(ctx, testProject)
				if err != nil {
					errs <- err
					return
				}
				var n int64
				cols := []string{"time", "country", "path"}
				if i%2 == 0 {
					cols = nil
				}
				if err := sn.Scan(ctx, "pageviews", ScanOptions{Columns: cols}, func(bt Batch) error {
					n += bt.Record.NumRows()
					return nil
				}); err != nil {
					errs <- err
					return
				}
				if n != int64(len(all)) {
					errs <- fmt.Errorf("scan %d saw %d rows, want %d", i, n, len(all))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("cache %d: %v", cache, err)
		}
		sn, err := r.Snapshot(ctx, testProject)
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, fmt.Sprintf("cache %d", cache), scanRows(t, sn, ScanOptions{}), all)
		if st := r.Stats(); st.CacheBytes > cache {
			t.Errorf("cache of %d bytes holds %d", cache, st.CacheBytes)
		}
	}
	// A scan whose callback fails stops with that error, and the reader
	// goes on working.
	r := newReader(t, b, nil)
	sn, err := r.Snapshot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	if err := sn.Scan(ctx, "pageviews", ScanOptions{}, func(Batch) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("scan stopped by its callback: %v", err)
	}
	sameRows(t, "after a stopped scan", scanRows(t, sn, ScanOptions{}), all)
}
