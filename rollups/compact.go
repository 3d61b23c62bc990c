package rollups

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// compactTierBase is the size of the smallest compaction tier: files up to
// it are all in tier 0.
const compactTierBase = 64 << 10

// CompactStats counts what one Compact did.
type CompactStats struct {
	// Merges counts merged groups committed; Inputs the files they
	// replaced; Rows the rows rewritten.
	Merges, Inputs int
	Rows           int64
	// Lost counts merges dropped because a concurrent commit removed one
	// of their inputs first; their output is left to Collect.
	Lost int
	// Partial counts the committed merges of keyed tables that took part
	// of a partition's files (and so kept its deletions).
	Partial int
	// PeakBytes is the most Arrow memory one merge held at once (decoded
	// batches, the row group being built, the encoder's pages): a merge
	// streams, so this follows the number of inputs and the row group
	// size, not the size of the files.
	PeakBytes int64
	// MaxInputs is the most files one merge read (at most
	// Config.CompactMaxFiles).
	MaxInputs int
}

// Compact merges small data files of every table and partition of target
// into larger ones, keeping each file sorted by the table's sort key, and
// commits the result like any change (retrying when other commits race
// it; checkpoints are untouched). The replaced files are retired. Which
// files merge is decided by Config: CompactMinFiles files of one size tier,
// or all small files of a partition quiet for CompactQuietAfter.
func (s *Store) Compact(ctx context.Context, target Target) (CompactStats, error) {
	return s.compact(ctx, target, func(name string, def *Table, part string, files []DataFile) [][]DataFile {
		if len(def.Key) > 0 {
			return s.pickKeyedMerges(files)
		}
		return s.pickMerges(files)
	})
}

// CompactWhole rewrites each partition named in parts (table name to
// partition names) into files of its live rows alone, however few and
// recent its files are: a keyed partition loses its deletions and the
// rows they or newer revs hide. An erasure runs it on every partition it
// changed, so that no live file still holds a row it removed (the old
// files are retired: CollectRetired deletes them).
func (s *Store) CompactWhole(ctx context.Context, target Target, parts map[string][]string) (CompactStats, error) {
	return s.compact(ctx, target, func(name string, def *Table, part string, files []DataFile) [][]DataFile {
		if len(files) > 0 && slices.Contains(parts[name], part) {
			return [][]DataFile{files}
		}
		return nil
	})
}

func (s *Store) compact(ctx context.Context, target Target, pick func(name string, def *Table, part string, files []DataFile) [][]DataFile) (CompactStats, error) {
	var st CompactStats
	m, err := s.Load(ctx, target)
	if err != nil {
		return st, fmt.Errorf("cannot compact %s: %w", target, err)
	}
	type merge struct {
		inputs  []DataFile
		output  []DataFile
		partial bool
	}
	var merges []merge
	defer func() {
		// Outputs of merges not committed are orphans: remove them now
		// rather than wait for Collect (best effort).
		for _, mg := range merges {
			for _, f := range mg.output {
				if f.def != nil {
					_ = s.bucket.Delete(context.WithoutCancel(ctx), s.layout.file(target.Project, f.Ref()))
				}
			}
		}
	}()
	for _, name := range slices.Sorted(maps.Keys(m.Tables)) {
		ts := m.Tables[name]
		def := ts.Definition(name)
		for _, part := range ts.PartitionNames() {
			files := ts.Partitions[part]
			groups := pick(name, def, part, files)
			for _, group := range groups {
				out, peak, err := s.mergeFiles(ctx, target.Project, def, part, group, len(group) == len(files))
				st.PeakBytes = max(st.PeakBytes, peak)
				st.MaxInputs = max(st.MaxInputs, len(group))
				if err != nil {
					return st, fmt.Errorf("cannot compact %s table %q partition %q: %w", target, name, part, err)
				}
				merges = append(merges, merge{inputs: group, output: out, partial: len(def.Key) > 0 && len(group) < len(files)})
			}
		}
	}
	if len(merges) == 0 {
		return st, nil
	}
	var applied []int
	_, err = s.update(ctx, target, func(m *Manifest) (*Manifest, error) {
		applied = applied[:0]
		var ch Change
		for i, mg := range merges {
			live := true
			for _, f := range mg.inputs {
				if !slices.ContainsFunc(m.Files(f.Table, f.Partition), func(g DataFile) bool { return g.Name == f.Name }) {
					live = false
					break
				}
			}
			if !live {
				continue
			}
			applied = append(applied, i)
			ch.Add = append(ch.Add, mg.output...)
			for _, f := range mg.inputs {
				ch.Remove = append(ch.Remove, f.Ref())
			}
		}
		if len(applied) == 0 {
			return nil, nil
		}
		return applyChange(m, ch, s.now(), newID(s.now()))
	})
	if err != nil {
		return st, fmt.Errorf("cannot commit compaction of %s: %w", target, err)
	}
	for _, i := range applied {
		mg := merges[i]
		st.Merges++
		st.Inputs += len(mg.inputs)
		if mg.partial {
			st.Partial++
		}
		for _, f := range mg.output {
			st.Rows += f.Rows
		}
		merges[i].output = nil // committed: keep
	}
	st.Lost = len(merges) - len(applied)
	if st.Merges > 0 {
		s.logger.Debug("rollups: compacted", "target", target.String(), "merges", st.Merges, "inputs", st.Inputs, "rows", st.Rows, "lost", st.Lost)
	}
	s.cfg.Metrics.compacted(st)
	return st, nil
}

