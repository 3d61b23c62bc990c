package api

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
)

// The day-partitioned tables (visits, conversions, events) are read for
// the days a request asks for, never for the whole history: each day
// partition is decoded into a chunk of rows on first use and kept in the
// byte-bounded rowCache, keyed by its files and by the people index its
// person numbers were resolved against. A request pins every chunk it
// touched until it ends, so an index it handed out (a vpos) stays valid
// however small the budget; memory across requests is the budget.

// dayParts is the day partitions of one table in a snapshot, numbered
// by ordinal in name order: read a group at a time as requests need them
// (lazy, data_parts.go), or known whole (names and the signature of each
// one's files; hand-built data).
type dayParts struct {
	names, sigs []string
	lazy        *lazyDays
}

// dayPartsOf returns the day partitions of table in sn, none read yet.
func dayPartsOf(sn *rollups.Snapshot, table string) dayParts {
	return dayParts{lazy: newLazyDays(sn, table)}
}

// between returns the ordinals [a, b) of the partitions whose day may hold
// a time in [from, to) in loc: one day of margin on either side, for rows
// written before the project's zone changed.
func (p *dayParts) between(ctx context.Context, from, to time.Time, loc *time.Location) (int, int, error) {
	if !from.Before(to) || p.count() == 0 {
		return 0, 0, nil
	}
	first := from.In(loc).AddDate(0, 0, -1).Format(tables.DayLayout)
	last := to.Add(-time.Millisecond).In(loc).AddDate(0, 0, 1).Format(tables.DayLayout)
	if p.lazy != nil {
		return p.lazy.between(ctx, first, last)
	}
	a := sort.SearchStrings(p.names, first)
	b := sort.SearchStrings(p.names, last)
	if b < len(p.names) && p.names[b] == last {
		b++
	}
	return a, max(a, b), nil
}

// pins are the chunks one request read, by table and ordinal.
type pins struct {
	mu sync.Mutex
	m  map[pinKey]any
}

type pinKey struct {
	table string
	ord   int
}

func (p *pins) get(k pinKey) any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[k]
}

func (p *pins) put(k pinKey, v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[pinKey]any{}
	}
	p.m[k] = v
}

// latestChunk is the newest resolution of a partition's chunk in the
// cache: when the people index changes but the partition's files do
// not, the next resolution copies its rows instead of reading Parquet.
type latestChunk struct {
	sig string
	gen uint64
	key string
}

// chunk returns the chunk of partition ord of table: pinned, cached, or
// built by build (prev is the chunk of the same files resolved against an
// older people index, nil when none is cached).
func (d *projectData) chunk(ctx context.Context, table string, ord int, build func(ctx context.Context, name string, prev any) (any, int64, error)) (any, error) {
	pk := pinKey{table, ord}
	if v := d.req.get(pk); v != nil {
		return v, nil
	}
	parts := d.days[table]
	name, sig, err := parts.at(ctx, ord)
	if err != nil {
		return nil, fmt.Errorf("cannot read the partitions of %s: %w", table, err)
	}
	key := d.pid + "\x00" + table + "/" + name + "\x00" + sig + "\x00" + strconv.FormatUint(d.peopleGen, 10)
	if v, ok := d.rows.get(key, d.req); ok {
		d.req.put(pk, v)
		return v, nil
	}
	part := table + "/" + name
	d.pc.chunkMu.Lock()
	old := d.pc.latest[part]
	d.pc.chunkMu.Unlock()
	var prev any
	if old.key != "" && old.sig == sig && old.gen < d.peopleGen {
		prev, _ = d.rows.peek(old.key)
	}
	v, size, err := build(ctx, name, prev)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", part, err)
	}
	d.rows.put(key, v, size, d.req)
	d.pc.chunkMu.Lock()
	if cur := d.pc.latest[part]; cur.key == "" || cur.gen <= d.peopleGen {
		if cur.key != "" && cur.key != key {
			d.rows.remove(cur.key)
		}
		d.pc.latest[part] = latestChunk{sig: sig, gen: d.peopleGen, key: key}
	}
	d.pc.chunkMu.Unlock()
	d.req.put(pk, v)
	return v, nil
}

