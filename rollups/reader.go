package rollups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/metadata"

	"github.com/mfhq/mf/storage"
)

// Reader reads tables: it keeps each project's latest manifest, refreshed
// within ReaderConfig.Freshness, and scans tables through a cache of
// decoded column data. It only reads the store. Safe for concurrent use.
type Reader struct {
	bucket storage.BucketReader
	cfg    ReaderConfig
	logger *slog.Logger
	layout layout
	cache  *cache
	now    func() time.Time

	mu       sync.Mutex
	projects map[string]*projectView
	loading  map[string]*loadCall // in-flight loads by file key and row group

	stats readerCounters
}

// projectView is a reader's latest view of one project's live manifest.
type projectView struct {
	refresh sync.Mutex // one refresh at a time
	cur     atomic.Pointer[version]
	checked atomic.Int64 // Unix ns of the last look at the store
}

type loadCall struct {
	done chan struct{}
	err  error
}

type readerCounters struct {
	manifestChecks, manifestGets, partGets, fileOpens, bytesFetched atomic.Int64
}

// ReaderStats counts a Reader's work since it was created.
type ReaderStats struct {
	// ManifestChecks counts looks at a manifest's ETag; ManifestGets counts
	// manifests fetched because they changed (or were not known).
	ManifestChecks, ManifestGets int64
	// SubManifestGets counts sub-manifests fetched: those of groups the
	// reader did not hold from the version before.
	SubManifestGets int64
	// FileOpens counts data files opened to read column data;
	// BytesFetched sums the bytes read from data files.
	FileOpens, BytesFetched int64
	// CacheHits and CacheMisses count lookups of decoded column chunks and
	// footers; CacheBytes is the memory the cache holds now.
	CacheHits, CacheMisses, CacheEvictions, CacheBytes int64
}

// NewReader returns a Reader of the tables in bucket. logger may be nil.
func NewReader(bucket storage.BucketReader, cfg ReaderConfig, logger *slog.Logger) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bucket == nil {
		return nil, errors.New("cannot create rollup reader: no bucket")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reader{
		bucket:   bucket,
		cfg:      cfg,
		logger:   logger,
		layout:   layout{prefix: cfg.Prefix},
		cache:    newCache(cfg.CacheBytes),
		now:      time.Now,
		projects: map[string]*projectView{},
		loading:  map[string]*loadCall{},
	}, nil
}

// Stats returns the reader's counters.
func (r *Reader) Stats() ReaderStats {
	r.cache.mu.Lock()
	defer r.cache.mu.Unlock()
	return ReaderStats{
		ManifestChecks:  r.stats.manifestChecks.Load(),
		ManifestGets:    r.stats.manifestGets.Load(),
		SubManifestGets: r.stats.partGets.Load(),
		FileOpens:       r.stats.fileOpens.Load(),
		BytesFetched:    r.stats.bytesFetched.Load(),
		CacheHits:       r.cache.hits,
		CacheMisses:     r.cache.misses,
		CacheEvictions:  r.cache.evictions,
		CacheBytes:      r.cache.size,
	}
}

// Snapshot is one version of a project's live manifest, for scanning. It
// stays readable while newer versions are committed (RetireGrace keeps
// the files it names), so one request can make several consistent scans.
type Snapshot struct {
	r    *Reader
	m    *Manifest // the whole manifest; nil on a snapshot from SnapshotRoot
	etag string
	v    *version // the reader's state of the version; nil when m was given whole
}

// Manifest returns the whole manifest of the snapshot (read-only), as
// Reader.Snapshot and Reader.Refresh return it. A snapshot from
// Reader.SnapshotRoot holds only the partitions its callers asked for:
// its Manifest is nil (use Whole, Partitions, Groups, Version).
func (sn *Snapshot) Manifest() *Manifest { return sn.m }

// Snapshot returns the latest manifest of project known to the reader,
// looking at the store when the one it has is older than Freshness, with
// every group of partitions fetched (those it does not hold yet) so that
// Manifest is whole. A project without a manifest gives an empty snapshot
// (version 0).
func (r *Reader) Snapshot(ctx context.Context, project string) (*Snapshot, error) {
	return r.snapshot(ctx, project, false, true)
}

