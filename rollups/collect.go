package rollups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mfhq/mf/storage"
)

// CollectStats counts what one Collect did.
type CollectStats struct {
	// Retired counts retired files deleted after RetireGrace.
	Retired int
	// Orphans counts unreferenced files (of failed commits, aborted
	// generations, lost compaction races) deleted after OrphanGrace.
	Orphans int
	// Generations counts staged generations aborted as abandoned.
	Generations int
	// SubManifests counts sub-manifests that no root (live or staged)
	// lists, deleted after OrphanGrace: of lost commit races, replaced
	// groups, aborted generations.
	SubManifests int
}

// Collect deletes the data files of project that no manifest needs any
// more: files retired more than RetireGrace ago, and files that no
// manifest references and that were written more than OrphanGrace ago;
// and the sub-manifests that no root lists, written more than
// OrphanGrace ago.
// Staged generations without a commit for StagingExpiry are aborted first.
// It is safe to run beside writers, readers and other collectors.
//
// The order matters: staged manifests are read before the live one, so a
// promotion in between cannot hide its files (they are in the staged
// manifest read, or in the live one read after it).
func (s *Store) Collect(ctx context.Context, project string) (CollectStats, error) {
	return s.collect(ctx, project, s.cfg.RetireGrace, time.Time{})
}

// CollectRetired is Collect without the grace for retired files: every file
// the live manifest no longer lists is deleted now (an erasure: no
// superseded file may keep a row it removed). A reader still scanning an
// older snapshot then fails and reads again.
func (s *Store) CollectRetired(ctx context.Context, project string) (CollectStats, error) {
	return s.collect(ctx, project, -1, time.Time{})
}

// CollectPurge is CollectRetired that also deletes, whatever their age,
// the unreferenced files written before orphansBefore (by the store's
// clock): those of a writer that crashed between writing and committing
// (an erasure's commit, possibly). The caller knows that no writer of
// the project can still commit files written before then (it holds the
// project's lease since). While a staged generation exists (a replay
// writes), orphans keep their grace: its files are unreferenced until it
// commits.
func (s *Store) CollectPurge(ctx context.Context, project string, orphansBefore time.Time) (CollectStats, error) {
	return s.collect(ctx, project, -1, orphansBefore)
}

