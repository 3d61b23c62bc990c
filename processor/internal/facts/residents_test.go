package facts

import (
	"slices"
	"testing"
	"time"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/storage/records"
)

// TestResidentsAreReadBackBeforeAWholeWrite: a visit across midnight
// keeps its events of the day before in memory when that day goes cold
// (a resident); a Flush that would write that day's partitions whole (a
// failed commit given back with Restore) must have the day read back
// first (ThawForFlush), else it would write only the residents' rows.
// coldTest is an engine of coldProject in UTC with a 30-minute visit
// timeout, and makers of its pageviews and batches (numbered in turn).
type coldTest struct {
	e *Engine
	n byte
}

const coldProject = "0195f3b4-0000-7000-8000-000000000001"

// coldDay0 is the first day of the cold-day tests.
var coldDay0 = time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC)

func newColdTest(t testing.TB) *coldTest {
	t.Helper()
	cl, err := channels.Default()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Project: coldProject, Location: time.UTC, ReportingCurrency: "EUR", Classifier: cl,
		VisitTimeout: 30 * time.Minute, BuildWorkers: 1, CheckActivity: true})
	if err != nil {
		t.Fatal(err)
	}
	return &coldTest{e: e}
}

// ev is a pageview of browser anon (signed in as user unless "") at at.
func (c *coldTest) ev(anon, user string, at time.Time) records.Event {
	c.n++
	return records.Event{ID: records.UUID{0xe0, c.n, 6: 0x40, 8: 0x80}, Name: "$pageview", Time: at.UnixMilli(), AnonymousID: anon,
		UserID: user, Page: records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: "/"}}}
}

// batch is a website batch of evs received at received.
func (c *coldTest) batch(received time.Time, evs ...records.Event) *records.Batch {
	c.n++
	return &records.Batch{Project: coldProject, Mode: records.ModeFull, SourceKind: records.SourceWebsite,
		ID: records.UUID{0xb0, c.n, 6: 0x40, 8: 0x80}, ReceivedAt: received.UnixMilli(), Events: evs}
}

func TestResidentsAreReadBackBeforeAWholeWrite(t *testing.T) {
	ct := newColdTest(t)
	e, batch, day := ct.e, ct.batch, coldDay0
	ev := func(anon string, at time.Time) records.Event { return ct.ev(anon, "", at) }
	// Day 0: a visit in the morning (goes cold) and one from 23:50 to
	// 00:10 (a resident); day 1: a visit in the afternoon, still open.
	e.AddBatch(batch(day.Add(10*time.Hour), ev("a", day.Add(9*time.Hour)), ev("a", day.Add(9*time.Hour+5*time.Minute))))
	e.AddBatch(batch(day.Add(24*time.Hour+10*time.Minute), ev("b", day.Add(23*time.Hour+50*time.Minute)), ev("b", day.Add(24*time.Hour+10*time.Minute))))
	e.AddBatch(batch(day.Add(40*time.Hour), ev("c", day.Add(40*time.Hour))))
	ch := e.Flush()
	d0 := e.DayOf(day.UnixMilli())
	e.Freeze(day.Add(39*time.Hour).UnixMilli(), 0)
	if got := e.ResidentDays(); got != 1 || e.days[d0] == nil || len(e.days[d0].events) != 1 {
		t.Fatalf("after the freeze: %d days with residents, day 0 in memory: %v; want day 0 with the one event of the visit across midnight", got, e.days[d0] != nil)
	}
	if days := e.ThawForFlush(); len(days) != 0 {
		t.Fatalf("nothing to write whole, yet ThawForFlush names %v", days)
	}
	e.Restore(ch) // the commit of ch failed: its partitions are written whole next
	days := e.ThawForFlush()
	if !slices.Contains(days, d0) {
		t.Fatalf("ThawForFlush = %v; want day 0 (%d), whose partitions are written whole next", days, d0)
	}
	// Read back as the processor does, from the rows ch would have stored.
	th := e.Thaw(days)
	for _, r := range ch.EventDays[d0] {
		th.Add(ThawedEvent{Event: r.Event(), Visit: r.Visit, Channel: r.Channel})
	}
	th.Finish()
	if e.ResidentDays() != 0 || len(e.days[d0].events) != 3 {
		t.Fatalf("after reading day 0 back it holds %d events; want all 3", len(e.days[d0].events))
	}
	again := e.Flush()
	if got, want := len(again.EventDays[d0]), len(ch.EventDays[d0]); got != want || again.EventAppend[d0] {
		t.Fatalf("day 0 written with %d rows (append %v); want it whole with %d", got, again.EventAppend[d0], want)
	}
	if got, want := len(again.VisitDays[d0]), len(ch.VisitDays[d0]); got != want || !again.WholeVisitDays[d0] {
		t.Fatalf("day 0's visits written with %d rows (whole %v); want them whole with %d", got, again.WholeVisitDays[d0], want)
	}
}

