package rollups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/mfhq/mf/storage"
)

// A reader keeps, per project, the latest version of the live manifest
// it read: the decoded root, and one cell per sub-manifest the root
// names, filled the first time a caller needs a partition of its group
// (docs/rollups.md, "Readers and the cache"). A new version shares the
// cells of the groups it did not change with the version before, so a
// group is fetched once per process whatever the callers ask. A snapshot
// from Reader.SnapshotRoot reads only the root and the groups its calls
// touch (a cold open is O(period)); one from Reader.Snapshot is made
// whole first (every group), as callers of Manifest need.

// version is a reader's state of one version of a project's manifest.
type version struct {
	r    *Reader
	root *Manifest // decoded root: a format-2 table has its groups, not its partitions
	etag string
	// cells holds the sub-manifests the root names, by table and object;
	// immutable map, each cell filled on first need.
	cells map[cellKey]*groupCell

	mu        sync.Mutex
	whole     *Snapshot // the snapshot with the whole manifest, once built
	prevWhole *Manifest // the version before's whole manifest: its unchanged tables are reused
	rootSnap  *Snapshot
}

// cellKey names a sub-manifest: object names are never reused, so the
// content of a key never changes.
type cellKey struct{ table, object string }

// groupCell is one sub-manifest, fetched and decoded once.
type groupCell struct {
	table string
	ref   partGroup

	mu    sync.Mutex
	files map[string][]DataFile // nil until fetched
	enc   map[string][]byte
}

// newVersion returns the state of root (read with etag), sharing the
// cells of prev (the version before, or nil) that root still names.
func newVersion(r *Reader, root *Manifest, etag string, prev *version) *version {
	v := &version{r: r, root: root, etag: etag, cells: map[cellKey]*groupCell{}}
	for name, ts := range root.Tables {
		if ts.Partitions != nil {
			continue // whole already (format 1)
		}
		for _, g := range ts.groups {
			k := cellKey{name, g.Object}
			if prev != nil {
				if c := prev.cells[k]; c != nil && c.ref == g {
					v.cells[k] = c
					continue
				}
			}
			v.cells[k] = &groupCell{table: name, ref: g}
		}
	}
	if prev != nil {
		prev.mu.Lock()
		v.prevWhole = prev.prevWhole
		if prev.whole != nil {
			v.prevWhole = prev.whole.m
		}
		prev.mu.Unlock()
	}
	if !v.split() {
		// Nothing to fetch: the root is the whole manifest.
		v.whole = &Snapshot{r: r, m: root, etag: etag, v: v}
		v.prevWhole = nil
	}
	return v
}

// split reports whether a table of the root has its partitions in
// sub-manifests.
func (v *version) split() bool {
	for _, ts := range v.root.Tables {
		if ts.Partitions == nil {
			return true
		}
	}
	return false
}

// rootSnapshot returns the snapshot of the version that holds no
// partition yet.
func (v *version) rootSnapshot() *Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.whole != nil {
		return v.whole
	}
	if v.rootSnap == nil {
		v.rootSnap = &Snapshot{r: v.r, etag: v.etag, v: v}
	}
	return v.rootSnap
}

// wholeSnapshot fetches every group not held yet and returns the
// snapshot with the whole manifest. A missing sub-manifest fails with
// ErrFileGone (the root moved on and the collector took the group).
func (v *version) wholeSnapshot(ctx context.Context) (*Snapshot, error) {
	v.mu.Lock()
	if w := v.whole; w != nil {
		v.mu.Unlock()
		return w, nil
	}
	v.mu.Unlock()
	cells := make([]*groupCell, 0, len(v.cells))
	for _, c := range v.cells {
		cells = append(cells, c)
	}
	if err := v.fetch(ctx, cells); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.whole != nil {
		return v.whole, nil
	}
	m := *v.root
	m.Tables = make(map[string]*TableState, len(v.root.Tables))
	for name, ts := range v.root.Tables {
		if ts.Partitions != nil {
			m.Tables[name] = ts
			continue
		}
		var old *TableState
		if v.prevWhole != nil {
			old = v.prevWhole.Tables[name]
		}
		switch {
		case old != nil && old.rootEnc != nil && bytes.Equal(old.rootEnc, ts.rootEnc):
			m.Tables[name] = old // unchanged since the version before
		case old != nil && old.groups != nil && old.dirty == nil:
			m.Tables[name] = v.changedGroups(name, ts, old)
		default:
			m.Tables[name] = v.withGroups(name, ts, nil)
		}
	}
	v.whole = &Snapshot{r: v.r, m: &m, etag: v.etag, v: v}
	v.prevWhole = nil
	return v.whole, nil
}

