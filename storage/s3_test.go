package storage_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/storagetest"
)

// openS3 opens the S3 bucket of storeURL, closed when t ends.
func openS3(t testing.TB, storeURL string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(t.Context(), storage.Config{Store: storeURL}, testLogger(t))
	if err != nil {
		t.Fatalf("cannot open S3 bucket: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// TestS3Acceptance runs the acceptance test on a real MinIO server (or on
// the S3 server of MF_TEST_S3), one new bucket per subtest.
func TestS3Acceptance(t *testing.T) {
	server := storagetest.StartMinIO(t)
	storagetest.Acceptance(t, func(t *testing.T) storage.Bucket {
		return openS3(t, storagetest.FreshBucket(t, server))
	})
}

// Open creates a missing bucket, and opens an existing one.
func TestS3OpenCreatesBucket(t *testing.T) {
	storeURL := storagetest.StartMinIO(t)
	b := openS3(t, storeURL)
	if _, err := b.Put(t.Context(), "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	again := openS3(t, storeURL)
	data, _, err := storage.ReadAll(t.Context(), again, "k")
	if err != nil || string(data) != "v" {
		t.Fatalf("through a second Open: %q, %v; want \"v\"", data, err)
	}
}

// Two clients of one bucket race like two processes.
func TestS3TwoClients(t *testing.T) {
	storeURL := storagetest.StartMinIO(t)
	a, b := openS3(t, storeURL), openS3(t, storeURL)
	storagetest.CASCounter(t, []storage.Bucket{a, b}, "shared/counter", 8, 10)
}

func TestConfigValidate(t *testing.T) {
	f, err := os.Open("testdata/store-urls.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		storeURL, want, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("testdata/store-urls.txt: no tab in %q", line)
		}
		n++
		err := storage.Config{Store: storeURL}.Validate()
		switch {
		case want == "ok" && err != nil:
			t.Errorf("%s: %v, want valid", storeURL, err)
		case want != "ok" && err == nil:
			t.Errorf("%s: valid, want an error with %q", storeURL, want)
		case want != "ok" && !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v, want an error with %q", storeURL, err, want)
		case err != nil && strings.Contains(err.Error(), "hunter2xyz"):
			t.Errorf("%s: the error repeats the secret key: %v", storeURL, err)
		}
	}
	if n < 10 {
		t.Fatalf("only %d cases read", n)
	}
	if err := (storage.Config{}).Validate(); err == nil {
		t.Error("an empty Config is valid, want an error asking for a store")
	}
	if err := storage.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig is invalid: %v", err)
	}
}

// Streams of unknown length around the 16 MiB part size go in one request
// or as a multipart upload; both keep every byte.
func TestS3StreamsAroundPartSize(t *testing.T) {
	b := openS3(t, storagetest.StartMinIO(t))
	const part = 16 << 20 // s3PartSize
	for _, size := range []int{part - 1, part, part + 1} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i / 4099)
		}
		key := fmt.Sprintf("stream/%d", size)
		etag, err := b.PutIf(t.Context(), key, struct{ io.Reader }{bytes.NewReader(data)}, storage.IfAbsent())
		if err != nil {
			t.Fatalf("PutIf of a %d-byte stream: %v", size, err)
		}
		got, attrs, err := storage.ReadAll(t.Context(), b, key)
		if err != nil || !bytes.Equal(got, data) || attrs.ETag != etag {
			t.Fatalf("a %d-byte stream came back as %d bytes (equal: %v), ETag %q (put returned %q), %v",
				size, len(got), bytes.Equal(got, data), attrs.ETag, etag, err)
		}
	}
}

// TestS3Unavailable: while the store is down (its port refuses
// connections), reads, writes and lists fail with ErrUnavailable; a full
// drive and a missing object are other errors; once it is back the same
// calls succeed.
func TestS3Unavailable(t *testing.T) {
	store := storagetest.FaultyStoreProxy(t, storagetest.StartMinIO(t))
	b := openS3(t, store.URL)
	ctx := t.Context()
	if _, err := b.Put(ctx, "a/one", strings.NewReader("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Attributes(ctx, "a/missing"); !errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("a missing object: %v, want ErrNotFound only", err)
	}
	store.SetFull(true)
	if _, err := b.Put(ctx, "a/two", strings.NewReader("2")); err == nil || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("a put on full drives: %v, want a refusal that is not ErrUnavailable", err)
	}
	store.SetFull(false)

	store.Down()
	calls := map[string]func() error{
		"Attributes": func() error { _, err := b.Attributes(ctx, "a/one"); return err },
		"Put":        func() error { _, err := b.Put(ctx, "a/two", strings.NewReader("2")); return err },
		"List":       func() error { return b.List(ctx, "a/", func(storage.ObjectInfo) error { return nil }) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s while the store is down: %v, want ErrUnavailable", name, err)
		}
	}
	store.Up()
	for name, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s once the store is back: %v", name, err)
		}
	}
}
