package api

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
)

// TestFunnelMachine runs the state machine over the cases of
// testdata/report/funnel-machine.json.
func TestFunnelMachine(t *testing.T) {
	raw, err := os.ReadFile("testdata/report/funnel-machine.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name   string   `json:"name"`
			Steps  []string `json:"steps"`
			From   int64    `json:"from"`
			To     int64    `json:"to"`
			Window int64    `json:"window"`
			Items  [][2]any `json:"items"`
			Reach  int      `json:"reach"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("no cases")
	}
	const minute = 60_000
	for _, tc := range doc.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			spec := newFunnelSpec(tc.Steps, tc.From*minute, tc.To*minute, tc.Window*minute)
			// Each case runs through both groupings: as one person's
			// conversions and as one visit's.
			var convs []conversionRow
			for i, it := range tc.Items {
				var ev ref
				binary.BigEndian.PutUint32(ev[:], uint32(i))
				convs = append(convs, conversionRow{Action: it[0].(string), Time: int64(it[1].(float64)) * minute,
					EventID: ev, Visit: ref{1}, Person: 0, Consented: true})
			}
			if got := spec.byPerson(1, convRows{convs})[0]; int(got) != tc.Reach {
				t.Errorf("by person: reach %d, want %d", got, tc.Reach)
			}
			counts := spec.countVisits(convRows{convs})
			got := 0
			for _, c := range counts {
				got += int(c)
			}
			if got != tc.Reach {
				t.Errorf("by visit: counts %v, want %d steps reached", counts, tc.Reach)
			}
			// Consentless conversions and conversions without a person
			// or visit count for nobody.
			for i := range convs {
				convs[i].Consented = false
			}
			if got := spec.byPerson(1, convRows{convs})[0]; got != 0 {
				t.Errorf("consentless by person: reach %d, want 0", got)
			}
			if c := spec.countVisits(convRows{convs}); c[0] != 0 {
				t.Errorf("consentless by visit: %v, want nothing", c)
			}
		})
	}
}

// BenchmarkFunnel runs a 4-step person funnel over 30 days of
// conversions of 1M people (the shape of issue 7's report benchmark: 10M
// events, of which about 2.4M step conversions in 30 days), the part of
// the funnel report after the tables are decoded.
func BenchmarkFunnel(b *testing.B) {
	const (
		people  = 1_000_000
		convs   = 2_400_000
		dayMs   = 86_400_000
		from    = int64(1_780_000_000_000)
		periodD = 30
	)
	rng := rand.New(rand.NewPCG(7, 7))
	steps := []string{"view", "cart", "checkout", "buy"}
	rows := make([]conversionRow, convs)
	for i := range rows {
		// Most conversions are early steps; times spread over the period
		// and the 7-day window after it, sorted below by construction.
		s := min(int(rng.ExpFloat64()*0.9), 3)
		rows[i] = conversionRow{Action: steps[s], Person: int32(rng.IntN(people)), Consented: true,
			Time: from + int64(i)*(periodD+7)*dayMs/convs}
	}
	spec := newFunnelSpec(steps, from, from+periodD*dayMs, 7*dayMs)
	b.ReportAllocs()
	b.SetBytes(int64(convs))
	b.ResetTimer()
	var counts []int64
	for i := 0; i < b.N; i++ {
		counts = spec.countPeople(people, convRows{rows})
	}
	b.StopTimer()
	if counts[0] == 0 {
		b.Fatal("nobody started the funnel")
	}
}
