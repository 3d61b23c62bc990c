package rollups

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
)

// partsObjects lists the sub-manifest keys of project in b.
func partsObjects(t *testing.T, b storage.BucketReader, l layout, project string) []string {
	t.Helper()
	var keys []string
	err := b.List(context.WithoutCancel(t.Context()), l.partsPrefix(project), func(o storage.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// listedParts returns the sub-manifest keys m's root lists, sorted.
func listedParts(l layout, m *Manifest) []string {
	var keys []string
	for name, ts := range m.Tables {
		for _, g := range ts.groups {
			keys = append(keys, l.parts(m.Project, name, g.Object))
		}
	}
	slices.Sort(keys)
	return keys
}

// rootFormat reads the format of the root object at key.
func rootFormat(t *testing.T, b storage.BucketReader, key string) string {
	t.Helper()
	data, _, err := storage.ReadAll(t.Context(), b, key)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Format string }
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	return h.Format
}

// testSplitCommits: commits to days of several months write the
// sub-manifests of the months they change and the root; a reader that
// refreshes fetches only the sub-manifests it has not seen, shares the
// states of tables that did not change, and sees what a cold reader sees.
func testSplitCommits(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, nil)
	days := []string{"2026-01-15", "2026-02-10", "2026-02-11", "2026-03-01"}
	var adds []DataFile
	var want []pageview
	for i, d := range days {
		rows := genPageviews(uint64(i+1), mustUTCDay(t, d), 20)
		want = append(want, rows...)
		adds = append(adds, writeRows(t, s, testProject, d, rows))
	}
	archive := pageviewTable()
	archive.Name = "archive"
	rec := pageviewRecord(t, genPageviews(9, mustUTCDay(t, days[0]), 5))
	af, err := s.Write(ctx, testProject, archive, "all", rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: append(adds, af)})
	if err != nil {
		t.Fatal(err)
	}
	if got := rootFormat(t, b, s.layout.manifest(testProject)); got != manifestFormat {
		t.Fatalf("root format %q, want %q", got, manifestFormat)
	}
	// Three months of pageviews and the labels of the archive.
	if got, listed := partsObjects(t, b, s.layout, testProject), listedParts(s.layout, m); len(listed) != 4 || !slices.Equal(got, listed) {
		t.Fatalf("sub-manifests %v, the root lists %v (want 4)", got, listed)
	}
	r := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.SubManifestGets != 4 {
		t.Fatalf("a cold reader fetched %d sub-manifests, want 4", st.SubManifestGets)
	}
	sameRows(t, "after the first commit", scanRows(t, sn, ScanOptions{}), want)
	before := sn.Manifest()

	// One day of February changes: one sub-manifest and the root.
	rows := genPageviews(20, mustUTCDay(t, "2026-02-11"), 7)
	want = append(want, rows...)
	objects := len(partsObjects(t, b, s.layout, testProject))
	m, err = s.Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{writeRows(t, s, testProject, "2026-02-11", rows)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(partsObjects(t, b, s.layout, testProject)); got != objects+1 {
		t.Fatalf("the commit of one day wrote %d sub-manifests, want 1", got-objects)
	}
	if sn, err = r.Refresh(ctx, testProject); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.SubManifestGets != 5 || st.ManifestGets != 2 {
		t.Fatalf("the refresh fetched %d roots and %d sub-manifests in all, want 2 and 5", st.ManifestGets, st.SubManifestGets)
	}
	after := sn.Manifest()
	if after.Table("archive") != before.Table("archive") {
		t.Error("the refresh rebuilt the state of a table that did not change")
	}
	for _, d := range []string{"2026-01-15", "2026-03-01"} {
		if &after.Files("pageviews", d)[0] != &before.Files("pageviews", d)[0] {
			t.Errorf("the refresh decoded partition %s again, whose group did not change", d)
		}
	}
	sameRows(t, "after a commit to February", scanRows(t, sn, ScanOptions{}), want)
	cold, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fileKeys(cold.Manifest()), fileKeys(after)) || !slices.Equal(fileKeys(after), fileKeys(m)) {
		t.Fatalf("cold reader %s, warm reader %s, committer %s", describe(cold.Manifest()), describe(after), describe(m))
	}

	// Compaction of February removes its files and the group goes with its
	// last partition's removal.
	var removes []FileRef
	for _, p := range []string{"2026-02-10", "2026-02-11"} {
		for _, f := range m.Files("pageviews", p) {
			removes = append(removes, f.Ref())
		}
	}
	m, err = s.Commit(ctx, Live(testProject), m.Version, Change{Remove: removes})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Table("pageviews").groups["2026-02"]; ok || len(listedParts(s.layout, m)) != 3 {
		t.Fatalf("after removing February: groups %v", m.Table("pageviews").sortedGroups())
	}
	if sn, err = newReader(t, b, nil).Refresh(ctx, testProject); err != nil {
		t.Fatal(err)
	}
	if got := sn.Manifest().Table("pageviews").PartitionNames(); !slices.Equal(got, []string{"2026-01-15", "2026-03-01"}) {
		t.Fatalf("partitions %v after removing February", got)
	}
}

