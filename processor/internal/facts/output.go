package facts

import (
	"cmp"
	"encoding/binary"
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
// that replay reads) and what it belongs to.
type EventRow struct {
	// Event is the event as kept: shared with the engine, read-only.
	*Event
	// Unit is the ref of the browser, the user (no browser) or the
	// consentless visitor of the event; zero when none.
	Unit Ref
	// Visit is the id of the event's visit and Channel its channel; zero
	// and "" when the event belongs to no visit.
	Visit   Ref
	Channel string
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
}

// MemberRow is a row of the segment members table.
type MemberRow struct {
	Segment string // the segment's opaque ref
	Person  Ref
}

// Changes holds the full contents of every partition that changed since
// the previous Flush, except for the days of EventAppend: their
// EventDays and ConversionDays rows are to be added to the partitions'
// rows (events were added, and no row output before changed).
type Changes struct {
	EventDays      map[int32][]EventRow
	ConversionDays map[int32][]ConversionRow
	EventAppend    map[int32]bool
	VisitDays      map[int32][]VisitRow
	People         map[int][]*PersonRow
	Identities     map[int][]IdentityRow
	Members        map[int][]MemberRow
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
		len(c.Identities) == 0 && len(c.Members) == 0
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
	for n := range e.dirtyUnits {
		e.recluster(n)
	}
	clear(e.dirtyUnits)
	for n := range e.dirtyParts {
		if p := personOf(n); p != nil {
			e.dirtyPersons[p] = true
		}
	}
	clear(e.dirtyParts)
	if e.segmentsAll {
		for _, n := range e.nodes {
			if isPerson(n) {
				e.dirtyPersons[n] = true
			}
		}
	}
	for p := range e.dirtyPersons {
		e.recomputePerson(p, e.segmentsAll)
	}
	clear(e.dirtyPersons)
	e.segmentsAll = false
	for n := range e.dirtyIdentity {
		b := Bucket(n.ref)
		_, had := e.bx.identities[b][n.ref]
		claimed := n.kind == KindBrowser && n.claimer != nil
		switch {
		case claimed:
			e.bx.identities[b][n.ref] = n
			e.dirtyIdentityBuckets[b] = true
		case had:
			delete(e.bx.identities[b], n.ref)
			e.dirtyIdentityBuckets[b] = true
		}
	}
	clear(e.dirtyIdentity)
}

// recomputePerson updates the cached row and membership of person node p
// (or removes them when p is no longer a person).
func (e *Engine) recomputePerson(p *node, forceMembers bool) {
	b := Bucket(p.ref)
	old := e.bx.persons[b][p.ref]
	if !isPerson(p) {
		if old != nil {
			delete(e.bx.persons[b], p.ref)
			e.dirtyPeopleBuckets[b] = true
		}
		e.setMembers(b, p.ref, nil)
		return
	}
	f := e.computePerson(p)
	if st := newPersonState(f); old == nil || !old.equal(&st) {
		ps := new(personState)
		*ps = st
		e.bx.persons[b][p.ref] = ps
		e.dirtyPeopleBuckets[b] = true
	} else if !forceMembers {
		return
	}
	e.setMembers(b, p.ref, e.membership(f))
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
	if len(mem) == 0 {
		delete(e.bx.members[b], ref)
	} else {
		e.bx.members[b][ref] = mem
	}
	e.dirtyMemberBuckets[b] = true
}

// Members returns how many persons are in the segment with ref.
func (e *Engine) Members(ref string) int { return e.segCount[ref] }

// Settle computes the derived state and forgets which partitions changed:
// for an engine rebuilt from tables that already hold its outputs.
func (e *Engine) Settle() {
	e.compute()
	e.clearOutputs()
}

// RewriteMembers marks every partition of the members table changed
// (membership stored under other segment definitions).
func (e *Engine) RewriteMembers() {
	for b := range Buckets {
		e.dirtyMemberBuckets[b] = true
	}
}

func (e *Engine) clearOutputs() {
	for d := range e.dirtyEventDays {
		if dd := e.days[d]; dd != nil {
			for _, ev := range dd.fresh {
				ev.out = true
			}
			dd.fresh, dd.rewrite = nil, false
		}
	}
	clear(e.dirtyEventDays)
	clear(e.dirtyVisitDays)
	clear(e.dirtyPeopleBuckets)
	clear(e.dirtyIdentityBuckets)
	clear(e.dirtyMemberBuckets)
}

// Flush brings the derived state up to date and returns the full rows of
// every partition that changed since the last Flush. When writing them
// fails, give them back with Restore so the next Flush includes them.
func (e *Engine) Flush() *Changes {
	e.compute()
	ch := e.build(false)
	e.clearOutputs()
	return ch
}

// All returns the rows of every partition (for tests and replay).
func (e *Engine) All() *Changes {
	e.compute()
	return e.build(true)
}

// Restore marks the partitions of ch changed again.
func (e *Engine) Restore(ch *Changes) {
	for d := range ch.EventDays {
		e.dirtyEventDays[d] = true
		if dd := e.days[d]; dd != nil {
			// The rows appended were not stored: write the day whole.
			dd.rewrite = true
		}
	}
	for d := range ch.VisitDays {
		e.dirtyVisitDays[d] = true
	}
	for b := range ch.People {
		e.dirtyPeopleBuckets[b] = true
	}
	for b := range ch.Identities {
		e.dirtyIdentityBuckets[b] = true
	}
	for b := range ch.Members {
		e.dirtyMemberBuckets[b] = true
	}
}

// Dirty reports whether a Flush would return anything.
func (e *Engine) Dirty() bool {
	return len(e.dirtyEventDays) > 0 || len(e.dirtyVisitDays) > 0 || len(e.dirtyPeopleBuckets) > 0 ||
		len(e.dirtyIdentityBuckets) > 0 || len(e.dirtyMemberBuckets) > 0 || len(e.dirtyUnits) > 0 ||
		len(e.dirtySessions) > 0 || len(e.dirtyBrowsers) > 0 || len(e.dirtyParts) > 0 ||
		len(e.dirtyPersons) > 0 || len(e.dirtyIdentity) > 0 || e.segmentsAll
}

func (e *Engine) build(all bool) *Changes {
	ch := &Changes{
		EventDays:      map[int32][]EventRow{},
		ConversionDays: map[int32][]ConversionRow{},
		EventAppend:    map[int32]bool{},
		VisitDays:      map[int32][]VisitRow{},
		People:         map[int][]*PersonRow{},
		Identities:     map[int][]IdentityRow{},
		Members:        map[int][]MemberRow{},
	}
	pick := func(dirty map[int32]bool, src []int32) []int32 {
		if all {
			return src
		}
		out := make([]int32, 0, len(dirty))
		for d := range dirty {
			out = append(out, d)
		}
		return out
	}
	// Each partition's rows are one task: tasks only read the engine
	// (and sort their own day's events), so they run in parallel, and
	// their results are put in ch in order afterwards.
	var tasks []func()
	var mu sync.Mutex
	dayKeys := make([]int32, 0, len(e.days))
	for d := range e.days {
		dayKeys = append(dayKeys, d)
	}
	for _, d := range pick(e.dirtyEventDays, dayKeys) {
		dd := e.days[d]
		appendOnly := !all && dd != nil && !dd.rewrite
		tasks = append(tasks, func() {
			var rows []EventRow
			var conv []ConversionRow
			if appendOnly {
				rows, conv = e.rowsOf(dd.fresh, true), e.conversionsOf(dd.fresh)
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
	visitKeys := make([]int32, 0, len(e.visitsByDay))
	for d := range e.visitsByDay {
		visitKeys = append(visitKeys, d)
	}
	for _, d := range pick(e.dirtyVisitDays, visitKeys) {
		tasks = append(tasks, func() {
			rows := e.visitRows(d)
			mu.Lock()
			defer mu.Unlock()
			ch.VisitDays[d] = rows
		})
	}
	for b := range Buckets {
		if all || e.dirtyPeopleBuckets[b] {
			tasks = append(tasks, func() {
				rows := e.personRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.People[b] = rows
			})
		}
		if all || e.dirtyIdentityBuckets[b] {
			tasks = append(tasks, func() {
				rows := e.identityRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.Identities[b] = rows
			})
		}
		if all || e.dirtyMemberBuckets[b] {
			tasks = append(tasks, func() {
				rows := e.memberRows(b)
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
	return e.rowsOf(d.events, false)
}

// rowsOf returns the rows of events in table order (unit, time, id);
// events is sorted in place unless copy is set.
func (e *Engine) rowsOf(events []*event, copy bool) []EventRow {
	if copy {
		events = slices.Clone(events)
	}
	sortEvents(events)
	rows := make([]EventRow, len(events))
	evs := make([]Event, len(events))
	for i, ev := range events {
		r := &rows[i]
		evs[i] = ev.export()
		r.Event = &evs[i]
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
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b VisitRow) int {
		return cmp.Or(slices.Compare(a.Unit[:], b.Unit[:]), cmp.Compare(a.Start, b.Start), slices.Compare(a.ID[:], b.ID[:]))
	})
	return rows
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

// eventKey is an event's place in table order, copied out of the event
// so that sorting compares contiguous keys instead of following pointers.
type eventKey struct {
	unit Ref
	id   Ref
	time int64
	ev   *event
}

// sortEvents puts events in table order (unit, time, id). Keeping a
// day's events in that order, later flushes sort an almost sorted slice.
func sortEvents(events []*event) {
	if len(events) < 2 {
		return
	}
	keys := make([]eventKey, len(events))
	sorted := true
	for i, ev := range events {
		k := &keys[i]
		if ev.unit != nil {
			k.unit = ev.unit.ref
		}
		k.id, k.time, k.ev = ev.ID, ev.Time, ev
		if sorted && i > 0 && compareEventKeys(&keys[i-1], k) > 0 {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(keys, func(a, b eventKey) int { return compareEventKeys(&a, &b) })
	for i := range keys {
		events[i] = keys[i].ev
	}
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