// Refresh is Snapshot that always looks at the store.
func (r *Reader) Refresh(ctx context.Context, project string) (*Snapshot, error) {
	return r.snapshot(ctx, project, true, true)
}

// SnapshotRoot is Snapshot without fetching any group of partitions: the
// snapshot holds the root of the manifest (head, table definitions,
// group ranges), and its Scan, Partitions and Whole fetch the
// sub-manifests of the groups they need, once per reader (a new version
// shares the groups it did not change). A reader's first snapshot of a
// project then costs the root and the groups of the period read, not the
// history.
func (r *Reader) SnapshotRoot(ctx context.Context, project string) (*Snapshot, error) {
	return r.snapshot(ctx, project, false, false)
}

// RefreshRoot is SnapshotRoot that always looks at the store.
func (r *Reader) RefreshRoot(ctx context.Context, project string) (*Snapshot, error) {
	return r.snapshot(ctx, project, true, false)
}

func (r *Reader) snapshot(ctx context.Context, project string, force, whole bool) (*Snapshot, error) {
	pv, err := r.view(project)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		v := pv.cur.Load()
		if v == nil || force || r.now().UnixNano()-pv.checked.Load() >= int64(r.cfg.Freshness) {
			if v, err = r.refresh(ctx, project, pv, force); err != nil {
				return nil, err
			}
		}
		if !whole {
			return v.rootSnapshot(), nil
		}
		sn, err := v.wholeSnapshot(ctx)
		if errors.Is(err, ErrFileGone) && attempt < loadAttempts {
			// The root moved on and the collector took a group it named
			// meanwhile: read the newer root.
			force = true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the manifest of project %q: %w", project, err)
		}
		return sn, nil
	}
}

func (r *Reader) view(project string) (*projectView, error) {
	if err := validateProject(project); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.projects[project]
	if v == nil {
		v = &projectView{}
		r.projects[project] = v
	}
	return v, nil
}

// refresh looks at the project's manifest ETag and reads the root when it
// changed (groups are fetched as callers need them).
func (r *Reader) refresh(ctx context.Context, project string, pv *projectView, force bool) (*version, error) {
	start := r.now()
	pv.refresh.Lock()
	defer pv.refresh.Unlock()
	// Someone else may have looked while this call waited.
	if v := pv.cur.Load(); v != nil && pv.checked.Load() >= start.UnixNano() && (force || r.now().UnixNano()-pv.checked.Load() < int64(r.cfg.Freshness)) {
		return v, nil
	}
	key := r.layout.manifest(project)
	r.stats.manifestChecks.Add(1)
	attrs, err := r.bucket.Attributes(ctx, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		v := newVersion(r, emptyManifest(Live(project)), "", nil)
		pv.cur.Store(v)
		pv.checked.Store(start.UnixNano())
		return v, nil
	case err != nil:
		return nil, fmt.Errorf("cannot look at the manifest of project %q: %w", project, err)
	}
	old := pv.cur.Load()
	if old != nil && old.root.Version > 0 && attrs.ETag == old.etag {
		pv.checked.Store(start.UnixNano())
		return old, nil
	}
	r.stats.manifestGets.Add(1)
	data, got, err := storage.ReadAll(ctx, r.bucket, key)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of project %q: %w", project, err)
	}
	var prevRoot *Manifest
	if old != nil {
		prevRoot = old.root
	}
	root, err := decodeRoot(data, Live(project), prevRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of project %q: cannot load manifest %q: %w", project, key, err)
	}
	v := newVersion(r, root, got.ETag, old)
	if old != nil && old.root.Version > root.Version {
		// Never go back in time (a store that lists an older version).
		v = old
	}
	pv.cur.Store(v)
	pv.checked.Store(start.UnixNano())
	return v, nil
}

