package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/catalog"
)

// TestCreditPaid checks attribution to the latest paid click before a
// purchase: the person's paid visits within 30 days, or the purchase's own
// paid visit for someone without a person.
func TestCreditPaid(t *testing.T) {
	day := int64(24 * time.Hour / time.Millisecond)
	v := func(id byte, person int32, start int64) visitRow {
		return visitRow{ID: ref{id}, Person: person, Start: start, visitSource: noSource, place: noPlace}
	}
	paid := []visitRow{v(1, 0, 10*day), v(2, 1, 10*day), v(3, -1, 12*day)}
	purchases := []adsPurchase{
		{time: 10 * day, person: 0, value: 5_000_000, currency: "EUR"},                   // same moment as the click: credited
		{time: 40 * day, person: 0, value: 7_000_000, currency: "EUR"},                   // exactly 30 days later: credited
		{time: 41 * day, person: 1, value: 9_000_000, currency: "EUR"},                   // 31 days later: not credited
		{time: 9 * day, person: 2, value: 1_000_000, currency: "USD"},                    // no paid click of theirs
		{time: 12*day + 5, person: -1, visit: ref{3}, value: 2_000_000, currency: "USD"}, // consentless, own paid visit
		{time: 11 * day, person: 0, value: 0, currency: "EUR"},                           // no revenue, still a buyer
	}
	got := creditPaid(paid, purchases, 3)
	if got.revenue["EUR"] != 12_000_000 || got.revenue["USD"] != 2_000_000 || len(got.revenue) != 2 {
		t.Errorf("revenue %v, want EUR 12000000 and USD 2000000", got.revenue)
	}
	if got.buyers != 1 || !got.tracked {
		t.Errorf("buyers %d tracked %v, want 1 and true", got.buyers, got.tracked)
	}
}

// BenchmarkChannels measures the channels report over a synthetic
// snapshot: 1M people, 1M visits in the 30-day window, 20k purchases.
func BenchmarkChannels(b *testing.B) {
	const people, visits, convs = 1_000_000, 1_000_000, 20_000
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 6, 15, 0, 0, 0, 0, time.UTC)
	from := now.AddDate(0, 0, -30)
	span := now.Sub(from).Milliseconds()
	d := &projectData{Project: &catalog.Project{ID: "bench"}, Loc: time.UTC, shared: &dataShared{}}
	var sources []*visitSource
	var touches []*touch
	for _, ch := range Channels {
		sources, touches = append(sources, &visitSource{Channel: ch}), append(touches, &touch{Channel: ch})
	}
	d.People = make([]personRow, people)
	d.peopleRefs = make([]ref, people)
	for i := range d.People {
		p := &d.People[i]
		binary.BigEndian.PutUint32(p.Ref[:], uint32(i))
		d.peopleRefs[i] = p.Ref
		p.FirstSeen = from.UnixMilli() - span + rng.Int64N(2*span)
		p.LastSeen = p.FirstSeen + rng.Int64N(span)
		p.FirstTouch, p.LastTouch = touches[rng.IntN(len(Channels))], touches[rng.IntN(len(Channels))]
		p.place = noPlace
	}
	vs := make([]visitRow, visits)
	for i := range vs {
		vs[i] = visitRow{Start: from.UnixMilli() + int64(i)*span/visits, Person: int32(rng.IntN(people)),
			visitSource: sources[rng.IntN(len(Channels))], place: noPlace, Pageviews: 3, Consented: true}
	}
	cs := make([]conversionRow, convs)
	for i := range cs {
		cs[i] = conversionRow{Time: from.UnixMilli() + int64(i)*span/convs, Person: int32(rng.IntN(people)), Role: catalog.RoleConversion}
	}
	// The day index of active people: each visit's person is seen on its day.
	var facts []*partCache
	for day := 0; day < 30; day++ {
		pc := &partCache{first: from.AddDate(0, 0, day).UnixMilli(), lastT: from.AddDate(0, 0, day+1).UnixMilli() - 1}
		for i := day * visits / 30; i < (day+1)*visits/30; i++ {
			v := &vs[i]
			pc.seen = append(pc.seen, seenPart{d.People[v.Person].Ref, v.Start, v.Start})
		}
		facts = append(facts, pc)
	}
	pinDays(d, vs, cs, facts)
	w := Window{From: from, To: now}
	b.ReportAllocs()
	b.SetBytes(int64(visits))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.shared.active = nil // measure the active set, not the cache
		if _, err := computeChannels(context.Background(), d, w, "first", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseImport parses a 10,000-row ads import.
func BenchmarkParseImport(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"version":1,"source":"ads_platform_a"}` + "\n")
	for i := 0; i < 10_000; i++ {
		fmt.Fprintf(&buf, `{"account":"111-222-3333","day":"2026-%02d-%02d","campaign":"c%d","spend":12.5,"currency":"EUR","clicks":10,"impressions":200}`+"\n",
			1+i%12, 1+i%28, i)
	}
	b.ReportAllocs()
	b.SetBytes(int64(buf.Len()))
	for i := 0; i < b.N; i++ {
		if _, err := ParseImport(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}
