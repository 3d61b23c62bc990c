package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The golden reporting test: a small dataset (testdata/report/events.json)
// whose every number was worked out by hand (testdata/report/expected.json,
// each case with its `why`) goes through the real binary — ingest, log,
// processor, tables — and search and ads rows through `mf import`; then
// every endpoint of the reporting API is asked and compared, field by
// field, with the hand computation. Times in the data are offsets from
// today 12:00 in Europe/Berlin, turned into moments when the test runs.

const (
	reportDir     = "testdata/report"
	reportShop    = "a1000000-0000-4000-8000-000000000001"
	reportCalm    = "a2000000-0000-4000-8000-000000000001"
	reportForeign = "b1000000-0000-4000-8000-000000000001"
)

// reportKeys are the API keys of the provisioning file, by user.
var reportKeys = map[string]string{
	"ada":     "mf_pat_ada00001_AdaAdaAdaAdaAdaAdaAdaAdaAdaAdaAdaAdaAdaA",
	"revoked": "mf_pat_ada00002_RevokedRevokedRevokedRevokedRevokedRevRe",
	"expired": "mf_pat_ada00003_ExpiredExpiredExpiredExpiredExpiredExpEx",
	"bea":     "mf_pat_bea00001_BeaBeaBeaBeaBeaBeaBeaBeaBeaBeaBeaBeaBeaB",
	"cy":      "mf_pat_cy000001_CyCyCyCyCyCyCyCyCyCyCyCyCyCyCyCyCyCyCyCy",
	"dee":     "mf_pat_dee00001_DeeDeeDeeDeeDeeDeeDeeDeeDeeDeeDeeDeeDeeD",
	"olga":    "mf_pat_olga0001_OlgaOlgaOlgaOlgaOlgaOlgaOlgaOlgaOlgaOlga",
}

// reportUAs are the User-Agents the dataset names.
var reportUAs = map[string]string{
	"chrome_desktop":  browserUA,
	"firefox_desktop": "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0",
	"edge_desktop":    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 Edg/130.0.0.0",
	"safari_iphone":   "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
	"safari_mac":      "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
	"chrome_android":  "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Mobile Safari/537.36",
}

// reportSources are the keys and origins of the provisioned sources.
var reportSources = map[string]struct{ key, origin string }{
	"shop/website": {"mf_shopweb1_Shop-Website_1", "https://shop.example"},
	"shop/server":  {"mf_shopsrv1_Shop-Server_1", ""},
	"calm/website": {"mf_calmweb1_Calm-Website_1", "https://calm.example"},
}

type reportEvent struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Day         int             `json:"day"`
	Min         int             `json:"min"`
	AnonymousID string          `json:"anonymousId,omitempty"`
	UserID      string          `json:"userId,omitempty"`
	SessionID   string          `json:"sessionId,omitempty"`
	Page        json.RawMessage `json:"page,omitempty"`
	Properties  json.RawMessage `json:"properties,omitempty"`
}

type reportBatch struct {
	Why     string        `json:"why"`
	Project string        `json:"project"`
	Source  string        `json:"source"`
	Mode    string        `json:"mode"`
	UA      string        `json:"ua"`
	Events  []reportEvent `json:"events"`
}

// reportImport is one import file of testdata/report/imports.json: a
// header and rows whose `day` / `week` are day offsets from today.
type reportImport struct {
	Why     string           `json:"why"`
	Project string           `json:"project"`
	Header  map[string]any   `json:"header"`
	Rows    []map[string]any `json:"rows"`
}

// reportCase is one question and its hand-computed answer.
type reportCase struct {
	Name    string            `json:"name"`
	Why     string            `json:"why"`
	As      string            `json:"as"`     // user whose key is sent (default ada); "none" sends none; "bad" a malformed one
	Method  string            `json:"method"` // default GET
	Path    string            `json:"path"`   // under /api/v1, with placeholders
	Query   [][2]string       `json:"query"`
	Status  int               `json:"status"`
	Follow  bool              `json:"follow"`  // follow links.next and check the concatenated data, with /pages
	Equal   map[string]any    `json:"equal"`   // pointer → value
	IDs     []string          `json:"ids"`     // data[].id in order
	IDSet   []string          `json:"idSet"`   // data[].id in any order
	Headers map[string]string `json:"headers"` // header → value
}

