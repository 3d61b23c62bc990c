package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/api/dashboard"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// ReportingConfig configures the reporting API (/api/v1).
type ReportingConfig struct {
	// PublicURL is the API's base address as clients reach it, ending in
	// /api/v1 (for example https://mf.example/api/v1); links are built on
	// it. Empty: built from the request's scheme and Host.
	PublicURL string
	// RequestsPerMinute is each person's budget, shared by all their keys
	// and tokens. Default 120.
	RequestsPerMinute int
	// AgentCallsPerMinute is each person's budget of tool calls on the
	// agent-facing server (/mcp), apart from RequestsPerMinute. Default
	// 120.
	AgentCallsPerMinute int
	// RefusedPerMinute is the number of refused credentials one network
	// (an IPv4 address or an IPv6 /64) may present per minute before a bad
	// credential is answered 429. Default 60.
	RefusedPerMinute int
	// AccessTokenTTL is the lifetime of an app access token. Default 1h.
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the lifetime of an app refresh token. Default 30
	// days.
	RefreshTokenTTL time.Duration
	// RecentAccess is how many access records are kept in memory per
	// person. Default 100.
	RecentAccess int
	// AccessFlushInterval is how often access records are appended to the
	// object store. Default 10s.
	AccessFlushInterval time.Duration
	// CacheBytes bounds the decoded day partitions (visits, conversions,
	// events facts) kept across requests, for every project together
	// (docs/reporting-data.md). Default 256 MiB.
	CacheBytes int64
	// FullScans answers every overview from the full tables, never from
	// the day rollups (overview_days.go): for comparing the two.
	FullScans bool
}

// DefaultReportingConfig returns the defaults.
func DefaultReportingConfig() ReportingConfig {
	return ReportingConfig{
		RequestsPerMinute:   120,
		AgentCallsPerMinute: 120,
		RefusedPerMinute:    60,
		AccessTokenTTL:      time.Hour,
		RefreshTokenTTL:     30 * 24 * time.Hour,
		RecentAccess:        100,
		CacheBytes:          256 << 20,
		AccessFlushInterval: 10 * time.Second,
	}
}

// Validate reports a setting that cannot work.
func (c ReportingConfig) Validate() error {
	switch {
	case c.PublicURL != "" && !strings.HasPrefix(c.PublicURL, "http://") && !strings.HasPrefix(c.PublicURL, "https://"):
		return fmt.Errorf("reporting config: PublicURL must start with http:// or https://, not %q", c.PublicURL)
	case c.RequestsPerMinute < 1:
		return errors.New("reporting config: RequestsPerMinute must be at least 1")
	case c.AgentCallsPerMinute < 1:
		return errors.New("reporting config: AgentCallsPerMinute must be at least 1")
	case c.RefusedPerMinute < 1:
		return errors.New("reporting config: RefusedPerMinute must be at least 1")
	case c.AccessTokenTTL < time.Minute:
		return errors.New("reporting config: AccessTokenTTL must be at least a minute")
	case c.RefreshTokenTTL < c.AccessTokenTTL:
		return errors.New("reporting config: RefreshTokenTTL must be at least AccessTokenTTL")
	case c.RecentAccess < 1:
		return errors.New("reporting config: RecentAccess must be at least 1")
	case c.AccessFlushInterval <= 0:
		return errors.New("reporting config: AccessFlushInterval must be positive")
	case c.CacheBytes < 0:
		return fmt.Errorf("reporting config: CacheBytes is %d; use 0 (no cache) or a positive size", c.CacheBytes)
	}
	return nil
}

// CatalogReader is the part of the catalog the reporting API reads.
type CatalogReader interface {
	State() *catalog.State
}

// ReportingDeps are the parts the reporting API is built on.
type ReportingDeps struct {
	// Catalog supplies users, keys, organizations and projects.
	Catalog CatalogReader
	// Bucket holds the installation secret, refresh tokens and access
	// records (and, later, the rollups read).
	Bucket storage.Bucket
	// Clock is the time source; nil means time.Now.
	Clock func() time.Time
	// Reader reads the processor's tables (docs/processor.md); nil means
	// no data yet: every report reads as empty.
	Reader *rollups.Reader
}