// TestSignInReadsBackTheBrowsersVisits: a first sign-in on a browser
// whose earlier visit is on a cold day moves the browser to the user, and
// that visit's row shows its person: ClaimDays names the cold day,
// ThawUnits brings back the browser's rows only (the day stays cold, the
// others' rows stay out), and the next Flush writes the visit's row with
// the user as its person, not the day whole.
func TestSignInReadsBackTheBrowsersVisits(t *testing.T) {
	ct := newColdTest(t)
	e, ev, batch, day, project := ct.e, ct.ev, ct.batch, coldDay0, coldProject
	// Day 0: browsers a and b visit anonymously; both days go cold.
	e.AddBatch(batch(day.Add(10*time.Hour), ev("a", "", day.Add(9*time.Hour)), ev("b", "", day.Add(9*time.Hour+time.Minute))))
	stored := e.Flush()
	d0 := e.DayOf(day.UnixMilli())
	e.Freeze(day.Add(30*time.Hour).UnixMilli(), 0)
	if e.days[d0] != nil || e.cold[d0] == nil {
		t.Fatal("day 0 did not go cold")
	}
	// Day 2: a signs in as u.
	e.AddBatch(batch(day.Add(50*time.Hour), ev("a", "u", day.Add(50*time.Hour))))
	days := e.ClaimDays()
	if !slices.Equal(days, []int32{d0}) {
		t.Fatalf("ClaimDays = %v; want day 0 (%d), where a's visit is", days, d0)
	}
	th := e.ThawUnits(days)
	for _, r := range stored.EventDays[d0] {
		th.Add(ThawedEvent{Event: r.Event(), Unit: r.Unit, Visit: r.Visit, Channel: r.Channel})
	}
	th.Finish()
	if e.cold[d0] == nil || e.days[d0] == nil || len(e.days[d0].events) != 1 || e.days[d0].events[0].unit.ref != NodeRef(project, KindBrowser, "a") {
		t.Fatalf("after ThawUnits day 0 is cold: %v, holds %d events; want it cold with a's one event in memory ", e.cold[d0] != nil, len(e.days[d0].events))
	}
	if len(e.ClaimDays()) != 0 {
		t.Fatal("ClaimDays names days again after they were read back")
	}
	ch := e.Flush()
	if ch.WholeVisitDays[d0] || len(ch.EventDays[d0]) != 0 {
		t.Fatalf("day 0 written whole (visits %v) or its events again (%d rows); want only a's visit row", ch.WholeVisitDays[d0], len(ch.EventDays[d0]))
	}
	rows := ch.VisitDays[d0]
	user := NodeRef(project, KindUser, "u")
	if len(rows) != 1 || rows[0].Unit != NodeRef(project, KindBrowser, "a") || rows[0].Person != user {
		t.Fatalf("day 0's visit rows written: %+v; want a's visit, credited to u (%x)", rows, user)
	}
}

// TestPendingWorkHoldsOnlyTheDaysItReaches: a Freeze while added events
// wait for their compute (a backlog applies batches while a commit is in
// flight) keeps in memory the days that compute can change, and lets the
// others go cold. Pending: a late event of day 0; browser b's event at
// 23:55 on day 3, which joins b's visit from 00:10 on day 4; browser a's
// event at 00:05 on day 9, which joins a's visit from 23:40 on day 8. The
// days from two before to one after each pending event's stay (0, 3, 4,
// 8, 9 and 10 of those with events); days 6 and 12 go cold (before, every
// day from the oldest pending day on stayed). The compute then puts each
// browser's three pageviews in one visit.
func TestPendingWorkHoldsOnlyTheDaysItReaches(t *testing.T) {
	ct := newColdTest(t)
	e, batch, day := ct.e, ct.batch, coldDay0
	ev := func(anon string, at time.Time) records.Event { return ct.ev(anon, "", at) }
	at := func(d int, h, m int) time.Time {
		return day.Add(time.Duration(d)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
	}
	received := at(14, 12, 0)
	e.AddBatch(batch(received, ev("old", at(0, 9, 0)), ev("w", at(6, 9, 0)), ev("b", at(4, 0, 10)), ev("b", at(4, 0, 20)),
		ev("a", at(8, 23, 40)), ev("a", at(8, 23, 50)), ev("x", at(10, 9, 0)), ev("y", at(12, 9, 0))))
	e.Flush()
	e.AddBatch(batch(received, ev("late", at(0, 10, 0)), ev("b", at(3, 23, 55)), ev("a", at(9, 0, 5))))
	e.Freeze(received.Add(-2*time.Hour).UnixMilli(), 0)
	var hot []int
	for d := range 13 {
		if e.days[e.DayOf(at(d, 0, 0).UnixMilli())] != nil {
			hot = append(hot, d)
		}
	}
	if want := []int{0, 3, 4, 8, 9, 10}; !slices.Equal(hot, want) {
		t.Errorf("days in memory with work pending: %v, want %v", hot, want)
	}
	ch := e.Flush()
	for _, c := range []struct {
		anon  string
		days  []int
		start time.Time
	}{{"b", []int{3, 4}, at(3, 23, 55)}, {"a", []int{8, 9}, at(8, 23, 40)}} {
		var visits []VisitRow
		for _, d := range c.days {
			for _, r := range ch.VisitDays[e.DayOf(at(d, 0, 0).UnixMilli())] {
				if r.Unit == NodeRef(coldProject, KindBrowser, c.anon) && !r.Deleted {
					visits = append(visits, r)
				}
			}
		}
		if len(visits) != 1 || visits[0].Pageviews != 3 || visits[0].Start != c.start.UnixMilli() {
			t.Errorf("%s's visits written: %+v; want one of 3 pageviews from %v", c.anon, visits, c.start)
		}
	}
}
