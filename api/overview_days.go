package api

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/catalog"
)

// The overview from day rollups (docs/reporting-data.md, "Day rollups").
//
// Without filters, in a project that collects with consent, over windows
// of whole days, the overview needs per day only: the visits and their
// pageviews (the visits table's day partition, three columns), the
// purchases' amounts per currency (the events table's day partition, four
// columns) and who was active, known, new and a buyer (the processor's
// activity table: sets of person numbers). So it reads no person and no
// event but those, and unions of the days' sets count the people of a
// window exactly. Each day's figures are kept in the row cache by the
// files they were read from. A window any of whose days (or the day on
// either side) was cut in another zone than the project's, or whose
// activity rows are missing, is answered by the full path (overview.go),
// as is every other overview.

// dayRollup is what the overview reads of one day.
type dayRollup struct {
	// usable: the day's rows lie in the day as the project's zone cuts
	// it, and its activity rows say so (or it has no rows at all).
	usable bool
	visits int
	pv     int64
	consPV int64
	// The purchases: amount (micro-units) and count per currency.
	amounts map[string]int64
	counts  map[string]int
	// sets of person numbers, by kind (facts.ActivityKinds order: people,
	// known, new, buyers); empty sets are nil.
	sets [4]*roaring.Bitmap
}

// The activity kinds, as the processor writes them (the table's kind
// column).
var activityKinds = [4]string{"people", "known", "new", "buyers"}

const (
	setPeople = iota
	setKnown
	setNew
	setBuyers
)

func (r *dayRollup) size() int64 {
	n := int64(unsafe.Sizeof(*r)) + int64(len(r.amounts)+len(r.counts))*48
	for _, s := range r.sets {
		if s != nil {
			n += int64(s.GetSizeInBytes())
		}
	}
	return n
}

