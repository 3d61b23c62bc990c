package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
	"github.com/mfhq/mf/wasm"
)

// The handler tests run the real service on the real embedded log, the
// real catalog and a local-directory bucket, provisioned from
// testdata/http/catalog.json.

const testUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"

type testEnv struct {
	srv    *Server
	log    *eventlog.Log
	cat    *catalog.Catalog
	bucket storage.Bucket
	clock  atomic.Int64 // epoch ms; 0 means time.Now
}

func (e *testEnv) now() time.Time {
	if ms := e.clock.Load(); ms != 0 {
		return time.UnixMilli(ms)
	}
	return time.Now()
}

func newTestEnv(t testing.TB, cfg Config) *testEnv { return newTestEnvN(t, cfg, 0) }

// caseProjectsFile provisions n extra projects, each with the four sources
// of caseKeys under keys caseKey(i, …), so that table cases that share a
// batch id do not meet in one project's idempotency window.
func caseProjectsFile(n int) []byte {
	var projects []string
	for i := 0; i < n; i++ {
		var srcs []string
		for j, kind := range []string{"website/full", "website/consentless", "server/full", "server/consentless"} {
			k, m, _ := strings.Cut(kind, "/")
			srcs = append(srcs, fmt.Sprintf(`{"id":"00000000-0000-4000-9000-%06d%06d","name":"s","kind":%q,"mode":%q,"key":%q}`,
				i, j, k, m, caseKey(i, kind)))
		}
		projects = append(projects, fmt.Sprintf(`{"id":"00000000-0000-4000-a000-%012d","slug":"c%d","name":"case %d","timezone":"UTC","reportingCurrency":"EUR","sources":[%s]}`,
			i, i, i, strings.Join(srcs, ",")))
	}
	return []byte(fmt.Sprintf(`{"organizations":[{"id":"00000000-0000-4000-b000-000000000001","slug":"cases","name":"Cases","plan":"pro","projects":[%s]}]}`,
		strings.Join(projects, ",")))
}

func caseKey(i int, kind string) string {
	return fmt.Sprintf("mf_c%05d%s_k", i, map[string]string{"website/full": "wf", "website/consentless": "wc",
		"server/full": "sf", "server/consentless": "sc"}[kind])
}

