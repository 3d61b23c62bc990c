package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/storagetest"
)

const demoProject = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03"

// browserUA is what the load sends as User-Agent: a browser, not a bot.
const browserUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"

// trafficBatch is one batch of generated traffic with its fixed id.
type trafficBatch struct {
	id   string
	body []byte
}

// genTraffic builds a typical site's traffic as website batches of the
// demo project: visitors with one to three visits of a few pageviews,
// referrers, UTM tags and click ids, sign-ins (some on a shared browser),
// carts and orders. Every event has a fixed id and time, so two runs send
// exactly the same events. The batches are cut from a shuffled event list:
// events reach the processor out of time order, in batches of 1 to 99
// events; shuffle chooses the order and the cut.
func genTraffic(seed, shuffle uint64, events int, base time.Time) []trafficBatch {
	rng := rand.New(rand.NewPCG(seed, 99))
	referrers := []string{"", "", "", "https://www.google.com/", "https://duckduckgo.com/", "https://news.ycombinator.com/item?id=1",
		"https://www.facebook.com/", "https://chatgpt.com/", "https://shop.example/old"}
	tags := []string{"", "", "", "", "?utm_source=newsletter&utm_medium=email&utm_campaign=spring", "?gclid=abc123",
		"?utm_source=linkedin&utm_medium=paid_social", "?fbclid=xyz", "?utm_campaign=launch"}
	var evs []string
	n := 0
	for v := 0; n < events; v++ {
		anon := fmt.Sprintf("anon-%d-%d", seed, v)
		var user string
		if rng.IntN(10) == 0 {
			user = fmt.Sprintf("user-%d", rng.IntN(v/3+1)) // sometimes a second person on a browser
		}
		t := base.Add(time.Duration(rng.IntN(72*60)) * time.Minute)
		for visit := 0; visit < 1+rng.IntN(3) && n < events; visit++ {
			ref := referrers[rng.IntN(len(referrers))]
			tag := tags[rng.IntN(len(tags))]
			for pv := 0; pv < 2+rng.IntN(5) && n < events; pv++ {
				path := fmt.Sprintf("/p/%d", rng.IntN(300))
				if pv == 0 && rng.IntN(5) == 0 {
					path = "/pricing"
				}
				url := "https://shop.example" + path
				page := fmt.Sprintf(`{"url":%q,"title":"Page %s"}`, url, path)
				if pv == 0 {
					page = fmt.Sprintf(`{"url":%q,"title":"Landing","referrer":%q}`, url+tag, ref)
				}
				uid := ""
				if user != "" && visit > 0 {
					uid = fmt.Sprintf(`,"userId":%q`, user)
				}
				evs = append(evs, fmt.Sprintf(`{"id":%q,"name":"$pageview","time":%d,"anonymousId":%q%s,"page":%s}`,
					eventID(seed, n), t.UnixMilli(), anon, uid, page))
				n++
				t = t.Add(time.Duration(10+rng.IntN(300)) * time.Second)
				if n < events && rng.IntN(12) == 0 {
					evs = append(evs, fmt.Sprintf(`{"id":%q,"name":"cart_added","time":%d,"anonymousId":%q%s}`,
						eventID(seed, n), t.UnixMilli(), anon, uid))
					n++
					if n < events && rng.IntN(3) == 0 {
						evs = append(evs, fmt.Sprintf(`{"id":%q,"name":"order_completed","time":%d,"anonymousId":%q%s,"properties":{"total":%d.5,"currency":"EUR"}}`,
							eventID(seed, n), t.Add(time.Second).UnixMilli(), anon, uid, 10+rng.IntN(200)))
						n++
					}
				}
			}
			if user != "" && visit == 0 && n < events {
				evs = append(evs, fmt.Sprintf(`{"id":%q,"name":"$identify","time":%d,"anonymousId":%q,"userId":%q,"properties":{"name":"Person %s","email":"%s@example.com"}}`,
					eventID(seed, n), t.UnixMilli(), anon, user, user, user))
				n++
			}
			t = t.Add(time.Duration(31+rng.IntN(600)) * time.Minute)
		}
	}
	rng = rand.New(rand.NewPCG(shuffle, 3))
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	var out []trafficBatch
	for i, k := 0, 0; i < len(evs); k++ {
		n := 1 + rng.IntN(99)
		id := fmt.Sprintf("%08x-%04x-4000-8000-%012x", seed, shuffle, k)
		out = append(out, trafficBatch{id: id, body: batchBody(id, "full", evs[i:min(i+n, len(evs))]...)})
		i += n
	}
	return out
}

