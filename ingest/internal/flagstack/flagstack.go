// Package flagstack runs the /v1 service on real parts, the way cmd/mf
// wires them: the embedded event log (NATS JetStream) and a local-directory
// object store under one directory, the catalog folded from the log with
// the flag compiler as its CheckDocuments hook, the flag documents and the
// ingest server on a loopback listener. The flag tests, the Go client's
// examples and the flag load generator use it. A second Stack on the same
// Log and Bucket is a second process.
package flagstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// Options configure a Stack. Dir is required unless Shared is set.
type Options struct {
	// Dir holds the log (Dir/log) and the object store (Dir/objects).
	Dir string
	// Shared, when set, is the first process of a deployment: this Stack
	// uses its log and object store and has its own catalog, flag documents
	// and server (a second process).
	Shared *Stack
	// Provision is a provisioning file applied once the catalog is open.
	Provision []byte
	// Ingest adjusts the ingest configuration (rate limits, freshness).
	Ingest func(*ingest.Config)
	// Flags adjusts the flag documents' configuration (clock, gzip).
	Flags func(*ingest.FlagDocumentsConfig)
	// CompilationCache shares the compiled evaluator module between
	// stacks; nil compiles it for this Stack.
	CompilationCache wazero.CompilationCache
	// Membership answers segment lookups (nil: every ref unavailable).
	Membership ingest.MembershipSource
	// Clock is the server's clock (nil: time.Now).
	Clock func() time.Time
	// Logger receives every part's logs (nil: discarded).
	Logger *slog.Logger
}

// Stack is one running process of the /v1 service.
type Stack struct {
	Log     *eventlog.Log
	Bucket  storage.Bucket
	Catalog *catalog.Catalog
	Flags   *ingest.FlagDocuments
	Server  *ingest.Server
	// URL is the service's base address, http://127.0.0.1:port.
	URL string

	closers []func() error // run in reverse order
}

// Start builds and starts a Stack. ctx bounds the start only.
func Start(ctx context.Context, opts Options) (st *Stack, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Stack{}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if opts.Shared != nil {
		s.Log, s.Bucket = opts.Shared.Log, opts.Shared.Bucket
	} else {
		if opts.Dir == "" {
			return nil, errors.New("flagstack: Options.Dir is required")
		}
		b, err := storage.Open(ctx, storage.Config{Dir: filepath.Join(opts.Dir, "objects")}, logger)
		if err != nil {
			return nil, fmt.Errorf("cannot open the object store: %w", err)
		}
		s.Bucket = b
		s.closers = append(s.closers, b.Close)
		lcfg := eventlog.DefaultConfig()
		lcfg.Dir = filepath.Join(opts.Dir, "log")
		lg, err := eventlog.Open(ctx, lcfg, logger)
		if err != nil {
			return nil, fmt.Errorf("cannot open the log: %w", err)
		}
		s.Log = lg
		s.closers = append(s.closers, lg.Close)
	}

	fcfg := ingest.DefaultFlagDocumentsConfig()
	fcfg.Engine.Logger = logger
	fcfg.Engine.CompilationCache = opts.CompilationCache
	if opts.Flags != nil {
		opts.Flags(&fcfg)
	}
	flags, err := ingest.NewFlagDocuments(ctx, fcfg, s.Bucket, logger)
	if err != nil {
		return nil, err
	}
	s.Flags = flags
	s.closers = append(s.closers, func() error { return flags.Close(context.Background()) })

	sub, err := s.Log.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe to the catalog: %w", err)
	}
	s.closers = append(s.closers, sub.Close)
	ccfg := catalog.DefaultConfig()
	ccfg.CheckDocuments = flags.CheckDocuments
	cat, err := catalog.Open(ctx, ccfg, catalog.Log{
		Publisher: s.Log.Publisher(), Subscriber: sub, LastSeq: s.Log.LastSeq, Seq: eventlog.Seq,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot open the catalog: %w", err)
	}
	s.Catalog = cat
	s.closers = append(s.closers, cat.Close)
	if opts.Provision != nil {
		if _, err := cat.Apply(ctx, opts.Provision); err != nil {
			return nil, fmt.Errorf("cannot apply the provisioning file: %w", err)
		}
	}

	icfg := ingest.DefaultConfig()
	if opts.Ingest != nil {
		opts.Ingest(&icfg)
	}
	srv, err := ingest.NewServer(ctx, icfg, ingest.Deps{
		Catalog: cat, Log: s.Log.Publisher(), Bucket: s.Bucket, Clock: opts.Clock,
		Flags: flags, Membership: opts.Membership,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot build the ingest server: %w", err)
	}
	s.Server = srv
	s.closers = append(s.closers, srv.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen on loopback: %w", err)
	}
	s.URL = "http://" + ln.Addr().String()
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.App().Listener(ln) }()
	s.closers = append(s.closers, func() error {
		err := srv.App().ShutdownWithTimeout(10 * time.Second)
		// A Shutdown that came before the serving goroutine began serving
		// stops nothing: closing the listener ends that serve too.
		_ = ln.Close()
		<-served
		return err
	})
	return s, nil
}

// Close stops the server and closes every part the Stack opened, in
// reverse order of their start. A Stack sharing another's log and object
// store leaves them open.
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