func newTestEnvN(t testing.TB, cfg Config, caseProjects int) *testEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := apptest.Start(t, apptest.Options{Provision: []string{"testdata/http/catalog.json"}})
	lg, cat, b, logger := st.Log, st.Catalog, st.Bucket, st.Logger
	if caseProjects > 0 {
		st.Apply(t, "the case projects", caseProjectsFile(caseProjects))
	}
	env := &testEnv{log: lg, cat: cat, bucket: b}
	srv, err := NewServer(ctx, cfg, Deps{Catalog: cat, Log: lg.Publisher(), Bucket: b, Clock: env.now}, logger)
	if err != nil {
		t.Fatalf("cannot build the server: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	env.srv = srv
	return env
}

// unlimited is a Config whose rate limits never refuse, for table tests
// that send many requests from one address.
func unlimited() Config {
	cfg := DefaultConfig()
	big := limit{1e12, time.Second}
	cfg.Limits = Limits{big, big, big, big, big, big, big, big}
	return cfg
}

// send runs one request through the Fiber app and returns the answer.
func (e *testEnv) send(t testing.TB, method, path string, body []byte, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if _, ok := headers["User-Agent"]; !ok {
		req.Header.Set("User-Agent", testUA)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.App().Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

func (e *testEnv) lastSeq(t testing.TB) uint64 {
	t.Helper()
	n, err := e.log.LastSeq(context.Background(), eventlog.TopicBatches)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *testEnv) record(t testing.TB, seq uint64) *records.Batch {
	t.Helper()
	m, err := e.log.GetMsg(context.Background(), eventlog.TopicBatches, seq)
	if err != nil {
		t.Fatalf("cannot read batch %d back from the log: %v", seq, err)
	}
	rec, err := records.Decode(m.Payload)
	if err != nil {
		t.Fatalf("stored batch %d does not decode: %v", seq, err)
	}
	return rec
}

// TestBatchCasesThroughHandler sends every case of testdata/batch through
// the real HTTP handler and checks the answer and what reached the log.
func TestBatchCasesThroughHandler(t *testing.T) {
	cases := loadBatchCases(t, "testdata/batch")
	env := newTestEnvN(t, unlimited(), len(cases))
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			env.clock.Store(c.Request.ReceivedAt)
			key := caseKey(i, c.Request.Source.Kind+"/"+c.Request.Source.Mode)
			headers := map[string]string{}
			for k, v := range c.Request.Headers {
				headers[k] = v
			}
			path := "/v1/batch/" + key
			if c.Request.Source.Kind == "server" {
				path = "/v1/batch"
				headers["Authorization"] = "Bearer " + key
			}
			before := env.lastSeq(t)
			status, hdr, body := env.send(t, "POST", path, c.Body, headers)
			if hdr.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("answer without CORS headers")
			}
			w := &c.Want
			if status != w.Status {
				t.Fatalf("%s\nstatus %d %s, want %d", c.Comment, status, body, w.Status)
			}
			after := env.lastSeq(t)
			if status != 202 {
				var p Problem
				if err := json.Unmarshal(body, &p); err != nil {
					t.Fatalf("error body %s: %v", body, err)
				}
				if p.Code != w.Code {
					t.Fatalf("%s\ncode %s (%s), want %s", c.Comment, p.Code, p.Detail, w.Code)
				}
				var paths, want []string
				for _, e := range p.Errors {
					paths = append(paths, e.Path)
				}
				for _, e := range w.Errors {
					want = append(want, e.Path)
				}
				if strings.Join(paths, ",") != strings.Join(want, ",") {
					t.Fatalf("%s\nerror paths %q, want %q", c.Comment, paths, want)
				}
				if after != before {
					t.Fatalf("a refused batch reached the log")
				}
				return
			}
			var got records.Receipt
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if w.Receipt != nil && got != *w.Receipt {
				t.Fatalf("%s\nreceipt %+v, want %+v", c.Comment, got, *w.Receipt)
			}
			if got.Accepted == 0 {
				if after != before {
					t.Fatalf("a batch with nothing kept reached the log")
				}
				return
			}
			if after != before+1 {
				t.Fatalf("log grew by %d messages, want 1", after-before)
			}
			rec := env.record(t, after)
			if len(rec.Events) != got.Accepted {
				t.Fatalf("receipt accepted %d, log holds %d events", got.Accepted, len(rec.Events))
			}
			if w.Record != nil {
				raw, _ := json.Marshal(rec)
				if err := matchJSON(decodeAny(t, w.Record), decodeAny(t, raw), "record"); err != nil {
					t.Fatalf("%s\n%v\nrecord: %s", c.Comment, err, raw)
				}
			}
		})
	}
}

