package rollups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mfhq/mf/storage"
)

// manifestSource reads manifests, root and sub-manifests, from a bucket.
type manifestSource struct {
	bucket   storage.BucketReader
	layout   layout
	parallel int           // sub-manifests fetched at once
	gets     *atomic.Int64 // counts sub-manifests fetched; may be nil
}

// errPartsGone reports that a sub-manifest a root lists is missing: the
// root was replaced and the group collected meanwhile. Load again.
var errPartsGone = errors.New("a sub-manifest the root lists is gone")

// loadAttempts bounds the reloads of a root whose sub-manifests went away.
const loadAttempts = 4

// load reads the manifest of target: its root, then the sub-manifests
// that prev (an earlier version of the same project's tables, or nil)
// does not hold; unchanged groups are taken from prev. A missing root
// fails with storage.ErrNotFound.
func (src manifestSource) load(ctx context.Context, target Target, prev *Manifest) (*Manifest, storage.Attributes, error) {
	key := src.layout.target(target)
	for attempt := 1; ; attempt++ {
		data, attrs, err := storage.ReadAll(ctx, src.bucket, key)
		if err != nil {
			return nil, attrs, err
		}
		m, err := decodeRoot(data, target, prev)
		if err != nil {
			return nil, attrs, fmt.Errorf("cannot load manifest %q: %w", key, err)
		}
		err = src.fill(ctx, m, prev)
		if errors.Is(err, errPartsGone) && attempt < loadAttempts {
			continue
		}
		if err != nil {
			return nil, attrs, fmt.Errorf("cannot load manifest %q: %w", key, err)
		}
		return m, attrs, nil
	}
}

// fill sets the partitions of m's tables (decoded from a root of format
// 2) from prev where a group's object is one prev holds, and from the
// store otherwise.
func (src manifestSource) fill(ctx context.Context, m, prev *Manifest) error {
	type job struct {
		table string
		ts    *TableState
		ref   partGroup
		files map[string][]DataFile
		enc   map[string][]byte
	}
	var jobs []*job
	for name, ts := range m.Tables {
		if ts.groups == nil || ts.Partitions != nil {
			continue // format 1, or prev's state: whole already
		}
		var old *TableState
		if prev != nil && prev.Project == m.Project {
			old = prev.Tables[name]
		}
		// prev's partitions unknown (nil): as if there were no prev, so
		// that no unchanged group goes missing.
		if old == nil || old.groups == nil || old.dirty != nil || old.Partitions == nil {
			ts.Partitions, ts.enc = map[string][]DataFile{}, map[string][]byte{}
			for _, g := range ts.groups {
				jobs = append(jobs, &job{table: name, ts: ts, ref: g})
			}
			continue
		}
		// Start from prev's partitions, less the groups that changed.
		ts.Partitions, ts.enc = maps.Clone(old.Partitions), maps.Clone(old.enc)
		if ts.enc == nil {
			// maps.Clone of a nil map is nil; a partition missing from
			// enc is encoded when needed.
			ts.enc = map[string][]byte{}
		}
		for id, g := range old.groups {
			if ts.groups[id] != g {
				for _, p := range partitionsOf(old, id) {
					delete(ts.Partitions, p)
					delete(ts.enc, p)
				}
			}
		}
		for id, g := range ts.groups {
			if old.groups[id] != g {
				jobs = append(jobs, &job{table: name, ts: ts, ref: g})
			}
		}
	}
	err := forEach(ctx, len(jobs), src.parallel, func(i int) error {
		j := jobs[i]
		key := src.layout.parts(m.Project, j.table, j.ref.Object)
		data, _, err := storage.ReadAll(ctx, src.bucket, key)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("%w: %q", errPartsGone, key)
		}
		if err != nil {
			return fmt.Errorf("cannot read sub-manifest %q: %w", key, err)
		}
		if src.gets != nil {
			src.gets.Add(1)
		}
		j.files, j.enc, err = decodeParts(data, m.Project, j.table, j.ref)
		if err != nil {
			return fmt.Errorf("sub-manifest %q: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		for p, files := range j.files {
			j.ts.Partitions[p] = files
			j.ts.enc[p] = j.enc[p]
		}
	}
	return nil
}

// forEach calls fn(0) … fn(n-1), up to parallel at once, and returns the
// first error (the calls not yet started then are skipped).
func forEach(ctx context.Context, n, parallel int, fn func(int) error) error {
	if n == 0 {
		return nil
	}
	parallel = max(1, min(parallel, n))
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs error
		wg   sync.WaitGroup
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if errs == nil {
						errs = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	if errs == nil {
		errs = ctx.Err()
	}
	return errs
}
