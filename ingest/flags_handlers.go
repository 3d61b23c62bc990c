package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/evaluator"
	"github.com/mfhq/mf/storage/catalog"
)

// FlagConfig configures the flag endpoints (Config.Flags). A zero field
// takes its default.
type FlagConfig struct {
	// SegmentFreshness is the freshness limit of membership answers:
	// `stale` is true when `refreshedAt` is older than this. Default 1h.
	SegmentFreshness time.Duration
	// MembershipTimeout bounds one call of the MembershipSource; when it
	// passes, every ref is answered unavailable. Default 2s.
	MembershipTimeout time.Duration
}

// DefaultFlagConfig returns the defaults documented on FlagConfig.
func DefaultFlagConfig() FlagConfig {
	return FlagConfig{SegmentFreshness: time.Hour, MembershipTimeout: 2 * time.Second}
}

// Validate reports a setting that cannot work.
func (c FlagConfig) Validate() error {
	if c.SegmentFreshness < 0 || c.MembershipTimeout < 0 {
		return fmt.Errorf("ingest config: Flags.SegmentFreshness and Flags.MembershipTimeout must not be negative")
	}
	return nil
}

func (c FlagConfig) withDefaults() FlagConfig {
	d := DefaultFlagConfig()
	if c.SegmentFreshness <= 0 {
		c.SegmentFreshness = d.SegmentFreshness
	}
	if c.MembershipTimeout <= 0 {
		c.MembershipTimeout = d.MembershipTimeout
	}
	return c
}

// Request limits of the flag endpoints (specification, Limits).
const (
	maxLookupBody  = 1024
	maxLookupUnits = 100
	// previewParam is the query parameter of preview tokens.
	previewParam = "svc-preview-token"
)

// flagRoutes serves the four flag endpoints.
type flagRoutes struct {
	s          *Server
	cfg        FlagConfig
	docs       *FlagDocuments
	membership MembershipSource
	previews   *previewKeys
	// broken, when set, is why flag documents are unavailable: every flag
	// endpoint answers 503.
	broken error

	limAddr, limGetWebsite, limPostWebsite, limGetServer, limUnits *limiter
}

// registerFlagRoutes adds GET and POST /v1/flags/{websiteKey}, GET
// /v1/flags and POST /v1/flags/segments to app, and makes Deps.Flags
// follow the catalog.
func (s *Server) registerFlagRoutes(app *fiber.App) {
	fr := &flagRoutes{
		s:              s,
		cfg:            s.cfg.Flags.withDefaults(),
		docs:           s.deps.Flags,
		membership:     s.deps.Membership,
		previews:       &previewKeys{bucket: s.deps.Bucket, retryAfter: 5 * time.Second},
		limAddr:        newLimiter(s.cfg.Limits.FlagsPerAddress, s.deps.Share),
		limGetWebsite:  newLimiter(s.cfg.Limits.FlagsGetWebsite, s.deps.Share),
		limPostWebsite: newLimiter(s.cfg.Limits.FlagsPostWebsite, s.deps.Share),
		limGetServer:   newLimiter(s.cfg.Limits.FlagsGetServer, s.deps.Share),
		limUnits:       newLimiter(s.cfg.Limits.SegmentUnitsPerKey, s.deps.Share),
	}
	if fr.membership == nil {
		fr.membership = NoMembership{}
	}
	if fr.docs == nil {
		// A process should build one FlagDocuments, hook it into the
		// catalog and pass it; this private one is never closed.
		s.logger.Warn("ingest: Deps.Flags is not set; flag documents use a private compiler")
		docs, err := NewFlagDocuments(context.Background(), DefaultFlagDocumentsConfig(), s.deps.Bucket, s.logger)
		if err != nil {
			fr.broken = err
		}
		fr.docs = docs
	}
	if fr.broken == nil {
		fr.broken = fr.docs.Follow(context.Background(), s.deps.Catalog)
	}
	if fr.broken != nil {
		s.logger.Error("ingest: flag documents are unavailable; flag endpoints answer 503", "err", fr.broken)
	}
	app.Get("/v1/flags", fr.getServer)
	app.Post("/v1/flags/segments", fr.postSegments)
	app.Get("/v1/flags/:key", fr.getWebsite)
	app.Post("/v1/flags/:key", fr.postWebsite)
}

// flagRequest is an authenticated flag request.
type flagRequest struct {
	o      keyOwner
	st     *catalog.State
	now    time.Time
	netKey string
}

