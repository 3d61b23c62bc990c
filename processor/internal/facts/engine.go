// Package facts derives the facts of one project from its events: visits,
// browsers and persons with their identity merges, stages, touches,
// activity, orders and revenue, goal and action matches, and saved-segment
// membership. It is pure and deterministic: no I/O, no clock; the facts
// are a function of the set of events (deduplicated by event id) and of
// the project's catalog, whatever the order and the grouping in which the
// events arrive.
//
// The Engine keeps the state in memory and maintains it incrementally:
// Add records events and marks what they make dirty; Flush recomputes the
// dirty visits, claims and persons and returns the rows of every table
// partition that changed. docs/processor.md describes the rules.
package facts

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/records"
)

// Config configures an Engine.
type Config struct {
	// Project is the project id; refs are derived from it.
	Project string
	// Location is the project's time zone: days are cut in it.
	Location *time.Location
	// ReportingCurrency counts revenue sent without a currency.
	ReportingCurrency string
	// Actions and Segments are the project's catalog entries.
	Actions  []*catalog.Action
	Segments []*catalog.Segment
	// Classifier decides visit channels.
	Classifier *channels.Classifier
	// VisitTimeout ends a visit without sessionId after this much
	// inactivity (30 minutes).
	VisitTimeout time.Duration
	// BuildWorkers is how many goroutines a Flush builds the rows of its
	// partitions on; 0 means GOMAXPROCS, 1 builds them on the caller's.
	BuildWorkers int
	// CheckActivity (tests) has every Flush compare the day sets with
	// those computed from every person (Engine.CheckActivity), and panic
	// when they differ.
	CheckActivity bool
}

// Validate reports what in c is unusable.
func (c Config) Validate() error {
	switch {
	case c.Project == "":
		return fmt.Errorf("facts config: Project is empty")
	case c.Location == nil:
		return fmt.Errorf("facts config: Location is nil; use the project's time zone")
	case c.Classifier == nil:
		return fmt.Errorf("facts config: Classifier is nil; use channels.Default()")
	case c.VisitTimeout <= 0:
		return fmt.Errorf("facts config: VisitTimeout %v must be positive (30m)", c.VisitTimeout)
	case len(c.ReportingCurrency) != 3:
		return fmt.Errorf("facts config: ReportingCurrency %q must be a three-letter code", c.ReportingCurrency)
	case c.BuildWorkers < 0:
		return fmt.Errorf("facts config: BuildWorkers %d must be 0 (GOMAXPROCS) or more", c.BuildWorkers)
	}
	return nil
}

// evKey orders events: by time, then by id.
type evKey struct {
	t  int64
	id records.UUID
}

func (k evKey) cmp(o evKey) int {
	if c := cmp.Compare(k.t, o.t); c != 0 {
		return c
	}
	return slices.Compare(k.id[:], o.id[:])
}

func (k evKey) zero() bool { return k.t == 0 && k.id.IsZero() }

// later reports whether k comes after o (or o is unset).
func (k evKey) later(o evKey) bool { return o.zero() || k.cmp(o) > 0 }

// earlier reports whether k comes before o (or o is unset).
func (k evKey) earlier(o evKey) bool { return o.zero() || k.cmp(o) < 0 }

// event is an Event kept in memory with what the engine derived for it,
// compact: its strings are refs into its day's arena, its browser,
// visitor and userId are those of its unit and part. The pointers come
// first, so the garbage collector scans the first 32 bytes only.
type event struct {
	d      *day  // the day it is kept in (its strings are in d.strs)
	unit   *node // the visit unit: browser, user or consentless visitor
	part   *node // the person part: user, else browser; nil when none
	Client *Client

	ID, SessionID records.UUID
	Time, Value   int64

	name, origin, host, path, query, title, referrer sref
	props, revenue, currency, actions, valueCur      sref

	HasValue, Purchase bool
	// out: a row of it was output by a Flush (it may be stored); until
	// then no stored row shows it, and a visit made of such events only
	// changes no row.
	out bool
}