func eventID(seed uint64, n int) string {
	return fmt.Sprintf("%08x-1111-4000-8000-%012x", seed, n)
}

// sendTraffic sends every batch with 4 clients to *base, retrying each
// until it is accepted (202), across restarts of the server; sent counts
// the batches accepted.
func sendTraffic(t *testing.T, base *atomic.Pointer[string], batches []trafficBatch, sent *atomic.Int64) {
	t.Helper()
	work := make(chan trafficBatch)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				for attempt := 0; ; attempt++ {
					if attempt == 3000 {
						t.Errorf("batch %s was never accepted", b.id)
						return
					}
					code, _, resp, err := tryDo("POST", *base.Load()+"/v1/batch/"+demoWebsiteKey, b.body,
						"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
					if err == nil && code == 202 {
						sent.Add(1)
						break
					}
					if err == nil && code != 503 && code != 429 {
						t.Errorf("batch %s: unexpected %d %s", b.id, code, resp)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	for _, b := range batches {
		work <- b
	}
	close(work)
	wg.Wait()
}

// snapshotOf opens the current tables of a project in a data directory's
// object store, read as the reporting API reads them (cache: with a
// decoded-column cache).
// storeOf is the object store of a data directory, or the store of an
// s3:// URL (roles run apart).
func storeOf(data string) storage.Config {
	if strings.HasPrefix(data, "s3://") {
		return storage.Config{Store: data}
	}
	return storage.Config{Dir: filepath.Join(data, "objects")}
}

func snapshotOf(ctx context.Context, data, project string, cache bool) (*rollups.Snapshot, func(), error) {
	b, err := storage.Open(ctx, storeOf(data), nil)
	if err != nil {
		return nil, nil, err
	}
	rcfg := rollups.DefaultReaderConfig()
	rcfg.Freshness = 0
	if !cache {
		rcfg.CacheBytes = 0
	}
	rd, err := rollups.NewReader(b, rcfg, nil)
	if err == nil {
		var sn *rollups.Snapshot
		if sn, err = rd.Snapshot(ctx, project); err == nil {
			return sn, func() { b.Close() }, nil
		}
	}
	b.Close()
	return nil, nil, err
}

// tableRows reads every table of a project from a data directory's object
// store as sorted lines of all columns but those that record when a
// commit happened.
func tableRows(t *testing.T, data, project string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	sn, closeFn, err := snapshotOf(ctx, data, project, true)
	if err != nil {
		t.Fatalf("cannot read the tables of %s: %v", project, err)
	}
	defer closeFn()
	// Segment refs are drawn at provisioning: each data directory has its
	// own. Rows name segments by id instead.
	// The activity table's sets are of person numbers, which each
	// processor gives in the order it meets the persons: their sizes are
	// compared (the processor's tests check the sets).
	skip := map[string]bool{"segments.built_at": true, "segments.segment": true, "activity.people": true}
	ids := map[string]string{}
	err = sn.Scan(ctx, processor.TableSegments, rollups.ScanOptions{Columns: []string{"segment", "id"}}, func(bt rollups.Batch) error {
		for i := 0; i < int(bt.Record.NumRows()); i++ {
			ids[cell(bt.Record.Column(0), i)] = cell(bt.Record.Column(1), i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for name := range processor.Tables() {
		if name == processor.TableState {
			// The processor's own state, not facts: what it holds at the
			// last commit depends on when the commits came (a day that
			// went cold after the last one is written with the next).
			// Restarts restore from it, so the facts above check it; the
			// processor's tests compare it with a fold (checkState).
			continue
		}
		var rows []string
		err := sn.Scan(ctx, name, rollups.ScanOptions{}, func(bt rollups.Batch) error {
			rec := bt.Record
			for i := 0; i < int(rec.NumRows()); i++ {
				var sb strings.Builder
				for c, f := range rec.Schema().Fields() {
					// Revs of keyed tables count the commits that wrote
					// them, not the facts.
					if skip[name+"."+f.Name] || f.Name == rollups.RevColumn {
						continue
					}
					v := cell(rec.Column(c), i)
					if name == processor.TableMembers && f.Name == "segment" {
						v = "id:" + ids[v]
					}
					fmt.Fprintf(&sb, "%s=%s ", f.Name, v)
				}
				rows = append(rows, sb.String())
			}
			return nil
		})
		if err != nil {
			t.Fatalf("cannot scan %s: %v", name, err)
		}
		slices.Sort(rows)
		out[name] = rows
	}
	return out
}

// customersSegment is the segment customersDemo adds, and vipFlag the flag
// that tests it.
const (
	customersSegment = "0b0c0d0e-1f20-4a3b-8c4d-5e6f70818293"
	vipFlag          = "vip-banner"
)

// customersDemo writes the demo provisioning file with a segment of every
// customer and a flag that tests it, and returns its path.
func customersDemo(t *testing.T) string {
	t.Helper()
	return editedDemo(t, func(f map[string]any) {
		proj := f["organizations"].([]any)[0].(map[string]any)["projects"].([]any)[0].(map[string]any)
		proj["segments"] = append(proj["segments"].([]any), map[string]any{"id": customersSegment, "name": "Customers",
			"filters": []any{map[string]any{"field": "stage", "op": "is", "value": "customer"}}})
		proj["flags"] = append(proj["flags"].([]any), map[string]any{"key": vipFlag, "name": "VIP banner", "readBy": "both",
			"t": "b", "u": "b", "d": "off", "r": []any{map[string]any{"if": []any{[]any{"s", customersSegment}}, "x": "on"}}})
	})
}

// editedDemo writes the demo provisioning file as edit changes it (its
// JSON as maps and slices) and returns its path.
func editedDemo(t testing.TB, edit func(map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile(demoFile)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	edit(f)
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "provision.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func cell(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	if fb, ok := a.(*array.FixedSizeBinary); ok {
		return hex.EncodeToString(fb.Value(i))
	}
	return a.ValueStr(i)
}

// eventsStored counts the rows of the demo project's events table, 0
// before the first commit.
func eventsStored(data string) int {
	ctx := context.Background()
	sn, closeFn, err := snapshotOf(ctx, data, demoProject, false)
	if err != nil {
		return 0
	}
	defer closeFn()
	n := 0
	_ = sn.Scan(ctx, processor.TableEvents, rollups.ScanOptions{Columns: []string{"id"}}, func(bt rollups.Batch) error {
		n += int(bt.Record.NumRows())
		return nil
	})
	return n
}

// TestProcessorCrashCountsEqualUninterruptedRun sends 200,000 events
// through the real binary while it is SIGKILLed again and again (ingest
// and processor alike), and compares every table, row by row, with those
// of an uninterrupted run on the same input; then again with the roles
// apart and two processors sharing the partitions, SIGKILLed in turn.
func TestProcessorCrashCountsEqualUninterruptedRun(t *testing.T) {
	const events = 200_000
	// Visits reach up to about 4 days past base; events must not be in
	// the future (ingest would replace their times).
	base := time.Now().Add(-7 * 24 * time.Hour).Truncate(time.Hour)
	batches := genTraffic(1, 1, events, base)
	prov := customersDemo(t)

	// The uninterrupted run.
	clean := t.TempDir()
	p := startMF(t, clean, "serve", "--provision", prov, "--rate-limit-scale", "1000")
	var cur atomic.Pointer[string]
	cur.Store(&p.ingest)
	var sent atomic.Int64
	sendTraffic(t, &cur, batches, &sent)
	waitFor(t, 5*time.Minute, func() bool { return eventsStored(clean) == events })
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("exit %d on SIGTERM", c)
	}
	want := tableRows(t, clean, demoProject)

	// The crashing run: SIGKILL while the load is sent, and while the
	// processor works through what was accepted.
	crash := t.TempDir()
	p = startMF(t, crash, "serve", "--provision", prov, "--rate-limit-scale", "1000")
	addrs := []string{p.ingestAddr, p.apiAddr, p.admn}
	base2 := p.ingest
	cur.Store(&base2)
	sent.Store(0)
	done := make(chan struct{})
	go func() { defer close(done); sendTraffic(t, &cur, batches, &sent) }()
	kills := 0
	for _, frac := range []float64{0.2, 0.45, 0.7, 0.9} {
		waitFor(t, 5*time.Minute, func() bool { return float64(sent.Load()) >= frac*float64(len(batches)) })
		p.kill()
		kills++
		p = startMFAt(t, crash, addrs, "serve", "--rate-limit-scale", "1000")
	}
	<-done
	// Once more while the processor catches up.
	waitFor(t, 5*time.Minute, func() bool { return eventsStored(crash) > 0 })
	p.kill()
	kills++
	p = startMFAt(t, crash, addrs, "serve", "--rate-limit-scale", "1000")
	waitFor(t, 5*time.Minute, func() bool { return eventsStored(crash) == events })
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("exit %d on SIGTERM", c)
	}
	compareTables(t, "mf serve", want, tableRows(t, crash, demoProject), kills)
	t.Logf("%d events in %d batches; %d SIGKILLs; tables equal: %v", events, len(batches), kills, rowCounts(want))

	// The same with the roles apart: mf ingest and two mf process sharing
	// the log's partitions on an external log (a server this test runs,
	// reached over TCP) and one object store, the processors SIGKILLed in
	// turn while the load is sent and while they catch up.
	server := startLogServer(t)
	apart := storagetest.StartMinIO(t)
	shared := []string{"--log", server.ClientURL(), "--store", apart, "--rate-limit-scale", "1000"}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared[:4]...), prov)...); code != 0 {
		t.Fatalf("mf provision on the shared log: exit %d\n%s%s", code, out, errOut)
	}
	ing := startRole(t, "ingest", shared...)
	procs := []*mfProc{startRole(t, "process", shared...), startRole(t, "process", shared...)}
	cur.Store(&ing.ingest)
	sent.Store(0)
	done = make(chan struct{})
	go func() { defer close(done); sendTraffic(t, &cur, batches, &sent) }()
	kills = 0
	for i, frac := range []float64{0.25, 0.5, 0.75} {
		waitFor(t, 5*time.Minute, func() bool { return float64(sent.Load()) >= frac*float64(len(batches)) })
		procs[i%2].kill()
		kills++
		procs[i%2] = startRole(t, "process", shared...)
	}
	<-done
	waitFor(t, 5*time.Minute, func() bool { return eventsStored(apart) > 0 })
	procs[1].kill()
	kills++
	procs[1] = startRole(t, "process", shared...)
	waitFor(t, 5*time.Minute, func() bool { return eventsStored(apart) == events })
	for _, p := range append(procs, ing) {
		if c := p.stop(time.Minute); c != 0 {
			t.Fatalf("exit %d on SIGTERM", c)
		}
	}
	compareTables(t, "two mf process", want, tableRows(t, apart, demoProject), kills)
}

// compareTables compares the tables of a run with crashes with those of
// the uninterrupted run, row by row.
func compareTables(t *testing.T, run string, want, got map[string][]string, kills int) {
	t.Helper()
	for name, rows := range want {
		if len(rows) == 0 {
			t.Errorf("table %s is empty in the uninterrupted run", name)
		}
		g := got[name]
		if len(g) != len(rows) {
			t.Errorf("%s: table %s: %d rows after %d crashes, %d uninterrupted", run, name, len(g), kills, len(rows))
			continue
		}
		for i := range rows {
			if g[i] != rows[i] {
				t.Errorf("%s: table %s differs after %d crashes; first difference:\n got %s\nwant %s", run, name, kills, g[i], rows[i])
				break
			}
		}
	}
}

func rowCounts(m map[string][]string) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

// TestSegmentMembershipReachesFlags: a purchase processed by the binary
// makes its browser a member of a saved segment, and the flag service's
// lookup (POST /v1/flags/segments) answers it from the processor's tables:
// unavailable before the segment was ever built, then in for the buyer and
// not in for a browser that bought nothing or an unknown user, with
// refreshedAt.
func TestSegmentMembershipReachesFlags(t *testing.T) {
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", customersDemo(t))
	auth := []string{"Authorization", "Bearer " + demoSecretKey, "Content-Type", "application/json"}
	lookup := func() []map[string]any {
		code, _, body := do(t, "POST", p.ingest+"/v1/flags/segments",
			[]byte(`{"units":[{"anonymousId":"buyer-1"},{"anonymousId":"looker-1"},{"userId":"nobody"}]}`), auth...)
		if code != 200 {
			t.Fatalf("segments lookup: %d %s", code, body)
		}
		var out struct{ Units []map[string]any }
		if err := json.Unmarshal(body, &out); err != nil || len(out.Units) != 3 {
			t.Fatalf("segments lookup answered %s", body)
		}
		return out.Units
	}
	before := lookup()
	if un, _ := before[0]["unavailable"].([]any); len(un) == 0 {
		t.Fatalf("before anything was processed the segment should be unavailable: %v", before[0])
	}
	now := time.Now().UnixMilli()
	body := batchBody("0b0c0d0e-0000-4000-8000-000000000001", "full",
		fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"buyer-1","page":{"url":"https://shop.example/cart"}}`, now-2000),
		fmt.Sprintf(`{"name":"order_completed","time":%d,"anonymousId":"buyer-1","properties":{"total":42}}`, now-1000),
		fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"looker-1","page":{"url":"https://shop.example/"}}`, now-1000))
	code, _, resp := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
		"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
	if code != 202 {
		t.Fatalf("batch: %d %s", code, resp)
	}
	var units []map[string]any
	waitFor(t, time.Minute, func() bool {
		units = lookup()
		in, _ := units[0]["segments"].([]any)
		return len(in) == 1
	})
	for i, u := range units {
		if un, _ := u["unavailable"].([]any); len(un) != 0 {
			t.Errorf("unit %d: built segment answered unavailable: %v", i, u)
		}
		if at, _ := u["refreshedAt"].(float64); at < float64(now-60_000) {
			t.Errorf("unit %d: no refreshedAt: %v", i, u)
		}
	}
	for _, i := range []int{1, 2} {
		if in, _ := units[i]["segments"].([]any); len(in) != 0 {
			t.Errorf("unit %d is in a segment it should not be in: %v", i, units[i])
		}
	}
}