// ScanOptions choose what a scan reads.
type ScanOptions struct {
	// From and To bound the day partitions read (YYYY-MM-DD, inclusive);
	// empty means open. With either set, partitions that are not days are
	// skipped.
	From, To string
	// Partitions, when set, lists exactly the partitions to read instead.
	Partitions []string
	// Columns lists the columns to read, in the order wanted; nil reads
	// every column of the table's latest schema.
	Columns []string
	// KeyMin and KeyMax bound the first sort-key column (inclusive; nil is
	// open): files whose range misses them are skipped, and only the rows
	// within them are returned. Give an int or int64 for integer columns,
	// an int64 or time.Time for timestamps and dates, a string for strings,
	// a []byte or [16]byte for binaries.
	KeyMin, KeyMax any
	// Uncached reads the columns without keeping them in the reader's
	// cache (columns already there are still used): for callers that
	// keep what they decode themselves.
	Uncached bool
}

// Batch is one piece of a scan: rows of one row group of one data file.
type Batch struct {
	// Partition and File name where the rows come from.
	Partition string
	File      string
	// Record holds the rows, with the columns asked for. It is valid only
	// during the callback: Retain it to keep it longer.
	Record arrow.Record
}

// Scan reads the table through the snapshot and calls fn with its rows,
// batch by batch: partitions in ascending order, and in each the files in
// the order they were committed, each file's rows in sort-key order.
// Columns that a file lacks (written before the column existed) read as
// nulls. A table the snapshot does not have reads as empty. An error from
// fn stops the scan and is returned.
//
// A keyed table (Table.Key) is read merged: each partition comes as one
// batch of the rows that stand for their keys (the highest rev per key,
// deleted keys left out), in sort-key order, whatever number of files it
// has; its File is the partition's file when it has one, else empty. A
// key range then bounds the merged rows.
//
// On a snapshot from SnapshotRoot, a scan first fetches the sub-manifests
// of the groups that hold the partitions it reads (those not held yet).
func (sn *Snapshot) Scan(ctx context.Context, table string, opts ScanOptions, fn func(Batch) error) error {
	h := sn.head()
	want, err := scanGroups(opts)
	if err != nil {
		return fmt.Errorf("cannot scan table %q of project %q: %w", table, h.Project, err)
	}
	ts, err := sn.tableWith(ctx, table, want)
	if err != nil {
		return fmt.Errorf("cannot scan table %q of project %q: %w", table, h.Project, err)
	}
	if ts == nil {
		return nil
	}
	if len(ts.Key) > 0 {
		if err := sn.scanKeyed(ctx, table, ts, opts, fn); err != nil {
			return fmt.Errorf("cannot scan table %q of project %q (version %d): %w", table, h.Project, h.Version, err)
		}
		return nil
	}
	plan, err := sn.plan(table, ts, opts)
	if err != nil {
		return fmt.Errorf("cannot scan table %q of project %q: %w", table, h.Project, err)
	}
	if err := sn.r.run(ctx, plan, fn); err != nil {
		return fmt.Errorf("cannot scan table %q of project %q (version %d): %w", table, h.Project, h.Version, err)
	}
	return nil
}

// scanPlan is what a scan reads.
type scanPlan struct {
	project string
	out     *arrow.Schema // columns returned
	keyCol  string        // first sort-key column, when bounded
	keyType arrow.DataType
	min     *key
	max     *key
	files   []DataFile
	nocache bool // ScanOptions.Uncached
	// srcs shares among the row groups the scan reads of one small file
	// the file fetched whole (sources.go).
	srcs *fileSources
}