// TestHTTPCases runs testdata/http/cases.json: keys, origins, CORS, the
// receipt reasons and the answers outside the API.
func TestHTTPCases(t *testing.T) {
	env := newTestEnv(t, unlimited())
	raw, err := os.ReadFile("testdata/http/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string
		Method  string
		Path    string
		Headers map[string]string
		Body    *string
		Want    struct {
			Status  int
			Code    string
			Message bool
			Headers map[string]string
			Receipt *struct {
				Accepted, Dropped int
				Reason            string
			}
			Stored *bool
		}
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var body []byte
			if c.Body != nil {
				body = []byte(*c.Body)
				if *c.Body == "$valid" {
					body = []byte(fmt.Sprintf(`{"v":1,"batch":"aaaaaaaa-0000-4000-8000-%012d","mode":"consentless","events":[{"name":"$pageview","page":{"url":"https://shop.example/"}}]}`, i))
				}
			}
			before := env.lastSeq(t)
			status, hdr, out := env.send(t, c.Method, c.Path, body, c.Headers)
			if status != c.Want.Status {
				t.Fatalf("status %d %s, want %d", status, out, c.Want.Status)
			}
			for k, v := range c.Want.Headers {
				if hdr.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, hdr.Get(k), v)
				}
			}
			var m map[string]any
			if len(out) > 0 {
				if err := json.Unmarshal(out, &m); err != nil {
					t.Fatalf("body is not JSON: %s", out)
				}
			}
			if c.Want.Message {
				if _, ok := m["message"].(string); !ok {
					t.Errorf("body %s has no message", out)
				}
			}
			if c.Want.Code != "" {
				if m["code"] != c.Want.Code || m["detail"] == nil {
					t.Errorf("body %s, want code %s with a detail", out, c.Want.Code)
				}
			}
			if r := c.Want.Receipt; r != nil {
				if m["accepted"] != float64(r.Accepted) || m["dropped"] != float64(r.Dropped) || (r.Reason != "" && m["reason"] != r.Reason) || (r.Reason == "" && m["reason"] != nil) {
					t.Errorf("receipt %s, want %+v", out, *r)
				}
			}
			if c.Want.Stored != nil {
				if grew := env.lastSeq(t) > before; grew != *c.Want.Stored {
					t.Errorf("stored = %v, want %v", grew, *c.Want.Stored)
				}
			}
		})
	}
}

// TestPayloadTooLarge: a body over 1 MiB is refused with 413 and a message,
// CORS headers included; exactly 1 MiB is read. Over a real listener, since
// the web server refuses the body before the app sees it.
func TestPayloadTooLarge(t *testing.T) {
	env := newTestEnv(t, unlimited())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.App().Listener(ln)
	t.Cleanup(func() { env.srv.App().Shutdown() })
	url := "http://" + ln.Addr().String() + "/v1/batch/mf_webfull1_k"
	post := func(body []byte) (int, http.Header, []byte) {
		resp, err := http.Post(url, "text/plain", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, out
	}
	status, hdr, out := post(bytes.Repeat([]byte(" "), maxBatchBody+1))
	if status != 413 || hdr.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(string(out), `"message"`) {
		t.Fatalf("over 1 MiB: %d %v %s", status, hdr, out)
	}
	status, _, out = post(bytes.Repeat([]byte(" "), maxBatchBody))
	if status != 400 {
		t.Fatalf("exactly 1 MiB of white space: %d %s, want 400 (read, then refused as not a batch)", status, out)
	}
}

// TestIdempotency: a batch id is stored once per project; a resend, even
// with another body, gets the first receipt; concurrent sends store once.
func TestIdempotency(t *testing.T) {
	env := newTestEnv(t, unlimited())
	first := []byte(`{"v":1,"batch":"0d0e0f10-1112-4314-9516-171819202122","mode":"full","events":[{"name":"a"},{"name":"$identify"}]}`)
	other := []byte(`{"v":1,"batch":"0D0E0F10-1112-4314-9516-171819202122","mode":"full","events":[{"name":"a"},{"name":"b"},{"name":"c"}]}`)
	auth := map[string]string{"Authorization": "Bearer mf_srvfull1_k"}
	before := env.lastSeq(t)
	_, _, r1 := env.send(t, "POST", "/v1/batch", first, auth)
	st, _, r2 := env.send(t, "POST", "/v1/batch", other, auth)
	if st != 202 {
		t.Fatalf("resend: %d %s", st, r2)
	}
	if !strings.Contains(string(r2), `"accepted":2`) || !strings.Contains(string(r2), `"0D0E0F10-1112-4314-9516-171819202122"`) {
		t.Fatalf("resend under the same id got %s, want the first receipt %s (echoing the id as sent)", r2, r1)
	}
	if n := env.lastSeq(t) - before; n != 1 {
		t.Fatalf("two sends of one batch id stored %d messages", n)
	}
	// The same id in another project is another batch.
	st, _, _ = env.send(t, "POST", "/v1/batch", first, map[string]string{"Authorization": "Bearer mf_srvallw1_k"})
	if st != 202 || env.lastSeq(t)-before != 2 {
		t.Fatalf("same id in another project not stored on its own")
	}
	// Concurrent sends.
	body := []byte(`{"v":1,"batch":"99999999-1112-4314-9516-171819202122","mode":"full","events":[{"name":"a"}]}`)
	before = env.lastSeq(t)
	var wg sync.WaitGroup
	answers := make([]string, 8)
	for i := range answers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _, out := env.send(t, "POST", "/v1/batch", body, auth)
			answers[i] = string(out)
		}(i)
	}
	wg.Wait()
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Fatalf("concurrent sends got different receipts: %q", answers)
		}
	}
	if n := env.lastSeq(t) - before; n != 1 {
		t.Fatalf("8 concurrent sends stored %d messages", n)
	}
}

