package rollups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
)

func testCommitRace(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	base := newStore(t, b, nil)
	day := "2026-03-29"
	first := writeRows(t, base, testProject, day, genPageviews(1, mustUTCDay(t, day), 10))
	if _, err := base.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{first}}); err != nil {
		t.Fatal(err)
	}
	const racers = 8
	files := make([]DataFile, racers)
	stores := make([]*Store, racers)
	for i := range racers {
		stores[i] = newStore(t, b, nil) // one per "process": no shared state
		files[i] = writeRows(t, stores[i], testProject, day, genPageviews(uint64(10+i), mustUTCDay(t, day), 10))
	}
	start := make(chan struct{})
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = stores[i].Commit(ctx, Live(testProject), 1, Change{Add: []DataFile{files[i]}, Checkpoints: map[string]string{"winner": strconv.Itoa(i)}})
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("committers %d and %d both won version 2", winner, i)
			}
			winner = i
		case !errors.Is(err, ErrConflict):
			t.Fatalf("committer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no committer won")
	}
	m, err := newStore(t, b, nil).Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first.Ref().String(), files[winner].Ref().String()}
	if got := fileKeys(m); m.Version != 2 || m.Checkpoint("winner") != strconv.Itoa(winner) || !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("after the race: %s; want version 2, files %v, winner %d", describe(m), want, winner)
	}
}

// testConcurrentCommitters runs consumers that commit data and their
// checkpoint together through Update, racing each other; every commit
// must land exactly once.
func testConcurrentCommitters(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	const consumers, commits, rowsPer = 4, 8, 5
	day := "2026-03-30"
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newStore(t, b, nil)
			name := "consumer-" + strconv.Itoa(c)
			for i := range commits {
				rows := genPageviews(uint64(1000*c+i), mustUTCDay(t, day), rowsPer)
				rec := pageviewRecord(t, rows)
				f, err := s.Write(ctx, testProject, pageviewTable(), day, rec)
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
				prev, next := strconv.Itoa(i), strconv.Itoa(i+1)
				_, err = s.Update(ctx, Live(testProject), func(m *Manifest) (Change, error) {
					switch m.Checkpoint(name) {
					case next:
						return Change{}, nil // committed already
					case prev, "":
					default:
						return Change{}, fmt.Errorf("%s: checkpoint %q, expected %q", name, m.Checkpoint(name), prev)
					}
					return Change{Add: []DataFile{f}, Checkpoints: map[string]string{name: next}}, nil
				})
				if err != nil {
					errs <- fmt.Errorf("%s commit %d: %w", name, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m, err := newStore(t, b, nil).Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != consumers*commits || len(fileKeys(m)) != consumers*commits {
		t.Fatalf("after %d commits: %s", consumers*commits, describe(m))
	}
	for c := range consumers {
		if got := m.Checkpoint("consumer-" + strconv.Itoa(c)); got != strconv.Itoa(commits) {
			t.Errorf("consumer %d checkpoint %q, want %d", c, got, commits)
		}
	}
	r := newReader(t, b, nil)
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	var want []pageview
	for c := range consumers {
		for i := range commits {
			want = append(want, genPageviews(uint64(1000*c+i), mustUTCDay(t, day), rowsPer)...)
		}
	}
	sameRows(t, "rows of all commits", scanRows(t, sn, ScanOptions{}), want)
}

// testCrashBeforeCommit: a writer that dies between writing a data file
// and committing it leaves an orphan that readers never see and that
// Collect removes after the grace period.
func testCrashBeforeCommit(t *testing.T, b storage.Bucket) {
	ctx := t.Context()
	s := newStore(t, b, nil)
	day := "2026-03-29"
	committed := genPageviews(1, mustUTCDay(t, day), 30)
	a := writeRows(t, s, testProject, day, committed)
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{a}, Checkpoints: map[string]string{"processor": "1"}}); err != nil {
		t.Fatal(err)
	}
	// The crash: a file written, never committed.
	orphan := writeRows(t, s, testProject, day, genPageviews(2, mustUTCDay(t, day), 30))
	orphanKey := s.layout.file(testProject, orphan.Ref())

	r := newReader(t, b, nil)
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "readers after the crash", scanRows(t, sn, ScanOptions{}), committed)
	if sn.Manifest().Checkpoint("processor") != "1" {
		t.Fatalf("checkpoint %q after the crash, want 1 (restart from there)", sn.Manifest().Checkpoint("processor"))
	}

	// Young orphans stay: their writer may still commit them.
	st, err := s.Collect(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 0 || !exists(t, b, orphanKey) {
		t.Fatalf("collect right after the write: %+v, orphan exists %v", st, exists(t, b, orphanKey))
	}

	// A writer that stalled past half the grace may not commit the file.
	late := newStore(t, b, nil)
	late.now = func() time.Time { return time.Now().Add(late.cfg.OrphanGrace/2 + time.Minute) }
	if _, err := late.Commit(ctx, Live(testProject), 1, Change{Add: []DataFile{orphan}}); !errors.Is(err, ErrStaleFile) {
		t.Fatalf("commit of a stale file: %v, want ErrStaleFile", err)
	}

	// After the grace the orphan goes; the committed file stays.
	gc := newStore(t, b, nil)
	gc.now = func() time.Time { return time.Now().Add(gc.cfg.OrphanGrace + time.Minute) }
	st, err = gc.Collect(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 1 || exists(t, b, orphanKey) || !exists(t, b, s.layout.file(testProject, a.Ref())) {
		t.Fatalf("collect after the grace: %+v; orphan exists %v", st, exists(t, b, orphanKey))
	}
	sn, err = r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "readers after collection", scanRows(t, sn, ScanOptions{}), committed)
	// Objects that are not data files are left alone.
	foreign := s.layout.dataPrefix(testProject) + "README"
	if _, err := b.Put(ctx, foreign, strings.NewReader("not ours")); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Collect(ctx, testProject); err != nil || !exists(t, b, foreign) {
		t.Fatalf("collect touched a foreign object: %v", err)
	}
}

func exists(t *testing.T, b storage.BucketReader, key string) bool {
	t.Helper()
	ok, err := storage.Exists(context.WithoutCancel(t.Context()), b, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
