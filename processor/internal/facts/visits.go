package facts

import (
	"cmp"
	"iter"
	"slices"

	"github.com/mfhq/mf/processor/internal/channels"
)

// node is a browser, a user or a consentless visitor. As a unit it groups
// visits; as a part (browsers and users) it holds activity per day; as an
// identity it records sign-ins (browsers) and claims (users).
type node struct {
	ref  Ref
	kind byte
	raw  string // anonymousId or userId; "" for a consentless visitor

	// Person role: the person's number, and what of its activity the
	// day sets hold (activity.go).
	actState byte
	num      uint32
	actFirst int32
	actSum   uint64

	// Unit role.
	cluster  []*event // events that form visits by inactivity
	unsorted bool
	visits   []*visit // visits by inactivity, by start

	// Part role: the live visits with events of this part, and what the
	// visits with its events on cold days contribute to its person's
	// touches (frozen, by visit: a thawed day takes its visits back out).
	partVisits visitSet
	frozen     []touchInfo

	// Part role.
	days partDays
	// enc is, on a part restored from its state row and not opened since
	// (Engine.open), its days and frozen touches still encoded (the
	// row's body, appendNodeBody): days and frozen are empty meanwhile.
	enc []byte

	// Marks of the dirty sets it is in (Engine.markUnit, markPart).
	markUnit, markPart uint32
	// erased: the person was erased (Engine.Erase); the node is no
	// longer in the engine and is no one's person.
	erased bool

	// Identity role.
	signIns map[*node]evKey    // browser: earliest sign-in of each user on it
	claimer *node              // browser: the user who claims it
	claimAt int64              // browser: time of the claiming sign-in
	claimed map[*node]struct{} // user: browsers it claims
	signed  map[*node]struct{} // user: browsers it signed in on
}

func (n *node) addCluster(ev *event) {
	if len(n.cluster) > 0 && ev.key().cmp(n.cluster[len(n.cluster)-1].key()) < 0 {
		n.unsorted = true
	}
	n.cluster = append(n.cluster, ev)
}

func (n *node) removeCluster(ev *event) {
	if i := slices.Index(n.cluster, ev); i >= 0 {
		n.cluster = slices.Delete(n.cluster, i, i+1)
	}
}

func (n *node) sortCluster() {
	if n.unsorted {
		slices.SortFunc(n.cluster, func(a, b *event) int { return a.key().cmp(b.key()) })
		n.unsorted = false
	}
}

func (n *node) removeVisit(v *visit) {
	if v.session {
		return // visits from a sessionId are found through Engine.sessions
	}
	if i := slices.Index(n.visits, v); i >= 0 {
		n.visits = slices.Delete(n.visits, i, i+1)
	}
}

// signIn records a sign-in of user u on browser n at k; it reports whether
// the earliest sign-in of u on n changed.
func (n *node) signIn(u *node, k evKey) bool {
	if n.signIns == nil {
		n.signIns = map[*node]evKey{}
	}
	old, ok := n.signIns[u]
	if ok && !k.earlier(old) {
		return false
	}
	n.signIns[u] = k
	if u.signed == nil {
		u.signed = map[*node]struct{}{}
	}
	u.signed[n] = struct{}{}
	return true
}

// resetSignIn sets the earliest sign-in of u on n (zero: none any more).
func (n *node) resetSignIn(u *node, k evKey) {
	if k.zero() {
		delete(n.signIns, u)
		delete(u.signed, n)
		return
	}
	if n.signIns == nil {
		n.signIns = map[*node]evKey{}
	}
	n.signIns[u] = k
	if u.signed == nil {
		u.signed = map[*node]struct{}{}
	}
	u.signed[n] = struct{}{}
}

// visitSet is a set of visits: a slice while small (most parts have a few
// live visits), a map beyond smallSet.
type visitSet struct {
	small []*visit
	big   map[*visit]struct{}
}

const smallSet = 16

