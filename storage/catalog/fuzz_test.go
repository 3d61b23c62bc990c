package catalog

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary provisioning files (operations contract,
// section 2) to Parse and Validate. Seeds: every file of testdata/valid,
// every refused case of testdata/invalid, docs/demo-provision.json and
// testdata/fuzz/FuzzParse. Properties:
//   - a refusal is a *ValidationError wrapping ErrInvalid with at least one
//     fault, each with a message, and Validate refuses the same way;
//   - no refusal repeats a secret (a server source's key, an API key's
//     token) given in the file;
//   - an accepted file keeps every field within the file format's limits;
//   - an accepted file that merges into an empty catalog round-trips
//     through the log: its change records fold into the state the plan
//     predicted, and applying the same file again changes nothing.
func FuzzParse(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "valid", "*.json"))
	for _, n := range names {
		f.Add(readTestdata(f, strings.TrimPrefix(n, "testdata/")))
	}
	f.Add(readTestdata(f, "../../../docs/demo-provision.json"))
	for _, c := range loadInvalidCases(&testing.T{}) {
		f.Add(c.build(f))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		verr := Validate(data, nil)
		if err != nil {
			checkRefusal(t, data, err)
			if verr == nil || verr.Error() != err.Error() {
				t.Fatalf("Parse refuses with %v but Validate gives %v", err, verr)
			}
			return
		}
		checkLimits(t, file)
		if verr != nil {
			checkRefusal(t, data, verr)
			return
		}
		plan, err := emptyState().Plan(file)
		if err != nil {
			t.Fatalf("Validate accepts the file but Plan refuses it: %v", err)
		}
		recs, err := encodeRecords(newUUID(), &plan.base, plan.changes, 1<<20)
		if err != nil {
			t.Fatalf("cannot encode the accepted plan: %v", err)
		}
		fd := newFolder(newModel(), testLogger(t))
		for i, r := range recs {
			_, out, done := fd.fold(uint64(i+1), r)
			if done != (i == len(recs)-1) || (done && !out.applied) {
				t.Fatalf("record %d of %d: done %v applied %v", i+1, len(recs), done, out.applied)
			}
		}
		if got, want := dump(t, newState(fd.m, nil)), dump(t, plan.State()); got != want {
			t.Fatalf("folded state differs from the plan:\ngot\n%s\nwant\n%s", got, want)
		}
		again, err := Parse(data)
		if err != nil {
			t.Fatalf("second parse refuses: %v", err)
		}
		p2, err := plan.State().Plan(again)
		if err != nil {
			t.Fatalf("the file applied once is refused the second time: %v", err)
		}
		if p2.Len() != 0 {
			t.Fatalf("applying the same file again changes %v", p2.Describe())
		}
	})
}

func checkRefusal(t *testing.T, data []byte, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) || len(ve.Faults) == 0 {
		t.Fatalf("refusal %T %v is not a ValidationError with faults", err, err)
	}
	for _, fl := range ve.Faults {
		if fl.Message == "" {
			t.Fatalf("fault at %q without a message", fl.Path)
		}
	}
	text := err.Error()
	for _, s := range secretsIn(data) {
		if strings.Contains(text, s) {
			t.Fatalf("refusal repeats the secret %q: %s", s, text)
		}
	}
}

// secretsIn lists the secrets of a file as the format defines them: the
// key of a source that is not a website source and the token of an API
// key. Short values are left out: they can occur in any message.
func secretsIn(data []byte) []string {
	root, err := decodeJSON(data)
	if err != nil {
		return nil
	}
	var out []string
	var walk func(member string, v any)
	walk = func(member string, v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				if m, ok := e.(map[string]any); ok {
					k, _ := m["key"].(string)
					tok, _ := m["token"].(string)
					switch {
					case member == "sources" && m["kind"] != "website" && len(k) >= 12:
						out = append(out, k)
					case member == "apiKeys" && len(tok) >= 12:
						out = append(out, tok)
					}
				}
				walk(member, e)
			}
		case map[string]any:
			for name, e := range x {
				walk(name, e)
			}
		}
	}
	walk("", root)
	return out
}

// checkLimits checks what an accepted file holds against the format's
// rules (docs/catalog.md).
func checkLimits(t *testing.T, f *File) {
	t.Helper()
	name := func(what, s string, required bool) {
		if !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxNameLen || (required && strings.TrimSpace(s) == "") {
			t.Fatalf("%s name %q accepted", what, s)
		}
	}
	uuid := func(what, s string) {
		if !reUUID.MatchString(s) {
			t.Fatalf("%s id %q accepted", what, s)
		}
	}
	for _, o := range f.Organizations {
		uuid("organization", o.ID)
		name("organization", o.Name, true)
		if !reSlug.MatchString(o.Slug) {
			t.Fatalf("organization slug %q accepted", o.Slug)
		}
		if o.MonthlyEventAllowance != nil && *o.MonthlyEventAllowance < 0 {
			t.Fatalf("allowance %d accepted", *o.MonthlyEventAllowance)
		}
	}
	for _, u := range f.Users {
		uuid("user", u.ID)
		if utf8.RuneCountInString(u.Email) > maxEmailLen {
			t.Fatalf("email of %d characters accepted", utf8.RuneCountInString(u.Email))
		}
	}
	for _, k := range f.APIKeys {
		if _, ok := parseHash(k.Hash); !ok {
			t.Fatalf("API key kept as %q, not a SHA-256 hash", k.Hash)
		}
	}
	for _, p := range f.Projects {
		uuid("project", p.ID)
		name("project", p.Name, true)
		if p.Location() == nil {
			t.Fatalf("project %s without a time zone", p.ID)
		}
	}
	for _, s := range f.Sources {
		uuid("source", s.ID)
		if len(s.AllowedOrigins) > maxOrigins {
			t.Fatalf("%d origins accepted", len(s.AllowedOrigins))
		}
	}
	for _, a := range f.Actions {
		uuid("action", a.ID)
	}
	for _, fu := range f.Funnels {
		uuid("funnel", fu.ID)
		if n := len(fu.Steps); n < minFunnelSteps || n > maxFunnelSteps {
			t.Fatalf("funnel with %d steps accepted", n)
		}
	}
	for _, s := range f.Segments {
		uuid("segment", s.ID)
		if len(s.Filters) > maxSegmentFilters {
			t.Fatalf("segment with %d filters accepted", len(s.Filters))
		}
	}
	for _, fl := range f.Flags {
		if !reFlagKey.MatchString(fl.Key) {
			t.Fatalf("flag key %q accepted", fl.Key)
		}
		if fl.Seed != "" && !reSeed.MatchString(fl.Seed) {
			t.Fatalf("flag seed %q accepted", fl.Seed)
		}
	}
}