// TestAllowance: an organization with a monthly allowance of 10 events
// keeps the first events of the batch that crosses it, then nothing with
// reason allowance_exhausted; resends are not counted twice; a new month
// starts afresh.
func TestAllowance(t *testing.T) {
	env := newTestEnv(t, unlimited())
	env.clock.Store(time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC).UnixMilli())
	auth := map[string]string{"Authorization": "Bearer mf_srvallw1_k"}
	batch := func(n int, id int) []byte {
		evs := strings.Repeat(`{"name":"e"},`, n)
		return []byte(fmt.Sprintf(`{"v":1,"batch":"bbbbbbbb-0000-4000-8000-%012d","mode":"full","events":[%s]}`, id, evs[:len(evs)-1]))
	}
	steps := []struct {
		n, id int
		want  string
	}{
		{6, 1, `"accepted":6,"dropped":0}`},
		{6, 1, `"accepted":6,"dropped":0}`}, // resend: same receipt, not counted again
		{6, 2, `"accepted":4,"dropped":2}`}, // crosses the allowance: first events kept
		{1, 3, `"accepted":0,"dropped":1,"reason":"allowance_exhausted"}`},
	}
	for i, s := range steps {
		_, _, out := env.send(t, "POST", "/v1/batch", batch(s.n, s.id), auth)
		if !strings.HasSuffix(string(out), s.want) {
			t.Fatalf("step %d: %s, want …%s", i, out, s.want)
		}
	}
	env.clock.Store(time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC).UnixMilli())
	_, _, out := env.send(t, "POST", "/v1/batch", batch(3, 4), auth)
	if !strings.HasSuffix(string(out), `"accepted":3,"dropped":0}`) {
		t.Fatalf("new month: %s", out)
	}
}

