package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/wasm"
)

// Flag delivery: the compiled flag documents of every project, kept current
// with the catalog (this file), their compilation (flags_compile.go), the
// four flag endpoints (flags_handlers.go), segment membership
// (flags_membership.go) and preview tokens (flags_preview.go). The formats
// are in docs/flag-documents.md.

// Sentinel errors of flag delivery.
var (
	// ErrFlagNotFound: the project has no flag with that key.
	ErrFlagNotFound = errors.New("flag not found")
	// ErrNotDraftExperiment: the flag is not an unstarted draft code
	// experiment (a flag the website reads, with `e` set, `off` 1 and not
	// listed in `orig`), so it cannot be previewed.
	ErrNotDraftExperiment = errors.New("flag is not an unstarted draft code experiment")
	// ErrFlagDocumentsClosed: the FlagDocuments have been closed.
	ErrFlagDocumentsClosed = errors.New("flag documents closed")
)

// FlagDocumentsConfig configures FlagDocuments. Start from
// DefaultFlagDocumentsConfig.
type FlagDocumentsConfig struct {
	// Engine configures the WebAssembly evaluator that computes the values
	// view (the module browsers run). Default: wasm.DefaultConfig() with two
	// instances (compilation is sequential; the hook and the follower may
	// run at once).
	Engine wasm.Config
	// Metrics counts the documents compiled (NewMetrics); nil: nothing.
	Metrics *Metrics
	// GzipMinBytes: documents at least this large are also kept
	// gzip-compressed and sent so to clients that accept gzip. Negative
	// disables compression. Default 1024.
	GzipMinBytes int
	// CompileTimeout bounds the compilation of one project's documents.
	// Default 10s.
	CompileTimeout time.Duration
	// RetryDelay is the pause before compiling again projects whose
	// compilation failed (their previous documents are served meanwhile).
	// Default 1s.
	RetryDelay time.Duration
	// Clock gives the compile time `at`; nil means time.Now.
	Clock func() time.Time
}

// DefaultFlagDocumentsConfig returns the defaults documented on
// FlagDocumentsConfig.
func DefaultFlagDocumentsConfig() FlagDocumentsConfig {
	ecfg := wasm.DefaultConfig()
	ecfg.Instances = min(2, max(1, runtime.GOMAXPROCS(0)))
	return FlagDocumentsConfig{
		Engine:         ecfg,
		GzipMinBytes:   1024,
		CompileTimeout: 10 * time.Second,
		RetryDelay:     time.Second,
	}
}

// Validate reports the first setting that cannot work.
func (c FlagDocumentsConfig) Validate() error {
	if err := c.Engine.Validate(); err != nil {
		return fmt.Errorf("flag documents config: Engine: %w", err)
	}
	switch {
	case c.CompileTimeout <= 0:
		return fmt.Errorf("flag documents config: CompileTimeout must be positive, not %s", c.CompileTimeout)
	case c.RetryDelay <= 0:
		return fmt.Errorf("flag documents config: RetryDelay must be positive, not %s", c.RetryDelay)
	}
	return nil
}

// stateSource is what FlagDocuments follows: the live catalog.
type stateSource interface {
	State() *catalog.State
}

// FlagDocuments compiles the flag documents of every project (browser,
// values and server views, canonical JSON) and keeps them current with the
// catalog: after Follow, every change of the catalog recompiles the
// projects whose compiled flags changed, in the background, and swaps the
// new documents in atomically. It is also the catalog's CheckDocuments hook,
// refusing a provisioning change that would make a document exceed its size
// cap. Safe for concurrent use. Close it after the servers that use it.
type FlagDocuments struct {
	cfg    FlagDocumentsConfig
	logger *slog.Logger
	// engine is set, or engineErr, when engineReady closes; use eng().
	engine      *wasm.Engine
	engineErr   error
	engineReady chan struct{}
	clock       func() time.Time
	// bucket records compile times shared by every process (nil: none).
	bucket storage.Bucket

	snap  atomic.Pointer[flagSnapshot]
	empty *projectDocs

	mu        sync.Mutex
	following stateSource
	closed    bool
	stop      chan struct{}
	done      chan struct{}

	// checked maps a project to the compiled flags that last passed the
	// size caps, so the hook checks only projects that changed.
	checkMu sync.Mutex
	checked map[string]*catalog.ProjectFlags
}

