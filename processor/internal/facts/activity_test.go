package facts

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
)

// activitySets decodes the rows of every day into sets of person refs
// (numbers mapped back through the engine's persons).
func activitySets(t *testing.T, e *Engine) map[string]map[string][]Ref {
	t.Helper()
	byNum := map[uint32]Ref{}
	for _, n := range e.nodes {
		if isPerson(n) {
			byNum[n.num] = n.ref
		}
	}
	out := map[string]map[string][]Ref{}
	for d, rows := range e.ActivityRows() {
		m := map[string][]Ref{}
		for _, r := range rows {
			s := roaring.New()
			if _, err := s.ReadFrom(bytes.NewReader(r.People)); err != nil {
				t.Fatal(err)
			}
			if s.GetCardinality() != r.Count {
				t.Fatalf("day %s, %s: count %d for a set of %d", DayName(d), r.Kind, r.Count, s.GetCardinality())
			}
			var refs []Ref
			for it := s.Iterator(); it.HasNext(); {
				x := it.Next()
				ref, ok := byNum[x]
				if !ok {
					t.Fatalf("day %s, %s: number %d is no person's", DayName(d), r.Kind, x)
				}
				refs = append(refs, ref)
			}
			slices.SortFunc(refs, func(a, b Ref) int { return bytes.Compare(a[:], b[:]) })
			m[r.Kind] = refs
		}
		out[DayName(d)] = m
	}
	return out
}

func refsOf(refs ...Ref) []Ref {
	slices.SortFunc(refs, func(a, b Ref) int { return bytes.Compare(a[:], b[:]) })
	return refs
}

// TestActivitySets: the day sets say who was active, known, new and a
// buyer, by person (a browser claimed later counts for its user on every
// day), through a claim, a purchase and a restore.
func TestActivitySets(t *testing.T) {
	ct := newColdTest(t)
	e, day := ct.e, coldDay0
	d0, d1 := DayName(e.DayOf(day.UnixMilli())), DayName(e.DayOf(day.Add(24*time.Hour).UnixMilli()))
	a, b := NodeRef(coldProject, KindBrowser, "a"), NodeRef(coldProject, KindBrowser, "b")
	u := NodeRef(coldProject, KindUser, "u")
	// Day 0: browsers a and b visit.
	e.AddBatch(ct.batch(day.Add(11*time.Hour), ct.ev("a", "", day.Add(9*time.Hour)), ct.ev("b", "", day.Add(10*time.Hour))))
	e.Flush()
	got := activitySets(t, e)
	if want := refsOf(a, b); !slices.Equal(got[d0][ActivityPeople], want) || !slices.Equal(got[d0][ActivityNew], want) || len(got[d0][ActivityKnown]) != 0 {
		t.Fatalf("day 0 before the sign-in: %v; want people and new a and b, nobody known", got[d0])
	}
	// Day 1: a signs in as u (a's day 0 becomes u's), b buys.
	buy := ct.ev("b", "", day.Add(34*time.Hour))
	buy.Revenue, buy.Currency = "12.50", "EUR"
	e.AddBatch(ct.batch(day.Add(35*time.Hour), ct.ev("a", "u", day.Add(33*time.Hour)), buy))
	ch := e.Flush()
	if len(ch.Activity) != 2 {
		t.Fatalf("the sign-in and the purchase output the rows of %d days; want both days'", len(ch.Activity))
	}
	want := map[string]map[string][]Ref{
		d0: {ActivityPeople: refsOf(u, b), ActivityKnown: {u}, ActivityNew: refsOf(u, b), ActivityBuyers: nil},
		d1: {ActivityPeople: refsOf(u, b), ActivityKnown: {u}, ActivityNew: nil, ActivityBuyers: {b}},
	}
	check := func(when string, e *Engine) {
		t.Helper()
		got := activitySets(t, e)
		for _, d := range []string{d0, d1} {
			for _, k := range ActivityKinds {
				if !slices.Equal(got[d][k], want[d][k]) {
					t.Fatalf("%s, day %s, %s: %x; want %x", when, d, k, got[d][k], want[d][k])
				}
			}
		}
	}
	check("after the sign-in", e)
	// A restore keeps the numbers and the sets.
	restored, _, _, err := Restore(e.cfg, e.State(), e.ActivityRows())
	if err != nil {
		t.Fatal(err)
	}
	restored.Settle()
	check("restored", restored)
	if ch := restored.Flush(); len(ch.Activity) != 0 {
		t.Fatalf("a restore outputs the rows of %d days; want none, nothing changed", len(ch.Activity))
	}
	// A restored person reached by an event learns its days as its parts
	// open: its compute looks nobody up in every day.
	d2 := DayName(e.DayOf(day.Add(48 * time.Hour).UnixMilli()))
	restored.AddBatch(ct.batch(day.Add(59*time.Hour), ct.ev("b", "", day.Add(58*time.Hour))))
	restored.Flush()
	if n := restored.Stats().ActivitySearches; n != 0 {
		t.Fatalf("%d persons looked up in every day after an event of a restored one; want none", n)
	}
	want[d2] = map[string][]Ref{ActivityPeople: {b}, ActivityKnown: nil, ActivityNew: nil, ActivityBuyers: nil}
	got = activitySets(t, restored)
	for k, refs := range want[d2] {
		if !slices.Equal(got[d2][k], refs) {
			t.Fatalf("day 2, %s: %x; want %x", k, got[d2][k], refs)
		}
	}
}

