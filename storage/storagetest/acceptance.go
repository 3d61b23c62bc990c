package storagetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
)

//go:embed testdata
var testdata embed.FS

// Sizes used by the acceptance test.
const (
	// LargeSize is the size of the large objects: written and read as
	// streams, verified by hash.
	LargeSize = 64 << 20
	// raceWriters is how many goroutines race in the conditional-put
	// tests.
	raceWriters = 8
	// increments is how many increments each of the raceWriters makes to
	// the shared counter.
	increments = 25
)

// Acceptance checks that a storage.Bucket implementation keeps the contract
// of the interface: every operation and its errors, key rules, listing
// order and prefixes, ranged reads, conditional puts racing from many
// goroutines, atomic replacement under concurrent reads, and 64 MiB
// objects streamed in and out.
//
// newBucket must return an empty bucket each time it is called (every
// subtest calls it once) and close it when t ends.
func Acceptance(t *testing.T, newBucket func(t *testing.T) storage.Bucket) {
	t.Run("Keys", func(t *testing.T) { testKeys(t, newBucket(t)) })
	t.Run("Missing", func(t *testing.T) { testMissing(t, newBucket(t)) })
	t.Run("PutGet", func(t *testing.T) { testPutGet(t, newBucket(t)) })
	t.Run("Overwrite", func(t *testing.T) { testOverwrite(t, newBucket(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, newBucket(t)) })
	t.Run("GetRange", func(t *testing.T) { testGetRange(t, newBucket(t)) })
	t.Run("List", func(t *testing.T) { testList(t, newBucket(t)) })
	t.Run("Conditional", func(t *testing.T) { testConditional(t, newBucket(t)) })
	t.Run("CreateRace", func(t *testing.T) { testCreateRace(t, newBucket(t)) })
	t.Run("CASCounter", func(t *testing.T) {
		b := newBucket(t)
		CASCounter(t, []storage.Bucket{b}, "counter", raceWriters, increments)
	})
	t.Run("FailedPut", func(t *testing.T) { testFailedPut(t, newBucket(t)) })
	t.Run("AtomicReplace", func(t *testing.T) { testAtomicReplace(t, newBucket(t)) })
	t.Run("Canceled", func(t *testing.T) { testCanceled(t, newBucket(t)) })
	t.Run("Large", func(t *testing.T) { testLarge(t, newBucket(t)) })
}

// mustPut stores data under key or fails the test.
func mustPut(t *testing.T, b storage.Bucket, key string, data []byte) string {
	t.Helper()
	etag, err := b.Put(t.Context(), key, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if etag == "" {
		t.Fatalf("Put(%q) returned an empty ETag", key)
	}
	return etag
}

// mustRead reads the object under key or fails the test.
func mustRead(t *testing.T, b storage.BucketReader, key string) ([]byte, storage.Attributes) {
	t.Helper()
	data, attrs, err := storage.ReadAll(t.Context(), b, key)
	if err != nil {
		t.Fatalf("ReadAll(%q): %v", key, err)
	}
	return data, attrs
}

// wantContent fails the test unless key holds exactly want.
func wantContent(t *testing.T, b storage.BucketReader, key string, want []byte) storage.Attributes {
	t.Helper()
	got, attrs := mustRead(t, b, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("object %q holds %s, want %s", key, brief(got), brief(want))
	}
	if attrs.Size != int64(len(want)) {
		t.Fatalf("object %q: Size %d, want %d", key, attrs.Size, len(want))
	}
	return attrs
}

// wantMissing fails the test unless nothing is stored under key.
func wantMissing(t *testing.T, b storage.BucketReader, key string) {
	t.Helper()
	if _, err := b.Get(t.Context(), key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get(%q) = %v, want ErrNotFound", key, err)
	}
	if _, err := b.Attributes(t.Context(), key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Attributes(%q) = %v, want ErrNotFound", key, err)
	}
}

func brief(b []byte) string {
	if len(b) <= 64 {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("%d bytes (sha256 %x, starting %q)", len(b), sha256.Sum256(b), b[:32])
}

// readLines returns the non-blank, non-comment lines of a testdata file.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := testdata.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("cannot read test vectors: %v", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

func testKeys(t *testing.T, b storage.Bucket) {
	long := strings.Repeat("k", storage.MaxSegmentLen)
	valid := []string{strings.Join([]string{long, long, long, long}, "/")} // 1023 bytes
	invalid := []string{
		strings.Repeat("k", storage.MaxSegmentLen+1),
		strings.Repeat("k/", storage.MaxKeyLen/2) + "k", // 1025 bytes
	}
	for _, line := range readLines(t, "keys.txt") {
		kind, quoted, _ := strings.Cut(line, " ")
		key, err := strconv.Unquote(strings.TrimSpace(quoted))
		if err != nil {
			t.Fatalf("keys.txt: bad line %q: %v", line, err)
		}
		switch kind {
		case "ok":
			valid = append(valid, key)
		case "invalid":
			invalid = append(invalid, key)
		default:
			t.Fatalf("keys.txt: bad line %q", line)
		}
	}
	for _, key := range valid {
		data := []byte("content of " + key)
		etag := mustPut(t, b, key, data)
		if attrs := wantContent(t, b, key, data); attrs.ETag != etag {
			t.Errorf("key %q: Put returned ETag %q, Get %q", key, etag, attrs.ETag)
		}
		found := false
		err := b.List(t.Context(), key, func(o storage.ObjectInfo) error {
			found = found || o.Key == key
			return nil
		})
		if err != nil || !found {
			t.Errorf("List(%q) = %v, found the key: %v", key, err, found)
		}
		if err := b.Delete(t.Context(), key); err != nil {
			t.Errorf("Delete(%q): %v", key, err)
		}
		wantMissing(t, b, key)
	}
	for _, key := range invalid {
		c := t.Context()
		errs := map[string]error{}
		_, errs["Get"] = b.Get(c, key)
		_, errs["GetRange"] = b.GetRange(c, key, 0, 1)
		_, errs["Attributes"] = b.Attributes(c, key)
		_, errs["Put"] = b.Put(c, key, strings.NewReader("x"))
		_, errs["PutIf"] = b.PutIf(c, key, strings.NewReader("x"), storage.IfAbsent())
		errs["Delete"] = b.Delete(c, key)
		for op, err := range errs {
			if !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("%s(%.60q) = %v, want ErrInvalidKey", op, key, err)
			}
		}
	}
	for _, prefix := range []string{"/a", "a//b", "a/../b", "a b"} {
		err := b.List(t.Context(), prefix, func(storage.ObjectInfo) error { return nil })
		if !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("List(%q) = %v, want ErrInvalidKey", prefix, err)
		}
	}
}

func testMissing(t *testing.T, b storage.Bucket) {
	for _, key := range []string{"missing", "missing/deeper/key"} {
		wantMissing(t, b, key)
		if _, err := b.GetRange(t.Context(), key, 0, 10); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("GetRange(%q) = %v, want ErrNotFound", key, err)
		}
		if exists, err := storage.Exists(t.Context(), b, key); err != nil || exists {
			t.Errorf("Exists(%q) = %v, %v; want false, nil", key, exists, err)
		}
		if err := b.Delete(t.Context(), key); err != nil {
			t.Errorf("Delete(%q) of a missing object = %v, want nil", key, err)
		}
	}
	// A prefix of stored keys is not an object.
	mustPut(t, b, "dir/object", []byte("x"))
	wantMissing(t, b, "dir")
	if err := b.Delete(t.Context(), "dir"); err != nil {
		t.Errorf("Delete of a prefix = %v, want nil", err)
	}
	wantContent(t, b, "dir/object", []byte("x"))
}