// TestReplayAnswersAsLive: the tables rebuilt by `mf replay` (through the
// admin API, from a day on, and directly from the log while mf is stopped)
// equal the live ones, and the same events delivered in another order and
// other batches build the same tables.
func TestReplayAnswersAsLive(t *testing.T) {
	const events = 20_000
	base := time.Now().Add(-7 * 24 * time.Hour).Truncate(time.Hour)
	prov := customersDemo(t)
	run := func(data string, shuffle uint64) *mfProc {
		p := startMF(t, data, "serve", "--provision", prov, "--rate-limit-scale", "1000")
		var cur atomic.Pointer[string]
		cur.Store(&p.ingest)
		var sent atomic.Int64
		sendTraffic(t, &cur, genTraffic(2, shuffle, events, base), &sent)
		waitFor(t, 2*time.Minute, func() bool { return eventsStored(data) == events })
		return p
	}
	same := func(what string, got, want map[string][]string) {
		t.Helper()
		for name, rows := range want {
			if !slices.Equal(got[name], rows) {
				t.Errorf("%s: table %s differs (%d rows, want %d)", what, name, len(got[name]), len(rows))
			}
		}
	}
	live := t.TempDir()
	p := run(live, 1)
	want := tableRows(t, live, demoProject)

	code, out, errOut := runMF(t, nil, "replay", "--admin-url", p.admin, "--project", demoProject)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d events", events)) {
		t.Fatalf("mf replay: exit %d\n%s%s", code, out, errOut)
	}
	same("replay through the admin API", tableRows(t, live, demoProject), want)
	from := base.Add(72 * time.Hour).Format(time.DateOnly)
	if code, out, errOut := runMF(t, nil, "replay", "--admin-url", p.admin, "--project", demoProject, "--from", from); code != 0 {
		t.Fatalf("mf replay --from %s: exit %d\n%s%s", from, code, out, errOut)
	}
	same("replay from "+from, tableRows(t, live, demoProject), want)
	for _, bad := range [][]string{{"--project", "00000000-0000-4000-8000-000000000000"}, {"--project", demoProject, "--from", "yesterday"}} {
		if code, _, errOut := runMF(t, nil, append([]string{"replay", "--admin-url", p.admin}, bad...)...); code != 1 || errOut == "" {
			t.Errorf("mf replay %v: exit %d %q, want 1 with a message", bad, code, errOut)
		}
	}
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("exit %d on SIGTERM", c)
	}
	if code, out, errOut := runMF(t, nil, "replay", "--data", live, "--project", demoProject, "--source", "log"); code != 0 {
		t.Fatalf("mf replay --source log: exit %d\n%s%s", code, out, errOut)
	}
	same("replay from the log", tableRows(t, live, demoProject), want)

	other := t.TempDir()
	p = run(other, 2)
	p.stop(time.Minute)
	same("the same events in another order", tableRows(t, other, demoProject), want)
	checkDuckDB(t, other, demoProject)
}

