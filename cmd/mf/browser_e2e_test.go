//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mfhq/mf/ingest/client/browser"
)

// The browser client's end-to-end tests: headless Chromium opens pages of
// a test server on site origins that are not loopback names (shop.test and
// other.test, mapped to 127.0.0.1 by --host-resolver-rules), the pages load
// mf.mjs from the real mf serve and run a scenario (testdata/browser), and
// the test checks what mf stored (reporting API), what the pages found on
// the device, and what the client sent (through the test server's proxy
// to mf, which can also answer 503).

const demoWebsite = "mf_demoweb1_Website-Key_1"

// siteServer serves the test pages, receives their reports and proxies
// /proxy/ to mf's ingest listener.
type siteServer struct {
	t        *testing.T
	port     string
	reports  chan map[string]any
	mu       sync.Mutex
	sent     [][]byte // batch bodies that reached the proxy
	fail503  int      // batch posts still to answer with 503
	mfIngest string
	corpus   []byte // the cases of the corpus scenario
}

func newSiteServer(t *testing.T, mfIngest string) *siteServer {
	s := &siteServer{t: t, reports: make(chan map[string]any, 16), mfIngest: mfIngest}
	target, _ := url.Parse(mfIngest)
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /s/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.ServeFile(w, r, "testdata/browser/page.html")
	})
	mux.HandleFunc("GET /scenarios.mjs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		http.ServeFile(w, r, "testdata/browser/scenarios.mjs")
	})
	mux.HandleFunc("GET /corpus.json", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b := s.corpus
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
		var rep map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &rep); err != nil {
			rep = map[string]any{"error": "unreadable report: " + err.Error()}
		}
		s.reports <- rep
	})
	mux.HandleFunc("/proxy/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/proxy")
		if r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/v1/batch/") {
			body, _ := io.ReadAll(r.Body)
			s.mu.Lock()
			s.sent = append(s.sent, body)
			fail := s.fail503 > 0
			if fail {
				s.fail503--
			}
			s.mu.Unlock()
			if fail {
				w.Header().Set("Access-Control-Allow-Origin", "*")
				w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(503)
				io.WriteString(w, `{"message":"maintenance"}`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		proxy.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot listen: %v", err)
	}
	_, s.port, _ = net.SplitHostPort(l.Addr().String())
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// takeSent returns the batch bodies the proxy saw since the last call.
func (s *siteServer) takeSent() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.sent
	s.sent = nil
	return b
}

// browse opens url in a fresh headless Chromium (with extra preferences
// in its profile) and returns the page's report.
func (s *siteServer) browse(url string, prefs map[string]any) map[string]any {
	t := s.t
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for the browser tests: apt-get install chromium")
	}
	profile := t.TempDir()
	if prefs != nil {
		os.MkdirAll(filepath.Join(profile, "Default"), 0o755)
		b, _ := json.Marshal(prefs)
		if err := os.WriteFile(filepath.Join(profile, "Default", "Preferences"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out syncBuffer
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--host-resolver-rules=MAP shop.test 127.0.0.1, MAP other.test 127.0.0.1",
		// Headless Chromium names itself HeadlessChrome, which mf counts
		// as a bot (nothing kept): the pages present a desktop browser.
		"--user-agent=Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
		"--user-data-dir="+profile, url)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start chromium: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	select {
	case rep := <-s.reports:
		if e, ok := rep["error"]; ok {
			t.Fatalf("%s: the page failed: %v", url, e)
		}
		return rep
	case err := <-exited:
		t.Fatalf("chromium exited (%v) before %s reported; output:\n%s", err, url, out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not report within 90 s; chromium output:\n%s", url, out.String())
	}
	return nil
}

// screenshot saves a PNG of url after its scenario reported.
func (s *siteServer) screenshot(url, file string) {
	t := s.t
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--host-resolver-rules=MAP shop.test 127.0.0.1", "--user-data-dir="+t.TempDir(),
		"--user-agent=Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
		"--window-size=900,900", "--virtual-time-budget=60000", "--run-all-compositor-stages-before-draw", "--screenshot="+abs, url)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("screenshot: %v\n%s", err, out)
	}
	select { // the page may have reported before Chromium exited
	case <-s.reports:
	default:
	}
	s.takeSent()
	t.Logf("screenshot of %s in %s", url, abs)
}