// TestActivityFollowsAReplacedEvent: an event replaced by a copy with the
// same id on another day (the copy sorts first) takes its browser's day
// with it: the browser is no longer active on it.
func TestActivityFollowsAReplacedEvent(t *testing.T) {
	ct := newColdTest(t)
	e, day := ct.e, coldDay0
	d0, d1 := DayName(e.DayOf(day.UnixMilli())), DayName(e.DayOf(day.Add(24*time.Hour).UnixMilli()))
	a, b := NodeRef(coldProject, KindBrowser, "a"), NodeRef(coldProject, KindBrowser, "b")
	first, resent := ct.ev("a", "", day.Add(9*time.Hour)), ct.ev("a", "", day.Add(34*time.Hour))
	e.AddBatch(ct.batch(day.Add(35*time.Hour), first, resent))
	e.Flush()
	if got := activitySets(t, e); !slices.Equal(got[d1][ActivityPeople], []Ref{a}) {
		t.Fatalf("day 1 people %x; want a", got[d1][ActivityPeople])
	}
	// The same id from browser b, earlier: it replaces a's event of day 1.
	copyB := resent
	copyB.AnonymousID, copyB.Time = "b", day.Add(10*time.Hour).UnixMilli()
	e.AddBatch(ct.batch(day.Add(36*time.Hour), copyB))
	e.Flush()
	got := activitySets(t, e)
	if len(got[d1][ActivityPeople]) != 0 || !slices.Equal(got[d0][ActivityPeople], refsOf(a, b)) {
		t.Fatalf("after the replacement: day 0 people %x, day 1 people %x; want a and b on day 0, nobody on day 1", got[d0][ActivityPeople], got[d1][ActivityPeople])
	}
}

// TestActivityFromRowsWithoutNumbers: state rows written before the
// persons had numbers (part rows of format 2) restore into an engine that
// numbers every person and outputs every day's sets whole.
func TestActivityFromRowsWithoutNumbers(t *testing.T) {
	ct := newColdTest(t)
	e, day := ct.e, coldDay0
	e.AddBatch(ct.batch(day.Add(11*time.Hour), ct.ev("a", "", day.Add(9*time.Hour)), ct.ev("b", "u", day.Add(10*time.Hour))))
	e.AddBatch(ct.batch(day.Add(35*time.Hour), ct.ev("c", "", day.Add(34*time.Hour))))
	e.Flush()
	want := activitySets(t, e)
	rows := e.State()
	old := 0
	for i, r := range rows {
		if r.Kind != StateNode {
			continue
		}
		// Format 2: no number after the kind.
		_, k := binary.Uvarint(r.Data[2:])
		rows[i].Data = append([]byte{nodeVersionV2, r.Data[1]}, r.Data[2+k:]...)
		old++
	}
	if old == 0 {
		t.Fatal("no part rows")
	}
	restored, _, _, err := Restore(e.cfg, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	restored.Settle()
	ch := restored.Flush()
	if !ch.WholeActivity || len(ch.Activity) != 2 {
		t.Fatalf("the first Flush outputs %d days' sets (whole: %v); want both days whole", len(ch.Activity), ch.WholeActivity)
	}
	got := activitySets(t, restored)
	for d, kinds := range want {
		for k, refs := range kinds {
			if !slices.Equal(got[d][k], refs) {
				t.Fatalf("day %s, %s: %x; want %x", d, k, got[d][k], refs)
			}
		}
	}
	if !ch.StateWhole {
		t.Fatal("the part rows are not written again with their numbers")
	}
}