// begin applies what comes before the key check: the service being up and
// the per-address budget. It returns nil when it has answered.
func (fr *flagRoutes) begin(c *fiber.Ctx) (*flagRequest, error) {
	if fr.broken != nil {
		c.Set(fiber.HeaderRetryAfter, "60")
		return nil, sendMessage(c, fiber.StatusServiceUnavailable, "Flag documents are unavailable; try again later")
	}
	now := fr.s.deps.Clock()
	net, _ := fr.s.enr.NetKey(requestFacts(c))
	nk := net.Key()
	if ok, wait := fr.limAddr.take(nk, 1, now); !ok {
		return nil, sendRateLimited(c, wait)
	}
	return &flagRequest{now: now, netKey: nk}, nil
}

// authWebsite authenticates a website-key request (Authentication rules 3
// to 5 and 7). It returns nil when it has answered.
func (fr *flagRoutes) authWebsite(c *fiber.Ctx) (*flagRequest, error) {
	r, err := fr.begin(c)
	if r == nil {
		return nil, err
	}
	key := c.Params("key")
	if !looksLikeKey(key) {
		return nil, sendMessage(c, fiber.StatusNotFound, "Not found")
	}
	r.st = fr.s.deps.Catalog.State()
	o, ok := lookupKey(r.st, key)
	if !ok {
		return nil, sendProblem(c, errUnauthorized("the website key is unknown, revoked or archived"), 0)
	}
	if o.src.Kind != catalog.KindWebsite {
		if fromBrowser(c) {
			fr.s.markExposed(c, r.st, o.src)
		}
		return nil, sendProblem(c, problem(http.StatusForbidden, CodeSecretKeyInPath,
			"a secret key was sent in the path; secret keys go in the Authorization header, from servers only"), 0)
	}
	if origin := c.Get(fiber.HeaderOrigin); origin != "" && !originAllowed(origin, o.src.AllowedOrigins) {
		return nil, sendProblem(c, problem(http.StatusForbidden, CodeOriginNotAllowed,
			"this origin is not among the source's allowed origins"), 0)
	}
	if !o.org.FeatureFlags {
		return nil, sendProblem(c, problem(http.StatusNotFound, CodeNotFound,
			"feature flags are not available for this organization"), 0)
	}
	r.o = o
	return r, nil
}

// authServer authenticates a secret-key request (Authentication rules 3,
// 5 to 7). It returns nil when it has answered.
func (fr *flagRoutes) authServer(c *fiber.Ctx) (*flagRequest, error) {
	r, err := fr.begin(c)
	if r == nil {
		return nil, err
	}
	tok, ok := bearerToken(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return nil, sendProblem(c, errUnauthorized("send the secret key as Authorization: Bearer <key>"), 0)
	}
	r.st = fr.s.deps.Catalog.State()
	o, ok := lookupKey(r.st, tok)
	if !ok {
		return nil, sendProblem(c, errUnauthorized("the secret key is unknown, revoked or archived"), 0)
	}
	if o.src.Kind != catalog.KindServer {
		return nil, sendProblem(c, problem(http.StatusForbidden, CodeWebsiteKeyAsBearer,
			"a website key was sent as bearer; website keys go in the path"), 0)
	}
	exposed := r.st.SecretKeyExposed(o.src.ID)
	if fromBrowser(c) {
		fr.s.markExposed(c, r.st, o.src)
		exposed = true
	}
	if exposed {
		return nil, sendProblem(c, problem(http.StatusForbidden, CodeSecretKeyExposed,
			"this secret key was sent from a browser and is exposed; create a new key, deploy it and revoke this one"), 0)
	}
	if !o.org.FeatureFlags {
		return nil, sendProblem(c, problem(http.StatusNotFound, CodeNotFound,
			"feature flags are not available for this organization"), 0)
	}
	r.o = o
	return r, nil
}

// getWebsite is GET /v1/flags/{websiteKey}: the browser document (full
// sources), or the values document (view=values, or always for a
// consentless source).
func (fr *flagRoutes) getWebsite(c *fiber.Ctx) error {
	r, err := fr.authWebsite(c)
	if r == nil {
		return err
	}
	if ok, wait := fr.limGetWebsite.take(r.o.src.ID+"|"+r.netKey, 1, r.now); !ok {
		return sendRateLimited(c, wait)
	}
	pd := fr.docs.project(r.o.proj.ID)
	c.Set(fiber.HeaderCacheControl, "no-store")
	if r.o.src.Mode == catalog.ModeConsentless || c.Query("view") == "values" {
		return sendFlagDocument(c, pd.values)
	}
	if tok := c.Query(previewParam); tok != "" {
		if doc, _, ok := fr.preview(c, r, pd, tok); ok {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(doc)
		}
	}
	return sendFlagDocument(c, pd.browser)
}

