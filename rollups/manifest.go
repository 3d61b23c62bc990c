package rollups

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
)

// manifestFormat names the manifest encoding that commits write: a root
// object that lists sub-manifests (parts.go). manifestFormatV1 is the
// earlier single-object encoding, still read (an installation upgrading);
// the first commit over it writes format 2. A reader refuses others.
const (
	manifestFormat   = "mf-rollups-manifest/2"
	manifestFormatV1 = "mf-rollups-manifest/1"
)

// Manifest is one committed version of a project's tables: the live data
// files of every table and partition, the consumers' checkpoints, and the
// files retired by earlier versions that wait for deletion. It is the
// unit of atomicity: a commit replaces its root object with one
// conditional put (the sub-manifests it changed are written before, under
// new names), so a reader sees all of a commit or none of it. In memory it
// is always whole, whatever the encoding it was read from.
//
// A Manifest returned by this package is shared (readers cache it): treat
// it and everything it holds as read-only.
type Manifest struct {
	// Format is the encoding it was read from: "mf-rollups-manifest/2", or
	// "mf-rollups-manifest/1" for a manifest not committed to since an
	// upgrade.
	Format string `json:"format"`
	// Project is the project id.
	Project string `json:"project"`
	// Generation counts the generations of the project's tables: 1 for the
	// first, one more each time a staged generation is promoted (replay).
	Generation int64 `json:"generation"`
	// Version counts commits: 0 for a project with no manifest yet, 1 for
	// the first commit, one more with each commit. Versions of the live
	// manifest keep increasing across generations. A staged generation
	// counts its own versions from 1.
	Version int64 `json:"version"`
	// Staging is the id of the staged generation this manifest belongs to,
	// empty for the live manifest.
	Staging string `json:"staging,omitempty"`
	// CommittedAt is when the version was committed (committer's clock).
	CommittedAt time.Time `json:"committedAt"`
	// CommitID identifies the commit that wrote this version, so that a
	// committer can tell whether an ambiguous failure committed.
	CommitID string `json:"commitId"`
	// Tables holds the live files by table name.
	Tables map[string]*TableState `json:"tables"`
	// Checkpoints are the consumers' opaque positions, committed together
	// with the data they cover.
	Checkpoints map[string]string `json:"checkpoints,omitempty"`
	// Retired lists files that earlier versions removed; they are deleted
	// once RetireGrace has passed and dropped from the list then.
	Retired []RetiredFile `json:"retired,omitempty"`

	// retiredParts lists sub-manifests that earlier versions replaced;
	// like retired files, they are deleted once RetireGrace has passed
	// (at once by CollectRetired and CollectPurge: they hold the sort-key
	// bounds of files an erasure replaced).
	retiredParts []retiredPart
}

// retiredPart is a sub-manifest that a commit replaced or dropped.
type retiredPart struct {
	Table  string    `json:"table"`
	Object string    `json:"object"`
	At     time.Time `json:"at"`
}

// TableState is a table as the manifest records it: its latest definition
// and its live files by partition.
type TableState struct {
	// SortKey and NoDictionary are those of the table's latest definition.
	SortKey      []string `json:"sortKey,omitempty"`
	NoDictionary []string `json:"noDictionary,omitempty"`
	// Key is the latest definition's key: set for keyed tables.
	Key []string `json:"key,omitempty"`
	// RowGroupRows is the latest definition's row group size (0: the
	// store's); compaction writes with it.
	RowGroupRows int64 `json:"rowGroupRows,omitempty"`
	// Columns describe the latest schema: name, type and nullability.
	Columns []Column `json:"columns"`
	// Partitions holds the live files of each partition, oldest first.
	Partitions map[string][]DataFile `json:"partitions"`

	schema *arrow.Schema
	// enc holds the JSON encoding of partitions' file lists, so that a
	// commit re-encodes only the partitions it changed. Set when the state
	// is built (decoded or changed) and never modified after: states are
	// shared between manifests and goroutines. A partition missing here
	// is encoded when needed.
	enc map[string][]byte
	// groups holds the sub-manifest of each partition group, by group id;
	// nil when the state was not read from or written as format 2 (all
	// groups are written by the next commit). dirty names the groups a
	// change touched, whose sub-manifests the commit writes anew. Both are
	// set when the state is built, like enc.
	groups map[string]partGroup
	dirty  map[string]bool
	// rootEnc is the table's encoding in the root it was read from (nil
	// otherwise): a load whose root encodes the table the same way takes
	// this state as it is.
	rootEnc []byte
}

