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
// whole, rows where it cuts them) against every visit of the window one
// by one, on the tables the real processor wrote from the fixtures and for
// the windows of testdata/report/visit-totals.json.
func TestVisitTotals(t *testing.T) {
	raw, err := os.ReadFile("testdata/report/visit-totals.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Fixtures []struct {
			Provision, Batches, Acquisition, Project string
			Windows                                  []struct{ From, To time.Time }
		}
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, f := range file.Fixtures {
		t.Run(f.Project, func(t *testing.T) {
			env := newReportEnv(t, f.Provision)
			if f.Batches != "" {
				env.sendFile(t, f.Batches)
				env.wait(t)
			}
			if f.Acquisition != "" {
				acqSendBatches(t, env, f.Acquisition)
			}
			ctx := context.Background()
			d := env.projectData(t, f.Project)
			some := false
			for _, w := range f.Windows {
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
		})
	}
}
