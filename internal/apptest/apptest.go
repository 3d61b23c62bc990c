// Package apptest starts mf's real storage parts for tests, the way cmd/mf
// wires them, once for every package's tests: the embedded event log (NATS
// JetStream), a local-directory object store and the catalog folded from
// the log, under one directory. A test builds the service it tests
// (ingest, processor, api) on a Stack; it never wires log, catalog and
// bucket by hand. Start opens a Stack for a test and closes it when the
// test ends; Open and Close do the same for a program (the flag load
// generator builds its /v1 service on ingest/internal/flagstack, itself
// built on a Stack). Logs are discarded unless MF_TEST_LOG=1, which writes
// every part's logs to stderr.
//
// It imports storage only: any package's tests may use it.
package apptest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// Options configure a Stack. The zero Options is, for Start, a stack
// with an empty catalog in a temporary directory of the test.
type Options struct {
	// Dir holds the log (Dir/log) and the object store (Dir/objects);
	// "" is a new temporary directory of the test (Start), required by
	// Open unless Shared is set.
	Dir string
	// Shared, when set, is the first process of a deployment: this Stack
	// uses its log and object store (and leaves them open at Close) and
	// folds a catalog of its own from the log, as a second process does.
	Shared *Stack
	// Log adjusts the log's configuration (partitions) before it opens.
	Log func(*eventlog.Config)
	// Catalog adjusts the catalog's configuration once the log and the
	// object store are open (a CheckDocuments hook built on the bucket).
	// Something it opens that the Stack should close goes to s.OnClose.
	Catalog func(s *Stack, cfg *catalog.Config) error
	// Provision names provisioning files applied in order once the
	// catalog is open.
	Provision []string
	// Logger receives every part's logs; nil: Logger().
	Logger *slog.Logger
}

// Stack is the storage parts of one mf process.
type Stack struct {
	Dir     string
	Log     *eventlog.Log
	Bucket  storage.Bucket
	Catalog *catalog.Catalog
	// Logger is the parts' logger, for the services a test builds.
	Logger *slog.Logger

	closers []func() error // run in reverse order
}

// Logger returns the logger of the tests: discarding, or with
// MF_TEST_LOG=1 writing debug lines to stderr.
func Logger() *slog.Logger {
	if os.Getenv("MF_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Start opens the parts for a test, closed when the test ends; the test
// fails when one cannot be opened.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if opts.Dir == "" && opts.Shared == nil {
		opts.Dir = t.TempDir()
	}
	provision := opts.Provision
	opts.Provision = nil
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, f := range provision {
		s.Provision(t, f)
	}
	return s
}

// Open opens the parts; Close closes them. ctx bounds the opening only.
func Open(ctx context.Context, opts Options) (st *Stack, err error) {
	s := &Stack{Dir: opts.Dir, Logger: opts.Logger}
	if s.Logger == nil {
		s.Logger = Logger()
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if opts.Shared != nil {
		s.Dir, s.Log, s.Bucket = opts.Shared.Dir, opts.Shared.Log, opts.Shared.Bucket
	} else {
		if s.Dir == "" {
			return nil, errors.New("Options.Dir is required without Options.Shared")
		}
		lcfg := eventlog.DefaultConfig()
		lcfg.Dir = filepath.Join(s.Dir, "log")
		if opts.Log != nil {
			opts.Log(&lcfg)
		}
		lg, err := eventlog.Open(ctx, lcfg, s.Logger)
		if err != nil {
			return nil, fmt.Errorf("cannot open the log: %w", err)
		}
		s.Log = lg
		s.OnClose(lg.Close)
		b, err := openBucket(filepath.Join(s.Dir, "objects"), s.Logger)
		if err != nil {
			return nil, err
		}
		s.Bucket = b
		s.OnClose(b.Close)
	}

	sub, err := s.Log.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe to the catalog: %w", err)
	}
	s.OnClose(sub.Close)
	ccfg := catalog.DefaultConfig()
	if opts.Catalog != nil {
		if err := opts.Catalog(s, &ccfg); err != nil {
			return nil, err
		}
	}
	cat, err := catalog.Open(ctx, ccfg, catalog.Log{
		Publisher: s.Log.Publisher(), Subscriber: sub, LastSeq: s.Log.LastSeq, Seq: eventlog.Seq,
	}, s.Logger)
	if err != nil {
		return nil, fmt.Errorf("cannot open the catalog: %w", err)
	}
	s.Catalog = cat
	s.OnClose(cat.Close)
	for _, f := range opts.Provision {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if _, err := cat.Apply(ctx, data); err != nil {
			return nil, fmt.Errorf("cannot apply %s: %w", f, err)
		}
	}
	return s, nil
}

// OnClose has Close run f, before what the Stack opened so far is closed.
func (s *Stack) OnClose(f func() error) { s.closers = append(s.closers, f) }

// Close closes every part the Stack opened, in reverse order of their
// opening; a second Close does nothing. A Stack sharing another's log and
// object store leaves them open.
func (s *Stack) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
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
	b, err := openBucket(dir, Logger())
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func openBucket(dir string, logger *slog.Logger) (storage.Bucket, error) {
	cfg := storage.DefaultConfig()
	cfg.Dir = dir
	b, err := storage.Open(context.Background(), cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot open the object store at %s: %w", dir, err)
	}
	return b, nil
}