// Reporting is the reporting API: its Fiber app, app tokens and recent
// access. Close it to flush access records.
type Reporting struct {
	cfg    ReportingConfig
	deps   ReportingDeps
	logger *slog.Logger
	app    *fiber.App

	accessKey []byte
	cursors   *Cursors
	persons   *windowLimiter
	agents    *windowLimiter // tool calls of the agent-facing server
	refused   *windowLimiter
	access    *accessLog
	tables    dataCache // decoded tables per project (data.go)
	rows      *rowCache // decoded day partitions, every project (data_days.go)
	// dayOverviews counts the overviews answered from day rollups
	// (overview_days.go).
	dayOverviews atomic.Int64

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// CacheStats returns the counters of the data layer's cache of decoded
// day partitions.
func (r *Reporting) CacheStats() RowCacheStats { return r.rows.stats() }

// NewReporting builds the reporting API. It loads (or creates) the
// installation secret in the bucket and starts the access-record flusher.
// ready tells /healthz whether the process is ready.
func NewReporting(ctx context.Context, cfg ReportingConfig, deps ReportingDeps, ready func() bool, logger *slog.Logger) (*Reporting, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Catalog == nil || deps.Bucket == nil {
		return nil, errors.New("cannot build the reporting API: a catalog and a bucket are required")
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	secret, err := loadSecret(ctx, deps.Bucket)
	if err != nil {
		return nil, fmt.Errorf("cannot build the reporting API: %w", err)
	}
	r := &Reporting{
		cfg: cfg, deps: deps, logger: logger,
		accessKey: deriveKey(secret, "app access token"),
		cursors:   NewCursors(deriveKey(secret, "cursor")),
		persons:   newWindowLimiter(cfg.RequestsPerMinute, time.Minute),
		agents:    newWindowLimiter(cfg.AgentCallsPerMinute, time.Minute),
		refused:   newWindowLimiter(cfg.RefusedPerMinute, time.Minute),
		access:    newAccessLog(deps.Bucket, cfg.RecentAccess, logger),
		rows:      newRowCache(cfg.CacheBytes),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	dash, err := dashboard.New(dashboard.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("cannot build the reporting API: %w", err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ErrorHandler: r.onError})
	app.Use(securityHeaders)
	app.Get("/healthz", Healthz(ready))
	r.routes(app.Group("/api/v1", r.gate))
	agent, err := r.newAgent()
	if err != nil {
		return nil, fmt.Errorf("cannot build the agent-facing server: %w", err)
	}
	app.All("/mcp", agent.gate, agent.serve)
	app.Use(dash.Handler) // the dashboard at / (api/dashboard), beside /api/v1
	app.Use(noEndpoint)
	r.app = app
	go r.flushLoop()
	return r, nil
}

// routes registers the reporting endpoints on g. The REST API (behind
// its gate) and the agent-facing server's tools (agent_tools.go) both
// answer through these handlers, so that they cannot answer differently.
func (r *Reporting) routes(g fiber.Router) {
	g.Get("/projects", r.listProjects)
	g.Get("/projects/:project_id", r.getProject)
	g.Get("/projects/:project_id/overview", r.getOverview)
	g.Get("/projects/:project_id/people", r.listPeople)
	g.Get("/projects/:project_id/people/:ref", r.getPerson)
	g.Get("/projects/:project_id/events", r.listEvents)
	g.Get("/projects/:project_id/goals", r.listGoals)
	g.Get("/projects/:project_id/goals/:goal_id", r.getGoalReport)
	g.Get("/projects/:project_id/funnel", r.getFunnel)
	g.Get("/projects/:project_id/acquisition/channels", r.listChannels)
	g.Get("/projects/:project_id/acquisition/search", r.getSearch)
	g.Get("/projects/:project_id/acquisition/ads", r.getAds)
}

// noEndpoint answers a path no route took.
func noEndpoint(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotFound, "not_found", "", "no such endpoint: "+c.Path())
}

// App is the HTTP handler.
func (r *Reporting) App() *fiber.App { return r.app }

// Close stops the flusher and writes the access records not yet stored.
func (r *Reporting) Close() error {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.access.flush(ctx)
}

func (r *Reporting) flushLoop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.AccessFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := r.access.flush(ctx); err != nil {
				r.logger.Warn("reporting: cannot store access records; retrying at the next flush", "err", err)
			}
			cancel()
		}
	}
}