func (e *event) Name() string          { return e.d.strs.get(e.name) }
func (e *event) Origin() string        { return e.d.strs.get(e.origin) }
func (e *event) Host() string          { return e.d.strs.get(e.host) }
func (e *event) Path() string          { return e.d.strs.get(e.path) }
func (e *event) Query() string         { return e.d.strs.get(e.query) }
func (e *event) Title() string         { return e.d.strs.get(e.title) }
func (e *event) Referrer() string      { return e.d.strs.get(e.referrer) }
func (e *event) Properties() string    { return e.d.strs.get(e.props) }
func (e *event) Revenue() string       { return e.d.strs.get(e.revenue) }
func (e *event) Currency() string      { return e.d.strs.get(e.currency) }
func (e *event) Actions() string       { return e.d.strs.get(e.actions) }
func (e *event) ValueCurrency() string { return e.d.strs.get(e.valueCur) }

// UserID is the event's userId: its part when that is a user.
func (e *event) UserID() string {
	if e.part != nil && e.part.kind == KindUser {
		return e.part.raw
	}
	return ""
}

// Browser is the ref of the event's browser: its unit when that is one.
func (e *event) Browser() Ref {
	if e.unit != nil && e.unit.kind == KindBrowser {
		return e.unit.ref
	}
	return Ref{}
}

// Visitor is the ref of the event's consentless visitor.
func (e *event) Visitor() Ref {
	if e.unit != nil && e.unit.kind == KindVisitor {
		return e.unit.ref
	}
	return Ref{}
}

// pack stores in as a compact event of day d (without unit and part).
func (d *day) pack(in *Event) *event {
	a := &d.strs
	return &event{d: d, Client: in.Client, ID: in.ID, SessionID: in.SessionID, Time: in.Time,
		Value: in.Value, HasValue: in.HasValue, Purchase: in.Purchase,
		name: a.put(in.Name, true), origin: a.put(in.Origin, true), host: a.put(in.Host, true),
		path: a.put(in.Path, true), query: a.put(in.Query, true), title: a.put(in.Title, true),
		referrer: a.put(in.Referrer, true), props: a.put(in.Properties, false),
		revenue: a.put(in.Revenue, true), currency: a.put(in.Currency, true),
		actions: a.put(in.Actions, true), valueCur: a.put(in.ValueCurrency, true)}
}

// export returns the event as an Event (its strings point into the
// day's arena).
func (e *event) export() Event {
	var out Event
	e.exportFrom(arenaView{chunks: e.d.strs.chunks, big: e.d.strs.big}, &out)
	return out
}

// exportFrom sets out to the event, its strings read from a (a view of the
// event's day's arena).
func (e *event) exportFrom(a arenaView, out *Event) {
	*out = Event{ID: e.ID, Time: e.Time, Name: a.get(e.name), Client: e.Client, Origin: a.get(e.origin),
		Host: a.get(e.host), Path: a.get(e.path), Query: a.get(e.query), Title: a.get(e.title), Referrer: a.get(e.referrer),
		Browser: e.Browser(), UserID: e.UserID(), SessionID: e.SessionID, Visitor: e.Visitor(),
		Properties: a.get(e.props), Revenue: a.get(e.revenue), Currency: a.get(e.currency),
		Actions: a.get(e.actions), HasValue: e.HasValue, Value: e.Value, ValueCurrency: a.get(e.valueCur),
		Purchase: e.Purchase, Derived: true}
}

func (e *event) key() evKey { return evKey{e.Time, e.ID} }

// clusterable reports whether the event forms visits by inactivity: no
// sessionId, a unit, and a website source or consentless mode.
func (e *event) clusterable() bool {
	return e.unit != nil && e.SessionID.IsZero() && !e.Client.Server
}

// day holds the events of one day (project time zone) kept in memory.
type day struct {
	num    int32
	strs   arena // the strings of its events
	events []*event
	ids    map[records.UUID]*event
	// fresh are the events added since the day's rows were last output;
	// rewrite tells that rows output before changed (a visit's id or
	// channel, an event replaced), so all rows must be output again.
	fresh   []*event
	rewrite bool
	// dirty: the day is in Engine.dirtyEventDays (markEventDay).
	dirty bool
}

// markEventDay records that the events partition of day d changed.
func (e *Engine) markEventDay(d *day) {
	if !d.dirty {
		d.dirty = true
		e.dirtyEventDays[d.num] = true
	}
}

