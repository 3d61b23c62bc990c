package api

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestOverviewFromDays asks the overviews of
// testdata/report/overview-days.json, on the tables the real processor
// wrote from the fixtures, once from the day rollups (overview_days.go)
// and once from full scans: the answers must be byte for byte equal, and
// the asks marked days must have been answered from the day rollups.
func TestOverviewFromDays(t *testing.T) {
	raw, err := os.ReadFile("testdata/report/overview-days.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Fixtures []struct {
			Provision, Batches, Acquisition string
			Now                             time.Time
			Asks                            []struct {
				Path string
				Days bool
			}
		}
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, f := range file.Fixtures {
		t.Run(f.Provision, func(t *testing.T) {
			env := newReportEnv(t, f.Provision)
			if f.Batches != "" {
				env.sendFile(t, f.Batches)
				env.wait(t)
			}
			if f.Acquisition != "" {
				acqSendBatches(t, env, f.Acquisition)
			}
			env.setNow(f.Now)
			for _, a := range f.Asks {
				env.rep.cfg.FullScans = true
				fullStatus, full := env.get(t, a.Path)
				env.rep.cfg.FullScans = false
				before := env.rep.dayOverviews.Load()
				status, got := env.get(t, a.Path)
				fromDays := env.rep.dayOverviews.Load() > before
				if status != fullStatus || !bytes.Equal(got, full) {
					t.Errorf("%s (from days: %v): %d %s\nfull scans: %d %s", a.Path, fromDays, status, got, fullStatus, full)
				}
				if fromDays != a.Days {
					t.Errorf("%s: answered from the day rollups: %v, want %v", a.Path, fromDays, a.Days)
				}
				if status != 200 {
					t.Errorf("%s: status %d: %s", a.Path, status, got)
				}
			}
		})
	}
}