func (s *visitSet) add(v *visit) {
	if s.big != nil {
		s.big[v] = struct{}{}
		return
	}
	if slices.Contains(s.small, v) {
		return
	}
	if len(s.small) < smallSet {
		s.small = append(s.small, v)
		return
	}
	s.big = make(map[*visit]struct{}, 2*smallSet)
	for _, o := range s.small {
		s.big[o] = struct{}{}
	}
	s.big[v] = struct{}{}
	s.small = nil
}

func (s *visitSet) remove(v *visit) {
	if s.big != nil {
		delete(s.big, v)
		return
	}
	if i := slices.Index(s.small, v); i >= 0 {
		s.small = slices.Delete(s.small, i, i+1)
	}
}

// all yields the visits of the set (in no particular order).
func (s *visitSet) all() iter.Seq[*visit] {
	return func(yield func(*visit) bool) {
		if s.big != nil {
			for v := range s.big {
				if !yield(v) {
					return
				}
			}
			return
		}
		for _, v := range s.small {
			if !yield(v) {
				return
			}
		}
	}
}

// visit is a visit: from a sessionId (session) or found by inactivity.
type visit struct {
	id      Ref
	session bool
	owner   *node    // the unit of the visit (its browser, else user or visitor)
	members []*event // session visits: their events
	parts   []*node  // the parts with events in the visit, by ref

	start, end       int64
	first, last      *event
	touchEv          *event // the event the touch is decided from
	events, pageview int32
	exit             string
	landing          string // the touch event's path
	consented        bool
	touch            *channels.Touch // shared (Engine.touchOf)
	markSession      uint32          // Engine.markSession
}

// info is what a visit contributes to its person's first and last touch.
func (v *visit) info() touchInfo {
	t := touchInfo{at: v.start, id: v.id, touch: v.touch}
	if v.touchEv != nil {
		t.landing = v.landing
	}
	return t
}

// same reports whether two computations of a visit have the same row.
func (v *visit) same(o *visit) bool {
	return v.id == o.id && v.owner == o.owner && v.start == o.start && v.end == o.end &&
		v.events == o.events && v.pageview == o.pageview && v.exit == o.exit &&
		v.consented == o.consented && sameTouch(v.touch, o.touch) && v.touchEv == o.touchEv &&
		slices.Equal(v.parts, o.parts)
}

// sameTouch reports whether two touches are equal (nil is the zero Touch).
func sameTouch(a, b *channels.Touch) bool {
	if a == b {
		return true
	}
	var za, zb channels.Touch
	if a != nil {
		za = *a
	}
	if b != nil {
		zb = *b
	}
	return za == zb
}

// maxTouches bounds the touches an engine shares.
const maxTouches = 1 << 16

// touchOf returns the engine's shared copy of t, its strings interned:
// visits and the summaries of final visits point to it instead of each
// holding eleven strings, and it does not point into a day's arena.
func (e *Engine) touchOf(t channels.Touch) *channels.Touch {
	if p, ok := e.touches[t]; ok {
		return p
	}
	in := e.in.get
	t.Channel, t.Source, t.Medium, t.Campaign = in(t.Channel), in(t.Source), in(t.Medium), in(t.Campaign)
	t.Term, t.Content, t.AdPlatform, t.ClickID = in(t.Term), in(t.Content), in(t.AdPlatform), in(t.ClickID)
	t.RefHost, t.RefName = in(t.RefHost), in(t.RefName)
	p := new(channels.Touch) // not &t: t would escape, allocated at every call
	*p = t
	if len(e.touches) < maxTouches {
		e.touches[t] = p
	}
	return p
}

