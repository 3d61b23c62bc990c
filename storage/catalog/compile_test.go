package catalog

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

type documentCase struct {
	About   string   `json:"about"`
	State   []string `json:"state"`
	Project string   `json:"project"`
	At      int64    `json:"at"`
	Browser string   `json:"browser"`
	Server  string   `json:"server"`
}

var placeholder = regexp.MustCompile(`\{(ref|seed):([^}]+)\}`)

// expand replaces {ref:<segment id>} and {seed:<flag key>} by the values
// the catalog generated.
func expand(t *testing.T, st *State, project, s string) string {
	t.Helper()
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		switch sub[1] {
		case "ref":
			seg, ok := st.Segment(sub[2])
			if !ok {
				t.Fatalf("no segment %s", sub[2])
			}
			return seg.Ref
		default:
			f, ok := st.Flag(project, sub[2])
			if !ok {
				t.Fatalf("no flag %s", sub[2])
			}
			return f.Seed
		}
	})
}

func TestCompiledDocuments(t *testing.T) {
	var cases []documentCase
	if err := json.Unmarshal(readTestdata(t, "compile/documents.json"), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.About, func(t *testing.T) {
			st := stateOf(t, c.State...)
			pf := st.CompiledFlags(c.Project)
			for _, v := range []struct {
				view View
				want string
			}{{ViewBrowser, c.Browser}, {ViewServer, c.Server}} {
				want := expand(t, st, c.Project, v.want)
				got := string(pf.AppendDocument(nil, v.view, c.At))
				if got != want {
					t.Errorf("view %d:\ngot  %s\nwant %s", v.view, got, want)
				}
				if !json.Valid([]byte(got)) {
					t.Errorf("view %d is not JSON", v.view)
				}
				canon, err := canonicalRaw([]byte(got))
				if err != nil || string(canon) != got {
					t.Errorf("view %d is not canonical JSON: %v\n%s", v.view, err, canon)
				}
				for _, cf := range pf.Flags(v.view) {
					if !strings.Contains(got, `"`+cf.Key+`":`+string(cf.JSON)) {
						t.Errorf("flag %s: its JSON is not the document's", cf.Key)
					}
				}
			}
		})
	}
}

// Compiled documents carry no names, descriptions or segment ids.
func TestCompiledDocumentsHideIDs(t *testing.T) {
	st := stateOf(t, "valid/full.json")
	for _, p := range st.Projects("10000000-0000-4000-8000-000000000001") {
		pf := st.CompiledFlags(p.ID)
		for _, v := range []View{ViewBrowser, ViewServer} {
			doc := pf.AppendDocument(nil, v, 0)
			for _, seg := range st.Segments(p.ID) {
				if bytes.Contains(doc, []byte(seg.ID)) {
					t.Errorf("project %s view %d holds segment id %s", p.Slug, v, seg.ID)
				}
			}
			for _, f := range st.Flags(p.ID) {
				if f.Name != "" && bytes.Contains(doc, []byte(f.Name)) {
					t.Errorf("project %s view %d holds the name of flag %s", p.Slug, v, f.Key)
				}
			}
		}
	}
}

func TestValuesDocumentBound(t *testing.T) {
	st := stateOf(t, "valid/full.json")
	pf := st.CompiledFlags("20000000-0000-4000-8000-000000000001")
	// The largest values document the shop project can have: each website
	// flag answering its longest variant, with its value.
	want := `{"at":9999999999999,"orig":["dark-mode"],"v":1,"values":{` +
		`"dark-mode":["off"],"killed":["off"],` +
		`"new-checkout":["b",{"<tag>":"&amp;","a":[1,2.5,null],"color":"green"}],` +
		`"no-seed":["treatment-1"]}}`
	if got := pf.ValuesDocumentBound(); got != len(want) {
		t.Errorf("bound is %d, want %d", got, len(want))
	}
}

func TestCanonical(t *testing.T) {
	var cases []struct{ About, In, Out string }
	if err := json.Unmarshal(readTestdata(t, "canonical.json"), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		got, err := canonicalRaw([]byte(c.In))
		if err != nil {
			t.Errorf("%s: %v", c.About, err)
			continue
		}
		if string(got) != c.Out {
			t.Errorf("%s:\ngot  %s\nwant %s", c.About, got, c.Out)
		}
	}
}
