package facts

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/storage/records"
)

// Buckets is the number of partitions the people, identities and members
// tables are split into, by the first hex digit of the ref.
const Buckets = 16

// Bucket returns the bucket of a ref.
func Bucket(r Ref) int { return int(r[0] >> 4) }

// BucketName returns the partition label of a bucket: b0 to bf.
func BucketName(b int) string { return "b" + string("0123456789abcdef"[b&15]) }

// EventRow is a row of the events table: the event as kept (the archive
// that replay reads) and what it belongs to. It refers to the engine's
// copy of the event, which never changes, and to the strings of its day as
// they were at the Flush: it can be read on another goroutine while the
// engine goes on (Fill), without a copy of the event being made at the
// Flush.
type EventRow struct {
	ev   *event
	strs *arenaView
	// Unit is the ref of the browser, the user (no browser) or the
	// consentless visitor of the event; zero when none.
	Unit Ref
	// Visit is the id of the event's visit and Channel its channel; zero
	// and "" when the event belongs to no visit.
	Visit   Ref
	Channel string
}

// Fill sets out to the event of the row. Its strings point into the
// engine's memory of the event's day (no copy).
func (r *EventRow) Fill(out *Event) { r.ev.exportFrom(*r.strs, out) }

// Event returns the event of the row (Fill).
func (r *EventRow) Event() Event {
	var e Event
	r.Fill(&e)
	return e
}

// Time and ID are the row's event's.
func (r *EventRow) Time() int64      { return r.ev.Time }
func (r *EventRow) ID() records.UUID { return r.ev.ID }

// MarshalJSON writes the row as its event's fields and Unit, Visit,
// Channel (for tests that compare rows).
func (r EventRow) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Event
		Unit, Visit Ref
		Channel     string
	}{r.Event(), r.Unit, r.Visit, r.Channel})
}