// flagSnapshot is the documents of every project compiled from one State.
type flagSnapshot struct {
	state    *catalog.State
	projects map[string]*projectDocs
	// failed lists projects whose compilation failed (served from the
	// previous snapshot, compiled again after RetryDelay).
	failed map[string]bool
}

// projectDocs are one project's documents.
type projectDocs struct {
	flags                   *catalog.ProjectFlags
	browser, values, server *flagDocument
	// browserRefs and serverRefs are the segment refs each definitions
	// view tests, sorted (the refs of membership answers).
	browserRefs, serverRefs []string
}

// flagDocument is one compiled document, serialized once.
type flagDocument struct {
	body []byte
	gzip []byte // body gzip-compressed, nil when not kept
	// sum is the SHA-256 of the document's content without its `at`: equal
	// sums, equal documents but for the compile time.
	sum  [32]byte
	etag string
	at   int64
}

// NewFlagDocuments starts the WebAssembly evaluator and returns
// FlagDocuments that serve empty documents until Follow. bucket, the
// object store every process shares, records each document's compile time
// so that all processes serve the same `at` (nil: each process uses its
// own). logger may be nil.
func NewFlagDocuments(ctx context.Context, cfg FlagDocumentsConfig, bucket storage.Bucket, logger *slog.Logger) (*FlagDocuments, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &FlagDocuments{
		cfg:         cfg,
		logger:      logger.With("component", "flags"),
		engineReady: make(chan struct{}),
		clock:       cfg.Clock,
		bucket:      bucket,
		checked:     map[string]*catalog.ProjectFlags{},
	}
	// Compiling the WebAssembly module takes about a second; do it in the
	// background so that the process is ready for batches at once. The
	// first use of the evaluator waits for it.
	go func() {
		defer close(d.engineReady)
		start := time.Now()
		d.engine, d.engineErr = wasm.New(context.WithoutCancel(ctx), cfg.Engine)
		if d.engineErr != nil {
			d.engineErr = fmt.Errorf("cannot start the evaluator for flag documents: %w", d.engineErr)
			d.logger.Error("flag documents: evaluator unavailable", "err", d.engineErr)
			return
		}
		d.logger.Debug("flag documents: evaluator compiled", "took", time.Since(start).Round(time.Millisecond))
	}()
	if d.clock == nil {
		d.clock = time.Now
	}
	d.empty = d.emptyDocs()
	return d, nil
}

// Follow compiles every project of the catalog's current State, then keeps
// the documents current in the background until Close. It returns once the
// first compilation is done. Following a second catalog is an error;
// following the same one again does nothing.
func (d *FlagDocuments) Follow(ctx context.Context, cat stateSource) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return ErrFlagDocumentsClosed
	case d.following == cat:
		return nil
	case d.following != nil:
		return errors.New("flag documents already follow another catalog; build one FlagDocuments per catalog")
	}
	d.refresh(ctx, cat.State())
	d.following = cat
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.run(cat)
	return nil
}

// Close stops following the catalog and closes the evaluator.
func (d *FlagDocuments) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	stop, done := d.stop, d.done
	d.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	<-d.engineReady
	if d.engine == nil {
		return nil
	}
	if err := d.engine.Close(ctx); err != nil {
		return fmt.Errorf("cannot close the flag documents' evaluator: %w", err)
	}
	return nil
}

// eng returns the evaluator, waiting for its compilation to finish.
func (d *FlagDocuments) eng(ctx context.Context) (*wasm.Engine, error) {
	select {
	case <-d.engineReady:
		return d.engine, d.engineErr
	case <-ctx.Done():
		return nil, fmt.Errorf("the evaluator for flag documents is still compiling: %w", ctx.Err())
	}
}