// tableStateJSON is the encoding of TableState.
type tableStateJSON struct {
	SortKey      []string                   `json:"sortKey,omitempty"`
	NoDictionary []string                   `json:"noDictionary,omitempty"`
	Key          []string                   `json:"key,omitempty"`
	RowGroupRows int64                      `json:"rowGroupRows,omitempty"`
	Columns      []Column                   `json:"columns"`
	Partitions   map[string]json.RawMessage `json:"partitions,omitempty"`
}

// UnmarshalJSON decodes the state, keeping each partition's encoding.
func (t *TableState) UnmarshalJSON(data []byte) error {
	var in tableStateJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*t = TableState{SortKey: in.SortKey, NoDictionary: in.NoDictionary, Key: in.Key, RowGroupRows: in.RowGroupRows, Columns: in.Columns,
		Partitions: make(map[string][]DataFile, len(in.Partitions)), enc: make(map[string][]byte, len(in.Partitions))}
	for p, raw := range in.Partitions {
		var files []DataFile
		if err := json.Unmarshal(raw, &files); err != nil {
			return fmt.Errorf("partition %q: %w", p, err)
		}
		t.Partitions[p] = files
		t.enc[p] = raw
	}
	return nil
}

// FileRef names a data file of a project.
type FileRef struct {
	Table     string `json:"table"`
	Partition string `json:"partition"`
	// Name is the object name within the partition: a unique id and
	// ".parquet".
	Name string `json:"name"`
}

func (f FileRef) String() string { return f.Table + "/" + f.Partition + "/" + f.Name }

// DataFile describes one immutable Parquet data file.
type DataFile struct {
	// Table and Partition are implied by where the manifest lists the
	// file; they are not repeated in its encoding.
	Table     string `json:"-"`
	Partition string `json:"-"`
	// Name is the object name within the partition.
	Name string `json:"name"`
	// Rows is the number of rows, Bytes the object size.
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// RowGroups is the number of Parquet row groups.
	RowGroups int `json:"rowGroups"`
	// Min and Max bound the first sort-key column over the file's rows
	// (JSON: a number, a string, or hex for binaries); absent without a
	// sort key or when every value is null.
	Min json.RawMessage `json:"min,omitempty"`
	Max json.RawMessage `json:"max,omitempty"`
	// WrittenAt is when the file was written (writer's clock).
	WrittenAt time.Time `json:"writtenAt"`

	def *Table // the definition the file was written with, when known
}

// Ref returns the reference of the file.
func (f DataFile) Ref() FileRef {
	return FileRef{Table: f.Table, Partition: f.Partition, Name: f.Name}
}

// RetiredFile is a file removed from the live set, waiting for deletion.
type RetiredFile struct {
	FileRef
	// At is when it was removed.
	At time.Time `json:"at"`
}

// encoded returns the kept encoding of a partition.
func (t *TableState) encoded(p string) ([]byte, bool) {
	if t == nil {
		return nil, false
	}
	e, ok := t.enc[p]
	return e, ok
}

// Checkpoint returns the checkpoint stored under name, or "" when none.
func (m *Manifest) Checkpoint(name string) string { return m.Checkpoints[name] }

// Table returns the state of the named table, or nil when the manifest
// has no files of it.
func (m *Manifest) Table(name string) *TableState { return m.Tables[name] }

