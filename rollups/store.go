package rollups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/storage"
)

// ambiguousLookup bounds the read-back after a put whose outcome is
// unknown.
const ambiguousLookup = 30 * time.Second

// Target names a manifest: the live one of a project, or a staged
// generation of it (StartGeneration).
type Target struct {
	Project string
	// Staging is the id of a staged generation; empty for the live
	// manifest.
	Staging string
}

// Live names the live manifest of project.
func Live(project string) Target { return Target{Project: project} }

func (t Target) String() string {
	if t.Staging == "" {
		return "project " + t.Project
	}
	return "project " + t.Project + " staged generation " + t.Staging
}

func (t Target) validate() error {
	if err := validateProject(t.Project); err != nil {
		return err
	}
	if t.Staging != "" {
		return validateGeneration(t.Staging)
	}
	return nil
}

// Store writes tables: data files, commits of manifests, compaction,
// generations and collection of unreferenced files. It is safe for
// concurrent use, and any number of Stores (in any number of processes)
// may commit to the same project: conditional puts decide who wins.
type Store struct {
	bucket storage.Bucket
	cfg    Config
	logger *slog.Logger
	layout layout
	now    func() time.Time
	pool   *BufferPool

	mu sync.Mutex
	// known caches the last manifest seen of each target with its ETag, so
	// an uncontended commit is one conditional put.
	known map[Target]knownManifest
}

type knownManifest struct {
	m    *Manifest
	etag string // "" for version 0 (no object)
}

