package rollups

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
)

// countingBucket is a real bucket that records the keys of the objects
// read whole (Get).
type countingBucket struct {
	storage.Bucket
	mu   sync.Mutex
	gets []string
}

func (c *countingBucket) Get(ctx context.Context, key string) (*storage.Object, error) {
	c.mu.Lock()
	c.gets = append(c.gets, key)
	c.mu.Unlock()
	return c.Bucket.Get(ctx, key)
}

// take returns the keys read since the last call, sorted, that start
// with prefix.
func (c *countingBucket) take(prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, k := range c.gets {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	c.gets = nil
	slices.Sort(out)
	return out
}

// groupKeys returns the sub-manifest keys of the groups of table in m (as
// the committer wrote them) that hold a day of days.
func groupKeys(l layout, m *Manifest, table string, days []string) []string {
	ts := m.Tables[table]
	keys := map[string]bool{}
	for _, d := range days {
		if g, ok := ts.groups[d[:7]]; ok {
			keys[l.parts(m.Project, table, g.Object)] = true
		}
	}
	return slices.Sorted(maps.Keys(keys))
}

// TestColdOpenReadsThePeriod: a cold reader's root snapshot reads the
// root only; asking for a 30-day period of a table with 100 days of
// history fetches exactly the sub-manifests of the months that hold those
// days, once, and reads the same files and rows as a whole snapshot; an
// older day fetches its own month; the whole manifest fetches the rest;
// after a commit of one day, a refreshed snapshot fetches only the group
// that changed.
func TestColdOpenReadsThePeriod(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	s := newStore(t, b, nil)
	end := mustUTCDay(t, "2026-11-26")
	var adds []DataFile
	rowsOf := map[string][]pageview{}
	var days []string
	for d := 99; d >= 0; d-- {
		day := end.AddDate(0, 0, -d)
		name := day.Format(time.DateOnly)
		rows := genPageviews(uint64(100-d), day, 3)
		rowsOf[name] = rows
		days = append(days, name)
		adds = append(adds, writeRows(t, s, testProject, name, rows))
	}
	archive := pageviewTable()
	archive.Name = "archive"
	rec := pageviewRecord(t, genPageviews(7, end, 2))
	af, err := s.Write(ctx, testProject, archive, "all", rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: append(adds, af)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Tables["pageviews"].groups); n != 4 {
		t.Fatalf("100 days make %d groups, want 4 (Aug to Nov)", n)
	}
	parts := s.layout.partsPrefix(testProject)
	root := s.layout.manifest(testProject)

	cb := &countingBucket{Bucket: b}
	r := newReader(t, cb, nil)
	sn, err := r.SnapshotRoot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if got := cb.take(""); !slices.Equal(got, []string{root}) {
		t.Fatalf("a cold root snapshot read %v, want the root %s only", got, root)
	}
	if sn.Manifest() != nil || sn.Version() != m.Version || sn.Project() != testProject {
		t.Fatalf("root snapshot: manifest %v, version %d, project %q", sn.Manifest() != nil, sn.Version(), sn.Project())
	}
	if gs := sn.Groups("pageviews"); len(gs) != 4 || gs[3].ID != "2026-11" || gs[3].To != "2026-11-26" || gs[0].From != days[0] {
		t.Fatalf("groups %+v", gs)
	}

	period := days[len(days)-30:]
	ps, err := sn.Partitions(ctx, "pageviews", period[0], period[len(period)-1])
	if err != nil {
		t.Fatal(err)
	}
	want := groupKeys(s.layout, m, "pageviews", period)
	if got := cb.take(parts); len(want) != 2 || !slices.Equal(got, want) {
		t.Fatalf("30 days fetched sub-manifests %v, want %v (their two months)", got, want)
	}
	if len(ps) != 30 {
		t.Fatalf("%d partitions in the period, want 30", len(ps))
	}
	for i, p := range ps {
		if p.Name != period[i] || !slices.Equal(fileNames(p.Files), fileNames(m.Files("pageviews", p.Name))) {
			t.Fatalf("partition %d: %s %v, want %s %v", i, p.Name, fileNames(p.Files), period[i], fileNames(m.Files("pageviews", period[i])))
		}
	}
	var wantRows []pageview
	for _, d := range period {
		wantRows = append(wantRows, rowsOf[d]...)
	}
	sameRows(t, "the period", scanRows(t, sn, ScanOptions{From: period[0], To: period[len(period)-1]}), wantRows)
	if got := cb.take(parts); len(got) != 0 {
		t.Fatalf("a scan of the period fetched sub-manifests %v again", got)
	}

	// An older day: its month only.
	old := days[5]
	sameRows(t, "an older day", scanRows(t, sn, ScanOptions{Partitions: []string{old}}), rowsOf[old])
	if got, want := cb.take(parts), groupKeys(s.layout, m, "pageviews", []string{old}); !slices.Equal(got, want) {
		t.Fatalf("a day of %s fetched %v, want %v", old[:7], got, want)
	}

	// The whole manifest: the groups not fetched yet, once.
	whole, err := sn.Whole(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fileKeys(whole), fileKeys(m)) {
		t.Fatalf("whole manifest %v, want %v", fileKeys(whole), fileKeys(m))
	}
	if got := cb.take(parts); len(got) != 2 {
		t.Fatalf("the whole manifest fetched %v, want the 2 groups not fetched before (a month and the archive's labels)", got)
	}
	if st := r.Stats(); st.SubManifestGets != 5 || st.ManifestGets != 1 {
		t.Fatalf("stats %+v, want 1 root and 5 sub-manifests", st)
	}

	// A commit of the newest day; a second cold reader holds the period
	// and refreshes: the changed group only.
	r2 := newReader(t, cb, nil)
	sn2, err := r2.SnapshotRoot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sn2.Partitions(ctx, "pageviews", period[0], ""); err != nil {
		t.Fatal(err)
	}
	cb.take("")
	last := days[len(days)-1]
	more := genPageviews(500, end, 4)
	m, err = s.Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{writeRows(t, s, testProject, last, more)}})
	if err != nil {
		t.Fatal(err)
	}
	sn2, err = r2.RefreshRoot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	ps, err = sn2.Partitions(ctx, "pageviews", period[0], "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cb.take(parts), groupKeys(s.layout, m, "pageviews", []string{last}); !slices.Equal(got, want) {
		t.Fatalf("the refresh fetched %v, want the changed group %v", got, want)
	}
	if got := ps[len(ps)-1]; got.Name != last || !slices.Equal(fileNames(got.Files), fileNames(m.Files("pageviews", last))) {
		t.Fatalf("newest partition after the commit: %s %v, want %v", got.Name, fileNames(got.Files), fileNames(m.Files("pageviews", last)))
	}
	sameRows(t, "the newest day after the commit", scanRows(t, sn2, ScanOptions{Partitions: []string{last}}), append(slices.Clone(rowsOf[last]), more...))

	// Snapshot (whole) on the same reader: the groups it still lacks.
	full, err := r2.Snapshot(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if full.Manifest() == nil || !slices.Equal(fileKeys(full.Manifest()), fileKeys(m)) {
		t.Fatal("the whole snapshot after root ones differs from the store's manifest")
	}
	if got := cb.take(parts); len(got) != 3 {
		t.Fatalf("the whole snapshot fetched %v, want the 3 groups the period did not need", got)
	}
}

