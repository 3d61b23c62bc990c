package ingest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/ingest/enrich"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
	"github.com/mfhq/mf/wasm"
)

// Config configures the /v1 service. Start from DefaultConfig.
type Config struct {
	// TrustedProxies may name the client by X-Forwarded-For
	// (--trusted-proxies).
	TrustedProxies []netip.Prefix
	// GeoIP is a MaxMind-format database for country and region (--geoip).
	GeoIP string
	// Limits are the rate limits of the specification's Limits table.
	Limits Limits
	// PublishTimeout bounds how long a batch waits for the log before the
	// answer is 503 sink_unavailable. Default 10s.
	PublishTimeout time.Duration
	// ReadTimeout and IdleTimeout bound client connections. Defaults 30s
	// and 120s.
	ReadTimeout, IdleTimeout time.Duration
	// Flags configures the flag endpoints (segment freshness, membership
	// timeout); zero fields take DefaultFlagConfig's values.
	Flags FlagConfig
	// Metrics records what the service answers (NewMetrics); nil: nothing.
	Metrics *Metrics
	// AllowanceChunk is how many events beyond a batch's a process takes
	// from an organization's monthly allowance counter at once, to hand
	// out from memory (fewer near the end of the allowance). Default 1000.
	AllowanceChunk int
	// AllowanceFlush is how often what a process holds of the allowances
	// is given back to their counters (and at Close). Default 10s.
	AllowanceFlush time.Duration
}

// Limits are the rate-limit budgets (see the specification's Limits).
type Limits struct {
	BatchPerAddress    limit // requests per client address, before the key check
	WebsiteKeyEvents   limit // events per website key and client network
	SecretKeyEvents    limit // events per secret key
	FlagsPerAddress    limit // /v1/flags... requests per client address, before the key check
	FlagsGetWebsite    limit // GET /v1/flags/{websiteKey} per key and client network
	FlagsPostWebsite   limit // POST /v1/flags/{websiteKey} per key and client network
	FlagsGetServer     limit // GET /v1/flags per key
	SegmentUnitsPerKey limit // POST /v1/flags/segments units per key
}

// DefaultLimits are the figures of the specification.
func DefaultLimits() Limits {
	return Limits{
		BatchPerAddress:    limit{100, time.Second},
		WebsiteKeyEvents:   limit{6000, time.Minute},
		SecretKeyEvents:    limit{120000, time.Minute},
		FlagsPerAddress:    limit{200, time.Second},
		FlagsGetWebsite:    limit{100, time.Second},
		FlagsPostWebsite:   limit{20, time.Second},
		FlagsGetServer:     limit{6000, time.Minute},
		SegmentUnitsPerKey: limit{6000, time.Minute},
	}
}

// Scaled returns the budgets multiplied by f (load tests raise them).
func (l Limits) Scaled(f float64) Limits {
	for _, p := range []*limit{&l.BatchPerAddress, &l.WebsiteKeyEvents, &l.SecretKeyEvents, &l.FlagsPerAddress,
		&l.FlagsGetWebsite, &l.FlagsPostWebsite, &l.FlagsGetServer, &l.SegmentUnitsPerKey} {
		p.Amount *= f
	}
	return l
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Limits: DefaultLimits(), Flags: DefaultFlagConfig(), PublishTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		AllowanceChunk: 1000, AllowanceFlush: 10 * time.Second}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if c.PublishTimeout <= 0 {
		return errors.New("ingest config: PublishTimeout must be positive")
	}
	if c.AllowanceChunk < 0 {
		return fmt.Errorf("ingest config: AllowanceChunk %d must not be negative (default 1000)", c.AllowanceChunk)
	}
	if c.AllowanceFlush <= 0 {
		return fmt.Errorf("ingest config: AllowanceFlush %v must be positive (default 10s)", c.AllowanceFlush)
	}
	if err := c.Flags.Validate(); err != nil {
		return err
	}
	for _, l := range []limit{c.Limits.BatchPerAddress, c.Limits.WebsiteKeyEvents, c.Limits.SecretKeyEvents,
		c.Limits.FlagsPerAddress, c.Limits.FlagsGetWebsite, c.Limits.FlagsPostWebsite, c.Limits.FlagsGetServer,
		c.Limits.SegmentUnitsPerKey} {
		if l.Amount <= 0 || l.Per <= 0 {
			return errors.New("ingest config: every rate limit needs a positive amount and period")
		}
	}
	return nil
}

