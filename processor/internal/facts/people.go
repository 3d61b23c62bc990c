package facts

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mfhq/mf/storage/catalog"
)

// partDay is the activity of one part (a browser's anonymous events, or a
// user's identified events) on one day. It is a commutative fold of the
// events: adding them in any order gives the same value.
type partDay struct {
	first, last               evKey
	page                      evKey
	clientAt                  evKey
	events, pageviews, orders int32
	lastPath                  string
	client                    *Client
	// x holds what most days lack (revenue, matched actions, identify,
	// exposures, orders); nil until the day has one of them.
	x *partDayExtra
}

// partDayExtra is the rarer part of a partDay.
type partDayExtra struct {
	revenue   Money
	identAt   evKey
	traits    string
	hits      []hit
	exposures []exposure
	purchases []int64
}

func (pd *partDay) extra() *partDayExtra {
	if pd.x == nil {
		pd.x = &partDayExtra{}
	}
	return pd.x
}

// partDays are a part's days, by day number: a sorted slice (a part has
// activity on a few days; a map per node would cost more than its days).
type partDays []numDay

type numDay struct {
	num int32
	pd  *partDay
}

func (ds partDays) find(num int32) (int, bool) {
	return slices.BinarySearchFunc(ds, num, func(d numDay, n int32) int { return cmp.Compare(d.num, n) })
}

// get returns the activity of day num, nil when none.
func (ds partDays) get(num int32) *partDay {
	// Days mostly arrive in order: try the last one first.
	if k := len(ds); k > 0 && ds[k-1].num == num {
		return ds[k-1].pd
	}
	if i, ok := ds.find(num); ok {
		return ds[i].pd
	}
	return nil
}

// set records the activity of day num (nil removes it).
func (ds *partDays) set(num int32, pd *partDay) {
	i, ok := ds.find(num)
	switch {
	case ok && pd == nil:
		*ds = slices.Delete(*ds, i, i+1)
	case ok:
		(*ds)[i].pd = pd
	case pd != nil:
		*ds = slices.Insert(*ds, i, numDay{num, pd})
	}
}

// hit is an action matched by an event.
type hit struct {
	action string
	t      int64
}

// exposure is an experiment exposure ($exposure event).
type exposure struct {
	at         evKey
	experiment string
	variant    string
}

func (n *node) addToDay(ev *event, e *Engine) {
	pd := n.days.get(ev.d.num)
	if pd == nil {
		pd = &partDay{}
		n.days.set(ev.d.num, pd)
	}
	pd.add(ev, e)
}

// rebuildDay recomputes the part's activity of one day from the events
// kept (after an event was taken out).
func (n *node) rebuildDay(d *day, e *Engine) {
	if p := personOf(n); p != nil {
		e.actShrink[p] = true // the day may be gone
	}
	n.days.set(d.num, nil)
	for _, ev := range d.events {
		if ev.part == n {
			n.addToDay(ev, e)
		}
	}
}

func (pd *partDay) add(ev *event, e *Engine) {
	k := ev.key()
	if k.earlier(pd.first) {
		pd.first = k
	}
	if k.later(pd.last) {
		pd.last = k
	}
	pd.events++
	name := ev.Name()
	if name == "$pageview" {
		pd.pageviews++
		if ev.path != 0 && k.later(pd.page) {
			// Interned: the day's arena goes when the day is frozen.
			pd.page, pd.lastPath = k, e.in.get(ev.Path())
		}
	}
	if !ev.Client.Server && k.later(pd.clientAt) {
		pd.clientAt, pd.client = k, ev.Client
	}
	if name == "$identify" && (pd.x == nil || k.later(pd.x.identAt)) {
		x := pd.extra()
		x.identAt, x.traits = k, strings.Clone(ev.Properties())
	}
	if ev.HasValue {
		pd.extra().revenue.Add(ev.ValueCurrency(), ev.Value)
	}
	if ev.Purchase {
		pd.orders++
		x := pd.extra()
		x.purchases = append(x.purchases, ev.Time)
	}
	if ev.actions != 0 {
		x := pd.extra()
		for id := range strings.SplitSeq(ev.Actions(), ",") {
			x.hits = append(x.hits, hit{action: e.in.get(id), t: ev.Time})
		}
	}
	if name == "$exposure" {
		p := parseProps(ev.Properties())
		x, _ := p["$experiment"].(string)
		v, _ := p["$variant"].(string)
		if x != "" && v != "" {
			xd := pd.extra()
			xd.exposures = append(xd.exposures, exposure{at: k, experiment: e.in.get(x), variant: e.in.get(v)})
		}
	}
}

