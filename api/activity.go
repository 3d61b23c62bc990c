package api

import (
	"cmp"
	"context"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/mfhq/mf/rollups/tables"
)

// Who is active, once for every endpoint (docs/reporting-api.md,
// "Numbers"): a person is active in a window when they had an event in it
// (any event that counts for them: their part's, consented; consentless
// events have no person). The data layer answers it from a per-day index
// of the people seen in each events partition (with their first and last
// time in it), built once per snapshot; only a window that cuts through a
// day (1h, 24h, or a zone change) reads events.

// bitset is a set of person indexes.
type bitset []uint64

func newBitset(n int) bitset      { return make(bitset, (n+63)/64) }
func (b bitset) has(i int32) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }

// add adds i and reports whether it was new.
func (b bitset) add(i int32) bool {
	w, m := i>>6, uint64(1)<<(uint(i)&63)
	if b[w]&m != 0 {
		return false
	}
	b[w] |= m
	return true
}

func (b bitset) del(i int32) { b[i>>6] &^= 1 << (uint(i) & 63) }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// each calls fn with every member, in ascending order.
func (b bitset) each(fn func(int32)) {
	for i, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			fn(int32(i*64 + t))
			w &= w - 1
		}
	}
}

// or adds every member of o.
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// seenPart is a part (a person or browser ref) seen in an events
// partition, with its first and last event time there (Unix ms).
type seenPart struct {
	part        ref
	first, last int64
}

// dayActivity is the people with a consented event in one events
// partition: sorted person indexes, with their first and last time in it.
type dayActivity struct {
	lo, hi      int64 // earliest and latest event time of the partition
	people      []int32
	first, last []int64
}

// dataShared is what the copies of one projectData share: indexes built
// lazily on first use and the per-window cache of active people.
type dataShared struct {
	segOnce  sync.Once
	segments map[string]bitset // segment ref -> members

	mu     sync.Mutex
	active map[string]*activeSet
}

// activeSet is the people active per bucket and over the whole window.
type activeSet struct {
	counts []int // distinct people per bucket
	total  bitset
}

// maxActiveCache bounds the cached windows per snapshot.
const maxActiveCache = 32

// dayActivityOf is the people index of decoded events facts: the
// persons of its parts, sorted, with their first and last time in it.
func (d *projectData) dayActivityOf(pc *partCache) dayActivity {
	type hit struct {
		p           int32
		first, last int64
	}
	var hits []hit
	for _, sp := range pc.seen {
		if p, ok := d.Person(sp.part); ok {
			hits = append(hits, hit{p, sp.first, sp.last})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(a.p, b.p) })
	da := dayActivity{lo: pc.first, hi: pc.lastT}
	for _, h := range hits {
		if n := len(da.people); n > 0 && da.people[n-1] == h.p {
			da.first[n-1] = min(da.first[n-1], h.first)
			da.last[n-1] = max(da.last[n-1], h.last)
			continue
		}
		da.people = append(da.people, h.p)
		da.first = append(da.first, h.first)
		da.last = append(da.last, h.last)
	}
	return da
}

// subDay is the longest window whose activity is read from the events
// rather than the day index.
const subDay = 48 * time.Hour

// Active returns the people active in each bucket of bounds (bucket i is
// [bounds[i], bounds[i+1])) and over the whole span: people with a
// consented event in it. The result is cached per snapshot and shared: do
// not modify it.
func (d *projectData) Active(ctx context.Context, bounds []time.Time) (*activeSet, error) {
	var kb strings.Builder
	for _, t := range bounds {
		kb.WriteString(strconv.FormatInt(t.UnixMilli(), 36))
		kb.WriteByte(',')
	}
	key := kb.String()
	s := d.shared
	s.mu.Lock()
	a := s.active[key]
	s.mu.Unlock()
	if a != nil {
		return a, nil
	}
	a, err := d.computeActive(ctx, bounds)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.active == nil || len(s.active) >= maxActiveCache {
		s.active = map[string]*activeSet{}
	}
	s.active[key] = a
	s.mu.Unlock()
	return a, nil
}

// ActiveIn returns the people active in [from, to) (shared: do not
// modify).
func (d *projectData) ActiveIn(ctx context.Context, from, to time.Time) (bitset, error) {
	a, err := d.Active(ctx, []time.Time{from, to})
	if err != nil {
		return nil, err
	}
	return a.total, nil
}