// BatchLog is what intake needs of the log: a publish that stores a batch
// once per dedupe id and reports duplicates, and reading a stored batch
// back (eventlog.Publisher).
type BatchLog interface {
	PublishOnce(ctx context.Context, topic, id string, msg *message.Message) (eventlog.Receipt, error)
	GetMsg(ctx context.Context, topic string, seq uint64) (*message.Message, error)
}

// Catalog is what the service needs of the catalog.
type Catalog interface {
	State() *catalog.State
	MarkSecretKeyExposed(ctx context.Context, sourceID string) error
}

// Deps are the parts the service is built on.
type Deps struct {
	Catalog Catalog
	Log     BatchLog
	Bucket  storage.Bucket // allowance counters and visitor salts
	// Ready tells /healthz whether the process takes requests.
	Ready func() bool
	// Clock is the time source; nil means time.Now.
	Clock func() time.Time
	// Flags are the compiled flag documents, shared with the catalog's
	// CheckDocuments hook; the server makes them follow Catalog. Build one
	// per process with NewFlagDocuments and close it after the server.
	Flags *FlagDocuments
	// Membership answers segment lookups; nil answers every ref
	// unavailable (NoMembership) until the processor provides one.
	Membership MembershipSource
	// Share divides the rate budgets among the live ingest processes;
	// nil: this process is alone and allows each budget whole.
	Share *Share
}

// Server is the /v1 service.
type Server struct {
	cfg       Config
	deps      Deps
	logger    *slog.Logger
	enr       *enrich.Enricher
	allowance *allowance
	app       *fiber.App
	stop      context.CancelFunc
	done      chan struct{}
	sdk       SDKFiles

	limAddrBatch, limWebsiteEvents, limSecretEvents *limiter
}

// NewServer builds the service; App returns its Fiber app. Close stops its
// background work.
func NewServer(ctx context.Context, cfg Config, deps Deps, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Catalog == nil || deps.Log == nil || deps.Bucket == nil {
		return nil, errors.New("ingest: Deps.Catalog, Deps.Log and Deps.Bucket are required")
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	ecfg := enrich.DefaultConfig()
	ecfg.TrustedProxies, ecfg.GeoIPFile = cfg.TrustedProxies, cfg.GeoIP
	enr, err := enrich.New(ecfg, enrich.NewBucketSaltStore(deps.Bucket), logger)
	if err != nil {
		return nil, err
	}
	if err := enr.RotateSalts(ctx, deps.Clock()); err != nil {
		return nil, fmt.Errorf("cannot prepare the daily visitor salts: %w", err)
	}
	sdk, err := NewSDKFiles()
	if err != nil {
		enr.Close()
		return nil, err
	}
	s := &Server{
		cfg: cfg, deps: deps, logger: logger, enr: enr, sdk: sdk,
		allowance:        newAllowance(deps.Bucket, cfg.AllowanceChunk),
		limAddrBatch:     newLimiter(cfg.Limits.BatchPerAddress, deps.Share),
		limWebsiteEvents: newLimiter(cfg.Limits.WebsiteKeyEvents, deps.Share),
		limSecretEvents:  newLimiter(cfg.Limits.SecretKeyEvents, deps.Share),
		done:             make(chan struct{}),
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { enr.RunSalts(bg, time.Hour, deps.Clock) })
		wg.Go(func() { s.flushAllowances(bg) })
		wg.Wait()
	}()
	s.app = s.newApp()
	return s, nil
}

// App returns the Fiber app of the service.
func (s *Server) App() *fiber.App { return s.app }

// Close stops background work, gives back to the allowance counters what
// this process holds of them, and releases the enricher. Close it after
// the last request has been answered.
func (s *Server) Close() error {
	s.stop()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	var err error
	if ferr := s.allowance.flush(ctx); ferr != nil {
		err = fmt.Errorf("ingest: cannot give back the allowance this process held: %w", ferr)
	}
	return errors.Join(err, s.enr.Close())
}

// flushAllowances gives back what this process holds of the allowances
// every AllowanceFlush, until ctx ends.
func (s *Server) flushAllowances(ctx context.Context) {
	t := time.NewTicker(s.cfg.AllowanceFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.allowance.flush(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("ingest: cannot give back allowance reservations; trying again later", "err", err)
			}
		}
	}
}