// prefetch reads the chunks [a, b) of a table with load, as many at a
// time as there are processors, so that a window's first read decodes
// its days in parallel; the caller then finds them pinned.
func (d *projectData) prefetch(ctx context.Context, a, b int, load func(context.Context, int) error) error {
	if b <= a {
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), b-a)
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var first error
			for ord := range next {
				if first == nil {
					first = load(ctx, ord)
				}
			}
			errs <- first
		}()
	}
	for ord := a; ord < b; ord++ {
		next <- ord
	}
	close(next)
	var err error
	for range workers {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// scanPart decodes partition name of table with decode.
func (d *projectData) scanPart(ctx context.Context, table, name string, cols []string, decode func(arrow.Record) error) error {
	if d.snap == nil {
		return nil
	}
	// Uncached: the chunk is what is kept, not the columns it came from.
	return d.snap.Scan(ctx, table, rollups.ScanOptions{Partitions: []string{name}, Columns: cols, Uncached: true}, func(b rollups.Batch) error {
		return decode(b.Record)
	})
}

// ---- visits ----

// visitChunk is the visits of one day partition, sorted by start and id,
// with their person numbers resolved.
type visitChunk struct {
	rows   []visitRow
	shared int64 // bytes of the values its rows share (places, sources)
	maxEnd int64 // latest end of its visits
	// pv and consPV are the pageviews of its visits, and of the consented
	// ones: a window that holds the whole partition adds them at once.
	pv, consPV int64
	chans      map[string]int // visits by channel
	idOnce     sync.Once
	byID       []int32 // row indexes sorted by visit id, built on first use
}

// vpos is a visit's position: its partition ordinal and row, valid for
// the request that got it.
type vpos int64

func makeVpos(ord, row int) vpos { return vpos(int64(ord)<<32 | int64(row)) }
func (p vpos) ord() int          { return int(p >> 32) }
func (p vpos) row() int          { return int(p & 0xffffffff) }

func (d *projectData) visitChunk(ctx context.Context, ord int) (*visitChunk, error) {
	v, err := d.chunk(ctx, tables.Visits, ord, func(ctx context.Context, name string, prev any) (any, int64, error) {
		var rows []visitRow
		var shared int64 // bytes of the values the rows share
		if p, ok := prev.(*visitChunk); ok {
			rows, shared = slices.Clone(p.rows), p.shared
		} else {
			pc := &partCache{}
			if err := d.scanPart(ctx, tables.Visits, name, visitColumns, func(rec arrow.Record) error { return decodeVisits(pc, rec) }); err != nil {
				return nil, 0, err
			}
			rows = tight(pc.visits)
			sortVisits(rows)
			if pc.places != nil {
				shared = pc.places.bytes + pc.sources.bytes
			}
		}
		c := &visitChunk{rows: rows, shared: shared, chans: map[string]int{}}
		size := int64(cap(rows))*int64(unsafe.Sizeof(visitRow{})) + int64(len(rows))*4 + shared
		for i := range rows {
			v := &rows[i]
			v.Person = noPerson
			if v.Consented {
				v.Person = d.personOf(v.PersonRef)
			}
			c.maxEnd = max(c.maxEnd, v.End)
			c.pv += int64(v.Pageviews)
			c.chans[v.Channel]++
			if v.Consented {
				c.consPV += int64(v.Pageviews)
			}
			size += v.stringBytes()
		}
		size += int64(len(c.chans)) * 64
		return c, size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*visitChunk), nil
}

// eachVisit calls fn with every visit starting in [from, to), partition by
// partition (in start and id order within each).
func (d *projectData) eachVisit(ctx context.Context, from, to time.Time, fn func(p vpos, v *visitRow)) error {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	parts := d.days[tables.Visits]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return err
	}
	if err := d.prefetch(ctx, a, b, func(ctx context.Context, ord int) error { _, err := d.visitChunk(ctx, ord); return err }); err != nil {
		return err
	}
	for ord := a; ord < b; ord++ {
		c, err := d.visitChunk(ctx, ord)
		if err != nil {
			return err
		}
		k, _ := slices.BinarySearchFunc(c.rows, lo, func(v visitRow, t int64) int { return cmp.Compare(v.Start, t) })
		for ; k < len(c.rows) && c.rows[k].Start < hi; k++ {
			fn(makeVpos(ord, k), &c.rows[k])
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// visitTotals returns the visits starting in [from, to) and their
// pageviews, all and consented: the totals of the day partitions the
// window holds whole, the rows of the others. perChannel, when not nil,
// is called with visits by channel (a channel may come several times).
func (d *projectData) visitTotals(ctx context.Context, from, to time.Time, perChannel func(ch string, visits int)) (visits int, pv, consPV int64, err error) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	parts := d.days[tables.Visits]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := d.prefetch(ctx, a, b, func(ctx context.Context, ord int) error { _, err := d.visitChunk(ctx, ord); return err }); err != nil {
		return 0, 0, 0, err
	}
	for ord := a; ord < b; ord++ {
		c, err := d.visitChunk(ctx, ord)
		if err != nil {
			return 0, 0, 0, err
		}
		if n := len(c.rows); n == 0 || c.rows[0].Start >= hi || c.rows[n-1].Start < lo {
			continue
		} else if c.rows[0].Start >= lo && c.rows[n-1].Start < hi {
			visits, pv, consPV = visits+n, pv+c.pv, consPV+c.consPV
			if perChannel != nil {
				for ch, k := range c.chans {
					perChannel(ch, k)
				}
			}
			continue
		}
		k, _ := slices.BinarySearchFunc(c.rows, lo, func(v visitRow, t int64) int { return cmp.Compare(v.Start, t) })
		for ; k < len(c.rows) && c.rows[k].Start < hi; k++ {
			v := &c.rows[k]
			visits++
			if perChannel != nil {
				perChannel(v.Channel, 1)
			}
			pv += int64(v.Pageviews)
			if v.Consented {
				consPV += int64(v.Pageviews)
			}
		}
	}
	return visits, pv, consPV, ctx.Err()
}

// visitAt returns the visit at p (from eachVisit or a visitFinder of this
// request).
func (d *projectData) visitAt(ctx context.Context, p vpos) (*visitRow, error) {
	c, err := d.visitChunk(ctx, p.ord())
	if err != nil {
		return nil, err
	}
	return &c.rows[p.row()], nil
}

// visitFinder finds visits by id among those starting in a window.
type visitFinder struct {
	d      *projectData
	a, b   int
	names  []string // of partitions a..b-1
	chunks []*visitChunk
	reach  []int64 // reach[i]: latest end over chunks a..a+i
	lo, hi int64
}

// visitFinder reads the visits starting in [from, to) for lookups by id.
func (d *projectData) visitFinder(ctx context.Context, from, to time.Time) (*visitFinder, error) {
	parts := d.days[tables.Visits]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return nil, err
	}
	names, err := parts.span(ctx, a, b)
	if err != nil {
		return nil, err
	}
	f := &visitFinder{d: d, a: a, b: b, names: names, lo: from.UnixMilli(), hi: to.UnixMilli()}
	if err := d.prefetch(ctx, a, b, func(ctx context.Context, ord int) error { _, err := d.visitChunk(ctx, ord); return err }); err != nil {
		return nil, err
	}
	var reach int64
	for ord := a; ord < b; ord++ {
		c, err := d.visitChunk(ctx, ord)
		if err != nil {
			return nil, err
		}
		reach = max(reach, c.maxEnd)
		f.chunks = append(f.chunks, c)
		f.reach = append(f.reach, reach)
	}
	return f, nil
}

// find returns the position of the visit with this id that holds time t
// (an event of the visit), false when no visit of the window has it.
// Partitions are searched from t's day backwards while an earlier one
// still has a visit open at t.
func (f *visitFinder) find(id ref, t int64) (vpos, bool) {
	if f == nil || id == (ref{}) {
		return 0, false
	}
	top := len(f.chunks) - 1
	if top >= 0 {
		day := time.UnixMilli(t).In(f.d.Loc).AddDate(0, 0, 1).Format(tables.DayLayout)
		if i := sort.SearchStrings(f.names, day); i < len(f.chunks) && f.names[i] == day {
			top = i
		} else {
			top = i - 1
		}
	}
	for i := top; i >= 0 && f.reach[i] >= t; i-- {
		c := f.chunks[i]
		c.idOnce.Do(func() {
			c.byID = make([]int32, len(c.rows))
			for k := range c.byID {
				c.byID[k] = int32(k)
			}
			slices.SortFunc(c.byID, func(x, y int32) int { return compareRef(c.rows[x].ID, c.rows[y].ID) })
		})
		k, ok := slices.BinarySearchFunc(c.byID, id, func(x int32, id ref) int { return compareRef(c.rows[x].ID, id) })
		if !ok {
			continue
		}
		r := int(c.byID[k])
		if s := c.rows[r].Start; s < f.lo || s >= f.hi {
			return 0, false
		}
		return makeVpos(f.a+i, r), true
	}
	return 0, false
}

// row returns the visit at p (a position find returned).
func (f *visitFinder) row(p vpos) *visitRow { return &f.chunks[p.ord()-f.a].rows[p.row()] }

// Visits returns the visits starting in [from, to), sorted by start and id
// (a copy).
func (d *projectData) Visits(ctx context.Context, from, to time.Time) ([]visitRow, error) {
	var out []visitRow
	err := d.eachVisit(ctx, from, to, func(_ vpos, v *visitRow) { out = append(out, *v) })
	sortVisits(out)
	return out, err
}

// ---- conversions ----

// convChunk is the conversions of one day partition, sorted by time,
// event id and action, with their person numbers resolved.
type convChunk struct {
	rows     []conversionRow
	actOnce  sync.Once
	byAction map[string][]int32 // row indexes per action, built on first use
}

func (d *projectData) convChunk(ctx context.Context, ord int) (*convChunk, error) {
	v, err := d.chunk(ctx, tables.Conversions, ord, func(ctx context.Context, name string, prev any) (any, int64, error) {
		var rows []conversionRow
		if p, ok := prev.(*convChunk); ok {
			rows = slices.Clone(p.rows)
		} else {
			pc := &partCache{}
			if err := d.scanPart(ctx, tables.Conversions, name, conversionColumns, func(rec arrow.Record) error { return decodeConversions(pc, rec) }); err != nil {
				return nil, 0, err
			}
			rows = tight(pc.convs)
			slices.SortFunc(rows, compareConversions)
		}
		size := int64(cap(rows))*int64(unsafe.Sizeof(conversionRow{})) + int64(len(rows))*4
		for i := range rows {
			cv := &rows[i]
			cv.Person = noPerson
			if cv.Consented {
				cv.Person = d.personOf(cv.Owner)
			}
			size += int64(len(cv.Action) + len(cv.Role) + len(cv.Currency))
		}
		return &convChunk{rows: rows}, size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*convChunk), nil
}

// convRows is conversions in pieces (one per day partition), in order:
// their concatenation is sorted by time, event id and action.
type convRows [][]conversionRow

// Len is the number of conversions.
func (c convRows) Len() int {
	n := 0
	for _, s := range c {
		n += len(s)
	}
	return n
}

// ConversionRows returns the conversions with a time in [from, to),
// sorted by time, event id and action, without copying them (shared: do
// not modify).
func (d *projectData) ConversionRows(ctx context.Context, from, to time.Time) (convRows, error) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	parts := d.days[tables.Conversions]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return nil, err
	}
	if err := d.prefetch(ctx, a, b, func(ctx context.Context, ord int) error { _, err := d.convChunk(ctx, ord); return err }); err != nil {
		return nil, err
	}
	var out convRows
	for ord := a; ord < b; ord++ {
		c, err := d.convChunk(ctx, ord)
		if err != nil {
			return nil, err
		}
		i, _ := slices.BinarySearchFunc(c.rows, lo, func(r conversionRow, t int64) int { return cmp.Compare(r.Time, t) })
		j, _ := slices.BinarySearchFunc(c.rows, hi, func(r conversionRow, t int64) int { return cmp.Compare(r.Time, t) })
		if j <= i {
			continue
		}
		if n := len(out); n > 0 && compareConversions(out[n-1][len(out[n-1])-1], c.rows[i]) > 0 {
			// Partitions written in another zone overlap: one sorted copy.
			all := slices.Concat(append(out, c.rows[i:j])...)
			slices.SortFunc(all, compareConversions)
			out = convRows{all}
			continue
		}
		out = append(out, c.rows[i:j:j])
	}
	return out, ctx.Err()
}

// Conversions returns the conversions with a time in [from, to), sorted by
// time, event id and action (a copy).
func (d *projectData) Conversions(ctx context.Context, from, to time.Time) ([]conversionRow, error) {
	rows, err := d.ConversionRows(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return slices.Concat(rows...), nil
}

// ConversionsOf calls fn with every conversion of the action with a time
// in [from, to), partition by partition (in time order within each).
func (d *projectData) ConversionsOf(ctx context.Context, action string, from, to time.Time, fn func(*conversionRow)) error {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	parts := d.days[tables.Conversions]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return err
	}
	for ord := a; ord < b; ord++ {
		c, err := d.convChunk(ctx, ord)
		if err != nil {
			return err
		}
		c.actOnce.Do(func() {
			c.byAction = map[string][]int32{}
			for i := range c.rows {
				c.byAction[c.rows[i].Action] = append(c.byAction[c.rows[i].Action], int32(i))
			}
		})
		idx := c.byAction[action]
		i, _ := slices.BinarySearchFunc(idx, lo, func(k int32, t int64) int { return cmp.Compare(c.rows[k].Time, t) })
		for ; i < len(idx) && c.rows[idx[i]].Time < hi; i++ {
			fn(&c.rows[idx[i]])
		}
	}
	return ctx.Err()
}

// ---- events: purchases and activity ----

// factChunk is what the reports need of one events partition without
// reading its events: its first and last time, its purchases and the
// people with a consented event in it.
type factChunk struct {
	first, last int64 // 0 when the partition is empty
	buys        []purchaseRow
	seenParts   []seenPart // the parts with a consented event, as decoded
	act         dayActivity
}

func (d *projectData) factChunk(ctx context.Context, ord int) (*factChunk, error) {
	v, err := d.chunk(ctx, tables.Events, ord, func(ctx context.Context, name string, prev any) (any, int64, error) {
		var pc *partCache
		if p, ok := prev.(*factChunk); ok {
			pc = p.unresolved()
		} else {
			pc = &partCache{}
			decode := decodeEventFacts(d.pid)
			if err := d.scanPart(ctx, tables.Events, name, eventFactColumns, func(rec arrow.Record) error { return decode(pc, rec) }); err != nil {
				return nil, 0, err
			}
		}
		c := d.resolveFacts(pc)
		size := int64(unsafe.Sizeof(factChunk{})) + int64(cap(c.buys))*int64(unsafe.Sizeof(purchaseRow{})) +
			int64(cap(c.act.people))*4 + int64(cap(c.act.first)+cap(c.act.last))*8 + int64(cap(pc.seen))*int64(unsafe.Sizeof(seenPart{}))
		for i := range c.buys {
			size += int64(len(c.buys[i].UserID) + len(c.buys[i].Currency))
		}
		return c, size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*factChunk), nil
}

// unresolved returns the facts of c as decoded (for a new people index).
func (c *factChunk) unresolved() *partCache {
	return &partCache{first: c.first, lastT: c.last, buys: slices.Clone(c.buys), seen: c.seenParts}
}

// resolveFacts resolves the persons of decoded events facts.
func (d *projectData) resolveFacts(pc *partCache) *factChunk {
	c := &factChunk{first: pc.first, last: pc.lastT, buys: tight(pc.buys), seenParts: tight(pc.seen)}
	slices.SortFunc(c.buys, func(a, b purchaseRow) int {
		if x := cmp.Compare(a.Time, b.Time); x != 0 {
			return x
		}
		return compareRef(a.EventID, b.EventID)
	})
	for i := range c.buys {
		b := &c.buys[i]
		b.Person = noPerson
		if !b.Consented {
			continue
		}
		if b.UserID != "" {
			if p, ok := d.Person(UserRef(d.pid, b.UserID)); ok {
				b.Person = p
			}
			continue
		}
		b.Person = d.personOf(b.Unit)
	}
	c.act = d.dayActivityOf(pc)
	c.act.people, c.act.first, c.act.last = tight(c.act.people), tight(c.act.first), tight(c.act.last)
	return c
}

// Purchases returns the purchases with a time in [from, to), sorted by
// time and event id (a copy).
func (d *projectData) Purchases(ctx context.Context, from, to time.Time) ([]purchaseRow, error) {
	spans, err := d.purchaseSpans(ctx, from, to)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, s := range spans {
		n += len(s)
	}
	out := make([]purchaseRow, 0, n)
	for _, s := range spans {
		out = append(out, s...)
	}
	cmpBuy := func(a, b purchaseRow) int {
		if x := cmp.Compare(a.Time, b.Time); x != 0 {
			return x
		}
		return compareRef(a.EventID, b.EventID)
	}
	if !slices.IsSortedFunc(out, cmpBuy) {
		slices.SortFunc(out, cmpBuy)
	}
	return out, ctx.Err()
}

// purchaseSpans returns the purchases with a time in [from, to) as they
// are in the day cache (each span sorted; shared: do not modify), for
// callers that do not need them in one order.
func (d *projectData) purchaseSpans(ctx context.Context, from, to time.Time) ([][]purchaseRow, error) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	parts := d.days[tables.Events]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return nil, err
	}
	var out [][]purchaseRow
	for ord := a; ord < b; ord++ {
		c, err := d.factChunk(ctx, ord)
		if err != nil {
			return nil, err
		}
		i, _ := slices.BinarySearchFunc(c.buys, lo, func(r purchaseRow, t int64) int { return cmp.Compare(r.Time, t) })
		j, _ := slices.BinarySearchFunc(c.buys, hi, func(r purchaseRow, t int64) int { return cmp.Compare(r.Time, t) })
		if j > i {
			out = append(out, c.buys[i:j])
		}
	}
	return out, ctx.Err()
}

