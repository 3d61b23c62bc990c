package facts

import (
	"testing"
	"time"
)

// TestSignInRewritesColdVisitsFromTheirRows: a browser that signs in
// after its visits went cold has their rows written again crediting the
// user, from the rows as stored: no event is read back and the day stays
// out of memory. A failed commit has them written again (Restore); and a
// later read-back of the whole day finds its visits as the summary says
// they are stored, so they are not written a third time.
func TestSignInRewritesColdVisitsFromTheirRows(t *testing.T) {
	ct := newColdTest(t)
	e, ev, batch, day, project := ct.e, ct.ev, ct.batch, coldDay0, coldProject
	a, b := NodeRef(project, KindBrowser, "a"), NodeRef(project, KindBrowser, "b")
	user := NodeRef(project, KindUser, "u")
	// Day 0: browsers a and b visit anonymously, a twice; the day goes
	// cold.
	e.AddBatch(batch(day.Add(12*time.Hour), ev("a", "", day.Add(9*time.Hour)), ev("b", "", day.Add(9*time.Hour+time.Minute)),
		ev("a", "", day.Add(11*time.Hour))))
	stored := e.Flush()
	d0 := e.DayOf(day.UnixMilli())
	if len(stored.VisitDays[d0]) != 3 {
		t.Fatalf("day 0 has %d visits; want 3", len(stored.VisitDays[d0]))
	}
	e.Freeze(day.Add(30*time.Hour).UnixMilli(), 0)
	if e.days[d0] != nil || e.cold[d0] == nil {
		t.Fatal("day 0 did not go cold")
	}
	// Day 2: a signs in as u.
	e.AddBatch(batch(day.Add(50*time.Hour), ev("a", "u", day.Add(50*time.Hour))))
	reclaimDay(t, e, d0, a, b, stored.VisitDays[d0])
	if e.days[d0] != nil || e.cold[d0] == nil {
		t.Fatal("day 0 came back into memory; want it cold")
	}
	if days := e.ClaimDays(); len(days) != 0 {
		t.Fatalf("ClaimDays = %v after Reclaim; want none (no events to read back)", days)
	}
	if s := e.Stats(); s.ReclaimedVisits != 2 || s.ReclaimMissing != 0 || s.ThawedEvents != 0 {
		t.Fatalf("stats %+v; want 2 visits rewritten, none missing, no event read back", s)
	}
	check := func(ch *Changes, what string) {
		t.Helper()
		if ch.WholeVisitDays[d0] || len(ch.EventDays[d0]) != 0 {
			t.Fatalf("%s: day 0 written whole (visits %v) or its events again (%d rows)", what, ch.WholeVisitDays[d0], len(ch.EventDays[d0]))
		}
		rows := ch.VisitDays[d0]
		if len(rows) != 2 {
			t.Fatalf("%s: %d visit rows of day 0 written; want a's 2", what, len(rows))
		}
		for _, r := range rows {
			if r.Unit != a || r.Person != user || r.Deleted {
				t.Fatalf("%s: row %+v; want a's visit credited to u", what, r)
			}
			var was *VisitRow
			for i := range stored.VisitDays[d0] {
				if stored.VisitDays[d0][i].ID == r.ID {
					was = &stored.VisitDays[d0][i]
				}
			}
			if was == nil || was.Start != r.Start || was.End != r.End || was.Touch != r.Touch || was.LandingPath != r.LandingPath {
				t.Fatalf("%s: row %+v is not the stored one %+v but for its person", what, r, was)
			}
		}
	}
	ch := e.Flush()
	check(ch, "first Flush")
	ch.DropRows()
	e.Restore(ch)
	check(e.Flush(), "Flush after Restore")
	// Read the whole day back, as a late event would: its visits are as
	// the summary says they are stored, so none is written again.
	th := e.Thaw([]int32{d0})
	for _, r := range stored.EventDays[d0] {
		th.Add(ThawedEvent{Event: r.Event(), Unit: r.Unit, Visit: r.Visit, Channel: r.Channel})
	}
	th.Finish()
	if ch := e.Flush(); len(ch.VisitDays[d0]) != 0 || len(ch.EventDays[d0]) != 0 {
		t.Fatalf("after reading day 0 back: %d visit rows and %d event rows written; want none", len(ch.VisitDays[d0]), len(ch.EventDays[d0]))
	}
}

// TestASignInDoesNotHoldItsBrowsersDays: a sign-in not computed yet (a
// backlog applies the next batches while a commit is in flight) does not
// keep its browser's visits in memory: they go cold with their days, and
// the compute that moves the browser's claim has their rows written again
// from the visits table (ReclaimDays), as for a sign-in after they went
// cold. In a backlog such browsers are always there, with visits on every
// recent day; holding them kept some twenty days in memory.
func TestASignInDoesNotHoldItsBrowsersDays(t *testing.T) {
	ct := newColdTest(t)
	e, ev, batch, day, project := ct.e, ct.ev, ct.batch, coldDay0, coldProject
	a, b := NodeRef(project, KindBrowser, "a"), NodeRef(project, KindBrowser, "b")
	user := NodeRef(project, KindUser, "u")
	e.AddBatch(batch(day.Add(12*time.Hour), ev("a", "", day.Add(9*time.Hour)), ev("b", "", day.Add(9*time.Hour+time.Minute))))
	stored := e.Flush()
	d0 := e.DayOf(day.UnixMilli())
	// Day 4: a signs in; the batch is applied, not computed, when the
	// commit before it is stored and the days go cold (a new event holds
	// the days from two before its own).
	received := day.Add(4*24*time.Hour + 12*time.Hour)
	e.AddBatch(batch(received, ev("a", "u", received.Add(-time.Minute))))
	e.Freeze(received.Add(-2*time.Hour).UnixMilli(), 0)
	if e.days[d0] != nil || e.cold[d0] == nil {
		t.Fatal("day 0 stayed in memory for a sign-in of one of its browsers; want it cold")
	}
	e.Compute()
	reclaimDay(t, e, d0, a, b, stored.VisitDays[d0])
	ch := e.Flush()
	if ch.WholeVisitDays[d0] || len(ch.EventDays[d0]) != 0 || e.Stats().ThawedEvents != 0 {
		t.Fatalf("day 0 written whole (%v) or its events read back (%d) or written (%d rows)", ch.WholeVisitDays[d0], e.Stats().ThawedEvents, len(ch.EventDays[d0]))
	}
	if rows := ch.VisitDays[d0]; len(rows) != 1 || rows[0].Unit != a || rows[0].Person != user || rows[0].Deleted {
		t.Fatalf("visit rows of day 0 written: %+v; want a's one visit credited to u", rows)
	}
	if e.ClaimsPending() {
		t.Fatal("claims still pending after the reclaim")
	}
}

// reclaimDay takes up, as the processor does, the claims waiting on cold
// day d0 alone, given the visits table's rows of that day: browser a's
// rows are wanted, browser b's not.
func reclaimDay(t *testing.T, e *Engine, d0 int32, a, b Ref, stored []VisitRow) {
	t.Helper()
	days := e.ReclaimDays()
	if len(days) != 1 || days[0] != d0 {
		t.Fatalf("ReclaimDays = %v; want day 0 (%d), where a's visits went cold", days, d0)
	}
	if !e.ReclaimWants(a) || e.ReclaimWants(b) {
		t.Fatalf("ReclaimWants: a %v, b %v; want a's rows only", e.ReclaimWants(a), e.ReclaimWants(b))
	}
	for _, r := range stored {
		if e.ReclaimWants(r.Unit) {
			e.Reclaim(d0, r)
		}
	}
	e.ReclaimDone()
}