// dayData returns project p's snapshot for the day rollups: its
// day-partitioned tables and first event, without the person index (the
// full data when a request already loaded this snapshot).
func (r *Reporting) dayData(ctx context.Context, p *catalog.Project) (*projectData, error) {
	loc := p.Location()
	sn, err := r.deps.Reader.SnapshotRoot(ctx, p.ID)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
	}
	pc := r.tables.project(p.ID)
	pc.mu.Lock()
	last := pc.last
	pc.mu.Unlock()
	if last != nil && last.snap != nil && last.Generation == sn.Generation() && last.Version == sn.Version() {
		out := *last
		out.Project, out.Loc, out.req = p, loc, &pins{}
		return &out, nil
	}
	d := &projectData{Project: p, Loc: loc, Version: sn.Version(), Generation: sn.Generation(), pid: p.ID,
		rows: r.rows, pc: pc, req: &pins{}, shared: &dataShared{}}
	if sn.Version() == 0 {
		return d, nil
	}
	d.snap = sn
	d.days = map[string]dayParts{}
	for _, t := range []string{tables.Visits, tables.Events, tables.Activity} {
		d.days[t] = dayPartsOf(sn, t)
	}
	if err := d.firstEventTime(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// firstEventTime finds the earliest event time as firstEvent does (the
// first two events partitions), from their time column alone.
func (d *projectData) firstEventTime(ctx context.Context) error {
	parts := d.days[tables.Events]
	for ord := range min(parts.count(), 2) {
		name, sig, err := parts.at(ctx, ord)
		if err != nil {
			return fmt.Errorf("cannot read the partitions of %s: %w", tables.Events, err)
		}
		key := d.pid + "\x00first/" + name + "\x00" + sig
		first, ok := d.rows.get(key, d.req)
		if !ok {
			t := int64(0)
			err := d.snap.Scan(ctx, tables.Events, rollups.ScanOptions{Partitions: []string{name}, Columns: []string{tables.ColTime}, Uncached: true},
				func(b rollups.Batch) error {
					times, ok := b.Record.Column(0).(*array.Timestamp)
					if !ok {
						return fmt.Errorf("column %s is %s, not a timestamp", tables.ColTime, b.Record.Column(0).DataType())
					}
					for i := range times.Len() {
						if v := int64(times.Value(i)); t == 0 || v < t {
							t = v
						}
					}
					return nil
				})
			if err != nil {
				return fmt.Errorf("cannot read the first events of %s: %w", name, err)
			}
			first = t
			d.rows.put(key, t, 64, d.req)
		}
		if t := first.(int64); t != 0 && (!d.hasFirst || t < d.first) {
			d.first, d.hasFirst = t, true
		}
	}
	return nil
}

// dayRollupOf returns the rollup of day (a partition name), from the
// cache or read.
func (d *projectData) dayRollupOf(ctx context.Context, day string) (*dayRollup, error) {
	start, err := time.ParseInLocation(tables.DayLayout, day, d.Loc)
	if err != nil {
		return nil, err
	}
	end := start.AddDate(0, 0, 1)
	lo, hi := start.UnixMilli(), end.UnixMilli()
	var key bytes.Buffer
	key.WriteString(d.pid + "\x00day/" + day + "\x00" + strconv.FormatInt(lo, 36))
	files := map[string]bool{}
	for _, t := range []string{tables.Visits, tables.Events, tables.Activity} {
		parts := d.days[t]
		name, sig, ok, err := parts.named(ctx, day)
		if err != nil {
			return nil, fmt.Errorf("cannot read the partitions of %s: %w", t, err)
		}
		files[t] = ok
		if ok {
			key.WriteString("\x00" + name + ":" + sig)
		} else {
			key.WriteString("\x00-")
		}
	}
	if v, ok := d.rows.get(key.String(), d.req); ok {
		return v.(*dayRollup), nil
	}
	r := &dayRollup{usable: true, amounts: map[string]int64{}, counts: map[string]int{}}
	if files[tables.Activity] {
		err := d.snap.Scan(ctx, tables.Activity, rollups.ScanOptions{Partitions: []string{day}, Uncached: true}, func(b rollups.Batch) error {
			c, err := tables.ColumnsOf(b.Record, []string{tables.ColKind, tables.ColStart, tables.ColPeople})
			if err != nil {
				return err
			}
			people, ok := c[2].(*array.Binary)
			if !ok {
				return fmt.Errorf("column %s is %s, not binary", tables.ColPeople, c[2].DataType())
			}
			for i := range int(b.Record.NumRows()) {
				if tables.TimeAt(c[1], i) != lo {
					r.usable = false // cut in another zone
				}
				k := slices.Index(activityKinds[:], tables.StrAt(c[0], i))
				if k < 0 {
					continue // a kind this reader does not know
				}
				s := roaring.New()
				if _, err := s.ReadFrom(bytes.NewReader(people.Value(i))); err != nil {
					return fmt.Errorf("the %s of %s: %w", activityKinds[k], day, err)
				}
				r.sets[k] = s
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot read the activity of %s: %w", day, err)
		}
	} else if acts := d.days[tables.Activity]; (files[tables.Visits] || files[tables.Events]) && acts.count() == 0 {
		// Rows without activity: tables written before the processor
		// wrote it. (A day of the table without a partition had nobody
		// active: only consentless events.)
		r.usable = false
	}
	if files[tables.Visits] {
		cols := []string{tables.ColStart, tables.ColPageviews, tables.ColConsented}
		err := d.snap.Scan(ctx, tables.Visits, rollups.ScanOptions{Partitions: []string{day}, Columns: cols, Uncached: true}, func(b rollups.Batch) error {
			c, err := tables.ColumnsOf(b.Record, cols)
			if err != nil {
				return err
			}
			for i := range int(b.Record.NumRows()) {
				if t := tables.TimeAt(c[0], i); t < lo || t >= hi {
					r.usable = false
				}
				pv := int64(tables.Int32At(c[1], i))
				r.visits++
				r.pv += pv
				if tables.BoolAt(c[2], i) {
					r.consPV += pv
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot read the visits of %s: %w", day, err)
		}
	}
	if files[tables.Events] {
		cols := []string{tables.ColTime, tables.ColPurchase, tables.ColValue, tables.ColValueCurrency}
		err := d.snap.Scan(ctx, tables.Events, rollups.ScanOptions{Partitions: []string{day}, Columns: cols, Uncached: true}, func(b rollups.Batch) error {
			c, err := tables.ColumnsOf(b.Record, cols)
			if err != nil {
				return err
			}
			for i := range int(b.Record.NumRows()) {
				if !tables.BoolAt(c[1], i) {
					continue
				}
				if t := tables.TimeAt(c[0], i); t < lo || t >= hi {
					r.usable = false
				}
				cur := tables.StrAt(c[3], i)
				if v, ok := tables.Int64At(c[2], i); ok {
					r.amounts[cur] += v
				}
				if _, ok := r.counts[cur]; !ok {
					cur = string([]byte(cur)) // the column's bytes are not kept
				}
				r.counts[cur]++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot read the purchases of %s: %w", day, err)
		}
	}
	d.rows.put(key.String(), r, r.size(), d.req)
	return r, nil
}

// dayWindow is a window of whole days read from day rollups.
type dayWindow struct {
	days []*dayRollup
	// bucket[i] is the index in days of bucket i's first day; a last
	// entry of len(days).
	bucket []int
}

// rollupWindows returns the day rollups of windows cut by bounds (each:
// bucket starts and the end, each a midnight of the project's zone), read
// in parallel; nil when a day (or the day on either side of a window) is
// not usable.
func (rp *report) rollupWindows(ctx context.Context, bounds ...[]time.Time) ([]*dayWindow, error) {
	d := rp.d
	var names []string
	index := map[string]int{}
	for _, bs := range bounds {
		from, to := bs[0], bs[len(bs)-1]
		for t := from.AddDate(0, 0, -1); !t.After(to); t = t.AddDate(0, 0, 1) {
			day := t.Format(tables.DayLayout)
			if _, ok := index[day]; !ok {
				index[day] = len(names)
				names = append(names, day)
			}
		}
	}
	rolls := make([]*dayRollup, len(names))
	err := d.prefetch(ctx, 0, len(names), func(ctx context.Context, i int) error {
		r, err := d.dayRollupOf(ctx, names[i])
		rolls[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, r := range rolls {
		if !r.usable {
			return nil, nil
		}
	}
	out := make([]*dayWindow, len(bounds))
	for i, bs := range bounds {
		w := &dayWindow{}
		k := 0
		for t := bs[0]; t.Before(bs[len(bs)-1]); t = t.AddDate(0, 0, 1) {
			for k < len(bs)-1 && !t.Before(bs[k]) {
				w.bucket = append(w.bucket, len(w.days))
				k++
			}
			w.days = append(w.days, rolls[index[t.Format(tables.DayLayout)]])
		}
		w.bucket = append(w.bucket, len(w.days))
		out[i] = w
	}
	return out, nil
}

// count returns the size of set k over days[a:b]: a sum for the new
// persons (each is in one day's set), else the size of the union.
func (w *dayWindow) count(k, a, b int) int {
	if k == setNew {
		n := uint64(0)
		for _, r := range w.days[a:b] {
			if s := r.sets[k]; s != nil {
				n += s.GetCardinality()
			}
		}
		return int(n)
	}
	return int(w.union(k, a, b).GetCardinality())
}

// union returns the union of set k over days[a:b].
func (w *dayWindow) union(k, a, b int) *roaring.Bitmap {
	var sets []*roaring.Bitmap
	for _, r := range w.days[a:b] {
		if s := r.sets[k]; s != nil {
			sets = append(sets, s)
		}
	}
	switch len(sets) {
	case 0:
		return roaring.New()
	case 1:
		return sets[0]
	}
	return roaring.FastOr(sets...)
}

// midnights reports whether every bound is a midnight of loc.
func midnights(loc *time.Location, bounds []time.Time) bool {
	for _, t := range bounds {
		l := t.In(loc)
		if l.Hour() != 0 || l.Minute() != 0 || l.Second() != 0 || l.Nanosecond() != 0 {
			return false
		}
	}
	return true
}

// overviewFromDays answers the overview from day rollups when it can; it
// reports false when the full path must answer.
func (r *Reporting) overviewFromDays(c *fiber.Ctx) (bool, error) {
	if r.cfg.FullScans || r.deps.Reader == nil {
		return false, nil
	}
	vp, err := r.projectFor(c)
	if err != nil {
		return false, nil // the full path refuses it the same way
	}
	q := queryOf(c)
	if consentlessOnly(r.deps.Catalog.State(), vp.p.ID) {
		return false, nil
	}
	filters, ferr := ParseEventFilters(q, EventFilterOptions{})
	if ferr != nil || len(filters) > 0 {
		return false, nil
	}
	ctx := c.UserContext()
	rp, err := r.openReportWith(c, ReportPeriods, vp, q, r.dayData)
	if err != nil || rp.d.snap == nil {
		return false, nil
	}
	p := rp.p
	bounds := rp.bucketBounds(p.Window)
	var prevBounds []time.Time
	if p.Previous != nil {
		prevBounds = rp.bucketBounds(*p.Previous)
	}
	if p.Window.To.Sub(p.Window.From) <= subDay || !midnights(rp.d.Loc, bounds) || (prevBounds != nil && !midnights(rp.d.Loc, prevBounds)) {
		return false, nil
	}
	asked := [][]time.Time{bounds}
	if prevBounds != nil {
		asked = append(asked, prevBounds)
	}
	ws, err := rp.rollupWindows(ctx, asked...)
	if err != nil || ws == nil {
		return false, err
	}
	cur := ws[0]
	var prev *dayWindow
	if prevBounds != nil {
		prev = ws[1]
	}
	numbers := func(w Window, dw *dayWindow) (fullNumbers, *activity) {
		a := &activity{visits: make([]int, len(dw.bucket)-1), pageviews: make([]int64, len(dw.bucket)-1), people: make([]int, len(dw.bucket)-1)}
		f := fullNumbers{amounts: map[string]int64{}, counts: map[string]int{}}
		for b := range len(dw.bucket) - 1 {
			lo, hi := dw.bucket[b], dw.bucket[b+1]
			for _, day := range dw.days[lo:hi] {
				a.visits[b] += day.visits
				a.pageviews[b] += day.pv
				a.pv += day.pv
				a.consPV += day.consPV
				for cur, v := range day.amounts {
					f.amounts[cur] += v
				}
				for cur, n := range day.counts {
					f.counts[cur] += n
				}
			}
			a.totalVisits += a.visits[b]
			a.people[b] = dw.count(setPeople, lo, hi)
		}
		all := len(dw.days)
		f.people = dw.count(setPeople, 0, all)
		f.known = dw.count(setKnown, 0, all)
		f.buyers = dw.count(setBuyers, 0, all)
		if rp.before(w) != nil {
			f.newPeople = dw.count(setNew, 0, all)
		}
		return f, a
	}
	now, a := numbers(p.Window, cur)
	var before *fullNumbers
	var pa *activity
	if prev != nil {
		b, x := numbers(*p.Previous, prev)
		before, pa = &b, x
	}
	if !p.Compare {
		prevBounds = nil
	}
	r.dayOverviews.Add(1)
	return true, r.sendFullOverview(c, rp, 0, a, pa, bounds, prevBounds, now, before)
}