func (s *Server) newApp() *fiber.App {
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		// Bodies up to readBodyLimit are read, so that a body just over the
		// 1 MiB rule gets its 413 answer instead of a reset connection
		// while the client is still writing; the handlers refuse what is
		// over maxBatchBody. Larger bodies are refused by the web server
		// before they are read.
		BodyLimit:    readBodyLimit,
		ReadTimeout:  s.cfg.ReadTimeout,
		IdleTimeout:  s.cfg.IdleTimeout,
		ErrorHandler: s.onError,
		// The batch body is read as JSON whatever its content type, and
		// never parsed by Fiber.
	})
	app.Use(func(c *fiber.Ctx) error { setCORS(c); return c.Next() })
	app.Get("/healthz", func(c *fiber.Ctx) error {
		if s.deps.Ready != nil && !s.deps.Ready() {
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "starting"})
		}
		return c.JSON(fiber.Map{"status": "ok"})
	})
	app.Options("/v1/*", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })
	app.Options("/v1", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })
	app.Post("/v1/batch", s.measureBatch(s.postBatchSecret))
	app.Post("/v1/batch/:key", s.measureBatch(s.postBatchWebsite))
	moduleRoutes(app, wasm.Module())
	sdkRoutes(app, s.sdk)
	s.registerFlagRoutes(app)
	app.Use(func(c *fiber.Ctx) error { return sendMessage(c, fiber.StatusNotFound, "Not found") })
	return app
}

// onError renders errors raised outside handlers: bodies over the limit
// (413), timeouts, malformed requests.
func (s *Server) onError(c *fiber.Ctx, err error) error {
	setCORS(c)
	var fe *fiber.Error
	if errors.As(err, &fe) {
		if fe.Code == fiber.StatusRequestEntityTooLarge {
			return sendTooLarge(c)
		}
		return sendMessage(c, fe.Code, fe.Message)
	}
	// The route pattern, never the path (it carries the website key).
	s.logger.Error("ingest: request failed", "method", c.Method(), "route", c.Route().Path, "err", err)
	return sendProblem(c, problem(fiber.StatusInternalServerError, CodeInternalError,
		"the request could not be answered; try again later"), 0)
}

// requestFacts are the parts of the request enrichment reads.
func requestFacts(c *fiber.Ctx) enrich.RequestFacts {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	var xff []byte
	for i, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		if i > 0 {
			xff = append(xff, ',')
		}
		xff = append(xff, v...)
	}
	return enrich.RequestFacts{Peer: peer.Unmap(), XForwardedFor: string(xff), UserAgent: c.Get(fiber.HeaderUserAgent)}
}

// fromBrowser reports whether a request carries a browser's marks.
func fromBrowser(c *fiber.Ctx) bool {
	return len(c.Request().Header.Peek(fiber.HeaderOrigin)) > 0 || len(c.Request().Header.Peek("Sec-Fetch-Site")) > 0
}

// keyOwner is a source found by its key with its project and organization.
type keyOwner struct {
	src  *catalog.Source
	proj *catalog.Project
	org  *catalog.Organization
}

// lookupKey finds the live source of key; revoked or archived keys,
// sources and projects answer as unknown.
func lookupKey(st *catalog.State, key string) (keyOwner, bool) {
	src, ok := st.SourceByKey(key)
	if !ok || src.Revoked || src.Archived {
		return keyOwner{}, false
	}
	proj, ok := st.Project(src.Project)
	if !ok || proj.Archived {
		return keyOwner{}, false
	}
	org, ok := st.Organization(proj.Organization)
	if !ok {
		return keyOwner{}, false
	}
	return keyOwner{src, proj, org}, true
}

// markExposed records that a secret key was seen from a browser; a key
// already marked costs nothing.
func (s *Server) markExposed(c *fiber.Ctx, st *catalog.State, src *catalog.Source) {
	if st.SecretKeyExposed(src.ID) {
		return
	}
	if err := s.deps.Catalog.MarkSecretKeyExposed(c.UserContext(), src.ID); err != nil {
		s.logger.Error("ingest: cannot mark a secret key exposed", "source", src.ID, "err", err)
	}
}

