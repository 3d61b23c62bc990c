package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// retentionCase is testdata/retention/events.json.
type retentionCase struct {
	Offset string
	// Needles are values only the events past retention hold; Kept are
	// values of the events inside it.
	Needles, Kept []string
	Events        []struct {
		Old   bool
		Ago   string
		Event map[string]any
	}
}

// TestRetentionDeletes runs retention through the real binary. The
// events (ingest takes them up to 30 days old) go in with mf running as
// usual: the API and the Parquet files hold them all. mf then starts
// again on the same data as the fault build (mffaults) with the
// processor's clock MF_TEST_CLOCK_OFFSET ahead (the demo organization's
// pro plan keeps 366 days; 360 days ahead put the events of 24 and 25 days
// ago past retention and grace, those of the last days inside it) and
// looking at retention every MF_TEST_RETENTION_INTERVAL. Once the
// metrics count a retention run: no Parquet file holds a value of the
// events past retention, the API no longer has the person seen only then
// (404) nor counts them, and it answers as a run that only ever saw the
// events inside retention; the metrics count the files and bytes deleted,
// and later looks find nothing more to delete.
func TestRetentionDeletes(t *testing.T) {
	bin := faultBuild(t)
	raw, err := os.ReadFile("testdata/retention/events.json")
	if err != nil {
		t.Fatal(err)
	}
	var c retentionCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("testdata/retention/events.json: %v", err)
	}
	const token = "retention-test-admin-token-0123456789abcdef"
	auth := []string{"Authorization", "Bearer " + token}
	data := t.TempDir()
	start := time.Now()

	// As usual: everything is there.
	a := startMFBin(t, bin, nil, data, "serve", "--provision", demoFile, "--admin-token", token)
	sendRetentionEvents(t, a, c, start, true)
	waitCommitted(t, a, auth, float64(len(c.Events)))
	olga := personIn(t, a, "30d", "name", "Olga Old")
	rita := personIn(t, a, "30d", "name", "rita")
	people30 := activePeople(t, a, "30d")
	if people7 := activePeople(t, a, "7d"); people30 <= people7 {
		t.Fatalf("people active in 30 days %v, in 7 days %v: the case needs people seen only past retention", people30, people7)
	}
	checkParquetValues(t, data, c.Needles, true)
	checkParquetValues(t, data, c.Kept, true)
	if code := a.stop(30 * time.Second); code != 0 {
		t.Fatalf("mf exited %d:\n%s", code, tail(a.out.String(), 20))
	}

	// The processor's clock ahead: retention deletes the old days.
	b := startMFBin(t, bin, []string{"MF_TEST_CLOCK_OFFSET=" + c.Offset, "MF_TEST_RETENTION_INTERVAL=200ms"}, data,
		"serve", "--provision", demoFile, "--admin-token", token)
	waitFor(t, 45*time.Second, func() bool {
		fams := scrape(t, b, auth...)
		if n := sample(t, fams, "mf_retention_runs_total", "outcome", "failed"); n > 0 {
			t.Fatalf("mf_retention_runs_total{outcome=\"failed\"} is %v:\n%s", n, tail(b.out.String(), 20))
		}
		return sample(t, fams, "mf_retention_runs_total", "outcome", "ok") >= 1
	})
	fams := scrape(t, b, auth...)
	files, bytesDeleted := sample(t, fams, "mf_retention_files_deleted_total", "kind", "table"), sample(t, fams, "mf_retention_bytes_deleted_total")
	last := sample(t, fams, "mf_retention_last_run_timestamp_seconds")
	if files < 1 || bytesDeleted < 1 || last < float64(start.Unix()) || last > float64(time.Now().Unix()+1) {
		t.Fatalf("after a retention run: %v files and %v bytes deleted, last run at %v, want some and a time since %d",
			files, bytesDeleted, last, start.Unix())
	}

	// Gone from the files and the API; what is inside stays.
	checkParquetValues(t, data, c.Needles, false)
	checkParquetValues(t, data, c.Kept, true)
	if code, _, body := do(t, "GET", b.api+"/api/v1/projects/"+demoProject+"/people/"+olga, nil, "Authorization", "Bearer "+demoPAT); code != 404 {
		t.Fatalf("the person seen only past retention: %d %s, want 404", code, body)
	}
	if code, _, body := do(t, "GET", b.api+"/api/v1/projects/"+demoProject+"/people/"+rita, nil, "Authorization", "Bearer "+demoPAT); code != 200 {
		t.Fatalf("the person seen inside retention too: %d %s, want 200", code, body)
	}
	waitFor(t, 30*time.Second, func() bool { return activePeople(t, b, "30d") == activePeople(t, b, "7d") })
	// The API answers as a run that only ever saw the events inside
	// retention (a person's profile starts with their oldest retained
	// event: docs/privacy.md, "Retention").
	r := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--admin-token", token)
	sendRetentionEvents(t, r, c, start, false)
	waitCommitted(t, r, auth, float64(kept(c)))
	for _, q := range []string{"/people?period=30d", "/overview?period=30d", "/people?period=7d"} {
		waitFor(t, 30*time.Second, func() bool { return reportData(t, b, q) == reportData(t, r, q) })
	}
	// A later look finds nothing more to delete.
	before := sample(t, scrape(t, b, auth...), "mf_retention_looks_total")
	waitFor(t, 30*time.Second, func() bool { return sample(t, scrape(t, b, auth...), "mf_retention_looks_total") >= before+2 })
	fams = scrape(t, b, auth...)
	if n := sample(t, fams, "mf_retention_runs_total", "outcome", "ok"); n != 1 {
		t.Fatalf("mf_retention_runs_total{outcome=\"ok\"} is %v after two more looks, want 1 (nothing more is past retention)", n)
	}
	if at := sample(t, fams, "mf_retention_last_look_timestamp_seconds"); at < last {
		t.Fatalf("mf_retention_last_look_timestamp_seconds is %v, before the run it ended (%v)", at, last)
	}
}