// TestRateLimits: each budget of the Limits table refuses once spent with
// 429 rate_limited and Retry-After, charged per event.
func TestRateLimits(t *testing.T) {
	cfg := unlimited()
	cfg.Limits.WebsiteKeyEvents = limit{10, time.Minute}
	cfg.Limits.SecretKeyEvents = limit{20, time.Minute}
	cfg.Limits.BatchPerAddress = limit{30, time.Second}
	env := newTestEnv(t, cfg)
	env.clock.Store(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixMilli())
	mk := func(n, id int) []byte {
		evs := strings.Repeat(`{"name":"e"},`, n)
		return []byte(fmt.Sprintf(`{"v":1,"batch":"cccccccc-0000-4000-8000-%012d","mode":"consentless","events":[%s]}`, id, evs[:len(evs)-1]))
	}
	// 9 events, then a 5-event batch still passes (1 left), then refused.
	for i, want := range []int{202, 202, 429} {
		n := []int{9, 5, 1}[i]
		st, hdr, out := env.send(t, "POST", "/v1/batch/mf_webfull1_k", mk(n, i), nil)
		if st != want {
			t.Fatalf("website batch %d: %d %s, want %d", i, st, out, want)
		}
		if st == 429 {
			if !strings.Contains(string(out), `"rate_limited"`) || hdr.Get("Retry-After") == "" || hdr.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("429 without code, Retry-After or CORS: %v %s", hdr, out)
			}
			if ra, _ := strconv.Atoi(hdr.Get("Retry-After")); ra < 1 || ra > 60 {
				t.Fatalf("Retry-After %q", hdr.Get("Retry-After"))
			}
		}
	}
	// The website budget counts per key and client network: another key is
	// not affected.
	if st, _, _ := env.send(t, "POST", "/v1/batch/mf_webcons1_k", mk(1, 10), nil); st != 202 {
		t.Fatalf("another website key refused")
	}
	// An unreadable batch costs one.
	auth := map[string]string{"Authorization": "Bearer mf_srvfull1_k"}
	for i := 0; i < 20; i++ {
		if st, _, _ := env.send(t, "POST", "/v1/batch", []byte("nope"), auth); st != 400 {
			t.Fatalf("unreadable batch %d: %d, want 400 until the budget is spent", i, st)
		}
	}
	if st, _, _ := env.send(t, "POST", "/v1/batch", []byte("nope"), auth); st != 429 {
		t.Fatalf("21st unreadable batch: %d, want 429", st)
	}
	// The per-address budget before the key check: 30 requests per second
	// from one address, whatever the key.
	for i := 0; ; i++ {
		st, _, _ := env.send(t, "POST", "/v1/batch/mf_unknown1_k", []byte("{}"), nil)
		if st == 429 {
			if i < 30-3-1-20-1 {
				t.Fatalf("address budget refused after %d requests", i)
			}
			break
		}
		if i > 40 {
			t.Fatal("address budget never refused")
		}
	}
	// A second later the address budget refilled.
	env.clock.Store(env.clock.Load() + 1000)
	if st, _, _ := env.send(t, "POST", "/v1/batch/mf_unknown1_k", []byte("{}"), nil); st != 401 {
		t.Fatalf("after refill: %d, want 401", st)
	}
}

// TestSecretKeyExposure: a secret key seen with Origin or Sec-Fetch-Site
// is marked exposed durably in the catalog; batches still go through.
func TestSecretKeyExposure(t *testing.T) {
	env := newTestEnv(t, unlimited())
	body := []byte(`{"v":1,"batch":"dddddddd-0000-4000-8000-000000000001","mode":"full","events":[{"name":"e"}]}`)
	if env.cat.State().SecretKeyExposed("00000000-0000-4000-8000-000000000107") {
		t.Fatal("key exposed before any browser request")
	}
	st, _, _ := env.send(t, "POST", "/v1/batch", body, map[string]string{"Authorization": "Bearer mf_srvexpo1_k", "Sec-Fetch-Site": "cross-site"})
	if st != 202 {
		t.Fatalf("exposed key refused on the batch endpoint: %d", st)
	}
	if !env.cat.State().SecretKeyExposed("00000000-0000-4000-8000-000000000107") {
		t.Fatal("secret key sent with Sec-Fetch-Site not marked exposed")
	}
	// A secret key in a path from a browser is refused and marked too.
	st, _, _ = env.send(t, "POST", "/v1/batch/mf_srvfull1_k", body, map[string]string{"Origin": "https://shop.example"})
	if st != 403 || !env.cat.State().SecretKeyExposed("00000000-0000-4000-8000-000000000102") {
		t.Fatalf("secret key in a browser path: %d, exposed=%v", st, env.cat.State().SecretKeyExposed("00000000-0000-4000-8000-000000000102"))
	}
}