// touchInfo is a visit's contribution to first and last touch.
type touchInfo struct {
	at      int64
	id      Ref
	touch   *channels.Touch
	landing string
	// row is, on a touch of a cold visit (node.frozen), the hash of the
	// visit's row as stored (VisitRow.hash): what an erasure of the
	// visit takes out of its day's summary (coldDay.sum).
	row uint64
	// self marks, on a touch of a cold visit, the part whose person the
	// visit's row credits (personPart): a move of that part's claim
	// changes the row (Reclaim).
	self bool
	// parts is how many parts the visit has (at most 255): each keeps a
	// copy of this touch, and a change of the row's hash reaches them all.
	parts uint8
}

// same reports whether two touch infos are equal.
func (t touchInfo) same(o touchInfo) bool {
	return t.at == o.at && t.id == o.id && t.landing == o.landing && sameTouch(t.touch, o.touch)
}

func (t touchInfo) before(o touchInfo) bool {
	if t.at != o.at {
		return t.at < o.at
	}
	return slices.Compare(t.id[:], o.id[:]) < 0
}

// visitSum summarises the final visits of a unit.
type visitSum struct {
	count       int64
	first, last touchInfo
	lastOut     touchInfo // the latest visit not direct
	hasOut      bool
}

func (s *visitSum) add(t touchInfo) {
	if s.count == 0 || t.before(s.first) {
		s.first = t
	}
	if s.count == 0 || s.last.before(t) {
		s.last = t
	}
	if t.touch.Channel != channels.Direct && (!s.hasOut || s.lastOut.before(t)) {
		s.lastOut, s.hasOut = t, true
	}
	s.count++
}

// visitSummary summarises the visits of a person: the cold ones of its
// nodes and the live ones with events of any of them (each once: a visit
// with events of two parts of one person is in both).
func visitSummary(mem []*node) visitSum {
	var s visitSum
	if len(mem) == 1 {
		n := mem[0]
		for _, t := range n.frozen {
			s.add(t)
		}
		for v := range n.partVisits.all() {
			s.add(v.info())
		}
		return s
	}
	seen := map[Ref]struct{}{}
	for _, n := range mem {
		for _, t := range n.frozen {
			if _, ok := seen[t.id]; !ok {
				seen[t.id] = struct{}{}
				s.add(t)
			}
		}
		for v := range n.partVisits.all() {
			if _, ok := seen[v.id]; !ok {
				seen[v.id] = struct{}{}
				s.add(v.info())
			}
		}
	}
	return s
}

// fill computes a visit's row from its events, sorted.
func (e *Engine) fill(v *visit, evs []*event) {
	v.first, v.last = evs[0], evs[len(evs)-1]
	v.start, v.end = v.first.Time, v.last.Time
	v.events = int32(len(evs))
	v.parts = v.parts[:0]
	for _, ev := range evs {
		if ev.part != nil && !slices.Contains(v.parts, ev.part) {
			v.parts = append(v.parts, ev.part)
		}
	}
	slices.SortFunc(v.parts, func(a, b *node) int { return slices.Compare(a.ref[:], b.ref[:]) })
	v.pageview = 0
	v.exit = ""
	v.touchEv = nil
	for _, ev := range evs {
		if ev.Name() == "$pageview" {
			v.pageview++
		}
		if v.touchEv == nil && ev.origin != 0 {
			v.touchEv = ev
		}
	}
	if v.touchEv == nil {
		v.touchEv = v.first
	}
	v.consented = v.touchEv.Client.Consented
	if v.consented {
		// A consentless visit keeps only its first page: no exit page.
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].path != 0 && evs[i].Name() == "$pageview" {
				v.exit = e.in.get(evs[i].Path())
				break
			}
		}
	}
	te := v.touchEv
	rh, rp := splitURL(te.Referrer())
	t := e.cfg.Classifier.Classify(channels.Input{PageHost: te.Host(), PageQuery: te.Query(), RefHost: rh, RefPath: rp})
	v.touch = e.touchOf(t)
	// The landing page outlives the day's arena (in person summaries).
	v.landing = e.in.get(te.Path())
}