// RecentAccess returns user's latest calls, newest first, at most
// RecentAccess of them.
func (r *Reporting) RecentAccess(ctx context.Context, user string) ([]AccessRecord, error) {
	return r.access.recent(ctx, user)
}

// securityHeaders are sent on every reporting answer; the API sends no CORS
// headers.
func securityHeaders(c *fiber.Ctx) error {
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("X-Frame-Options", "DENY")
	c.Set("Referrer-Policy", "strict-origin-when-cross-origin")
	c.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	return c.Next()
}

// storeRetryAfter is the Retry-After (seconds) of a 503 store_unavailable.
const storeRetryAfter = 5

func (r *Reporting) onError(c *fiber.Ctx, err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		return sendError(c, ae)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return sendError(c, refuse(fe.Code, "http_"+strconv.Itoa(fe.Code), "", fe.Message))
	}
	if errors.Is(err, storage.ErrUnavailable) {
		// The store is down or failing: not the request's fault nor a
		// bug; the client may try again (RATIONALE, issue 16).
		r.logger.Warn("reporting: the object store is unavailable", "method", c.Method(), "route", c.Route().Path, "err", err)
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(storeRetryAfter))
		return sendError(c, refuse(fiber.StatusServiceUnavailable, "store_unavailable", "",
			"the data store cannot be reached; try again later"))
	}
	r.logger.Error("reporting: request failed", "method", c.Method(), "route", c.Route().Path, "err", err)
	return sendError(c, refuse(fiber.StatusInternalServerError, "internal_error", "", "the request could not be answered; try again later"))
}

// identity is who a valid credential acts as.
type identity struct {
	user       *catalog.User
	credential string // public name of the credential (no secret)
	app        string
}

// localIdentity is the fiber local through which the gate hands the
// caller to the handlers.
const (
	localIdentity = "mf.identity"
	// localBaseURL carries the API's base address into a tool call's
	// internal request, so that its links are the REST answer's.
	localBaseURL = "mf.baseURL"
)

// credential outcomes of resolve.
const (
	outcomeOK            = "ok"
	outcomeMissing       = "missing_credential"
	outcomeMalformed     = "malformed_credential"
	outcomeUnknown       = "unknown_credential"
	outcomeRevoked       = "key_revoked"
	outcomeExpired       = "key_expired"
	outcomeTokenExpired  = "token_expired"
	outcomeUserGone      = "user_unknown"
	outcomeRateLimited   = "rate_limited"
	outcomeRefusedTokens = "too_many_refused_credentials"
)