func (s *Store) collect(ctx context.Context, project string, grace time.Duration, orphansBefore time.Time) (CollectStats, error) {
	var st CollectStats
	if err := validateProject(project); err != nil {
		return st, err
	}
	now := s.now()
	staged, infos, err := s.readStaging(ctx, project)
	if err != nil {
		return st, fmt.Errorf("cannot collect project %q: %w", project, err)
	}
	for i := 0; i < len(staged); i++ {
		if now.Sub(infos[i].LastModified) <= s.cfg.StagingExpiry {
			continue
		}
		t := Target{Project: project, Staging: staged[i].Staging}
		if err := s.AbortGeneration(ctx, t); err != nil {
			return st, fmt.Errorf("cannot collect project %q: %w", project, err)
		}
		s.logger.Warn("rollups: aborted an abandoned staged generation", "project", project, "generation", t.Staging, "last_commit", infos[i].LastModified)
		st.Generations++
		staged = slices.Delete(staged, i, i+1)
		infos = slices.Delete(infos, i, i+1)
		i--
	}
	if len(staged) > 0 {
		orphansBefore = time.Time{}
	}
	live, err := s.Load(ctx, Live(project))
	if err != nil {
		return st, fmt.Errorf("cannot collect project %q: %w", project, err)
	}
	manifests := append([]*Manifest{live}, staged...)

	protected := map[string]bool{} // live somewhere, or retired within the grace
	expired := map[string]bool{}   // retired longer ago than the grace
	listed := map[string]bool{}    // sub-manifests some root lists
	oldParts := map[string]bool{}  // sub-manifests retired longer ago than the grace
	for _, m := range manifests {
		for name, ts := range m.Tables {
			for _, g := range ts.groups {
				listed[s.layout.parts(project, name, g.Object)] = true
			}
		}
		for _, r := range m.retiredParts {
			if now.Sub(r.At) > grace {
				oldParts[s.layout.parts(project, r.Table, r.Object)] = true
			}
		}
		m.liveFiles(func(f DataFile) { protected[f.Ref().String()] = true })
		for _, r := range m.Retired {
			if now.Sub(r.At) <= grace {
				protected[r.FileRef.String()] = true
			} else {
				expired[r.FileRef.String()] = true
			}
		}
	}
	var doomed []string
	var orphans int
	err = s.bucket.List(ctx, s.layout.dataPrefix(project), func(o storage.ObjectInfo) error {
		ref, ok := s.layout.parseFileKey(project, o.Key)
		if !ok || protected[ref.String()] {
			return nil // not ours to judge, or needed
		}
		switch {
		case expired[ref.String()]:
			doomed = append(doomed, o.Key)
		case now.Sub(o.LastModified) > s.cfg.OrphanGrace || o.LastModified.Before(orphansBefore):
			doomed = append(doomed, o.Key)
			orphans++
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("cannot list data files of project %q: %w", project, err)
	}
	for _, k := range doomed {
		if err := s.bucket.Delete(ctx, k); err != nil {
			return st, fmt.Errorf("cannot delete data file %q: %w", k, err)
		}
	}
	st.Orphans = orphans
	st.Retired = len(doomed) - orphans
	if st.SubManifests, err = s.collectParts(ctx, project, listed, oldParts, now, orphansBefore); err != nil {
		return st, err
	}

	// Forget the expired retired entries, all of which are deleted now or
	// are live in another manifest.
	for _, m := range manifests {
		t := Target{Project: project, Staging: m.Staging}
		_, err := s.update(ctx, t, func(m *Manifest) (*Manifest, error) {
			keep := slices.DeleteFunc(slices.Clone(m.Retired), func(r RetiredFile) bool { return expired[r.FileRef.String()] })
			keepParts := slices.DeleteFunc(slices.Clone(m.retiredParts), func(r retiredPart) bool {
				return oldParts[s.layout.parts(project, r.Table, r.Object)]
			})
			if len(keep) == len(m.Retired) && len(keepParts) == len(m.retiredParts) {
				return nil, nil
			}
			n := *m
			n.Version, n.CommittedAt, n.CommitID = m.Version+1, s.now().UTC(), newID(s.now())
			n.Retired, n.retiredParts = keep, keepParts
			return &n, nil
		})
		if err != nil && !errors.Is(err, ErrGenerationGone) {
			return st, fmt.Errorf("cannot forget deleted files of %s: %w", t, err)
		}
	}
	if st.Retired+st.Orphans+st.Generations+st.SubManifests > 0 {
		s.logger.Info("rollups: collected files", "project", project, "retired", st.Retired, "orphans", st.Orphans, "generations", st.Generations, "sub_manifests", st.SubManifests)
	}
	s.cfg.Metrics.collected(st)
	return st, nil
}

// collectParts deletes the sub-manifests of project that no root lists
// (listed, from roots read before the listing) and that a root retired
// longer ago than the grace (retired), or that were written more than
// OrphanGrace ago (or before orphansBefore). A sub-manifest is written
// just before the root that lists it, so an unretired one younger than
// the grace may belong to a commit under way.
func (s *Store) collectParts(ctx context.Context, project string, listed, retired map[string]bool, now, orphansBefore time.Time) (int, error) {
	var doomed []string
	err := s.bucket.List(ctx, s.layout.partsPrefix(project), func(o storage.ObjectInfo) error {
		if _, _, ok := s.layout.parsePartsKey(project, o.Key); !ok || listed[o.Key] {
			return nil
		}
		if retired[o.Key] || now.Sub(o.LastModified) > s.cfg.OrphanGrace || o.LastModified.Before(orphansBefore) {
			doomed = append(doomed, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot list sub-manifests of project %q: %w", project, err)
	}
	for _, k := range doomed {
		if err := s.bucket.Delete(ctx, k); err != nil {
			return 0, fmt.Errorf("cannot delete sub-manifest %q: %w", k, err)
		}
	}
	return len(doomed), nil
}