// SortEventRows puts rows in table order: unit, time, id.
func SortEventRows(rows []EventRow) {
	if len(rows) < 2 {
		return
	}
	keys := make([]eventKey, len(rows))
	sorted := true
	for i := range rows {
		k := &keys[i]
		k.unit, k.id, k.time, k.row = rows[i].Unit, rows[i].ev.ID, rows[i].ev.Time, int32(i)
		if sorted && i > 0 && compareEventKeys(&keys[i-1], k) > 0 {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(keys, func(a, b eventKey) int { return compareEventKeys(&a, &b) })
	out := make([]EventRow, len(rows))
	for i := range keys {
		out[i] = rows[keys[i].row]
	}
	copy(rows, out)
}

// VisitRow is a row of the visits table.
type VisitRow struct {
	ID Ref
	// Unit is the browser of the visit (or the user, or the consentless
	// visitor); zero when none.
	Unit Ref
	// Person is the person the visit is credited to in lists: the person
	// of the event its touch was decided from, else of its first event
	// with one; zero when none (consentless, server events without ids).
	// A visit with events of several persons counts in each one's visits
	// (PersonRow.Visits).
	Person      Ref
	Session     bool // the visit is a sessionId
	Start, End  int64
	Events      int32
	Pageviews   int32
	Consented   bool
	Touch       channels.Touch
	LandingHost string
	LandingPath string
	ExitPath    string // "" for consentless visits
	Client      *Client
	// Deleted marks the deletion of the visit ID from its partition (it
	// moved to another day, or vanished); the other fields are zero.
	Deleted bool
}

// ConversionRow is a row of the conversions table: one event that matched
// one action.
type ConversionRow struct {
	Time    int64
	EventID records.UUID
	Action  string
	Role    string // "" for an action that is not a goal (or no longer known)
	// Owner is the part the event counts for (user ref, else browser ref;
	// zero for consentless events); Unit and Visit as in the events table.
	Owner, Unit, Visit Ref
	HasValue           bool
	Value              int64
	Currency           string
	Consented          bool
}

// IdentityRow is a row of the identities table: a browser that a person
// claimed (signed in on it), and that person. Every other browser, and
// every user, is its own person: its ref is the person's ref.
type IdentityRow struct {
	Unit   Ref // the browser
	Person Ref // the user who claimed it
	// ClaimedAt is the time of the sign-in that made the browser part of
	// its person.
	ClaimedAt int64
	// Shared tells a browser on which more than one person signed in.
	Shared bool
	// Deleted marks a browser no longer claimed (Person is zero).
	Deleted bool
}

// MemberRow is a row of the segment members table.
type MemberRow struct {
	Segment string // the segment's opaque ref
	Person  Ref
	// Deleted marks a person no longer in the segment.
	Deleted bool
}

// Changes holds what changed since the previous Flush, by partition.
//
// EventDays and ConversionDays hold the full contents of their days,
// except for the days of EventAppend: their rows are to be added to the
// partitions' rows (events were added, and no row output before changed).
//
// VisitDays, People, Identities and Members are the keyed tables: their
// rows are the rows that changed, and deletions (rows with Deleted set)
// of rows output before, to be merged into the partitions by key (visits
// by ID, people by Ref, identities by Unit, members by Segment and
// Person); a partition in the Whole set of its table instead holds its
// full contents, which replace the partition.
type Changes struct {
	EventDays      map[int32][]EventRow
	ConversionDays map[int32][]ConversionRow
	EventAppend    map[int32]bool
	VisitDays      map[int32][]VisitRow
	People         map[int][]*PersonRow
	Identities     map[int][]IdentityRow
	Members        map[int][]MemberRow

	WholeVisitDays  map[int32]bool
	WholePeople     map[int]bool
	WholeIdentities map[int]bool
	WholeMembers    map[int]bool

	// EraseRows are days not in memory (cold or final) whose partitions
	// of the events and conversions tables lose the rows of the units
	// named (an erased person's browsers and user, sorted); their other
	// rows stay as stored. ErasedVisits are the ids of the erased visits
	// of such days, whose deletions VisitDays holds.
	EraseRows    map[int32][]Ref
	ErasedVisits map[int32][]Ref
}

// DropRows lets go of the rows of the events, conversions, visits and
// people partitions, keeping their keys (all Restore reads) and the
// identity and member rows.
func (c *Changes) DropRows() {
	for d := range c.EventDays {
		c.EventDays[d] = nil
	}
	for d := range c.ConversionDays {
		c.ConversionDays[d] = nil
	}
	for d := range c.VisitDays {
		c.VisitDays[d] = nil
	}
	for b := range c.People {
		c.People[b] = nil
	}
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool {
	return len(c.EventDays) == 0 && len(c.VisitDays) == 0 && len(c.People) == 0 &&
		len(c.Identities) == 0 && len(c.Members) == 0 && len(c.EraseRows) == 0
}

// personState is a computed person, cached in a compact form (about half
// the size of its PersonRow: the touches and the client are pointers to
// shared values); row expands it. A recomputation replaces it.
type personState struct {
	core        personCore
	first, last touchInfo
	client      *Client
	revenue     Money
}

// personCore are the comparable scalars of a personState.
type personCore struct {
	ref                                 Ref
	userID, name, email, stage          string
	lastPath, traits                    string
	known, hasName, hasEmail            bool
	shared, intent                      bool
	firstSeen, lastSeen, visits, active int64
	events, pageviews, orders, value    int64
	browsers, firstPurchase             int64
}

// newPersonState compacts a computed person.
func newPersonState(f *personFacts) personState {
	r := f.row
	return personState{
		core: personCore{ref: r.Ref, userID: r.UserID, name: r.Name, email: r.Email, stage: r.Stage,
			lastPath: r.LastPath, traits: r.Traits, known: r.Known, hasName: r.HasName,
			hasEmail: r.HasEmail, shared: r.SharedBrowser, intent: r.Intent,
			firstSeen: r.FirstSeen, lastSeen: r.LastSeen, visits: r.Visits, active: r.ActiveDays,
			events: r.Events, pageviews: r.Pageviews, orders: r.Orders, value: r.Value,
			browsers: r.Browsers, firstPurchase: r.FirstPurchase},
		first: f.first, last: f.last, client: f.client, revenue: r.Revenue,
	}
}

// row expands the state into the person's row.
func (s *personState) row(out *PersonRow) {
	c := &s.core
	*out = PersonRow{Revenue: s.revenue}
	r := &out.personScalars
	r.Ref, r.UserID, r.Known, r.Name, r.Email = c.ref, c.userID, c.known, c.name, c.email
	r.HasName, r.HasEmail, r.Stage = c.hasName, c.hasEmail, c.stage
	r.FirstSeen, r.LastSeen, r.Visits, r.ActiveDays = c.firstSeen, c.lastSeen, c.visits, c.active
	r.Events, r.Pageviews, r.Orders, r.Value = c.events, c.pageviews, c.orders, c.value
	r.FirstTouch, r.LastTouch = touchOf(s.first), touchOf(s.last)
	if cl := s.client; cl != nil {
		r.Country, r.Region, r.Device = cl.Country, cl.Region, cl.Device
		r.Browser, r.OS, r.Locale = cl.Browser, cl.OS, cl.Locale
	}
	r.LastPath, r.Traits, r.Browsers, r.SharedBrowser = c.lastPath, c.traits, c.browsers, c.shared
	r.FirstPurchase, r.Intent = c.firstPurchase, c.intent
}

// equal reports whether two states give the same row.
func (s *personState) equal(o *personState) bool {
	return s.core == o.core && s.first.same(o.first) && s.last.same(o.last) &&
		sameClient(s.client, o.client) && slices.Equal(s.revenue, o.revenue)
}

func sameClient(a, b *Client) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// buckets are per-bucket indexes.
type bucketIndex struct {
	persons    [Buckets]map[Ref]*personState
	identities [Buckets]map[Ref]*node
	members    [Buckets]map[Ref][]string
}

func (e *Engine) bucketsInit() {
	for i := range Buckets {
		e.bx.persons[i] = map[Ref]*personState{}
		e.bx.identities[i] = map[Ref]*node{}
		e.bx.members[i] = map[Ref][]string{}
	}
}

// compute brings the derived state up to date with the events added:
// claims, visits, persons and memberships, marking the partitions that
// change.
func (e *Engine) compute() {
	for b := range e.dirtyBrowsers {
		e.reclaim(b)
	}
	clear(e.dirtyBrowsers)
	for v := range e.dirtySessions {
		e.resession(v)
	}
	clear(e.dirtySessions)
	e.epochSessions++
	for n := range e.dirtyUnits {
		e.recluster(n)
	}
	clear(e.dirtyUnits)
	e.epochUnits++
	for n := range e.dirtyParts {
		if p := personOf(n); p != nil {
			e.dirtyPersons[p] = true
		}
	}
	clear(e.dirtyParts)
	e.epochParts++
	if e.segmentsAll {
		for _, n := range e.nodes {
			if isPerson(n) {
				e.dirtyPersons[n] = true
			}
		}
	}
	e.recomputePersons(e.segmentsAll)
	clear(e.dirtyPersons)
	e.segmentsAll = false
	for n := range e.dirtyIdentity {
		b := Bucket(n.ref)
		_, had := e.bx.identities[b][n.ref]
		claimed := n.kind == KindBrowser && n.claimer != nil
		switch {
		case claimed:
			e.bx.identities[b][n.ref] = n
			e.dirtyIdents[n.ref] = true
		case had:
			delete(e.bx.identities[b], n.ref)
			e.dirtyIdents[n.ref] = true
		}
	}
	clear(e.dirtyIdentity)
}

// personUpdate is a dirty person recomputed: its new state when it
// changed, its membership when it changed or must be written again.
type personUpdate struct {
	p          *node
	state      *personState // nil: unchanged (or no longer a person)
	members    []string
	setMembers bool
}

// recomputePersons updates the cached rows and memberships of the dirty
// persons (or removes them for nodes that are no longer persons). The
// persons are computed in parallel (Config.BuildWorkers): computing only
// reads the engine; their results are then applied in turn.
func (e *Engine) recomputePersons(forceMembers bool) {
	ups := make([]personUpdate, 0, len(e.dirtyPersons))
	for p := range e.dirtyPersons {
		ups = append(ups, personUpdate{p: p})
	}
	const chunk = 256
	var tasks []func()
	for lo := 0; lo < len(ups); lo += chunk {
		part := ups[lo:min(lo+chunk, len(ups))]
		tasks = append(tasks, func() {
			for i := range part {
				e.computePersonUpdate(&part[i], forceMembers)
			}
		})
	}
	runParallel(tasks, e.cfg.BuildWorkers)
	for i := range ups {
		u := &ups[i]
		b := Bucket(u.p.ref)
		if !isPerson(u.p) {
			if e.bx.persons[b][u.p.ref] != nil {
				delete(e.bx.persons[b], u.p.ref)
				e.dirtyPeople[u.p.ref] = true
			}
			e.setMembers(b, u.p.ref, nil)
			continue
		}
		if u.state != nil {
			e.bx.persons[b][u.p.ref] = u.state
			e.dirtyPeople[u.p.ref] = true
		}
		if u.setMembers {
			e.setMembers(b, u.p.ref, u.members)
		}
	}
}

// computePersonUpdate computes a dirty person (it only reads the engine).
func (e *Engine) computePersonUpdate(u *personUpdate, forceMembers bool) {
	if !isPerson(u.p) {
		return
	}
	old := e.bx.persons[Bucket(u.p.ref)][u.p.ref]
	f := e.computePerson(u.p)
	if st := newPersonState(f); old == nil || !old.equal(&st) {
		u.state = new(personState)
		*u.state = st
	} else if !forceMembers {
		return
	}
	u.members, u.setMembers = e.membership(f), true
}

// setMembers records a person's membership, keeping the counts.
func (e *Engine) setMembers(b int, ref Ref, mem []string) {
	cur, had := e.bx.members[b][ref]
	if had && slices.Equal(cur, mem) || !had && len(mem) == 0 {
		return
	}
	for _, s := range cur {
		e.segCount[s]--
	}
	for _, s := range mem {
		e.segCount[s]++
	}
	if _, ok := e.dirtyMembers[ref]; !ok {
		// The membership as output before (slices are replaced, never
		// modified).
		e.dirtyMembers[ref] = cur
	}
	if len(mem) == 0 {
		delete(e.bx.members[b], ref)
	} else {
		e.bx.members[b][ref] = mem
	}
}

// Members returns how many persons are in the segment with ref.
func (e *Engine) Members(ref string) int { return e.segCount[ref] }

// Settle computes the derived state and forgets which partitions changed:
// for an engine rebuilt from tables that already hold its outputs.
func (e *Engine) Settle() {
	e.compute()
	e.clearOutputs()
}

// RewriteMembers has the next Flush output every partition of the members
// table whole (membership stored under other segment definitions).
func (e *Engine) RewriteMembers() {
	for b := range Buckets {
		e.wholeMembers[b] = true
	}
}

func (e *Engine) clearOutputs() {
	for d := range e.dirtyEventDays {
		if dd := e.days[d]; dd != nil {
			for _, ev := range dd.fresh {
				ev.out = true
			}
			dd.fresh, dd.rewrite, dd.dirty = nil, false, false
		}
	}
	clear(e.dirtyEventDays)
	// The visits' partitions as output: whole days first (every visit of
	// the day is in it, and no other), then the changes.
	if len(e.wholeVisitDays) > 0 {
		for id, d := range e.visitOut {
			if e.wholeVisitDays[d] {
				delete(e.visitOut, id)
			}
		}
		for d := range e.wholeVisitDays {
			for v := range e.visitsByDay[d] {
				e.visitOut[v.id] = d
			}
		}
	}
	for id, v := range e.dirtyVisits {
		if v == nil {
			delete(e.visitOut, id)
			continue
		}
		e.visitOut[id] = e.DayOf(v.start)
	}
	clear(e.dirtyVisits)
	clear(e.dirtyVisitDays)
	clear(e.dirtyPeople)
	clear(e.dirtyIdents)
	clear(e.dirtyMembers)
	clear(e.wholeVisitDays)
	clear(e.wholePeople)
	clear(e.wholeIdentities)
	clear(e.wholeMembers)
}

// Flush brings the derived state up to date and returns what changed
// since the last Flush (Changes). When writing it fails, give it back
// with Restore so the next Flush includes it.
func (e *Engine) Flush() *Changes {
	e.compute()
	ch := e.build(false)
	e.clearOutputs()
	if len(e.eraseRows) > 0 || len(e.eraseVisits) > 0 {
		ch.EraseRows = make(map[int32][]Ref, len(e.eraseRows))
		for d, units := range e.eraseRows {
			refs := make([]Ref, 0, len(units))
			for u := range units {
				refs = append(refs, u)
			}
			slices.SortFunc(refs, func(a, b Ref) int { return slices.Compare(a[:], b[:]) })
			ch.EraseRows[d] = refs
			e.erasing[d] = units
		}
		ch.ErasedVisits = e.eraseVisits
		e.eraseRows, e.eraseVisits = map[int32]map[Ref]bool{}, map[int32][]Ref{}
	}
	return ch
}

// All returns the full rows of every partition (for tests and replay).
func (e *Engine) All() *Changes {
	e.compute()
	return e.build(true)
}

// Restore has the next Flush output again what ch holds, which was not
// stored: the days of events in full, and the partitions of the keyed
// tables in ch whole (their stored contents are unknown).
func (e *Engine) Restore(ch *Changes) {
	for d := range ch.EventDays {
		if dd := e.days[d]; dd != nil {
			// The rows appended were not stored: write the day whole.
			dd.rewrite = true
			e.markEventDay(dd)
		}
	}
	for d := range ch.VisitDays {
		if e.days[d] == nil && len(e.visitsByDay[d]) == 0 {
			continue // a day not in memory: its erased visits, below
		}
		// A cold day with residents is read back whole before it is
		// written (ThawForFlush).
		e.wholeVisitDays[d] = true
		e.dirtyVisitDays[d] = true
	}
	// Rows of erased persons on days not in memory: taken out at the next
	// Flush, or with the whole day if a thaw brought it back meanwhile.
	for d, units := range ch.EraseRows {
		delete(e.erasing, d)
		if dd := e.days[d]; dd != nil && e.cold[d] == nil {
			dd.rewrite = true
			e.markEventDay(dd)
			continue
		}
		rows := e.eraseRows[d]
		if rows == nil {
			rows = make(map[Ref]bool, len(units))
			e.eraseRows[d] = rows
		}
		for _, u := range units {
			rows[u] = true
		}
	}
	for d, ids := range ch.ErasedVisits {
		if e.cold[d] == nil && (e.days[d] != nil || len(e.visitsByDay[d]) > 0) {
			continue // written whole (above)
		}
		for _, id := range ids {
			if _, ok := e.dirtyVisits[id]; !ok {
				e.visitOut[id] = d
				e.dirtyVisits[id] = nil
			}
		}
		e.eraseVisits[d] = append(e.eraseVisits[d], ids...)
	}
	for b := range ch.People {
		e.wholePeople[b] = true
	}
	for b := range ch.Identities {
		e.wholeIdentities[b] = true
	}
	for b := range ch.Members {
		e.wholeMembers[b] = true
	}
}

// Dirty reports whether a Flush would return anything.
func (e *Engine) Dirty() bool {
	return len(e.dirtyEventDays) > 0 || len(e.dirtyVisits) > 0 || len(e.dirtyPeople) > 0 ||
		len(e.dirtyIdents) > 0 || len(e.dirtyMembers) > 0 || len(e.wholeVisitDays) > 0 ||
		len(e.wholePeople) > 0 || len(e.wholeIdentities) > 0 || len(e.wholeMembers) > 0 || len(e.dirtyUnits) > 0 ||
		len(e.dirtySessions) > 0 || len(e.dirtyBrowsers) > 0 || len(e.dirtyParts) > 0 ||
		len(e.dirtyPersons) > 0 || len(e.dirtyIdentity) > 0 || e.segmentsAll || len(e.eraseRows) > 0
}

func (e *Engine) build(all bool) *Changes {
	ch := &Changes{
		EventDays:       map[int32][]EventRow{},
		ConversionDays:  map[int32][]ConversionRow{},
		EventAppend:     map[int32]bool{},
		VisitDays:       map[int32][]VisitRow{},
		People:          map[int][]*PersonRow{},
		Identities:      map[int][]IdentityRow{},
		Members:         map[int][]MemberRow{},
		WholeVisitDays:  map[int32]bool{},
		WholePeople:     map[int]bool{},
		WholeIdentities: map[int]bool{},
		WholeMembers:    map[int]bool{},
	}
	// Each partition's rows are one task: tasks only read the engine
	// (and sort their own day's events), so they run in parallel, and
	// their results are put in ch in order afterwards.
	var tasks []func()
	var mu sync.Mutex
	dayKeys := make([]int32, 0, len(e.days))
	if all {
		for d := range e.days {
			dayKeys = append(dayKeys, d)
		}
	} else {
		for d := range e.dirtyEventDays {
			dayKeys = append(dayKeys, d)
		}
	}
	for _, d := range dayKeys {
		dd := e.days[d]
		appendOnly := !all && dd != nil && !dd.rewrite
		tasks = append(tasks, func() {
			var rows []EventRow
			var conv []ConversionRow
			if appendOnly {
				rows, conv = e.rowsOf(dd, dd.fresh), e.conversionsOf(dd.fresh)
			} else {
				rows, conv = e.eventRows(d), e.conversionRows(d)
			}
			mu.Lock()
			defer mu.Unlock()
			if appendOnly {
				ch.EventAppend[d] = true
			}
			ch.EventDays[d], ch.ConversionDays[d] = rows, conv
		})
	}

	// Visits: whole days, and the changes of the others by day.
	wholeDays := e.wholeVisitDays
	if all {
		wholeDays = make(map[int32]bool, len(e.visitsByDay))
		for d := range e.visitsByDay {
			wholeDays[d] = true
		}
	}
	for d := range wholeDays {
		tasks = append(tasks, func() {
			rows := e.visitRows(d)
			mu.Lock()
			defer mu.Unlock()
			ch.VisitDays[d] = rows
			ch.WholeVisitDays[d] = true
		})
	}
	if !all {
		changed := map[int32][]*visit{}
		gone := map[int32][]Ref{}
		for id, v := range e.dirtyVisits {
			at, stored := e.visitOut[id]
			day := int32(0)
			if v != nil {
				day = e.DayOf(v.start)
				if !wholeDays[day] {
					changed[day] = append(changed[day], v)
				}
			}
			if stored && (v == nil || at != day) && !wholeDays[at] {
				gone[at] = append(gone[at], id)
			}
		}
		days := map[int32]bool{}
		for d := range changed {
			days[d] = true
		}
		for d := range gone {
			days[d] = true
		}
		for d := range days {
			vs, ids := changed[d], gone[d]
			tasks = append(tasks, func() {
				rows := make([]VisitRow, 0, len(vs)+len(ids))
				for _, id := range ids {
					rows = append(rows, VisitRow{ID: id, Deleted: true})
				}
				for _, v := range vs {
					rows = append(rows, e.visitRow(v))
				}
				sortVisitRows(rows)
				mu.Lock()
				defer mu.Unlock()
				ch.VisitDays[d] = rows
			})
		}
	}

	// People, identities and members: whole buckets, and the changes of
	// the others.
	var people, idents, members [Buckets][]Ref
	if !all {
		for ref := range e.dirtyPeople {
			people[Bucket(ref)] = append(people[Bucket(ref)], ref)
		}
		for ref := range e.dirtyIdents {
			idents[Bucket(ref)] = append(idents[Bucket(ref)], ref)
		}
		for ref := range e.dirtyMembers {
			members[Bucket(ref)] = append(members[Bucket(ref)], ref)
		}
	}
	for b := range Buckets {
		switch {
		case all || e.wholePeople[b]:
			tasks = append(tasks, func() {
				rows := e.personRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.People[b] = rows
				ch.WholePeople[b] = true
			})
		case len(people[b]) > 0:
			refs := people[b]
			tasks = append(tasks, func() {
				rows := e.personChanges(b, refs)
				mu.Lock()
				defer mu.Unlock()
				ch.People[b] = rows
			})
		}
		switch {
		case all || e.wholeIdentities[b]:
			tasks = append(tasks, func() {
				rows := e.identityRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.Identities[b] = rows
				ch.WholeIdentities[b] = true
			})
		case len(idents[b]) > 0:
			refs := idents[b]
			tasks = append(tasks, func() {
				rows := e.identityChanges(b, refs)
				mu.Lock()
				defer mu.Unlock()
				ch.Identities[b] = rows
			})
		}
		switch {
		case all || e.wholeMembers[b]:
			tasks = append(tasks, func() {
				rows := e.memberRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.Members[b] = rows
				ch.WholeMembers[b] = true
			})
		case len(members[b]) > 0:
			refs := members[b]
			tasks = append(tasks, func() {
				rows := e.memberChanges(b, refs)
				if len(rows) == 0 {
					return // memberships changed back
				}
				mu.Lock()
				defer mu.Unlock()
				ch.Members[b] = rows
			})
		}
	}
	runParallel(tasks, e.cfg.BuildWorkers)
	return ch
}

// runParallel runs the tasks on up to workers goroutines (GOMAXPROCS
// when workers is 0), and returns when all are done.
func runParallel(tasks []func(), workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(tasks))
	if workers <= 1 {
		for _, t := range tasks {
			t()
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tasks) {
					return
				}
				tasks[i]()
			}
		}()
	}
	wg.Wait()
}