// Touch is a person's first or last touch.
type Touch struct {
	// Channel is one of the nine channels, or "none" for a person without
	// a visit (only a server has seen them).
	Channel                           string
	Source, Medium, Campaign, Landing string
	AdPlatform                        string
	At                                int64 // start of the visit, 0 for none
	Visit                             Ref
}

func touchOf(t touchInfo) Touch {
	return Touch{Channel: t.touch.Channel, Source: t.touch.Source, Medium: t.touch.Medium,
		Campaign: t.touch.Campaign, Landing: t.landing, AdPlatform: t.touch.AdPlatform, At: t.at, Visit: t.id}
}

// PersonRow is a row of the people table: a person (a user with the
// browsers they claim) or an anonymous browser nobody claimed.
type PersonRow struct {
	personScalars
	Revenue Money
	// Deleted marks a ref that is no longer a person (a browser claimed by
	// a user); the other fields are zero.
	Deleted bool
}

// personScalars are the comparable fields of a PersonRow.
type personScalars struct {
	Ref Ref
	// UserID is the person's userId; "" for an anonymous browser.
	UserID string
	Known  bool
	// Name is the "name" trait of the latest $identify, else the userId;
	// Email the "email" trait. HasName/HasEmail tell them from null.
	Name, Email       string
	HasName, HasEmail bool
	Stage             string
	FirstSeen         int64
	LastSeen          int64
	Visits            int64
	ActiveDays        int64
	Events            int64
	Pageviews         int64
	Orders            int64
	// Value is the revenue in the reporting currency (for sorting).
	Value                 int64
	FirstTouch, LastTouch Touch
	Country, Region       string
	Device, Browser, OS   string
	Locale                string
	LastPath              string
	Traits                string // JSON object of the latest $identify, "" when none
	Browsers              int64
	SharedBrowser         bool
	FirstPurchase         int64 // 0 when the person never bought
	Intent                bool  // reached an intent goal
}

// personFacts is what segment filters read of a person, beyond the row.
type personFacts struct {
	row       *PersonRow
	acts      map[string][]int64 // action id -> sorted times
	goals     []int64            // times goals (any role) were reached, sorted
	exposures map[string]exposure
	purchases []int64
	// first and last touch, and the client, as the row's cache keeps them.
	first, last touchInfo
	client      *Client
}

// personOf returns the person node that a part's or unit's activity
// counts for: a user itself, a claimed browser's claimer, an unclaimed
// browser itself; nil for a consentless visitor.
func personOf(n *node) *node {
	switch n.kind {
	case KindUser:
		return n
	case KindBrowser:
		if n.claimer != nil {
			return n.claimer
		}
		return n
	}
	return nil
}

// isPerson reports whether n is a person: a user, or a browser nobody
// claims.
func isPerson(n *node) bool {
	return !n.erased && (n.kind == KindUser || (n.kind == KindBrowser && n.claimer == nil))
}

// members returns the nodes of a person: itself and, for a user, the
// browsers it claims (sorted by ref).
func (p *node) members() []*node {
	out := []*node{p}
	if p.kind == KindUser && len(p.claimed) > 0 {
		bs := make([]*node, 0, len(p.claimed))
		for b := range p.claimed {
			bs = append(bs, b)
		}
		slices.SortFunc(bs, func(a, b *node) int { return slices.Compare(a.ref[:], b.ref[:]) })
		out = append(out, bs...)
	}
	return out
}

// reclaim recomputes the claim of browser b: the user with the earliest
// sign-in (time, then event id) on it.
func (e *Engine) reclaim(b *node) {
	var best *node
	var bk evKey
	for u, k := range b.signIns {
		if best == nil || k.cmp(bk) < 0 || (k.cmp(bk) == 0 && slices.Compare(u.ref[:], best.ref[:]) < 0) {
			best, bk = u, k
		}
	}
	if best != b.claimer {
		if old := b.claimer; old != nil {
			delete(old.claimed, b)
			e.dirtyPersons[old] = true
			e.actShrink[old] = true // b's days may leave old's
		}
		b.claimer = best
		if best != nil {
			if best.claimed == nil {
				best.claimed = map[*node]struct{}{}
			}
			best.claimed[b] = struct{}{}
			e.dirtyPersons[best] = true
		}
		e.dirtyPersons[b] = true
		e.dirtyIdentity[b] = true
		// The visits with events of b now count for another person: those
		// in memory are derived again, the cold ones are written again
		// from their rows (ReclaimDays). Visits that went cold between the
		// sign-in and this compute are among the latter (Freeze does not
		// hold a browser's visits for its sign-ins).
		for v := range b.partVisits.all() {
			e.visitChanged(v)
		}
		e.claimMayMove(b)
	}
	// The claim time or the shared flag may have changed.
	b.claimAt = bk.t
	e.dirtyIdentity[b] = true
	// Everyone who signed in on b may have a shared browser now.
	for u := range b.signIns {
		e.dirtyPersons[u] = true
	}
}

