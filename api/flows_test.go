package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	adaKey  = "Bearer mf_pat_ada00001_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	ada4Key = "Bearer mf_pat_ada00004_DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDD"
	miaKey  = "Bearer mf_pat_mia00001_GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG"
	bobKey  = "Bearer mf_pat_bob00001_EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"
	adaID   = "70000000-0000-4000-8000-000000000001"
)

func TestProjectPaging(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	var ids []string
	path := "/api/v1/projects"
	var firstNext string
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 55 projects need")
		}
		status, _, body := env.send(t, "GET", path, miaKey, "")
		if status != 200 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		doc := decode(t, body)
		for _, d := range doc["data"].([]any) {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		next, _ := lookup(doc, "links.next")
		cur, _ := lookup(doc, "meta.nextCursor")
		path = ""
		if n, ok := next.(string); ok {
			u, err := url.Parse(n)
			if err != nil || u.Query().Get("cursor") != cur {
				t.Fatalf("links.next %q does not carry meta.nextCursor %v", n, cur)
			}
			path = u.RequestURI()
			if firstNext == "" {
				firstNext = path
			}
		} else if cur != nil {
			t.Fatalf("nextCursor %v without links.next", cur)
		}
	}
	if len(ids) != 55 {
		t.Fatalf("%d projects, want 55", len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("project %s listed twice", id)
		}
		seen[id] = true
	}
	// Projects without a creation moment come last (five of them: q00,
	// q05, … have createdAt null).
	for _, id := range ids[50:] {
		if !strings.HasPrefix(id, "20000000-0000-4000-8000-0000000002") {
			t.Errorf("project %s on the last page; want the five without createdAt", id)
		}
	}
	// A cursor is bound to its list and its caller: another user's list,
	// a modified cursor and an invented one give 422.
	cur := strings.TrimPrefix(firstNext, "/api/v1/projects?cursor=")
	for _, tc := range []struct{ name, auth, cursor string }{
		{"another user's list", adaKey, cur},
		{"modified", miaKey, cur[:len(cur)-2] + "AA"},
		{"invented", miaKey, "bm90LWEtY3Vyc29y"},
		{"not base64", miaKey, "%%%"},
	} {
		status, _, body := env.send(t, "GET", "/api/v1/projects?cursor="+url.QueryEscape(tc.cursor), tc.auth, "")
		if status != 422 || !strings.Contains(string(body), `"parameter":"cursor"`) {
			t.Errorf("%s cursor: %d %s, want 422 naming cursor", tc.name, status, body)
		}
	}
}