// recluster recomputes the visits by inactivity of unit n and marks what
// changed.
func (e *Engine) recluster(n *node) {
	n.sortCluster()
	timeout := e.cfg.VisitTimeout.Milliseconds()
	var out []*visit
	start := 0
	for i := 1; i <= len(n.cluster); i++ {
		if i < len(n.cluster) && n.cluster[i].Time-n.cluster[i-1].Time < timeout {
			continue
		}
		evs := n.cluster[start:i]
		v := &visit{owner: n}
		e.fill(v, evs)
		v.id = visitRef(e.cfg.Project, n.ref, v.first.ID)
		out = append(out, v)
		start = i
	}
	e.replaceVisits(n.visits, out)
	n.visits = out
}

// replaceVisits swaps old computations of visits for new ones (same
// owner), marking the partitions and persons that change.
func (e *Engine) replaceVisits(old, new []*visit) {
	byID := make(map[Ref]*visit, len(old))
	for _, o := range old {
		byID[o.id] = o
	}
	for _, v := range new {
		o, ok := byID[v.id]
		if ok {
			delete(byID, v.id)
			e.unindexVisit(o)
			e.unlinkParts(o)
			e.indexVisit(v)
			e.linkParts(v)
			if !o.same(v) {
				e.dirtyVisitDays[e.DayOf(o.start)] = true
				e.visitChanged(v)
			} else if _, ok := e.dirtyVisits[v.id]; ok {
				e.dirtyVisits[v.id] = v // the same row, from the new computation
			}
			if !sameTouch(o.touch, v.touch) || o.start != v.start || !slices.Equal(o.parts, v.parts) {
				e.markParts(o)
				e.markParts(v)
			}
			// The same id: an event row shows the visit's id and channel
			// only, so only a new channel changes rows output before.
			if o.touch.Channel != v.touch.Channel {
				e.markEventDays(min(o.start, v.start), max(o.end, v.end))
			}
			continue
		}
		e.indexVisit(v)
		e.linkParts(v)
		e.visitChanged(v)
		e.markVisitEvents(v)
		e.markParts(v)
	}
	for _, o := range byID {
		e.unindexVisit(o)
		e.unlinkParts(o)
		e.visitGone(o)
		e.markVisitEvents(o)
		e.markParts(o)
	}
}

// visitChanged records that the row of visit v changed (or is new).
func (e *Engine) visitChanged(v *visit) {
	e.dirtyVisits[v.id] = v
	e.dirtyVisitDays[e.DayOf(v.start)] = true
}

// visitGone records that visit o no longer exists.
func (e *Engine) visitGone(o *visit) {
	e.dirtyVisits[o.id] = nil
	e.dirtyVisitDays[e.DayOf(o.start)] = true
}

// linkParts records a visit with the parts that have events in it.
func (e *Engine) linkParts(v *visit) {
	for _, p := range v.parts {
		p.partVisits.add(v)
	}
}

func (e *Engine) unlinkParts(v *visit) {
	for _, p := range v.parts {
		p.partVisits.remove(v)
	}
}

// markParts marks the persons of a visit's parts.
func (e *Engine) markParts(v *visit) {
	for _, p := range v.parts {
		e.markPart(p)
	}
}

