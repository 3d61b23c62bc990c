package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/ingest/internal/flagstack"
)

// The client's tests talk to the real /v1 service (flagstack: embedded
// log, catalog, object store, the ingest server) through a recording
// reverse proxy, which can also answer in the service's place to inject
// faults (a 503, a dropped connection).

const (
	testKey     = "mf_clientt1_Client-Test-Secret-Key_0123456789"
	testProject = "e2000000-0000-4000-8000-000000000001"
	wait        = 30 * time.Second
)

var compileCache = wazero.NewCompilationCache()

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func startStack(t testing.TB, opts flagstack.Options) *flagstack.Stack {
	t.Helper()
	opts.Dir = t.TempDir()
	opts.CompilationCache = compileCache
	if opts.Provision == nil {
		opts.Provision = readTestdata(t, "provision.json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := flagstack.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	deadline := time.Now().Add(wait)
	for s.Flags.Version() < s.Catalog.State().Version() {
		if time.Now().After(deadline) {
			t.Fatal("documents not compiled")
		}
		time.Sleep(time.Millisecond)
	}
	return s
}

// seen is one request that went through the proxy.
type seen struct {
	method, path, ifNoneMatch string
	body                      []byte
	status                    int // 0: the proxy dropped the connection
}

// proxy records requests to the stack; fault, when set, may answer in the
// service's place (returning true).
type proxy struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
	// fault, when it returns an answer, answers in the service's place
	// with status (0: the connection is dropped); the request is recorded
	// first.
	fault func(r *http.Request) (answer func(http.ResponseWriter), status int)
}

func newProxy(t testing.TB, s *flagstack.Stack) *proxy {
	t.Helper()
	target, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &proxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := seen{method: r.Method, path: r.URL.Path, ifNoneMatch: r.Header.Get("If-None-Match"), body: body}
		p.mu.Lock()
		fault := p.fault
		p.mu.Unlock()
		if fault != nil {
			if answer, status := fault(r); answer != nil {
				rec.status = status
				p.add(rec)
				answer(w)
				return
			}
		}
		sw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(sw, r)
		rec.status = sw.status
		p.add(rec)
	}))
	t.Cleanup(p.Close)
	return p
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

func (p *proxy) add(s seen) {
	p.mu.Lock()
	p.reqs = append(p.reqs, s)
	p.mu.Unlock()
}

func (p *proxy) setFault(f func(r *http.Request) (func(http.ResponseWriter), int)) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
}

// requests returns the requests seen so far to path.
func (p *proxy) requests(path string) []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seen
	for _, r := range p.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// waitRequests waits until n requests to path were seen.
