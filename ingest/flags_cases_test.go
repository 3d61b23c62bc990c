package ingest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/ingest/internal/flagstack"
	"github.com/mfhq/mf/storage/catalog"
)

// Flag endpoint cases: ingest/testdata/flags/cases/*.txtar, one rule each,
// sent through the real HTTP handlers of a stack provisioned with
// testdata/flags/provision.json. The format is in
// testdata/flags/README.md.

var updateGolden = flag.Bool("update", false, "rewrite testdata/flags/golden from the documents served")

// caseServerNow is the server clock of the case stack:
// 2026-03-01T12:00:00Z.
const caseServerNow = 1772366400000

// caseWant is the expectation of one step.
type caseWant struct {
	Status int `json:"status"`
	// Code is the error code of the body, when given.
	Code string `json:"code"`
	// Headers must be present with exactly these values.
	Headers map[string]string `json:"headers"`
	// Absent headers must not be present.
	Absent []string `json:"absent"`
}

type caseStep struct {
	request string // template
	want    caseWant
	body    *string // template of the exact body, nil: not checked
}

// tableMembership answers segment lookups from
// testdata/flags/membership.json: by project, "anonymous:<id>" or
// "user:<id>", the segment ids the unit is in, the ids unavailable, and
// refreshedAt; a unit not listed is answered unavailable. It stands in for
// the processor's segment tables, which do not exist yet.
type tableMembership struct {
	state func() *catalog.State
	table map[string]map[string]struct {
		In          []string `json:"in"`
		Unavailable []string `json:"unavailable"`
		RefreshedAt int64    `json:"refreshedAt"`
	}
}

func (m *tableMembership) Membership(_ context.Context, project string, refs []string, units []ingest.MembershipUnit) ([]ingest.MembershipResult, error) {
	st := m.state()
	ref := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if seg, ok := st.Segment(id); ok {
				out = append(out, seg.Ref)
			}
		}
		return out
	}
	out := make([]ingest.MembershipResult, len(units))
	for i, u := range units {
		e, ok := m.table[project][u.Kind.String()+":"+u.ID]
		if !ok {
			out[i].Unavailable = refs
			continue
		}
		out[i] = ingest.MembershipResult{In: ref(e.In), Unavailable: ref(e.Unavailable), RefreshedAt: time.UnixMilli(e.RefreshedAt)}
	}
	return out, nil
}

// startCaseStack starts the stack the cases run against.
func startCaseStack(t *testing.T) *flagstack.Stack {
	t.Helper()
	mem := &tableMembership{}
	if err := json.Unmarshal(readFlagsFile(t, "membership.json"), &mem.table); err != nil {
		t.Fatalf("membership.json: %v", err)
	}
	s := startStack(t, flagstack.Options{
		Provision: readFlagsFile(t, "provision.json"),
		Clock:     fixedClock(caseServerNow),
		Flags: func(c *ingest.FlagDocumentsConfig) {
			c.Clock = fixedClock(flagsAt)
			c.GzipMinBytes = 256 // the shop browser and server documents are kept compressed, the others not
		},
		Membership: mem,
	})
	mem.state = s.Catalog.State
	// The provisioning happened after the first compilation: wait for the
	// documents of its version.
	v := s.Catalog.State().Version()
	waitUntil(t, "documents of the provisioned catalog", func() bool { return s.Flags.Version() >= v })
	return s
}

