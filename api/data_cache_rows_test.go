package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// TestRowCacheEvictsLeastRecentlyUsed checks the cache's accounting:
// entries leave least recently used first, a value larger than the budget
// is not kept, remove gives its bytes back.
func TestRowCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newRowCache(100)
	r1, r2, r3 := &pins{}, &pins{}, &pins{}
	c.put("a", 1, 40, r1)
	c.put("b", 2, 40, r1)
	if _, ok := c.get("a", r2); !ok { // a is now more recent than b
		t.Fatal("a is not cached")
	}
	if !c.put("c", 3, 40, r2) { // 120 > 100: b (r1's) goes
		t.Fatal("c was refused although r1's b could make room")
	}
	if _, ok := c.peek("b"); ok {
		t.Error("b, the least recently used, was kept")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.peek(k); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
	// r2 read a and c: a request larger than the budget stops adding
	// rather than evicting what it read itself.
	if c.put("d", 4, 40, r2) {
		t.Error("r2's d evicted r2's own a")
	}
	if _, ok := c.peek("a"); !ok {
		t.Error("a was evicted by the request that read it")
	}
	// Another request may evict them.
	if !c.put("e", 5, 40, r3) {
		t.Error("r3's e was refused")
	}
	if c.put("big", 6, 101, r3) {
		t.Error("a value larger than the budget was kept")
	}
	c.remove("c")
	st := c.stats()
	if st.Bytes != 40 || st.Entries != 1 || st.Evictions != 2 || st.Refused != 1 || st.Limit != 100 {
		t.Errorf("stats %+v, want 40 bytes in 1 entry after 2 evictions and 1 refusal", st)
	}
}

// TestDataCacheHoldsItsBudget asks the query mix of
// testdata/report/cache-mix.json of two reporting APIs over the same
// tables: one whose budget for decoded day partitions is smaller than the
// fixture's partitions, one without a limit. After every answer the small
// one holds at most its budget; it had to evict; both answer every
// question alike.
func TestDataCacheHoldsItsBudget(t *testing.T) {
	env := newReportFixture(t)
	var mix struct{ Paths []string }
	raw, err := os.ReadFile("testdata/report/cache-mix.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &mix); err != nil || len(mix.Paths) == 0 {
		t.Fatalf("cache-mix.json: %v (%d paths)", err, len(mix.Paths))
	}
	open := func(budget int64) *Reporting {
		cfg := DefaultReportingConfig()
		cfg.CacheBytes, cfg.RequestsPerMinute = budget, 1_000_000
		r, err := NewReporting(context.Background(), cfg, ReportingDeps{Catalog: env.cat, Bucket: env.bucket, Clock: env.now, Reader: env.reader},
			func() bool { return true }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	const budget = 6 << 10
	small, large := open(budget), open(1<<30)
	ask := func(r *Reporting, path string) (int, []byte) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "192.0.2.1:4000"
		req.Header.Set("Authorization", "Bearer "+env.token)
		resp, err := r.App().Test(req, -1)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	for round := 0; round < 2; round++ { // the second round meets a warm (and churned) cache
		for _, path := range mix.Paths {
			ls, lb := ask(large, path)
			ss, sb := ask(small, path)
			if ls != http.StatusOK {
				t.Errorf("GET %s: %d %s", path, ls, lb)
				continue
			}
			if ss != ls || !bytes.Equal(sb, lb) {
				t.Errorf("GET %s with a %d-byte budget: %d %s\nwithout a limit: %d %s", path, budget, ss, sb, ls, lb)
			}
			if st := small.CacheStats(); st.Bytes > st.Limit {
				t.Fatalf("after GET %s the cache holds %d bytes, over its budget of %d", path, st.Bytes, st.Limit)
			}
		}
	}
	st, lst := small.CacheStats(), large.CacheStats()
	if st.Evictions+st.Refused == 0 || st.Entries == 0 {
		t.Errorf("the small cache never filled (%+v): the budget did not bind", st)
	}
	if lst.Evictions != 0 || lst.Hits == 0 {
		t.Errorf("the unlimited cache: %+v, want hits and no eviction", lst)
	}
	t.Logf("small cache %+v; unlimited %+v", st, lst)
}