// run recompiles on every change of the catalog until Close.
func (d *FlagDocuments) run(cat stateSource) {
	defer close(d.done)
	for {
		st := cat.State()
		var timer *time.Timer
		var retry <-chan time.Time
		if d.refresh(context.Background(), st) {
			timer = time.NewTimer(d.cfg.RetryDelay)
			retry = timer.C
		}
		select {
		case <-st.Stale():
		case <-retry:
		case <-d.stop:
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// refresh brings the snapshot up to st: projects whose compiled flags are
// the same as in the current snapshot keep their documents, the others are
// compiled. It reports whether some project failed to compile.
func (d *FlagDocuments) refresh(ctx context.Context, st *catalog.State) bool {
	old := d.snap.Load()
	if old != nil && old.state == st && len(old.failed) == 0 {
		return false
	}
	start := time.Now()
	next := &flagSnapshot{state: st, projects: map[string]*projectDocs{}}
	compiled := 0
	for _, org := range st.Organizations() {
		for _, p := range st.Projects(org.ID) {
			pf := st.CompiledFlags(p.ID)
			var prev *projectDocs
			if old != nil {
				prev = old.projects[p.ID]
			}
			if prev != nil && prev.flags == pf && !old.failed[p.ID] {
				next.projects[p.ID] = prev
				continue
			}
			pd, err := d.compileProject(ctx, st, p.ID, pf, prev, d.clock().UnixMilli())
			if err != nil {
				d.logger.Error("flags: cannot compile a project's flag documents; serving the previous ones",
					"project", p.ID, "err", err)
				if next.failed == nil {
					next.failed = map[string]bool{}
				}
				next.failed[p.ID] = true
				if prev != nil {
					next.projects[p.ID] = prev
				}
				continue
			}
			next.projects[p.ID] = pd
			compiled++
			if len(pd.browser.body) > catalog.MaxBrowserDocument || len(pd.values.body) > catalog.MaxValuesDocument ||
				len(pd.server.body) > catalog.MaxServerDocument {
				// The CheckDocuments hook refuses such changes; a catalog
				// applied without it may still hold one.
				d.logger.Warn("flags: a document exceeds its size cap; serving it anyway", "project", p.ID,
					"browser", len(pd.browser.body), "values", len(pd.values.body), "server", len(pd.server.body))
			}
		}
	}
	d.snap.Store(next)
	if compiled > 0 {
		d.logger.Debug("flags: documents compiled", "projects", compiled, "version", st.Version(),
			"took", time.Since(start).Round(time.Microsecond))
	}
	return len(next.failed) > 0
}

// project returns a project's documents; a project not compiled yet gets
// documents without flags.
func (d *FlagDocuments) project(id string) *projectDocs {
	if s := d.snap.Load(); s != nil {
		if pd := s.projects[id]; pd != nil {
			return pd
		}
	}
	return d.empty
}

// Version is the catalog version of the documents served now (0 before
// Follow).
func (d *FlagDocuments) Version() uint64 {
	if s := d.snap.Load(); s != nil {
		return s.state.Version()
	}
	return 0
}

// newFlagDocument wraps a document's bytes; sum is its content hash.
func (d *FlagDocuments) newFlagDocument(body []byte, sum [32]byte, at int64) *flagDocument {
	doc := &flagDocument{body: body, sum: sum, at: at, etag: weakETag(sum)}
	if d.cfg.GzipMinBytes >= 0 && len(body) >= d.cfg.GzipMinBytes {
		doc.gzip = gzipBytes(body)
	}
	return doc
}

// weakETag is the ETag of a document: weak, because documents that differ
// only in `at` (compiled by another process, or before a restart) share it,
// and the gzip-compressed form shares it too.
func weakETag(sum [32]byte) string {
	return `W/"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}

// contentSum hashes a document's content: its view and its bytes written
// with `at` 0.
func contentSum(view byte, zeroAt []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{view})
	h.Write(zeroAt)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