// pickMerges chooses groups of files of one partition to merge.
func (s *Store) pickMerges(files []DataFile) [][]DataFile {
	var small []DataFile
	var newest DataFile
	for _, f := range files {
		if f.WrittenAt.After(newest.WrittenAt) {
			newest = f
		}
		if f.Bytes < s.cfg.CompactTargetBytes {
			small = append(small, f)
		}
	}
	if len(small) < 2 {
		return nil
	}
	quiet := s.now().Sub(newest.WrittenAt) >= s.cfg.CompactQuietAfter
	if quiet {
		return s.packGroups(small, 2)
	}
	tiers := map[int][]DataFile{}
	for _, f := range small {
		t := tier(f.Bytes, s.cfg.CompactMinFiles)
		tiers[t] = append(tiers[t], f)
	}
	var groups [][]DataFile
	for _, t := range slices.Sorted(maps.Keys(tiers)) {
		if len(tiers[t]) >= s.cfg.CompactMinFiles {
			groups = append(groups, s.packGroups(tiers[t], s.cfg.CompactMinFiles)...)
		}
	}
	return groups
}

// pickKeyedMerges chooses groups of files of one partition of a keyed
// table to merge: the size tiers of pickMerges, whose merges keep the
// deleted rows (a deletion may stand for a row of a file outside the
// group), and, once the partition has been quiet for CompactQuietAfter,
// all its files, large ones too, merged to its live rows without
// deletions. Small files of changes thus merge cheaply among themselves,
// and the whole partition, its large files included, is rewritten once
// it has settled rather than each time changes pile up. Files committed
// while a merge runs stay beside its output and, with higher revs, win.
func (s *Store) pickKeyedMerges(files []DataFile) [][]DataFile {
	if len(files) < 2 {
		return nil
	}
	var newest time.Time
	for _, f := range files {
		if f.WrittenAt.After(newest) {
			newest = f.WrittenAt
		}
	}
	if s.now().Sub(newest) >= s.cfg.CompactQuietAfter {
		if len(files) <= s.cfg.CompactMaxFiles {
			return [][]DataFile{files}
		}
		// Too many for one merge: merged in rounds, each keeping the
		// deletions, until few enough remain to merge whole.
		return s.packGroups(files, 2)
	}
	return s.pickMerges(files)
}

// packGroups cuts files (in commit order) into groups whose sizes add up
// to at most CompactTargetBytes and of at most CompactMaxFiles files,
// keeping groups of at least minFiles.
func (s *Store) packGroups(files []DataFile, minFiles int) [][]DataFile {
	var groups [][]DataFile
	var cur []DataFile
	var size int64
	for _, f := range files {
		if len(cur) > 0 && (size+f.Bytes > s.cfg.CompactTargetBytes || len(cur) == s.cfg.CompactMaxFiles) {
			if len(cur) >= minFiles {
				groups = append(groups, cur)
			}
			cur, size = nil, 0
		}
		cur = append(cur, f)
		size += f.Bytes
	}
	if len(cur) >= minFiles {
		groups = append(groups, cur)
	}
	return groups
}

// tier is the size class of a file: files within a factor of minFiles of
// each other share a tier.
func tier(size int64, minFiles int) int {
	if size <= compactTierBase {
		return 0
	}
	return int(math.Log(float64(size)/compactTierBase) / math.Log(float64(minFiles)))
}