// Files returns the live files of a table's partition, oldest first.
func (m *Manifest) Files(table, partition string) []DataFile {
	t := m.Tables[table]
	if t == nil {
		return nil
	}
	return t.Partitions[partition]
}

// Schema returns the table's latest schema.
func (t *TableState) Schema() *arrow.Schema { return t.schema }

// Definition returns the table's latest definition.
func (t *TableState) Definition(name string) *Table {
	return &Table{Name: name, Schema: t.schema, SortKey: t.SortKey, NoDictionary: t.NoDictionary, Key: t.Key, RowGroupRows: t.RowGroupRows}
}

// PartitionNames returns the table's partitions in ascending order.
func (t *TableState) PartitionNames() []string {
	return slices.Sorted(maps.Keys(t.Partitions))
}

// emptyManifest is version 0 of a target: what a missing manifest means.
func emptyManifest(t Target) *Manifest {
	m := &Manifest{Format: manifestFormat, Project: t.Project, Staging: t.Staging, Tables: map[string]*TableState{}}
	if t.Staging == "" {
		m.Generation = 1
	}
	return m
}

// manifestHead is the encoding of a Manifest without its tables.
type manifestHead struct {
	Format      string            `json:"format"`
	Project     string            `json:"project"`
	Generation  int64             `json:"generation"`
	Version     int64             `json:"version"`
	Staging     string            `json:"staging,omitempty"`
	CommittedAt time.Time         `json:"committedAt"`
	CommitID    string            `json:"commitId"`
	Checkpoints map[string]string `json:"checkpoints,omitempty"`
	Retired     []RetiredFile     `json:"retired,omitempty"`
	// RetiredParts is format 2's retiredManifests.
	RetiredParts []retiredPart `json:"retiredManifests,omitempty"`
}

// rootTableJSON is the encoding of a table in a root (format 2).
type rootTableJSON struct {
	SortKey      []string    `json:"sortKey,omitempty"`
	NoDictionary []string    `json:"noDictionary,omitempty"`
	Key          []string    `json:"key,omitempty"`
	RowGroupRows int64       `json:"rowGroupRows,omitempty"`
	Columns      []Column    `json:"columns"`
	Groups       []partGroup `json:"groups"`
}

// rootJSON is the encoding of a root (format 2).
type rootJSON struct {
	manifestHead
	Tables map[string]rootTableJSON `json:"tables"`
}

// rootRawJSON is a root (format 2) with its tables not decoded yet.
type rootRawJSON struct {
	manifestHead
	Tables map[string]json.RawMessage `json:"tables"`
}

// encodeRoot writes the root object of m (format 2) as compact JSON on
// one line: fields in a fixed order, tables, groups and checkpoints
// sorted by name (the encoding is deterministic). Every table's groups
// must have been written (Store.writeParts).
func encodeRoot(m *Manifest) ([]byte, error) {
	head := manifestHead{
		Format: manifestFormat, Project: m.Project, Generation: m.Generation, Version: m.Version, Staging: m.Staging,
		CommittedAt: m.CommittedAt, CommitID: m.CommitID, Checkpoints: m.Checkpoints, Retired: m.Retired,
		RetiredParts: m.retiredParts,
	}
	tables := make(map[string]rootTableJSON, len(m.Tables))
	for name, ts := range m.Tables {
		if ts.groups == nil || len(ts.dirty) > 0 {
			return nil, fmt.Errorf("cannot encode manifest of project %q: table %q has partitions not written to sub-manifests", m.Project, name)
		}
		tables[name] = rootTableJSON{SortKey: ts.SortKey, NoDictionary: ts.NoDictionary, Key: ts.Key, RowGroupRows: ts.RowGroupRows, Columns: ts.Columns, Groups: ts.sortedGroups()}
	}
	data, err := json.Marshal(rootJSON{manifestHead: head, Tables: tables})
	if err != nil {
		return nil, fmt.Errorf("cannot encode manifest of project %q: %w", m.Project, err)
	}
	return append(data, '\n'), nil
}