// NewStore returns a Store writing to bucket. logger may be nil.
func NewStore(bucket storage.Bucket, cfg Config, logger *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bucket == nil {
		return nil, errors.New("cannot create rollup store: no bucket")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{
		bucket: bucket,
		cfg:    cfg,
		logger: logger,
		layout: layout{prefix: cfg.Prefix},
		now:    time.Now,
		known:  map[Target]knownManifest{},
		pool:   NewBufferPool(cfg.PoolBytes),
	}, nil
}

// Allocator is where a writer should build the records it passes to
// Write: the Store's BufferPool, whose buffers Write's sorting and
// encoding reuse. Records built on it are released after writing, not
// kept.
func (s *Store) Allocator() memory.Allocator { return s.pool }

// Write stores rows of table t for project as one new Parquet data file
// in partition, and returns its description for a commit's Change.Add.
// The rows are sorted by the table's sort key first (stably). Records must
// have the table's schema. The file is not visible to readers until a
// commit adds it; one that is never committed is collected as an orphan.
func (s *Store) Write(ctx context.Context, project string, t *Table, partition string, recs ...arrow.Record) (DataFile, error) {
	if err := validateProject(project); err != nil {
		return DataFile{}, err
	}
	if err := t.Validate(); err != nil {
		return DataFile{}, err
	}
	if err := validatePartition(partition); err != nil {
		return DataFile{}, err
	}
	var rows int64
	for i, r := range recs {
		rows += r.NumRows()
		if !r.Schema().Equal(t.Schema) {
			return DataFile{}, fmt.Errorf("%w: record %d for table %q has schema %s, want %s", ErrSchemaMismatch, i, t.Name, r.Schema(), t.Schema)
		}
	}
	if rows == 0 {
		return DataFile{}, fmt.Errorf("%w: no rows to write to table %q", ErrInvalidChange, t.Name)
	}
	order, sorted, err := sortedOrder(t.Schema, t.SortKey, recs)
	if err != nil {
		return DataFile{}, fmt.Errorf("cannot sort rows of table %q: %w", t.Name, err)
	}
	var rec arrow.Record
	if sorted && len(recs) == 1 {
		rec = recs[0]
		rec.Retain()
	} else {
		rec, err = takeRecord(s.pool, t.Schema, recs, order)
		if err != nil {
			return DataFile{}, fmt.Errorf("cannot arrange rows of table %q: %w", t.Name, err)
		}
	}
	defer rec.Release()
	return s.writeRecord(ctx, project, t, partition, rec)
}

// writeRecord encodes rec (sorted) and stores it under a new name.
func (s *Store) writeRecord(ctx context.Context, project string, t *Table, partition string, rec arrow.Record) (DataFile, error) {
	// The file is written into a pooled buffer, given back once stored:
	// a commit's files would otherwise take tens of megabytes of fresh
	// memory each time.
	out := s.pool.take(int(min(recordBytes(rec)/4, 256<<20)))
	groupRows := s.cfg.RowGroupRows
	if t.RowGroupRows > 0 {
		groupRows = t.RowGroupRows
	}
	data, groups, err := encodeParquetAs(t, rec, groupRows, s.pool, true, out)
	if err != nil {
		return DataFile{}, err
	}
	defer s.pool.Free(data[:cap(data)])
	now := s.now()
	f := DataFile{
		Table:     t.Name,
		Partition: partition,
		Name:      newID(now) + parquetExt,
		Rows:      rec.NumRows(),
		Bytes:     int64(len(data)),
		RowGroups: groups,
		WrittenAt: now.UTC(),
		def:       t,
	}
	if len(t.SortKey) > 0 && rec.NumRows() > 0 {
		col := rec.Column(t.Schema.FieldIndices(t.SortKey[0])[0])
		// Sorted with nulls first: the first non-null row is the least.
		first := col.NullN()
		if first < col.Len() {
			f.Min = keyAt(col, first).json()
			f.Max = keyAt(col, col.Len()-1).json()
			if f.Min == nil || f.Max == nil {
				f.Min, f.Max = nil, nil
			}
		}
	}
	key := s.layout.file(project, f.Ref())
	if _, err := s.bucket.PutIf(ctx, key, bytes.NewReader(data), storage.IfAbsent()); err != nil {
		return DataFile{}, fmt.Errorf("cannot store data file %q: %w", key, err)
	}
	s.cfg.Metrics.written(f)
	return f, nil
}

// Load returns the current manifest of target, fetched from the store

// Discard deletes data files of project that were written (Write) but
// will never be committed: a commit refused before its manifest was put.
// Deleting a file a manifest lists breaks that manifest; callers discard
// only files of a commit they know failed before its put.
func (s *Store) Discard(ctx context.Context, project string, files ...DataFile) error {
	var errs []error
	for _, f := range files {
		if err := s.bucket.Delete(ctx, s.layout.file(project, f.Ref())); err != nil {
			errs = append(errs, fmt.Errorf("cannot discard data file %s: %w", f.Name, err))
		}
	}
	return errors.Join(errs...)
}

// (version 0 with no tables when the project has none yet).
func (s *Store) Load(ctx context.Context, target Target) (*Manifest, error) {
	k, err := s.fetch(ctx, target)
	if err != nil {
		return nil, err
	}
	return k.m, nil
}

// fetch reads the manifest of target and remembers it.
func (s *Store) fetch(ctx context.Context, target Target) (knownManifest, error) {
	if err := target.validate(); err != nil {
		return knownManifest{}, err
	}
	s.mu.Lock()
	prev := s.known[target].m
	s.mu.Unlock()
	m, attrs, err := s.source().load(ctx, target, prev)
	var k knownManifest
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if target.Staging != "" {
			return knownManifest{}, fmt.Errorf("cannot load %s: %w", target, ErrGenerationGone)
		}
		k = knownManifest{m: emptyManifest(target)}
	case err != nil:
		return knownManifest{}, fmt.Errorf("cannot load manifest of %s: %w", target, err)
	default:
		k = knownManifest{m: m, etag: attrs.ETag}
	}
	s.remember(target, k)
	return k, nil
}

// partsParallel is how many sub-manifests a Store reads or writes at once.
const partsParallel = 4

// source reads the Store's manifests.
func (s *Store) source() manifestSource {
	return manifestSource{bucket: s.bucket, layout: s.layout, parallel: partsParallel}
}

// remember keeps k as the latest known manifest of target, unless a
// newer one is known already.
func (s *Store) remember(target Target, k knownManifest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.known[target]; ok && old.m.Version > k.m.Version {
		return
	}
	s.known[target] = k
}

func (s *Store) forget(target Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.known, target)
}

// Commit applies ch to the manifest of target as version expect+1, if the
// manifest is still at version expect (0: no manifest exists yet).
// Otherwise it fails with ErrConflict and changes nothing: reload, decide
// again, and retry (Update does this). Data and checkpoints of one commit
// become visible together or not at all.
//
// A commit whose outcome is unknown (the store failed mid-request) is
// looked up by its commit id before an error is returned, so a nil error
// means committed and ErrConflict means not committed.
func (s *Store) Commit(ctx context.Context, target Target, expect int64, ch Change) (*Manifest, error) {
	return s.commit(ctx, target, expect, func(m *Manifest) (*Manifest, error) {
		return applyChange(m, ch, s.now(), newID(s.now()))
	})
}

