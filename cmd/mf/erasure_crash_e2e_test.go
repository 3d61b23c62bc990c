package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestErasureCrash kills mf (SIGKILL) at a point inside an erasure (the
// fault build's processor hook, MF_TEST_CRASH_AT, points in
// testdata/erasure/crash.json), starts it again on the same data, and
// checks that the erasure finishes exactly once: its record goes to done
// with the exact count of the person's events, no Parquet file holds any
// value of theirs, and the other people are still there.
func TestErasureCrash(t *testing.T) {
	bin := faultBuild(t)
	var c erasureCase
	raw, err := os.ReadFile("testdata/erasure/events.json")
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil {
		t.Fatalf("testdata/erasure/events.json: %v", err)
	}
	var points []struct{ Point, Why string }
	raw, err = os.ReadFile("testdata/erasure/crash.json")
	if err == nil {
		err = json.Unmarshal(raw, &points)
	}
	if err != nil {
		t.Fatalf("testdata/erasure/crash.json: %v", err)
	}
	aliceEvents := 0
	for _, e := range c.Events {
		if e.Who == "alice" {
			aliceEvents++
		}
	}
	const token = "erasure-test-admin-token-0123456789abcdef"
	auth := []string{"Authorization", "Bearer " + token}
	for _, pt := range points {
		t.Run(pt.Point, func(t *testing.T) {
			data := t.TempDir()
			a := startMFBin(t, bin, []string{"MF_TEST_CRASH_AT=" + pt.Point}, data, "serve", "--provision", demoFile, "--admin-token", token)
			bs := erasureBatches(t, c, time.Now(), "")
			for _, b := range bs {
				code, _, body := do(t, "POST", a.ingest+"/v1/batch/"+demoWebsiteKey, b,
					"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
				if code != 202 {
					t.Fatalf("batch: %d %s", code, body)
				}
			}
			waitCommitted(t, a, auth, float64(len(bs)))
			alice := personByName(t, a, "Alice Example")
			code, _, body := do(t, "DELETE", a.admin+"/admin/v1/projects/"+demoProject+"/people/"+alice, nil, auth...)
			var rec struct{ ID string }
			if code != 202 || json.Unmarshal(body, &rec) != nil || rec.ID == "" {
				t.Fatalf("erase: %d %s", code, body)
			}
			waitFor(t, 60*time.Second, func() bool { return strings.Contains(a.out.String(), "fault point reached") })
			if !strings.Contains(a.out.String(), pt.Point) {
				t.Fatalf("mf stopped at another point than %s:\n%s", pt.Point, tail(a.out.String(), 20))
			}
			a.kill()

			b := startMF(t, data, "serve", "--provision", demoFile, "--admin-token", token)
			var st struct {
				ID, Person, State string
				DoneAt            *time.Time
				Events            int
			}
			waitFor(t, 60*time.Second, func() bool {
				code, _, body := do(t, "GET", b.admin+"/admin/v1/projects/"+demoProject+"/erasures/"+rec.ID, nil, auth...)
				if code != 200 || json.Unmarshal(body, &st) != nil {
					t.Fatalf("erasure record after the restart: %d %s", code, body)
				}
				return st.State == "done"
			})
			if st.DoneAt == nil || st.Person != alice || st.Events != aliceEvents {
				t.Fatalf("erasure record after the restart: %+v, want done, person %s, %d events", st, alice, aliceEvents)
			}
			checkErased(t, b, alice, c.Needles)
			personByName(t, b, "bob") // the others stay
			if n := strings.Count(b.out.String(), `"erasure done"`); n != 1 {
				t.Fatalf("the restarted mf logged %d erasures done, want 1", n)
			}
		})
	}
}
