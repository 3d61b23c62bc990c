// Package flagstack runs the /v1 service on real parts, the way cmd/mf
// wires them: the storage parts of internal/apptest (the embedded event
// log, a local-directory object store under one directory, the catalog
// folded from the log) with the flag compiler as the catalog's
// CheckDocuments hook, the flag documents and the ingest server on a
// loopback listener. The flag tests, the Go client's
// examples and the flag load generator use it. A second Stack on the same
// Log and Bucket is a second process.
package flagstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/internal/apptest"
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
	// Parts are the process's storage parts (apptest): the log, the
	// object store and the catalog, with the flag compiler as its
	// CheckDocuments hook.
	Parts   *apptest.Stack
	Log     *eventlog.Log
	Bucket  storage.Bucket
	Catalog *catalog.Catalog
	Flags   *ingest.FlagDocuments
	Server  *ingest.Server
	// URL is the service's base address, http://127.0.0.1:port.
	URL string
}

// Start builds and starts a Stack. ctx bounds the start only.
func Start(ctx context.Context, opts Options) (st *Stack, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Stack{}
	popts := apptest.Options{Dir: opts.Dir, Logger: logger, Catalog: func(parts *apptest.Stack, ccfg *catalog.Config) error {
		fcfg := ingest.DefaultFlagDocumentsConfig()
		fcfg.Engine.Logger = logger
		fcfg.Engine.CompilationCache = opts.CompilationCache
		if opts.Flags != nil {
			opts.Flags(&fcfg)
		}
		flags, err := ingest.NewFlagDocuments(ctx, fcfg, parts.Bucket, logger)
		if err != nil {
			return err
		}
		s.Flags = flags
		parts.OnClose(func() error { return flags.Close(context.Background()) })
		ccfg.CheckDocuments = flags.CheckDocuments
		return nil
	}}
	if opts.Shared != nil {
		popts.Shared = opts.Shared.Parts
	}
	parts, err := apptest.Open(ctx, popts)
	if err != nil {
		return nil, fmt.Errorf("flagstack: %w", err)
	}
	s.Parts, s.Log, s.Bucket, s.Catalog = parts, parts.Log, parts.Bucket, parts.Catalog
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if opts.Provision != nil {
		if _, err := s.Catalog.Apply(ctx, opts.Provision); err != nil {
			return nil, fmt.Errorf("cannot apply the provisioning file: %w", err)
		}
	}

	icfg := ingest.DefaultConfig()
	if opts.Ingest != nil {
		opts.Ingest(&icfg)
	}
	srv, err := ingest.NewServer(ctx, icfg, ingest.Deps{
		Catalog: s.Catalog, Log: s.Log.Publisher(), Bucket: s.Bucket, Clock: opts.Clock,
		Flags: s.Flags, Membership: opts.Membership,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot build the ingest server: %w", err)
	}
	s.Server = srv
	s.Parts.OnClose(srv.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen on loopback: %w", err)
	}
	s.URL = "http://" + ln.Addr().String()
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.App().Listener(ln) }()
	s.Parts.OnClose(func() error {
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
func (s *Stack) Close() error { return s.Parts.Close() }