// duckTable is what DuckDB reads of one table (rollups/testdata/duckdb/tables.mjs).
type duckTable struct {
	Columns []struct{ Name, Type string }
	Count   string
	Sums    map[string]string
}

// checkDuckDB has DuckDB (npm @duckdb/node-api) read every live Parquet
// file of a project's tables straight from the object store's directory,
// and compares its row counts, column names and a few sums with what our
// reader computes from the same files.
func checkDuckDB(t *testing.T, data, project string) {
	t.Helper()
	ctx := context.Background()
	sn, closeFn, err := snapshotOf(ctx, data, project, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	files := map[string][]string{}
	for name, ts := range sn.Manifest().Tables {
		for part, fs := range ts.Partitions {
			for _, f := range fs {
				// The local store keeps object KEY at DIR/objects/KEY.
				p := filepath.Join(data, "objects", "objects", "rollups", project, "data", name, part, f.Name)
				if _, err := os.Stat(p); err != nil {
					t.Fatalf("live file of %s not where expected: %v", name, err)
				}
				files[name] = append(files[name], p)
			}
		}
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; the DuckDB check needs Node.js 18 or later with npm (Debian: apt-get install nodejs npm)", tool)
		}
	}
	const dir = "../../rollups/testdata/duckdb"
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api")); err != nil {
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install in %s failed: %v\n%s", dir, err, out)
		}
	}
	keys := map[string][]string{}
	for name, ts := range sn.Manifest().Tables {
		if len(ts.Key) > 0 {
			keys[name] = ts.Key
		}
	}
	in, _ := json.Marshal(map[string]any{"files": files, "keys": keys})
	cmd := exec.Command("node", "tables.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node tables.mjs failed: %v\n%s", err, stderr.String())
	}
	var duck map[string]duckTable
	if err := json.Unmarshal(out, &duck); err != nil {
		t.Fatalf("cannot decode DuckDB's answer %q: %v", out, err)
	}

	// Our side, from the same snapshot.
	counts := map[string]int{}
	want := map[string]map[string]int64{"events": {}, "visits": {}, "people": {}}
	visits := map[string]bool{}
	ids := map[string]bool{}
	for name := range files {
		err := sn.Scan(ctx, name, rollups.ScanOptions{}, func(bt rollups.Batch) error {
			rec := bt.Record
			col := func(n string) arrow.Array {
				for i, f := range rec.Schema().Fields() {
					if f.Name == n {
						return rec.Column(i)
					}
				}
				t.Fatalf("table %s has no column %s", name, n)
				return nil
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				counts[name]++
				switch name {
				case "events":
					if cell(col("name"), i) == "$pageview" {
						want["events"]["pageviews"]++
					}
					ids[cell(col("id"), i)] = true
					if !col("channel").IsNull(i) {
						v := cell(col("visit"), i)
						if v == "null" {
							v = cell(col("session_id"), i)
						}
						visits[v] = true
					}
				case "visits":
					want["visits"]["pageviews"] += int64Of(col("pageviews"), i)
					want["visits"]["events"] += int64Of(col("events"), i)
				case "people":
					want["people"]["orders"] += int64Of(col("orders"), i)
					want["people"]["value"] += int64Of(col("value"), i)
					if col("known").(*array.Boolean).Value(i) {
						want["people"]["known"]++
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want["events"]["distinct_ids"] = int64(len(ids))
	want["events"]["visits"] = int64(len(visits))
	for name, n := range counts {
		d, ok := duck[name]
		if !ok {
			t.Errorf("DuckDB did not read table %s", name)
			continue
		}
		if d.Count != fmt.Sprint(n) {
			t.Errorf("table %s: DuckDB counts %s rows, our reader %d", name, d.Count, n)
		}
		ts := sn.Manifest().Tables[name]
		if len(d.Columns) != len(ts.Columns) {
			t.Errorf("table %s: DuckDB sees %d columns, the manifest %d", name, len(d.Columns), len(ts.Columns))
		}
		for k, w := range want[name] {
			if d.Sums[k] != fmt.Sprint(w) {
				t.Errorf("table %s: DuckDB's %s is %s, ours %d", name, k, d.Sums[k], w)
			}
		}
	}
}

// int64Of reads an integer column of either width.
func int64Of(a arrow.Array, i int) int64 {
	if a.IsNull(i) {
		return 0
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i)
	case *array.Int32:
		return int64(c.Value(i))
	}
	panic(fmt.Sprintf("not an integer column: %s", a.DataType()))
}