// caseFuncs are the template functions of requests and bodies.
func caseFuncs(t *testing.T, s *flagstack.Stack, last *answer) template.FuncMap {
	var funcs template.FuncMap
	issue := func(project, flagKey string, now time.Time) string {
		tok, err := ingest.IssuePreviewToken(context.Background(), s.Bucket, s.Catalog.State(), project, flagKey, now)
		if err != nil {
			t.Fatalf("cannot issue a preview token: %v", err)
		}
		return tok.Token
	}
	funcs = template.FuncMap{
		// ref is the opaque ref of a segment, by id.
		"ref": func(id string) string {
			seg, ok := s.Catalog.State().Segment(id)
			if !ok {
				t.Fatalf("no segment %s", id)
			}
			return seg.Ref
		},
		// refs is the JSON list of the refs of segments, sorted.
		"refs": func(ids ...string) string {
			var refs []string
			for _, id := range ids {
				seg, _ := s.Catalog.State().Segment(id)
				refs = append(refs, seg.Ref)
			}
			slices.Sort(refs)
			b, _ := json.Marshal(refs)
			if refs == nil {
				return "[]"
			}
			return string(b)
		},
		// golden is a golden document (itself a template).
		"golden": func(name string) string {
			text := strings.TrimSuffix(string(readFlagsFile(t, filepath.Join("golden", name))), "\n")
			return renderTemplate(t, name, text, funcs, nil)
		},
		"repeat": func(n int, s string) string { return strings.Repeat(s, n) },
		"seq": func(n int) []int {
			out := make([]int, n)
			for i := range out {
				out[i] = i
			}
			return out
		},
		// previewToken is a valid token for a draft experiment.
		"previewToken": func(project, flagKey string) string {
			return issue(project, flagKey, time.UnixMilli(caseServerNow))
		},
		// expiredPreviewToken expired a second before the server's now.
		"expiredPreviewToken": func(project, flagKey string) string {
			return issue(project, flagKey, time.UnixMilli(caseServerNow).Add(-ingest.PreviewTokenTTL-time.Second))
		},
		// tamperedPreviewToken is a valid token with its signature changed.
		"tamperedPreviewToken": func(project, flagKey string) string {
			tok := []byte(issue(project, flagKey, time.UnixMilli(caseServerNow)))
			if tok[len(tok)-2] == 'A' {
				tok[len(tok)-2] = 'B'
			} else {
				tok[len(tok)-2] = 'A'
			}
			return string(tok)
		},
		// header is a header of the previous step's answer.
		"header": func(name string) string {
			if last == nil || last.header == nil {
				t.Fatalf("header %q: no previous answer", name)
			}
			return last.header.Get(name)
		},
		"at": func() int64 { return flagsAt },
	}
	return funcs
}

func renderTemplate(t *testing.T, name, text string, funcs template.FuncMap, data any) string {
	t.Helper()
	tmpl, err := template.New(name).Funcs(funcs).Parse(text)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b.String()
}

// loadCase reads a case file into its steps.
func loadCase(t *testing.T, path string) []caseStep {
	t.Helper()
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []caseStep
	byName := map[string][]byte{}
	for _, f := range ar.Files {
		byName[f.Name] = f.Data
	}
	for i := 1; ; i++ {
		suffix := ""
		if i > 1 {
			suffix = " " + strconv.Itoa(i)
		}
		req, ok := byName["request"+suffix]
		if !ok {
			break
		}
		var st caseStep
		st.request = string(req)
		if err := json.Unmarshal(byName["want"+suffix], &st.want); err != nil {
			t.Fatalf("%s: want%s: %v", path, suffix, err)
		}
		if b, ok := byName["body"+suffix]; ok {
			s := strings.TrimSuffix(string(b), "\n")
			st.body = &s
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 || len(bytes.TrimSpace(ar.Comment)) == 0 {
		t.Fatalf("%s: a case needs a comment saying what it checks and at least one request", path)
	}
	return steps
}

// parseRequest reads `METHOD PATH`, header lines, a blank line and the
// body (its final line feed removed).
func parseRequest(t *testing.T, text string) (method, path string, header map[string]string, body []byte) {
	t.Helper()
	head, rest, _ := strings.Cut(text, "\n\n")
	lines := strings.Split(strings.TrimRight(head, "\n"), "\n")
	method, path, ok := strings.Cut(lines[0], " ")
	if !ok {
		t.Fatalf("request line %q is not METHOD PATH", lines[0])
	}
	header = map[string]string{}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("header line %q has no colon", l)
		}
		header[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if rest != "" {
		body = []byte(strings.TrimSuffix(rest, "\n"))
	}
	return method, path, header, body
}

func TestFlagCases(t *testing.T) {
	s := startCaseStack(t)
	files, err := filepath.Glob(filepath.Join(flagsDir, "cases", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in %s: %v", flagsDir, err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			var last *answer
			for i, step := range loadCase(t, path) {
				funcs := caseFuncs(t, s, last)
				method, p, header, body := parseRequest(t, renderTemplate(t, name, step.request, funcs, nil))
				a := do(t, s, method, p, header, body)
				checkAnswer(t, fmt.Sprintf("step %d: %s %s", i+1, method, p), a, step, funcs)
				last = &a
			}
		})
	}
}

func checkAnswer(t *testing.T, what string, a answer, step caseStep, funcs template.FuncMap) {
	t.Helper()
	if a.status != step.want.Status {
		t.Fatalf("%s: status %d, want %d; body %s", what, a.status, step.want.Status, a.body)
	}
	// Every answer carries the CORS headers.
	if got := a.header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("%s: Access-Control-Allow-Origin %q, want *", what, got)
	}
	for k, v := range step.want.Headers {
		v = renderTemplate(t, "header "+k, v, funcs, nil)
		if got := a.header.Get(k); got != v {
			t.Errorf("%s: header %s %q, want %q", what, k, got, v)
		}
	}
	for _, k := range step.want.Absent {
		if vs, ok := a.header[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("%s: header %s %q, want none", what, k, vs)
		}
	}
	body := a.body
	if a.header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: gzip body: %v", what, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: gzip body: %v", what, err)
		}
	}
	if step.want.Code != "" {
		if got := (answer{body: body}).code(); got != step.want.Code {
			t.Errorf("%s: code %q, want %q; body %s", what, got, step.want.Code, body)
		}
	}
	if step.body != nil {
		want := renderTemplate(t, "body", *step.body, funcs, nil)
		if string(body) != want {
			t.Errorf("%s: body\n got %s\nwant %s", what, body, want)
		}
	}
	if ct := a.header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") && len(body) > 0 && !json.Valid(body) {
		t.Errorf("%s: Content-Type %s but the body is not JSON: %s", what, ct, body)
	}
}

