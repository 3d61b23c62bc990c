package api

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The people and funnel tests run the whole data path (ingest, processor,
// reporting API) over testdata/report/people-events.json and compare the
// answers with the numbers worked out by hand in
// testdata/report/people-golden.json and funnel-golden.json.

const (
	peopleShop = "3a000000-0000-4000-8000-000000000001"
	peopleBlog = "3a000000-0000-4000-8000-000000000002"
)

// peopleNames maps the names of the golden files to refs: signed-in people
// by user id, bob by his browser, b-ann is ann's browser.
func peopleNames() map[string]string {
	out := map[string]string{}
	for _, u := range []string{"ann", "cy", "dee", "eve", "fay", "gus"} {
		out[u] = personRefString(UserRef(peopleShop, u))
	}
	out["bob"] = personRefString(BrowserRef(peopleShop, "b-bob"))
	out["b-ann"] = personRefString(BrowserRef(peopleShop, "b-ann"))
	return out
}

// substituteNames replaces {name} with the person's ref.
func substituteNames(s string) string {
	for n, r := range peopleNames() {
		s = strings.ReplaceAll(s, "{"+n+"}", r)
	}
	return s
}

// newPeopleEnv starts the data path and sends the people events, and 60
// one-pageview browsers to the blog project for paging.
func newPeopleEnv(t *testing.T) *reportEnv {
	t.Helper()
	env := newReportEnv(t, "testdata/report/people-provision.json")
	raw, err := os.ReadFile("testdata/report/people-events.json")
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Batches []struct {
			Key    string           `json:"key"`
			Mode   string           `json:"mode"`
			Addr   string           `json:"addr"`
			Events []map[string]any `json:"events"`
		} `json:"batches"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("people-events.json: %v", err)
	}
	for i, b := range in.Batches {
		for _, e := range b.Events {
			at, err := time.Parse(time.RFC3339Nano, e["time"].(string))
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
			e["time"] = at.UnixMilli()
		}
		body, _ := json.Marshal(map[string]any{"v": 1, "batch": fmt.Sprintf("b0000000-0000-4000-8000-%012d", i+1),
			"mode": b.Mode, "events": b.Events})
		env.sendWith(t, b.Key, string(body), sendOpts{Addr: b.Addr})
	}
	var blog []map[string]any
	for i := 0; i < 60; i++ {
		blog = append(blog, map[string]any{
			"id": fmt.Sprintf("e1000000-0000-4000-8000-%012d", i), "name": "$pageview",
			"time":        time.Date(2026, 6, 14, 8, i, 0, 0, time.UTC).UnixMilli(),
			"anonymousId": fmt.Sprintf("reader-%02d", i), "page": map[string]any{"url": "https://blog.example/post"},
		})
	}
	body, _ := json.Marshal(map[string]any{"v": 1, "batch": "b1000000-0000-4000-8000-000000000001", "mode": "full", "events": blog})
	env.send(t, "mf_webpeop2_k", string(body))
	env.wait(t)
	return env
}

// reportCase is a golden case: GET path (under the project) and the
// expected values at dotted paths of the answer; for lists, ids in order
// by name (a nested list: a group of equal sort keys in ref order).
type reportCase struct {
	Name    string                     `json:"name"`
	Project string                     `json:"project"`
	Path    string                     `json:"path"`
	IDs     []json.RawMessage          `json:"ids"`
	Expect  map[string]json.RawMessage `json:"expect"`
}

func readReportCases(t *testing.T, file string) []reportCase {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []reportCase `json:"cases"`
	}
	if err := json.Unmarshal([]byte(substituteNames(string(raw))), &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s has no cases", file)
	}
	return doc.Cases
}

// casePath is the request path of a case.
func casePath(project, path string) string {
	if project == "" {
		project = peopleShop
	}
	// Brackets of filters[…] and steps[] are sent as the clients do, escaped.
	u, err := url.Parse("/api/v1/projects/" + project + "/" + path)
	if err != nil {
		return "/api/v1/projects/" + project + "/" + path
	}
	u.RawQuery = u.Query().Encode()
	return u.String()
}

// sameJSON compares two JSON values after a round trip (so that 1 and 1.0,
// json.Number and float64 compare equal).
func sameJSON(t *testing.T, got any, want json.RawMessage) (bool, string) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gv, wv any
	if err := json.Unmarshal(g, &gv); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &wv); err != nil {
		t.Fatalf("expected value %s: %v", want, err)
	}
	return reflect.DeepEqual(gv, wv), string(g)
}

func runReportCases(t *testing.T, env *reportEnv, file string) {
	names := map[string]string{}
	for n, r := range peopleNames() {
		names[r] = n
	}
	for _, tc := range readReportCases(t, file) {
		t.Run(tc.Name, func(t *testing.T) {
			path := casePath(tc.Project, tc.Path)
			doc := env.getJSON(t, path)
			if tc.IDs != nil {
				checkIDs(t, doc, tc.IDs, names)
			}
			keys := make([]string, 0, len(tc.Expect))
			for k := range tc.Expect {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				got, ok := lookup(doc, k)
				if !ok {
					t.Errorf("%s: no %s in the answer", path, k)
					continue
				}
				if same, g := sameJSON(t, got, tc.Expect[k]); !same {
					t.Errorf("%s: %s = %s, want %s", path, k, g, tc.Expect[k])
				}
			}
		})
	}
}

// checkIDs compares the ids of data with the expected names; a nested list
// is a group that must come in ascending ref order.
func checkIDs(t *testing.T, doc map[string]any, want []json.RawMessage, names map[string]string) {
	t.Helper()
	list, _ := doc["data"].([]any)
	var got []string
	for _, d := range list {
		id, _ := d.(map[string]any)["id"].(string)
		got = append(got, id)
	}
	var exp []string
	for _, w := range want {
		var one string
		if json.Unmarshal(w, &one) == nil {
			exp = append(exp, peopleNames()[one])
			continue
		}
		var group []string
		if err := json.Unmarshal(w, &group); err != nil {
			t.Fatalf("ids: %s is neither a name nor a list of names", w)
		}
		var refs []string
		for _, n := range group {
			refs = append(refs, peopleNames()[n])
		}
		slices.Sort(refs)
		exp = append(exp, refs...)
	}
	if !slices.Equal(got, exp) {
		named := func(ids []string) []string {
			out := make([]string, len(ids))
			for i, id := range ids {
				out[i] = names[id]
				if out[i] == "" {
					out[i] = id
				}
			}
			return out
		}
		t.Errorf("people %v, want %v", named(got), named(exp))
	}
}

// refusalCase is an expected refusal.
type refusalCase struct {
	Project   string `json:"project"`
	Path      string `json:"path"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Parameter string `json:"parameter"`
	Detail    string `json:"detail"`
}

func runRefusals(t *testing.T, env *reportEnv, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []refusalCase `json:"cases"`
	}
	if err := json.Unmarshal([]byte(substituteNames(string(raw))), &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s has no cases", file)
	}
	for _, tc := range doc.Cases {
		path := casePath(tc.Project, tc.Path)
		checkRefusal(t, env, path, tc.Status, tc.Code, tc.Parameter, tc.Detail)
	}
}