func (sn *Snapshot) plan(table string, ts *TableState, opts ScanOptions) (*scanPlan, error) {
	p := &scanPlan{project: sn.head().Project, nocache: opts.Uncached, srcs: &fileSources{}}
	schema := ts.Schema()
	if opts.Columns == nil {
		p.out = schema
	} else {
		fields := make([]arrow.Field, 0, len(opts.Columns))
		for _, c := range opts.Columns {
			idx := schema.FieldIndices(c)
			if len(idx) != 1 {
				return nil, fmt.Errorf("%w %q; the table has %s", ErrUnknownColumn, c, columnNames(schema))
			}
			fields = append(fields, schema.Field(idx[0]))
		}
		p.out = arrow.NewSchema(fields, nil)
	}
	if opts.KeyMin != nil || opts.KeyMax != nil {
		if len(ts.SortKey) == 0 {
			return nil, fmt.Errorf("a key range needs a sort key, and table %q has none", table)
		}
		p.keyCol = ts.SortKey[0]
		p.keyType = schema.Field(schema.FieldIndices(p.keyCol)[0]).Type
		for _, b := range []struct {
			v   any
			dst **key
		}{{opts.KeyMin, &p.min}, {opts.KeyMax, &p.max}} {
			if b.v == nil {
				continue
			}
			k, err := keyFromValue(p.keyType, b.v)
			if err != nil {
				return nil, fmt.Errorf("bad key range on %q: %w", p.keyCol, err)
			}
			*b.dst = &k
		}
	}
	for _, part := range opts.Partitions {
		if err := validatePartition(part); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{opts.From, opts.To} {
		if d != "" && !isDay(d) {
			return nil, fmt.Errorf("%w: %q is not a day YYYY-MM-DD", ErrInvalidName, d)
		}
	}
	for _, part := range sortedPartitions(ts, opts.From, opts.To, opts.Partitions) {
		for _, f := range ts.Partitions[part] {
			if p.keyCol != "" && !p.overlaps(f) {
				continue
			}
			p.files = append(p.files, f)
		}
	}
	return p, nil
}

// overlaps reports whether a file's key bounds may meet the plan's range.
func (p *scanPlan) overlaps(f DataFile) bool {
	if f.Min == nil || f.Max == nil {
		return f.Rows > 0 // unknown bounds: read it (all-null keys fail the range later)
	}
	lo, err1 := keyFromJSON(p.keyType, f.Min)
	hi, err2 := keyFromJSON(p.keyType, f.Max)
	if err1 != nil || err2 != nil {
		return true
	}
	if p.min != nil && cmpKeys(hi, *p.min) < 0 {
		return false
	}
	if p.max != nil && cmpKeys(lo, *p.max) > 0 {
		return false
	}
	return true
}

// rowGroupMisses reports whether the Parquet statistics of row group rg
// prove that no value of the first sort-key column lies in the plan's
// range. Without usable statistics it reports false (read and slice).
func (p *scanPlan) rowGroupMisses(info *fileInfo, rg int) bool {
	idx := info.schema.FieldIndices(p.keyCol)
	if len(idx) != 1 || rg >= len(info.meta.RowGroups) || !arrow.TypeEqual(info.schema.Field(idx[0]).Type, p.keyType) {
		return false
	}
	cc, err := info.meta.RowGroup(rg).ColumnChunk(idx[0])
	if err != nil {
		return false
	}
	if set, err := cc.StatsSet(); err != nil || !set {
		return false
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		return false
	}
	var lo, hi key
	switch s := st.(type) {
	case *metadata.Int32Statistics:
		// Parquet INT32 holds int8, int16, int32 and date32 as they are.
		switch p.keyType.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.DATE32:
			lo, hi = key{kind: keyInt, i: int64(s.Min())}, key{kind: keyInt, i: int64(s.Max())}
		default:
			return false
		}
	case *metadata.Int64Statistics:
		// int64, and timestamps in their own unit (seconds are stored as
		// milliseconds, so they are left out).
		switch t := p.keyType.(type) {
		case *arrow.Int64Type:
		case *arrow.TimestampType:
			if t.Unit == arrow.Second {
				return false
			}
		default:
			return false
		}
		lo, hi = key{kind: keyInt, i: s.Min()}, key{kind: keyInt, i: s.Max()}
	case *metadata.ByteArrayStatistics:
		k := keyKindOf(p.keyType)
		if k != keyString && k != keyBytes {
			return false
		}
		lo, hi = key{kind: k, s: string(s.Min())}, key{kind: k, s: string(s.Max())}
	case *metadata.FixedLenByteArrayStatistics:
		if p.keyType.ID() != arrow.FIXED_SIZE_BINARY {
			return false
		}
		lo, hi = key{kind: keyBytes, s: string(s.Min())}, key{kind: keyBytes, s: string(s.Max())}
	default:
		return false
	}
	return (p.min != nil && cmpKeys(hi, *p.min) < 0) || (p.max != nil && cmpKeys(lo, *p.max) > 0)
}

func columnNames(s *arrow.Schema) string {
	names := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		names = append(names, strconv.Quote(f.Name))
	}
	return "columns " + fmt.Sprint(names)
}