func TestPersonRateLimitSharedByCredentials(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	for i := 0; i < 120; i++ {
		auth := adaKey
		if i%2 == 1 {
			auth = ada4Key
		}
		status, hdr, body := env.send(t, "GET", "/api/v1/projects", auth, "")
		if status != 200 {
			t.Fatalf("request %d: %d %s", i+1, status, body)
		}
		want := "\"person\";r=" + strconv.Itoa(119-i) + ";t=60"
		if got := hdr.Get("RateLimit"); got != want {
			t.Fatalf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
	}
	env.clock.Add(int64(20 * time.Second))
	status, hdr, body := env.send(t, "GET", "/api/v1/projects", ada4Key, "")
	if status != 429 || hdr.Get("Retry-After") != "40" || hdr.Get("RateLimit") != "\"person\";r=0;t=40" {
		t.Fatalf("121st request: %d Retry-After %q RateLimit %q %s", status, hdr.Get("Retry-After"), hdr.Get("RateLimit"), body)
	}
	// Another person is not affected.
	if status, _, _ := env.send(t, "GET", "/api/v1/projects", bobKey, ""); status != 200 {
		t.Fatalf("another person: %d", status)
	}
	env.clock.Add(int64(40 * time.Second))
	if status, hdr, _ := env.send(t, "GET", "/api/v1/projects", adaKey, ""); status != 200 || hdr.Get("RateLimit") != "\"person\";r=119;t=60" {
		t.Fatalf("after the window: %d %q", status, hdr.Get("RateLimit"))
	}
}

func TestNetworkOf(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
	} {
		if got := networkOf(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("networkOf(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestRefusedCredentialsPerNetwork serves over a real listener so that
// callers have addresses (127.0.0.1 and 127.0.0.2 are both loopback).
func TestRefusedCredentialsPerNetwork(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.rep.App().Listener(ln)
	t.Cleanup(func() { env.rep.App().Shutdown() })
	get := func(from, auth string) (int, http.Header) {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
		cl := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/v1/projects", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("GET from %s: %v", from, err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	bad := "Bearer mf_pat_zzz00001_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"
	for i := 0; i < 60; i++ {
		auth := bad
		if i%3 == 0 {
			auth = "" // a missing credential is refused too
		}
		if status, _ := get("127.0.0.1", auth); status != 401 {
			t.Fatalf("refused credential %d: %d", i+1, status)
		}
	}
	status, hdr := get("127.0.0.1", bad)
	if status != 429 || hdr.Get("Retry-After") != "60" || hdr.Get("RateLimit") != "\"refused-credentials\";r=0;t=60" {
		t.Fatalf("61st refused credential: %d Retry-After %q RateLimit %q", status, hdr.Get("Retry-After"), hdr.Get("RateLimit"))
	}
	// A valid credential from the same network still passes.
	if status, _ := get("127.0.0.1", bobKey); status != 200 {
		t.Fatalf("valid credential from the network: %d", status)
	}
	// Another address has a budget of its own.
	if status, _ := get("127.0.0.2", bad); status != 401 {
		t.Fatalf("bad credential from another address: %d, want 401", status)
	}
	env.clock.Add(int64(time.Minute))
	if status, _ := get("127.0.0.1", bad); status != 401 {
		t.Fatalf("after a minute: %d, want 401", status)
	}
}

func TestAppTokens(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	ctx := context.Background()
	if _, err := env.rep.IssueAppTokens(ctx, "70000000-0000-4000-8000-000000000999", "dash"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown user: %v, want ErrNotFound", err)
	}
	if _, err := env.rep.IssueAppTokens(ctx, adaID, "bad name"); !errors.Is(err, ErrRefused) {
		t.Fatalf("bad app name: %v, want ErrRefused", err)
	}
	tok, err := env.rep.IssueAppTokens(ctx, adaID, "dash")
	if err != nil {
		t.Fatal(err)
	}
	if !tok.AccessExpiresAt.Equal(testNow.Add(time.Hour)) || !tok.RefreshExpiresAt.Equal(testNow.Add(30*24*time.Hour)) {
		t.Fatalf("lifetimes: %v %v", tok.AccessExpiresAt, tok.RefreshExpiresAt)
	}
	status, _, body := env.send(t, "GET", "/api/v1/projects", "Bearer "+tok.AccessToken, "")
	if status != 200 || !strings.Contains(string(body), `"total":4`) {
		t.Fatalf("access token: %d %s", status, body)
	}
	// A tampered token is refused.
	tampered := tok.AccessToken[:len(tok.AccessToken)-3] + "AAA"
	if status, _, _ := env.send(t, "GET", "/api/v1/projects", "Bearer "+tampered, ""); status != 401 {
		t.Fatalf("tampered token: %d", status)
	}
	// The access token expires after an hour; the refresh token renews it
	// once.
	env.clock.Add(int64(time.Hour))
	if status, _, body := env.send(t, "GET", "/api/v1/projects", "Bearer "+tok.AccessToken, ""); status != 401 || !strings.Contains(string(body), "expired") {
		t.Fatalf("expired access token: %d %s", status, body)
	}
	tok2, err := env.rep.RefreshAppTokens(ctx, tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := env.send(t, "GET", "/api/v1/projects", "Bearer "+tok2.AccessToken, ""); status != 200 {
		t.Fatalf("renewed token: %d", status)
	}
	if _, err := env.rep.RefreshAppTokens(ctx, tok.RefreshToken); !errors.Is(err, ErrRefused) {
		t.Fatalf("reused refresh token: %v, want ErrRefused", err)
	}
	if _, err := env.rep.RefreshAppTokens(ctx, "mf_ort_never-issued"); !errors.Is(err, ErrRefused) {
		t.Fatalf("unknown refresh token: %v, want ErrRefused", err)
	}
	if err := env.rep.RevokeAppRefreshToken(ctx, tok2.RefreshToken); err != nil {
		t.Fatal(err)
	}
	if _, err := env.rep.RefreshAppTokens(ctx, tok2.RefreshToken); !errors.Is(err, ErrRefused) {
		t.Fatalf("revoked refresh token: %v, want ErrRefused", err)
	}
	tok3, err := env.rep.IssueAppTokens(ctx, adaID, "dash")
	if err != nil {
		t.Fatal(err)
	}
	env.clock.Add(int64(30 * 24 * time.Hour))
	if _, err := env.rep.RefreshAppTokens(ctx, tok3.RefreshToken); !errors.Is(err, ErrRefused) {
		t.Fatalf("expired refresh token: %v, want ErrRefused", err)
	}
	// App tokens share the person's budget with API keys.
	_, hdr, _ := env.send(t, "GET", "/api/v1/projects", adaKey, "")
	if !strings.HasPrefix(hdr.Get("RateLimit"), "\"person\";r=119") {
		t.Fatalf("new window after 30 days: %q", hdr.Get("RateLimit"))
	}
}

func TestAppTokenKeySharedAcrossProcesses(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	tok, err := env.rep.IssueAppTokens(context.Background(), adaID, "dash")
	if err != nil {
		t.Fatal(err)
	}
	// A second API process on the same bucket reads the same secret.
	other, err := NewReporting(context.Background(), DefaultReportingConfig(),
		ReportingDeps{Catalog: env.cat, Bucket: env.bucket, Clock: env.now}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	env2 := &testEnv{rep: other}
	if status, _, body := env2.send(t, "GET", "/api/v1/projects", "Bearer "+tok.AccessToken, ""); status != 200 {
		t.Fatalf("token on another process: %d %s", status, body)
	}
	if _, err := other.RefreshAppTokens(context.Background(), tok.RefreshToken); err != nil {
		t.Fatalf("refresh on another process: %v", err)
	}
}

func TestRecentAccess(t *testing.T) {
	cfg := DefaultReportingConfig()
	cfg.RecentAccess = 5
	env := newTestEnv(t, cfg)
	ctx := context.Background()
	env.send(t, "GET", "/api/v1/projects?cursor=secret-looking&x=1", adaKey, "")
	env.send(t, "GET", "/api/v1/projects/20000000-0000-4000-8000-000000000001?fields[projects]=name", adaKey, "")
	env.send(t, "GET", "/api/v1/projects/20000000-0000-4000-8000-000000000999", adaKey, "")
	env.send(t, "GET", "/api/v1/projects", "Bearer mf_pat_ada00002_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "")
	env.send(t, "GET", "/api/v1/projects", "Bearer mf_pat_ada00003_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "")
	env.send(t, "GET", "/api/v1/projects", bobKey, "")
	recs, err := env.rep.RecentAccess(ctx, adaID)
	if err != nil {
		t.Fatal(err)
	}
	want := []AccessRecord{
		{Credential: "mf_pat_ada00003", Endpoint: "GET /projects", Status: 401, Outcome: "key_expired"},
		{Credential: "mf_pat_ada00002", Endpoint: "GET /projects", Status: 401, Outcome: "key_revoked"},
		{Credential: "mf_pat_ada00001", Endpoint: "GET /projects/{project_id}", Project: "20000000-0000-4000-8000-000000000999", Status: 404, Outcome: "project_not_found"},
		{Credential: "mf_pat_ada00001", Endpoint: "GET /projects/{project_id}", Project: "20000000-0000-4000-8000-000000000001", Status: 200, Outcome: "ok"},
		{Credential: "mf_pat_ada00001", Endpoint: "GET /projects", Status: 422, Outcome: "unprocessable_parameter"},
	}
	checkRecords(t, recs, want)
	// The ring keeps RecentAccess records.
	env.send(t, "GET", "/api/v1/projects", adaKey, "")
	recs, _ = env.rep.RecentAccess(ctx, adaID)
	if len(recs) != 5 || recs[0].Status != 200 || recs[3].Outcome != "project_not_found" || recs[4].Project != "20000000-0000-4000-8000-000000000001" {
		t.Fatalf("ring after one more call: %+v", recs)
	}
	// Records reach the object store; a new process reads them back.
	if err := env.rep.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := NewReporting(ctx, cfg, ReportingDeps{Catalog: env.cat, Bucket: env.bucket, Clock: env.now}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	again, err := other.RecentAccess(ctx, adaID)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, again, recs)
	if b, _ := other.RecentAccess(ctx, "70000000-0000-4000-8000-000000000002"); len(b) != 1 || b[0].Credential != "mf_pat_bob00001" {
		t.Fatalf("bob's records: %+v", b)
	}
}

func checkRecords(t *testing.T, got, want []AccessRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if !g.At.Equal(testNow) {
			t.Errorf("record %d at %v", i, g.At)
		}
		g.At, g.App = time.Time{}, ""
		w := want[i]
		w.At, w.App = time.Time{}, ""
		if g != w {
			t.Errorf("record %d: %+v, want %+v", i, g, w)
		}
		if strings.Contains(g.Endpoint, "?") || strings.Contains(g.Endpoint, "secret") {
			t.Errorf("record %d keeps query parameters: %q", i, g.Endpoint)
		}
	}
}