// commit writes mutate(m) over version expect of target.
func (s *Store) commit(ctx context.Context, target Target, expect int64, mutate func(*Manifest) (*Manifest, error)) (*Manifest, error) {
	if err := target.validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	k, ok := s.known[target]
	s.mu.Unlock()
	if !ok || k.m.Version != expect {
		var err error
		if k, err = s.fetch(ctx, target); err != nil {
			return nil, err
		}
	}
	if k.m.Version != expect {
		return nil, fmt.Errorf("cannot commit to %s over version %d: it is at version %d: %w", target, expect, k.m.Version, ErrConflict)
	}
	if target.Staging != "" && expect == 0 {
		return nil, fmt.Errorf("cannot commit to %s: %w", target, ErrGenerationGone)
	}
	next, err := mutate(k.m)
	if err != nil {
		return nil, err
	}
	if err := s.checkFresh(next, k.m); err != nil {
		return nil, err
	}
	return s.put(ctx, target, k, next)
}

// checkFresh refuses to add files written so long ago that Collect may
// have taken them for orphans. Only the partitions of groups a change
// touched are looked at (all of a table without groups yet): the others
// hold prev's files.
func (s *Store) checkFresh(next, prev *Manifest) error {
	limit := s.now().Add(-s.cfg.OrphanGrace / 2)
	for name, ts := range next.Tables {
		if ts == prev.Tables[name] || (ts.groups != nil && len(ts.dirty) == 0) {
			continue
		}
		var want map[string]bool
		if ts.groups != nil {
			want = ts.dirty
		}
		for _, parts := range groupPartitions(ts, want) {
			for _, p := range parts {
				old := prev.Files(name, p)
				for _, f := range ts.Partitions[p] {
					if !f.WrittenAt.Before(limit) || slices.ContainsFunc(old, func(g DataFile) bool { return g.Name == f.Name }) {
						continue
					}
					return fmt.Errorf("cannot commit %s written at %v: %w", f.Ref(), f.WrittenAt, ErrStaleFile)
				}
			}
		}
	}
	return nil
}

// put writes next over the version k of target: the sub-manifests of the
// groups it changed, then its root with one conditional put.
func (s *Store) put(ctx context.Context, target Target, k knownManifest, next *Manifest) (*Manifest, error) {
	next, written, err := s.writeParts(ctx, next)
	if err != nil {
		s.dropParts(ctx, target, written)
		return nil, err
	}
	data, err := encodeRoot(next)
	if err != nil {
		s.dropParts(ctx, target, written)
		return nil, err
	}
	cond := storage.IfAbsent()
	if k.etag != "" {
		cond = storage.IfMatch(k.etag)
	}
	key := s.layout.target(target)
	etag, err := s.bucket.PutIf(ctx, key, bytes.NewReader(data), cond)
	switch {
	case err == nil:
		s.remember(target, knownManifest{m: next, etag: etag})
		return next, nil
	case errors.Is(err, storage.ErrPreconditionFailed):
		s.forget(target)
		s.dropParts(ctx, target, written) // nothing refers to them
		return nil, fmt.Errorf("cannot commit version %d of %s: %w", next.Version, target, ErrConflict)
	}
	// The outcome is unknown: the put may have happened. Look (even when
	// ctx ended: the caller must learn whether it committed).
	s.forget(target)
	lookCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ambiguousLookup)
	defer cancel()
	cur, ferr := s.fetch(lookCtx, target)
	if ferr == nil && cur.m.CommitID == next.CommitID && cur.m.Version == next.Version {
		return cur.m, nil
	}
	return nil, fmt.Errorf("cannot commit version %d of %s: %w", next.Version, target, err)
}

// Update runs a read-decide-commit transaction on target: it loads the
// manifest, asks fn for the change to make to it, and commits that change
// over exactly the version fn saw. When another committer wins the race,
// it reloads and asks fn again (up to Config.CommitRetries times, with a
// short random backoff). fn must decide from the manifest it is given: a
// consumer checks there that its checkpoint is still the one it started
// from, so that a commit never covers data twice. fn returning an error
// ends Update with that error; returning an empty Change commits nothing
// and returns the manifest fn saw.
func (s *Store) Update(ctx context.Context, target Target, fn func(*Manifest) (Change, error)) (*Manifest, error) {
	return s.update(ctx, target, func(m *Manifest) (*Manifest, error) {
		ch, err := fn(m)
		if err != nil {
			return nil, err
		}
		if len(ch.Add) == 0 && len(ch.Remove) == 0 && len(ch.Checkpoints) == 0 {
			return nil, nil
		}
		return applyChange(m, ch, s.now(), newID(s.now()))
	})
}