// decodeRoot reads and checks a manifest object of target t. A root of
// format 2 comes back with its tables' groups and no partitions yet
// (manifestSource.fill fills them), except tables whose encoding in the
// root is the same as in prev's (an earlier version, or nil): those are
// prev's states, shared. One of format 1 comes back whole.
func decodeRoot(data []byte, t Target, prev *Manifest) (*Manifest, error) {
	var in rootRawJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	switch in.Format {
	case manifestFormat:
	case manifestFormatV1:
		return decodeManifestV1(data, t)
	default:
		return nil, fmt.Errorf("%w: format %q, want %q (written by another version of mf?)", ErrCorruptManifest, in.Format, manifestFormat)
	}
	h := in.manifestHead
	m := &Manifest{Format: h.Format, Project: h.Project, Generation: h.Generation, Version: h.Version, Staging: h.Staging,
		CommittedAt: h.CommittedAt, CommitID: h.CommitID, Checkpoints: h.Checkpoints, Retired: h.Retired,
		retiredParts: h.RetiredParts, Tables: make(map[string]*TableState, len(in.Tables))}
	for _, r := range m.retiredParts {
		if !tableNameRE.MatchString(r.Table) || !validPartsObject(r.Object) {
			return nil, fmt.Errorf("%w: bad retired sub-manifest %q of table %q", ErrCorruptManifest, r.Object, r.Table)
		}
	}
	if err := checkHead(m, t); err != nil {
		return nil, err
	}
	for name, raw := range in.Tables {
		if !tableNameRE.MatchString(name) {
			return nil, fmt.Errorf("%w: bad table %q", ErrCorruptManifest, name)
		}
		if prev != nil && prev.Project == m.Project {
			if old := prev.Tables[name]; old != nil && old.rootEnc != nil && bytes.Equal(old.rootEnc, raw) {
				m.Tables[name] = old // unchanged since prev: share the state
				continue
			}
		}
		var tj rootTableJSON
		if err := json.Unmarshal(raw, &tj); err != nil {
			return nil, fmt.Errorf("%w: table %q: %w", ErrCorruptManifest, name, err)
		}
		s, err := columnsSchema(tj.Columns)
		if err != nil {
			return nil, fmt.Errorf("%w: table %q: %w", ErrCorruptManifest, name, err)
		}
		ts := &TableState{SortKey: tj.SortKey, NoDictionary: tj.NoDictionary, Key: tj.Key, RowGroupRows: tj.RowGroupRows, Columns: tj.Columns, schema: s,
			groups: make(map[string]partGroup, len(tj.Groups)), rootEnc: raw}
		for _, g := range tj.Groups {
			switch {
			case !validGroup(g.ID) || !validPartsObject(g.Object):
				return nil, fmt.Errorf("%w: table %q: bad group %q object %q", ErrCorruptManifest, name, g.ID, g.Object)
			case validatePartition(g.From) != nil || validatePartition(g.To) != nil || groupOf(g.From) != g.ID || groupOf(g.To) != g.ID || g.From > g.To || g.Partitions < 1:
				return nil, fmt.Errorf("%w: table %q: group %q has a bad range [%q, %q] of %d partitions", ErrCorruptManifest, name, g.ID, g.From, g.To, g.Partitions)
			}
			if _, dup := ts.groups[g.ID]; dup {
				return nil, fmt.Errorf("%w: table %q: group %q listed twice", ErrCorruptManifest, name, g.ID)
			}
			ts.groups[g.ID] = g
		}
		m.Tables[name] = ts
	}
	return m, nil
}

// checkHead checks the head of a decoded manifest of target t.
func checkHead(m *Manifest, t Target) error {
	if m.Project != t.Project || m.Staging != t.Staging {
		return fmt.Errorf("%w: it belongs to project %q generation %q, not %q %q", ErrCorruptManifest, m.Project, m.Staging, t.Project, t.Staging)
	}
	if m.Version < 1 {
		return fmt.Errorf("%w: version %d", ErrCorruptManifest, m.Version)
	}
	return nil
}