// postWebsite is POST /v1/flags/{websiteKey}: the browser document and the
// visitor's segment membership.
func (fr *flagRoutes) postWebsite(c *fiber.Ctx) error {
	r, err := fr.authWebsite(c)
	if r == nil {
		return err
	}
	if r.o.src.Mode == catalog.ModeConsentless {
		return sendProblem(c, problem(http.StatusForbidden, CodeLookupNotAllowed,
			"segment lookups are not allowed for a consentless source"), 0)
	}
	if ok, wait := fr.limPostWebsite.take(r.o.src.ID+"|"+r.netKey, 1, r.now); !ok {
		return sendRateLimited(c, wait)
	}
	pd := fr.docs.project(r.o.proj.ID)
	doc, refs := pd.browser.body, pd.browserRefs
	if tok := c.Query(previewParam); tok != "" {
		if pdoc, prefs, ok := fr.preview(c, r, pd, tok); ok {
			doc, refs = pdoc, prefs
		}
	}
	out := make([]byte, 0, len(doc)+128)
	out = append(out, `{"document":`...)
	out = append(out, doc...)
	if unit, ok := lookupUnit(c.Body()); ok && !PrivacySignal(c.Get("Sec-GPC"), c.Get("DNT")) {
		ms := fr.lookup(c.UserContext(), r, refs, []MembershipUnit{unit}, !r.o.proj.SegmentLookups)
		out = append(out, `,"membership":`...)
		out = appendMembership(out, ms[0])
	}
	out = append(out, '}')
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(out)
}

// lookupUnit reads the body of POST /v1/flags/{websiteKey}. ok is false
// when membership is to be left out: no body, over 1,024 bytes, not a JSON
// object, or without a usable anonymousId.
func lookupUnit(body []byte) (MembershipUnit, bool) {
	if len(body) == 0 || len(body) > maxLookupBody {
		return MembershipUnit{}, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return MembershipUnit{}, false
	}
	var id string
	if json.Unmarshal(fields["anonymousId"], &id) != nil || !evaluator.UsableID(id) {
		return MembershipUnit{}, false
	}
	var identified bool
	_ = json.Unmarshal(fields["identified"], &identified) // anything but true is false
	return MembershipUnit{Kind: UnitAnonymous, ID: id, Identified: identified}, true
}

// getServer is GET /v1/flags: the server document with a weak ETag, 304
// while the client's copy is current.
func (fr *flagRoutes) getServer(c *fiber.Ctx) error {
	r, err := fr.authServer(c)
	if r == nil {
		return err
	}
	if ok, wait := fr.limGetServer.take(r.o.src.ID, 1, r.now); !ok {
		return sendRateLimited(c, wait)
	}
	doc := fr.docs.project(r.o.proj.ID).server
	c.Set(fiber.HeaderCacheControl, "private, no-cache")
	c.Set(fiber.HeaderETag, doc.etag)
	if etagMatch(c.Get(fiber.HeaderIfNoneMatch), doc.etag) {
		c.Status(fiber.StatusNotModified)
		return nil
	}
	return sendFlagDocument(c, doc)
}

// postSegments is POST /v1/flags/segments: membership of up to 100 units,
// in request order, charged per unit.
func (fr *flagRoutes) postSegments(c *fiber.Ctx) error {
	r, err := fr.authServer(c)
	if r == nil {
		return err
	}
	units, cost, prob := parseLookupUnits(c.Body())
	if ok, wait := fr.limUnits.take(r.o.src.ID, float64(cost), r.now); !ok {
		return sendRateLimited(c, wait)
	}
	if prob != nil {
		return sendProblem(c, prob, 0)
	}
	refs := fr.docs.project(r.o.proj.ID).serverRefs
	ms := fr.lookup(c.UserContext(), r, refs, units, false)
	out := make([]byte, 0, 64+len(ms)*(64+16*len(refs)))
	out = append(out, `{"units":[`...)
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendMembership(out, m)
	}
	out = append(out, "]}"...)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(out)
}

// parseLookupUnits reads the body of POST /v1/flags/segments. cost is what
// the request is charged: the number of units of a list, 1 otherwise. A
// unit whose id is not usable is kept with an empty ID (answered
// unavailable).
func parseLookupUnits(body []byte) ([]MembershipUnit, int, *Problem) {
	invalid := func(detail string) *Problem {
		return problem(http.StatusUnprocessableEntity, CodeInvalidUnits, detail)
	}
	// Members are read by their exact names (encoding/json would match
	// a struct field's name in any case: {"UserId": …} is no userId).
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return nil, 1, invalid("the body must be a JSON object with units: a list of {userId} or {anonymousId} objects")
	}
	var list []json.RawMessage
	if units := req["units"]; len(units) == 0 || string(units) == "null" || json.Unmarshal(units, &list) != nil {
		return nil, 1, invalid("units must be a list of {userId} or {anonymousId} objects")
	}
	cost := max(1, len(list))
	if len(list) > maxLookupUnits {
		return nil, cost, problem(http.StatusUnprocessableEntity, CodeTooManyUnits,
			fmt.Sprintf("at most %d units per request; split the lookup", maxLookupUnits))
	}
	units := make([]MembershipUnit, len(list))
	for i, raw := range list {
		var u map[string]json.RawMessage
		if json.Unmarshal(raw, &u) != nil || raw[0] != '{' {
			return nil, cost, invalid(fmt.Sprintf("units.%d must be an object with a string userId or anonymousId", i))
		}
		user, userOK, userBad := stringMember(u["userId"])
		anon, anonOK, anonBad := stringMember(u["anonymousId"])
		if userBad || anonBad || userOK == anonOK {
			return nil, cost, invalid(fmt.Sprintf("units.%d must have exactly one of userId and anonymousId, a string (the other absent or null)", i))
		}
		if userOK {
			units[i] = MembershipUnit{Kind: UnitUser, ID: user}
		} else {
			units[i] = MembershipUnit{Kind: UnitAnonymous, ID: anon}
		}
	}
	return units, cost, nil
}

