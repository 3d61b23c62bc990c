package catalog

import (
	"encoding/json"
	"time"
)

// The entities of the catalog. Values reached through a *State are shared by
// every reader and must not be modified. Their JSON form is the encoding of
// the change events on the log (docs/catalog.md); field names follow the
// provisioning file, with parents named by id.

// Plans of an organization.
const (
	PlanFree       = "free"
	PlanPro        = "pro"
	PlanEnterprise = "enterprise"
)

// Organization owns projects; users belong to organizations.
type Organization struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
	Plan string `json:"plan"`
	// Paused organizations have their batches answered with reason
	// ingestion_paused; flag documents are still served.
	Paused bool `json:"paused"`
	// MonthlyEventAllowance is nil for no allowance (unlimited).
	MonthlyEventAllowance *int64 `json:"monthlyEventAllowance"`
	// FeatureFlags false makes the flag endpoints answer 404 not_found.
	FeatureFlags bool `json:"featureFlags"`
}

// User is a person who reads reports with API keys.
type User struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Email         string   `json:"email"`
	Organizations []string `json:"organizations"`
}

// APIKey is a reporting API credential (`mf_pat_…`). Only the SHA-256 hash
// of the token is kept.
type APIKey struct {
	// Hash is the lower-case hex SHA-256 of the token (HashToken).
	Hash string `json:"hash"`
	// User is the owner's id.
	User      string     `json:"user"`
	ExpiresAt *time.Time `json:"expiresAt"`
	Revoked   bool       `json:"revoked"`
}

// Usable reports whether the key may be used at now: not revoked, not
// expired.
func (k *APIKey) Usable(now time.Time) bool {
	return !k.Revoked && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// Project collects sources, actions, funnels, segments, flags and providers.
type Project struct {
	ID                string     `json:"id"`
	Organization      string     `json:"organization"`
	Slug              string     `json:"slug"`
	Name              string     `json:"name"`
	Timezone          string     `json:"timezone"`
	ReportingCurrency string     `json:"reportingCurrency"`
	Archived          bool       `json:"archived"`
	CreatedAt         *time.Time `json:"createdAt"`
	// SegmentLookups allows browser segment lookups
	// (POST /v1/flags/{websiteKey}); when false every ref is unavailable.
	SegmentLookups bool `json:"segmentLookups"`

	loc *time.Location
}

// Location is the project's time zone.
func (p *Project) Location() *time.Location {
	if p.loc == nil {
		return time.UTC
	}
	return p.loc
}

// Source kinds and collection modes.
const (
	KindWebsite     = "website"
	KindServer      = "server"
	ModeConsentless = "consentless"
	ModeFull        = "full"
)

// Source is a website source (a website key, public) or a server source (a
// secret key, kept only as its hash).
type Source struct {
	ID      string `json:"id"`
	Project string `json:"project"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Mode    string `json:"mode"`
	// Key is the website key; empty for server sources, whose key is never
	// kept in plain.
	Key string `json:"key,omitempty"`
	// KeyHash is the lower-case hex SHA-256 of the key, for both kinds.
	KeyHash        string   `json:"keyHash"`
	AllowedOrigins []string `json:"allowedOrigins"`
	Archived       bool     `json:"archived"`
	Revoked        bool     `json:"revoked"`
}

// Action roles.
const (
	RolePurchase   = "purchase"
	RoleConversion = "conversion"
	RoleIntent     = "intent"
)

// Action is something people do, recognised by its Match. An action with a
// Role is a goal.
type Action struct {
	ID          string  `json:"id"`
	Project     string  `json:"project"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	// Role is "" for an action that is not a goal.
	Role            string  `json:"role,omitempty"`
	RevenueProperty *string `json:"revenueProperty"`
	Archived        bool    `json:"archived"`
	Match           Match   `json:"match"`
}

// Match recognises an action's events.
type Match struct {
	// Event is the event name.
	Event string `json:"event"`
	// Path is a page path pattern, `*` the only wildcard; "" for any page.
	Path string `json:"path,omitempty"`
	// Properties are exact scalar values the event's properties must have:
	// string, json.Number or bool.
	Properties map[string]any `json:"properties,omitempty"`
}

// Funnel is a saved funnel of 2 to 6 actions.
type Funnel struct {
	ID      string   `json:"id"`
	Project string   `json:"project"`
	Name    string   `json:"name"`
	Steps   []string `json:"steps"`
	// Window is 1, 7, 14 or 30 days; Basis "person" or "visit".
	Window int    `json:"window"`
	Basis  string `json:"basis"`
}

// Segment is a saved list of person filters (the people-list filter
// language of the reporting API).
type Segment struct {
	ID      string `json:"id"`
	Project string `json:"project"`
	Name    string `json:"name"`
	// Ref is the opaque name of the segment in flag documents and
	// membership answers: 8 characters [a-z0-9], random, unique in its
	// project, kept for the segment's life.
	Ref     string          `json:"ref"`
	Filters []SegmentFilter `json:"filters"`
}

// SegmentFilter is one person filter. Value is "" for operators without a
// value (set, not_set).
type SegmentFilter struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value string `json:"value,omitempty"`
}