func (e *Engine) eventRows(dn int32) []EventRow {
	d := e.days[dn]
	if d == nil {
		return nil
	}
	return e.rowsOf(d, d.events)
}

// rowsOf returns the rows of events of day d, in no particular order
// (SortEventRows).
func (e *Engine) rowsOf(d *day, events []*event) []EventRow {
	view := d.strs.view()
	rows := make([]EventRow, len(events))
	for i, ev := range events {
		r := &rows[i]
		r.ev, r.strs = ev, view
		if ev.unit != nil {
			r.Unit = ev.unit.ref
		}
		if v := e.visitOf(ev); v != nil {
			r.Visit = v.id
			r.Channel = v.touch.Channel
		}
	}
	return rows
}

func (e *Engine) conversionRows(dn int32) []ConversionRow {
	d := e.days[dn]
	if d == nil {
		return nil
	}
	return e.conversionsOf(d.events)
}

func (e *Engine) conversionsOf(events []*event) []ConversionRow {
	var rows []ConversionRow
	for _, ev := range events {
		if ev.actions == 0 {
			continue
		}
		var unit, owner, vis Ref
		if ev.unit != nil {
			unit = ev.unit.ref
		}
		if ev.part != nil {
			owner = ev.part.ref
		}
		if v := e.visitOf(ev); v != nil {
			vis = v.id
		}
		for id := range strings.SplitSeq(ev.Actions(), ",") {
			role := ""
			if a := e.actByID[id]; a != nil {
				role = a.role
			}
			rows = append(rows, ConversionRow{Time: ev.Time, EventID: ev.ID, Action: id, Role: role,
				Owner: owner, Unit: unit, Visit: vis, HasValue: ev.HasValue, Value: ev.Value,
				Currency: ev.ValueCurrency(), Consented: ev.Client.Consented})
		}
	}
	slices.SortFunc(rows, func(a, b ConversionRow) int {
		return cmp.Or(strings.Compare(a.Action, b.Action), cmp.Compare(a.Time, b.Time), slices.Compare(a.EventID[:], b.EventID[:]))
	})
	return rows
}