func testPutGet(t *testing.T, b storage.Bucket) {
	before := time.Now()
	for _, tc := range []struct {
		key  string
		data []byte
	}{
		{"empty", nil},
		{"one", []byte("1")},
		{"text/hello.txt", []byte("hello, object store\n")},
		{"binary/all-bytes", allBytes()},
	} {
		etag := mustPut(t, b, tc.key, tc.data)
		attrs := wantContent(t, b, tc.key, tc.data)
		if attrs.ETag != etag {
			t.Errorf("%q: Get reports ETag %q, Put returned %q", tc.key, attrs.ETag, etag)
		}
		stat, err := b.Attributes(t.Context(), tc.key)
		if err != nil {
			t.Fatalf("Attributes(%q): %v", tc.key, err)
		}
		if stat.ETag != etag || stat.Size != int64(len(tc.data)) {
			t.Errorf("Attributes(%q) = %+v, want ETag %q and Size %d", tc.key, stat, etag, len(tc.data))
		}
		// Stores may keep whole seconds; allow a day of clock difference.
		if stat.LastModified.Before(before.Add(-24*time.Hour)) || stat.LastModified.After(before.Add(24*time.Hour)) {
			t.Errorf("Attributes(%q).LastModified = %v, not near %v", tc.key, stat.LastModified, before)
		}
		if exists, err := storage.Exists(t.Context(), b, tc.key); err != nil || !exists {
			t.Errorf("Exists(%q) = %v, %v; want true, nil", tc.key, exists, err)
		}
	}
	// A reader that is not a bytes.Reader (no length known up front).
	data := []byte(strings.Repeat("stream ", 1000))
	etag, err := b.Put(t.Context(), "stream", onlyReader{bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("Put from a plain io.Reader: %v", err)
	}
	if attrs := wantContent(t, b, "stream", data); attrs.ETag != etag {
		t.Errorf("stream: Get reports ETag %q, Put returned %q", attrs.ETag, etag)
	}
	// A file is read from where it stands, not from its start.
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(4, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "file", f); err != nil {
		t.Fatalf("Put from a file: %v", err)
	}
	wantContent(t, b, "file", []byte("456789"))
}

func allBytes() []byte {
	b := make([]byte, 256*4)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// onlyReader hides every method but Read, so a backend cannot learn the
// length up front.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testOverwrite(t *testing.T, b storage.Bucket) {
	first := mustPut(t, b, "k", []byte("first version"))
	second := mustPut(t, b, "k", []byte("second, longer version"))
	if first == second {
		t.Errorf("overwrite with new content kept the ETag %q", first)
	}
	if attrs := wantContent(t, b, "k", []byte("second, longer version")); attrs.ETag != second {
		t.Errorf("after overwrite, ETag %q, want %q", attrs.ETag, second)
	}
	third := mustPut(t, b, "k", []byte("3"))
	if attrs := wantContent(t, b, "k", []byte("3")); attrs.ETag != third || third == second {
		t.Errorf("after shrinking overwrite, ETag %q (Put returned %q, before %q)", attrs.ETag, third, second)
	}
	mustPut(t, b, "k", nil)
	wantContent(t, b, "k", nil)
}

func testDelete(t *testing.T, b storage.Bucket) {
	mustPut(t, b, "d/one", []byte("1"))
	mustPut(t, b, "d/sub/two", []byte("2"))
	mustPut(t, b, "d/sub/three", []byte("3"))
	if err := b.Delete(t.Context(), "d/sub/two"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantMissing(t, b, "d/sub/two")
	wantContent(t, b, "d/sub/three", []byte("3"))
	wantContent(t, b, "d/one", []byte("1"))
	if err := b.Delete(t.Context(), "d/sub/two"); err != nil {
		t.Errorf("second Delete = %v, want nil", err)
	}
	if err := b.Delete(t.Context(), "d/sub/three"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got := listKeys(t, b, "d/"); !slices.Equal(got, []string{"d/one"}) {
		t.Errorf("List after deletes = %q, want [d/one]", got)
	}
	// Once nothing is stored below "d/sub", "d/sub" may name an object,
	// and the other way round.
	mustPut(t, b, "d/sub", []byte("now an object"))
	wantContent(t, b, "d/sub", []byte("now an object"))
	if err := b.Delete(t.Context(), "d/sub"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustPut(t, b, "d/sub/two", []byte("2 again"))
	wantContent(t, b, "d/sub/two", []byte("2 again"))
	wantMissing(t, b, "d/sub")
}

// rangeObject is the 100-byte object of ranges.txt.
func rangeObject() []byte {
	data := make([]byte, 100)
	for i := range data {
		data[i] = 'A' + byte(i%26)
	}
	return data
}

func testGetRange(t *testing.T, b storage.Bucket) {
	data := rangeObject()
	etag := mustPut(t, b, "r", data)
	mustPut(t, b, "empty", nil)
	for _, line := range readLines(t, "ranges.txt") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("ranges.txt: bad line %q", line)
		}
		off, err1 := strconv.ParseInt(f[0], 10, 64)
		length, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("ranges.txt: bad line %q", line)
		}
		obj, err := b.GetRange(t.Context(), "r", off, length)
		if f[2] == "ErrInvalidRange" {
			if !errors.Is(err, storage.ErrInvalidRange) {
				t.Errorf("GetRange(%d, %d) = %v, want ErrInvalidRange", off, length, err)
			}
			if err == nil {
				obj.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("GetRange(%d, %d): %v", off, length, err)
			continue
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Errorf("GetRange(%d, %d): read: %v", off, length, err)
			continue
		}
		var want []byte
		if f[2] != "empty" {
			from, to, _ := strings.Cut(f[2], ":")
			i, _ := strconv.Atoi(from)
			j, _ := strconv.Atoi(to)
			want = data[i:j]
		}
		if !bytes.Equal(got, want) {
			t.Errorf("GetRange(%d, %d) = %q, want %q", off, length, got, want)
		}
		if obj.Size != int64(len(data)) || obj.ETag != etag {
			t.Errorf("GetRange(%d, %d) attributes = %+v, want Size %d and ETag %q (those of the whole object)", off, length, obj.Attributes, len(data), etag)
		}
	}
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {5, 1}} {
		obj, err := b.GetRange(t.Context(), "empty", r[0], r[1])
		if err != nil {
			t.Errorf("GetRange of an empty object (%d, %d): %v", r[0], r[1], err)
			continue
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || len(got) != 0 || obj.Size != 0 {
			t.Errorf("GetRange of an empty object (%d, %d) = %q, %v, Size %d; want nothing", r[0], r[1], got, err, obj.Size)
		}
	}
}

// listKeys lists the keys under prefix.
func listKeys(t *testing.T, b storage.BucketReader, prefix string) []string {
	t.Helper()
	keys := []string{}
	err := b.List(t.Context(), prefix, func(o storage.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func testList(t *testing.T, b storage.Bucket) {
	if got := listKeys(t, b, ""); len(got) != 0 {
		t.Fatalf("List of an empty bucket = %q", got)
	}
	etags := map[string]string{}
	for _, line := range readLines(t, "list.txt") {
		verb, rest, _ := strings.Cut(line, " ")
		switch verb {
		case "put":
			key := strings.TrimSpace(rest)
			etags[key] = mustPut(t, b, key, []byte("value of "+key))
		case "list":
			rest = strings.TrimSpace(rest)
			end := strings.IndexByte(rest[1:], '"') + 2
			prefix, err := strconv.Unquote(rest[:end])
			if err != nil {
				t.Fatalf("list.txt: bad line %q", line)
			}
			want := strings.Fields(rest[end:])
			if got := listKeys(t, b, prefix); !slices.Equal(got, want) {
				t.Errorf("List(%q) =\n  %q\nwant\n  %q", prefix, got, want)
			}
		default:
			t.Fatalf("list.txt: bad line %q", line)
		}
	}
	// Listed attributes are those of the objects.
	err := b.List(t.Context(), "", func(o storage.ObjectInfo) error {
		if o.ETag != etags[o.Key] || o.Size != int64(len("value of "+o.Key)) {
			t.Errorf("List entry %+v, want ETag %q and Size %d", o, etags[o.Key], len("value of "+o.Key))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	// An error from fn stops the listing and comes back unchanged.
	stop := errors.New("stop here")
	calls := 0
	err = b.List(t.Context(), "", func(storage.ObjectInfo) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Errorf("List with fn failing on the 3rd key = %v after %d calls, want %v after 3", err, calls, stop)
	}
}

func testConditional(t *testing.T, b storage.Bucket) {
	c := t.Context()
	// Create-only.
	created, err := b.PutIf(c, "c", strings.NewReader("v1"), storage.IfAbsent())
	if err != nil {
		t.Fatalf("PutIf(IfAbsent) of a new key: %v", err)
	}
	if attrs := wantContent(t, b, "c", []byte("v1")); attrs.ETag != created {
		t.Errorf("PutIf returned ETag %q, Get reports %q", created, attrs.ETag)
	}
	if _, err := b.PutIf(c, "c", strings.NewReader("v2"), storage.IfAbsent()); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfAbsent) of an existing key = %v, want ErrPreconditionFailed", err)
	}
	wantContent(t, b, "c", []byte("v1"))

	// Compare-and-swap.
	swapped, err := b.PutIf(c, "c", strings.NewReader("v2"), storage.IfMatch(created))
	if err != nil {
		t.Fatalf("PutIf(IfMatch(current)): %v", err)
	}
	if attrs := wantContent(t, b, "c", []byte("v2")); attrs.ETag != swapped || swapped == created {
		t.Errorf("after CAS: ETag %q, PutIf returned %q, before %q", attrs.ETag, swapped, created)
	}
	if _, err := b.PutIf(c, "c", strings.NewReader("v3"), storage.IfMatch(created)); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfMatch(stale)) = %v, want ErrPreconditionFailed", err)
	}
	wantContent(t, b, "c", []byte("v2"))
	if _, err := b.PutIf(c, "c", strings.NewReader("v3"), storage.IfMatch("not-an-etag")); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfMatch(made up)) = %v, want ErrPreconditionFailed", err)
	}
	// An unconditional put also moves the ETag on.
	plain := mustPut(t, b, "c", []byte("v3"))
	if _, err := b.PutIf(c, "c", strings.NewReader("v4"), storage.IfMatch(swapped)); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfMatch) after a plain Put = %v, want ErrPreconditionFailed", err)
	}
	if _, err := b.PutIf(c, "c", strings.NewReader("v4"), storage.IfMatch(plain)); err != nil {
		t.Fatalf("PutIf(IfMatch) of the plain Put's ETag: %v", err)
	}
	wantContent(t, b, "c", []byte("v4"))

	// Missing objects fail IfMatch; deleted ones can be created again.
	if _, err := b.PutIf(c, "never", strings.NewReader("x"), storage.IfMatch(created)); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfMatch) of a missing key = %v, want ErrPreconditionFailed", err)
	}
	wantMissing(t, b, "never")
	_, attrs := mustRead(t, b, "c")
	if err := b.Delete(c, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutIf(c, "c", strings.NewReader("x"), storage.IfMatch(attrs.ETag)); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfMatch) of a deleted key = %v, want ErrPreconditionFailed", err)
	}
	wantMissing(t, b, "c")
	if _, err := b.PutIf(c, "c", strings.NewReader("reborn"), storage.IfAbsent()); err != nil {
		t.Fatalf("PutIf(IfAbsent) of a deleted key: %v", err)
	}
	wantContent(t, b, "c", []byte("reborn"))

	// Preconditions must say one thing.
	for _, p := range []storage.Precondition{{}, {Absent: true, ETag: created}} {
		if _, err := b.PutIf(c, "c", strings.NewReader("bad"), p); !errors.Is(err, storage.ErrInvalidPrecondition) {
			t.Errorf("PutIf(%+v) = %v, want ErrInvalidPrecondition", p, err)
		}
	}
	wantContent(t, b, "c", []byte("reborn"))
}