// postBatchWebsite is POST /v1/batch/{websiteKey}.
func (s *Server) postBatchWebsite(c *fiber.Ctx) error {
	if len(c.Body()) > maxBatchBody {
		return sendTooLarge(c)
	}
	now := s.deps.Clock()
	facts := requestFacts(c)
	net, _ := s.enr.NetKey(facts)
	if ok, wait := s.limAddrBatch.take(net.Key(), 1, now); !ok {
		return sendRateLimited(c, wait)
	}
	key := c.Params("key")
	if !looksLikeKey(key) {
		return sendMessage(c, fiber.StatusNotFound, "Not found")
	}
	st := s.deps.Catalog.State()
	o, ok := lookupKey(st, key)
	if !ok {
		return sendProblem(c, errUnauthorized("the website key is unknown, revoked or archived"), 0)
	}
	if o.src.Kind != catalog.KindWebsite {
		if fromBrowser(c) {
			s.markExposed(c, st, o.src)
		}
		return sendProblem(c, problem(http.StatusForbidden, CodeSecretKeyInPath,
			"a secret key was sent in the path; secret keys go in the Authorization header, from servers only"), 0)
	}
	if origin := c.Get(fiber.HeaderOrigin); origin != "" && !originAllowed(origin, o.src.AllowedOrigins) {
		return sendProblem(c, problem(http.StatusForbidden, CodeOriginNotAllowed,
			"this origin is not among the source's allowed origins"), 0)
	}
	return s.intake(c, o, facts, net.Key(), now)
}

// postBatchSecret is POST /v1/batch with a secret key as bearer.
func (s *Server) postBatchSecret(c *fiber.Ctx) error {
	if len(c.Body()) > maxBatchBody {
		return sendTooLarge(c)
	}
	now := s.deps.Clock()
	facts := requestFacts(c)
	net, _ := s.enr.NetKey(facts)
	if ok, wait := s.limAddrBatch.take(net.Key(), 1, now); !ok {
		return sendRateLimited(c, wait)
	}
	tok, ok := bearerToken(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return sendProblem(c, errUnauthorized("send the secret key as Authorization: Bearer <key>"), 0)
	}
	st := s.deps.Catalog.State()
	o, ok := lookupKey(st, tok)
	if !ok {
		return sendProblem(c, errUnauthorized("the secret key is unknown, revoked or archived"), 0)
	}
	if o.src.Kind != catalog.KindServer {
		return sendProblem(c, problem(http.StatusForbidden, CodeWebsiteKeyAsBearer,
			"a website key was sent as bearer; website keys go in the path"), 0)
	}
	if fromBrowser(c) {
		s.markExposed(c, st, o.src)
	}
	return s.intake(c, o, facts, "", now)
}

