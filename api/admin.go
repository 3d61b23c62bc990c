package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/mfhq/mf/storage/catalog"
)

// AdminConfig configures the admin API (/admin/v1).
type AdminConfig struct {
	// Token is the bearer token callers must present. Empty: only loopback
	// callers are served (contract section 1).
	Token string
	// MaxBody bounds request bodies (provisioning files). Default 16 MiB.
	MaxBody int
	// ApplyTimeout bounds one provisioning apply. Default 60s.
	ApplyTimeout time.Duration
	// IssuePreviewToken issues a preview token for an unstarted draft
	// experiment (the flag service owns the format). Errors wrapping
	// ErrNotFound answer 404, ErrRefused 422. Nil: the endpoint answers 501.
	IssuePreviewToken func(ctx context.Context, project, flag string) (token string, expires time.Time, err error)
	// Replay rebuilds a project's tables from its history (mf replay):
	// from is a day YYYY-MM-DD or empty, source "archive" or "log". It
	// answers what to report as JSON. Errors wrapping ErrNotFound answer
	// 404, ErrRefused 422. Nil: the endpoint answers 501.
	Replay func(ctx context.Context, project, from, source string) (any, error)
	// StartReplay checks a replay's options and returns its work, run as a
	// job of Jobs (POST .../replays answers 202 at once, GET
	// .../replays/{id} its progress and result). Errors wrapping
	// ErrNotFound answer 404, ErrRefused 422. Nil: 501.
	StartReplay func(ctx context.Context, project, from, source string) (JobRun, error)
	Jobs        *Jobs
	// ReloadGeoIP reads the GeoIP database file again and swaps it in
	// (POST /admin/v1/geoip/reload). Errors wrapping ErrNotFound answer
	// 404 (no database configured); others 422 (the old one stays). Nil:
	// 501 (this process runs no ingest).
	ReloadGeoIP func() error
	// Imports stores search-console and ads-platform import rows
	// (docs/imports.md); nil: the import endpoint answers 501.
	Imports *Imports
	// Reporting issues app tokens and keeps recent access; nil when this
	// process runs no reporting API (those endpoints then answer 501).
	Reporting *Reporting
	// Metrics answers GET /metrics (Prometheus text exposition, contract
	// section 4) behind the admin API's authentication; nil: no /metrics.
	Metrics http.Handler
	// Erase requests the erasure of a person (contract section 4) and
	// answers its record; ErasureStatus reads a record. Errors wrapping
	// ErrNotFound answer 404. Nil: 501.
	Erase         func(ctx context.Context, project, ref string) (any, error)
	ErasureStatus func(ctx context.Context, project, id string) (any, error)
	// Export writes a person's profile and stored events as NDJSON
	// (contract section 4). Errors wrapping ErrNotFound before anything
	// is written answer 404. Nil: 501.
	Export func(ctx context.Context, project, ref string, w io.Writer) error
}

// Errors that admin hooks wrap to choose the answer's status.
var (
	ErrNotFound = errors.New("not found")
	ErrRefused  = errors.New("refused")
)

// DefaultAdminConfig returns the defaults.
func DefaultAdminConfig() AdminConfig {
	return AdminConfig{MaxBody: 16 << 20, ApplyTimeout: 60 * time.Second}
}

// Validate reports a setting that cannot work.
func (c AdminConfig) Validate() error {
	if c.MaxBody < 1<<10 {
		return errors.New("admin config: MaxBody must be at least 1 KiB")
	}
	if c.ApplyTimeout <= 0 {
		return errors.New("admin config: ApplyTimeout must be positive")
	}
	return nil
}

// Admin is the admin API: provisioning and the catalog's state.
type Admin struct {
	cfg    AdminConfig
	cat    *catalog.Catalog
	ready  func() bool
	logger *slog.Logger
}