// Engine derives the facts of one project. It is not safe for concurrent
// use.
type Engine struct {
	cfg     Config
	in      interner
	origins map[originKey]string // formatted page origins and referrers
	clients map[Client]*Client
	touches map[channels.Touch]*channels.Touch
	// noneTouch is the touch of a person without visits (channel none).
	noneTouch *channels.Touch
	acts      *actionSet
	actByID   map[string]*action
	segs      []*segment
	catFP     string

	days     map[int32]*day
	nodes    map[Ref]*node
	anonRefs map[string]Ref   // anonymousId -> browser ref
	users    map[string]*node // by userId
	sessions map[records.UUID]*visit
	// visitsByDay indexes the live visits by the day they start.
	visitsByDay map[int32]map[*visit]struct{}
	// cold holds what is kept of the days whose events left memory
	// (cold.go); finalThrough: days up to it (inclusive) are final, no
	// event can arrive for them any more (final is false until set).
	cold         map[int32]*coldDay
	finalThrough int32
	// finalSpan keeps, for each final day, the span of its visits as its
	// cold summary had it (coldDay lo, hi): the erasure of a person who
	// shares a browser or a visit reads final days back (ErasePlan), and
	// every day their visits touch with them.
	finalSpan map[int32][2]int64
	final     bool
	// thawWant are cold days the engine found it needs after an event was
	// replaced (ThawNeeded).
	thawWant map[int32]bool
	// claimWant are browsers whose claim may move while visits of theirs
	// are cold: their visits are read back (ClaimDays, ThawUnits).
	claimWant map[*node]bool
	// claimOut are the browsers of the StateClaim rows as last output;
	// claimsRestored: the engine was restored from rows holding them.
	claimOut       map[Ref]bool
	claimsRestored bool
	// reclaimWant are, by day, the cold visits whose rows Reclaim takes,
	// with the browser whose claim moved; reclaimUnits those browsers.
	// reclaimed are the rows Reclaim has the next Flush write, by day and
	// visit id (reclaim.go).
	reclaimWant  map[int32]map[Ref]*node
	reclaimUnits map[Ref]bool
	reclaimed    map[int32]map[Ref]VisitRow

	dc dayCache

	// batchAnon and batchRef: the last anonymousId of the batch being
	// added and its ref; lastBrowser the last browser node looked up.
	batchAnon   string
	batchRef    Ref
	lastBrowser *node
	// dayHint is the most events a day has held (capped), to size the id
	// index of new days.
	dayHint int

	dirtyEventDays map[int32]bool // each such day also has day.dirty set
	// dirtyVisitDays are the days of the visits changed since the last
	// Flush (where they start, and started before): Freeze keeps them.
	dirtyVisitDays map[int32]bool
	dirtyUnits     map[*node]bool
	dirtySessions  map[*visit]bool
	dirtyBrowsers  map[*node]bool
	dirtyParts     map[*node]bool
	dirtyPersons   map[*node]bool
	dirtyIdentity  map[*node]bool
	// The marks of the units, parts and sessions in dirtyUnits, dirtyParts
	// and dirtySessions (node.markUnit, node.markPart, visit.markSession
	// equal to these): an event checks its objects' marks instead of
	// writing the same map entries again; clearing a map moves its epoch.
	epochUnits, epochParts, epochSessions uint32
	segmentsAll                           bool

	// The rows of the keyed tables (visits, people, identities, members)
	// that changed since the last Flush: visits by id (nil: the visit is
	// gone), persons and claimed browsers by ref, and the membership of
	// persons as last output (nil: none). visitOut is the day partition
	// each visit's row was last output to, so that a visit that moves
	// or vanishes leaves a deletion there.
	dirtyVisits  map[Ref]*visit
	dirtyPeople  map[Ref]*personState // nil: no longer a person
	dirtyIdents  map[Ref]bool
	dirtyMembers map[Ref][]string
	visitOut     map[Ref]int32
	// eraseRows are the rows of erased persons to take out of days not in
	// memory (cold or final) at the next Flush: by day, the units whose
	// rows go (erase.go); eraseVisits the ids of their visits that start
	// on such days, whose rows go too. erasing holds the eraseRows of the
	// last Flush until its commit is stored (Stored) or given back
	// (Restore): a thaw meanwhile leaves those rows out.
	eraseRows   map[int32]map[Ref]bool
	eraseVisits map[int32][]Ref
	erasing     map[int32]map[Ref]bool
	// Partitions of the keyed tables to output whole (after a failed
	// commit, or when the segments changed) instead of their changes.
	wholeVisitDays  map[int32]bool
	wholePeople     map[int]bool
	wholeIdentities map[int]bool
	wholeMembers    map[int]bool

	// The state rows to output (state.go): parts whose row changed
	// (erased ones: their row goes), days whose summary changed, the
	// hot days' spans and the engine's row as last output; stateAll
	// outputs every row.
	stateDirty   map[*node]bool
	membersDirty map[Ref]bool // persons whose membership changed
	summaryDirty map[int32]bool
	hotOut       map[int32][2]int64
	residentsOut map[int32]uint64
	engineOut    []byte
	stateAll     bool
	// settling: the compute is Settle's, whose persons' rows are not
	// output.
	settling bool

	// The day sets of the persons active (activity.go): act by day;
	// actDirty the days whose rows to output; actShrink the persons
	// whose days may have gone (looked up in every day); nextNum the
	// last person number given; actWhole: output every day.
	act       map[int32]*dayActivity
	actDirty  map[int32]bool
	actShrink map[*node]bool
	nextNum   uint32
	actWhole  bool

	bx       bucketIndex
	seed     maphash.Seed   // of the persons' row hashes (bucketIndex)
	segCount map[string]int // members per segment ref

	stats Stats
}