// decodeManifestV1 reads and checks a single-object manifest (format 1)
// of target t.
func decodeManifestV1(data []byte, t Target) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	if m.Format != manifestFormatV1 {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrCorruptManifest, m.Format, manifestFormatV1)
	}
	if err := checkHead(&m, t); err != nil {
		return nil, err
	}
	if m.Tables == nil {
		m.Tables = map[string]*TableState{}
	}
	for name, ts := range m.Tables {
		if ts == nil || !tableNameRE.MatchString(name) {
			return nil, fmt.Errorf("%w: bad table %q", ErrCorruptManifest, name)
		}
		s, err := columnsSchema(ts.Columns)
		if err != nil {
			return nil, fmt.Errorf("%w: table %q: %w", ErrCorruptManifest, name, err)
		}
		ts.schema = s
		for part, files := range ts.Partitions {
			if err := validatePartition(part); err != nil {
				return nil, fmt.Errorf("%w: table %q: %w", ErrCorruptManifest, name, err)
			}
			for i := range files {
				if !validFileName(files[i].Name) {
					return nil, fmt.Errorf("%w: table %q partition %q: bad file name %q", ErrCorruptManifest, name, part, files[i].Name)
				}
				files[i].Table, files[i].Partition = name, part
			}
		}
	}
	return &m, nil
}

// Change is what one commit does to a manifest.
type Change struct {
	// Add lists new data files, as Store.Write returned them.
	Add []DataFile
	// Remove lists live files to retire (compaction, replacement of a
	// table's state). Each must be live in the version the change is based
	// on.
	Remove []FileRef
	// Checkpoints sets consumers' checkpoints; an empty value deletes one.
	Checkpoints map[string]string
}