func fileNames(fs []DataFile) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// TestRootSnapshotsShareGroups: readers' calls on root snapshots at
// once (ranges, scans, whole manifests, refreshes) fetch each group
// once and see the store's files.
func TestRootSnapshotsShareGroups(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	s := newStore(t, b, nil)
	end := mustUTCDay(t, "2026-11-26")
	var adds []DataFile
	var days []string
	for d := 89; d >= 0; d-- {
		day := end.AddDate(0, 0, -d)
		days = append(days, day.Format(time.DateOnly))
		adds = append(adds, writeRows(t, s, testProject, days[len(days)-1], genPageviews(uint64(d+1), day, 2)))
	}
	m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: adds})
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sn, err := r.SnapshotRoot(ctx, testProject)
			if err != nil {
				errs <- err
				return
			}
			from, to := days[(g*7)%len(days)], days[min(len(days)-1, (g*7)%len(days)+20)]
			switch g % 4 {
			case 0:
				ps, err := sn.Partitions(ctx, "pageviews", from, to)
				if err == nil && (len(ps) == 0 || ps[0].Name != from || ps[len(ps)-1].Name != to) {
					err = fmt.Errorf("partitions [%s, %s]: got %d, not from the first to the last", from, to, len(ps))
				}
				errs <- err
			case 1:
				n := 0
				err := sn.Scan(ctx, "pageviews", ScanOptions{From: from, To: to, Columns: []string{"time"}}, func(bt Batch) error {
					n += int(bt.Record.NumRows())
					return nil
				})
				if err == nil && n == 0 {
					err = fmt.Errorf("scan [%s, %s] read no row", from, to)
				}
				errs <- err
			case 2:
				w, err := sn.Whole(ctx)
				if err == nil && !slices.Equal(fileKeys(w), fileKeys(m)) {
					err = fmt.Errorf("whole manifest differs from the store's")
				}
				errs <- err
			case 3:
				full, err := r.Refresh(ctx, testProject)
				if err == nil && !slices.Equal(fileKeys(full.Manifest()), fileKeys(m)) {
					err = fmt.Errorf("refreshed manifest differs from the store's")
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if st := r.Stats(); st.SubManifestGets != int64(len(m.Tables["pageviews"].groups)) || st.ManifestGets != 1 {
		t.Fatalf("%d roots and %d sub-manifests fetched, want 1 and %d (each once)", st.ManifestGets, st.SubManifestGets, len(m.Tables["pageviews"].groups))
	}
}
