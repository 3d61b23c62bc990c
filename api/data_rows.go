package api

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"slices"
	"strings"
)

// The rows of the processor's tables as the reporting data layer keeps
// them, and their refs and orders.

// ref is a person, browser, visitor, visit or event ref (16 bytes).
type ref = [16]byte

// noPerson is the person index of a row without a person.
const noPerson int32 = -1

// touch is a person's first or last touch.
type touch struct {
	Channel, Source, Medium, Campaign, Landing, AdPlatform string
}

// place is where a person or visit was seen, as enrichment derived it.
// Rows with the same place share one (interned when read).
type place struct {
	Country, Region, Device, Browser, OS, Locale string
}

// visitSource is how a visit arrived, shared between the visits alike
// (interned when read).
type visitSource struct {
	Channel, Source, Medium, Campaign, Term, Content, AdPlatform,
	ReferrerHost, ReferrerName, LandingHost, SourceID string
}

// Shared empty values, for rows built without them.
var (
	noPlace  = &place{}
	noSource = &visitSource{}
	noTouch  = &touch{}
)

// interner shares equal values among the rows of one read: the rows
// hold a pointer, and the value's strings are copied once, so they keep
// no decoded column alive.
type interner[T comparable] struct {
	m     map[T]*T
	clone func(T) T
	bytes int64 // the strings of the values kept
}

func (in *interner[T]) of(v T, size func(*T) int) *T {
	if p, ok := in.m[v]; ok {
		return p
	}
	if in.m == nil {
		in.m = map[T]*T{}
	}
	c := in.clone(v)
	in.m[c] = &c
	in.bytes += int64(size(&c)) + 64
	return &c
}

func newPlaces() *interner[place] {
	return &interner[place]{clone: func(p place) place {
		return place{strings.Clone(p.Country), strings.Clone(p.Region), strings.Clone(p.Device), strings.Clone(p.Browser),
			strings.Clone(p.OS), strings.Clone(p.Locale)}
	}}
}

func placeBytes(p *place) int {
	return len(p.Country) + len(p.Region) + len(p.Device) + len(p.Browser) + len(p.OS) + len(p.Locale)
}

func newSources() *interner[visitSource] {
	return &interner[visitSource]{clone: func(s visitSource) visitSource {
		return visitSource{strings.Clone(s.Channel), strings.Clone(s.Source), strings.Clone(s.Medium), strings.Clone(s.Campaign),
			strings.Clone(s.Term), strings.Clone(s.Content), strings.Clone(s.AdPlatform), strings.Clone(s.ReferrerHost),
			strings.Clone(s.ReferrerName), strings.Clone(s.LandingHost), strings.Clone(s.SourceID)}
	}}
}

func sourceBytes(s *visitSource) int {
	return len(s.Channel) + len(s.Source) + len(s.Medium) + len(s.Campaign) + len(s.Term) + len(s.Content) +
		len(s.AdPlatform) + len(s.ReferrerHost) + len(s.ReferrerName) + len(s.LandingHost) + len(s.SourceID)
}

func newTouches() *interner[touch] {
	return &interner[touch]{clone: func(t touch) touch {
		return touch{strings.Clone(t.Channel), strings.Clone(t.Source), strings.Clone(t.Medium), strings.Clone(t.Campaign),
			strings.Clone(t.Landing), strings.Clone(t.AdPlatform)}
	}}
}

func touchBytes(t *touch) int {
	return len(t.Channel) + len(t.Source) + len(t.Medium) + len(t.Campaign) + len(t.Landing) + len(t.AdPlatform)
}

// personRow is the part of a people row every count reads, kept for
// every person of a snapshot (the person index): what the key numbers,
// channels, filters and sorts of the people list need. What only a page
// or a profile shows is a personDetail, read per question from the
// person's bucket partition (people_detail.go).
type personRow struct {
	Ref                       ref
	Stage                     string // interned
	FirstSeen, LastSeen       int64  // Unix ms
	Orders                    int64
	Value                     int64  // micro-units of the reporting currency
	FirstPurchase             int64  // Unix ms, 0 when never bought
	FirstTouch, LastTouch     *touch // shared: do not modify
	*place                           // shared: do not modify
	FirstCh, LastCh           uint8  // channelIndex of the touches' channels
	Known, Intent, HasRevenue bool   // HasRevenue: the revenue column is not empty
	bucket                    uint8  // the ordinal of its people partition
}

// personDetail is the rest of a people row: what a person's line in a
// list, their profile or an event's person shows.
type personDetail struct {
	UserID, Name, Email                   string
	HasName, HasEmail                     bool
	Visits, ActiveDays, Events, Pageviews int64
	Revenue                               []Money // per currency, reporting currency first
	LastPath                              string
	Traits                                string // JSON object of the latest identify, "" when none
	Browsers                              int64
	SharedBrowser                         bool
}