// resession recomputes a visit from a sessionId.
func (e *Engine) resession(v *visit) {
	if len(v.members) == 0 {
		if v.first != nil {
			e.unindexVisit(v)
			e.unlinkParts(v)
			e.markParts(v)
			e.visitGone(v)
		}
		delete(e.sessions, v.id)
		return
	}
	slices.SortFunc(v.members, func(a, b *event) int { return a.key().cmp(b.key()) })
	fresh := v.first == nil
	old := *v
	old.parts = slices.Clone(v.parts)
	if !fresh {
		e.unindexVisit(v)
		e.unlinkParts(v)
	}
	e.fill(v, v.members)
	// The owner: the browser of the earliest event with one, else the
	// unit of the earliest event with a unit.
	var owner *node
	for _, ev := range v.members {
		if ev.unit != nil && ev.unit.kind == KindBrowser {
			owner = ev.unit
			break
		}
	}
	if owner == nil {
		for _, ev := range v.members {
			if ev.unit != nil {
				owner = ev.unit
				break
			}
		}
	}
	v.owner = owner
	e.indexVisit(v)
	e.linkParts(v)
	switch {
	case fresh:
		e.visitChanged(v)
		e.markVisitEvents(v)
		e.markParts(v)
		return
	case !old.same(v):
		e.dirtyVisitDays[e.DayOf(old.start)] = true
		e.visitChanged(v)
	}
	if !sameTouch(old.touch, v.touch) || old.start != v.start || !slices.Equal(old.parts, v.parts) {
		e.markParts(&old)
		e.markParts(v)
	}
	// A session visit's id is its session's: an event row shows it and
	// the channel only, so only a new channel (an earlier landing) changes
	// rows output before, not a start that moved. Rewriting the days at
	// every move made a commit's cost grow with the day when a session's
	// events come out of order (tabs sharing a session).
	if old.touch.Channel != v.touch.Channel {
		e.markEventDays(min(old.start, v.start), max(old.end, v.end))
	}
}

func (e *Engine) indexVisit(v *visit) {
	d := e.DayOf(v.start)
	m := e.visitsByDay[d]
	if m == nil {
		m = map[*visit]struct{}{}
		e.visitsByDay[d] = m
	}
	m[v] = struct{}{}
}

func (e *Engine) unindexVisit(v *visit) { e.unindexVisitAt(v, e.DayOf(v.start)) }

func (e *Engine) unindexVisitAt(v *visit, d int32) {
	if m := e.visitsByDay[d]; m != nil {
		delete(m, v)
		if len(m) == 0 {
			delete(e.visitsByDay, d)
		}
	}
}

// markEventDays marks the events partitions of the days from t0 to t1 for
// a full rewrite: rows output before changed.
func (e *Engine) markEventDays(t0, t1 int64) {
	for d := e.DayOf(t0); d <= e.DayOf(t1); d++ {
		if dd := e.days[d]; dd != nil {
			dd.rewrite = true
			e.markEventDay(dd)
		}
	}
}

// markVisitEvents marks the events partitions of a new or vanished
// visit's days for a full rewrite when a row of one of its events was
// output before: that row shows another visit (id, channel). A visit whose
// events were never output changes no stored row: their rows are appended
// with the visit as it is now. Without this, every Flush with a new visit
// in it (nearly all of them) rewrote its whole day.
func (e *Engine) markVisitEvents(v *visit) {
	for _, ev := range v.eventsOf(e) {
		if ev.out {
			e.markEventDays(v.start, v.end)
			return
		}
	}
}

// eventsOf returns the events of a visit, in order.
func (v *visit) eventsOf(e *Engine) []*event {
	if v.session {
		return v.members
	}
	if v.owner == nil {
		return nil
	}
	c := v.owner.cluster
	i, _ := slices.BinarySearchFunc(c, v.start, func(ev *event, t int64) int { return cmp.Compare(ev.Time, t) })
	j := i
	for j < len(c) && c[j].Time <= v.end {
		j++
	}
	return c[i:j]
}

// visitOf returns the visit an event belongs to, or nil.
func (e *Engine) visitOf(ev *event) *visit {
	if !ev.SessionID.IsZero() {
		return e.sessions[ev.SessionID]
	}
	if !ev.clusterable() {
		return nil
	}
	vs := ev.unit.visits
	i, found := slices.BinarySearchFunc(vs, ev.Time, func(v *visit, t int64) int {
		switch {
		case v.end < t:
			return -1
		case v.start > t:
			return 1
		}
		return 0
	})
	if !found || i >= len(vs) {
		return nil
	}
	return vs[i]
}