// NewAdmin builds the admin API's Fiber app. ready tells /healthz whether
// the process is ready to take requests.
func NewAdmin(cfg AdminConfig, cat *catalog.Catalog, ready func() bool, logger *slog.Logger) (*fiber.App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Admin{cfg: cfg, cat: cat, ready: ready, logger: logger}
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             cfg.MaxBody,
		ErrorHandler:          a.onError,
	})
	app.Get("/healthz", Healthz(ready))
	if cfg.Metrics != nil {
		app.Get("/metrics", a.auth, adaptor.HTTPHandler(cfg.Metrics))
	}
	app.Get("/debug/pprof/*", a.auth, adaptor.HTTPHandler(pprofHandler()))
	g := app.Group("/admin/v1", a.auth)
	g.Put("/provision", a.provision)
	g.Get("/catalog", a.catalogSummary)
	g.Post("/projects/:project/flags/:flag/preview-token", a.previewToken)
	g.Post("/projects/:project/replay", a.replay)
	g.Post("/projects/:project/replays", a.startReplay)
	g.Post("/geoip/reload", a.reloadGeoIP)
	g.Get("/projects/:project/replays/:id", a.replayJob)
	g.Post("/projects/:project/imports", a.importRows)
	g.Post("/users/:user/app-tokens", a.issueAppTokens)
	g.Post("/app-tokens/refresh", a.refreshAppTokens)
	g.Post("/app-tokens/revoke", a.revokeAppTokens)
	g.Get("/users/:user/access", a.recentAccess)
	g.Delete("/projects/:project/people/:ref", a.erase)
	g.Get("/projects/:project/erasures/:id", a.erasureStatus)
	g.Get("/projects/:project/people/:ref/export", a.export)
	app.Use(func(c *fiber.Ctx) error {
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": "no such admin endpoint: " + c.Method() + " " + c.Path()})
	})
	return app, nil
}

// Healthz answers GET /healthz: 200 {"status":"ok"} once ready, 503 before.
func Healthz(ready func() bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if ready != nil && !ready() {
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "starting"})
		}
		return c.JSON(fiber.Map{"status": "ok"})
	}
}

func (a *Admin) onError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return c.Status(fe.Code).JSON(fiber.Map{"error": fe.Message})
	}
	a.logger.Error("admin: request failed", "path", c.Path(), "err", err)
	return c.Status(fiber.StatusInternalServerError).JSON(fiber.Map{"error": "internal error"})
}

// auth admits the bearer of the admin token, or, without a token
// configured, loopback callers only.
func (a *Admin) auth(c *fiber.Ctx) error {
	if a.cfg.Token == "" {
		if !c.Context().RemoteIP().IsLoopback() {
			return c.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": "the admin API answers only loopback callers when no --admin-token is set"})
		}
		return c.Next()
	}
	h := c.Get(fiber.HeaderAuthorization)
	const p = "Bearer "
	if len(h) <= len(p) || !equalFoldASCII(h[:len(p)], p) ||
		subtle.ConstantTimeCompare([]byte(h[len(p):]), []byte(a.cfg.Token)) != 1 {
		return c.Status(fiber.StatusUnauthorized).JSON(fiber.Map{"error": "admin API: missing or wrong bearer token"})
	}
	return c.Next()
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// provision applies a provisioning file (the body). 200 with what changed;
// 422 with the faults and nothing applied when the file breaks a rule.
func (a *Admin) provision(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), a.cfg.ApplyTimeout)
	defer cancel()
	body := append([]byte(nil), c.Body()...)
	res, err := a.cat.Apply(ctx, body)
	if err != nil {
		var ve *catalog.ValidationError
		if errors.As(err, &ve) {
			return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": ve.Error(), "faults": ve.Faults})
		}
		a.logger.Error("admin: provisioning failed", "err", err)
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"error": err.Error()})
	}
	return c.JSON(fiber.Map{"version": res.Version, "changes": res.Changes})
}