func (e *Engine) visitRows(dn int32) []VisitRow {
	vs := e.visitsByDay[dn]
	rows := make([]VisitRow, 0, len(vs))
	for v := range vs {
		rows = append(rows, e.visitRow(v))
	}
	sortVisitRows(rows)
	return rows
}

// visitRow returns the row of a live visit.
func (e *Engine) visitRow(v *visit) VisitRow {
	r := VisitRow{ID: v.id, Session: v.session, Start: v.start, End: v.end, Events: v.events,
		Pageviews: v.pageview, Consented: v.consented, Touch: *v.touch, ExitPath: v.exit}
	if v.owner != nil {
		r.Unit = v.owner.ref
	}
	switch {
	case v.touchEv != nil && v.touchEv.part != nil:
		r.Person = personOf(v.touchEv.part).ref
	case len(v.parts) > 0:
		for _, ev := range v.eventsOf(e) {
			if ev.part != nil {
				r.Person = personOf(ev.part).ref
				break
			}
		}
	}
	if te := v.touchEv; te != nil {
		r.LandingHost, r.LandingPath, r.Client = te.Host(), te.Path(), te.Client
	}
	return r
}

// sortVisitRows puts rows in table order (unit, start, id), sorting
// indexes rather than the large rows.
func sortVisitRows(rows []VisitRow) {
	idx := make([]int32, len(rows))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int {
		a, b := &rows[i], &rows[j]
		if c := bytesCompare16(&a.Unit, &b.Unit); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Start, b.Start); c != 0 {
			return c
		}
		return bytesCompare16(&a.ID, &b.ID)
	})
	sorted := make([]VisitRow, len(rows))
	for i, j := range idx {
		sorted[i] = rows[j]
	}
	copy(rows, sorted)
}