// withGroups returns a copy of ts (a root's table) with the partitions of
// the groups want selects (nil: all), which must have been fetched. A
// copy with some groups only is for reading: it is never committed.
func (v *version) withGroups(name string, ts *TableState, want func(partGroup) bool) *TableState {
	c := *ts
	n := 0
	for _, g := range ts.groups {
		if want == nil || want(g) {
			n += g.Partitions
		}
	}
	c.Partitions, c.enc = make(map[string][]DataFile, n), make(map[string][]byte, n)
	for _, g := range ts.groups {
		if want != nil && !want(g) {
			continue
		}
		cell := v.cells[cellKey{name, g.Object}]
		for p, files := range cell.files {
			c.Partitions[p] = files
			c.enc[p] = cell.enc[p]
		}
	}
	return &c
}

// changedGroups returns a copy of ts (a root's table) with every
// partition: those of old (the whole state of the version before) less
// the groups that changed, and those of the changed groups, which must
// have been fetched. Cheaper than withGroups when few groups changed.
func (v *version) changedGroups(name string, ts, old *TableState) *TableState {
	c := *ts
	c.Partitions, c.enc = maps.Clone(old.Partitions), maps.Clone(old.enc)
	for id, g := range old.groups {
		if ts.groups[id] != g {
			for _, p := range partitionsOf(old, id) {
				delete(c.Partitions, p)
				delete(c.enc, p)
			}
		}
	}
	for id, g := range ts.groups {
		if old.groups[id] == g {
			continue
		}
		cell := v.cells[cellKey{name, g.Object}]
		for p, files := range cell.files {
			c.Partitions[p] = files
			c.enc[p] = cell.enc[p]
		}
	}
	return &c
}

// fetch fills the cells not filled yet, up to Parallelism at once.
func (v *version) fetch(ctx context.Context, cells []*groupCell) error {
	return forEach(ctx, len(cells), v.r.cfg.Parallelism, func(i int) error {
		return cells[i].fill(ctx, v)
	})
}

// fill fetches and decodes the cell's sub-manifest unless it holds it.
func (c *groupCell) fill(ctx context.Context, v *version) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files != nil {
		return nil
	}
	r := v.r
	key := r.layout.parts(v.root.Project, c.table, c.ref.Object)
	data, _, err := storage.ReadAll(ctx, r.bucket, key)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %w: %q", ErrFileGone, errPartsGone, key)
	}
	if err != nil {
		return fmt.Errorf("cannot read sub-manifest %q: %w", key, err)
	}
	r.stats.partGets.Add(1)
	files, enc, err := decodeParts(data, v.root.Project, c.table, c.ref)
	if err != nil {
		return fmt.Errorf("sub-manifest %q: %w", key, err)
	}
	c.files, c.enc = files, enc
	return nil
}

// tableWith returns table name's state with at least the partitions of
// the groups want selects (fetching those not held), or nil when the
// snapshot has no such table. A whole snapshot answers from its manifest.
func (sn *Snapshot) tableWith(ctx context.Context, name string, want func(partGroup) bool) (*TableState, error) {
	if sn.m != nil {
		return sn.m.Tables[name], nil
	}
	v := sn.v
	ts := v.root.Tables[name]
	if ts == nil || ts.Partitions != nil {
		return ts, nil
	}
	v.mu.Lock()
	w := v.whole
	v.mu.Unlock()
	if w != nil {
		return w.m.Tables[name], nil
	}
	var cells []*groupCell
	for _, g := range ts.groups {
		if want(g) {
			cells = append(cells, v.cells[cellKey{name, g.Object}])
		}
	}
	if err := v.fetch(ctx, cells); err != nil {
		return nil, fmt.Errorf("cannot read the partitions of table %q of project %q (version %d): %w", name, v.root.Project, v.root.Version, err)
	}
	return v.withGroups(name, ts, want), nil
}

