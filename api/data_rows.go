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

// personRow is a row of the people table.
type personRow struct {
	Ref                                   ref
	UserID, Name, Email, Stage            string
	Known, HasName, HasEmail              bool
	FirstSeen, LastSeen                   int64 // Unix ms
	Visits, ActiveDays, Events, Pageviews int64
	Orders                                int64
	Revenue                               []Money // per currency, reporting currency first
	Value                                 int64   // micro-units of the reporting currency
	FirstTouch, LastTouch                 touch
	FirstCh, LastCh                       uint8 // channelIndex of the touches' channels
	Country, Region, Device, Browser, OS  string
	Locale, LastPath                      string
	Traits                                string // JSON object of the latest identify, "" when none
	Browsers                              int64
	SharedBrowser                         bool
	FirstPurchase                         int64 // Unix ms, 0 when never bought
	Intent                                bool
}

// visitRow is a row of the visits table; Person is the index of the
// visit's person (the person of its touch event; noPerson for a
// consentless visit or a unit nobody knows).
type visitRow struct {
	Unit, ID   ref
	PersonRef  ref // the person column, or the unit where it is null
	Person     int32
	Start, End int64 // Unix ms
	Events     int32
	Pageviews  int32
	Consented  bool
	Session    bool // the visit is a sessionId
	Channel, Source, Medium, Campaign, Term, Content, AdPlatform, ClickID,
	ReferrerHost, ReferrerName, LandingHost, LandingPath, ExitPath,
	Country, Region, Device, Browser, OS, Locale, SourceID string
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

// stringBytes is the size of the visit's strings, for the cache's
// accounting.
func (v *visitRow) stringBytes() int64 {
	return int64(len(v.Channel) + len(v.Source) + len(v.Medium) + len(v.Campaign) + len(v.Term) + len(v.Content) +
		len(v.AdPlatform) + len(v.ClickID) + len(v.ReferrerHost) + len(v.ReferrerName) + len(v.LandingHost) +
		len(v.LandingPath) + len(v.ExitPath) + len(v.Country) + len(v.Region) + len(v.Device) + len(v.Browser) +
		len(v.OS) + len(v.Locale) + len(v.SourceID))
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