func (e *Engine) personRows(b int) []*PersonRow {
	rows := make([]*PersonRow, 0, len(e.bx.persons[b]))
	all := make([]PersonRow, len(e.bx.persons[b]))
	i := 0
	for _, p := range e.bx.persons[b] {
		p.row(&all[i])
		rows = append(rows, &all[i])
		i++
	}
	slices.SortFunc(rows, func(a, b *PersonRow) int { return slices.Compare(a.Ref[:], b.Ref[:]) })
	return rows
}

func (e *Engine) identityRows(b int) []IdentityRow {
	rows := make([]IdentityRow, 0, len(e.bx.identities[b]))
	for _, n := range e.bx.identities[b] {
		if n.kind != KindBrowser || n.claimer == nil {
			continue
		}
		rows = append(rows, IdentityRow{Unit: n.ref, Person: n.claimer.ref, ClaimedAt: n.claimAt, Shared: len(n.signIns) > 1})
	}
	slices.SortFunc(rows, func(a, b IdentityRow) int { return slices.Compare(a.Unit[:], b.Unit[:]) })
	return rows
}

func (e *Engine) memberRows(b int) []MemberRow {
	var rows []MemberRow
	for p, segs := range e.bx.members[b] {
		for _, s := range segs {
			rows = append(rows, MemberRow{Segment: s, Person: p})
		}
	}
	slices.SortFunc(rows, func(a, b MemberRow) int {
		return cmp.Or(strings.Compare(a.Segment, b.Segment), slices.Compare(a.Person[:], b.Person[:]))
	})
	return rows
}