// scanGroups returns which groups a scan with opts reads.
func scanGroups(opts ScanOptions) (func(partGroup) bool, error) {
	if len(opts.Partitions) > 0 {
		for _, p := range opts.Partitions {
			if err := validatePartition(p); err != nil {
				return nil, err
			}
		}
		return func(g partGroup) bool {
			return slices.ContainsFunc(opts.Partitions, func(p string) bool { return groupOf(p) == g.ID && p >= g.From && p <= g.To })
		}, nil
	}
	for _, d := range []string{opts.From, opts.To} {
		if d != "" && !isDay(d) {
			return nil, fmt.Errorf("%w: %q is not a day YYYY-MM-DD", ErrInvalidName, d)
		}
	}
	if opts.From == "" && opts.To == "" {
		return func(partGroup) bool { return true }, nil
	}
	return func(g partGroup) bool {
		return g.ID != labelGroup && (opts.From == "" || g.To >= opts.From) && (opts.To == "" || g.From <= opts.To)
	}, nil
}

// Partition is one partition of a table and its live files.
type Partition struct {
	Name string
	// Files are the live files, oldest first (shared: read-only).
	Files []DataFile
}

// PartitionGroup describes a group of a table's partitions as the root of
// the manifest lists it (docs/rollups.md, "Manifest"): a month of day
// partitions or all label partitions.
type PartitionGroup struct {
	// ID is the month "YYYY-MM" or "labels".
	ID string
	// From and To are the group's least and greatest partitions.
	From, To string
	// Partitions and Files count its partitions and live files; Rows and
	// Bytes sum the files' rows and sizes.
	Partitions, Files int
	Rows, Bytes       int64
}

// Partitions returns the partitions of table whose names lie in [from,
// to] (inclusive; an empty bound is open), ascending, with their files.
// It fetches only the sub-manifests of the groups whose range meets the
// bounds (and none it holds already). A table the snapshot does not have
// has no partitions.
func (sn *Snapshot) Partitions(ctx context.Context, table, from, to string) ([]Partition, error) {
	ts, err := sn.tableWith(ctx, table, func(g partGroup) bool {
		return (from == "" || g.To >= from) && (to == "" || g.From <= to)
	})
	if err != nil || ts == nil {
		return nil, err
	}
	var out []Partition
	for p, files := range ts.Partitions {
		if (from == "" || p >= from) && (to == "" || p <= to) {
			out = append(out, Partition{Name: p, Files: files})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Groups returns the partition groups of table, ascending by ID, as the
// root lists them (no request to the store); nil when the snapshot has no
// such table.
func (sn *Snapshot) Groups(table string) []PartitionGroup {
	ts := sn.head().Tables[table]
	if ts == nil {
		return nil
	}
	var gs []partGroup
	if ts.groups != nil && len(ts.dirty) == 0 {
		gs = ts.sortedGroups()
	} else {
		// Format 1, or a manifest changed in memory: from its partitions.
		byGroup := groupPartitions(ts, nil)
		for _, id := range slices.Sorted(maps.Keys(byGroup)) {
			ps := byGroup[id]
			g := partGroup{ID: id, From: ps[0], To: ps[len(ps)-1], Partitions: len(ps)}
			for _, p := range ps {
				for _, f := range ts.Partitions[p] {
					g.Files++
					g.Rows += f.Rows
					g.Bytes += f.Bytes
				}
			}
			gs = append(gs, g)
		}
	}
	out := make([]PartitionGroup, len(gs))
	for i, g := range gs {
		out[i] = PartitionGroup{ID: g.ID, From: g.From, To: g.To, Partitions: g.Partitions, Files: g.Files, Rows: g.Rows, Bytes: g.Bytes}
	}
	return out
}

// Whole returns the whole manifest of the snapshot, fetching the groups
// it does not hold yet (Manifest, for a snapshot from SnapshotRoot).
func (sn *Snapshot) Whole(ctx context.Context) (*Manifest, error) {
	if sn.m != nil {
		return sn.m, nil
	}
	w, err := sn.v.wholeSnapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of project %q (version %d): %w", sn.v.root.Project, sn.v.root.Version, err)
	}
	return w.m, nil
}

// head returns the manifest whose head and table definitions the
// snapshot has: the whole one, or the root.
func (sn *Snapshot) head() *Manifest {
	if sn.m != nil {
		return sn.m
	}
	return sn.v.root
}

// Project returns the project of the snapshot.
func (sn *Snapshot) Project() string { return sn.head().Project }

// Version returns the manifest version of the snapshot (0: the project
// has no tables yet).
func (sn *Snapshot) Version() int64 { return sn.head().Version }

// Generation returns the generation of the snapshot's tables.
func (sn *Snapshot) Generation() int64 { return sn.head().Generation }

// Checkpoint returns the checkpoint stored under name, or "" when none.
func (sn *Snapshot) Checkpoint(name string) string { return sn.head().Checkpoint(name) }