func checkRefusal(t *testing.T, env *reportEnv, path string, status int, code, param, detail string) {
	t.Helper()
	got, body := env.get(t, path)
	if got != status {
		t.Errorf("%s: status %d, want %d: %s", path, got, status, body)
		return
	}
	var e struct {
		Errors []struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
			Source *struct {
				Parameter string `json:"parameter"`
			} `json:"source"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &e); err != nil || len(e.Errors) != 1 {
		t.Errorf("%s: not an errors document: %s", path, body)
		return
	}
	p := ""
	if e.Errors[0].Source != nil {
		p = e.Errors[0].Source.Parameter
	}
	switch {
	case e.Errors[0].Code != code:
		t.Errorf("%s: code %q, want %q", path, e.Errors[0].Code, code)
	case p != param:
		t.Errorf("%s: parameter %q, want %q (%s)", path, p, param, e.Errors[0].Detail)
	case e.Errors[0].Detail == "":
		t.Errorf("%s: no message", path)
	case !strings.Contains(e.Errors[0].Detail, detail):
		t.Errorf("%s: message %q does not say %q", path, e.Errors[0].Detail, detail)
	}
}

func TestPeopleAndFunnels(t *testing.T) {
	env := newPeopleEnv(t)
	t.Run("people", func(t *testing.T) { runReportCases(t, env, "testdata/report/people-golden.json") })
	t.Run("people refusals", func(t *testing.T) { runRefusals(t, env, "testdata/report/people-refusals.json") })
	t.Run("people paging", func(t *testing.T) { testPeoplePaging(t, env) })
	t.Run("funnel", func(t *testing.T) { runReportCases(t, env, "testdata/report/funnel-golden.json") })
	t.Run("funnel refusals", func(t *testing.T) { runRefusals(t, env, "testdata/report/funnel-refusals.json") })
}

// testPeoplePaging pages through the blog's 60 readers (last seen one
// minute apart) and checks that cursors are bound to the list's
// parameters.
func testPeoplePaging(t *testing.T, env *reportEnv) {
	path := casePath(peopleBlog, "people?period=7d")
	var ids, seen []string
	var firstCursor string
	for pages := 0; path != ""; pages++ {
		if pages > 2 {
			t.Fatal("more than two pages for 60 people")
		}
		doc := env.getJSON(t, path)
		for _, d := range doc["data"].([]any) {
			a := d.(map[string]any)
			ids = append(ids, a["id"].(string))
			seen = append(seen, a["attributes"].(map[string]any)["lastSeen"].(string))
		}
		next, _ := lookup(doc, "links.next")
		cur, _ := lookup(doc, "meta.nextCursor")
		path = ""
		if n, ok := next.(string); ok {
			u, err := url.Parse(n)
			if err != nil || u.Query().Get("cursor") != cur || u.Query().Get("period") != "7d" {
				t.Fatalf("links.next %q does not carry meta.nextCursor %v and the parameters", n, cur)
			}
			path = u.RequestURI()
			if firstCursor == "" {
				firstCursor = cur.(string)
				if len(doc["data"].([]any)) != PageSize {
					t.Fatalf("first page has %d people, want %d", len(doc["data"].([]any)), PageSize)
				}
			}
		} else if cur != nil {
			t.Fatalf("nextCursor %v without links.next", cur)
		}
	}
	if len(ids) != 60 {
		t.Fatalf("%d people over the pages, want 60", len(ids))
	}
	for i := 0; i < 60; i++ {
		// reader-59 was seen last (08:59 UTC = 10:59 in Berlin... the blog
		// is UTC), reader-00 first.
		want := personRefString(BrowserRef(peopleBlog, fmt.Sprintf("reader-%02d", 59-i)))
		if ids[i] != want {
			t.Fatalf("person %d is %s, want reader-%02d (%s)", i, ids[i], 59-i, want)
		}
		if w := fmt.Sprintf("2026-06-14T08:%02d:00.000+00:00", 59-i); seen[i] != w {
			t.Fatalf("person %d last seen %s, want %s", i, seen[i], w)
		}
	}
	// The cursor belongs to the list and its parameters.
	for _, p := range []string{
		"people?period=7d&sort=visits&cursor=" + firstCursor,
		"people?period=30d&cursor=" + firstCursor,
		"people?period=7d&view=known&cursor=" + firstCursor,
		"people?period=7d&filters[0][field]=stage&filters[0][op]=is&filters[0][value]=visitor&cursor=" + firstCursor,
	} {
		checkRefusal(t, env, casePath(peopleBlog, p), 422, "unprocessable_parameter", "cursor", "cursor")
	}
	checkRefusal(t, env, casePath(peopleShop, "people?period=7d&cursor="+firstCursor), 422, "unprocessable_parameter", "cursor", "")
	// The same parameters in another order take the cursor.
	doc := env.getJSON(t, casePath(peopleBlog, "people?cursor="+firstCursor+"&sort=last_seen&period=7d&view=everyone"))
	if n := len(doc["data"].([]any)); n != 10 {
		t.Fatalf("second page has %d people, want 10", n)
	}
}

// BenchmarkPeopleFirstPage selects the first page of the people list
// (30 days, sorted by last seen, no filter) over 1M people and 1.2M visits
// in the period, the part of the request after the tables are decoded.
func BenchmarkPeopleFirstPage(b *testing.B) {
	const (
		people = 1_000_000
		visits = 1_200_000
		dayMs  = 86_400_000
	)
	loc := time.UTC
	now := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	from := now.AddDate(0, 0, -29).Truncate(24 * time.Hour)
	to := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	start := from.AddDate(0, 0, -60).UnixMilli()
	span := to.UnixMilli() - start
	d := &projectData{Loc: loc, People: make([]personRow, people), peopleRefs: make([]ref, people), shared: &dataShared{}}
	for i := range d.People {
		p := &d.People[i]
		binary.BigEndian.PutUint32(p.Ref[:], uint32(i))
		d.peopleRefs[i] = p.Ref
		p.FirstSeen = start + int64(i)*span/people/2
		p.LastSeen = p.FirstSeen + int64(i%90)*dayMs/3
		p.Stage = "visitor"
		p.FirstTouch, p.LastTouch, p.place = noTouch, noTouch, noPlace
	}
	vs := make([]visitRow, visits)
	for i := range vs {
		vs[i] = visitRow{Start: from.UnixMilli() + int64(i)*(to.UnixMilli()-from.UnixMilli())/visits,
			Person: int32(i * 7919 % people), Consented: true, visitSource: noSource, place: noPlace}
	}
	// The day index of active people: everyone on the days of their first
	// and last seen and of their visits.
	days := map[int64]*partCache{}
	see := func(p int32, t int64) {
		day := t / dayMs
		pc := days[day]
		if pc == nil {
			pc = &partCache{first: day * dayMs, lastT: day*dayMs + dayMs - 1}
			days[day] = pc
		}
		pc.seen = append(pc.seen, seenPart{d.People[p].Ref, t, t})
	}
	for i := range d.People {
		see(int32(i), d.People[i].FirstSeen)
		see(int32(i), d.People[i].LastSeen)
	}
	for i := range vs {
		see(vs[i].Person, vs[i].Start)
	}
	var facts []*partCache
	for day := start / dayMs; day <= to.UnixMilli()/dayMs; day++ {
		if pc := days[day]; pc != nil {
			facts = append(facts, pc)
		}
	}
	pinDays(d, vs, nil, facts)
	st := &peopleQuery{period: Period{Window: Window{From: from, To: to}, Location: loc}, view: "everyone", sort: "last_seen"}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(people)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.shared.active = nil // measure the active set, not the cache
		sel, err := selectPeople(ctx, d, nil, st, from, to)
		if err != nil || len(sel.page) != PageSize {
			b.Fatalf("page of %d, %v", len(sel.page), err)
		}
	}
}
