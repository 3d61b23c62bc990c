package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/storagetest"
)

// openLocal opens a local bucket on dir, closed when t ends.
func openLocal(t testing.TB, dir string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(t.Context(), storage.Config{Dir: dir}, testLogger(t))
	if err != nil {
		t.Fatalf("cannot open local bucket: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// testLogger logs to the test's log; benchmarks only log warnings.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelDebug
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestLocalAcceptance(t *testing.T) {
	storagetest.Acceptance(t, func(t *testing.T) storage.Bucket {
		return openLocal(t, t.TempDir())
	})
}

// Two Bucket values on one directory act like two processes: their
// conditional puts exclude each other through the lock files.
func TestLocalTwoBucketsOneDirectory(t *testing.T) {
	dir := t.TempDir()
	a, b := openLocal(t, dir), openLocal(t, dir)
	storagetest.CASCounter(t, []storage.Bucket{a, b}, "shared/counter", 8, 25)

	var wins atomic.Int32
	done := make(chan error, 2)
	for _, bk := range []storage.Bucket{a, b} {
		go func() {
			_, err := bk.PutIf(t.Context(), "shared/once", strings.NewReader("x"), storage.IfAbsent())
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, storage.ErrPreconditionFailed) {
				done <- err
				return
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if wins.Load() != 1 {
		t.Fatalf("%d of 2 creates succeeded, want 1", wins.Load())
	}
}

// Environment of the helper processes of TestLocalCrossProcess.
const (
	helperDirEnv = "MF_STORAGE_HELPER_DIR"
	helperIDEnv  = "MF_STORAGE_HELPER_ID"
)

const (
	crossProcesses  = 4
	crossIncrements = 60
)

// TestLocalCrossProcess runs the test binary as several processes on one
// directory: their create-only puts of one key must have exactly one
// winner, and their compare-and-swap increments of one counter must all
// count.
func TestLocalCrossProcess(t *testing.T) {
	dir := t.TempDir()
	b := openLocal(t, dir)
	if _, err := b.Put(t.Context(), "cross/counter", strings.NewReader("0")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		id  int
		out []byte
		err error
	}
	results := make(chan result, crossProcesses)
	for id := range crossProcesses {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLocalCrossProcessHelper$", "-test.v")
		cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperIDEnv+"="+strconv.Itoa(id))
		go func() {
			out, err := cmd.CombinedOutput()
			results <- result{id, out, err}
		}()
	}
	// This process increments too, while the helpers run.
	var conflicts atomic.Int64
	if err := storagetest.Increment(t.Context(), b, "cross/counter", crossIncrements, &conflicts); err != nil {
		t.Fatal(err)
	}
	winners := []int{}
	for range crossProcesses {
		r := <-results
		if r.err != nil {
			t.Fatalf("helper process %d failed: %v\n%s", r.id, r.err, r.out)
		}
		switch {
		case bytes.Contains(r.out, []byte("create: won")):
			winners = append(winners, r.id)
		case bytes.Contains(r.out, []byte("create: lost")):
		default:
			t.Fatalf("helper process %d did not report its create:\n%s", r.id, r.out)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("processes %v won the create-only put, want exactly one", winners)
	}
	data, _, err := storage.ReadAll(t.Context(), b, "cross/once")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("process %d", winners[0]); string(data) != want {
		t.Fatalf("cross/once holds %q, but %q reported the win", data, want)
	}
	data, _, err = storage.ReadAll(t.Context(), b, "cross/counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa((crossProcesses + 1) * crossIncrements); string(data) != want {
		t.Fatalf("counter = %s after %d processes x %d increments, want %s (lost updates)", data, crossProcesses+1, crossIncrements, want)
	}
}

// TestLocalCrossProcessHelper is the body of the helper processes of
// TestLocalCrossProcess; run directly, it does nothing.
func TestLocalCrossProcessHelper(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		return // not a helper process
	}
	id, err := strconv.Atoi(os.Getenv(helperIDEnv))
	if err != nil {
		t.Fatalf("bad %s: %v", helperIDEnv, err)
	}
	b := openLocal(t, dir)
	_, err = b.PutIf(t.Context(), "cross/once", strings.NewReader(fmt.Sprintf("process %d", id)), storage.IfAbsent())
	switch {
	case err == nil:
		fmt.Println("create: won")
	case errors.Is(err, storage.ErrPreconditionFailed):
		fmt.Println("create: lost")
	default:
		t.Fatal(err)
	}
	var conflicts atomic.Int64
	if err := storagetest.Increment(t.Context(), b, "cross/counter", crossIncrements, &conflicts); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("increments: %d, conflicts: %d\n", crossIncrements, conflicts.Load())
}

// The layout on disk is the one docs/object-store.md describes.
func TestLocalLayout(t *testing.T) {
	dir := t.TempDir()
	b := openLocal(t, dir)
	if _, err := b.Put(t.Context(), "x/y/z.json", strings.NewReader(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "objects", "x", "y", "z.json"))
	if err != nil || string(data) != `{"a":1}` {
		t.Fatalf("objects/x/y/z.json = %q, %v; want the object's content", data, err)
	}
	format, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
	if err != nil || !strings.HasPrefix(string(format), "mf object store, local directory layout 1") {
		t.Fatalf("FORMAT = %q, %v", format, err)
	}
	if _, err := b.Put(t.Context(), "broken", &failAfter{n: 100}); err == nil {
		t.Fatal("put from a failing reader succeeded")
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "tmp")); err != nil || len(entries) != 0 {
		t.Fatalf("tmp holds %d entries after puts (%v), want none", len(entries), err)
	}
	// Deleting the last object below a directory removes the directory.
	if err := b.Delete(t.Context(), "x/y/z.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "objects", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("objects/x after its last object was deleted: %v, want it gone", err)
	}
}

type failAfter struct{ n int }

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("broken source")
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

// The local directory cannot hold "a/b" beside "a/b/c".
func TestLocalKeyConflict(t *testing.T) {
	dir := t.TempDir()
	b := openLocal(t, dir)
	ctx := t.Context()
	put := func(key string) error {
		_, err := b.Put(ctx, key, strings.NewReader(key))
		return err
	}
	if err := put("a/b"); err != nil {
		t.Fatal(err)
	}
	if err := put("a/b/c"); !errors.Is(err, storage.ErrKeyConflict) {
		t.Fatalf("Put below an object = %v, want ErrKeyConflict", err)
	}
	if _, err := b.PutIf(ctx, "a/b/c", strings.NewReader("x"), storage.IfAbsent()); !errors.Is(err, storage.ErrKeyConflict) {
		t.Fatalf("PutIf below an object = %v, want ErrKeyConflict", err)
	}
	if _, err := b.Get(ctx, "a/b/c"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get below an object = %v, want ErrNotFound", err)
	}
	if err := put("p/q/r"); err != nil {
		t.Fatal(err)
	}
	if err := put("p/q"); !errors.Is(err, storage.ErrKeyConflict) {
		t.Fatalf("Put of a prefix of an object = %v, want ErrKeyConflict", err)
	}
	if _, err := b.PutIf(ctx, "p/q", strings.NewReader("x"), storage.IfAbsent()); !errors.Is(err, storage.ErrKeyConflict) {
		t.Fatalf("PutIf of a prefix of an object = %v, want ErrKeyConflict", err)
	}
	// An empty directory left behind (a crash between delete and prune)
	// does not block a key.
	if err := os.MkdirAll(filepath.Join(dir, "objects", "e", "f"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := put("e/f"); err != nil {
		t.Fatalf("Put over an empty directory: %v", err)
	}
}

func TestLocalReopen(t *testing.T) {
	dir := t.TempDir()
	b := openLocal(t, dir)
	etag, err := b.Put(t.Context(), "k", strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "k", strings.NewReader("v")); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Get(t.Context(), "k"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	// A reopened store keeps objects and their ETags.
	b2 := openLocal(t, dir)
	attrs, err := b2.Attributes(t.Context(), "k")
	if err != nil || attrs.ETag != etag {
		t.Fatalf("after reopening: %+v, %v; want ETag %q", attrs, err, etag)
	}
	if _, err := b2.PutIf(t.Context(), "k", strings.NewReader("w"), storage.IfMatch(etag)); err != nil {
		t.Fatalf("CAS with an ETag from before the reopen: %v", err)
	}
}

func TestLocalOpenRefusesOtherLayout(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("something else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := storage.Open(t.Context(), storage.Config{Dir: dir}, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "something else") {
		t.Fatalf("Open of a directory with another layout = %v, want a refusal naming it", err)
	}
}

func TestLocalRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	openLocal(t, dir).Close()
	stale, fresh := filepath.Join(dir, "tmp", "put-stale"), filepath.Join(dir, "tmp", "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	openLocal(t, dir)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a 2-hour-old temporary file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temporary file (maybe another process's) was removed: %v", err)
	}
}

// A large put streams: it never holds the object in memory.
func TestLocalPutStreams(t *testing.T) {
	b := openLocal(t, t.TempDir())
	src := io.LimitReader(zeroReader{}, 64<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := b.Put(t.Context(), "big", src); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("a 64 MiB put allocated %d bytes; it should stream", alloc)
	}
	attrs, err := b.Attributes(t.Context(), "big")
	if err != nil || attrs.Size != 64<<20 {
		t.Fatalf("Attributes = %+v, %v", attrs, err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestLocalConcurrentDeletesOfOneDirectory deletes every object of one
// directory at once, many times: the last delete prunes the emptied
// directory while others still make their own removal durable, and none
// may fail for it (the processor's collection deletes a partition's files
// while another collection does the same).
func TestLocalConcurrentDeletesOfOneDirectory(t *testing.T) {
	b := openLocal(t, t.TempDir())
	ctx := t.Context()
	for round := range 50 {
		keys := make([]string, 8)
		for i := range keys {
			keys[i] = fmt.Sprintf("rollups/p/data/people/b%d/f%d.parquet", round%4, i)
			if _, err := b.Put(ctx, keys[i], bytes.NewReader([]byte("x"))); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(keys))
		for _, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.Delete(ctx, k); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