// personChanges returns the rows of the changed persons of bucket b (a
// deletion for a ref that is no longer a person), by ref.
func (e *Engine) personChanges(b int, refs []Ref) []*PersonRow {
	slices.SortFunc(refs, func(a, b Ref) int { return bytesCompare16(&a, &b) })
	rows := make([]PersonRow, len(refs))
	out := make([]*PersonRow, len(refs))
	for i, ref := range refs {
		if p := e.bx.persons[b][ref]; p != nil {
			p.row(&rows[i])
		} else {
			rows[i].Ref, rows[i].Deleted = ref, true
		}
		out[i] = &rows[i]
	}
	return out
}

// identityChanges returns the rows of the browsers of bucket b whose claim
// changed (a deletion for one no longer claimed), by unit.
func (e *Engine) identityChanges(b int, refs []Ref) []IdentityRow {
	slices.SortFunc(refs, func(a, b Ref) int { return bytesCompare16(&a, &b) })
	rows := make([]IdentityRow, 0, len(refs))
	for _, ref := range refs {
		n := e.bx.identities[b][ref]
		if n == nil || n.kind != KindBrowser || n.claimer == nil {
			rows = append(rows, IdentityRow{Unit: ref, Deleted: true})
			continue
		}
		rows = append(rows, IdentityRow{Unit: n.ref, Person: n.claimer.ref, ClaimedAt: n.claimAt, Shared: len(n.signIns) > 1})
	}
	return rows
}