func testCreateRace(t *testing.T, b storage.Bucket) {
	for round := range 5 {
		key := fmt.Sprintf("race/%d", round)
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, raceWriters)
		for w := range raceWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				content := fmt.Sprintf("written by %d", w)
				_, err := b.PutIf(t.Context(), key, strings.NewReader(content), storage.IfAbsent())
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(content)
				case !errors.Is(err, storage.ErrPreconditionFailed):
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("racing PutIf(IfAbsent): %v", err)
		}
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d of %d racing creates succeeded, want exactly 1", round, n, raceWriters)
		}
		wantContent(t, b, key, []byte(winner.Load().(string)))
	}
}

// CASCounter runs writers goroutines that each add 1, n times, to a
// decimal counter stored under key, by read then PutIf(IfMatch), retrying
// on ErrPreconditionFailed; writer i uses buckets[i%len(buckets)], so
// several Bucket values on one store can race. It fails the test unless
// the counter ends at writers*n and exactly writers*n puts succeeded.
func CASCounter(t *testing.T, buckets []storage.Bucket, key string, writers, n int) {
	t.Helper()
	b0 := buckets[0]
	if _, err := b0.PutIf(t.Context(), key, strings.NewReader("0"), storage.IfAbsent()); err != nil && !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("cannot create the counter: %v", err)
	}
	before, _ := mustRead(t, b0, key)
	start, err := strconv.Atoi(string(before))
	if err != nil {
		t.Fatalf("counter %q holds %q", key, before)
	}
	var successes, conflicts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Increment(t.Context(), buckets[w%len(buckets)], key, n, &conflicts); err != nil {
				errs <- err
				return
			}
			successes.Add(int64(n))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("increment: %v", err)
	}
	got, _ := mustRead(t, b0, key)
	want := start + writers*n
	if string(got) != strconv.Itoa(want) {
		t.Fatalf("counter = %s after %d writers x %d increments from %d, want %d (lost updates)", got, writers, n, start, want)
	}
	if successes.Load() != int64(writers*n) {
		t.Fatalf("%d successful increments, want %d", successes.Load(), writers*n)
	}
	t.Logf("%d increments, %d conflicts retried", writers*n, conflicts.Load())
}