// Stats counts what an Engine did.
type Stats struct {
	// Events counts events added; Duplicates events skipped as already
	// known (same id, same content); Replaced events that replaced a known
	// one with the same id; TooLate events for a final day, dropped;
	// Unthawed events for a cold day that was not thawed first, dropped
	// (a caller's error: ThawPlan). ThawedDays and ThawedEvents count
	// what Thaw brought back.
	Events, Duplicates, Replaced, TooLate, Unthawed int64
	ThawedDays, ThawedEvents                        int64
	// ThawedUnitDays counts the days ThawUnits read browsers' visits from.
	ThawedUnitDays int64
	// ReclaimDays counts the days ReclaimDays named, ReclaimedVisits the
	// rows Reclaim had written again with another person, ReclaimMissing
	// the visits whose rows were not given to it (a bug).
	ReclaimDays, ReclaimedVisits, ReclaimMissing int64
	// FinalDaysRead counts the final days ErasePlan named.
	FinalDaysRead int64
	// ActivitySearches counts the persons looked up in every day's
	// sets (activity.go).
	ActivitySearches int64
}

// New returns an empty Engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:            cfg,
		in:             interner{m: map[string]string{}},
		clients:        map[Client]*Client{},
		touches:        map[channels.Touch]*channels.Touch{},
		days:           map[int32]*day{},
		cold:           map[int32]*coldDay{},
		finalSpan:      map[int32][2]int64{},
		thawWant:       map[int32]bool{},
		claimWant:      map[*node]bool{},
		claimOut:       map[Ref]bool{},
		reclaimed:      map[int32]map[Ref]VisitRow{},
		nodes:          map[Ref]*node{},
		anonRefs:       map[string]Ref{},
		users:          map[string]*node{},
		origins:        map[originKey]string{},
		sessions:       map[records.UUID]*visit{},
		visitsByDay:    map[int32]map[*visit]struct{}{},
		dirtyEventDays: map[int32]bool{},
		dirtyVisitDays: map[int32]bool{},
		dirtyUnits:     map[*node]bool{},
		dirtySessions:  map[*visit]bool{},
		dirtyBrowsers:  map[*node]bool{},
		dirtyParts:     map[*node]bool{},
		dirtyPersons:   map[*node]bool{},
		dirtyIdentity:  map[*node]bool{},

		dirtyVisits:     map[Ref]*visit{},
		dirtyPeople:     map[Ref]*personState{},
		dirtyIdents:     map[Ref]bool{},
		dirtyMembers:    map[Ref][]string{},
		visitOut:        map[Ref]int32{},
		wholeVisitDays:  map[int32]bool{},
		wholePeople:     map[int]bool{},
		wholeIdentities: map[int]bool{},
		wholeMembers:    map[int]bool{},
		eraseRows:       map[int32]map[Ref]bool{},
		eraseVisits:     map[int32][]Ref{},
		erasing:         map[int32]map[Ref]bool{},
		stateDirty:      map[*node]bool{},
		membersDirty:    map[Ref]bool{},
		summaryDirty:    map[int32]bool{},
		hotOut:          map[int32][2]int64{},
		residentsOut:    map[int32]uint64{},
		act:             map[int32]*dayActivity{},
		actDirty:        map[int32]bool{},
		actShrink:       map[*node]bool{},
	}
	// A new engine's day sets replace the stored ones (its numbers are
	// its own); a restore keeps them (Restoring.Finish).
	e.actWhole = true
	e.bucketsInit()
	e.seed = maphash.MakeSeed()
	e.epochUnits, e.epochParts, e.epochSessions = 1, 1, 1
	e.noneTouch = e.touchOf(channels.Touch{Channel: channels.None})
	e.segCount = map[string]int{}
	e.dc.loc = cfg.Location
	e.setCatalog(cfg.Actions, cfg.Segments)
	return e, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { return e.stats }