// activityIn returns the per-partition people index of the events
// partitions that may hold a time in [from, to).
func (d *projectData) activityIn(ctx context.Context, from, to time.Time) ([]*dayActivity, error) {
	parts := d.days[tables.Events]
	a, b, err := parts.between(ctx, from, to, d.Loc)
	if err != nil {
		return nil, err
	}
	if err := d.prefetch(ctx, a, b, func(ctx context.Context, ord int) error { _, err := d.factChunk(ctx, ord); return err }); err != nil {
		return nil, err
	}
	out := make([]*dayActivity, 0, b-a)
	for ord := a; ord < b; ord++ {
		c, err := d.factChunk(ctx, ord)
		if err != nil {
			return nil, err
		}
		out = append(out, &c.act)
	}
	return out, nil
}

// firstEvent finds the earliest event time: in the first events
// partition, or the second one when rows were written before a zone
// change.
func (d *projectData) firstEvent(ctx context.Context) error {
	parts := d.days[tables.Events]
	n := parts.count()
	for ord := 0; ord < min(n, 2); ord++ {
		c, err := d.factChunk(ctx, ord)
		if err != nil {
			return err
		}
		if c.first != 0 && (!d.hasFirst || c.first < d.first) {
			d.first, d.hasFirst = c.first, true
		}
	}
	return nil
}