// computePerson derives a person's row and the facts segments read.
func (e *Engine) computePerson(p *node) *personFacts {
	row := &PersonRow{}
	row.Ref = p.ref
	f := &personFacts{row: row}
	if p.kind == KindUser {
		row.UserID, row.Known = p.raw, true
	}
	var first, last, page, clientAt, identAt evKey
	var client *Client
	var traits string
	mem := p.members()
	var days map[int32]struct{}
	if len(mem) > 1 {
		days = map[int32]struct{}{}
	} else {
		row.ActiveDays = int64(len(p.days))
	}
	for _, n := range mem {
		for _, nd := range n.days {
			num, pd := nd.num, nd.pd
			if days != nil {
				days[num] = struct{}{}
			}
			if pd.first.earlier(first) {
				first = pd.first
			}
			if pd.last.later(last) {
				last = pd.last
			}
			row.Events += int64(pd.events)
			row.Pageviews += int64(pd.pageviews)
			row.Orders += int64(pd.orders)
			if !pd.page.zero() && pd.page.later(page) {
				page, row.LastPath = pd.page, pd.lastPath
			}
			if pd.client != nil && pd.clientAt.later(clientAt) {
				clientAt, client = pd.clientAt, pd.client
			}
			x := pd.x
			if x == nil {
				continue
			}
			row.Revenue.AddAll(x.revenue)
			if !x.identAt.zero() && x.identAt.later(identAt) {
				identAt, traits = x.identAt, x.traits
			}
			for _, h := range x.hits {
				if f.acts == nil {
					f.acts = map[string][]int64{}
				}
				f.acts[h.action] = append(f.acts[h.action], h.t)
				if a := e.actByID[h.action]; a != nil && a.role != "" {
					f.goals = append(f.goals, h.t)
					if a.role == catalog.RoleIntent {
						row.Intent = true
					}
				}
			}
			for _, xp := range x.exposures {
				if f.exposures == nil {
					f.exposures = map[string]exposure{}
				}
				if o, ok := f.exposures[xp.experiment]; !ok || xp.at.earlier(o.at) {
					f.exposures[xp.experiment] = xp
				}
			}
			f.purchases = append(f.purchases, x.purchases...)
		}
	}
	vs := visitSummary(mem)
	for _, ts := range f.acts {
		slices.Sort(ts)
	}
	slices.Sort(f.goals)
	slices.Sort(f.purchases)
	row.FirstSeen, row.LastSeen = first.t, last.t
	if days != nil {
		row.ActiveDays = int64(len(days))
	}
	row.Visits = vs.count
	row.Value = row.Revenue.Of(e.cfg.ReportingCurrency)
	if len(f.purchases) > 0 {
		row.FirstPurchase = f.purchases[0]
	}
	if vs.count > 0 {
		f.first, f.last = vs.first, vs.last
		if vs.hasOut {
			f.last = vs.lastOut
		}
	} else {
		none := touchInfo{touch: e.noneTouch}
		f.first, f.last = none, none
	}
	row.FirstTouch, row.LastTouch = touchOf(f.first), touchOf(f.last)
	f.client = client
	if client != nil {
		row.Country, row.Region, row.Device = client.Country, client.Region, client.Device
		row.Browser, row.OS, row.Locale = client.Browser, client.OS, client.Locale
	}
	row.Traits = traits
	if traits != "" {
		var m map[string]any
		if json.Unmarshal([]byte(traits), &m) == nil {
			if s, ok := m["name"].(string); ok && s != "" {
				row.Name, row.HasName = s, true
			}
			if s, ok := m["email"].(string); ok && s != "" {
				row.Email, row.HasEmail = s, true
			}
		}
	}
	if !row.HasName && row.Known {
		row.Name, row.HasName = row.UserID, true
	}
	if p.kind == KindUser {
		row.Browsers = int64(len(p.claimed))
		for b := range p.signed {
			if len(b.signIns) > 1 {
				row.SharedBrowser = true
				break
			}
		}
	} else {
		row.Browsers = 1
	}
	switch {
	case row.Orders > 0:
		row.Stage = "customer"
	case row.Known:
		row.Stage = "known"
	case row.Visits >= 2:
		row.Stage = "returning"
	default:
		row.Stage = "visitor"
	}
	return f
}