// update is Update with a mutation of the whole manifest; mutate returning
// nil, nil means nothing to commit.
func (s *Store) update(ctx context.Context, target Target, mutate func(*Manifest) (*Manifest, error)) (*Manifest, error) {
	if err := target.validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	k, ok := s.known[target]
	s.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if !ok {
			var err error
			if k, err = s.fetch(ctx, target); err != nil {
				return nil, err
			}
		}
		var seen *Manifest
		m, err := s.commit(ctx, target, k.m.Version, func(m *Manifest) (*Manifest, error) {
			next, err := mutate(m)
			if next == nil && err == nil {
				seen = m
				return nil, errNothing
			}
			return next, err
		})
		switch {
		case seen != nil:
			return seen, nil
		case err == nil:
			return m, nil
		case !errors.Is(err, ErrConflict):
			return nil, err
		case attempt+1 >= s.cfg.CommitRetries:
			return nil, fmt.Errorf("cannot commit to %s after %d attempts: %w: %w", target, attempt+1, ErrTooManyRetries, err)
		}
		ok = false
		// Back off a little, randomly, so racing committers spread out.
		d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot commit to %s: %w", target, ctx.Err())
		case <-time.After(d):
		}
	}
}

// writeParts writes the sub-manifests of the groups that next changed (all
// groups of a table read from format 1 or built afresh) under new names,
// and returns next with their references, and the keys written.
func (s *Store) writeParts(ctx context.Context, next *Manifest) (*Manifest, []string, error) {
	out := *next
	out.Format = manifestFormat
	type job struct {
		table string
		ts    *TableState
		group string
		parts []string
		ref   partGroup
		key   string
	}
	var jobs []*job
	var retired []retiredPart // groups replaced or dropped
	cloned := false
	for name, ts := range next.Tables {
		if ts.groups != nil && len(ts.dirty) == 0 {
			continue
		}
		if !cloned {
			out.Tables, cloned = maps.Clone(next.Tables), true
		}
		c := *ts // next's states may be shared (Collect's update): copy
		var want map[string]bool
		if ts.groups == nil {
			c.groups = map[string]partGroup{}
		} else {
			c.groups, want = maps.Clone(ts.groups), ts.dirty
		}
		c.dirty = nil
		byGroup := groupPartitions(ts, want)
		for g := range want {
			if old, ok := c.groups[g]; ok {
				retired = append(retired, retiredPart{Table: name, Object: old.Object, At: s.now().UTC()})
			}
			if len(byGroup[g]) == 0 {
				delete(c.groups, g) // its last partition went
			}
		}
		for _, g := range slices.Sorted(maps.Keys(byGroup)) {
			jobs = append(jobs, &job{table: name, ts: &c, group: g, parts: byGroup[g]})
		}
		out.Tables[name] = &c
	}
	err := forEach(ctx, len(jobs), partsParallel, func(i int) error {
		j := jobs[i]
		data, ref, err := encodeParts(out.Project, j.table, j.ts, j.group, j.parts)
		if err != nil {
			return err
		}
		ref.Object = newID(s.now()) + manifestExt
		key := s.layout.parts(out.Project, j.table, ref.Object)
		if _, err := s.bucket.PutIf(ctx, key, bytes.NewReader(data), storage.IfAbsent()); err != nil {
			return fmt.Errorf("cannot store sub-manifest %q: %w", key, err)
		}
		j.ref, j.key = ref, key
		return nil
	})
	if len(retired) > 0 {
		out.retiredParts = append(slices.Clone(next.retiredParts), retired...)
	}
	var written []string
	for _, j := range jobs {
		if j.key != "" {
			written = append(written, j.key)
			j.ts.groups[j.group] = j.ref
		}
	}
	if err != nil {
		return nil, written, err
	}
	return &out, written, nil
}

// dropParts deletes sub-manifests that no root refers to (a commit that
// failed before or at its root's put); what it cannot delete, Collect
// does after OrphanGrace.
func (s *Store) dropParts(ctx context.Context, target Target, keys []string) {
	for _, k := range keys {
		if err := s.bucket.Delete(context.WithoutCancel(ctx), k); err != nil {
			s.logger.Debug("rollups: cannot delete a sub-manifest of a failed commit", "target", target.String(), "key", k, "err", err)
		}
	}
}