// resolve reads the bearer credential. It returns the identity of a valid
// one; otherwise the outcome and, for a known but unusable API key, the
// owner to record the refusal against.
func (r *Reporting) resolve(c *fiber.Ctx, now time.Time) (*identity, string, *catalog.User, string) {
	h := strings.Clone(c.Get(fiber.HeaderAuthorization))
	if h == "" {
		return nil, outcomeMissing, nil, ""
	}
	const p = "Bearer "
	if len(h) <= len(p) || !equalFoldASCII(h[:len(p)], p) {
		return nil, outcomeMalformed, nil, ""
	}
	tok := strings.TrimSpace(h[len(p):])
	st := r.deps.Catalog.State()
	switch {
	case strings.HasPrefix(tok, "mf_pat_"):
		name := keyName(tok)
		k, u, ok := st.APIKey(tok)
		if !ok {
			return nil, outcomeUnknown, nil, ""
		}
		if !k.Usable(now) {
			if k.Revoked {
				return nil, outcomeRevoked, u, name
			}
			return nil, outcomeExpired, u, name
		}
		return &identity{user: u, credential: name}, outcomeOK, nil, ""
	case strings.HasPrefix(tok, accessTokenPrefix):
		pl, ok := r.openAccess(tok)
		if !ok {
			return nil, outcomeUnknown, nil, ""
		}
		u, uok := st.User(pl.User)
		if !uok {
			return nil, outcomeUserGone, nil, ""
		}
		if now.Unix() >= pl.Expires {
			return nil, outcomeTokenExpired, u, "app:" + pl.App
		}
		return &identity{user: u, credential: "app:" + pl.App, app: pl.App}, outcomeOK, nil, ""
	}
	return nil, outcomeMalformed, nil, ""
}

// keyName is the public part of an API key: mf_pat_ and its eight-character
// id, never the secret tail.
func keyName(tok string) string {
	const n = len("mf_pat_") + 8
	if len(tok) < n {
		return "mf_pat_"
	}
	return tok[:n]
}

// unauthorizedDetail is the message of a 401 per outcome.
var unauthorizedDetail = map[string]string{
	outcomeMissing:      "send an API key (mf_pat_…) or an app access token as Authorization: Bearer <credential>",
	outcomeMalformed:    "the Authorization header must be Bearer followed by an API key (mf_pat_…) or an app access token (mf_oat_…)",
	outcomeUnknown:      "the credential is not valid",
	outcomeRevoked:      "the API key has been revoked",
	outcomeExpired:      "the API key has expired",
	outcomeTokenExpired: "the access token has expired; exchange the refresh token for a new one",
	outcomeUserGone:     "the credential's owner no longer exists",
}

// gate authenticates, rate-limits, refuses methods other than GET and
// HEAD, and records the call.
func (r *Reporting) gate(c *fiber.Ctx) error {
	now := r.deps.Clock()
	id, outcome, owner, name := r.resolve(c, now)
	network := networkOf(clientAddr(c))

	if m := c.Method(); m != fiber.MethodGet && m != fiber.MethodHead {
		if id != nil {
			setRateHeaders(c, "person", r.persons.peek(id.user.ID, now))
		} else {
			setRateHeaders(c, "refused-credentials", r.refused.peek(network, now))
		}
		c.Set(fiber.HeaderAllow, "GET, HEAD")
		return sendError(c, refuse(fiber.StatusMethodNotAllowed, "method_not_allowed", "",
			"the reporting API is read-only: it answers GET and HEAD, not "+m))
	}

	if id == nil {
		ep, project := endpointOf(c.Path())
		return r.refuseCredential(c, now, network, outcome, owner,
			AccessRecord{At: now, Credential: name, Endpoint: c.Method() + " " + ep, Project: project})
	}

	st := r.persons.take(id.user.ID, now)
	setRateHeaders(c, "person", st)
	ep, project := endpointOf(c.Path())
	rec := AccessRecord{At: now, Credential: id.credential, App: id.app, Endpoint: c.Method() + " " + ep, Project: project}
	if !st.Allowed {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(st.resetSeconds()))
		rec.Status, rec.Outcome = fiber.StatusTooManyRequests, outcomeRateLimited
		r.access.record(id.user.ID, rec)
		return sendError(c, refuse(fiber.StatusTooManyRequests, "rate_limited", "",
			fmt.Sprintf("over the limit of %d requests per minute shared by all your keys and tokens; retry after %d seconds",
				st.Quota, st.resetSeconds())))
	}
	c.Locals(localIdentity, id)
	err := c.Next()
	if err != nil {
		err = r.onError(c, err)
	}
	rec.Status = c.Response().StatusCode()
	rec.Outcome = outcomeOK
	if rec.Status >= 400 {
		rec.Outcome = outcomeFromBody(c)
	}
	r.access.record(id.user.ID, rec)
	return err
}