// fileInfo is what the reader keeps of a data file's footer.
type fileInfo struct {
	meta   *metadata.FileMetaData
	schema *arrow.Schema
}

// unit is one row group of one file to read.
type unit struct {
	file DataFile
	rg   int
}

type unitResult struct {
	rec arrow.Record // nil: no rows in range
	err error
}

// run executes a plan: loads row groups, Parallelism at a time and in
// order, and hands them to fn in order.
func (r *Reader) run(ctx context.Context, p *scanPlan, fn func(Batch) error) error {
	if len(p.files) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Row groups are known from the manifest, so loading can start at
	// once; every file has at least one unit.
	var units []unit
	for _, f := range p.files {
		if n := max(f.RowGroups, 1); n > 1 && f.Bytes <= r.cfg.WholeFileBytes {
			p.srcs.expect(r.layout.file(p.project, f.Ref()), n)
		}
		for rg := range max(f.RowGroups, 1) {
			units = append(units, unit{file: f, rg: rg})
		}
	}
	results := make([]chan unitResult, len(units))
	for i := range results {
		results[i] = make(chan unitResult, 1)
	}
	window := make(chan struct{}, r.cfg.Parallelism)
	var wg sync.WaitGroup
	launched := 0
	var launchMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, u := range units {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			launchMu.Lock()
			launched = i + 1
			wg.Add(1)
			launchMu.Unlock()
			go func() {
				defer wg.Done()
				rec, err := r.loadUnit(ctx, p, u)
				results[i] <- unitResult{rec: rec, err: err}
			}()
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
		launchMu.Lock()
		defer launchMu.Unlock()
		for i := range launched {
			select {
			case res := <-results[i]:
				if res.rec != nil {
					res.rec.Release()
				}
			default:
			}
		}
	}()
	for i, u := range units {
		var res unitResult
		select {
		case res = <-results[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-window
		if res.err != nil {
			return res.err
		}
		if res.rec == nil {
			continue
		}
		err := fn(Batch{Partition: u.file.Partition, File: u.file.Name, Record: res.rec})
		res.rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// loadUnit returns the rows of one row group in the plan's key range with
// the plan's columns, or nil when none are in range.
func (r *Reader) loadUnit(ctx context.Context, p *scanPlan, u unit) (arrow.Record, error) {
	names := make([]string, 0, p.out.NumFields()+1)
	types := make([]arrow.DataType, 0, p.out.NumFields()+1)
	for _, f := range p.out.Fields() {
		names = append(names, f.Name)
		types = append(types, f.Type)
	}
	if p.keyCol != "" && !slices.Contains(names, p.keyCol) {
		names = append(names, p.keyCol)
		types = append(types, p.keyType)
	}
	if p.keyCol != "" {
		// Skip the row group by its footer statistics when they show no
		// key in range (the footer is usually cached already).
		info, _, err := r.fileInfo(ctx, r.layout.file(p.project, u.file.Ref()), u.file.Bytes)
		if err != nil {
			return nil, err
		}
		if p.rowGroupMisses(info, u.rg) {
			return nil, nil
		}
	}
	cols, err := r.columns(ctx, p.project, u, names, types, !p.nocache, p.srcs)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	n := 0
	if len(cols) > 0 {
		n = cols[0].Len()
	}
	lo, hi := 0, n
	if p.keyCol != "" {
		kc := cols[slices.Index(names, p.keyCol)]
		lo, hi = keySlice(kc, p.min, p.max)
		if lo >= hi {
			return nil, nil
		}
	}
	out := make([]arrow.Array, p.out.NumFields())
	for i, f := range p.out.Fields() {
		c := cols[i]
		if !arrow.TypeEqual(c.DataType(), f.Type) {
			for _, o := range out[:i] {
				o.Release()
			}
			return nil, fmt.Errorf("%w: column %q of %s is %s, the table says %s", ErrSchemaMismatch, f.Name, u.file.Ref(), c.DataType(), f.Type)
		}
		out[i] = rowsOf(c, lo, hi)
	}
	rec := array.NewRecord(p.out, out, int64(hi-lo))
	for _, o := range out {
		o.Release()
	}
	return rec, nil
}

// keySlice returns the rows [lo, hi) of a sorted key column (nulls first)
// within [min, max].
func keySlice(a arrow.Array, min, max *key) (int, int) {
	n := a.Len()
	nulls := 0
	if a.NullN() > 0 {
		// Nulls sort first and are never in a range.
		nulls = sort.Search(n, func(i int) bool { return a.IsValid(i) })
	}
	lo, hi := nulls, n
	if min != nil {
		lo = nulls + sort.Search(n-nulls, func(i int) bool { return cmpKeys(keyAt(a, nulls+i), *min) >= 0 })
	}
	if max != nil {
		hi = nulls + sort.Search(n-nulls, func(i int) bool { return cmpKeys(keyAt(a, nulls+i), *max) > 0 })
	}
	return lo, max0(hi, lo)
}

func max0(a, b int) int {
	if a < b {
		return b
	}
	return a
}

// columns returns the named columns (of the given types) of one row
// group, retained; columns the file lacks read as nulls. They come from
// the cache when there, else from the file (and kept in the cache when
// keep).
func (r *Reader) columns(ctx context.Context, project string, u unit, names []string, types []arrow.DataType, keep bool, srcs *fileSources) ([]arrow.Array, error) {
	fileKey := r.layout.file(project, u.file.Ref())
	prefix := fileKey + "|" + strconv.Itoa(u.rg) + "|"
	out := make([]arrow.Array, len(names))
	for {
		missing := false
		for i, name := range names {
			if out[i] != nil {
				continue
			}
			if v, ok := r.cache.get(prefix + name); ok {
				out[i] = v.(arrow.Array)
			} else {
				missing = true
			}
		}
		if !missing {
			return out, nil
		}
		// One load per row group at a time: a concurrent scan of the same
		// row group waits, then finds in the cache what was loaded (or
		// loads itself what is still missing).
		var call *loadCall
		if r.cfg.CacheBytes > 0 && keep {
			r.mu.Lock()
			if other := r.loading[prefix]; other != nil {
				r.mu.Unlock()
				select {
				case <-other.done:
					continue
				case <-ctx.Done():
					releaseAll(out)
					return nil, ctx.Err()
				}
			}
			call = &loadCall{done: make(chan struct{})}
			r.loading[prefix] = call
			r.mu.Unlock()
		}
		err := r.loadColumns(ctx, fileKey, u, names, types, out, keep, srcs)
		if call != nil {
			r.mu.Lock()
			delete(r.loading, prefix)
			r.mu.Unlock()
			close(call.done)
		}
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		return out, nil
	}
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// loadColumns reads from the file the columns of names that out lacks,
// stores them in out (retained) and, when keep, in the cache.
func (r *Reader) loadColumns(ctx context.Context, fileKey string, u unit, names []string, types []arrow.DataType, out []arrow.Array, keep bool, srcs *fileSources) error {
	defer srcs.done(fileKey)
	src, shared, err := srcs.shared(fileKey, func() (*parquetSource, error) {
		src, err := openSource(ctx, r.bucket, fileKey, u.file.Bytes, r.cfg.WholeFileBytes, nil)
		if err == nil {
			r.countOpen(src)
		}
		return src, err
	})
	if err != nil {
		return err
	}
	var info *fileInfo
	if shared {
		info, err = r.fileInfoOf(fileKey, src)
	} else {
		info, src, err = r.fileInfo(ctx, fileKey, u.file.Bytes)
	}
	if err != nil {
		return err
	}
	if u.rg >= len(info.meta.RowGroups) {
		return fmt.Errorf("%w: data file %q has %d row groups, the manifest says %d", ErrCorruptManifest, fileKey, len(info.meta.RowGroups), u.file.RowGroups)
	}
	rows := int(info.meta.RowGroup(u.rg).NumRows())
	var read []int // indices into names
	var cols []int // file column indices
	for i, name := range names {
		if out[i] != nil {
			continue
		}
		idx := info.schema.FieldIndices(name)
		if len(idx) != 1 {
			// Written before the column existed: nulls.
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, types[i], rows)
			continue
		}
		read = append(read, i)
		cols = append(cols, idx[0])
	}
	if len(cols) == 0 {
		return nil
	}
	if src == nil {
		if src, err = openSource(ctx, r.bucket, fileKey, u.file.Bytes, r.cfg.WholeFileBytes, info.meta); err != nil {
			return err
		}
		r.countOpen(src)
	}
	fr, err := src.arrowReader()
	if err != nil {
		return fmt.Errorf("cannot read data file %q: %w", fileKey, err)
	}
	arrs, err := readColumns(ctx, fr, []int{u.rg}, cols)
	if rs, ok := src.src.(*objectReaderAt); ok {
		r.stats.bytesFetched.Add(rs.fetched)
		rs.fetched = 0
	}
	if err != nil {
		return fmt.Errorf("cannot read row group %d of data file %q: %w", u.rg, fileKey, err)
	}
	prefix := fileKey + "|" + strconv.Itoa(u.rg) + "|"
	for j, i := range read {
		out[i] = arrs[j]
		if keep {
			r.cache.put(prefix+names[i], arrs[j], arraySize(arrs[j]))
		}
	}
	return nil
}

func (r *Reader) countOpen(src *parquetSource) {
	r.stats.fileOpens.Add(1)
	if br, ok := src.src.(interface{ Size() int64 }); ok {
		r.stats.bytesFetched.Add(br.Size())
	}
}

// fileInfo returns a file's footer, from the cache or the file; when it
// had to open the file, it returns the open source too.
func (r *Reader) fileInfo(ctx context.Context, fileKey string, size int64) (*fileInfo, *parquetSource, error) {
	if v, ok := r.cache.get(fileKey + "|footer"); ok {
		return v.(*fileInfo), nil, nil
	}
	src, err := openSource(ctx, r.bucket, fileKey, size, r.cfg.WholeFileBytes, nil)
	if err != nil {
		return nil, nil, err
	}
	r.countOpen(src)
	if rs, ok := src.src.(*objectReaderAt); ok {
		r.stats.bytesFetched.Add(rs.fetched)
		rs.fetched = 0
	}
	info, err := r.fileInfoOf(fileKey, src)
	if err != nil {
		return nil, nil, err
	}
	return info, src, nil
}

// fileInfoOf returns a file's footer from the cache, else from src, an
// open source of the file (and caches it).
func (r *Reader) fileInfoOf(fileKey string, src *parquetSource) (*fileInfo, error) {
	if v, ok := r.cache.get(fileKey + "|footer"); ok {
		return v.(*fileInfo), nil
	}
	schema, err := fileSchema(src.meta)
	if err != nil {
		return nil, fmt.Errorf("cannot read the schema of data file %q: %w", fileKey, err)
	}
	info := &fileInfo{meta: src.meta, schema: schema}
	r.cache.put(fileKey+"|footer", info, int64(src.meta.Size())*4+1024)
	return info, nil
}

// scanKeyed scans a keyed table: every file of each partition read whole
// with the columns asked for and those merging needs, merged (liveRows),
// then cut to the key range and the columns asked for.
func (sn *Snapshot) scanKeyed(ctx context.Context, table string, ts *TableState, opts ScanOptions, fn func(Batch) error) error {
	want, err := sn.plan(table, ts, ScanOptions{Columns: opts.Columns, KeyMin: opts.KeyMin, KeyMax: opts.KeyMax})
	if err != nil {
		return err
	}
	def := ts.Definition(table)
	cols := make([]string, 0, want.out.NumFields()+len(def.Key)+len(def.SortKey)+2)
	for _, f := range want.out.Fields() {
		cols = append(cols, f.Name)
	}
	for _, c := range keyedColumns(def) {
		if !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
	}
	all, err := sn.plan(table, ts, ScanOptions{From: opts.From, To: opts.To, Partitions: opts.Partitions, Columns: cols, Uncached: opts.Uncached})
	if err != nil {
		return err
	}
	for len(all.files) > 0 {
		part := all.files[0].Partition
		n := 1
		for n < len(all.files) && all.files[n].Partition == part {
			n++
		}
		files := all.files[:n]
		all.files = all.files[n:]
		rec, err := sn.r.mergedPartition(ctx, all, def, files)
		if err != nil {
			return fmt.Errorf("partition %q: %w", part, err)
		}
		out, err := projectKeyed(rec, want)
		rec.Release()
		if err != nil {
			return fmt.Errorf("partition %q: %w", part, err)
		}
		if out == nil {
			continue
		}
		name := ""
		if len(files) == 1 {
			name = files[0].Name
		}
		err = fn(Batch{Partition: part, File: name, Record: out})
		out.Release()
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// mergedPartition reads the files of one partition of a keyed table whole,
// with the plan's columns, and returns their live rows. A single file
// without deleted rows is returned as it is.
func (r *Reader) mergedPartition(ctx context.Context, p *scanPlan, def *Table, files []DataFile) (arrow.Record, error) {
	names := make([]string, p.out.NumFields())
	types := make([]arrow.DataType, p.out.NumFields())
	for i, f := range p.out.Fields() {
		names[i], types[i] = f.Name, f.Type
	}
	recs := make([]arrow.Record, 0, len(files))
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	for _, f := range files {
		var groups [][]arrow.Array
		if n := max(f.RowGroups, 1); n > 1 && f.Bytes <= r.cfg.WholeFileBytes {
			p.srcs.expect(r.layout.file(p.project, f.Ref()), n)
		}
		for rg := range max(f.RowGroups, 1) {
			c, err := r.columns(ctx, p.project, unit{file: f, rg: rg}, names, types, !p.nocache, p.srcs)
			if err != nil {
				for _, g := range groups {
					releaseAll(g)
				}
				return nil, err
			}
			groups = append(groups, c)
		}
		rec, err := concatGroups(p.out, groups)
		for _, g := range groups {
			releaseAll(g)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", f.Ref(), err)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 1 && !anyDeleted(recs[0], p.out) {
		recs[0].Retain()
		return recs[0], nil
	}
	return mergeKeyed(memory.DefaultAllocator, def, p.out, recs, false)
}

// concatGroups joins the columns of a file's row groups into one record.
func concatGroups(schema *arrow.Schema, groups [][]arrow.Array) (arrow.Record, error) {
	out := make([]arrow.Array, schema.NumFields())
	defer releaseAll(out)
	rows := 0
	for i := range out {
		if len(groups) == 1 {
			groups[0][i].Retain()
			out[i] = groups[0][i]
			continue
		}
		parts := make([]arrow.Array, len(groups))
		for g := range groups {
			parts[g] = groups[g][i]
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	if len(out) > 0 {
		rows = out[0].Len()
	}
	return array.NewRecord(schema, out, int64(rows)), nil
}

// anyDeleted reports whether a record of a keyed table has a deleted row.
func anyDeleted(rec arrow.Record, schema *arrow.Schema) bool {
	idx := schema.FieldIndices(DeletedColumn)
	if len(idx) != 1 {
		return false
	}
	d, ok := rec.Column(idx[0]).(*array.Boolean)
	if !ok {
		return false
	}
	for i := range d.Len() {
		if d.IsValid(i) && d.Value(i) {
			return true
		}
	}
	return false
}

// projectKeyed cuts merged rows to the plan's key range and columns; nil
// when no row is left.
func projectKeyed(rec arrow.Record, want *scanPlan) (arrow.Record, error) {
	n := int(rec.NumRows())
	lo, hi := 0, n
	if want.keyCol != "" {
		idx := rec.Schema().FieldIndices(want.keyCol)
		if len(idx) != 1 {
			return nil, fmt.Errorf("no key column %q", want.keyCol)
		}
		lo, hi = keySlice(rec.Column(idx[0]), want.min, want.max)
	}
	if lo >= hi {
		return nil, nil
	}
	out := make([]arrow.Array, want.out.NumFields())
	for i, f := range want.out.Fields() {
		out[i] = rowsOf(rec.Column(rec.Schema().FieldIndices(f.Name)[0]), lo, hi)
	}
	res := array.NewRecord(want.out, out, int64(hi-lo))
	releaseAll(out)
	return res, nil
}

// rowsOf returns rows [lo, hi) of c, retained: c itself when that is all
// of it.
func rowsOf(c arrow.Array, lo, hi int) arrow.Array {
	if lo == 0 && hi == c.Len() {
		c.Retain()
		return c
	}
	return array.NewSlice(c, int64(lo), int64(hi))
}