// Location returns the project's time zone.
func (e *Engine) Location() *time.Location { return e.cfg.Location }

func (e *Engine) setCatalog(acts []*catalog.Action, segs []*catalog.Segment) {
	e.acts = compileActions(acts)
	e.actByID = map[string]*action{}
	for _, a := range e.acts.all {
		e.actByID[a.id] = a
	}
	e.segs = compileSegments(segs)
	e.catFP = catalogFingerprint(acts, segs)
}

// SetCatalog installs new actions and segments. Actions apply to events
// added from now on (the matches of earlier events are kept: replay
// applies a changed action to history). A change of segments has every
// person's membership evaluated again at the next Flush.
func (e *Engine) SetCatalog(acts []*catalog.Action, segs []*catalog.Segment) {
	old := segmentsFingerprint(e.segs)
	fp := catalogFingerprint(acts, segs)
	if fp == e.catFP {
		return
	}
	e.setCatalog(acts, segs)
	if segmentsFingerprint(e.segs) != old {
		e.segmentsAll = true
	}
}

// SegmentsFingerprint summarises the segment definitions in force, so a
// restarted processor can tell whether the stored membership was built
// with other definitions.
func (e *Engine) SegmentsFingerprint() string { return segmentsFingerprint(e.segs) }

func segmentsFingerprint(segs []*segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.id)
		b.WriteByte(':')
		b.WriteString(s.ref)
		for _, f := range s.filters {
			b.WriteString("|" + f.Field + "," + f.Op + "," + f.Value)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// dayCache remembers the bounds of the last day looked up.
type dayCache struct {
	loc        *time.Location
	start, end int64 // [start, end) in epoch ms
	num        int32
}

// DayOf returns the day number (days since 1970-01-01 of the local date)
// of epoch milliseconds t in the project's time zone.
func (e *Engine) DayOf(t int64) int32 {
	dc := &e.dc
	if dc.end > dc.start && t >= dc.start && t < dc.end {
		return dc.num
	}
	lt := time.UnixMilli(t).In(dc.loc)
	y, m, d := lt.Date()
	dc.start = time.Date(y, m, d, 0, 0, 0, 0, dc.loc).UnixMilli()
	dc.end = time.Date(y, m, d+1, 0, 0, 0, 0, dc.loc).UnixMilli()
	dc.num = int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	return dc.num
}

// DayStart returns the first millisecond of day num in the project's time
// zone.
func (e *Engine) DayStart(num int32) int64 {
	y, m, d := time.Unix(int64(num)*86400, 0).UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, e.cfg.Location).UnixMilli()
}

// DayName formats a day number as YYYY-MM-DD.
func DayName(num int32) string {
	return time.Unix(int64(num)*86400, 0).UTC().Format(time.DateOnly)
}

