package rollups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mfhq/mf/storage"
)

// Generations let a project's tables be rebuilt (mf replay) while readers
// go on reading the old ones. StartGeneration stages a new, empty (or
// partly seeded) manifest beside the live one; the rebuild commits into it
// like into the live manifest (Commit, Update and Compact with its
// Target); Promote then makes it the live manifest in one conditional put.
// Readers see the old tables until that put and the new ones after it,
// never a mix. Files of the old generation that the new one does not keep
// are retired and deleted after RetireGrace.

// GenerationOptions choose what a new generation starts with.
type GenerationOptions struct {
	// Keep, when not nil, is asked about every partition of every table of
	// the live manifest; the files of partitions it keeps are part of the
	// new generation from the start (for a rebuild from a day on: keep the
	// days before it). Nil keeps nothing: the new generation starts empty.
	Keep func(table, partition string) bool
	// Checkpoints are the new generation's first checkpoints.
	Checkpoints map[string]string
}

// StartGeneration stages a new generation of project's tables and returns
// its target, whose manifest is at version 1. Several may be staged at
// once; each is independent until one is promoted.
func (s *Store) StartGeneration(ctx context.Context, project string, opts GenerationOptions) (Target, error) {
	live, err := s.Load(ctx, Live(project))
	if err != nil {
		return Target{}, fmt.Errorf("cannot start a generation of project %q: %w", project, err)
	}
	now := s.now()
	target := Target{Project: project, Staging: newID(now)}
	m := emptyManifest(target)
	if opts.Keep != nil {
		for name, ts := range live.Tables {
			kept := &TableState{SortKey: ts.SortKey, NoDictionary: ts.NoDictionary, Key: ts.Key, RowGroupRows: ts.RowGroupRows, Columns: ts.Columns, schema: ts.schema, Partitions: map[string][]DataFile{}}
			for part, files := range ts.Partitions {
				if opts.Keep(name, part) {
					kept.Partitions[part] = slices.Clone(files)
				}
			}
			if len(kept.Partitions) > 0 {
				m.Tables[name] = kept
			}
		}
	}
	next, err := applyChange(m, Change{Checkpoints: opts.Checkpoints}, now, newID(now))
	if err != nil {
		return Target{}, fmt.Errorf("cannot start a generation of project %q: %w", project, err)
	}
	if _, err := s.put(ctx, target, knownManifest{m: m}, next); err != nil {
		return Target{}, fmt.Errorf("cannot start a generation of project %q: %w", project, err)
	}
	s.logger.Info("rollups: staged a new generation", "project", project, "generation", target.Staging, "live_version", live.Version)
	return target, nil
}

// Generations lists the staged generations of project.
func (s *Store) Generations(ctx context.Context, project string) ([]Target, error) {
	if err := validateProject(project); err != nil {
		return nil, err
	}
	var out []Target
	prefix := s.layout.stagingPrefix(project)
	err := s.bucket.List(ctx, prefix, func(o storage.ObjectInfo) error {
		id, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), manifestExt)
		if ok && validateGeneration(id) == nil {
			out = append(out, Target{Project: project, Staging: id})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list staged generations of project %q: %w", project, err)
	}
	return out, nil
}

// AbortGeneration drops a staged generation. Its own files become
// orphans, collected after OrphanGrace.
func (s *Store) AbortGeneration(ctx context.Context, staged Target) error {
	if staged.Staging == "" {
		return fmt.Errorf("%w: AbortGeneration needs a staged generation, not the live manifest", ErrInvalidName)
	}
	if err := staged.validate(); err != nil {
		return err
	}
	s.forget(staged)
	if err := s.bucket.Delete(ctx, s.layout.target(staged)); err != nil {
		return fmt.Errorf("cannot abort %s: %w", staged, err)
	}
	return nil
}

// PromoteOptions control how a staged generation replaces the live one.
type PromoteOptions struct {
	// ExpectLive, when not AnyVersion, is the live version the promotion
	// was prepared against (0: no live manifest yet); if the live manifest
	// moved on, Promote fails with ErrConflict and changes nothing. With
	// AnyVersion, Promote retries against whatever version is live.
	ExpectLive int64
	// CarryTables names tables taken from the live manifest as they are at
	// the moment of promotion, instead of from the staged generation (the
	// raw-event archive that a rebuild reads but does not write).
	CarryTables []string
	// CarryCheckpoints names checkpoints taken from the live manifest
	// instead of from the staged generation.
	CarryCheckpoints []string
}

// AnyVersion in PromoteOptions.ExpectLive promotes over any live version.
const AnyVersion int64 = -1