// storedEvent is an event of the reporting API's raw event list.
type storedEvent struct {
	Name, Kind, Path string
	Consented        bool
	Visit            *string
	Person           *struct{ Ref string }
}

// storedEvents lists the demo project's events of the last hour.
func storedEvents(t *testing.T, p *mfProc) []storedEvent {
	t.Helper()
	var all []storedEvent
	next := p.api + "/api/v1/projects/" + demoProject + "/events?period=1h"
	for next != "" {
		code, h, b := do(t, "GET", next, nil, "Authorization", "Bearer "+demoPAT)
		if code == 429 {
			wait, _ := time.ParseDuration(h.Get("Retry-After") + "s")
			time.Sleep(wait)
			continue
		}
		if code != 200 {
			t.Fatalf("raw events: %d %s", code, b)
		}
		var doc struct {
			Data []struct {
				Attributes storedEvent `json:"attributes"`
			}
			Links struct{ Next string }
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("raw events: %v", err)
		}
		for _, d := range doc.Data {
			all = append(all, d.Attributes)
		}
		next = doc.Links.Next
	}
	return all
}

// sentEvents decodes batch bodies into their modes and events.
func sentEvents(t *testing.T, bodies [][]byte) (modes []string, events []map[string]any) {
	t.Helper()
	for _, b := range bodies {
		var batch struct {
			Mode    string
			Context map[string]any
			Events  []map[string]any
		}
		if err := json.Unmarshal(b, &batch); err != nil {
			t.Fatalf("a batch body is not JSON: %v: %s", err, b)
		}
		modes = append(modes, batch.Mode)
		events = append(events, batch.Events...)
	}
	return modes, events
}

