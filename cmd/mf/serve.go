package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/api"
	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// serveMain runs the roles of one process until ctx ends (SIGTERM or
// SIGINT), then drains and shuts down in order. It returns the exit code.
func serveMain(ctx context.Context, roles role, args []string, stdout, stderr io.Writer) int {
	name := map[role]string{rolesAll: "serve", roleIngest: "ingest", roleProcess: "process", roleAPI: "api"}[roles]
	cfg, fs, code := parseConfig(name, args, os.Getenv, stdout, stderr)
	if code >= 0 {
		return code
	}
	if roles != rolesAll && (cfg.Log == "" || cfg.Store == "") {
		fmt.Fprintf(stderr, "mf %s: a role run apart needs a shared external --log nats://… and --store s3://…\n", name)
		return 2
	}
	logger := newLogger(cfg, stderr)
	if flags := unread(name, fs, cfg.specs()); len(flags) > 0 {
		logger.Info("flags that mf "+name+" does not read are ignored", "flags", strings.Join(flags, " "))
	}
	tuneGC(logger)
	s := &service{cfg: cfg, roles: roles, logger: logger, stdout: stdout}
	if err := s.run(ctx); err != nil {
		logger.Error("mf stopped with an error", "err", err)
		return 1
	}
	return 0
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// service is one mf process: the parts its roles need, started in order
// and stopped in reverse.
type service struct {
	cfg    config
	roles  role
	logger *slog.Logger
	stdout io.Writer

	ready     atomic.Bool
	bucket    storage.Bucket
	log       *eventlog.Log
	cat       *catalog.Catalog
	flags     *ingest.FlagDocuments
	reader    *rollups.Reader
	segments  *processor.Segments
	proc      *runningProcessor
	reporting *api.Reporting
	ingest    *ingest.Server
	peers     *ingestPeers // the ingest processes sharing the rate budgets
	servers   []*httpServer
	metrics   *metrics
	adminJobs *api.Jobs // background jobs of the admin API (replays)
	guard     *panicGuard
	health    *health
	stopProbe context.CancelFunc
	closers   []func() error // in the order they must run at shutdown
	provData  []byte
}

// httpServer is one listener with its Fiber app.
type httpServer struct {
	name, addr string
	ln         *gatedListener
	app        *fiber.App
	served     chan error
}

func (s *service) run(ctx context.Context) (err error) {
	start := time.Now()
	defer func() {
		if cerr := s.shutdown(); err == nil {
			err = cerr
		}
	}()
	// Listen first, so that /healthz answers 503 while the parts start.
	for _, l := range []struct {
		name, addr string
		r          role
	}{{"ingest", s.cfg.IngestAddr, roleIngest}, {"api", s.cfg.APIAddr, roleAPI}, {"admin", s.cfg.AdminAddr, roleAPI}} {
		if !s.roles.has(l.r) && !(l.name == "admin" && (s.roles == roleProcess || s.ingestAdmin())) {
			continue
		}
		ln, err := newGatedListener(l.name, l.addr, s.cfg.listenerLimits().maxConns)
		if err != nil {
			return fmt.Errorf("cannot listen on %s address %s: %w", l.name, l.addr, err)
		}
		s.servers = append(s.servers, &httpServer{name: l.name, addr: ln.Addr().String(), ln: ln})
	}
	if err := s.open(ctx); err != nil {
		return err
	}
	if err := s.serveHTTP(); err != nil {
		return err
	}
	s.health.probe(ctx)
	pctx, stopProbe := context.WithCancel(context.WithoutCancel(ctx))
	s.stopProbe = stopProbe
	go s.health.run(pctx)
	s.ready.Store(true)
	s.handleSIGHUP(ctx)
	s.logger.Info("mf is ready", "startup", time.Since(start).Round(time.Millisecond), "roles", s.cfg.rolesString(s.roles))
	s.printBanner()

	select {
	case <-ctx.Done():
		s.logger.Info("mf: shutting down")
	case err := <-s.firstServeError():
		return err
	}
	return nil
}

func (c config) rolesString(r role) string {
	switch r {
	case rolesAll:
		return "ingest,process,api"
	case roleIngest:
		return "ingest"
	case roleProcess:
		return "process"
	default:
		return "api"
	}
}

// open builds the parts below the listeners, in dependency order.
func (s *service) open(ctx context.Context) error {
	if err := s.openMetrics(); err != nil {
		return err
	}
	guard, err := newPanicGuard(s.metrics.reg, s.logger)
	if err != nil {
		return fmt.Errorf("cannot register the panic counter: %w", err)
	}
	s.guard = guard
	bcfg := storage.DefaultConfig()
	bcfg.Store, bcfg.Dir = s.cfg.Store, filepath.Join(s.cfg.Data, "objects")
	b, err := storage.Open(ctx, bcfg, s.logger)
	if err != nil {
		return fmt.Errorf("cannot open the object store: %w", err)
	}
	s.bucket = b
	// Manifests, salts, allowances and refresh tokens rely on conditional
	// writes: a store that ignores them is refused before it is used.
	if err := storage.CheckConditionalWrites(ctx, b); err != nil {
		return fmt.Errorf("the object store %s cannot be used: %w", storeName(s.cfg), err)
	}

	lcfg := eventlog.DefaultConfig()
	lcfg.URL, lcfg.Dir = s.cfg.Log, filepath.Join(s.cfg.Data, "log")
	lcfg.CredsFile, lcfg.NKeyFile = s.cfg.LogCreds, s.cfg.LogNKey
	lcfg.TLSCAFile, lcfg.TLSCertFile, lcfg.TLSKeyFile = s.cfg.LogTLSCA, s.cfg.LogTLSCert, s.cfg.LogTLSKey
	lcfg.Replicas = s.cfg.logReplicas()
	for i := range lcfg.Streams {
		if lcfg.Streams[i].Topic == eventlog.TopicBatches {
			lcfg.Streams[i].MaxBytes = s.cfg.logMaxBytes()
		}
	}
	if s.cfg.Fsync == "always" {
		lcfg.Sync = eventlog.SyncPolicyAlways
	}
	lg, err := eventlog.Open(ctx, lcfg, s.logger)
	if err != nil {
		return fmt.Errorf("cannot open the log: %w", err)
	}
	s.log = lg
	if err := s.metrics.watchLog(lg); err != nil {
		return fmt.Errorf("cannot register the log's metrics: %w", err)
	}
	if s.health, err = newHealth(lg, b, s.metrics.reg, s.logger); err != nil {
		return fmt.Errorf("cannot register the health metrics: %w", err)
	}

	// The flag-document compiler checks every provisioning change against
	// the documents' size caps, so it exists before the catalog.
	fcfg := ingest.DefaultFlagDocumentsConfig()
	fcfg.Metrics = s.metrics.ingest
	flags, err := ingest.NewFlagDocuments(ctx, fcfg, b, s.logger)
	if err != nil {
		return fmt.Errorf("cannot start the flag-document compiler: %w", err)
	}
	s.flags = flags
	cat, err := openCatalog(ctx, lg, flags.CheckDocuments, s.logger)
	if err != nil {
		return err
	}
	s.cat = cat

	if s.cfg.Provision != "" {
		data, err := os.ReadFile(s.cfg.Provision)
		if err != nil {
			return fmt.Errorf("cannot read the provisioning file: %w", err)
		}
		f, err := catalog.Parse(data)
		if err != nil {
			return fmt.Errorf("provisioning file %s: %w", s.cfg.Provision, err)
		}
		res, err := cat.ApplyFile(ctx, f)
		if err != nil {
			return fmt.Errorf("provisioning file %s: %w", s.cfg.Provision, err)
		}
		s.provData = data
		s.logger.Info("provisioning file applied", "file", s.cfg.Provision, "changes", len(res.Changes), "version", res.Version)
	}

	rdcfg := rollups.DefaultReaderConfig()
	if s.roles.has(roleAPI) {
		rdcfg.CacheBytes = s.cfg.apiCacheBytes() / 2
	}
	rd, err := rollups.NewReader(b, rdcfg, s.logger)
	if err != nil {
		return fmt.Errorf("cannot open the tables: %w", err)
	}
	s.reader = rd
	if s.roles.has(roleAPI) {
		if err := s.metrics.watchReader(rd); err != nil {
			return fmt.Errorf("cannot register the reader's metrics: %w", err)
		}
	}
	if s.roles.has(roleIngest) || s.roles.has(roleProcess) {
		segs, err := processor.NewSegments(rd, processor.DefaultSegmentsConfig(), s.logger)
		if err != nil {
			return fmt.Errorf("cannot open segment membership: %w", err)
		}
		s.segments = segs
	}
	if s.roles.has(roleProcess) {
		pcfg := processor.DefaultConfig()
		pcfg.Metrics = s.metrics.proc
		pcfg.Lease.TTL = s.cfg.leaseTTL()
		pcfg.LogRetention = s.cfg.logRetention()
		// Checked often enough that a short retention frees room soon.
		pcfg.PurgeInterval = min(pcfg.PurgeInterval, max(pcfg.LogRetention/4, 500*time.Millisecond))
		proc, err := startProcessor(ctx, pcfg, s.metrics.rollups, lg, b, rd, cat, s.segments, s.logger)
		if err != nil {
			return err
		}
		s.proc = proc
	}

	if s.roles.has(roleAPI) {
		rcfg := api.DefaultReportingConfig()
		rcfg.PublicURL = s.cfg.APIPublicURL
		rcfg.CacheBytes = s.cfg.apiCacheBytes() - rdcfg.CacheBytes
		rep, err := api.NewReporting(ctx, rcfg, api.ReportingDeps{Catalog: cat, Bucket: b, Reader: rd}, s.ready.Load, s.logger)
		if err != nil {
			return fmt.Errorf("cannot start the reporting API: %w", err)
		}
		s.reporting = rep
		if err := s.metrics.watchReporting(rep); err != nil {
			return fmt.Errorf("cannot register the reporting API's metrics: %w", err)
		}
	}

	if s.roles.has(roleIngest) {
		icfg := ingest.DefaultConfig()
		tp, _ := s.cfg.trustedProxies()
		icfg.TrustedProxies = tp
		icfg.GeoIP = s.cfg.GeoIP
		scale, _ := strconv.ParseFloat(s.cfg.RateLimitScale, 64)
		icfg.Limits = icfg.Limits.Scaled(scale)
		icfg.Metrics = s.metrics.ingest
		lim := s.cfg.listenerLimits()
		icfg.ReadTimeout, icfg.IdleTimeout = lim.read, lim.idle
		// On an external log other ingest processes may serve the same
		// deployment: the budgets are divided among the live ones. An
		// embedded log is this process's alone.
		share := ingest.NewShare()
		if !lg.Embedded() {
			lcfg := eventlog.DefaultLeaseConfig()
			lcfg.TTL = s.cfg.leaseTTL()
			peers, err := startIngestPeers(ctx, lg, lcfg, share, s.logger)
			if err != nil {
				return err
			}
			s.peers = peers
		}
		srv, err := ingest.NewServer(ctx, icfg, ingest.Deps{Catalog: cat, Log: lg.Publisher(), Bucket: b, Ready: s.ready.Load,
			Flags: flags, Membership: segmentMembership{s.segments}, Share: share}, s.logger)
		if err != nil {
			return fmt.Errorf("cannot start the ingest service: %w", err)
		}
		s.ingest = srv
	}
	return nil
}

// openCatalog folds the catalog topic of the log into a live Catalog;
// check refuses provisioning changes whose flag documents break a rule.
func openCatalog(ctx context.Context, lg *eventlog.Log, check func(*catalog.State) error, logger *slog.Logger) (*catalog.Catalog, error) {
	sub, err := lg.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe to the catalog: %w", err)
	}
	ccfg := catalog.DefaultConfig()
	ccfg.CheckDocuments = check
	cat, err := catalog.Open(ctx, ccfg, catalog.Log{
		Publisher:  lg.Publisher(),
		Subscriber: sub,
		LastSeq:    lg.LastSeq,
		Seq:        eventlog.Seq,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot load the catalog: %w", err)
	}
	return cat, nil
}

// serveHTTP builds each listener's app and opens its gate.
func (s *service) serveHTTP() error {
	for _, hs := range s.servers {
		var app *fiber.App
		var err error
		switch hs.name {
		case "ingest":
			app = s.ingest.App()
		case "api":
			app = s.reporting.App()
		case "admin":
			acfg := api.DefaultAdminConfig()
			acfg.Token = s.cfg.AdminToken
			acfg.Reporting = s.reporting
			acfg.Metrics = s.metrics.handler()
			imps, err := api.NewImports(api.DefaultImportConfig(), s.bucket, s.cat, nil)
			if err != nil {
				return fmt.Errorf("cannot build the import store: %w", err)
			}
			acfg.Imports = imps
			rp := replayer{bucket: s.bucket, log: s.log, cat: s.cat, logger: s.logger}
			acfg.Replay, acfg.StartReplay, acfg.Jobs = rp.replay, rp.start, s.jobs()
			acfg.ReloadGeoIP = s.adminReloadGeoIP()
			s.privacyHooks(&acfg)
			acfg.IssuePreviewToken = func(ctx context.Context, project, flag string) (string, time.Time, error) {
				tok, err := ingest.IssuePreviewToken(ctx, s.bucket, s.cat.State(), project, flag, time.Now())
				switch {
				case errors.Is(err, ingest.ErrFlagNotFound):
					err = fmt.Errorf("%w: %v", api.ErrNotFound, err)
				case errors.Is(err, ingest.ErrNotDraftExperiment):
					err = fmt.Errorf("%w: %v", api.ErrRefused, err)
				}
				return tok.Token, tok.ExpiresAt, err
			}
			app, err = api.NewAdmin(acfg, s.cat, s.isReady, s.logger)
		}
		if err != nil {
			return fmt.Errorf("cannot build the %s API: %w", hs.name, err)
		}
		s.cfg.listenerLimits().apply(app.Server())
		s.healthz(hs.name, app.Server())
		s.metrics.http.instrument(hs.name, app)
		s.guard.guard(hs.name, app)
		if err := s.metrics.watchListener(hs.name, hs.ln); err != nil {
			return fmt.Errorf("cannot register the %s listener's metrics: %w", hs.name, err)
		}
		hs.app, hs.served = app, make(chan error, 1)
		go func(hs *httpServer) { hs.served <- hs.app.Listener(hs.ln) }(hs)
		hs.ln.open()
	}
	return nil
}

// isReady is the admin listener's readiness: the process is started and,
// in `mf process`, the processor runs (it consumes the log, or waits as a
// standby while another process holds the processor lease).
func (s *service) isReady() bool {
	if !s.ready.Load() {
		return false
	}
	return s.roles != roleProcess || s.proc.p.Ready()
}

func (s *service) firstServeError() <-chan error {
	out := make(chan error, 1)
	for _, hs := range s.servers {
		go func(hs *httpServer) {
			if hs.served == nil {
				return
			}
			if err := <-hs.served; err != nil {
				out <- fmt.Errorf("%s listener on %s failed: %w", hs.name, hs.addr, err)
			}
		}(hs)
	}
	return out
}

// shutdown drains in-flight requests, then stops the parts in reverse order
// of their start, so that what was consumed is committed before the log
// closes.
func (s *service) shutdown() error {
	s.ready.Store(false)
	if s.stopProbe != nil {
		s.stopProbe()
	}
	var errs []error
	for _, hs := range s.servers {
		if hs.app != nil {
			// Connections that never carried a request are closed as
			// the drain goes (a request still on its way on one has
			// had half a second to show its first byte).
			stop := make(chan struct{})
			go func() {
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					if n := hs.ln.closeUnused(500 * time.Millisecond); n > 0 {
						s.logger.Debug("closed connections that never carried a request", "listener", hs.name, "connections", n)
					}
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			}()
			err := hs.app.ShutdownWithTimeout(20 * time.Second)
			close(stop)
			if err != nil {
				errs = append(errs, fmt.Errorf("cannot drain the %s listener: %w", hs.name, err))
			}
		}
		_ = hs.ln.Close()
	}
	if s.adminJobs != nil {
		s.adminJobs.Close() // before the stores they write close
	}
	if s.ingest != nil {
		if err := s.ingest.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.peers != nil {
		if err := s.peers.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.proc != nil {
		// What was consumed is committed before the log closes.
		if err := s.proc.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.reporting != nil {
		if err := s.reporting.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cat != nil {
		if err := s.cat.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.flags != nil {
		// Nothing is lost when the evaluator is still busy (a document
		// check of a start on a loaded machine): say so, exit 0.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.flags.Close(ctx); err != nil {
			s.logger.Warn("the flag-document evaluator did not close in time", "err", err)
		}
		cancel()
	}
	if s.log != nil {
		if err := s.log.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.bucket != nil {
		if err := s.bucket.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// printBanner tells a person where mf listens and, after provisioning, the
// keys to use (read from the file: the catalog keeps secrets only hashed).
func (s *service) printBanner() {
	w := s.stdout
	fmt.Fprintln(w, "mf is ready")
	for _, hs := range s.servers {
		path := map[string]string{"ingest": "/v1", "api": "/api/v1", "admin": "/admin/v1"}[hs.name]
		fmt.Fprintf(w, "  %-8s http://%s%s\n", hs.name, hs.addr, path)
		if hs.name == "api" {
			fmt.Fprintf(w, "  %-8s http://%s/ (sign in with an API key)\n", "dashboard", hs.addr)
		}
	}
	if s.provData == nil {
		return
	}
	var f struct {
		Users []struct {
			Name    string
			APIKeys []struct{ Token string } `json:"apiKeys"`
		}
		Organizations []struct {
			Projects []struct {
				ID, Name string
				Sources  []struct{ Name, Kind, Mode, Key string }
			}
		}
	}
	if json.Unmarshal(s.provData, &f) != nil {
		return
	}
	fmt.Fprintf(w, "provisioned from %s:\n", s.cfg.Provision)
	for _, o := range f.Organizations {
		for _, p := range o.Projects {
			fmt.Fprintf(w, "  project %q  id %s\n", p.Name, p.ID)
			for _, src := range p.Sources {
				kind, key := "website key", src.Key
				if src.Kind == catalog.KindServer {
					kind, key = "secret key ", s.shownSecret(src.Key)
				}
				fmt.Fprintf(w, "    %s  %s  (%s, %s)\n", kind, key, src.Name, src.Mode)
			}
		}
	}
	var pat string
	for _, u := range f.Users {
		for _, k := range u.APIKeys {
			fmt.Fprintf(w, "  API key of %s: %s\n", u.Name, s.shownSecret(k.Token))
			if pat == "" {
				pat = k.Token
			}
		}
	}
	// A first try of each side, when this process serves both.
	var ingestAddr, apiAddr, webKey, project string
	for _, hs := range s.servers {
		switch hs.name {
		case "ingest":
			ingestAddr = hs.addr
		case "api":
			apiAddr = hs.addr
		}
	}
	for _, o := range f.Organizations {
		for _, p := range o.Projects {
			for _, src := range p.Sources {
				if webKey == "" && src.Kind == catalog.KindWebsite {
					webKey, project = src.Key, p.ID
				}
			}
		}
	}
	if ingestAddr != "" && apiAddr != "" && webKey != "" && pat != "" {
		fmt.Fprintln(w, "try:")
		// A browser's User-Agent: curl's own is a bot's, whose events
		// are not kept.
		fmt.Fprintf(w, "  curl -A 'Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0' http://%s/v1/batch/%s -d '{\"v\":1,\"batch\":\"00000000-0000-4000-8000-000000000001\",\"mode\":\"full\",\"events\":[{\"name\":\"$pageview\",\"anonymousId\":\"me\",\"page\":{\"url\":\"https://shop.example/\"}}]}'\n", ingestAddr, webKey)
		fmt.Fprintf(w, "  curl -H 'Authorization: Bearer %s' http://%s/api/v1/projects/%s/overview?period=7d\n", s.shownSecret(pat), apiAddr, project)
	}
}