// Increment adds 1, n times, to the decimal counter under key by read then
// PutIf(IfMatch), retrying on ErrPreconditionFailed (counted in conflicts).
// Exported for cross-process tests that run it in a second process.
func Increment(ctx context.Context, b storage.Bucket, key string, n int, conflicts *atomic.Int64) error {
	for range n {
		for {
			data, attrs, err := storage.ReadAll(ctx, b, key)
			if err != nil {
				return err
			}
			v, err := strconv.Atoi(string(data))
			if err != nil {
				return fmt.Errorf("counter %q holds %q: %w", key, data, err)
			}
			_, err = b.PutIf(ctx, key, strings.NewReader(strconv.Itoa(v+1)), storage.IfMatch(attrs.ETag))
			if err == nil {
				break
			}
			if !errors.Is(err, storage.ErrPreconditionFailed) {
				return err
			}
			conflicts.Add(1)
		}
	}
	return nil
}

// failingReader yields some bytes and then an error.
type failingReader struct {
	left int
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.left == 0 {
		return 0, f.err
	}
	n := min(len(p), f.left)
	for i := range n {
		p[i] = 'f'
	}
	f.left -= n
	return n, nil
}

func testFailedPut(t *testing.T, b storage.Bucket) {
	broken := errors.New("source broke")
	mustPut(t, b, "kept", []byte("old content"))
	for _, put := range []func(r io.Reader) error{
		func(r io.Reader) error { _, err := b.Put(t.Context(), "kept", r); return err },
		func(r io.Reader) error { _, err := b.PutIf(t.Context(), "kept", r, storage.IfMatch("x")); return err },
	} {
		if err := put(&failingReader{left: 1000, err: broken}); err == nil {
			t.Fatal("a put from a failing reader succeeded")
		}
		wantContent(t, b, "kept", []byte("old content"))
	}
	if _, err := b.Put(t.Context(), "new", &failingReader{left: 1000, err: broken}); err == nil {
		t.Fatal("a put from a failing reader succeeded")
	}
	wantMissing(t, b, "new")
	if got := listKeys(t, b, ""); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("after failed puts, List = %q, want [kept]", got)
	}
}

