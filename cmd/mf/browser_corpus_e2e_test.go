//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/catalog"
)

// corpusCase is one browser read of a corpus flag.
type corpusCase struct {
	Key        string          `json:"key"`
	Properties json.RawMessage `json:"properties"`
}

// TestBrowserFlagsCorpus: mf.flag in Chromium answers as `mf eval` does
// for the flags of the evaluator corpus (evaluator/testdata/corpus.jsonl)
// that a flag document can hold: flags the provisioning file accepts and
// without segment conditions, provisioned as website flags in rounds of
// one document each, read with each case's properties after consent and
// identify; `mf eval` gets the same flag (from the document) and facts
// (the browser's anonymous id, the user id, the properties, its membership).
func TestBrowserFlagsCorpus(t *testing.T) {
	mf := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	site := newSiteServer(t, mf.ingest)
	demo, err := os.ReadFile(demoFile)
	if err != nil {
		t.Fatal(err)
	}
	shop := "http://shop.test:" + site.port
	demo = bytes.Replace(demo, []byte(`"https://shop.example"`), []byte(`"https://shop.example", "`+shop+`"`), 1)
	var base map[string]any
	if err := json.Unmarshal(demo, &base); err != nil {
		t.Fatal(err)
	}
	withFlags := func(flags []map[string]any) []byte {
		var doc map[string]any
		json.Unmarshal(demo, &doc)
		proj := doc["organizations"].([]any)[0].(map[string]any)["projects"].([]any)[0].(map[string]any)
		fl := proj["flags"].([]any)
		for _, f := range flags {
			fl = append(fl, f)
		}
		proj["flags"] = fl
		b, _ := json.Marshal(doc)
		return b
	}

	// The corpus's flags and each one's property sets, in corpus order.
	f, err := os.Open("../../evaluator/testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var order []string
	props := map[string][]json.RawMessage{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c struct{ In string }
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			continue
		}
		var in struct {
			Flag  map[string]any
			Facts *struct {
				Properties json.RawMessage
				Segments   any
			}
		}
		if json.Unmarshal([]byte(c.In), &in) != nil || in.Flag == nil || in.Facts == nil || in.Facts.Segments != nil {
			continue
		}
		fj, _ := json.Marshal(in.Flag)
		if bytes.Contains(fj, []byte(`["s",`)) {
			continue // segment conditions name segments the project does not have
		}
		k := string(fj)
		if _, ok := props[k]; !ok {
			order = append(order, k)
		}
		p := in.Facts.Properties
		if len(p) == 0 || p[0] != '{' {
			p = json.RawMessage(`{}`)
		}
		// Facts a page cannot hand over unchanged: numbers beyond float64
		// (JavaScript reads them as Infinity, written back as null) and
		// nesting the evaluator's facts parser refuses at another depth
		// inside an `mf eval` line than alone.
		var v any
		if json.Unmarshal(p, &v) != nil || jsonDepth(p) > 16 {
			continue
		}
		props[k] = append(props[k], p)
	}
	// Keep the flags the provisioning file accepts.
	var accepted []map[string]any
	for _, k := range order {
		var fl map[string]any
		json.Unmarshal([]byte(k), &fl)
		fl["key"], fl["name"], fl["readBy"] = "corpus-0000", "corpus", "website"
		delete(fl, "e")
		delete(fl, "c")
		delete(fl, "w")
		if _, err := catalog.Parse(withFlags([]map[string]any{fl})); err != nil {
			continue
		}
		fl["_src"] = k
		accepted = append(accepted, fl)
	}
	t.Logf("corpus: %d flags without segment conditions, %d accepted by provisioning", len(order), len(accepted))

	checked, rounds := 0, 0
	for len(accepted) > 0 {
		// One document's worth: well under the 64,000-byte cap.
		var round []map[string]any
		size := 0
		for len(accepted) > 0 && size < 40000 && len(round) < 400 {
			fl := accepted[0]
			accepted = accepted[1:]
			fl["key"] = fmt.Sprintf("corpus-%04d", len(round))
			b, _ := json.Marshal(fl)
			size += len(b)
			round = append(round, fl)
		}
		rounds++
		var cases []corpusCase
		clean := make([]map[string]any, len(round))
		for i, fl := range round {
			c := map[string]any{}
			for k, v := range fl {
				if k != "_src" {
					c[k] = v
				}
			}
			clean[i] = c
			for _, p := range props[fl["_src"].(string)] {
				cases = append(cases, corpusCase{Key: fl["key"].(string), Properties: p})
			}
		}
		if code, _, body := do(t, "PUT", mf.admin+"/admin/v1/provision", withFlags(clean)); code != 200 {
			t.Fatalf("round %d: provision: %d %s", rounds, code, body)
		}
		// Wait until the document holds this round's last flag definition.
		lastKey := round[len(round)-1]["key"].(string)
		var answer struct {
			Document   struct{ Flags map[string]json.RawMessage }
			Membership struct {
				Segments, Unavailable []string
			}
		}
		waitFor(t, 20*time.Second, func() bool {
			code, _, b := do(t, "GET", mf.ingest+"/v1/flags/"+demoWebsite, nil)
			var d struct{ Flags map[string]json.RawMessage }
			return code == 200 && json.Unmarshal(b, &d) == nil && len(d.Flags[lastKey]) > 0 && sameFlag(d.Flags[lastKey], round[len(round)-1])
		})
		site.mu.Lock()
		site.corpus, _ = json.Marshal(cases)
		site.mu.Unlock()
		rep := site.browse(shop+"/s/corpus/?key="+demoWebsite+"&mf="+url.QueryEscape(mf.ingest)+"&endpoint="+url.QueryEscape(mf.ingest), nil)
		anon, _ := rep["anonymousId"].(string)
		results, _ := rep["results"].([]any)
		if anon == "" || len(results) != len(cases) {
			t.Fatalf("round %d: the page answered %d of %d cases (anonymous id %q)", rounds, len(results), len(cases), anon)
		}
		body := []byte(`{"anonymousId":"` + anon + `","identified":true}`)
		code, _, b := do(t, "POST", mf.ingest+"/v1/flags/"+demoWebsite, body, "Content-Type", "text/plain;charset=UTF-8", "Origin", shop)
		if code != 200 || json.Unmarshal(b, &answer) != nil {
			t.Fatalf("POST /v1/flags: %d %s", code, b)
		}
		segs, _ := json.Marshal(map[string]any{"in": nonNil(answer.Membership.Segments), "unavailable": nonNil(answer.Membership.Unavailable)})
		var input strings.Builder
		for _, c := range cases {
			fmt.Fprintf(&input, `{"flag":%s,"facts":{"id":%q,"userId":"user-42","properties":%s,"segments":%s}}`+"\n",
				answer.Document.Flags[c.Key], anon, c.Properties, segs)
		}
		code, out, errOut := runMF(t, []byte(input.String()), "eval")
		if code != 0 {
			t.Fatalf("mf eval: %d %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(cases) {
			t.Fatalf("mf eval answered %d lines for %d cases", len(lines), len(cases))
		}
		failed := 0
		for i, c := range cases {
			got, _ := json.Marshal(results[i])
			if !sameJSONText(string(got), lines[i]) {
				if failed++; failed <= 10 {
					t.Errorf("%s %s (%s): mf.flag %s, mf eval %s", c.Key, c.Properties, answer.Document.Flags[c.Key], got, lines[i])
				}
			}
		}
		if failed > 0 {
			t.Errorf("round %d: %d of %d reads differ", rounds, failed, len(cases))
		}
		checked += len(cases)
	}
	t.Logf("mf.flag equals mf eval for %d reads of corpus flags in %d documents", checked, rounds)
}

// sameFlag reports whether a compiled flag has the provisioned seed and
// default (the document of this round, not the last one's).
func sameFlag(compiled json.RawMessage, fl map[string]any) bool {
	var c struct{ S, D string }
	json.Unmarshal(compiled, &c)
	s, _ := fl["s"].(string)
	d, _ := fl["d"].(string)
	return (s == "" || c.S == s) && c.D == d
}

// jsonDepth is the deepest nesting of arrays and objects in b.
func jsonDepth(b []byte) int {
	d, deepest, str, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case str && c == '\\':
			esc = true
		case c == '"':
			str = !str
		case str:
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}