// Flag readers, types and units.
const (
	ReadByWebsite = "website"
	ReadByServer  = "server"
	ReadByBoth    = "both"
)

// Flag is a feature flag of a project, identified by its key. The fields
// t u d s p r off need e c mean what they mean in a compiled flag document
// (see the specification); segment conditions name segments by id here.
type Flag struct {
	Project     string `json:"project"`
	Key         string `json:"key"`
	Name        string `json:"name"`
	Description string `json:"description"`
	ReadBy      string `json:"readBy"`
	Type        string `json:"t"`
	Unit        string `json:"u"`
	Default     string `json:"d"`
	Seed        string `json:"s"`
	// Payloads maps a variant to its value, canonical JSON.
	Payloads map[string]json.RawMessage `json:"p,omitempty"`
	Rules    []Rule                     `json:"r"`
	Off      bool                       `json:"off,omitempty"`
	// Need is nil when the file left it out (the evaluator reads 1).
	Need *int `json:"need,omitempty"`
	// Experiment is "r", "o" or "" (e); Counted "b", "s" or "" (c).
	Experiment string `json:"e,omitempty"`
	Counted    string `json:"c,omitempty"`
	Orig       bool   `json:"orig,omitempty"`
}

// ReadByWebsite reports whether browsers read the flag (browser and values
// views).
func (f *Flag) ReadByWebsite() bool { return f.ReadBy == ReadByWebsite || f.ReadBy == ReadByBoth }

// ReadByServer reports whether servers read the flag (server view).
func (f *Flag) ReadByServer() bool { return f.ReadBy == ReadByServer || f.ReadBy == ReadByBoth }

// Rule is a fixed rule (X set) or a split rule (Share and Weights).
type Rule struct {
	// HasIf tells an absent `if` from an empty one (an empty list counts as
	// present: TARGETING_MATCH rather than STATIC).
	HasIf bool        `json:"-"`
	If    []Condition `json:"-"`
	X     string      `json:"-"`
	// Share is nil when absent (10,000).
	Share   *int     `json:"-"`
	Weights []Weight `json:"-"`
	// HasWeights tells an absent `w` from an empty one.
	HasWeights bool `json:"-"`
}

// Weight is one `[variant, weight]` pair of a split.
type Weight struct {
	Variant string
	Weight  int
}

// Condition kinds.
const (
	CondProperty = "p"
	CondSegment  = "s"
)

// Condition is `["p", property, op, value]` or `["s", segment]` /
// `["s", segment, 1]`.
type Condition struct {
	Kind     string
	Property string
	Op       string
	// Value is the canonical JSON of the operand (a list, a number or null).
	Value json.RawMessage
	// Segment is the segment's id; Not is the three-element form.
	Segment string
	Not     bool
}

// Provider names and states.
var (
	providerNames  = []string{"ads_platform_a", "ads_platform_b", "search_import_a", "search_import_b"}
	providerStates = []string{"dataset_off", "importing", "not_available", "not_connected", "ready", "refused"}
)

// Provider is the configuration of one search or ads import source of a
// project.
type Provider struct {
	Project  string   `json:"project"`
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Accounts []string `json:"accounts"`
}