// stringMember reads an optional string member: ok when it is a string,
// bad when present, not null and not a string.
func stringMember(raw json.RawMessage) (s string, ok, bad bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, false
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", false, true
	}
	return s, true, false
}

// lookup answers the membership of units in the refs a document tests.
// off answers every ref unavailable (browser lookups switched off for the
// project); so do a failing source and units without a usable id.
func (fr *flagRoutes) lookup(ctx context.Context, r *flagRequest, refs []string, units []MembershipUnit, off bool) []membership {
	out := make([]membership, len(units))
	if len(refs) == 0 {
		return out
	}
	var ask []MembershipUnit
	var at []int
	for i, u := range units {
		if off || !evaluator.UsableID(u.ID) {
			out[i] = allUnavailable(refs)
			continue
		}
		ask = append(ask, u)
		at = append(at, i)
	}
	if len(ask) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, fr.cfg.MembershipTimeout)
	defer cancel()
	res, err := fr.membership.Membership(ctx, r.o.proj.ID, refs, ask)
	if err == nil && len(res) != len(ask) {
		err = fmt.Errorf("membership source answered %d units of %d", len(res), len(ask))
	}
	if err != nil {
		fr.s.logger.Warn("ingest: segment membership unavailable", "project", r.o.proj.ID, "units", len(ask), "err", err)
	}
	for j, i := range at {
		if err != nil {
			out[i] = allUnavailable(refs)
			continue
		}
		out[i] = normalizeMembership(refs, res[j], r.now, fr.cfg.SegmentFreshness)
	}
	return out
}

// preview returns the browser document with the draft experiment a valid
// preview token names, and the refs it tests; ok is false when the token
// is not valid for this source's project now.
func (fr *flagRoutes) preview(c *fiber.Ctx, r *flagRequest, pd *projectDocs, tok string) ([]byte, []string, bool) {
	key, err := fr.previews.get(c.UserContext(), r.now)
	if err != nil {
		fr.s.logger.Error("ingest: cannot check a preview token", "err", err)
	}
	if key == nil {
		return nil, nil, false
	}
	project, flag, ok := parsePreviewToken(key, tok, r.now)
	if !ok || project != r.o.proj.ID {
		return nil, nil, false
	}
	return previewDocument(r.st, pd, flag)
}

// sendFlagDocument sends a compiled document, gzip-compressed when it is
// kept so and the client accepts gzip.
func sendFlagDocument(c *fiber.Ctx, doc *flagDocument) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	if doc.gzip != nil {
		c.Set(fiber.HeaderVary, fiber.HeaderAcceptEncoding)
		if acceptsGzip(c.Get(fiber.HeaderAcceptEncoding)) {
			c.Set(fiber.HeaderContentEncoding, "gzip")
			return c.Send(doc.gzip)
		}
	}
	return c.Send(doc.body)
}

// acceptsGzip reads an Accept-Encoding header: gzip (or *) with a quality
// above 0.
func acceptsGzip(h string) bool {
	for h != "" {
		var part string
		part, h, _ = strings.Cut(h, ",")
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.TrimSpace(coding)
		if !strings.EqualFold(coding, "gzip") && coding != "*" {
			continue
		}
		q := strings.TrimSpace(params)
		if v, ok := strings.CutPrefix(q, "q="); ok {
			v = strings.TrimSpace(v)
			if strings.Trim(v, "0.") == "" {
				return false
			}
		}
		return true
	}
	return false
}

// etagMatch applies If-None-Match with the weak comparison: any listed
// tag equal to etag once `W/` is set aside, or `*`.
func etagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	opaque := strings.TrimPrefix(etag, "W/")
	for header != "" {
		var tag string
		tag, header, _ = strings.Cut(header, ",")
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == opaque {
			return true
		}
	}
	return false
}