// applyChange returns the manifest that results from ch on m, as version
// m.Version+1. m is not modified (copy on write).
func applyChange(m *Manifest, ch Change, now time.Time, commitID string) (*Manifest, error) {
	n := *m
	n.Version = m.Version + 1
	n.CommittedAt = now.UTC()
	n.CommitID = commitID
	n.Tables = maps.Clone(m.Tables)
	if n.Tables == nil {
		n.Tables = map[string]*TableState{}
	}
	touched := map[string]bool{} // tables cloned already
	table := func(name string) *TableState {
		ts := n.Tables[name]
		if touched[name] {
			return ts
		}
		touched[name] = true
		c := &TableState{Partitions: map[string][]DataFile{}}
		if ts != nil {
			*c = *ts
			c.Partitions = maps.Clone(ts.Partitions)
		}
		c.enc = nil // rebuilt below
		c.rootEnc = nil
		c.groups = maps.Clone(c.groups)
		c.dirty = maps.Clone(c.dirty)
		if c.dirty == nil {
			c.dirty = map[string]bool{}
		}
		n.Tables[name] = c
		return c
	}
	clonedPart := map[string]bool{}
	partition := func(ts *TableState, t, p string) []DataFile {
		k := t + "/" + p
		if !clonedPart[k] {
			clonedPart[k] = true
			ts.Partitions[p] = slices.Clone(ts.Partitions[p])
			ts.dirty[groupOf(p)] = true
		}
		return ts.Partitions[p]
	}
	if len(ch.Remove) > 0 {
		n.Retired = slices.Clone(m.Retired)
	}
	for _, r := range ch.Remove {
		ts := n.Tables[r.Table]
		if ts == nil {
			return nil, fmt.Errorf("%w: cannot remove %s: the manifest has no table %q", ErrInvalidChange, r, r.Table)
		}
		ts = table(r.Table)
		files := partition(ts, r.Table, r.Partition)
		i := slices.IndexFunc(files, func(f DataFile) bool { return f.Name == r.Name })
		if i < 0 {
			return nil, fmt.Errorf("%w: cannot remove %s: it is not live in version %d", ErrInvalidChange, r, m.Version)
		}
		files = slices.Delete(files, i, i+1)
		if len(files) == 0 {
			delete(ts.Partitions, r.Partition)
		} else {
			ts.Partitions[r.Partition] = files
		}
		n.Retired = append(n.Retired, RetiredFile{FileRef: r, At: now.UTC()})
	}
	for _, f := range ch.Add {
		if err := validatePartition(f.Partition); err != nil {
			return nil, fmt.Errorf("%w: cannot add %s: %w", ErrInvalidChange, f.Ref(), err)
		}
		if !tableNameRE.MatchString(f.Table) || !validFileName(f.Name) {
			return nil, fmt.Errorf("%w: cannot add %s: not a data file that Store.Write returned", ErrInvalidChange, f.Ref())
		}
		ts := table(f.Table)
		if f.def != nil {
			cols, err := schemaColumns(f.def.Schema)
			if err != nil {
				return nil, fmt.Errorf("%w: cannot add %s: %w", ErrInvalidChange, f.Ref(), err)
			}
			ts.Columns, ts.schema = cols, f.def.Schema
			ts.SortKey, ts.NoDictionary = slices.Clone(f.def.SortKey), slices.Clone(f.def.NoDictionary)
			ts.Key = slices.Clone(f.def.Key)
			ts.RowGroupRows = f.def.RowGroupRows
		} else if ts.schema == nil {
			return nil, fmt.Errorf("%w: cannot add %s: the manifest has no schema of table %q; add files that Store.Write returned", ErrInvalidChange, f.Ref(), f.Table)
		}
		files := partition(ts, f.Table, f.Partition)
		if slices.ContainsFunc(files, func(g DataFile) bool { return g.Name == f.Name }) {
			return nil, fmt.Errorf("%w: cannot add %s: it is live already", ErrInvalidChange, f.Ref())
		}
		f.def = nil
		ts.Partitions[f.Partition] = append(files, f)
	}
	for name := range touched {
		ts := n.Tables[name]
		if old := m.Tables[name]; old != nil {
			ts.enc = maps.Clone(old.enc)
		}
		if ts.enc == nil {
			ts.enc = map[string][]byte{}
		}
	}
	for k := range clonedPart {
		name, p, _ := strings.Cut(k, "/")
		ts := n.Tables[name]
		delete(ts.enc, p)
		files, ok := ts.Partitions[p]
		if !ok {
			continue
		}
		e, err := json.Marshal(files)
		if err != nil {
			return nil, fmt.Errorf("cannot encode partition %q of table %q: %w", p, name, err)
		}
		ts.enc[p] = e
	}
	if len(ch.Checkpoints) > 0 {
		n.Checkpoints = maps.Clone(m.Checkpoints)
		if n.Checkpoints == nil {
			n.Checkpoints = map[string]string{}
		}
		for k, v := range ch.Checkpoints {
			if err := validateCheckpointName(k); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidChange, err)
			}
			if v == "" {
				delete(n.Checkpoints, k)
			} else {
				n.Checkpoints[k] = v
			}
		}
	}
	return &n, nil
}

// liveFiles calls fn for every live file of m.
func (m *Manifest) liveFiles(fn func(DataFile)) {
	for _, ts := range m.Tables {
		for _, files := range ts.Partitions {
			for _, f := range files {
				fn(f)
			}
		}
	}
}

// sortedPartitions returns the partitions of ts in [from, to] (days,
// inclusive, empty bounds open) or exactly those listed, ascending.
func sortedPartitions(ts *TableState, from, to string, only []string) []string {
	var out []string
	if len(only) > 0 {
		for _, p := range only {
			if _, ok := ts.Partitions[p]; ok && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		sort.Strings(out)
		return out
	}
	for p := range ts.Partitions {
		if from == "" && to == "" {
			out = append(out, p)
			continue
		}
		if !isDay(p) || (from != "" && p < from) || (to != "" && p > to) {
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