// goldenDocuments are the documents of testdata/flags/golden and how each
// is fetched from the case stack.
var goldenDocuments = []struct{ file, method, path, auth string }{
	{"browser-shop.json", "GET", "/v1/flags/" + keyShopWeb, ""},
	{"values-shop.json", "GET", "/v1/flags/" + keyShopWeb + "?view=values", ""},
	{"server-shop.json", "GET", "/v1/flags", keyShopServer},
	{"browser-blog.json", "GET", "/v1/flags/" + keyBlogWeb, ""},
	{"values-blog.json", "GET", "/v1/flags/" + keyBlogWeb + "?view=values", ""},
	{"server-blog.json", "GET", "/v1/flags", keyBlogServer},
	{"browser-paused.json", "GET", "/v1/flags/mf_pausedw1_Site-Key_1", ""},
	{"server-paused.json", "GET", "/v1/flags", "mf_pauseds1_Secret-Key_0123456789abcdefghij"},
	{"browser-empty.json", "GET", "/v1/flags/mf_emptyweb_New-Site_1", ""},
	{"values-empty.json", "GET", "/v1/flags/mf_emptyweb_New-Site_1?view=values", ""},
	{"server-empty.json", "GET", "/v1/flags", "mf_emptysrv_New-Secret-Key_0123456789abcdefghij"},
	{"browser-shop-preview-draft-exp.json", "GET", "/v1/flags/" + keyShopWeb + "?svc-preview-token={{previewToken \"" + projectShop + "\" \"draft-exp\"}}", ""},
}

// The served documents are byte for byte the golden files (segment refs,
// which are random, written as {{ref "<segment id>"}}). With -update the
// golden files are rewritten from what is served.
func TestFlagDocumentsGolden(t *testing.T) {
	s := startCaseStack(t)
	funcs := caseFuncs(t, s, nil)
	st := s.Catalog.State()
	for _, g := range goldenDocuments {
		t.Run(g.file, func(t *testing.T) {
			header := map[string]string{}
			if g.auth != "" {
				header["Authorization"] = "Bearer " + g.auth
			}
			a := do(t, s, g.method, renderTemplate(t, g.file, g.path, funcs, nil), header, nil)
			if a.status != 200 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			path := filepath.Join(flagsDir, "golden", g.file)
			if *updateGolden {
				text := string(a.body)
				for _, org := range st.Organizations() {
					for _, p := range st.Projects(org.ID) {
						for _, seg := range st.Segments(p.ID) {
							text = strings.ReplaceAll(text, `"`+seg.Ref+`"`, `"{{ref "`+seg.ID+`"}}"`)
						}
					}
				}
				if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := renderTemplate(t, g.file, strings.TrimSuffix(string(readFlagsFile(t, filepath.Join("golden", g.file))), "\n"), funcs, nil)
			if string(a.body) != want {
				t.Errorf("document differs from %s\n got %s\nwant %s", path, a.body, want)
			}
		})
	}
}