func (d *projectData) computeActive(ctx context.Context, bounds []time.Time) (*activeSet, error) {
	n := len(d.People)
	nb := len(bounds) - 1
	out := &activeSet{counts: make([]int, max(nb, 0)), total: newBitset(n)}
	if nb <= 0 || n == 0 {
		return out, nil
	}
	from, to := bounds[0], bounds[nb]
	if to.Sub(from) <= subDay {
		// Short windows: one pass over their events' people, in any
		// order: a bucket's set per bucket.
		ms := make([]int64, len(bounds))
		for i, t := range bounds {
			ms[i] = t.UnixMilli()
		}
		seen := make([]bitset, nb)
		for b := range seen {
			seen[b] = newBitset(n)
		}
		err := d.eventPersons(ctx, from, to, func(t int64, p int32) bool {
			b, found := slices.BinarySearch(ms, t)
			if !found {
				b-- // ms[b] < t < ms[b+1]
			}
			out.total.add(p)
			seen[b].add(p)
			return true
		})
		for b := range seen {
			out.counts[b] = seen[b].count()
		}
		return out, err
	}
	days, err := d.activityIn(ctx, from, to)
	if err != nil {
		return nil, err
	}
	cur := newBitset(n)
	for b := 0; b < nb; b++ {
		lo, hi := bounds[b].UnixMilli(), bounds[b+1].UnixMilli()
		clear(cur)
		var unsure bitset
		for _, da := range days {
			if da.hi < lo || da.lo >= hi {
				continue
			}
			if da.lo >= lo && da.hi < hi {
				for _, p := range da.people {
					cur.add(p)
				}
				continue
			}
			for k, p := range da.people {
				f, l := da.first[k], da.last[k]
				switch {
				case (f >= lo && f < hi) || (l >= lo && l < hi):
					cur.add(p)
				case f < lo && l >= hi:
					if unsure == nil {
						unsure = newBitset(n)
					}
					unsure.add(p)
				}
			}
		}
		if unsure != nil {
			// Seen before and after the bucket inside one partition:
			// look for an event in the bucket.
			left := 0
			unsure.each(func(p int32) {
				if cur.has(p) {
					unsure.del(p)
				} else {
					left++
				}
			})
			if left > 0 {
				err := d.eventPersons(ctx, bounds[b], bounds[b+1], func(_ int64, p int32) bool {
					if unsure.has(p) {
						unsure.del(p)
						cur.add(p)
						left--
					}
					return left > 0
				})
				if err != nil {
					return nil, err
				}
			}
		}
		out.counts[b] = cur.count()
		out.total.or(cur)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Segment returns the members of the segment with this ref (the
// processor's segment_members table of the snapshot), empty for a segment
// without members. Built for every segment on first use; shared.
func (d *projectData) Segment(segRef string) bitset {
	s := d.shared
	s.segOnce.Do(func() {
		s.segments = map[string]bitset{}
		for _, pc := range d.memberParts {
			for _, m := range pc.members {
				set := s.segments[m.segment]
				if set == nil {
					set = newBitset(len(d.People))
					s.segments[m.segment] = set
				}
				if j, ok := d.peoplePre.find(d.peopleRefs, m.person); ok {
					set.add(int32(j))
				}
			}
		}
	})
	if m := s.segments[segRef]; m != nil {
		return m
	}
	return newBitset(len(d.People))
}

// memberRow is a row of segment_members.
type memberRow struct {
	segment string
	person  ref
}

var memberColumns = []string{tables.ColSegment, tables.ColPerson}

func decodeMembers(pc *partCache, rec arrow.Record) error {
	c, err := tables.ColumnsOf(rec, memberColumns)
	if err != nil {
		return err
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		pc.members = append(pc.members, memberRow{tables.StrAt(c[0], i), tables.RefAt(c[1], i)})
	}
	return nil
}

// eventFactColumns are the columns decodeEventFacts reads.
var eventFactColumns = []string{tables.ColTime, tables.ColID, tables.ColUnit, tables.ColUserID,
	tables.ColConsented, tables.ColPurchase, tables.ColValue, tables.ColValueCurrency, tables.ColVisit,
	tables.ColSessionID, tables.ColChannel}

// decodeEventFacts returns the decoder of an events partition of project:
// it keeps the earliest and latest time, the purchases, and the parts seen
// with consent (the userId's person, else the unit) with their first and
// last time.
func decodeEventFacts(project string) func(pc *partCache, rec arrow.Record) error {
	return func(pc *partCache, rec arrow.Record) error {
		c, err := tables.ColumnsOf(rec, eventFactColumns)
		if err != nil {
			return err
		}
		if pc.seenAt == nil {
			pc.seenAt = map[ref]int{}
		}
		users := map[string]ref{}
		n := int(rec.NumRows())
		for i := 0; i < n; i++ {
			t := tables.TimeAt(c[0], i)
			if pc.first == 0 || t < pc.first {
				pc.first = t
			}
			pc.lastT = max(pc.lastT, t)
			consented := tables.BoolAt(c[4], i)
			if consented {
				part := tables.RefAt(c[2], i)
				if u := tables.StrAt(c[3], i); u != "" {
					r, ok := users[u]
					if !ok {
						r = UserRef(project, u)
						users[u] = r
					}
					part = r
				}
				if part != (ref{}) {
					if k, ok := pc.seenAt[part]; ok {
						sp := &pc.seen[k]
						sp.first, sp.last = min(sp.first, t), max(sp.last, t)
					} else {
						pc.seenAt[part] = len(pc.seen)
						pc.seen = append(pc.seen, seenPart{part, t, t})
					}
				}
			}
			if !tables.BoolAt(c[5], i) {
				continue
			}
			b := purchaseRow{Time: t, EventID: tables.RefAt(c[1], i), Unit: tables.RefAt(c[2], i), UserID: strings.Clone(tables.StrAt(c[3], i)),
				Consented: consented, Currency: strings.Clone(tables.StrAt(c[7], i)), Visit: tables.RefAt(c[8], i)}
			b.Value, b.HasValue = tables.Int64At(c[6], i)
			if b.Visit == (ref{}) && !c[10].IsNull(i) {
				b.Visit = tables.RefAt(c[9], i)
			}
			pc.buys = append(pc.buys, b)
		}
		return nil
	}
}

// Buyers returns the people with a consented purchase in [from, to) (a
// purchase is an event stored with purchase true; see purchaseRow).
func (d *projectData) Buyers(ctx context.Context, from, to time.Time) (bitset, error) {
	spans, err := d.purchaseSpans(ctx, from, to) // a set: any order
	if err != nil {
		return nil, err
	}
	out := newBitset(len(d.People))
	for _, ps := range spans {
		for i := range ps {
			if p := ps[i].Person; p >= 0 {
				out.add(p)
			}
		}
	}
	return out, nil
}