// memberChanges returns the membership rows that changed for the persons
// of bucket b since they were last output: a row for each segment a
// person entered, a deletion for each it left; by segment and person.
func (e *Engine) memberChanges(b int, refs []Ref) []MemberRow {
	var rows []MemberRow
	for _, ref := range refs {
		was, now := e.dirtyMembers[ref], e.bx.members[b][ref]
		for _, s := range now {
			if !slices.Contains(was, s) {
				rows = append(rows, MemberRow{Segment: s, Person: ref})
			}
		}
		for _, s := range was {
			if !slices.Contains(now, s) {
				rows = append(rows, MemberRow{Segment: s, Person: ref, Deleted: true})
			}
		}
	}
	slices.SortFunc(rows, func(a, b MemberRow) int {
		return cmp.Or(strings.Compare(a.Segment, b.Segment), slices.Compare(a.Person[:], b.Person[:]))
	})
	return rows
}

// eventKey is a row's place in table order, copied out of the row so
// that sorting compares contiguous keys instead of following pointers.
type eventKey struct {
	unit Ref
	id   Ref
	time int64
	row  int32
}

func compareEventKeys(a, b *eventKey) int {
	if c := bytesCompare16(&a.unit, &b.unit); c != 0 {
		return c
	}
	if c := cmp.Compare(a.time, b.time); c != 0 {
		return c
	}
	return bytesCompare16(&a.id, &b.id)
}

// bytesCompare16 compares two 16-byte refs as big-endian numbers, which
// is their byte order.
func bytesCompare16(a, b *Ref) int {
	ah, bh := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if ah != bh {
		return cmp.Compare(ah, bh)
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}
