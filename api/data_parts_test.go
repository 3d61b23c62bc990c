package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage"
)

// getsBucket is a real bucket that records the keys of the objects read
// whole (Get).
type getsBucket struct {
	storage.Bucket
	mu   sync.Mutex
	gets []string
}

func (g *getsBucket) Get(ctx context.Context, key string) (*storage.Object, error) {
	g.mu.Lock()
	g.gets = append(g.gets, key)
	g.mu.Unlock()
	return g.Bucket.Get(ctx, key)
}

// TestColdOverviewReadsThePeriod: a project with seven months of history
// (a visit with a signup every 20 days); a reporting API whose reader
// has never read it answers a 30-day overview exactly as the warm one
// does, and of the day-partitioned tables' sub-manifests it fetches only
// those of the months the period and its comparison period touch (and
// the events table's first two partitions' months, for the project's
// first event), each
// once: not the history.
func TestColdOverviewReadsThePeriod(t *testing.T) {
	env := newReportEnv(t, "testdata/report/provision.json")
	const project = "31000000-0000-4000-8000-000000000001" // shop, Europe/Berlin
	const visits = 11
	for i := visits - 1; i >= 0; i-- {
		at := testNow.AddDate(0, 0, -20*i).Add(-time.Hour)
		env.setNow(at)
		ms := at.UnixMilli()
		body := fmt.Sprintf(`{"v":1,"batch":"43000000-0000-4000-8000-%012d","mode":"full","events":[`+
			`{"name":"$pageview","time":%d,"id":"53100000-0000-4000-8000-%012d","anonymousId":"anon-%d","page":{"url":"https://shop.example/pricing"}},`+
			`{"name":"signup","time":%d,"id":"53200000-0000-4000-8000-%012d","anonymousId":"anon-%d","page":{"url":"https://shop.example/pricing"}}]}`,
			i, ms, i, i, ms+1000, i, i)
		env.send(t, "mf_shopweb1_k", body)
	}
	env.setNow(testNow)
	env.wait(t)
	path := "/api/v1/projects/" + project + "/overview?period=30d"
	status, warm := env.get(t, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, warm)
	}

	gb := &getsBucket{Bucket: env.bucket}
	rd, err := rollups.NewReader(gb, rollups.DefaultReaderConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewReporting(t.Context(), DefaultReportingConfig(), ReportingDeps{Catalog: env.cat, Bucket: env.bucket, Clock: env.now, Reader: rd},
		func() bool { return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "192.0.2.1:4000"
	req.Header.Set("Authorization", "Bearer "+env.token)
	resp, err := rep.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	var cold bytes.Buffer
	_, err = cold.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cold GET %s: %d %v %s", path, resp.StatusCode, err, cold.Bytes())
	}
	if !bytes.Equal(cold.Bytes(), warm) {
		t.Fatalf("the cold reader answers\n%s\nthe warm one\n%s", cold.Bytes(), warm)
	}

	// The months the overview may read: the 30 days and the 30 before,
	// a day of margin on either side (rows written in another zone).
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	today := testNow.In(loc)
	allowed := map[string]bool{}
	for d := today.AddDate(0, 0, -61); !d.After(today.AddDate(0, 0, 1)); d = d.AddDate(0, 0, 1) {
		allowed[d.Format("2006-01")] = true
	}
	whole, err := env.reader.Snapshot(t.Context(), project)
	if err != nil {
		t.Fatal(err)
	}
	dayTables := []string{tables.Visits, tables.Conversions, tables.Events}
	history := 0
	for _, tb := range dayTables {
		gs := whole.Groups(tb)
		history += len(gs)
		if tb == tables.Events && len(gs) > 0 {
			// The first event: the first two partitions (firstEvent).
			allowed[tb+"/"+gs[0].ID] = true
			if gs[0].Partitions < 2 && len(gs) > 1 {
				allowed[tb+"/"+gs[1].ID] = true
			}
		}
	}
	if history < 3*7 {
		t.Fatalf("the day tables have %d groups in all, want 7 months each", history)
	}
	fetched := map[string]bool{}
	gb.mu.Lock()
	gets := slices.Clone(gb.gets)
	gb.mu.Unlock()
	for _, key := range gets {
		if !strings.Contains(key, "/"+project+"/manifests/") {
			continue
		}
		if fetched[key] {
			t.Errorf("sub-manifest %s fetched twice", key)
		}
		fetched[key] = true
		data, _, err := storage.ReadAll(t.Context(), env.bucket, key)
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Table, Group string }
		if err := json.Unmarshal(data, &head); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(dayTables, head.Table) && !allowed[head.Group] && !allowed[head.Table+"/"+head.Group] {
			t.Errorf("the cold overview fetched group %s of %s, outside the period", head.Group, head.Table)
		}
	}
	if n := len(fetched); n == 0 || n >= history {
		t.Fatalf("the cold overview fetched %d sub-manifests, the day tables have %d groups", n, history)
	}
}