func TestBrowserClient(t *testing.T) {
	mf := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	site := newSiteServer(t, mf.ingest)
	// The demo's website source allows listed origins only: add the test
	// site (shop.test), not other.test.
	raw, err := os.ReadFile(demoFile)
	if err != nil {
		t.Fatal(err)
	}
	shop := "http://shop.test:" + site.port
	prov := bytes.Replace(raw, []byte(`"https://shop.example"`), []byte(`"https://shop.example", "`+shop+`"`), 1)
	if code, _, body := do(t, "PUT", mf.admin+"/admin/v1/provision", prov); code != 200 {
		t.Fatalf("provision: %d %s", code, body)
	}
	mfq := url.QueryEscape(mf.ingest)
	page := func(origin, scenario, endpoint string, extra ...string) string {
		u := origin + "/s/" + scenario + "/?key=" + demoWebsite + "&mf=" + mfq + "&endpoint=" + url.QueryEscape(endpoint)
		return u + strings.Join(extra, "")
	}
	proxy := shop + "/proxy"
	want := map[string][]string{} // path prefix → "name/consented" in order of sending

	t.Run("consentless", func(t *testing.T) {
		rep := site.browse(page(shop, "consentless", proxy), nil)
		checkEmptyStorage(t, "consentless", rep["storage"])
		if f, _ := json.Marshal(rep["flag"]); string(f) != `{"reason":"STATIC","variant":"off"}` {
			t.Errorf("dark-mode in consentless mode: %s, want the values view's off", f)
		}
		modes, events := sentEvents(t, site.takeSent())
		var names []string
		for _, e := range events {
			names = append(names, e["name"].(string))
			for _, k := range []string{"anonymousId", "sessionId", "userId"} {
				if _, ok := e[k]; ok {
					t.Errorf("consentless event %v carries %s", e["name"], k)
				}
			}
		}
		if strings.Join(modes, ",") != "consentless" {
			t.Errorf("modes sent %v, want one consentless batch", modes)
		}
		sent, _ := json.Marshal(events)
		if bytes.Contains(sent, []byte("hunter2")) || bytes.Contains(sent, []byte("secret query")) || bytes.Contains(sent, []byte("red shoes")) {
			t.Errorf("an input value or search was sent: %s", sent)
		}
		if got := strings.Join(names, ","); got != "$pageview,signup,$autocapture,$autocapture" {
			t.Errorf("sent %s, want $pageview, signup and two $autocapture (click, the text field's change; never the password)", got)
		}
		for _, e := range events {
			if e["name"] == "$autocapture" {
				p := e["properties"].(map[string]any)
				if p["$event_type"] == "click" && (p["$el_text"] != "Buy now" || p["$el_id"] != "buy") {
					t.Errorf("click autocapture %v", p)
				}
			}
		}
		want["/s/consentless/"] = []string{"$pageview/false", "signup/false", "$autocapture/false", "$autocapture/false"}
	})

	t.Run("consent", func(t *testing.T) {
		keys := []string{"new-checkout", "dark-mode", "hero-test", "nope"}
		kq, _ := json.Marshal(keys)
		rep := site.browse(page(shop, "consent", proxy, "&flags="+url.QueryEscape(string(kq))), nil)
		checkEmptyStorage(t, "pending", rep["pending"])
		checkEmptyStorage(t, "denied", rep["denied"])
		if loaded := fmt.Sprint(rep["resources"]); !strings.Contains(loaded, "/v1/sdk/"+browser.Version()+"/evaluator.wasm") {
			t.Errorf("a page that evaluates flags loaded %s, want the evaluator of its own version", loaded)
		}
		anon, _ := rep["anonymousId"].(string)
		g, _ := rep["granted"].(map[string]any)
		if local, _ := g["local"].(map[string]any); anon == "" || len(local) != 1 || local["mf:"+demoWebsite] == nil {
			t.Errorf("after the grant the device holds %v, want one localStorage entry with the anonymous id", g)
		}
		modes, events := sentEvents(t, site.takeSent())
		exposures := 0
		for _, e := range events {
			full := e["anonymousId"] == anon && e["sessionId"] != nil
			switch e["name"] {
			case "$exposure":
				exposures++
				if !full || e["userId"] != "user-42" {
					t.Errorf("exposure without ids: %v", e)
				}
			case "after-consent", "$identify", "$search":
				if !full {
					t.Errorf("%v sent without the anonymous id and visit: %v", e["name"], e)
				}
			default:
				if e["anonymousId"] != nil {
					t.Errorf("%v sent with an anonymous id: %v", e["name"], e)
				}
			}
		}
		if exposures != 1 {
			t.Errorf("%d exposures of new-checkout sent, want 1 (read twice after consent); modes %v; events %v", exposures, modes, events)
		}
		// mf.flag answers as mf eval does for the same flags and facts.
		body := []byte(`{"anonymousId":"` + anon + `","identified":true}`)
		code, _, b := do(t, "POST", mf.ingest+"/v1/flags/"+demoWebsite, body, "Content-Type", "text/plain;charset=UTF-8", "Origin", shop)
		var answer struct {
			Document struct {
				Flags map[string]json.RawMessage
			}
			Membership struct {
				Segments, Unavailable []string
			}
		}
		if code != 200 || json.Unmarshal(b, &answer) != nil {
			t.Fatalf("POST /v1/flags: %d %s", code, b)
		}
		facts, _ := json.Marshal(map[string]any{"id": anon, "userId": "user-42", "properties": map[string]any{"plan": "pro"},
			"segments": map[string]any{"in": nonNil(answer.Membership.Segments), "unavailable": nonNil(answer.Membership.Unavailable)}})
		flags := rep["flags"].(map[string]any)
		for _, k := range keys {
			got, _ := json.Marshal(flags[k])
			def, ok := answer.Document.Flags[k]
			if !ok {
				if string(got) != `{"errorCode":"FLAG_NOT_FOUND","reason":"ERROR"}` {
					t.Errorf("flag %s is not in the document; mf.flag gives %s", k, got)
				}
				continue
			}
			code, out, errOut := runMF(t, []byte(`{"flag":`+string(def)+`,"facts":`+string(facts)+"}\n"), "eval")
			if code != 0 || !sameJSONText(out, string(got)) {
				t.Errorf("flag %s: mf.flag %s, mf eval %s (%d %s)", k, got, out, code, errOut)
			}
		}
		want["/s/consent/"] = []string{"$pageview/false", "before-consent/false", "$identify/true", "after-consent/true", "$search/true", "$exposure/true", "after-denial/false"}
	})

	t.Run("spa", func(t *testing.T) {
		rep := site.browse(page(shop, "spa", mf.ingest), nil)
		if loaded := fmt.Sprint(rep["resources"]); strings.Contains(loaded, "evaluator") || !strings.Contains(loaded, "/v1/sdk/mf.mjs") {
			t.Errorf("a page that reads no flag loaded %s, want mf.mjs and no evaluator", loaded)
		}
		want["/s/spa/"] = []string{"$pageview/false", "$pageview/false"}
	})

	t.Run("pagehide", func(t *testing.T) {
		site.browse(page(shop, "leave", mf.ingest), nil)
		want["/s/leave/"] = []string{"$pageview/false", "leaving/false"}
		want["/s/landed/"] = nil // the landing page's own pageview is not checked
	})

	t.Run("retry", func(t *testing.T) {
		site.mu.Lock()
		site.fail503 = 1
		site.mu.Unlock()
		site.browse(page(shop, "retry", proxy), nil)
		sent := site.takeSent()
		if len(sent) != 2 || !bytes.Equal(sent[0], sent[1]) {
			t.Fatalf("after a 503 the proxy saw %d batch posts (identical: %v), want the same bytes twice", len(sent), len(sent) == 2 && bytes.Equal(sent[0], sent[1]))
		}
		want["/s/retry/"] = []string{"retried/false"}
	})

	t.Run("nothing sent", func(t *testing.T) {
		rep := site.browse(page(shop, "dnt", proxy), map[string]any{"enable_do_not_track": true})
		if rep["dnt"] != "1" {
			t.Fatalf("the profile did not turn on Do Not Track: navigator.doNotTrack = %v", rep["dnt"])
		}
		checkEmptyStorage(t, "dnt", rep["storage"])
		rep = site.browse(page(shop, "gpc", proxy), nil)
		if rep["gpc"] != true {
			t.Fatalf("the gpc page has navigator.globalPrivacyControl = %v", rep["gpc"])
		}
		checkEmptyStorage(t, "gpc", rep["storage"])
		site.browse(page("http://localhost:"+site.port, "localhost", "http://localhost:"+site.port+"/proxy"), nil)
		if sent := site.takeSent(); len(sent) != 0 {
			t.Errorf("sent under Do Not Track, Global Privacy Control or from localhost: %q", sent)
		}
	})

	t.Run("origin not allowed", func(t *testing.T) {
		rep := site.browse(page("http://other.test:"+site.port, "other", mf.ingest), nil)
		if f, _ := json.Marshal(rep["flag"]); string(f) != `{"errorCode":"NOT_READY","reason":"ERROR"}` {
			t.Errorf("flag on a refused origin: %s", f)
		}
		want["/s/other/"] = nil
	})

	// MF_SCREENSHOT=FILE saves a picture of a scenario's page (the one in
	// docs/ was made so).
	if file := os.Getenv("MF_SCREENSHOT"); file != "" {
		site.screenshot(page(shop, "screenshot", proxy), file)
	}

	// What mf stored, by page path: each scenario's events, once.
	var got map[string][]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = map[string][]string{}
		for _, e := range storedEvents(t, mf) {
			for prefix := range want {
				if strings.HasPrefix(e.Path, prefix) || prefix == "/s/spa/" && e.Path == "/s/spa/next" {
					got[prefix] = append(got[prefix], fmt.Sprintf("%s/%v", e.Name, e.Consented))
				}
			}
		}
		done := true
		for prefix, w := range want {
			if w != nil && len(got[prefix]) < len(w) {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if t.Failed() || len(got) == 0 {
		t.Logf("stored events: %+v\nmf output:\n%s", storedEvents(t, mf), tail(mf.out.String(), 3000))
	}
	for prefix, w := range want {
		if w == nil && prefix == "/s/landed/" {
			continue
		}
		if !sameMultiset(got[prefix], w) {
			t.Errorf("stored for %s: %v, want %v", prefix, got[prefix], w)
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sameMultiset(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	n := map[string]int{}
	for _, x := range a {
		n[x]++
	}
	for _, x := range b {
		n[x]--
	}
	for _, v := range n {
		if v != 0 {
			return false
		}
	}
	return true
}

func sameJSONText(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// checkEmptyStorage fails when a page found a cookie, a localStorage or
// sessionStorage entry or an IndexedDB database.
func checkEmptyStorage(t *testing.T, when string, v any) {
	t.Helper()
	s, _ := v.(map[string]any)
	local, _ := s["local"].(map[string]any)
	if s == nil || s["cookie"] != "" || len(local) != 0 || s["session"] != 0.0 || s["indexedDB"] != 0.0 {
		t.Errorf("%s: the device holds %v, want nothing", when, v)
	}
}
