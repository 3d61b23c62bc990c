package rollups

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkManifestScale measures what a manifest costs as history grows:
// one project with 30 days of day partitions and one with 1,095 (three
// years), each across the three day-partitioned tables (events, visits,
// conversions) plus 16 bucket partitions of three bucketed tables (people,
// identities, segment_members), one live file per partition, on the
// local-directory store. Both projects are measured in the same loop, one
// after the other, so that the load of a shared machine hits both alike;
// "ratio" is the 1,095-day figure over the 30-day one (the target is under
// 2).
//
//   - commit: one commit that replaces the file of the newest day of
//     events and moves a checkpoint, by a Store that knows the manifest
//     (the processor's steady state). Every 16 commits, off the clock, the
//     retired lists are emptied as Collect would, so they do not grow.
//
//   - refresh: after such a commit (off the clock), a Reader that held the
//     version before takes the new one (the API's steady state).
//
//   - open: a new Reader (cold) takes a snapshot of the project: the
//     whole manifest, as callers get it from Snapshot.Manifest (and as
//     the reporting API took it before it read by period).
//
//   - open-period: a new Reader (cold) takes a root snapshot
//     (SnapshotRoot) and reads the partitions of the last 30 days of the
//     three day tables and all partitions of the three bucket tables
//     (Snapshot.Partitions), what the reporting API's first request for
//     a 30-day period reads of the manifest.
//
//     go test -run '^$' -bench ManifestScale -benchtime 200x ./rollups/
func BenchmarkManifestScale(b *testing.B) {
	bk := benchBucket(b)
	ctx := context.Background()
	sizes := []int{30, 1095}
	type project struct {
		id    string
		store *Store
		m     *Manifest
		last  DataFile // the newest day's file of events, replaced by each commit
	}
	projects := make([]*project, len(sizes))
	for i, days := range sizes {
		p := &project{id: fmt.Sprintf("scale-%d", days), store: benchStore(b, bk)}
		p.m, p.last = seedScaleProject(b, p.store, p.id, days)
		projects[i] = p
	}

	// commit replaces the newest events file of p and returns how long
	// the commit took.
	commit := func(b *testing.B, p *project, n int) time.Duration {
		g := p.last
		g.Name = newID(time.Now()) + parquetExt
		g.WrittenAt = time.Now()
		start := time.Now()
		m, err := p.store.Commit(ctx, Live(p.id), p.m.Version, Change{
			Add: []DataFile{g}, Remove: []FileRef{p.last.Ref()},
			Checkpoints: map[string]string{"processor": fmt.Sprint(n)},
		})
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		p.m, p.last = m, g
		if n%16 == 0 {
			p.m = dropRetired(b, p.store, p.id)
		}
		return took
	}

	b.Run("commit", func(b *testing.B) {
		took := make([]time.Duration, len(projects))
		n := 0
		for b.Loop() {
			n++
			for i, p := range projects {
				took[i] += commit(b, p, n)
			}
		}
		reportScale(b, "commit", sizes, took, n)
	})

	// refresh: a Reader that holds the version before one commit (of one
	// day) refreshes: what a long-running reader does after each commit.
	b.Run("refresh", func(b *testing.B) {
		took := make([]time.Duration, len(projects))
		readers := make([]*Reader, len(projects))
		for i, p := range projects {
			r, err := NewReader(bk, DefaultReaderConfig(), nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Refresh(ctx, p.id); err != nil {
				b.Fatal(err)
			}
			readers[i] = r
		}
		n := 0
		for b.Loop() {
			n++
			for i, p := range projects {
				commit(b, p, n)
				start := time.Now()
				sn, err := readers[i].Refresh(ctx, p.id)
				took[i] += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if sn.Manifest().Version != p.m.Version {
					b.Fatalf("refreshed to version %d of %s, want %d", sn.Manifest().Version, p.id, p.m.Version)
				}
			}
		}
		reportScale(b, "refresh", sizes, took, n)
	})

	b.Run("open", func(b *testing.B) {
		took := make([]time.Duration, len(projects))
		n := 0
		for b.Loop() {
			n++
			for i, p := range projects {
				start := time.Now()
				r, err := NewReader(bk, DefaultReaderConfig(), nil)
				if err != nil {
					b.Fatal(err)
				}
				sn, err := r.Snapshot(ctx, p.id)
				took[i] += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if sn.Manifest().Version != p.m.Version {
					b.Fatalf("opened version %d of %s, want %d", sn.Manifest().Version, p.id, p.m.Version)
				}
			}
		}
		reportScale(b, "open", sizes, took, n)
	})

	b.Run("open-period", func(b *testing.B) {
		took := make([]time.Duration, len(projects))
		from := scaleEnd.AddDate(0, 0, -29).Format(time.DateOnly)
		n := 0
		for b.Loop() {
			n++
			for i, p := range projects {
				start := time.Now()
				r, err := NewReader(bk, DefaultReaderConfig(), nil)
				if err != nil {
					b.Fatal(err)
				}
				sn, err := r.SnapshotRoot(ctx, p.id)
				if err != nil {
					b.Fatal(err)
				}
				parts := 0
				for _, t := range scaleDayTables {
					ps, err := sn.Partitions(ctx, t, from, "")
					if err != nil {
						b.Fatal(err)
					}
					parts += len(ps)
				}
				for _, t := range scaleBucketTables {
					ps, err := sn.Partitions(ctx, t, "", "")
					if err != nil {
						b.Fatal(err)
					}
					parts += len(ps)
				}
				took[i] += time.Since(start)
				if sn.Version() != p.m.Version || parts != 3*30+3*16 {
					b.Fatalf("opened version %d of %s with %d partitions, want %d and %d", sn.Version(), p.id, parts, p.m.Version, 3*30+3*16)
				}
			}
		}
		reportScale(b, "open-period", sizes, took, n)
	})
}

// scaleEnd is the newest day of BenchmarkManifestScale's projects.
var scaleEnd = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

// scaleTables are the tables of BenchmarkManifestScale: by day, and by
// bucket.
var (
	scaleDayTables    = []string{"events", "visits", "conversions"}
	scaleBucketTables = []string{"people", "identities", "segment_members"}
)

// seedScaleProject commits days of day partitions and 16 bucket partitions
// per table (one file each, the same data object under many names: a
// manifest does not read its files) and returns the manifest and the
// newest events file.
func seedScaleProject(b *testing.B, s *Store, project string, days int) (*Manifest, DataFile) {
	b.Helper()
	ctx := context.Background()
	rec := pageviewRecord(b, genPageviews(1, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), 100))
	defer rec.Release()
	end := scaleEnd
	var adds []DataFile
	var last DataFile
	add := func(table, partition string) DataFile {
		def := pageviewTable()
		def.Name = table
		f, err := s.Write(ctx, project, def, partition, rec)
		if err != nil {
			b.Fatal(err)
		}
		adds = append(adds, f)
		return f
	}
	for _, t := range scaleDayTables {
		for d := days - 1; d >= 0; d-- {
			f := add(t, end.AddDate(0, 0, -d).Format(time.DateOnly))
			if t == "events" && d == 0 {
				last = f
			}
		}
	}
	for _, t := range scaleBucketTables {
		for k := range 16 {
			add(t, fmt.Sprintf("b%02d", k))
		}
	}
	m, err := s.Commit(ctx, Live(project), 0, Change{Add: adds})
	if err != nil {
		b.Fatal(err)
	}
	return m, last
}

// dropRetired empties the retired lists (files and sub-manifests) of a
// project's live manifest, as Collect does once they are deleted.
func dropRetired(b *testing.B, s *Store, project string) *Manifest {
	b.Helper()
	m, err := s.update(context.Background(), Live(project), func(m *Manifest) (*Manifest, error) {
		n := *m
		n.Version, n.CommittedAt, n.CommitID = m.Version+1, time.Now().UTC(), newID(time.Now())
		n.Retired, n.retiredParts = nil, nil
		return &n, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func reportScale(b *testing.B, op string, sizes []int, took []time.Duration, n int) {
	for i, days := range sizes {
		b.ReportMetric(float64(took[i].Microseconds())/float64(n), fmt.Sprintf("µs/%s-%dd", op, days))
	}
	b.ReportMetric(float64(took[len(took)-1])/float64(took[0]), "ratio")
}
