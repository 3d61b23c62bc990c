package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones are checked the same on every machine
	"unicode/utf8"
)

// Limits of the provisioning file that the specifications leave open
// (docs/catalog.md).
const (
	maxNameLen        = 256
	maxDescriptionLen = 4096
	maxEmailLen       = 320
	maxOrigins        = 100
	maxOriginLen      = 2048
	maxEventNameLen   = 128
	maxPropertyKeyLen = 128
	maxMatchProps     = 64
	maxPathLen        = 2048
	maxAccountLen     = 512
	maxAccounts       = 100
	maxSegmentFilters = 12
	maxFilterValueLen = 500
	minFunnelSteps    = 2
	maxFunnelSteps    = 6
)

var (
	reUUID      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reSourceKey = regexp.MustCompile(`^(mf|svc)_[a-z0-9]{8}_[A-Za-z0-9_-]+$`)
	reAPIKey    = regexp.MustCompile(`^mf_pat_[a-z0-9]{8}_[A-Za-z0-9]{40}$`)
	reSlug      = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$`)
	reFlagKey   = regexp.MustCompile(`^[a-z][a-z0-9-]{1,63}$`)
	reVariant   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	reSeed      = regexp.MustCompile(`^[a-z0-9]{12}$`)
	reCountry   = regexp.MustCompile(`^[A-Z]{2}$`)
)

// reservedEvents are the `$` event names the ingest service accepts.
var reservedEvents = map[string]bool{
	"$pageview": true, "$autocapture": true, "$identify": true,
	"$search": true, "$exposure": true, "$install_check": true,
}

// HashToken returns the form in which the catalog keeps a secret key or an
// API key: the lower-case hex SHA-256 of its UTF-8 bytes. Website keys are
// hashed the same way for the uniqueness check, and also kept in plain.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// File is a provisioning file that passed every rule that needs nothing but
// the file: field types, formats, ranges, uniqueness of ids within the file.
// Rules across entities (references, uniqueness against the catalog, size
// caps) are checked when it is merged with a State (State.Plan).
//
// Entities appear in file order. Secret keys and API key tokens are already
// hashed; website keys are kept in plain. Flags without a seed have Seed "",
// segments have Ref "": both are filled in when merged.
type File struct {
	Organizations []*Organization
	Users         []*User
	APIKeys       []*APIKey
	Projects      []*Project
	Sources       []*Source
	Actions       []*Action
	Funnels       []*Funnel
	Segments      []*Segment
	Flags         []*Flag
	Providers     []*Provider

	// paths maps an entity reference (refOrg, refProject, ...) to the JSON
	// path of the entity in the file.
	paths map[string]string
}

// refOrg and the ref functions after it name entity references: one
// namespace per kind, used for paths and uniqueness.
func refOrg(id string) string            { return "organization " + id }
func refUser(id string) string           { return "user " + id }
func refAPIKey(hash string) string       { return "apikey " + hash }
func refProject(id string) string        { return "project " + id }
func refSource(id string) string         { return "source " + id }
func refAction(id string) string         { return "action " + id }
func refFunnel(id string) string         { return "funnel " + id }
func refSegment(id string) string        { return "segment " + id }
func refFlag(project, key string) string { return "flag " + project + " " + key }
func refProvider(project, name string) string {
	return "provider " + project + " " + name
}

// Parse reads a provisioning file (operations contract, section 2) and
// checks every rule that needs nothing but the file. It returns a
// *ValidationError (errors.Is(err, ErrInvalid)) listing the faults.
// Fields the file format does not define are ignored at every level.
func Parse(data []byte) (*File, error) {
	fs := &faults{}
	root, err := decodeJSON(data)
	if err != nil {
		fs.add("", "not a JSON document: %v", err)
		return nil, fs.err()
	}
	p := &parser{fs: fs, f: &File{paths: map[string]string{}}, keys: map[string]string{}}
	p.file(root)
	if err := fs.err(); err != nil {
		return nil, err
	}
	return p.f, nil
}

type parser struct {
	fs *faults
	f  *File
	// keys maps a source key's or API key's hash to the path that used it.
	keys map[string]string
	locs locations
}

// claim records an entity's path and reports a duplicate at its field
// (the id, or the key of a flag or an API key).
func (p *parser) claim(ref, path, field, what string) bool {
	if prev, dup := p.f.paths[ref]; dup {
		p.fs.add(pathField(path, field), "%s is already used by %s", what, prev)
		return false
	}
	p.f.paths[ref] = path
	return true
}

// id reads and checks an `id` field.
func (p *parser) id(w walker) (string, bool) {
	s, ok := w.str("id", true)
	if !ok {
		return "", false
	}
	if !reUUID.MatchString(s) {
		p.fs.add(w.at("id"), "must be a UUID in lower-case 8-4-4-4-12 hex form, not %q", clip(s))
		return "", false
	}
	return s, true
}

func (p *parser) name(w walker, field string, required bool) string {
	s, ok := w.str(field, required)
	if ok {
		text(p.fs, w.at(field), s, required, maxNameLen)
	}
	return s
}

func (p *parser) file(root any) {
	w, ok := object(p.fs, "", root)
	if !ok {
		return
	}
	// Organizations first, so that users' references can be read after.
	if l, ok := w.list("organizations", false); ok {
		for i, v := range l {
			p.organization(pathIndex("organizations", i), v)
		}
	}
	if l, ok := w.list("users", false); ok {
		for i, v := range l {
			p.user(pathIndex("users", i), v)
		}
	}
}

func (p *parser) user(path string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	u := &User{ID: id}
	u.Name = p.name(w, "name", false)
	if email, ok := w.str("email", false); ok {
		text(p.fs, w.at("email"), email, false, maxEmailLen)
		if at := strings.LastIndexByte(email, '@'); email != "" && (at <= 0 || at == len(email)-1 || strings.ContainsAny(email, " \t\r\n")) {
			p.fs.add(w.at("email"), "must be an e-mail address")
		}
		u.Email = email
	}
	u.Organizations = []string{}
	seen := map[string]bool{}
	for i, org := range w.strings("organizations") {
		at := pathIndex(w.at("organizations"), i)
		if !reUUID.MatchString(org) {
			p.fs.add(at, "must be an organization id (a UUID), not %q", clip(org))
			continue
		}
		if seen[org] {
			p.fs.add(at, "organization is listed twice")
			continue
		}
		seen[org] = true
		u.Organizations = append(u.Organizations, org)
	}
	if l, ok := w.list("apiKeys", false); ok {
		for i, kv := range l {
			p.apiKey(pathIndex(w.at("apiKeys"), i), id, kv)
		}
	}
	if idOK && p.claim(refUser(id), path, "id", "user id") {
		p.f.Users = append(p.f.Users, u)
	}
}

func (p *parser) apiKey(path, user string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	k := &APIKey{User: user}
	tok, ok := w.str("token", true)
	if ok {
		if !reAPIKey.MatchString(tok) {
			p.fs.add(w.at("token"), "must be an API key of the form mf_pat_, 8 lower-case letters or digits, _, 40 letters or digits")
			ok = false
		} else {
			k.Hash = HashToken(tok)
		}
	}
	k.ExpiresAt = p.moment(w, "expiresAt")
	k.Revoked = w.boolean("revoked")
	if ok && p.claim(refAPIKey(k.Hash), path, "token", "API key") {
		p.f.APIKeys = append(p.f.APIKeys, k)
	}
}

// moment reads an optional RFC 3339 time (null allowed).
func (p *parser) moment(w walker, field string) *time.Time {
	s, ok := w.str(field, false)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.fs.add(w.at(field), "must be an RFC 3339 time such as 2026-01-05T10:00:00Z, or null, not %q", clip(s))
		return nil
	}
	return &t
}

func (p *parser) organization(path string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	o := &Organization{ID: id}
	if s, ok := w.str("slug", true); ok {
		if !reSlug.MatchString(s) {
			p.fs.add(w.at("slug"), "must be 1 to 64 lower-case letters, digits and inner hyphens, not %q", clip(s))
		}
		o.Slug = s
	}
	o.Name = p.name(w, "name", true)
	if s, ok := w.str("plan", true); ok {
		oneOf(p.fs, w.at("plan"), s, PlanFree, PlanPro, PlanEnterprise)
		o.Plan = s
	}
	o.Paused = w.boolean("paused")
	if n, ok := w.integer("monthlyEventAllowance", false); ok {
		if n < 0 {
			p.fs.add(w.at("monthlyEventAllowance"), "must be null or at least 0, not %d", n)
		}
		o.MonthlyEventAllowance = &n
	}
	o.FeatureFlags = w.boolDefault("featureFlags", true)
	if idOK && p.claim(refOrg(id), path, "id", "organization id") {
		p.f.Organizations = append(p.f.Organizations, o)
	}
	if l, ok := w.list("projects", false); ok {
		for i, pv := range l {
			p.project(pathIndex(w.at("projects"), i), id, pv)
		}
	}
}

func (p *parser) project(path, org string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	pr := &Project{ID: id, Organization: org}
	if s, ok := w.str("slug", true); ok {
		if !reSlug.MatchString(s) {
			p.fs.add(w.at("slug"), "must be 1 to 64 lower-case letters, digits and inner hyphens, not %q", clip(s))
		}
		pr.Slug = s
	}
	pr.Name = p.name(w, "name", true)
	if s, ok := w.str("timezone", true); ok {
		loc, err := p.locs.load(s)
		if err != nil || s == "" || s == "Local" {
			p.fs.add(w.at("timezone"), "must be an IANA time zone such as Europe/Berlin, not %q", clip(s))
		} else {
			pr.loc = loc
		}
		pr.Timezone = s
	}
	if s, ok := w.str("reportingCurrency", true); ok {
		oneOf(p.fs, w.at("reportingCurrency"), s, "EUR", "USD", "GBP", "CHF")
		pr.ReportingCurrency = s
	}
	pr.Archived = w.boolean("archived")
	pr.CreatedAt = p.moment(w, "createdAt")
	pr.SegmentLookups = w.boolean("segmentLookups")
	if idOK && p.claim(refProject(id), path, "id", "project id") {
		p.f.Projects = append(p.f.Projects, pr)
	}
	if l, ok := w.list("sources", false); ok {
		for i, sv := range l {
			p.source(pathIndex(w.at("sources"), i), id, sv)
		}
	}
	if l, ok := w.list("actions", false); ok {
		for i, av := range l {
			p.action(pathIndex(w.at("actions"), i), id, av)
		}
	}
	if l, ok := w.list("funnels", false); ok {
		for i, fv := range l {
			p.funnel(pathIndex(w.at("funnels"), i), id, fv)
		}
	}
	if l, ok := w.list("segments", false); ok {
		for i, sv := range l {
			p.segment(pathIndex(w.at("segments"), i), id, sv)
		}
	}
	if l, ok := w.list("flags", false); ok {
		for i, fv := range l {
			p.flag(pathIndex(w.at("flags"), i), id, fv)
		}
	}
	if v, ok := w.get("providers"); ok {
		p.providers(w.at("providers"), id, v)
	}
}

func (p *parser) source(path, project string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	s := &Source{ID: id, Project: project}
	s.Name = p.name(w, "name", true)
	if k, ok := w.str("kind", true); ok {
		oneOf(p.fs, w.at("kind"), k, KindWebsite, KindServer)
		s.Kind = k
	}
	if m, ok := w.str("mode", true); ok {
		oneOf(p.fs, w.at("mode"), m, ModeConsentless, ModeFull)
		s.Mode = m
	}
	if key, ok := w.str("key", true); ok {
		if !reSourceKey.MatchString(key) {
			p.fs.add(w.at("key"), "must be a source key of the form mf_, 8 lower-case letters or digits, _, then letters, digits, _ or - (or the legacy svc_ prefix)")
		} else {
			s.KeyHash = HashToken(key)
			if prev, dup := p.keys[s.KeyHash]; dup {
				p.fs.add(w.at("key"), "key is already used by %s", prev)
			} else {
				p.keys[s.KeyHash] = w.at("key")
			}
			if s.Kind == KindWebsite {
				s.Key = key
			}
		}
	}
	s.AllowedOrigins = []string{}
	origins := w.strings("allowedOrigins")
	if len(origins) > 0 && s.Kind == KindServer {
		p.fs.add(w.at("allowedOrigins"), "applies only to website sources; leave it out or empty for a server source")
	} else if len(origins) > maxOrigins {
		p.fs.add(w.at("allowedOrigins"), "must list at most %d origins, not %d", maxOrigins, len(origins))
	} else {
		seen := map[string]bool{}
		for i, o := range origins {
			at := pathIndex(w.at("allowedOrigins"), i)
			if msg := checkOrigin(o); msg != "" {
				p.fs.add(at, "%s", msg)
				continue
			}
			if seen[strings.ToLower(o)] {
				p.fs.add(at, "origin %q is listed twice", clip(o))
				continue
			}
			seen[strings.ToLower(o)] = true
			s.AllowedOrigins = append(s.AllowedOrigins, o)
		}
	}
	s.Archived = w.boolean("archived")
	s.Revoked = w.boolean("revoked")
	if idOK && p.claim(refSource(id), path, "id", "source id") {
		p.f.Sources = append(p.f.Sources, s)
	}
}

// checkOrigin returns why o is not an origin (scheme://host[:port], http or
// https), or "".
func checkOrigin(o string) string {
	bad := func() string {
		return "must be an origin such as https://shop.example or http://localhost:3000 (scheme, host, optional port; no path), not " + strconv.Quote(clip(o))
	}
	if len(o) > maxOriginLen {
		return bad()
	}
	u, err := url.Parse(o)
	if err != nil || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(o, "#") {
		return bad()
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "must be an http or https origin, not " + strconv.Quote(clip(o))
	}
	host := u.Hostname()
	if host == "" || strings.ContainsAny(host, " %") {
		return bad()
	}
	if strings.Contains(u.Host, "[") {
		if net.ParseIP(host) == nil {
			return bad()
		}
	}
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return bad()
		}
	}
	return ""
}

func (p *parser) action(path, project string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	a := &Action{ID: id, Project: project}
	a.Name = p.name(w, "name", true)
	if s, ok := w.str("description", false); ok {
		text(p.fs, w.at("description"), s, false, maxDescriptionLen)
		a.Description = &s
	}
	if s, ok := w.str("role", false); ok {
		oneOf(p.fs, w.at("role"), s, RolePurchase, RoleConversion, RoleIntent)
		a.Role = s
	}
	if s, ok := w.str("revenueProperty", false); ok {
		p.propertyKey(w.at("revenueProperty"), s)
		a.RevenueProperty = &s
	}
	a.Archived = w.boolean("archived")
	if mv, ok := w.get("match"); !ok {
		p.fs.add(w.at("match"), "is required")
	} else if mw, ok := object(p.fs, w.at("match"), mv); ok {
		if ev, ok := mw.str("event", true); ok {
			p.eventName(mw.at("event"), ev)
			a.Match.Event = ev
		}
		if s, ok := mw.str("path", false); ok {
			p.pathPattern(mw.at("path"), s)
			a.Match.Path = s
		}
		if pv, ok := mw.get("properties"); ok {
			if pw, ok := object(p.fs, mw.at("properties"), pv); ok {
				if len(pw.m) > maxMatchProps {
					p.fs.add(pw.path, "must hold at most %d properties, not %d", maxMatchProps, len(pw.m))
				}
				props := make(map[string]any, len(pw.m))
				for _, k := range sortedKeys(pw.m) {
					at := pathField(pw.path, k)
					p.propertyKey(at, k)
					switch x := pw.m[k].(type) {
					case string, json.Number, bool:
						props[k] = x
					default:
						p.fs.add(at, "must be a string, number or boolean (an exact value), not %s", typeName(x))
					}
				}
				if len(props) > 0 {
					a.Match.Properties = props
				}
			}
		}
	}
	if idOK && p.claim(refAction(id), path, "id", "action id") {
		p.f.Actions = append(p.f.Actions, a)
	}
}

// eventName applies the Event name rules of the specification.
func (p *parser) eventName(path, s string) {
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0:
		p.fs.add(path, "must not be empty")
	case n > maxEventNameLen:
		p.fs.add(path, "must be at most %d characters, not %d", maxEventNameLen, n)
	case strings.TrimSpace(s) != s:
		p.fs.add(path, "must not start or end with white space")
	case s == "$install_check" || s == "flagProperties":
		p.fs.add(path, "%q events are never stored, so an action cannot match them", s)
	case strings.HasPrefix(s, "$") && !reservedEvents[s]:
		p.fs.add(path, "%q is not an event the service accepts: names starting with $ are reserved ($pageview, $autocapture, $identify, $search, $exposure)", clip(s))
	}
}

// pathPattern checks a page path pattern: `*` is the only wildcard, every
// other character stands for itself.
func (p *parser) pathPattern(path, s string) {
	switch {
	case s == "":
		p.fs.add(path, "must not be empty; leave it out to match every page")
	case utf8.RuneCountInString(s) > maxPathLen:
		p.fs.add(path, "must be at most %d characters", maxPathLen)
	case s[0] != '/' && s[0] != '*':
		p.fs.add(path, "must be a page path starting with / (or *), not %q", clip(s))
	case strings.ContainsAny(s, "?#"):
		p.fs.add(path, "must be a path only: stored page paths have no query or fragment")
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }):
		p.fs.add(path, "must not contain spaces or control characters")
	}
}

// propertyKey checks an event property key: 1 to 128 characters.
func (p *parser) propertyKey(path, s string) {
	if n := utf8.RuneCountInString(s); n == 0 || n > maxPropertyKeyLen {
		p.fs.add(path, "must be a property key of 1 to %d characters", maxPropertyKeyLen)
	}
}

func (p *parser) funnel(path, project string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	f := &Funnel{ID: id, Project: project, Window: 7, Basis: "person"}
	f.Name = p.name(w, "name", true)
	if l, ok := w.list("steps", true); ok {
		if len(l) < minFunnelSteps || len(l) > maxFunnelSteps {
			p.fs.add(w.at("steps"), "must hold %d to %d action ids, not %d", minFunnelSteps, maxFunnelSteps, len(l))
		}
		for i, sv := range l {
			at := pathIndex(w.at("steps"), i)
			s, ok := sv.(string)
			if !ok || !reUUID.MatchString(s) {
				p.fs.add(at, "must be an action id (a UUID)")
				continue
			}
			f.Steps = append(f.Steps, s)
		}
	}
	if n, ok := w.integer("window", false); ok {
		if n != 1 && n != 7 && n != 14 && n != 30 {
			p.fs.add(w.at("window"), "must be 1, 7, 14 or 30 days, not %d", n)
		}
		f.Window = int(n)
	}
	if s, ok := w.str("basis", false); ok {
		oneOf(p.fs, w.at("basis"), s, "person", "visit")
		f.Basis = s
	}
	if idOK && p.claim(refFunnel(id), path, "id", "funnel id") {
		p.f.Funnels = append(p.f.Funnels, f)
	}
}

func (p *parser) segment(path, project string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	id, idOK := p.id(w)
	s := &Segment{ID: id, Project: project, Filters: []SegmentFilter{}}
	s.Name = p.name(w, "name", true)
	if l, ok := w.list("filters", true); ok {
		if len(l) > maxSegmentFilters {
			p.fs.add(w.at("filters"), "must hold at most %d filters, not %d", maxSegmentFilters, len(l))
		}
		for i, fv := range l {
			if f, ok := p.segmentFilter(pathIndex(w.at("filters"), i), fv); ok {
				s.Filters = append(s.Filters, f)
			}
		}
	}
	if idOK && p.claim(refSegment(id), path, "id", "segment id") {
		p.f.Segments = append(p.f.Segments, s)
	}
}

func (p *parser) providers(path, project string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	for _, name := range sortedKeys(w.m) {
		at := pathField(path, name)
		known := false
		for _, n := range providerNames {
			known = known || n == name
		}
		if !known {
			p.fs.add(at, "is not a provider: use %s", quoteList(providerNames))
			continue
		}
		pw, ok := object(p.fs, at, w.m[name])
		if !ok {
			continue
		}
		pr := &Provider{Project: project, Name: name, Accounts: []string{}}
		if s, ok := pw.str("state", true); ok {
			oneOf(p.fs, pw.at("state"), s, providerStates...)
			pr.State = s
		}
		accounts := pw.strings("accounts")
		if len(accounts) > maxAccounts {
			p.fs.add(pw.at("accounts"), "must list at most %d accounts, not %d", maxAccounts, len(accounts))
		}
		for i, a := range accounts {
			text(p.fs, pathIndex(pw.at("accounts"), i), a, true, maxAccountLen)
			pr.Accounts = append(pr.Accounts, a)
		}
		if p.claim(refProvider(project, name), at, "", "provider") {
			p.f.Providers = append(p.f.Providers, pr)
		}
	}
}