// testSplitRace: committers racing from one version, each changing a day
// of another month, resolve by the root's conditional put: exactly one
// wins, the losers' sub-manifests are deleted, and Update's retries bring
// every change in, each month's group holding its own.
func testSplitRace(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	base := newStore(t, b, nil)
	first := writeRows(t, base, testProject, "2026-01-01", genPageviews(1, mustUTCDay(t, "2026-01-01"), 5))
	m, err := base.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{first}})
	if err != nil {
		t.Fatal(err)
	}
	const racers = 6
	stores := make([]*Store, racers)
	files := make([]DataFile, racers)
	for i := range racers {
		stores[i] = newStore(t, b, nil)
		day := time.Date(2026, time.Month(2+i), 3, 0, 0, 0, 0, time.UTC)
		files[i] = writeRows(t, stores[i], testProject, day.Format(time.DateOnly), genPageviews(uint64(10+i), day, 5))
	}
	run := func(commit func(i int) error) []error {
		start := make(chan struct{})
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				errs[i] = commit(i)
			})
		}
		close(start)
		wg.Wait()
		return errs
	}
	// Round 1: every racer commits over version 1.
	errs := run(func(i int) error {
		_, err := stores[i].Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{files[i]}})
		return err
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("committers %d and %d both won version 2", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, ErrConflict):
			t.Fatalf("committer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no committer won")
	}
	m, err = newStore(t, b, nil).Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(slices.Values([]string{first.Ref().String(), files[winner].Ref().String()})); m.Version != 2 || !slices.Equal(fileKeys(m), want) {
		t.Fatalf("after the race: %s, want version 2 with %v", describe(m), want)
	}
	// Only the winner's sub-manifest was added (the January group is
	// unchanged): the losers deleted theirs.
	if got, listed := partsObjects(t, b, base.layout, testProject), listedParts(base.layout, m); !slices.Equal(got, listed) {
		t.Fatalf("sub-manifests after the race %v, the root lists %v", got, listed)
	}

	// Round 2: the losers retry through Update until all are in.
	errs = run(func(i int) error {
		if i == winner {
			return nil
		}
		_, err := stores[i].Update(ctx, Live(testProject), func(*Manifest) (Change, error) {
			return Change{Add: []DataFile{files[i]}}, nil
		})
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("committer %d: %v", i, err)
		}
	}
	m, err = newStore(t, b, nil).Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first.Ref().String()}
	for _, f := range files {
		want = append(want, f.Ref().String())
	}
	if slices.Sort(want); m.Version != racers+1 || !slices.Equal(fileKeys(m), want) {
		t.Fatalf("after the retries: %s, want version %d with %v", describe(m), racers+1, want)
	}
	if got, listed := partsObjects(t, b, base.layout, testProject), listedParts(base.layout, m); !slices.Equal(got, listed) {
		t.Fatalf("sub-manifests after the retries %v, the root lists %v", got, listed)
	}
	sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fileKeys(sn.Manifest()), want) {
		t.Fatalf("a reader sees %s", describe(sn.Manifest()))
	}
}