// ParseDay reads YYYY-MM-DD as a day number.
func ParseDay(s string) (int32, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, err
	}
	return int32(t.Unix() / 86400), nil
}

// AddBatch adds the events of a batch and returns how many were new. It
// copies what it keeps of b: b and the bytes its strings point into may be
// reused once it returns (records.DecodeShared).
func (e *Engine) AddBatch(b *records.Batch) int {
	c, visitor := e.batchClient(b)
	// The last anonymousId of this batch and its ref (fillEvent): it
	// points into b, so it is forgotten when AddBatch returns.
	defer func() { e.batchAnon = "" }()
	n := 0
	for i := range b.Events {
		var ev Event
		e.fillEvent(&ev, b, &b.Events[i], c, visitor)
		if e.add(&ev) {
			n++
		}
	}
	return n
}

// Add adds one event. Its derived fields (Actions, Value, Purchase) are
// computed from the catalog unless Derived is set (events read back from
// the events table keep the matches they were processed with). It reports
// whether the event changed anything: an event whose id is known with the
// same content is skipped; with other content the one whose content sorts
// first is kept (so the outcome does not depend on arrival order).
func (e *Engine) Add(in Event) bool { return e.add(&in) }

func (e *Engine) add(in *Event) bool {
	dn := e.DayOf(in.Time)
	if e.final && dn <= e.finalThrough {
		e.stats.TooLate++
		return false
	}
	if e.cold[dn] != nil {
		// The caller thaws what ThawPlan names first: an event for a
		// cold day cannot be applied without its day's events.
		e.stats.Unthawed++
		return false
	}
	d := e.days[dn]
	if d == nil {
		// Sized for as many events as the largest day so far: a day's
		// id index otherwise grows (and rehashes) step by step to
		// hundreds of thousands of entries.
		d = &day{num: dn, ids: make(map[records.UUID]*event, e.dayHint)}
		e.days[dn] = d
	}
	if old, ok := d.ids[in.ID]; ok {
		oe := old.export()
		c := compareContent(in, &oe)
		if c == 0 {
			e.stats.Duplicates++
			return false
		}
		if c > 0 {
			// The known one sorts first: keep it.
			e.stats.Duplicates++
			return false
		}
		e.remove(d, old)
		e.stats.Replaced++
	} else if e.coldHas(in.ID, dn) {
		e.stats.Unthawed++ // ThawPlan names such a neighbour
		return false
	} else if prev, ok := e.findElsewhere(in.ID, dn); ok {
		// The same id on another day (a resend whose time was replaced):
		// keep the copy whose content sorts first.
		if pe := prev.export(); compareContent(in, &pe) >= 0 {
			e.stats.Duplicates++
			return false
		}
		e.remove(prev.d, prev)
		e.stats.Replaced++
	}
	if !in.Derived {
		e.derive(in)
		in.Derived = true
	}
	e.insert(d, d.pack(in), in, false)
	if n := len(d.events); n > e.dayHint && n <= 1<<21 {
		e.dayHint = n
	}
	e.stats.Events++
	return true
}

// findElsewhere looks for an event id on the days next to dn. Ids are
// looked up only on the neighbouring days: a resent event whose time was
// replaced by the time received lands far away and is then kept twice
// (docs/processor.md, "Exactly once").
func (e *Engine) findElsewhere(id records.UUID, dn int32) (*event, bool) {
	for _, o := range [...]int32{dn - 1, dn + 1} {
		if d := e.days[o]; d != nil {
			if ev, ok := d.ids[id]; ok {
				return ev, true
			}
		}
	}
	return nil, false
}

// compareContent orders two events with the same id by content: time,
// then the rest of their fields.
func compareContent(a, b *Event) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	return cmp.Or(
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Origin+a.Path+"?"+a.Query, b.Origin+b.Path+"?"+b.Query),
		strings.Compare(a.Title, b.Title),
		strings.Compare(a.Referrer, b.Referrer),
		slices.Compare(a.Browser[:], b.Browser[:]),
		strings.Compare(a.UserID, b.UserID),
		slices.Compare(a.SessionID[:], b.SessionID[:]),
		slices.Compare(a.Visitor[:], b.Visitor[:]),
		strings.Compare(a.Properties, b.Properties),
		strings.Compare(a.Revenue, b.Revenue),
		strings.Compare(a.Currency, b.Currency),
		compareClient(a.Client, b.Client),
	)
}