// visitRow is a row of the visits table; Person is the index of the
// visit's person (the person of its touch event; noPerson for a
// consentless visit or a unit nobody knows).
type visitRow struct {
	ID           ref
	PersonRef    ref   // the person column, or the unit where it is null
	Start, End   int64 // Unix ms
	Person       int32
	Events       int32
	Pageviews    int32
	Consented    bool
	Session      bool // the visit is a sessionId
	*visitSource      // shared: do not modify
	*place            // shared: do not modify
	ClickID      string
	// The unit is kept only as the PersonRef of a visit without a person,
	// the landing and exit paths not at all: no report or filter reads
	// them (docs/reporting-data.md).
}

// conversionRow is a row of the conversions table; Person is the index
// of its owner (the event's part, resolved through identities), noPerson
// when none (consentless).
type conversionRow struct {
	Action, Role, Currency string
	Time                   int64 // Unix ms
	EventID, Unit, Visit   ref
	Owner                  ref // the owner column, or the unit where it is null
	Person                 int32
	Value                  int64 // micro-units of Currency
	HasValue               bool
	Consented              bool
}

// eventRow is a row of the events table. Visit is coalesce(visit,
// session_id) for an event with a channel (docs/processor.md), zero
// otherwise; Person is the index of the event's part (its userId's
// person, else its unit's person through identities), noPerson for a
// consentless event or one without ids.
type eventRow struct {
	Unit                                         ref
	Time                                         int64 // Unix ms
	ID                                           ref
	Name                                         string
	Source                                       string // source id
	Consented                                    bool
	Server                                       bool
	Origin, Path, Query, Title, Referrer, UserID string
	SessionID                                    ref
	Properties                                   string // JSON object, "" when none
	Revenue, Currency                            string
	Country, Region, Device, Browser, OS, Locale string
	Actions                                      string // matched action ids, comma-separated
	Value                                        int64  // micro-units of ValueCurrency
	HasValue                                     bool
	ValueCurrency                                string
	Purchase                                     bool
	Visit                                        ref
	Channel                                      string
	Person                                       int32
}

// purchaseRow is an event that is a purchase (events.purchase: it matched
// the purchase goal, or it carried revenue in a project without one, as
// decided when it was first processed). Person is the index of its part,
// noPerson for a consentless event or one without ids.
type purchaseRow struct {
	Time      int64 // Unix ms
	EventID   ref
	Unit      ref
	UserID    string
	Visit     ref // coalesce(visit, session_id) when the event has a visit
	Person    int32
	Value     int64 // micro-units of Currency
	HasValue  bool
	Currency  string
	Consented bool
}

// stringBytes is the size of the visit's own strings (not the shared
// ones), for the cache's accounting.
func (v *visitRow) stringBytes() int64 {
	return int64(len(v.ClickID))
}

func compareRef(a, b ref) int { return bytes.Compare(a[:], b[:]) }

// UserRef is the person ref of a userId: SHA-256("mf/ref/v1" 0x00 project
// 0x00 'u' 0x00 userId)[0:16] as a version-8 UUID (docs/processor.md).
func UserRef(project, userID string) ref { return nodeRef(project, 'u', userID) }

// BrowserRef is the ref of an anonymousId.
func BrowserRef(project, anonymousID string) ref { return nodeRef(project, 'a', anonymousID) }

func nodeRef(project string, kind byte, id string) ref {
	h := sha256.New()
	h.Write([]byte("mf/ref/v1\x00"))
	h.Write([]byte(project))
	h.Write([]byte{0, kind, 0})
	h.Write([]byte(id))
	var r ref
	copy(r[:], h.Sum(nil)[:16])
	r[6] = r[6]&0x0f | 0x80
	r[8] = r[8]&0x3f | 0x80
	return r
}

func sortVisits(v []visitRow) {
	if slices.IsSortedFunc(v, compareVisits) {
		return
	}
	slices.SortFunc(v, compareVisits)
}

func compareVisits(a, b visitRow) int {
	if c := cmp.Compare(a.Start, b.Start); c != 0 {
		return c
	}
	return compareRef(a.ID, b.ID)
}

func compareConversions(a, b conversionRow) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	if c := compareRef(a.EventID, b.EventID); c != 0 {
		return c
	}
	return strings.Compare(a.Action, b.Action)
}

// tight returns s with no more capacity than a few percent over its
// length (a copy when append left more): decoded rows are kept in the
// day cache, which counts their capacity.
func tight[S ~[]E, E any](s S) S {
	if cap(s)-len(s) <= len(s)/16 {
		return s
	}
	return append(make(S, 0, len(s)), s...)
}