func testAtomicReplace(t *testing.T, b storage.Bucket) {
	const size = 1 << 20
	versions := [][]byte{bytes.Repeat([]byte("a"), size), bytes.Repeat([]byte("b"), size/2)}
	mustPut(t, b, "flip", versions[0])
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				data, attrs, err := storage.ReadAll(t.Context(), b, "flip")
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(data, versions[0]) && !bytes.Equal(data, versions[1]) {
					errs <- fmt.Errorf("a reader saw a torn object: %s", brief(data))
					return
				}
				if attrs.Size != int64(len(data)) {
					errs <- fmt.Errorf("a reader got %d bytes of an object of Size %d", len(data), attrs.Size)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := range 20 {
		mustPut(t, b, "flip", versions[(i+1)%2])
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d reads during 20 replacements", reads.Load())
}

func testCanceled(t *testing.T, b storage.Bucket) {
	mustPut(t, b, "k", []byte("v"))
	c, cancel := context.WithCancel(t.Context())
	cancel()
	errs := map[string]error{}
	_, errs["Get"] = b.Get(c, "k")
	_, errs["GetRange"] = b.GetRange(c, "k", 0, 1)
	_, errs["Attributes"] = b.Attributes(c, "k")
	_, errs["Put"] = b.Put(c, "k", strings.NewReader("changed"))
	_, errs["PutIf"] = b.PutIf(c, "k", strings.NewReader("changed"), storage.IfAbsent())
	errs["Delete"] = b.Delete(c, "k")
	errs["List"] = b.List(c, "", func(storage.ObjectInfo) error { return nil })
	for op, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context = %v, want context.Canceled", op, err)
		}
	}
	wantContent(t, b, "k", []byte("v"))
}