// sendRetentionEvents sends the case's events (with old, those past
// retention too) to p's ingest, timed back from start, one per batch.
func sendRetentionEvents(t *testing.T, p *mfProc, c retentionCase, start time.Time, old bool) {
	t.Helper()
	for i, e := range c.Events {
		if e.Old && !old {
			continue
		}
		ago, err := time.ParseDuration(e.Ago)
		if err != nil {
			t.Fatalf("event %d: ago %q: %v", i, e.Ago, err)
		}
		ev := map[string]any{}
		for k, v := range e.Event {
			ev[k] = v
		}
		ev["time"] = start.Add(-ago).UnixMilli()
		ev["id"] = fmt.Sprintf("2e7e0000-0000-4000-8000-%012d", i)
		j, _ := json.Marshal(ev)
		code, _, body := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, batchBody(fmt.Sprintf("2e7eba70-0000-4000-8000-%012d", i), "full", string(j)),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			t.Fatalf("batch %d: %d %s", i, code, body)
		}
	}
}

// kept counts the case's events inside retention.
func kept(c retentionCase) int {
	n := 0
	for _, e := range c.Events {
		if !e.Old {
			n++
		}
	}
	return n
}

// personIn returns the ref of the person of the people list of period
// whose attribute attr is value.
func personIn(t *testing.T, p *mfProc, period, attr, value string) string {
	t.Helper()
	code, _, b := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+"/people?period="+period, nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 {
		t.Fatalf("people: %d %s", code, b)
	}
	var doc struct {
		Data []struct {
			ID         string
			Attributes map[string]any
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, d := range doc.Data {
		if d.Attributes[attr] == value {
			return d.ID
		}
	}
	t.Fatalf("no person with %s %q in %s", attr, value, b)
	return ""
}

// activePeople returns the people number of the overview of period.
func activePeople(t *testing.T, p *mfProc, period string) float64 {
	t.Helper()
	code, _, b := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+"/overview?period="+period, nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 {
		t.Fatalf("overview: %d %s", code, b)
	}
	var doc struct {
		Data struct {
			Attributes struct {
				Numbers []struct {
					Key   string
					Value float64
				}
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range doc.Data.Attributes.Numbers {
		if n.Key == "people" {
			return n.Value
		}
	}
	t.Fatalf("overview of %s has no people: %s", period, b)
	return 0
}

// checkParquetValues checks that the Parquet files under data hold each
// value (in a string or binary value) when present, and none when not.
func checkParquetValues(t *testing.T, data string, values []string, present bool) {
	t.Helper()
	found := map[string]string{}
	files := 0
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since it was listed
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		files++
		for _, v := range parquetValues(t, path) {
			for _, n := range values {
				if bytes.Contains(v, []byte(n)) {
					found[n] = path
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no Parquet file under %s: the check would pass on nothing", data)
	}
	for _, n := range values {
		if path, ok := found[n]; ok && !present {
			t.Errorf("%s still holds %q", path, n)
		} else if !ok && present {
			t.Errorf("no Parquet file holds %q", n)
		}
	}
}