// reportClock turns the dataset's offsets into moments and dates.
type reportClock struct {
	zone  *time.Location
	today time.Time // local midnight of today
}

func newReportClock(t *testing.T) reportClock {
	zone, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("cannot load Europe/Berlin: %v", err)
	}
	n := time.Now().In(zone)
	return reportClock{zone: zone, today: time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, zone)}
}

// at is today+day at 12:00 local plus min minutes.
func (c reportClock) at(day, min int) time.Time {
	return time.Date(c.today.Year(), c.today.Month(), c.today.Day()+day, 12, 0, 0, 0, c.zone).Add(time.Duration(min) * time.Minute)
}

func (c reportClock) date(day int) string {
	return time.Date(c.today.Year(), c.today.Month(), c.today.Day()+day, 0, 0, 0, 0, c.zone).Format(time.DateOnly)
}

// reportRef is the ref formula of docs/processor.md: a version-8 UUID from
// SHA-256("mf/ref/v1" 0 project 0 kind 0 id).
func reportRef(project, kind, id string) string {
	h := sha256.Sum256([]byte("mf/ref/v1\x00" + project + "\x00" + kind + "\x00" + id))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

var reportPlaceholder = regexp.MustCompile(`\{([A-Za-z]+)(?::([^{}]*))?\}`)

// expand resolves the placeholders of expected.json: {shop} {calm}
// {foreign} project ids; {ref:KIND:ID} a ref in the shop project;
// {date:D} the local date today+D; {moment:D:M} the moment of (D, M) as the
// API writes it (milliseconds, offset); {dayStart:D} local midnight of
// today+D as period bounds are written.
func (c reportClock) expand(t *testing.T, s string) string {
	return reportPlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		p := reportPlaceholder.FindStringSubmatch(m)
		arg := strings.Split(p[2], ":")
		num := func(i int) int {
			n, err := strconv.Atoi(arg[i])
			if err != nil {
				t.Fatalf("placeholder %s: %v", m, err)
			}
			return n
		}
		switch p[1] {
		case "shop":
			return reportShop
		case "calm":
			return reportCalm
		case "foreign":
			return reportForeign
		case "ref":
			return reportRef(reportShop, arg[0], arg[1])
		case "date":
			return c.date(num(0))
		case "moment":
			return c.at(num(0), num(1)).Format("2006-01-02T15:04:05.000-07:00")
		case "dayStart":
			return time.Date(c.today.Year(), c.today.Month(), c.today.Day()+num(0), 0, 0, 0, 0, c.zone).Format("2006-01-02T15:04:05-07:00")
		}
		return m
	})
}

func (c reportClock) expandAny(t *testing.T, v any) any {
	switch x := v.(type) {
	case string:
		return c.expand(t, x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = c.expandAny(t, x[i])
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = c.expandAny(t, e)
		}
		return out
	}
	return v
}

