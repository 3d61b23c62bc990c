package records

import (
	"encoding/json"
	"fmt"
)

// Mode is the collection mode a batch is stored under.
type Mode uint8

// Collection modes. The zero value is no mode and is never stored.
const (
	// ModeConsentless: no identifiers, no locale, time zone or screen, no
	// person events and no ad click id values.
	ModeConsentless Mode = 1
	// ModeFull: identifiers and device context may be present.
	ModeFull Mode = 2
)

// String returns the protocol name of the mode: `consentless` or `full`.
func (m Mode) String() string {
	switch m {
	case ModeConsentless:
		return "consentless"
	case ModeFull:
		return "full"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// MarshalText writes the protocol name of the mode.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads `consentless` or `full`.
func (m *Mode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "consentless":
		*m = ModeConsentless
	case "full":
		*m = ModeFull
	default:
		return fmt.Errorf("cannot read collection mode %q: %w", b, ErrCorrupt)
	}
	return nil
}

// SourceKind is the kind of source a batch arrived through.
type SourceKind uint8

// Source kinds. The zero value is unknown and is never stored.
const (
	// SourceWebsite: a website key in the path; events may carry device and
	// location.
	SourceWebsite SourceKind = 1
	// SourceServer: a secret key as bearer; events carry no device and no
	// location.
	SourceServer SourceKind = 2
)

// String returns `website` or `server`.
func (k SourceKind) String() string {
	switch k {
	case SourceWebsite:
		return "website"
	case SourceServer:
		return "server"
	}
	return fmt.Sprintf("SourceKind(%d)", uint8(k))
}

// MarshalText writes `website` or `server`.
func (k SourceKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads `website` or `server`.
func (k *SourceKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "website":
		*k = SourceWebsite
	case "server":
		*k = SourceServer
	default:
		return fmt.Errorf("cannot read source kind %q: %w", b, ErrCorrupt)
	}
	return nil
}

// Batch is one accepted batch as stored on the log.
type Batch struct {
	// Project and Source are the catalog ids of the project and the source
	// whose key the batch arrived with.
	Project string `json:"project"`
	Source  string `json:"source"`
	// SourceKind is the kind of that source.
	SourceKind SourceKind `json:"sourceKind"`
	// Mode is the mode the batch is stored under: consentless when it was
	// sent as consentless or downgraded by Sec-GPC / DNT.
	Mode Mode `json:"mode"`
	// ID is the batch id (the idempotency key).
	ID UUID `json:"id"`
	// ReceivedAt is when the server received the batch, epoch milliseconds.
	ReceivedAt int64 `json:"receivedAt"`
	// SentAt is the batch's `sentAt` (epoch milliseconds, shared by all its
	// events), or -1 when the batch carried none.
	SentAt int64 `json:"sentAt"`
	// Receipt is the 202 answer given for the batch, so that a resend can be
	// answered with the same receipt.
	Receipt Receipt `json:"receipt"`
	// Edge holds what the edge derived from the request.
	Edge Edge `json:"edge"`
	// Context is the batch context as stored (empty fields when absent or
	// not kept).
	Context Context `json:"context"`
	// Events are the kept events in the order they were sent.
	Events []Event `json:"events"`
}

// Receipt is the body of the 202 answer.
type Receipt struct {
	// Batch is the batch id exactly as sent.
	Batch string `json:"batch"`
	// Accepted counts the events kept, exposures included.
	Accepted int `json:"accepted"`
	// Dropped counts the events not kept.
	Dropped int `json:"dropped"`
	// Reason is set only when nothing was kept for a reason of the
	// specification (`bot`, `install_check`, `ingestion_paused`,
	// `allowance_exhausted`).
	Reason string `json:"reason,omitempty"`
}

// Edge holds the request facts derived at the edge. The client address is
// never part of it.
type Edge struct {
	// Country is the ISO 3166-1 alpha-2 code, empty when unknown.
	Country string `json:"country"`
	// Region is the ISO 3166-2 subdivision code, empty when unknown.
	Region string `json:"region"`
	// Device is `desktop`, `mobile`, `tablet` or empty.
	Device string `json:"device"`
	// Browser and OS are family names, empty when unknown.
	Browser string `json:"browser"`
	OS      string `json:"os"`
	// VisitorHash is the daily salted visitor hash of a consentless batch;
	// empty for full batches. Its bytes are opaque to this package.
	VisitorHash []byte `json:"visitorHash,omitempty"`
}

// Context is the batch context shared by all events of the batch.
type Context struct {
	// SDK is `name/version` as sent, empty when absent.
	SDK string `json:"sdk"`
	// Locale (BCP 47) and Timezone (IANA) as sent; always empty for
	// consentless batches.
	Locale   string `json:"locale"`
	Timezone string `json:"timezone"`
	// HasScreen tells whether ScreenWidth and ScreenHeight were sent (never
	// for consentless batches). Each is 0 to 32,768.
	HasScreen    bool   `json:"hasScreen"`
	ScreenWidth  uint16 `json:"screenWidth"`
	ScreenHeight uint16 `json:"screenHeight"`
}

// Event is one normalized event.
type Event struct {
	// ID is the event id as sent, or derived from the batch id, the event's
	// index and its time as sent (docs/records.md).
	ID UUID `json:"id"`
	// Name is the event name.
	Name string `json:"name"`
	// Time is the event time, epoch milliseconds: its `time`, else the
	// batch's `sentAt`, else the time received; a time outside the window of
	// the specification is replaced by the time received.
	Time int64 `json:"time"`
	// Page is the page of the event; its URLs are empty when not stored.
	Page Page `json:"page"`
	// Properties is the properties object as compact JSON text (no
	// insignificant whitespace, slashes and non-ASCII characters unescaped),
	// nil when the event had none.
	Properties json.RawMessage `json:"properties,omitempty"`
	// AnonymousID and UserID are empty when absent, a placeholder, or not
	// kept (consentless).
	AnonymousID string `json:"anonymousId"`
	UserID      string `json:"userId"`
	// SessionID is the visit id; the zero UUID when absent or not kept.
	SessionID UUID `json:"sessionId"`
	// Revenue is the `revenue` property of a custom event as the decimal
	// text of its JSON number, empty when none. Currency is its `currency`
	// property upper-cased when it is three ASCII letters, else empty
	// (revenue then counts in the project's reporting currency).
	Revenue  string `json:"revenue,omitempty"`
	Currency string `json:"currency,omitempty"`
}

// Page is the page of an event.
type Page struct {
	// URL is the page address as stored: scheme, host, port, path and the
	// kept query parameters.
	URL URL `json:"url"`
	// Title is the page title as sent.
	Title string `json:"title"`
	// Referrer is the referring address without its query.
	Referrer URL `json:"referrer"`
}

// URL is an http or https address as stored. A zero URL (empty Scheme) means
// no address was stored.
type URL struct {
	// Scheme is `http` or `https`.
	Scheme string `json:"scheme,omitempty"`
	// Host is the host in lower case (an IPv6 address keeps its brackets).
	Host string `json:"host,omitempty"`
	// Port is the port in decimal, empty when none or the scheme's default.
	Port string `json:"port,omitempty"`
	// Path is the path as sent (percent-encoding kept), `/` when empty.
	Path string `json:"path,omitempty"`
	// Query holds only the kept parameters (utm_source, utm_medium,
	// utm_campaign, utm_term, utm_content and the click ids), in their
	// original order and encoding, joined by `&`; click id values are empty
	// unless the batch is stored in full mode. Always empty for referrers.
	Query string `json:"query,omitempty"`
}

// IsZero reports whether no address is stored.
func (u URL) IsZero() bool { return u.Scheme == "" }

// String formats the stored address, or returns "" when none is stored.
func (u URL) String() string {
	if u.Scheme == "" {
		return ""
	}
	n := len(u.Scheme) + 3 + len(u.Host) + len(u.Path)
	if u.Port != "" {
		n += 1 + len(u.Port)
	}
	if u.Query != "" {
		n += 1 + len(u.Query)
	}
	b := make([]byte, 0, n)
	b = append(b, u.Scheme...)
	b = append(b, "://"...)
	b = append(b, u.Host...)
	if u.Port != "" {
		b = append(b, ':')
		b = append(b, u.Port...)
	}
	b = append(b, u.Path...)
	if u.Query != "" {
		b = append(b, '?')
		b = append(b, u.Query...)
	}
	return string(b)
}
