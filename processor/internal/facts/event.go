package facts

import (
	"strings"
	"unsafe"

	"github.com/mfhq/mf/storage/records"
)

// Event is one accepted event as the processor keeps it: the fields of the
// log record that facts and reports need, normalized. It is also the raw
// part of a row of the events table, which replay reads back.
type Event struct {
	ID   records.UUID
	Time int64 // epoch milliseconds
	Name string
	// Client holds what the event shares with the other events of its
	// batch: source, mode, edge and context fields.
	Client *Client
	// Origin is the page's scheme://host[:port], Host its host (lower case,
	// no port), Path and Query its path and kept query parameters, Title
	// its title. All empty for an event without a page.
	Origin, Host, Path, Query, Title string
	// Referrer is the referrer's scheme://host[:port]/path, "" when none.
	Referrer string
	// Browser is the ref of the event's anonymousId (NodeRef of kind 'a'):
	// the raw anonymousId is not kept, only its pseudonymous ref. The
	// zero Ref when the event had none (absent, a placeholder, or
	// consentless).
	Browser Ref
	// UserID as stored (empty when absent or a placeholder); SessionID the
	// zero UUID when absent.
	UserID    string
	SessionID records.UUID
	// Visitor is the ref of the consentless visitor (from the daily visitor
	// hash of the batch); the zero Ref for full events.
	Visitor Ref
	// Properties is the properties object as JSON text, "" when none.
	Properties string
	// Revenue and Currency as in the record.
	Revenue, Currency string

	// What was derived from the catalog when the event was first
	// processed, kept with it so that a restart derives the same facts:
	// Actions lists the ids of the actions it matched, comma-separated;
	// Value and ValueCurrency its revenue in micro-units (HasValue); Purchase
	// whether it counts as an order.
	Actions       string
	HasValue      bool
	Value         int64
	ValueCurrency string
	Purchase      bool
	// Derived marks an event whose derived fields are set (read back from
	// the events table); Add then keeps them instead of matching again.
	Derived bool
}

// Client is the part of an event shared by its batch.
type Client struct {
	Source                                       string // catalog id of the source
	Consented                                    bool   // stored in full mode
	Server                                       bool   // a server source
	Country, Region, Device, Browser, OS, Locale string
}

// RefHostPath splits the stored referrer into host (lower case, no port)
// and path.
func (e *Event) RefHostPath() (host, path string) {
	return splitURL(e.Referrer)
}

// splitURL returns the host (without port) and path of scheme://host[:port]/path.
func splitURL(u string) (host, path string) {
	if u == "" {
		return "", ""
	}
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	hp := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hp, path = rest[:i], rest[i:]
	}
	host = hp
	if strings.HasPrefix(hp, "[") {
		if i := strings.IndexByte(hp, ']'); i >= 0 {
			host = hp[:i+1]
		}
	} else if i := strings.LastIndexByte(hp, ':'); i >= 0 {
		host = hp[:i]
	}
	return host, path
}

// originKey is a URL without query, for sharing formatted URLs.
type originKey struct{ scheme, host, port, path string }

// origin returns scheme://host[:port][path], formatted once.
func (e *Engine) origin(k originKey) string {
	if s, ok := e.origins[k]; ok {
		return s
	}
	s := k.scheme + "://" + k.host
	if k.port != "" {
		s += ":" + k.port
	}
	s += k.path
	if len(e.origins) >= 1<<18 {
		clear(e.origins)
	}
	k = originKey{strings.Clone(k.scheme), strings.Clone(k.host), strings.Clone(k.port), strings.Clone(k.path)}
	e.origins[k] = s
	return s
}

// interner shares equal strings (paths, titles, hosts, names) between the
// events kept in memory.
type interner struct {
	m map[string]string
}

func (in *interner) get(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in.m[s]; ok {
		return v
	}
	s = strings.Clone(s)
	if len(in.m) < 1<<20 {
		in.m[s] = s
	}
	return s
}

// getBytes is get of string(b), allocating only for a string not held.
func (in *interner) getBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	return in.get(string(b))
}

