package api

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"testing"
	"time"
)

// TestVisitTotals checks the overview's and channels' unfiltered visit
// counts (visitTotals: day partitions' totals where a window holds them
// whole)
// against every visit of the window one by one, on the tables the real
// processor wrote from testdata/report/batches.json, for the windows of
// testdata/report/visit-totals.json.
func TestVisitTotals(t *testing.T) {
	env := newReportFixture(t)
	ctx := context.Background()
	d := env.projectData(t, shopID)
	raw, err := os.ReadFile("testdata/report/visit-totals.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Windows []struct{ From, To time.Time }
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	some := false
	for _, w := range file.Windows {
		var visits int
		var pv, consPV int64
		byChannel, gotByChannel := map[string]int{}, map[string]int{}
		err := d.eachVisit(ctx, w.From, w.To, func(_ vpos, v *visitRow) {
			visits++
			byChannel[v.Channel]++
			pv += int64(v.Pageviews)
			if v.Consented {
				consPV += int64(v.Pageviews)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		gv, gpv, gc, err := d.visitTotals(ctx, w.From, w.To, func(ch string, n int) { gotByChannel[ch] += n })
		if err != nil {
			t.Fatal(err)
		}
		if gv != visits || gpv != pv || gc != consPV {
			t.Errorf("[%s, %s): totals %d visits, %d pageviews, %d consented; the visits one by one: %d, %d, %d",
				w.From, w.To, gv, gpv, gc, visits, pv, consPV)
		}
		if !maps.Equal(gotByChannel, byChannel) {
			t.Errorf("[%s, %s): visits by channel %v; one by one: %v", w.From, w.To, gotByChannel, byChannel)
		}
		some = some || visits > 0
	}
	if !some {
		t.Error("no window holds a visit")
	}
}
