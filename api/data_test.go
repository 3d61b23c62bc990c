package api

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"
)

// Report fixture projects (testdata/report/provision.json).
const (
	shopID  = "31000000-0000-4000-8000-000000000001"
	blogID  = "31000000-0000-4000-8000-000000000002"
	emptyID = "31000000-0000-4000-8000-000000000003"
	otherID = "31000000-0000-4000-8000-000000000009"
)

// newReportFixture is the report environment with testdata/report's
// batches sent and committed.
func newReportFixture(t testing.TB) *reportEnv {
	t.Helper()
	env := newReportEnv(t, "testdata/report/provision.json")
	env.sendFile(t, "testdata/report/batches.json")
	env.wait(t)
	return env
}

// TestDataLayer loads the tables the real processor wrote from
// testdata/report/batches.json and checks the data layer's view of them,
// worked out by hand from the batches (see the comments there).
func TestDataLayer(t *testing.T) {
	env := newReportFixture(t)
	ctx := context.Background()
	d := env.projectData(t, shopID)

	// People: alice (signed in: her browser is claimed), bob, carol, eve
	// (anonymous browsers) and dave (a user seen only by the server).
	if len(d.People) != 5 {
		t.Fatalf("people: %d, want 5: %+v", len(d.People), d.People)
	}
	alice, ok := d.Person(UserRef(shopID, "alice"))
	if !ok {
		t.Fatal("alice is not a person")
	}
	if b, ok := d.Person(BrowserRef(shopID, "anon-alice")); !ok || b != alice {
		t.Errorf("alice's browser answers person %d (%v), want alice %d", b, ok, alice)
	}
	pd, err := d.detail(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if p := d.People[alice]; pd.Name != "Alice A" || !p.Known || p.Orders != 1 || pd.Visits != 3 || p.Stage != "customer" {
		t.Errorf("alice: %+v %+v", p, pd)
	}
	if _, ok := d.Person(BrowserRef(shopID, "nobody")); ok {
		t.Error("an unknown browser is a person")
	}
	first, ok := d.FirstEvent()
	if want := time.Date(2026, 5, 20, 10, 0, 0, 0, time.UTC); !ok || !first.Equal(want) {
		t.Errorf("first event %v %v, want %v", first, ok, want)
	}

	// Visits of the whole history: alice 3, bob, carol, eve, two
	// consentless: 8; dave has none.
	all, err := d.Visits(ctx, time.Unix(0, 0), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 8 {
		t.Fatalf("visits: %d, want 8", len(all))
	}
	consentless := 0
	for i, v := range all {
		if i > 0 && all[i-1].Start > v.Start {
			t.Error("visits are not sorted by start")
		}
		if !v.Consented {
			consentless++
			if v.Person != noPerson {
				t.Errorf("consentless visit with person %d", v.Person)
			}
		} else if v.Person == noPerson {
			t.Errorf("consented visit %x without a person", v.ID)
		}
	}
	if consentless != 2 {
		t.Errorf("consentless visits: %d, want 2", consentless)
	}
	// Visits starting on 2026-06-11 (Berlin): the two consentless ones.
	loc := d.Loc
	day, err := d.Visits(ctx, time.Date(2026, 6, 11, 0, 0, 0, 0, loc), time.Date(2026, 6, 12, 0, 0, 0, 0, loc))
	if err != nil || len(day) != 2 {
		t.Errorf("visits of 2026-06-11: %d (%v), want 2", len(day), err)
	}

	// Purchases: alice 50 EUR, dave 30 EUR, carol 20 USD.
	buys, err := d.Purchases(ctx, time.Unix(0, 0), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(buys) != 3 {
		t.Fatalf("purchases: %d, want 3", len(buys))
	}
	dave, _ := d.Person(UserRef(shopID, "dave"))
	carol, _ := d.Person(BrowserRef(shopID, "anon-carol"))
	for i, want := range []struct {
		person int32
		value  int64
		cur    string
	}{{alice, 50e6, "EUR"}, {dave, 30e6, "EUR"}, {carol, 20e6, "USD"}} {
		if b := buys[i]; b.Person != want.person || b.Value != want.value || b.Currency != want.cur {
			t.Errorf("purchase %d: %+v, want %+v", i, b, want)
		}
	}

	// Conversions: purchases 3; bob's signup matches Signup and the
	// archived Old goal (both conversions): 2; pricing 3 (alice, bob, the
	// consentless visitor); docs read 2 (bob, the consentless visitor).
	convs, err := d.Conversions(ctx, time.Unix(0, 0), testNow)
	if err != nil {
		t.Fatal(err)
	}
	byRole := map[string]int{}
	for _, c := range convs {
		byRole[c.Role]++
	}
	if byRole["purchase"] != 3 || byRole["conversion"] != 2 || byRole["intent"] != 3 || byRole[""] != 2 {
		t.Errorf("conversions by role: %v", byRole)
	}

	// Events, newest first, in the last hour: eve's 55 scrolls.
	n := 0
	var last int64 = 1 << 62
	err = d.Events(ctx, testNow.Add(-time.Hour), testNow, true, func(e *eventRow) bool {
		n++
		if e.Time > last {
			t.Error("events are not newest first")
		}
		last = e.Time
		if e.Name != "scroll" || e.Person == noPerson || e.Visit == (ref{}) {
			t.Errorf("event %+v", e)
		}
		return true
	})
	if err != nil || n != 55 {
		t.Errorf("events of the last hour: %d (%v), want 55", n, err)
	}

	// The consentless project: no people, four visits.
	b := env.projectData(t, blogID)
	if len(b.People) != 0 {
		t.Errorf("blog people: %d", len(b.People))
	}
	if v, err := b.Visits(ctx, time.Unix(0, 0), testNow); err != nil || len(v) != 4 {
		t.Errorf("blog visits: %d, want 4", len(v))
	}
	// A project without tables reads as empty.
	if e := env.projectData(t, emptyID); len(e.People) != 0 || e.hasFirst {
		t.Errorf("empty project: %+v", e)
	}
}

// eventPersons reads four columns of the events table and keeps nothing:
// over any window it names the same (time, person) pairs as the events
// read whole (Events), and it stops when asked to.
func TestEventPersonsAgreeWithEvents(t *testing.T) {
	env := newReportFixture(t)
	ctx := context.Background()
	d := env.projectData(t, shopID)
	first, ok := d.FirstEvent()
	if !ok {
		t.Fatal("no events in the fixture")
	}
	type pair struct {
		t int64
		p int32
	}
	windows := [][2]time.Time{
		{first.Add(-24 * time.Hour), first.Add(40 * 24 * time.Hour)},
		{first, first.Add(time.Hour)},
		{first.Add(30 * time.Minute), first.Add(26 * time.Hour)},
		{first.Add(3 * 24 * time.Hour), first.Add(9 * 24 * time.Hour)},
	}
	total := 0
	for _, w := range windows {
		var want, got []pair
		if err := d.Events(ctx, w[0], w[1], false, func(e *eventRow) bool {
			if e.Person >= 0 {
				want = append(want, pair{e.Time, e.Person})
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.eventPersons(ctx, w[0], w[1], func(ts int64, p int32) bool {
			got = append(got, pair{ts, p})
			return true
		}); err != nil {
			t.Fatal(err)
		}
		order := func(a, b pair) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.p, b.p)) }
		slices.SortFunc(want, order)
		slices.SortFunc(got, order)
		if !slices.Equal(got, want) {
			t.Fatalf("window %v–%v: eventPersons %v, events read whole %v", w[0], w[1], got, want)
		}
		total += len(want)
	}
	if total == 0 {
		t.Fatal("no event with a person in any window: the comparison compares nothing")
	}
	n := 0
	if err := d.eventPersons(ctx, windows[0][0], windows[0][1], func(int64, int32) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Fatalf("stopped after %d calls (%v), want 2", n, err)
	}
}