func (p *proxy) waitRequests(t testing.TB, path string, n int) []seen {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if r := p.requests(path); len(r) >= n {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests to %s seen, want %d", len(p.requests(path)), path, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// dropConnection closes the connection without an answer.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func statuses(reqs []seen) []int {
	var out []int
	for _, r := range reqs {
		out = append(out, r.status)
	}
	return out
}

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func testConfig(url string, clock *fakeClock) Config {
	cfg := DefaultConfig(url, testKey)
	cfg.Clock = clock.now
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func newClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// The client fetches the document on the first read and evaluates
// locally (the specification's bucket vector: seed 3f9a1c0b7e2d, unit
// user-42, share bucket 6137 < 6138); it asks again only once the
// document is PollInterval old, with If-None-Match (304), and a change
// reaches it on its next poll.
func TestClientPollsWithETag(t *testing.T) {
	s := startStack(t, flagstack.Options{})
	p := newProxy(t, s)
	clock := newFakeClock()
	c := newClient(t, testConfig(p.URL, clock))
	ctx := context.Background()

	d, err := c.Evaluate(ctx, "new-checkout", Facts{UserID: "user-42"})
	if err != nil || d.Variant != "on" || d.Reason != "SPLIT" || d.Rule != 0 {
		t.Fatalf("new-checkout for user-42: %+v %v", d, err)
	}
	d, _ = c.Evaluate(ctx, "pricing", Facts{UserID: "u-1", Properties: map[string]any{"plan": "pro"}})
	if d.Variant != "discount" || string(d.Value) != `{"price":8}` || d.Reason != "TARGETING_MATCH" {
		t.Fatalf("pricing: %+v", d)
	}
	if v := c.Variant(ctx, "no-such-flag", Facts{}, "fallback"); v != "fallback" {
		t.Fatalf("unknown flag: %q", v)
	}
	gets := p.requests("/v1/flags")
	if len(gets) != 1 || gets[0].ifNoneMatch != "" || gets[0].status != 200 {
		t.Fatalf("first fetch: %+v", gets)
	}
	etag := c.DocumentETag()
	if !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("ETag %q", etag)
	}

	clock.advance(29 * time.Second)
	c.Evaluate(ctx, "new-checkout", Facts{UserID: "user-42"})
	time.Sleep(20 * time.Millisecond) // a refresh, if one were (wrongly) started, would show up
	if n := len(p.requests("/v1/flags")); n != 1 {
		t.Fatalf("%d fetches before the poll interval", n)
	}
	clock.advance(time.Second)
	c.Evaluate(ctx, "new-checkout", Facts{UserID: "user-42"})
	gets = p.waitRequests(t, "/v1/flags", 2)
	if gets[1].ifNoneMatch != etag || gets[1].status != 304 {
		t.Fatalf("poll: If-None-Match %q status %d, want %q and 304", gets[1].ifNoneMatch, gets[1].status, etag)
	}

	// Change the flag: the next poll, with the old ETag, gets it.
	file := strings.Replace(string(readTestdata(t, "provision.json")), `"sh": 6138`, `"sh": 6137`, 1)
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res, err := s.Catalog.Apply(actx, []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	for s.Flags.Version() < res.Version {
		time.Sleep(time.Millisecond)
	}
	clock.advance(30 * time.Second)
	c.Evaluate(ctx, "new-checkout", Facts{UserID: "user-42"})
	gets = p.waitRequests(t, "/v1/flags", 3)
	if gets[2].ifNoneMatch != etag || gets[2].status != 200 {
		t.Fatalf("poll after the change: %+v", gets[2])
	}
	deadline := time.Now().Add(wait)
	for c.DocumentETag() == etag {
		if time.Now().After(deadline) {
			t.Fatal("the client did not take the new document")
		}
		time.Sleep(time.Millisecond)
	}
	if d, _ := c.Evaluate(ctx, "new-checkout", Facts{UserID: "user-42"}); d.Variant != "off" || d.Reason != "DEFAULT" || d.Rule != 0 {
		t.Fatalf("after the change (bucket 6137 is outside a share of 6137): %+v", d)
	}
}

// PollInterval below 10 s is refused.
func TestClientPollIntervalFloor(t *testing.T) {
	cfg := DefaultConfig("http://127.0.0.1:1", testKey)
	cfg.PollInterval = 9 * time.Second
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "at least 10s") {
		t.Fatalf("PollInterval 9s: %v", err)
	}
	cfg.PollInterval = MinPollInterval
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
}

// A failed refresh (a 503, a dropped connection) keeps the last document;
// a 401 stops fetching until the client is built again, still keeping it.
func TestClientKeepsDocumentAndStops(t *testing.T) {
	s := startStack(t, flagstack.Options{})
	p := newProxy(t, s)
	clock := newFakeClock()
	c := newClient(t, testConfig(p.URL, clock))
	ctx := context.Background()
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if d, err := c.Evaluate(ctx, "new-checkout", Facts{UserID: "user-42"}); err != nil || d.Variant != "on" {
			t.Fatalf("%s: %+v %v", when, d, err)
		}
	}
	p.setFault(func(*http.Request) (func(http.ResponseWriter), int) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"message":"maintenance"}`, http.StatusServiceUnavailable)
		}, 503
	})
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("a 503 refresh reported no error")
	}
	check("after a 503")
	p.setFault(func(*http.Request) (func(http.ResponseWriter), int) { return dropConnection, 0 })
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("a dropped connection reported no error")
	}
	check("after a dropped connection")
	p.setFault(nil)

	// Revoke the key: the next poll gets a real 401, and the client stops.
	file := strings.Replace(string(readTestdata(t, "provision.json")), `"mode": "full",`, `"mode": "full", "revoked": true,`, 1)
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if _, err := s.Catalog.Apply(actx, []byte(file)); err != nil {
		t.Fatal(err)
	}
	before := len(p.requests("/v1/flags"))
	if err := c.Refresh(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("refresh with a revoked key: %v, want ErrStopped", err)
	}
	if got := p.requests("/v1/flags"); len(got) != before+1 || got[len(got)-1].status != 401 {
		t.Fatalf("requests %+v", got[before:])
	}
	check("after the 401")
	clock.advance(time.Hour)
	check("an hour after the 401")
	if err := c.Refresh(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("refresh after stopping: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := len(p.requests("/v1/flags")); n != before+1 {
		t.Fatalf("%d fetches after the 401, want none", n-before-1)
	}
}

// A batch is resent byte for byte under the same batch id after a 503
// (waiting its Retry-After) and after a dropped connection (waiting a
// full-jitter backoff), until the service accepts it.
func TestClientBatchRetry(t *testing.T) {
	s := startStack(t, flagstack.Options{})
	p := newProxy(t, s)
	cfg := testConfig(p.URL, newFakeClock())
	cfg.Clock = nil // the service checks event times against its own clock
	c := newClient(t, cfg)
	var waits []time.Duration
	var bounds []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	c.jitter = func(max time.Duration) time.Duration { bounds = append(bounds, max); return max / 2 }
	var n atomic.Int32
	p.setFault(func(*http.Request) (func(http.ResponseWriter), int) {
		switch n.Add(1) {
		case 1:
			return func(w http.ResponseWriter) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusServiceUnavailable)
			}, 503
		case 2:
			return dropConnection, 0
		}
		return nil, 0
	})
	rec, err := c.SendBatch(context.Background(), []Event{{Name: "signup", UserID: "user-42", Properties: map[string]any{"plan": "pro"}}}, "")
	if err != nil || rec.Accepted != 1 {
		t.Fatalf("receipt %+v, %v", rec, err)
	}
	posts := p.requests("/v1/batch")
	if len(posts) != 3 || posts[0].status != 503 || posts[1].status != 0 || posts[2].status != 202 {
		t.Fatalf("attempts %v (statuses), waits %v", statuses(posts), waits)
	}
	for _, a := range posts[1:] {
		if !bytes.Equal(a.body, posts[0].body) {
			t.Fatalf("a retry changed the body:\n%s\n%s", posts[0].body, a.body)
		}
	}
	var b struct {
		Batch string `json:"batch"`
	}
	if json.Unmarshal(posts[0].body, &b); b.Batch != rec.Batch {
		t.Fatalf("receipt batch %s, sent %s", rec.Batch, b.Batch)
	}
	// Retry-After 7 s before the first retry; a full-jitter wait below
	// min(cap, base×2^1) before the second.
	if len(waits) != 2 || waits[0] != 7*time.Second || len(bounds) != 1 || bounds[0] != 2*cfg.RetryBase || waits[1] != cfg.RetryBase {
		t.Fatalf("waits %v, jitter bounds %v", waits, bounds)
	}

	// A 400 is never retried.
	p.setFault(nil)
	before := len(p.requests("/v1/batch"))
	_, err = c.SendBatch(context.Background(), []Event{{Name: "$bogus"}}, "")
	var serr *StatusError
	if !errors.As(err, &serr) || serr.Status != 400 || serr.Code != "validation_failed" {
		t.Fatalf("invalid batch: %v", err)
	}
	if n := len(p.requests("/v1/batch")) - before; n != 1 {
		t.Fatalf("a 400 was sent %d times", n)
	}
}

// A 429 from the service is retried after its Retry-After, up to
// MaxAttempts; then the client gives up with ErrGaveUp.
func TestClientRateLimitedGivesUp(t *testing.T) {
	s := startStack(t, flagstack.Options{
		Clock: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) },
		Ingest: func(c *ingest.Config) {
			c.Limits.SecretKeyEvents.Amount, c.Limits.SecretKeyEvents.Per = 1, time.Hour
		},
	})
	p := newProxy(t, s)
	cfg := testConfig(p.URL, newFakeClock())
	cfg.MaxAttempts = 3
	c := newClient(t, cfg)
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	ev := []Event{{Name: "signup", Time: time.Date(2026, 3, 1, 11, 59, 0, 0, time.UTC)}}
	if _, err := c.SendBatch(context.Background(), ev, ""); err != nil {
		t.Fatal(err) // spends the budget
	}
	_, err := c.SendBatch(context.Background(), ev, "")
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("err %v, want ErrGaveUp", err)
	}
	posts := p.requests("/v1/batch")
	if len(posts) != 4 || posts[1].status != 429 || posts[3].status != 429 {
		t.Fatalf("attempts %+v", posts)
	}
	if len(waits) != 2 || waits[0] < time.Second || waits[0] != waits[1] || waits[0]%time.Second != 0 {
		t.Fatalf("waits %v, want the Retry-After seconds twice", waits)
	}
}

// The derived batch id vectors (testdata/derived-batch-ids.json, computed
// with Python's hashlib), and a resend under the same idempotency key is
// stored once.
func TestDerivedBatchIDs(t *testing.T) {
	var vectors []struct{ Key, Batch string }
	if err := json.Unmarshal(readTestdata(t, "derived-batch-ids.json"), &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		if got := DerivedBatchID(v.Key); got != v.Batch {
			t.Errorf("DerivedBatchID(%q) = %s, want %s", v.Key, got, v.Batch)
		}
	}
	if len(vectors) < 5 {
		t.Fatal("too few vectors")
	}

	s := startStack(t, flagstack.Options{})
	cfg := testConfig(s.URL, newFakeClock())
	cfg.Clock = nil
	c := newClient(t, cfg)
	ev := []Event{{Name: "order_completed", UserID: "user-42", Properties: map[string]any{"total": 12.5}}}
	first, err := c.SendBatch(context.Background(), ev, "order-1001")
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.SendBatch(context.Background(), ev, "order-1001")
	if err != nil {
		t.Fatal(err)
	}
	if first.Batch != DerivedBatchID("order-1001") || second != first {
		t.Fatalf("receipts %+v and %+v", first, second)
	}
}

// Lookups made within one tick share one request (at most 100 units per
// request); answers are cached for SegmentCacheTTL; a flag whose rules
// test segments looks its unit up by itself.
func TestClientSegmentLookupsCombined(t *testing.T) {
	s := startStack(t, flagstack.Options{})
	p := newProxy(t, s)
	clock := newFakeClock()
	cfg := testConfig(p.URL, clock)
	cfg.SegmentTick = 50 * time.Millisecond
	c := newClient(t, cfg)
	ctx := context.Background()
	lookup := func(n int, prefix string) []Membership {
		out := make([]Membership, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := c.Membership(ctx, Unit{UserID: prefix + string(rune('a'+i%26)) + strings.Repeat("x", i/26)})
				if err != nil {
					t.Error(err)
				}
				out[i] = m
			}()
		}
		wg.Wait()
		return out
	}
	ms := lookup(30, "u-")
	posts := p.requests("/v1/flags/segments")
	if len(posts) != 1 || strings.Count(string(posts[0].body), "userId") != 30 {
		t.Fatalf("%d requests for 30 lookups of one tick: %+v", len(posts), posts)
	}
	// The service answers every ref unavailable until the processor
	// provides membership.
	if len(ms[0].Unavailable) != 1 || len(ms[0].Segments) != 0 || ms[0].RefreshedAt != nil {
		t.Fatalf("membership %+v", ms[0])
	}
	lookup(30, "u-")
	if n := len(p.requests("/v1/flags/segments")); n != 1 {
		t.Fatalf("cached lookups sent %d more requests", n-1)
	}
	clock.advance(cfg.SegmentCacheTTL)
	lookup(150, "v-")
	if n := len(p.requests("/v1/flags/segments")); n != 3 {
		t.Fatalf("150 lookups: %d requests, want 2 more", n-1)
	}

	// beta-banner is "on" for units not in the segment; with the segment
	// unavailable the condition is false: the default.
	before := len(p.requests("/v1/flags/segments"))
	d, err := c.Evaluate(ctx, "beta-banner", Facts{AnonymousID: "visitor-1"})
	if err != nil || d.Variant != "off" || d.Reason != "DEFAULT" {
		t.Fatalf("beta-banner: %+v %v", d, err)
	}
	if n := len(p.requests("/v1/flags/segments")) - before; n != 1 {
		t.Fatalf("evaluating a segment flag sent %d lookups", n)
	}
	// Segments given by the caller are used as they are.
	ref := ms[0].Unavailable[0]
	d, _ = c.Evaluate(ctx, "beta-banner", Facts{AnonymousID: "visitor-2", Segments: &Membership{}})
	if d.Variant != "on" {
		t.Fatalf("beta-banner outside %s: %+v", ref, d)
	}
	d, _ = c.Evaluate(ctx, "beta-banner", Facts{AnonymousID: "visitor-2", Segments: &Membership{Segments: []string{ref}}})
	if d.Variant != "off" {
		t.Fatalf("beta-banner inside %s: %+v", ref, d)
	}
}

// Tracked events are sent in batches: on Flush, and on Close.
func TestClientTrackAndFlush(t *testing.T) {
	s := startStack(t, flagstack.Options{})
	p := newProxy(t, s)
	cfg := testConfig(p.URL, newFakeClock())
	cfg.Clock = nil
	cfg.FlushInterval = time.Hour
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.Track(Event{Name: "page_built", Properties: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	posts := p.requests("/v1/batch")
	if len(posts) != 1 || posts[0].status != 202 || strings.Count(string(posts[0].body), "page_built") != 3 {
		t.Fatalf("batches %+v", posts)
	}
	c.Track(Event{Name: "shutdown"})
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	posts = p.requests("/v1/batch")
	if len(posts) != 2 || !strings.Contains(string(posts[1].body), `"shutdown"`) {
		t.Fatalf("Close did not send the queued event: %+v", posts)
	}
	if err := c.Track(Event{Name: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Track after Close: %v", err)
	}
}