// refuseCredential answers a missing or refused credential: 401, or 429
// once the network has presented too many refused credentials. A known
// but unusable API key (or expired app token) is recorded against its
// owner as rec, with the status and outcome filled in.
func (r *Reporting) refuseCredential(c *fiber.Ctx, now time.Time, network, outcome string, owner *catalog.User, rec AccessRecord) error {
	st := r.refused.take(network, now)
	setRateHeaders(c, "refused-credentials", st)
	var err *APIError
	if !st.Allowed {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(st.resetSeconds()))
		err = refuse(fiber.StatusTooManyRequests, "too_many_refused_credentials", "",
			"too many refused credentials from your network; retry after "+strconv.Itoa(st.resetSeconds())+" seconds")
	} else {
		err = refuse(fiber.StatusUnauthorized, "unauthorized", "", unauthorizedDetail[outcome])
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="mf reporting API"`)
	}
	if owner != nil {
		rec.Status, rec.Outcome = err.Status, outcome
		r.access.record(owner.ID, rec)
	}
	return sendError(c, err)
}

// pathParams names the path segment that follows each collection in the
// endpoint written to access records.
var pathParams = map[string]string{"projects": "{project_id}", "people": "{ref}", "goals": "{goal_id}"}

// endpointOf turns a request path into the endpoint recorded for it, with
// the ids replaced by {placeholders} (so that person refs are never
// recorded), and the project id of the path ("" when there is none).
func endpointOf(path string) (endpoint, project string) {
	rest, ok := strings.CutPrefix(path, "/api/v1")
	if !ok || (rest != "" && rest[0] != '/') {
		return "(no such endpoint)", ""
	}
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	if len(segs) > 6 {
		return "(no such endpoint)", ""
	}
	if len(segs) > 1 && segs[0] == "projects" && reProjectID.MatchString(segs[1]) {
		project = segs[1]
	}
	for i := 1; i < len(segs); i++ {
		if ph, ok := pathParams[segs[i-1]]; ok {
			segs[i] = ph
			i++ // the placeholder is not a collection name
		}
	}
	return "/" + strings.Join(segs, "/"), strings.Clone(project)
}

// outcomeFromBody reads the code of the errors document just written.
func outcomeFromBody(c *fiber.Ctx) string {
	b := c.Response().Body()
	const k = `"code":"`
	i := strings.Index(string(b), k)
	if i < 0 {
		return "http_" + strconv.Itoa(c.Response().StatusCode())
	}
	rest := string(b[i+len(k):])
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return "http_" + strconv.Itoa(c.Response().StatusCode())
}

// setRateHeaders writes the rate-limit headers in the structured-field form
// of the IETF draft (draft-ietf-httpapi-ratelimit-headers):
// RateLimit-Policy: "person";q=120;w=60 and RateLimit: "person";r=119;t=60.
func setRateHeaders(c *fiber.Ctx, policy string, st limitState) {
	c.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", policy, st.Quota, int(st.Window/time.Second)))
	c.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", policy, st.Remaining, st.resetSeconds()))
}

// clientAddr is the peer address (the API trusts no forwarding header).
func clientAddr(c *fiber.Ctx) netip.Addr {
	a, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return a.Unmap()
}

// caller is the identity the gate admitted.
func caller(c *fiber.Ctx) *identity {
	id, _ := c.Locals(localIdentity).(*identity)
	return id
}

// baseURL is the API's base address, ending in /api/v1.
func (r *Reporting) baseURL(c *fiber.Ctx) string {
	if b, ok := c.Locals(localBaseURL).(string); ok {
		return b // a tool call of the agent-facing server (agent_tools.go)
	}
	if r.cfg.PublicURL != "" {
		return strings.TrimSuffix(r.cfg.PublicURL, "/")
	}
	return c.BaseURL() + "/api/v1"
}