func compareClient(a, b *Client) int {
	if a == b {
		return 0
	}
	bo := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return cmp.Or(
		strings.Compare(a.Source, b.Source),
		cmp.Compare(bo(a.Consented), bo(b.Consented)),
		cmp.Compare(bo(a.Server), bo(b.Server)),
		strings.Compare(a.Country, b.Country),
		strings.Compare(a.Region, b.Region),
		strings.Compare(a.Device, b.Device),
		strings.Compare(a.Browser, b.Browser),
		strings.Compare(a.OS, b.OS),
		strings.Compare(a.Locale, b.Locale),
	)
}

// derive computes the catalog-dependent fields of an event: the actions
// it matches, its revenue, whether it is a purchase.
func (e *Engine) derive(ev *Event) {
	var props map[string]any
	parsed := false
	getProps := func() map[string]any {
		if !parsed {
			props, parsed = parseProps(ev.Properties), true
		}
		return props
	}
	ev.Actions = ""
	ev.HasValue, ev.Value, ev.ValueCurrency = false, 0, ""
	ev.Purchase = false
	matched := e.acts.match(ev, getProps)
	if len(matched) > 0 {
		ids := make([]string, len(matched))
		for i, idx := range matched {
			ids[i] = e.acts.all[idx].id
		}
		ev.Actions = e.in.get(strings.Join(ids, ","))
	}
	if ev.Revenue != "" {
		if v, ok := ParseAmount(ev.Revenue); ok {
			cur := ev.Currency
			if cur == "" {
				cur = e.cfg.ReportingCurrency
			}
			ev.HasValue, ev.Value, ev.ValueCurrency = true, v, e.in.get(cur)
		}
	} else {
		for _, idx := range matched {
			a := e.acts.all[idx]
			if a.role == "" || a.revenueProp == "" {
				continue
			}
			p := getProps()
			n, ok := p[a.revenueProp].(interface{ String() string })
			if !ok {
				continue
			}
			v, ok := ParseAmount(n.String())
			if !ok {
				continue
			}
			cur := currencyOf(p["currency"])
			if cur == "" {
				cur = e.cfg.ReportingCurrency
			}
			ev.HasValue, ev.Value, ev.ValueCurrency = true, v, e.in.get(cur)
			break
		}
	}
	for _, idx := range matched {
		if e.acts.all[idx].role == catalog.RolePurchase {
			ev.Purchase = true
		}
	}
	if !e.acts.purchase && ev.HasValue && ev.Value > 0 {
		// Without a purchase goal, an event carrying revenue is a purchase.
		ev.Purchase = true
	}
}

// nodeFor returns the node of kind and raw id, creating it.
func (e *Engine) nodeFor(kind byte, raw string, ref Ref) *node {
	if n, ok := e.nodes[ref]; ok {
		e.open(n)
		return n
	}
	n := &node{ref: ref, kind: kind, raw: raw}
	e.nodes[ref] = n
	if kind != KindVisitor {
		e.dirtyIdentity[n] = true
		e.dirtyPersons[n] = true
	}
	return n
}

func (e *Engine) browser(ref Ref) *node {
	if e.lastBrowser != nil && e.lastBrowser.ref == ref {
		return e.lastBrowser
	}
	n := e.nodeFor(KindBrowser, "", ref)
	e.lastBrowser = n
	return n
}

func (e *Engine) user(uid string) *node {
	if n, ok := e.users[uid]; ok {
		e.open(n)
		return n
	}
	uid = strings.Clone(uid) // uid may point into a batch or an arena
	n := e.nodeFor(KindUser, uid, NodeRef(e.cfg.Project, KindUser, uid))
	e.users[n.raw] = n
	return n
}

func (e *Engine) markUnit(n *node) {
	if n.markUnit != e.epochUnits {
		n.markUnit = e.epochUnits
		e.dirtyUnits[n] = true
	}
}

func (e *Engine) markPart(n *node) {
	if n.markPart != e.epochParts {
		n.markPart = e.epochParts
		e.dirtyParts[n] = true
		e.stateDirty[n] = true
	}
}