// TestEvaluatorModuleServed: the browser module is served at a versioned
// URL, compressed as the client accepts, cached immutably.
func TestEvaluatorModuleServed(t *testing.T) {
	env := newTestEnv(t, unlimited())
	st, hdr, _ := env.send(t, "GET", "/v1/evaluator/latest.wasm", nil, nil)
	loc := hdr.Get("Location")
	if st != 302 || !strings.HasPrefix(loc, "/v1/evaluator/") || !strings.HasSuffix(loc, ".wasm") {
		t.Fatalf("latest: %d %q", st, loc)
	}
	mod := wasm.Module()
	for _, tc := range []struct{ accept, enc string }{{"br, gzip", "br"}, {"gzip", "gzip"}, {"", ""}} {
		st, hdr, body := env.send(t, "GET", loc, nil, map[string]string{"Accept-Encoding": tc.accept})
		if st != 200 || hdr.Get("Content-Type") != "application/wasm" || hdr.Get("Content-Encoding") != tc.enc ||
			!strings.Contains(hdr.Get("Cache-Control"), "immutable") || hdr.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("Accept-Encoding %q: %d %v", tc.accept, st, hdr)
		}
		want := map[string][]byte{"br": mod.Brotli, "gzip": mod.Gzip, "": mod.Raw}[tc.enc]
		if !bytes.Equal(body, want) {
			t.Fatalf("Accept-Encoding %q: body of %d bytes is not the module's %d", tc.accept, len(body), len(want))
		}
	}
	if st, _, _ := env.send(t, "GET", "/v1/evaluator/0000.wasm", nil, nil); st != 404 {
		t.Fatalf("unknown version: %d", st)
	}
}

// TestSinkUnavailable: when the log cannot take a batch, the answer is 503
// sink_unavailable with Retry-After, and nothing is stored.
func TestSinkUnavailable(t *testing.T) {
	env := newTestEnv(t, unlimited())
	if err := env.log.Close(); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"v":1,"batch":"eeeeeeee-0000-4000-8000-000000000001","mode":"full","events":[{"name":"e"}]}`)
	st, hdr, out := env.send(t, "POST", "/v1/batch", body, map[string]string{"Authorization": "Bearer mf_srvfull1_k"})
	if st != 503 || !strings.Contains(string(out), `"sink_unavailable"`) || hdr.Get("Retry-After") == "" || hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("log closed: %d %v %s", st, hdr, out)
	}
}

// TestIdempotencyAcrossProcesses: two intake servers on one log (as two
// `mf ingest` processes share a cluster) store a batch sent to both once,
// and the second answers with the first's receipt.
func TestIdempotencyAcrossProcesses(t *testing.T) {
	env := newTestEnv(t, unlimited())
	logger := apptest.Logger()
	b := apptest.OpenBucket(t, filepath.Join(t.TempDir(), "objects"))
	other, err := NewServer(context.Background(), unlimited(), Deps{Catalog: env.cat, Log: env.log.Publisher(), Bucket: b}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	auth := map[string]string{"Authorization": "Bearer mf_srvfull1_k"}
	before := env.lastSeq(t)
	first := []byte(`{"v":1,"batch":"12121212-0000-4000-8000-000000000001","mode":"full","events":[{"name":"a"},{"name":"b"}]}`)
	second := []byte(`{"v":1,"batch":"12121212-0000-4000-8000-000000000001","mode":"full","events":[{"name":"a"}]}`)
	_, _, r1 := env.send(t, "POST", "/v1/batch", first, auth)
	req := httptest.NewRequest("POST", "/v1/batch", bytes.NewReader(second))
	req.Header.Set("Authorization", auth["Authorization"])
	resp, err := other.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 202 || string(r2) != string(r1) {
		t.Fatalf("second process answered %d %s, want the first receipt %s", resp.StatusCode, r2, r1)
	}
	if n := env.lastSeq(t) - before; n != 1 {
		t.Fatalf("one batch id sent to two processes stored %d times", n)
	}
}
