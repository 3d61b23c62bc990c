package channels

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The converter of data/referrers.txt. The source files are kept, as
// published, in testdata/matomo (CC0-1.0). To move to a newer version of
// the lists: copy AIAssistants.yml, SearchEngines.yml, Socials.yml and
// LICENSE of the wanted commit into testdata/matomo, set sourceCommit and
// sourceDate, and run
//
//	go test ./processor/internal/channels -run TestReferrerLists -update
var update = flag.Bool("update", false, "rewrite data/referrers.txt from testdata/matomo")

const (
	sourceRepo   = "https://github.com/matomo-org/searchengine-and-social-list"
	sourceCommit = "3b3a82dc83cd146abe17aafe31254de1c25f7844"
	sourceDate   = "2026-07-15"
)

// hostPattern is what a list entry must look like to be kept: host labels
// (letters, digits, '-', '_', or {}), optionally a path. Entries that are
// app ids or other schemes (android-app//...) cannot match an http
// referrer and are left out.
var hostPattern = regexp.MustCompile(`^([a-z0-9_-]+|\{\})(\.([a-z0-9_-]+|\{\}))+(/[^\s]*)?$`)

type listEntry struct {
	kind, pattern, name string
}

// convert reads the three Matomo files and returns the data file.
func convert(dir string) ([]byte, error) {
	var entries []listEntry
	add := func(kind, name, url string) {
		p := strings.ToLower(strings.TrimSpace(url))
		p = strings.TrimPrefix(p, "www.")
		p = strings.TrimRight(p, "/")
		if !hostPattern.MatchString(p) || strings.ContainsAny(name, "\t\n") {
			return
		}
		entries = append(entries, listEntry{kind, p, strings.TrimSpace(name)})
	}
	// AIAssistants.yml and Socials.yml: name -> list of hosts.
	for _, f := range []struct{ file, kind string }{{"AIAssistants.yml", "ai"}, {"Socials.yml", "social"}} {
		data, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			return nil, err
		}
		var m map[string][]string
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", f.file, err)
		}
		for name, urls := range m {
			for _, u := range urls {
				add(f.kind, unescapeName(name), u)
			}
		}
	}
	// SearchEngines.yml: name -> list of configurations with urls.
	data, err := os.ReadFile(filepath.Join(dir, "SearchEngines.yml"))
	if err != nil {
		return nil, err
	}
	var se map[string][]struct {
		URLs []string `yaml:"urls"`
	}
	if err := yaml.Unmarshal(data, &se); err != nil {
		return nil, fmt.Errorf("SearchEngines.yml: %w", err)
	}
	for name, confs := range se {
		for _, c := range confs {
			for _, u := range c.URLs {
				add("search", unescapeName(name), u)
			}
		}
	}
	slices.SortFunc(entries, func(a, b listEntry) int {
		if c := strings.Compare(kindOrder(a.kind), kindOrder(b.kind)); c != 0 {
			return c
		}
		if c := strings.Compare(a.pattern, b.pattern); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	entries = slices.Compact(entries)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `# mf referrer lists: AI assistants, search engines and social networks,
# for channel classification (package processor/internal/channels).
#
# Source: %s
#   commit %s (%s), files AIAssistants.yml,
#   SearchEngines.yml and Socials.yml (kept in testdata/matomo).
# Licence of the lists: CC0-1.0 (Creative Commons public domain dedication),
#   testdata/matomo/LICENSE.
# Converted by TestReferrerLists (convert_test.go):
#   go test ./processor/internal/channels -run TestReferrerLists -update
# Conversion: every host of every entry, lower-cased, without a leading
# "www." or a trailing "/"; search engine parameters, backlinks and charsets
# are dropped; entries that are not host names (app ids, android-app://)
# are left out. Names keep the lists' spelling (%%2B unescaped).
#
# Format: one pattern per line, tab-separated: kind (ai, search, social),
# host pattern with an optional path, name. In a host pattern {} stands for
# one label (a country subdomain or top-level domain); a trailing {} also
# matches two labels such as co.uk.
`, sourceRepo, sourceCommit, sourceDate)
	for _, e := range entries {
		fmt.Fprintf(&buf, "%s\t%s\t%s\n", e.kind, e.pattern, e.name)
	}
	return buf.Bytes(), nil
}

func kindOrder(k string) string {
	switch k {
	case "ai":
		return "0"
	case "search":
		return "1"
	}
	return "2"
}

// unescapeName turns the lists' %2B into '+' ("Google%2B").
func unescapeName(n string) string { return strings.ReplaceAll(n, "%2B", "+") }

// TestReferrerLists checks that the embedded data file is exactly the
// conversion of the vendored Matomo lists (or rewrites it with -update).
func TestReferrerLists(t *testing.T) {
	want, err := convert(filepath.Join("testdata", "matomo"))
	if err != nil {
		t.Fatalf("cannot convert the Matomo lists: %v", err)
	}
	const path = "data/referrers.txt"
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the conversion of testdata/matomo; run with -update after changing the lists", path)
	}
	if referrerData != string(want) {
		t.Fatalf("the embedded lists differ from %s; rebuild", path)
	}
	l, err := ParseLists(string(want))
	if err != nil {
		t.Fatal(err)
	}
	// Every kind is present, in the hundreds for search engines.
	counts := map[Kind]int{}
	for _, es := range l.byPattern {
		for _, e := range es {
			counts[e.site.Kind]++
		}
	}
	if counts[KindAI] < 15 || counts[KindSearch] < 300 || counts[KindSocial] < 80 {
		t.Fatalf("too few patterns per kind: %v", counts)
	}
}