func readReportJSON(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(reportDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// sendReportBatches sends the dataset through the ingest listener: website
// batches with the website key in the path, an allowed Origin and the
// batch's User-Agent; server batches with the secret key as bearer.
func sendReportBatches(t *testing.T, p *mfProc, c reportClock, batches []reportBatch) (perProject map[string]int) {
	t.Helper()
	perProject = map[string]int{}
	for i, b := range batches {
		var evs []string
		for _, e := range b.Events {
			out := map[string]any{"id": e.ID, "name": e.Name, "time": c.at(e.Day, e.Min).UnixMilli()}
			if e.AnonymousID != "" {
				out["anonymousId"] = e.AnonymousID
			}
			if e.UserID != "" {
				out["userId"] = e.UserID
			}
			if e.SessionID != "" {
				out["sessionId"] = e.SessionID
			}
			if e.Page != nil {
				out["page"] = e.Page
			}
			if e.Properties != nil {
				out["properties"] = e.Properties
			}
			j, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, string(j))
		}
		id := fmt.Sprintf("ba7c0000-0000-4000-8000-%012d", i+1)
		body := batchBody(id, b.Mode, evs...)
		src, ok := reportSources[b.Project+"/"+b.Source]
		if !ok {
			t.Fatalf("batch %d: unknown source %s/%s", i, b.Project, b.Source)
		}
		var code int
		var resp []byte
		if b.Source == "server" {
			code, _, resp = do(t, "POST", p.ingest+"/v1/batch", body,
				"Authorization", "Bearer "+src.key, "Content-Type", "application/json")
		} else {
			ua, ok := reportUAs[b.UA]
			if !ok {
				t.Fatalf("batch %d: unknown ua %q", i, b.UA)
			}
			code, _, resp = do(t, "POST", p.ingest+"/v1/batch/"+src.key, body,
				"Origin", src.origin, "User-Agent", ua, "Content-Type", "text/plain;charset=UTF-8")
		}
		var rc struct{ Accepted, Dropped int }
		if code != 202 || json.Unmarshal(resp, &rc) != nil || rc.Accepted != len(evs) || rc.Dropped != 0 {
			t.Fatalf("batch %d (%s): %d %s, want 202 with %d accepted", i, b.Why, code, resp, len(evs))
		}
		perProject[b.Project] += len(evs)
	}
	return perProject
}

// importReportRows writes each import of imports.json as a JSON-lines file
// (days turned into dates) and loads it with `mf import --admin-url`.
func importReportRows(t *testing.T, p *mfProc, c reportClock, imports []reportImport) {
	t.Helper()
	dir := t.TempDir()
	for i, imp := range imports {
		var sb strings.Builder
		h, _ := json.Marshal(imp.Header)
		sb.Write(h)
		sb.WriteByte('\n')
		for _, r := range imp.Rows {
			row := map[string]any{}
			for k, v := range r {
				row[k] = v
			}
			for _, k := range []string{"day", "week"} {
				if d, ok := row[k].(float64); ok {
					row[k] = c.date(int(d))
				}
			}
			j, _ := json.Marshal(row)
			sb.Write(j)
			sb.WriteByte('\n')
		}
		file := filepath.Join(dir, fmt.Sprintf("import-%d.jsonl", i))
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runMF(t, nil, "import", "--admin-url", p.admin, "--project", c.expand(t, imp.Project), file)
		if code != 0 || !strings.Contains(out, "imported") {
			t.Fatalf("mf import (%s): exit %d\n%s%s", imp.Why, code, out, errOut)
		}
	}
}

// reportGet asks the reporting API and returns status, headers and the
// decoded body (nil for an empty body).
func reportGet(t *testing.T, method, rawURL, key string) (int, map[string][]string, any, []byte) {
	t.Helper()
	var hdr []string
	if key != "" {
		hdr = []string{"Authorization", "Bearer " + key}
	}
	code, h, body := do(t, method, rawURL, nil, hdr...)
	var doc any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v\n%s", method, rawURL, err, body)
		}
	}
	return code, h, doc, body
}

// checkReportHeaders: what every answer of the reporting API carries.
func checkReportHeaders(t *testing.T, what string, h map[string][]string) {
	t.Helper()
	get := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	want := map[string]string{
		"Content-Type":            "application/vnd.api+json",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "strict-origin-when-cross-origin",
		"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
	}
	for k, v := range want {
		if got := get(k); got != v {
			t.Errorf("%s: header %s = %q, want %q", what, k, got, v)
		}
	}
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("%s: CORS header %s sent", what, k)
		}
	}
	if get("Ratelimit-Policy") == "" || get("Ratelimit") == "" {
		t.Errorf("%s: RateLimit-Policy %q, RateLimit %q: both must be present", what, get("Ratelimit-Policy"), get("Ratelimit"))
	}
}

// reportPointer reads a JSON pointer with two extensions: a segment [k=v]
// selects the element of an array whose member k equals v, and a final #
// is the length of an array.
func reportPointer(doc any, ptr string) (any, error) {
	cur := doc
	if ptr == "" || ptr == "/" {
		return cur, nil
	}
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		switch {
		case seg == "#":
			a, ok := cur.([]any)
			if !ok {
				return nil, fmt.Errorf("# on a %T", cur)
			}
			return float64(len(a)), nil
		case strings.HasPrefix(seg, "[") && strings.HasSuffix(seg, "]"):
			k, v, _ := strings.Cut(seg[1:len(seg)-1], "=")
			a, ok := cur.([]any)
			if !ok {
				return nil, fmt.Errorf("%s on a %T", seg, cur)
			}
			var found any
			for _, e := range a {
				if m, ok := e.(map[string]any); ok && fmt.Sprint(m[k]) == v {
					found = e
					break
				}
			}
			if found == nil {
				return nil, fmt.Errorf("no element with %s", seg[1:len(seg)-1])
			}
			cur = found
		default:
			switch c := cur.(type) {
			case map[string]any:
				v, ok := c[seg]
				if !ok {
					return nil, fmt.Errorf("no member %q", seg)
				}
				cur = v
			case []any:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(c) {
					return nil, fmt.Errorf("no index %q in an array of %d", seg, len(c))
				}
				cur = c[i]
			default:
				return nil, fmt.Errorf("%q inside a %T", seg, cur)
			}
		}
	}
	return cur, nil
}