func (e *Engine) markSession(v *visit) {
	if v.markSession != e.epochSessions {
		v.markSession = e.epochSessions
		e.dirtySessions[v] = true
	}
}

// insert records a new event and marks what it makes dirty. A thawed
// event (Thaw) is one whose row is stored and whose activity its part
// already counts: it is only linked back to its unit, visit and identity.
func (e *Engine) insert(d *day, ev *event, in *Event, thawed bool) {
	d.events = append(d.events, ev)
	d.ids[ev.ID] = ev
	if thawed {
		ev.out = true
	} else {
		d.fresh = append(d.fresh, ev)
		e.markEventDay(d)
	}

	var b, u *node
	if !in.Browser.IsZero() {
		b = e.browser(in.Browser)
	}
	if in.UserID != "" {
		u = e.user(in.UserID)
	}
	switch {
	case !in.Visitor.IsZero():
		ev.unit = e.nodeFor(KindVisitor, "", in.Visitor)
	case b != nil:
		ev.unit = b
	case u != nil:
		ev.unit = u
	}
	switch {
	case u != nil:
		ev.part = u
	case b != nil:
		ev.part = b
	}
	if !ev.SessionID.IsZero() {
		v := e.sessions[ev.SessionID]
		if v == nil {
			v = &visit{id: ev.SessionID, session: true}
			e.sessions[ev.SessionID] = v
		}
		v.members = append(v.members, ev)
		e.markSession(v)
	} else if ev.clusterable() {
		ev.unit.addCluster(ev)
		e.markUnit(ev.unit)
	}
	if ev.part != nil && !thawed {
		ev.part.addToDay(ev, e)
		e.markPart(ev.part)
	}
	if b != nil && u != nil {
		k := ev.key()
		mayClaim := b.claimer == nil || k.earlier(b.signIns[b.claimer])
		if b.signIn(u, k) {
			e.dirtyBrowsers[b] = true
			if mayClaim && !thawed {
				e.claimMayMove(b)
			}
		}
	}
}

// claimMayMove notes that browser b may change hands: the rows of its
// cold visits that credit its person are written again if it does
// (ReclaimDays, or ClaimDays).
func (e *Engine) claimMayMove(b *node) {
	for _, t := range b.frozen {
		if t.self && e.cold[e.DayOf(t.at)] != nil {
			e.claimWant[b] = true
			return
		}
	}
}

// remove takes an event out again (a duplicate id whose other copy sorts
// first) and has everything it touched recomputed.
func (e *Engine) remove(d *day, ev *event) {
	i := slices.Index(d.events, ev)
	if i >= 0 {
		d.events = slices.Delete(d.events, i, i+1)
	}
	delete(d.ids, ev.ID)
	d.rewrite = true
	e.markEventDay(d)
	if !ev.SessionID.IsZero() {
		if v := e.sessions[ev.SessionID]; v != nil {
			if j := slices.Index(v.members, ev); j >= 0 {
				v.members = slices.Delete(v.members, j, j+1)
			}
			e.markSession(v)
		}
	} else if ev.clusterable() {
		ev.unit.removeCluster(ev)
		e.markUnit(ev.unit)
	}
	if ev.part != nil {
		ev.part.rebuildDay(d, e)
		e.markPart(ev.part)
	}
	if br, uid := ev.Browser(), ev.UserID(); !br.IsZero() && uid != "" {
		b := e.browser(br)
		u := e.user(uid)
		// Recompute the earliest sign-in of u on b from the events kept.
		var best evKey
		for _, dd := range e.days {
			for _, o := range dd.events {
				if o.unit == b && o.part == u && o.key().earlier(best) {
					best = o.key()
				}
			}
		}
		if was := b.signIns[u]; was == ev.key() {
			// The earliest sign-in is gone: the next one may be on a
			// cold day where u was active; thawing those brings it back
			// (sign-ins only ever take the earlier key).
			for _, nd := range u.days {
				if e.cold[nd.num] != nil {
					e.thawWant[nd.num] = true
				}
			}
		}
		b.resetSignIn(u, best)
		e.dirtyBrowsers[b] = true
		e.claimMayMove(b)
	}
}
