// Package apptest starts mf's real storage parts for tests, the way cmd/mf
// wires them, once for every package's tests: the embedded event log (NATS
// JetStream), a local-directory object store and the catalog folded from
// the log, under one directory, each closed when the test ends. A test
// builds the service it tests (ingest, processor, api) on a Stack; it never
// wires log, catalog and bucket by hand. Logs are discarded unless
// MF_TEST_LOG=1, which writes every part's logs to stderr.
package apptest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// Options configure a Stack. The zero Options is a stack with an empty
// catalog in a temporary directory.
type Options struct {
	// Dir holds the log (Dir/log) and the object store (Dir/objects);
	// "" is a new temporary directory of the test.
	Dir string
	// Provision names provisioning files applied in order once the
	// catalog is open.
	Provision []string
	// Catalog adjusts the catalog's configuration once the log and the
	// object store are open (a CheckDocuments hook built on the bucket).
	Catalog func(s *Stack, cfg *catalog.Config)
}

// Stack is the storage parts of one mf process.
type Stack struct {
	Dir     string
	Log     *eventlog.Log
	Bucket  storage.Bucket
	Catalog *catalog.Catalog
	// Logger is the parts' logger, for the services a test builds.
	Logger *slog.Logger
}

// Logger returns the logger of the tests: discarding, or with
// MF_TEST_LOG=1 writing debug lines to stderr.
func Logger() *slog.Logger {
	if os.Getenv("MF_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Start opens the parts; the test fails when one cannot be opened.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &Stack{Dir: opts.Dir, Logger: Logger()}
	if s.Dir == "" {
		s.Dir = t.TempDir()
	}
	lcfg := eventlog.DefaultConfig()
	lcfg.Dir = filepath.Join(s.Dir, "log")
	lg, err := eventlog.Open(ctx, lcfg, s.Logger)
	if err != nil {
		t.Fatalf("apptest: cannot open the log: %v", err)
	}
	t.Cleanup(func() { lg.Close() })
	s.Log = lg
	s.Bucket = OpenBucket(t, filepath.Join(s.Dir, "objects"))

	sub, err := lg.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatalf("apptest: cannot subscribe to the catalog: %v", err)
	}
	ccfg := catalog.DefaultConfig()
	if opts.Catalog != nil {
		opts.Catalog(s, &ccfg)
	}
	cat, err := catalog.Open(ctx, ccfg, catalog.Log{
		Publisher: lg.Publisher(), Subscriber: sub, LastSeq: lg.LastSeq, Seq: eventlog.Seq,
	}, s.Logger)
	if err != nil {
		t.Fatalf("apptest: cannot open the catalog: %v", err)
	}
	t.Cleanup(func() { cat.Close() })
	s.Catalog = cat
	for _, f := range opts.Provision {
		s.Provision(t, f)
	}
	return s
}

// Provision applies a provisioning file to the catalog and returns its
// bytes.
func (s *Stack) Provision(t testing.TB, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	s.Apply(t, file, data)
	return data
}

// Apply applies provisioning data (named name in failures).
func (s *Stack) Apply(t testing.TB, name string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Catalog.Apply(ctx, data); err != nil {
		t.Fatalf("apptest: cannot apply %s: %v", name, err)
	}
}

// OpenBucket opens a local-directory object store at dir, closed when
// the test ends.
func OpenBucket(t testing.TB, dir string) storage.Bucket {
	t.Helper()
	cfg := storage.DefaultConfig()
	cfg.Dir = dir
	b, err := storage.Open(context.Background(), cfg, Logger())
	if err != nil {
		t.Fatalf("apptest: cannot open the object store at %s: %v", dir, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