// catalogSummary lists what the catalog holds (no secrets: keys of server
// sources and API keys are kept only as hashes).
func (a *Admin) catalogSummary(c *fiber.Ctx) error {
	st := a.cat.State()
	type src struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Kind     string `json:"kind"`
		Mode     string `json:"mode"`
		Key      string `json:"key,omitempty"`
		Archived bool   `json:"archived"`
		Revoked  bool   `json:"revoked"`
		Exposed  bool   `json:"exposed,omitempty"`
	}
	type proj struct {
		ID       string   `json:"id"`
		Slug     string   `json:"slug"`
		Name     string   `json:"name"`
		Timezone string   `json:"timezone"`
		Archived bool     `json:"archived"`
		Sources  []src    `json:"sources"`
		Actions  int      `json:"actions"`
		Funnels  int      `json:"funnels"`
		Segments int      `json:"segments"`
		Flags    []string `json:"flags"`
	}
	type org struct {
		ID       string `json:"id"`
		Slug     string `json:"slug"`
		Name     string `json:"name"`
		Plan     string `json:"plan"`
		Paused   bool   `json:"paused"`
		Projects []proj `json:"projects"`
	}
	out := struct {
		Version       uint64 `json:"version"`
		Organizations []org  `json:"organizations"`
	}{Version: st.Version(), Organizations: []org{}}
	for _, o := range st.Organizations() {
		og := org{ID: o.ID, Slug: o.Slug, Name: o.Name, Plan: o.Plan, Paused: o.Paused, Projects: []proj{}}
		for _, p := range st.Projects(o.ID) {
			pj := proj{ID: p.ID, Slug: p.Slug, Name: p.Name, Timezone: p.Timezone, Archived: p.Archived,
				Sources: []src{}, Flags: []string{},
				Actions: len(st.Actions(p.ID)), Funnels: len(st.Funnels(p.ID)), Segments: len(st.Segments(p.ID))}
			for _, s := range st.Sources(p.ID) {
				pj.Sources = append(pj.Sources, src{ID: s.ID, Name: s.Name, Kind: s.Kind, Mode: s.Mode, Key: s.Key,
					Archived: s.Archived, Revoked: s.Revoked, Exposed: s.Kind == catalog.KindServer && st.SecretKeyExposed(s.ID)})
			}
			for _, f := range st.Flags(p.ID) {
				pj.Flags = append(pj.Flags, f.Key+" s="+f.Seed)
			}
			og.Projects = append(og.Projects, pj)
		}
		out.Organizations = append(out.Organizations, og)
	}
	return c.JSON(out)
}

// previewToken issues a preview token for a draft experiment: 201 with the
// token, the query parameter to carry it in, and when it expires.
func (a *Admin) previewToken(c *fiber.Ctx) error {
	if a.cfg.IssuePreviewToken == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "preview tokens are issued by a process that runs the flag service"})
	}
	tok, exp, err := a.cfg.IssuePreviewToken(c.UserContext(), c.Params("project"), c.Params("flag"))
	switch {
	case errors.Is(err, ErrNotFound):
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": err.Error()})
	case errors.Is(err, ErrRefused):
		return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": err.Error()})
	case err != nil:
		a.logger.Error("admin: cannot issue a preview token", "err", err)
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"error": err.Error()})
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"token": tok, "parameter": "svc-preview-token",
		"expiresAt": exp.UTC().Format(time.RFC3339Nano)})
}

// replay rebuilds a project's tables: POST
// /admin/v1/projects/{id}/replay?from=YYYY-MM-DD&source=archive|log. It
// answers when the rebuilt tables are live.
func (a *Admin) replay(c *fiber.Ctx) error {
	if a.cfg.Replay == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process cannot replay"})
	}
	out, err := a.cfg.Replay(c.UserContext(), c.Params("project"), c.Query("from"), c.Query("source"))
	if err != nil {
		return a.hookError(c, err)
	}
	return c.JSON(out)
}

// importRows loads an import file (the body; docs/imports.md) into a
// project: 200 with what changed, 422 with every fault (line and field)
// and nothing stored, 404 for an unknown project.
func (a *Admin) importRows(c *fiber.Ctx) error {
	if a.cfg.Imports == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process keeps no imports"})
	}
	imp, err := ParseImport(bytes.NewReader(c.Body()))
	if err == nil {
		var res ImportResult
		res, err = a.cfg.Imports.Apply(c.UserContext(), c.Params("project"), imp)
		if err == nil {
			return c.JSON(res)
		}
	}
	var ie *ImportError
	if errors.As(err, &ie) {
		return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": err.Error(), "faults": ie.Faults})
	}
	return a.hookError(c, err)
}

// hookError answers an error of a reporting hook by the sentinel it wraps.
func (a *Admin) hookError(c *fiber.Ctx, err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": err.Error()})
	case errors.Is(err, ErrRefused):
		return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": err.Error()})
	}
	a.logger.Error("admin: request failed", "path", c.Path(), "err", err)
	return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"error": err.Error()})
}

func (a *Admin) noReporting(c *fiber.Ctx) error {
	return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "app tokens and recent access live in a process that runs the reporting API"})
}