// largeReader yields LargeSize deterministic bytes of the given seed,
// through Read only.
func largeReader(seed uint64) io.Reader {
	var s [32]byte
	s[0] = byte(seed)
	return onlyReader{io.LimitReader(rand.NewChaCha8(s), LargeSize)}
}

// largeHash is the SHA-256 of largeReader(seed).
func largeHash(t *testing.T, seed uint64) [32]byte {
	h := sha256.New()
	if _, err := io.Copy(h, largeReader(seed)); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// hashObject streams the object (or range) under key through SHA-256.
func hashObject(t *testing.T, obj *storage.Object) ([32]byte, int64) {
	t.Helper()
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		t.Fatalf("cannot read a large object: %v", err)
	}
	return [32]byte(h.Sum(nil)), n
}

func testLarge(t *testing.T, b storage.Bucket) {
	c := t.Context()
	// From a stream of unknown length.
	etag, err := b.Put(c, "large/stream", largeReader(1))
	if err != nil {
		t.Fatalf("Put of a %d-byte stream: %v", LargeSize, err)
	}
	want1 := largeHash(t, 1)
	obj, err := b.Get(c, "large/stream")
	if err != nil {
		t.Fatal(err)
	}
	if obj.Size != LargeSize || obj.ETag != etag {
		t.Errorf("Get of the large object: %+v, want Size %d and ETag %q", obj.Attributes, LargeSize, etag)
	}
	if got, n := hashObject(t, obj); got != want1 || n != LargeSize {
		t.Fatalf("large object read back as %d bytes with SHA-256 %x, want %d bytes with %x", n, got, LargeSize, want1)
	}

	// A range across the middle.
	const off, length = LargeSize/2 - 1000, 3 << 20
	var wantRange bytes.Buffer
	r := largeReader(1)
	if _, err := io.CopyN(io.Discard, r, off); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(&wantRange, r, length); err != nil {
		t.Fatal(err)
	}
	obj, err = b.GetRange(c, "large/stream", off, length)
	if err != nil {
		t.Fatal(err)
	}
	if got, n := hashObject(t, obj); got != sha256.Sum256(wantRange.Bytes()) || n != length {
		t.Fatalf("GetRange(%d, %d) of the large object gave %d bytes that differ from the object's", off, length, n)
	}

	// From a file, whose length is known.
	path := filepath.Join(t.TempDir(), "large")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, largeReader(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	// Compare-and-swap of a large object.
	etag2, err := b.PutIf(c, "large/stream", f, storage.IfMatch(etag))
	if err != nil {
		t.Fatalf("PutIf(IfMatch) of a large file: %v", err)
	}
	want2 := largeHash(t, 2)
	obj, err = b.Get(c, "large/stream")
	if err != nil {
		t.Fatal(err)
	}
	if got, n := hashObject(t, obj); got != want2 || n != LargeSize || obj.ETag != etag2 {
		t.Fatalf("after a large CAS: %d bytes with SHA-256 %x and ETag %q, want %d bytes with %x and ETag %q", n, got, obj.ETag, LargeSize, want2, etag2)
	}
	// Refused large conditional puts leave the object alone.
	if _, err := b.PutIf(c, "large/stream", largeReader(3), storage.IfAbsent()); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfAbsent) of a large stream over an existing object = %v, want ErrPreconditionFailed", err)
	}
	if _, err := b.PutIf(c, "large/stream", largeReader(3), storage.IfMatch(etag)); !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("PutIf(IfMatch(stale)) of a large stream = %v, want ErrPreconditionFailed", err)
	}
	obj, err = b.Get(c, "large/stream")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := hashObject(t, obj); got != want2 {
		t.Fatal("a refused large conditional put changed the object")
	}
	if err := b.Delete(c, "large/stream"); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, b, "large/stream")
}