// reportSameJSON compares decoded JSON values; numbers within 1e-9 (relative).
func reportSameJSON(got, want any) bool {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		return ok && math.Abs(g-w) <= 1e-9*math.Max(1, math.Abs(w))
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !reportSameJSON(g[i], w[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k := range w {
			if !reportSameJSON(g[k], w[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

func reportDataIDs(doc any) []string {
	var ids []string
	m, _ := doc.(map[string]any)
	list, _ := m["data"].([]any)
	for _, e := range list {
		if r, ok := e.(map[string]any); ok {
			ids = append(ids, fmt.Sprint(r["id"]))
		}
	}
	return ids
}

func runReportCase(t *testing.T, p *mfProc, c reportClock, rc reportCase, names map[string]string) {
	t.Helper()
	q := url.Values{}
	for _, kv := range rc.Query {
		q.Add(kv[0], c.expand(t, kv[1]))
	}
	u := p.api + "/api/v1" + c.expand(t, rc.Path)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	key := reportKeys["ada"]
	switch rc.As {
	case "":
	case "none":
		key = ""
	case "bad":
		key = "mf_pat_nobody00_" + strings.Repeat("x", 40)
	default:
		key = reportKeys[rc.As]
	}
	method := rc.Method
	if method == "" {
		method = "GET"
	}
	code, h, doc, body := reportGet(t, method, u, key)
	checkReportHeaders(t, rc.Name, h)
	if code != rc.Status {
		t.Errorf("%s: %s %s answered %d, want %d (%s)\n%s", rc.Name, method, u, code, rc.Status, rc.Why, body)
		return
	}
	for k, v := range rc.Headers {
		if got := strings.Join(h[k], ", "); got != v {
			t.Errorf("%s: header %s = %q, want %q", rc.Name, k, got, v)
		}
	}
	if code >= 400 {
		m, _ := doc.(map[string]any)
		errs, _ := m["errors"].([]any)
		e0, _ := func() (map[string]any, bool) {
			if len(errs) == 0 {
				return nil, false
			}
			e, ok := errs[0].(map[string]any)
			return e, ok
		}()
		if e0 == nil || e0["status"] != strconv.Itoa(code) || e0["detail"] == "" || e0["detail"] == nil {
			t.Errorf("%s: refusal without a JSON:API error with status and detail: %s", rc.Name, body)
		}
	}
	if rc.Follow {
		all := []any{}
		pages := 0
		for {
			pages++
			m, _ := doc.(map[string]any)
			list, _ := m["data"].([]any)
			all = append(all, list...)
			links, _ := m["links"].(map[string]any)
			next, _ := links["next"].(string)
			if next == "" || pages > 20 {
				break
			}
			code, h, doc, body = reportGet(t, "GET", next, key)
			checkReportHeaders(t, rc.Name+" (next page)", h)
			if code != 200 {
				t.Errorf("%s: next page %s answered %d\n%s", rc.Name, next, code, body)
				return
			}
		}
		doc = map[string]any{"data": all, "pages": float64(pages)}
	}
	var faults []string
	for ptr, want := range rc.Equal {
		got, err := reportPointer(doc, c.expand(t, ptr))
		want = c.expandAny(t, want)
		if err != nil {
			faults = append(faults, fmt.Sprintf("%s: %v", ptr, err))
			continue
		}
		if !reportSameJSON(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			faults = append(faults, fmt.Sprintf("%s = %s, want %s", ptr, g, w))
		}
	}
	name := func(ids []string) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			if n, ok := names[id]; ok {
				out[i] = n
			} else {
				out[i] = id
			}
		}
		return out
	}
	if rc.IDs != nil {
		var want []string
		for _, id := range rc.IDs {
			want = append(want, c.expand(t, id))
		}
		if got := reportDataIDs(doc); !reflect.DeepEqual(got, want) {
			faults = append(faults, fmt.Sprintf("ids %v, want %v", name(got), name(want)))
		}
	}
	if rc.IDSet != nil {
		want := map[string]bool{}
		for _, id := range rc.IDSet {
			want[c.expand(t, id)] = true
		}
		got := reportDataIDs(doc)
		ok := len(got) == len(want)
		for _, id := range got {
			ok = ok && want[id]
		}
		if !ok {
			var w []string
			for id := range want {
				w = append(w, id)
			}
			sort.Strings(w)
			faults = append(faults, fmt.Sprintf("ids %v, want the set %v", name(got), name(w)))
		}
	}
	if len(faults) > 0 {
		sort.Strings(faults)
		t.Errorf("%s: %s %s\n  %s\n  why: %s", rc.Name, method, u, strings.Join(faults, "\n  "), rc.Why)
	}
	if method == "HEAD" && len(body) != 0 {
		t.Errorf("%s: HEAD answered a body of %d bytes", rc.Name, len(body))
	}
}

// seedReportGolden starts mf serve with the golden dataset's provisioning
// file, sends its events and imports, and waits until the processor has
// committed every event.
func seedReportGolden(t *testing.T) (*mfProc, reportClock) {
	t.Helper()
	c := newReportClock(t)
	var events struct{ Batches []reportBatch }
	readReportJSON(t, "events.json", &events)
	var imports struct{ Imports []reportImport }
	readReportJSON(t, "imports.json", &imports)

	p := startMF(t, t.TempDir(), "serve", "--provision", filepath.Join(reportDir, "provision.json"))
	sent := sendReportBatches(t, p, c, events.Batches)
	importReportRows(t, p, c, imports.Imports)

	// Wait until the processor has committed every event: the raw event
	// lists (7d reaches every event of the last six days; the older ones
	// were sent in the same or earlier batches) hold them all.
	inWeek := map[string]int{}
	for _, b := range events.Batches {
		for _, e := range b.Events {
			if e.Day >= -6 {
				inWeek[b.Project]++
			}
		}
	}
	if sent["shop"] != 60 || inWeek["shop"] != 53 || inWeek["calm"] != 5 {
		t.Fatalf("the dataset changed (%v sent, %v in the week): rework expected.json", sent, inWeek)
	}
	// Dee only polls, so that her budget alone is spent waiting; a 429
	// (a slow processor on a loaded machine) is waited out.
	listed := func(project string) int {
		n := 0
		next := p.api + "/api/v1/projects/" + project + "/events?period=7d"
		for next != "" {
			code, _, doc, body := reportGet(t, "GET", next, reportKeys["dee"])
			if code == 429 {
				return -1
			}
			if code != 200 {
				t.Fatalf("raw events: %d %s", code, body)
			}
			n += len(reportDataIDs(doc))
			links, _ := doc.(map[string]any)["links"].(map[string]any)
			next, _ = links["next"].(string)
		}
		return n
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, pr := range []struct {
		id string
		n  int
	}{{reportShop, inWeek["shop"]}, {reportCalm, inWeek["calm"]}} {
		for n := listed(pr.id); n != pr.n; n = listed(pr.id) {
			if n > pr.n || time.Now().After(deadline) {
				t.Fatalf("project %s lists %d raw events in 7d, want %d", pr.id, n, pr.n)
			}
			time.Sleep(time.Second)
		}
	}

	return p, c
}

// TestReportGolden sends the golden dataset through the binary and checks
// every endpoint against the hand-computed answers.
func TestReportGolden(t *testing.T) {
	var expected struct{ Cases []reportCase }
	readReportJSON(t, "expected.json", &expected)
	p, c := seedReportGolden(t)

	names := map[string]string{}
	for _, who := range []string{"alice", "bob", "carol", "dave", "erin", "finn"} {
		names[reportRef(reportShop, "u", who)] = who
	}
	for _, b := range []string{"anon-b1", "anon-b2", "anon-b3", "anon-b4", "anon-b5", "anon-b6", "anon-b7"} {
		names[reportRef(reportShop, "a", b)] = b
	}
	for _, rc := range expected.Cases {
		runReportCase(t, p, c, rc, names)
	}
	checkReportTail(t, p)
}

// checkReportTail checks what the cases cannot say: JSON:API whatever
// Accept says, cursors bound to their list and parameters, recent access,
// the person's request budget and the network's refused-credential budget
// (last, since they spend budgets).
func checkReportTail(t *testing.T, p *mfProc) {
	base := p.api + "/api/v1/projects/" + reportShop
	ada := []string{"Authorization", "Bearer " + reportKeys["ada"]}
	code, h, _ := do(t, "GET", p.api+"/api/v1/projects", nil, append(ada, "Accept", "text/html")...)
	if code != 200 || h.Get("Content-Type") != "application/vnd.api+json" {
		t.Errorf("Accept: text/html: %d %q, want 200 application/vnd.api+json", code, h.Get("Content-Type"))
	}

	// A cursor handed out by the events list of 7d.
	code, _, doc, body := reportGet(t, "GET", base+"/events?period=7d", reportKeys["ada"])
	meta, _ := doc.(map[string]any)["meta"].(map[string]any)
	cur, _ := meta["nextCursor"].(string)
	if code != 200 || cur == "" {
		t.Fatalf("events 7d: %d, no nextCursor: %s", code, body)
	}
	for _, u := range []string{
		base + "/events?period=7d&cursor=" + url.QueryEscape(cur),
		base + "/events?period=7d&filters[0][field]=event_name&filters[0][op]=set&cursor=" + url.QueryEscape(cur),
		base + "/events?period=24h&cursor=" + url.QueryEscape(cur),
		base + "/people?period=7d&cursor=" + url.QueryEscape(cur),
		p.api + "/api/v1/projects/" + reportCalm + "/events?period=7d&cursor=" + url.QueryEscape(cur),
	} {
		want := 422
		if strings.HasSuffix(strings.Split(u, "?")[0], "/events") && strings.Contains(u, reportShop) && !strings.Contains(u, "filters") && strings.Contains(u, "period=7d") {
			want = 200
		}
		if code, _, _, body := reportGet(t, "GET", u, reportKeys["bea"]); code != want {
			t.Errorf("cursor of the events list of 7d on %s: %d, want %d\n%s", u, code, want, body)
		}
	}

	// Recent access: the revoked and expired keys were recorded against
	// Ada, and no query parameter was stored.
	code, _, raw := do(t, "GET", p.admin+"/admin/v1/users/a0000000-0000-4000-8000-000000000001/access", nil)
	if code != 200 || !strings.Contains(string(raw), "key_revoked") || !strings.Contains(string(raw), "key_expired") ||
		strings.Contains(string(raw), "period=") || strings.Contains(string(raw), "?") {
		t.Errorf("recent access of Ada: %d %s", code, raw)
	}

	// Cy's budget: 120 requests a minute, then 429 with Retry-After.
	cy := []string{"Authorization", "Bearer " + reportKeys["cy"]}
	for i := 1; i <= 121; i++ {
		code, h, body := do(t, "GET", p.api+"/api/v1/projects", nil, cy...)
		if i == 1 && (h.Get("RateLimit-Policy") != `"person";q=120;w=60` || !strings.HasPrefix(h.Get("RateLimit"), `"person";r=119;t=`)) {
			t.Errorf("first request: RateLimit-Policy %q, RateLimit %q", h.Get("RateLimit-Policy"), h.Get("RateLimit"))
		}
		if i <= 120 && code != 200 {
			t.Fatalf("request %d of Cy's 120: %d %s", i, code, body)
		}
		if i == 121 {
			if code != 429 || h.Get("Retry-After") == "" {
				t.Errorf("request 121 of a minute: %d, Retry-After %q; want 429 with Retry-After\n%s", code, h.Get("Retry-After"), body)
			}
			checkReportHeaders(t, "429", h)
		}
	}

	// The network's refused credentials: at most 60 a minute, then a bad
	// token gets 429 while a valid one still passes.
	refused := 0
	for i := 0; i < 70 && refused == 0; i++ {
		code, h, _ := do(t, "GET", p.api+"/api/v1/projects", nil, "Authorization", "Bearer mf_pat_nobody00_"+strings.Repeat("y", 40))
		if code == 429 {
			refused = i + 1
			if h.Get("Retry-After") == "" {
				t.Errorf("429 for refused credentials without Retry-After")
			}
		} else if code != 401 {
			t.Fatalf("bad token: %d", code)
		}
	}
	if refused == 0 {
		t.Errorf("70 bad tokens in a row were never refused with 429")
	}
	if code, _, body := do(t, "GET", p.api+"/api/v1/projects", nil, ada...); code != 200 {
		t.Errorf("a valid key from a network over its refused-credential budget: %d %s", code, body)
	}
}