// Promote makes a staged generation the live manifest of its project, as
// the next live version and the next generation, in one conditional put.
// Stop committing to the staged generation first. Live files that the new
// generation does not hold are retired. The staged manifest is removed.
func (s *Store) Promote(ctx context.Context, staged Target, opts PromoteOptions) (*Manifest, error) {
	if staged.Staging == "" {
		return nil, fmt.Errorf("%w: Promote needs a staged generation, not the live manifest", ErrInvalidName)
	}
	if err := staged.validate(); err != nil {
		return nil, err
	}
	st, err := s.fetch(ctx, staged)
	if err != nil {
		return nil, fmt.Errorf("cannot promote %s: %w", staged, err)
	}
	mutate := func(live *Manifest) (*Manifest, error) {
		return promoted(live, st.m, opts, s.now(), newID(s.now()))
	}
	live := Live(staged.Project)
	var m *Manifest
	if opts.ExpectLive == AnyVersion {
		m, err = s.update(ctx, live, mutate)
	} else {
		m, err = s.commit(ctx, live, opts.ExpectLive, mutate)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot promote %s: %w", staged, err)
	}
	if err := s.AbortGeneration(ctx, staged); err != nil {
		// The promotion holds; the leftover staged manifest only keeps its
		// files from collection until it expires.
		s.logger.Warn("rollups: cannot remove promoted staged manifest", "generation", staged.Staging, "err", err)
	}
	s.logger.Info("rollups: promoted a generation", "project", staged.Project, "generation", m.Generation, "version", m.Version)
	return m, nil
}

// promoted builds the live manifest that replaces live with the staged
// manifest st.
func promoted(live, st *Manifest, opts PromoteOptions, now time.Time, commitID string) (*Manifest, error) {
	n := &Manifest{
		Format:      manifestFormat,
		Project:     live.Project,
		Generation:  live.Generation + 1,
		Version:     live.Version + 1,
		CommittedAt: now.UTC(),
		CommitID:    commitID,
		Tables:      maps.Clone(st.Tables),
		Checkpoints: maps.Clone(st.Checkpoints),
	}
	if n.Tables == nil {
		n.Tables = map[string]*TableState{}
	}
	for _, t := range opts.CarryTables {
		if ts, ok := live.Tables[t]; ok {
			n.Tables[t] = ts
		} else {
			delete(n.Tables, t)
		}
	}
	for _, c := range opts.CarryCheckpoints {
		if n.Checkpoints == nil {
			n.Checkpoints = map[string]string{}
		}
		if v, ok := live.Checkpoints[c]; ok {
			n.Checkpoints[c] = v
		} else {
			delete(n.Checkpoints, c)
		}
	}
	keep := map[string]bool{}
	n.liveFiles(func(f DataFile) { keep[f.Ref().String()] = true })
	n.Retired = slices.Clone(live.Retired)
	for _, r := range st.Retired {
		if !keep[r.FileRef.String()] {
			n.Retired = append(n.Retired, r)
		}
	}
	live.liveFiles(func(f DataFile) {
		if !keep[f.Ref().String()] {
			n.Retired = append(n.Retired, RetiredFile{FileRef: f.Ref(), At: now.UTC()})
		}
	})
	// Sub-manifests: the live ones the new generation does not name are
	// retired; so are those the staged generation retired.
	listed := map[string]bool{}
	for name, ts := range n.Tables {
		for _, g := range ts.groups {
			listed[name+"/"+g.Object] = true
		}
	}
	n.retiredParts = slices.Concat(live.retiredParts, st.retiredParts)
	for name, ts := range live.Tables {
		for _, g := range ts.groups {
			if !listed[name+"/"+g.Object] {
				n.retiredParts = append(n.retiredParts, retiredPart{Table: name, Object: g.Object, At: now.UTC()})
			}
		}
	}
	return n, nil
}

// errStagingCorrupt is returned when a staged manifest cannot be read while
// collecting; kept apart so Collect can skip it.
var errStagingCorrupt = errors.New("staged manifest unreadable")

// readStaging reads every staged manifest of project.
func (s *Store) readStaging(ctx context.Context, project string) ([]*Manifest, []storage.ObjectInfo, error) {
	var infos []storage.ObjectInfo
	prefix := s.layout.stagingPrefix(project)
	if err := s.bucket.List(ctx, prefix, func(o storage.ObjectInfo) error {
		infos = append(infos, o)
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("cannot list staged generations of project %q: %w", project, err)
	}
	var out []*Manifest
	var kept []storage.ObjectInfo
	for _, o := range infos {
		id, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), manifestExt)
		if !ok || validateGeneration(id) != nil {
			continue
		}
		t := Target{Project: project, Staging: id}
		s.mu.Lock()
		prev := s.known[t].m
		s.mu.Unlock()
		m, _, err := s.source().load(ctx, t, prev)
		if errors.Is(err, storage.ErrNotFound) {
			continue // promoted or aborted meanwhile
		}
		if errors.Is(err, ErrCorruptManifest) {
			return nil, nil, fmt.Errorf("%w: %q: %w", errStagingCorrupt, o.Key, err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cannot read staged manifest %q: %w", o.Key, err)
		}
		out = append(out, m)
		kept = append(kept, o)
	}
	return out, kept, nil
}