// testSplitCollect: Collect deletes sub-manifests that no root lists once
// they are older than OrphanGrace (replaced groups, a commit that died
// between its sub-manifests and its root), and never one that the live or
// a staged root lists, however old.
func testSplitCollect(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, nil)
	d1, d2 := "2026-03-28", "2026-04-02"
	rows1, rows2 := genPageviews(1, mustUTCDay(t, d1), 10), genPageviews(2, mustUTCDay(t, d2), 10)
	m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{writeRows(t, s, testProject, d1, rows1), writeRows(t, s, testProject, d2, rows2)}})
	if err != nil {
		t.Fatal(err)
	}
	replaced := listedParts(s.layout, m)
	rows3 := genPageviews(3, mustUTCDay(t, d2), 10)
	if m, err = s.Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{writeRows(t, s, testProject, d2, rows3)}}); err != nil {
		t.Fatal(err)
	}
	replaced = slices.DeleteFunc(replaced, func(k string) bool { return slices.Contains(listedParts(s.layout, m), k) })
	if len(replaced) != 1 {
		t.Fatalf("the commit to April replaced %v, want its one group", replaced)
	}
	// A staged generation that keeps March: its root lists a group of its
	// own.
	g, err := s.StartGeneration(ctx, testProject, GenerationOptions{Keep: func(_, p string) bool { return p == d1 }})
	if err != nil {
		t.Fatal(err)
	}
	staged, err := s.Load(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	// A commit that died after writing its sub-manifest, before its root.
	late := writeRows(t, s, testProject, d1, genPageviews(4, mustUTCDay(t, d1), 10))
	next, err := applyChange(m, Change{Add: []DataFile{late}}, time.Now(), newID(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	_, crashed, err := s.writeParts(ctx, next)
	if err != nil || len(crashed) != 1 {
		t.Fatalf("writeParts: %v, wrote %v", err, crashed)
	}
	foreign := s.layout.partsPrefix(testProject) + "pageviews/README"
	if _, err := b.Put(ctx, foreign, strings.NewReader("not ours")); err != nil {
		t.Fatal(err)
	}

	// Young: nothing goes (the replaced group was retired within
	// RetireGrace, the crashed commit's is younger than OrphanGrace).
	if st, err := s.Collect(ctx, testProject); err != nil || st.SubManifests != 0 || !exists(t, b, replaced[0]) {
		t.Fatalf("collect right away: %+v, %v", st, err)
	}
	if len(m.retiredParts) != 1 || s.layout.parts(testProject, "pageviews", m.retiredParts[0].Object) != replaced[0] {
		t.Fatalf("the root retired %v, want %v", m.retiredParts, replaced)
	}
	// Without the grace (an erasure: the replaced group holds the sort-key
	// bounds of the files it replaced) the retired group goes at once and
	// leaves the root's list; the crashed commit's keeps its grace.
	st, err := s.CollectRetired(ctx, testProject)
	if err != nil || st.SubManifests != 1 || exists(t, b, replaced[0]) || !exists(t, b, crashed[0]) {
		t.Fatalf("CollectRetired: %+v, %v; replaced exists %v, crashed exists %v", st, err, exists(t, b, replaced[0]), exists(t, b, crashed[0]))
	}
	if m, err = s.Load(ctx, Live(testProject)); err != nil || len(m.retiredParts) != 0 {
		t.Fatalf("after CollectRetired the root still retires %v (%v)", m.retiredParts, err)
	}
	// After OrphanGrace the crashed commit's goes; what the live and the
	// staged roots list stays, however old.
	gc := newStore(t, b, func(c *Config) { c.StagingExpiry = 365 * 24 * time.Hour })
	gc.now = func() time.Time { return time.Now().Add(gc.cfg.OrphanGrace + time.Minute) }
	st, err = gc.Collect(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	keep := append(listedParts(s.layout, m), listedParts(s.layout, staged)...)
	slices.Sort(keep)
	if got := slices.DeleteFunc(partsObjects(t, b, s.layout, testProject), func(k string) bool { return k == foreign }); st.SubManifests != 1 || !slices.Equal(got, keep) {
		t.Fatalf("collect after the grace: %+v; left %v, want %v", st, got, keep)
	}
	if !exists(t, b, foreign) {
		t.Fatal("collect deleted a foreign object")
	}
	for _, k := range append(replaced, crashed...) {
		if exists(t, b, k) {
			t.Fatalf("%s was not collected", k)
		}
	}
	sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "live after collection", scanRows(t, sn, ScanOptions{}), slices.Concat(rows1, rows2, rows3))
	// The staged generation still loads and promotes; then its group is
	// the live one's, and collecting again keeps it.
	if _, err := newStore(t, b, nil).Load(ctx, g); err != nil {
		t.Fatalf("the staged generation after collection: %v", err)
	}
	live, err := s.Promote(ctx, g, PromoteOptions{ExpectLive: m.Version})
	if err != nil {
		t.Fatal(err)
	}
	// The live groups the new generation does not name are retired.
	if want := listedParts(s.layout, m); len(live.retiredParts) != len(want) {
		t.Fatalf("the promotion retired %v, want the live groups %v", live.retiredParts, want)
	}
	if _, err := gc.Collect(ctx, testProject); err != nil {
		t.Fatal(err)
	}
	if sn, err = newReader(t, b, nil).Refresh(ctx, testProject); err != nil {
		t.Fatal(err)
	}
	// (Collect forgot the retired April files: one version more.)
	if got := sn.Manifest(); got.Version != live.Version+1 || got.Generation != 2 {
		t.Fatalf("reader at %s, want version %d of generation 2", describe(got), live.Version+1)
	}
	sameRows(t, "promoted after collection", scanRows(t, sn, ScanOptions{}), rows1)
}

// testUpgrade: a project whose manifest is a single object of format 1
// (testdata/manifest-v1.json, as an older mf wrote it) is read by readers
// and stores as before; the first commit writes format 2 with every file
// kept, and readers that knew format 1 and new ones see the same.
func testUpgrade(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	old, err := os.ReadFile("testdata/manifest-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, b, nil)
	key := s.layout.manifest(testProject)
	if _, err := b.Put(ctx, key, bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, b, func(c *ReaderConfig) { c.Freshness = 0 })
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	v1 := sn.Manifest()
	if v1.Format != manifestFormatV1 || v1.Version != 2 || len(fileKeys(v1)) != 2 {
		t.Fatalf("read format 1 as %s (format %q)", describe(v1), v1.Format)
	}
	day := "2026-03-30"
	rows := genPageviews(5, mustUTCDay(t, day), 10)
	f := writeRows(t, s, testProject, day, rows)
	m, err := s.Update(ctx, Live(testProject), func(m *Manifest) (Change, error) {
		if m.Version != 2 || m.Checkpoint("processor") != "1043" {
			return Change{}, errors.New("the store did not read format 1")
		}
		return Change{Add: []DataFile{f}, Checkpoints: map[string]string{"processor": "1044"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := rootFormat(t, b, key); got != manifestFormat || m.Format != manifestFormat {
		t.Fatalf("after the first commit the root has format %q (manifest %q), want %q", got, m.Format, manifestFormat)
	}
	want := slices.Sorted(slices.Values(append(fileKeys(v1), f.Ref().String())))
	if m.Version != 3 || !slices.Equal(fileKeys(m), want) || len(m.Retired) != 1 || m.Checkpoint("processor") != "1044" {
		t.Fatalf("upgraded to %s retired %v, want version 3 with %v", describe(m), m.Retired, want)
	}
	if got, listed := partsObjects(t, b, s.layout, testProject), listedParts(s.layout, m); len(listed) != 1 || !slices.Equal(got, listed) {
		t.Fatalf("sub-manifests %v, the root lists %v, want March's", got, listed)
	}
	for _, rd := range []*Reader{r, newReader(t, b, nil)} {
		sn, err := rd.Refresh(ctx, testProject)
		if err != nil {
			t.Fatal(err)
		}
		got := sn.Manifest()
		if got.Version != 3 || !slices.Equal(fileKeys(got), want) || !got.Table("pageviews").Schema().Equal(pageviewSchema) {
			t.Fatalf("reader after the upgrade: %s", describe(got))
		}
		if f := got.Files("pageviews", "2026-03-28")[0]; f.Rows != 1200 || string(f.Min) != "1774735200000" {
			t.Fatalf("a file of format 1 after the upgrade: %+v", f)
		}
	}
}

// TestBrokenSubManifests: a root whose sub-manifest is missing, or
// disagrees with it, is refused (ErrCorruptManifest, or the missing
// object named), not read as fewer files; a root that moved on while a
// reader fetched the old one's groups is read again.
func TestBrokenSubManifests(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	s := newStore(t, b, nil)
	day := "2026-03-29"
	m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{writeRows(t, s, testProject, day, genPageviews(1, mustUTCDay(t, day), 5))}})
	if err != nil {
		t.Fatal(err)
	}
	key := listedParts(s.layout, m)[0]
	good, _, err := storage.ReadAll(ctx, b, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to string }{
		{"another table", `"table":"pageviews"`, `"table":"visits"`},
		{"another group", `"group":"2026-03"`, `"group":"2026-04"`},
		{"a partition outside the group", `"2026-03-29":`, `"2026-04-01":`},
		{"more partitions than the root says", `[{"name"`, `[],"2026-03-30":[{"name"`},
		{"another format", `mf-rollups-partitions/1`, `mf-rollups-partitions/9`},
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("%s: %q is not in %s", c.name, c.from, good)
		}
		if _, err := b.Put(ctx, key, strings.NewReader(bad)); err != nil {
			t.Fatal(err)
		}
		if _, err := newReader(t, b, nil).Refresh(ctx, testProject); !errors.Is(err, ErrCorruptManifest) {
			t.Errorf("%s: %v, want ErrCorruptManifest", c.name, err)
		}
		if _, err := newStore(t, b, nil).Load(ctx, Live(testProject)); !errors.Is(err, ErrCorruptManifest) {
			t.Errorf("%s: store: %v, want ErrCorruptManifest", c.name, err)
		}
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := newReader(t, b, nil).Refresh(ctx, testProject); !errors.Is(err, errPartsGone) || !strings.Contains(err.Error(), key) {
		t.Errorf("a missing sub-manifest: %v, want errPartsGone naming %s", err, key)
	}
	if _, err := b.Put(ctx, key, bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}

	// The root moves on and its old group is collected between a
	// reader's fetch of the root and of the group: the reader reads the
	// new root.
	rows := genPageviews(2, mustUTCDay(t, day), 5)
	f := writeRows(t, s, testProject, day, rows)
	bk := &racingBucket{Bucket: b, before: key, fn: func() {
		if _, err := s.Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{f}}); err != nil {
			t.Error(err)
		}
		if err := b.Delete(ctx, key); err != nil {
			t.Error(err)
		}
	}}
	sn, err := newReader(t, bk, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if got := sn.Manifest(); got.Version != 2 || len(fileKeys(got)) != 2 || !bk.fired {
		t.Fatalf("read %s (race happened: %v), want version 2 with 2 files", describe(got), bk.fired)
	}
}

// racingBucket runs fn once, before the first Get of key.
type racingBucket struct {
	storage.Bucket
	before string
	fn     func()
	fired  bool
}

func (r *racingBucket) Get(ctx context.Context, key string) (*storage.Object, error) {
	if key == r.before && !r.fired {
		r.fired = true
		r.fn()
	}
	return r.Bucket.Get(ctx, key)
}

// TestLoadFromAnIncompletePreviousState: a load takes the groups that did
// not change from the store's previous manifest of the project. A
// previous table state without encodings, or whose partitions are not
// known, must neither panic (a nil map: TestReplay in processor hit it)
// nor lose the partitions of unchanged groups: the load equals a cold
// one.
func TestLoadFromAnIncompletePreviousState(t *testing.T) {
	for _, c := range []struct {
		name  string
		strip func(ts *TableState)
	}{
		{"no encodings", func(ts *TableState) { ts.enc = nil }},
		{"partitions unknown", func(ts *TableState) { ts.Partitions, ts.enc = nil, nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			b := apptest.OpenBucket(t, t.TempDir())
			s := newStore(t, b, nil)
			var adds []DataFile
			for i, d := range []string{"2026-01-15", "2026-02-10", "2026-03-01"} {
				adds = append(adds, writeRows(t, s, testProject, d, genPageviews(uint64(i+1), mustUTCDay(t, d), 10)))
			}
			m, err := s.Commit(ctx, Live(testProject), 0, Change{Add: adds})
			if err != nil {
				t.Fatal(err)
			}
			// The store's previous manifest, stripped (a copy: states are
			// shared).
			prev, err := s.Load(ctx, Live(testProject))
			if err != nil {
				t.Fatal(err)
			}
			stripped := *prev
			stripped.Tables = maps.Clone(prev.Tables)
			ts := *prev.Tables["pageviews"]
			c.strip(&ts)
			stripped.Tables["pageviews"] = &ts
			s.mu.Lock()
			k := s.known[Live(testProject)]
			k.m = &stripped
			s.known[Live(testProject)] = k
			s.mu.Unlock()
			// Another committer changes February.
			other := newStore(t, b, nil)
			if _, err := other.Commit(ctx, Live(testProject), m.Version, Change{Add: []DataFile{
				writeRows(t, other, testProject, "2026-02-11", genPageviews(9, mustUTCDay(t, "2026-02-11"), 5))}}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load(ctx, Live(testProject))
			if err != nil {
				t.Fatal(err)
			}
			want, err := newStore(t, b, nil).Load(ctx, Live(testProject))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fileKeys(got), fileKeys(want)) {
				t.Fatalf("loaded from the stripped state: %s; a cold load: %s", describe(got), describe(want))
			}
		})
	}
}