// intake decodes, charges, validates, enriches, counts and stores one
// batch, and answers with its receipt. netKey is the client network of a
// website batch ("" for a server batch).
func (s *Server) intake(c *fiber.Ctx, o keyOwner, facts enrich.RequestFacts, netKey string, now time.Time) error {
	website := o.src.Kind == catalog.KindWebsite
	srcMode := records.ModeFull
	if o.src.Mode == catalog.ModeConsentless {
		srcMode = records.ModeConsentless
	}
	b, prob := DecodeBatch(c.Body(), now, DecodeOptions{SourceMode: srcMode})
	cost := 1.0
	if b != nil {
		cost = float64(b.Len())
	}
	var ok bool
	var wait time.Duration
	if website {
		ok, wait = s.limWebsiteEvents.take(o.src.ID+"|"+netKey, cost, now)
	} else {
		ok, wait = s.limSecretEvents.take(o.src.ID, cost, now)
	}
	if !ok {
		return sendRateLimited(c, wait)
	}
	if prob != nil {
		return sendProblem(c, prob, 0)
	}

	downgrade := b.Mode() == records.ModeFull && PrivacySignal(c.Get("Sec-GPC"), c.Get("DNT"))
	rec := Normalize(b, NormalizeOptions{Downgrade: downgrade})
	sent := b.Len()
	if o.org.Paused {
		// Also the answer to a key check: the key works, the organization
		// is paused.
		nothingKept(rec, sent, ReceiptIngestionPaused)
		return s.answerReceipt(c, rec.Receipt)
	}
	if rec.Receipt.Reason == ReceiptInstallCheck {
		return s.answerReceipt(c, rec.Receipt) // never stored or billed
	}
	rec.Project, rec.Source = o.proj.ID, o.src.ID
	rec.SourceKind = records.SourceServer
	if website {
		rec.SourceKind = records.SourceWebsite
	}
	edge, err := s.enr.Enrich(c.UserContext(), facts,
		enrich.Source{ProjectID: o.proj.ID, Website: website, Consentless: rec.Mode == records.ModeConsentless}, now)
	if err != nil {
		s.logger.Error("ingest: enrichment failed", "source", o.src.ID, "err", err)
		return sendSinkUnavailable(c)
	}
	if edge.Bot {
		nothingKept(rec, sent, ReceiptBot)
		return s.answerReceipt(c, rec.Receipt)
	}
	rec.Edge = records.Edge{Country: edge.Country, Region: edge.Region, Device: edge.Device, Browser: edge.Browser, OS: edge.OS}
	if edge.VisitorHash != "" {
		if h, err := hex.DecodeString(edge.VisitorHash); err == nil {
			rec.Edge.VisitorHash = h
		}
	}

	// The monthly allowance: reserve before storing, give back what the
	// log did not take.
	month, reserved := allowanceMonth(now), 0
	if lim := o.org.MonthlyEventAllowance; lim != nil && rec.Receipt.Reason == "" && len(rec.Events) > 0 {
		got, err := s.allowance.reserve(c.UserContext(), o.org.ID, month, *lim, len(rec.Events))
		if err != nil {
			s.logger.Error("ingest: allowance unavailable", "organization", o.org.ID, "err", err)
			return sendSinkUnavailable(c)
		}
		reserved = got
		if got == 0 {
			nothingKept(rec, sent, ReceiptAllowanceExhaust)
		} else if got < len(rec.Events) {
			rec.Receipt.Dropped += len(rec.Events) - got
			rec.Receipt.Accepted = got
			rec.Events = rec.Events[:got]
		}
	}
	if len(rec.Events) == 0 {
		// Nothing kept: nothing is stored or billed, and a resend gets the
		// same receipt by the same rules.
		return s.answerReceipt(c, rec.Receipt)
	}
	receipt, err := s.store(c.UserContext(), rec)
	if err != nil || receipt.duplicate {
		if rerr := s.allowance.refund(context.WithoutCancel(c.UserContext()), o.org.ID, month, reserved); rerr != nil {
			s.logger.Error("ingest: cannot give back an allowance reservation", "organization", o.org.ID, "events", reserved, "err", rerr)
		}
	}
	if errors.Is(err, eventlog.ErrFull) {
		// The log reached its size cap: nothing was stored. Room returns
		// as the processor purges committed batches, so the client is
		// asked to wait longer than after an outage.
		s.cfg.Metrics.logFull()
		s.logger.Warn("ingest: the log is full; batch refused, to be resent", "project", rec.Project, "batch", rec.Receipt.Batch, "err", err)
		return sendLogFull(c)
	}
	if err != nil {
		s.logger.Error("ingest: cannot store a batch", "project", rec.Project, "batch", rec.Receipt.Batch, "err", err)
		return sendSinkUnavailable(c)
	}
	return s.answerReceipt(c, receipt.Receipt)
}

func nothingKept(rec *records.Batch, sent int, reason string) {
	rec.Events = nil
	rec.Receipt.Accepted, rec.Receipt.Dropped, rec.Receipt.Reason = 0, sent, reason
	rec.Edge = records.Edge{}
}

type storedReceipt struct {
	records.Receipt
	duplicate bool
}

// store appends the batch to the log once per project and batch id. A
// batch id already stored within the idempotency window answers with the
// receipt stored the first time.
func (s *Server) store(ctx context.Context, rec *records.Batch) (storedReceipt, error) {
	msg, err := eventlog.NewBatchMessage(rec)
	if err != nil {
		return storedReceipt{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	msg.SetContext(ctx)
	start := time.Now()
	r, err := s.deps.Log.PublishOnce(ctx, eventlog.BatchSubject(rec.Project), eventlog.BatchDedupeID(rec.Project, rec.ID), msg)
	s.cfg.Metrics.observePublish(time.Since(start), r.Duplicate, err)
	if err != nil {
		return storedReceipt{}, err
	}
	if !r.Duplicate {
		return storedReceipt{Receipt: rec.Receipt}, nil
	}
	orig, err := s.deps.Log.GetMsg(ctx, eventlog.TopicBatches, r.Seq)
	if err != nil {
		return storedReceipt{}, fmt.Errorf("cannot read back the first copy of batch %s: %w", rec.ID, err)
	}
	first, err := eventlog.BatchReceipt(orig)
	if err != nil {
		return storedReceipt{}, fmt.Errorf("the first copy of batch %s: %w", rec.ID, err)
	}
	// The receipt echoes the batch id as sent this time.
	first.Batch = rec.Receipt.Batch
	return storedReceipt{Receipt: first, duplicate: true}, nil
}