// batchClient returns the shared Client of a batch and its consentless
// visitor ref.
func (e *Engine) batchClient(b *records.Batch) (*Client, Ref) {
	c := e.client(Client{
		Source:    b.Source,
		Consented: b.Mode == records.ModeFull,
		Server:    b.SourceKind == records.SourceServer,
		Country:   b.Edge.Country,
		Region:    b.Edge.Region,
		Device:    b.Edge.Device,
		Browser:   b.Edge.Browser,
		OS:        b.Edge.OS,
		Locale:    b.Context.Locale,
	})
	var visitor Ref
	if b.Mode == records.ModeConsentless && len(b.Edge.VisitorHash) > 0 {
		visitor = VisitorRef(e.cfg.Project, b.Edge.VisitorHash)
	}
	return c, visitor
}

// fillEvent normalizes one event of a batch. The strings of ev may point
// into the batch: the engine copies them into its day arena.
func (e *Engine) fillEvent(ev *Event, b *records.Batch, r *records.Event, c *Client, visitor Ref) {
	ev.ID = r.ID
	ev.Time = r.Time
	ev.Name = r.Name
	ev.Client = c
	if !r.Page.URL.IsZero() {
		u := &r.Page.URL
		ev.Origin = e.origin(originKey{u.Scheme, u.Host, u.Port, ""})
		ev.Host = u.Host
		ev.Path = u.Path
		ev.Query = u.Query
	}
	ev.Title = r.Page.Title
	if !r.Page.Referrer.IsZero() {
		u := &r.Page.Referrer
		ev.Referrer = e.origin(originKey{u.Scheme, u.Host, u.Port, u.Path})
	}
	if b.Mode == records.ModeFull {
		if r.AnonymousID != "" {
			// The events of a batch mostly share their browser.
			if r.AnonymousID != e.batchAnon {
				e.batchAnon, e.batchRef = r.AnonymousID, e.browserRef(r.AnonymousID)
			}
			ev.Browser = e.batchRef
		}
		ev.UserID = r.UserID
		ev.SessionID = r.SessionID
	} else {
		ev.Visitor = visitor
	}
	if len(r.Properties) > 0 {
		// Not copied: the arena copies it, nothing else keeps it.
		ev.Properties = unsafe.String(&r.Properties[0], len(r.Properties))
	}
	ev.Revenue = r.Revenue
	ev.Currency = r.Currency
}

// browserRef returns the ref of an anonymousId, derived once per browser.
func (e *Engine) browserRef(anon string) Ref {
	if r, ok := e.anonRefs[anon]; ok {
		return r
	}
	r := NodeRef(e.cfg.Project, KindBrowser, anon)
	if len(e.anonRefs) >= 1<<20 {
		clear(e.anonRefs)
	}
	e.anonRefs[strings.Clone(anon)] = r
	return r
}

// UserRef returns the ref of a userId, derived once per user.
func (e *Engine) UserRef(uid string) Ref {
	if n, ok := e.users[uid]; ok {
		return n.ref
	}
	return NodeRef(e.cfg.Project, KindUser, uid)
}

// client returns the shared copy of c.
func (e *Engine) client(c Client) *Client {
	if p, ok := e.clients[c]; ok {
		return p
	}
	p := new(Client) // not &c: c would escape, allocated at every call
	*p = c
	p.Country = e.in.get(c.Country)
	p.Region = e.in.get(c.Region)
	p.Device = e.in.get(c.Device)
	p.Browser = e.in.get(c.Browser)
	p.OS = e.in.get(c.OS)
	p.Locale = e.in.get(c.Locale)
	p.Source = e.in.get(c.Source)
	if len(e.clients) < 1<<16 {
		// Keyed by the interned copy: c's strings may point into a batch
		// decoded without copies, which must not be kept alive.
		e.clients[*p] = p
	}
	return p
}

// Client returns the engine's shared copy of c (for events read back from
// the events table).
func (e *Engine) Client(c Client) *Client { return e.client(c) }

// Intern returns the engine's shared copy of s.
func (e *Engine) Intern(s string) string { return e.in.get(s) }