// issueAppTokens issues an OAuth-style access token (1 hour) and refresh
// token (30 days) for an approved app acting as the user: body {"app": name}.
func (a *Admin) issueAppTokens(c *fiber.Ctx) error {
	if a.cfg.Reporting == nil {
		return a.noReporting(c)
	}
	var body struct {
		App string `json:"app"`
	}
	if err := json.Unmarshal(c.Body(), &body); err != nil {
		return c.Status(fiber.StatusBadRequest).JSON(fiber.Map{"error": "body must be JSON {\"app\": \"<name>\"}"})
	}
	t, err := a.cfg.Reporting.IssueAppTokens(c.UserContext(), c.Params("user"), body.App)
	if err != nil {
		return a.hookError(c, err)
	}
	return c.Status(fiber.StatusCreated).JSON(t)
}

type refreshBody struct {
	RefreshToken string `json:"refreshToken"`
}

// refreshAppTokens renews an app's tokens with its refresh token (single
// use): body {"refreshToken": token}.
func (a *Admin) refreshAppTokens(c *fiber.Ctx) error {
	if a.cfg.Reporting == nil {
		return a.noReporting(c)
	}
	var body refreshBody
	if err := json.Unmarshal(c.Body(), &body); err != nil || body.RefreshToken == "" {
		return c.Status(fiber.StatusBadRequest).JSON(fiber.Map{"error": "body must be JSON {\"refreshToken\": \"<token>\"}"})
	}
	t, err := a.cfg.Reporting.RefreshAppTokens(c.UserContext(), body.RefreshToken)
	if err != nil {
		return a.hookError(c, err)
	}
	return c.JSON(t)
}

// revokeAppTokens revokes a refresh token: body {"refreshToken": token}.
func (a *Admin) revokeAppTokens(c *fiber.Ctx) error {
	if a.cfg.Reporting == nil {
		return a.noReporting(c)
	}
	var body refreshBody
	if err := json.Unmarshal(c.Body(), &body); err != nil || body.RefreshToken == "" {
		return c.Status(fiber.StatusBadRequest).JSON(fiber.Map{"error": "body must be JSON {\"refreshToken\": \"<token>\"}"})
	}
	if err := a.cfg.Reporting.RevokeAppRefreshToken(c.UserContext(), body.RefreshToken); err != nil {
		return a.hookError(c, err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// recentAccess lists a user's recent reporting API calls.
func (a *Admin) recentAccess(c *fiber.Ctx) error {
	if a.cfg.Reporting == nil {
		return a.noReporting(c)
	}
	recs, err := a.cfg.Reporting.RecentAccess(c.UserContext(), c.Params("user"))
	if err != nil {
		return a.hookError(c, err)
	}
	return c.JSON(fiber.Map{"access": recs})
}

// erase requests a person's erasure: DELETE
// /admin/v1/projects/{project}/people/{ref} answers 202 with the erasure's
// id and state, 404 for a ref that is no one.
func (a *Admin) erase(c *fiber.Ctx) error {
	if a.cfg.Erase == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process cannot erase people"})
	}
	rec, err := a.cfg.Erase(c.UserContext(), c.Params("project"), c.Params("ref"))
	if err != nil {
		return a.hookError(c, err)
	}
	return c.Status(fiber.StatusAccepted).JSON(rec)
}

// erasureStatus answers GET /admin/v1/projects/{project}/erasures/{id}.
func (a *Admin) erasureStatus(c *fiber.Ctx) error {
	if a.cfg.ErasureStatus == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process cannot read erasures"})
	}
	rec, err := a.cfg.ErasureStatus(c.UserContext(), c.Params("project"), c.Params("id"))
	if err != nil {
		return a.hookError(c, err)
	}
	return c.JSON(rec)
}

// export answers GET /admin/v1/projects/{project}/people/{ref}/export as
// NDJSON: the profile, then every stored event of the person, oldest first.
func (a *Admin) export(c *fiber.Ctx) error {
	if a.cfg.Export == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process cannot export people"})
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := a.cfg.Export(c.UserContext(), c.Params("project"), c.Params("ref"), w); err != nil {
		return a.hookError(c, err)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "application/x-ndjson")
	return c.Send(buf.Bytes())
}

// pprofHandler serves Go's runtime profiles (heap, goroutines, CPU for
// ?seconds=N, traces) under /debug/pprof/, as Prometheus and
// VictoriaMetrics do: what an operator sends with a report of a process
// that uses too much memory or CPU.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
