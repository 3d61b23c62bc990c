package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
)

const (
	acqProject   = "33000000-0000-4000-8000-000000000001"
	quietProject = "33000000-0000-4000-8000-000000000002"
)

// TestParseImportRefusals runs the refusal cases of
// testdata/imports/refusals.json: every fault with its line and field.
func TestParseImportRefusals(t *testing.T) {
	raw, err := os.ReadFile("testdata/imports/refusals.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name   string   `json:"name"`
			Lines  []string `json:"lines"`
			Faults []struct {
				Line  int    `json:"line"`
				Field string `json:"field"`
				Says  string `json:"says"`
			} `json:"faults"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, tc := range file.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			imp, err := ParseImport(strings.NewReader(strings.Join(tc.Lines, "\n")))
			var ie *ImportError
			if !errors.As(err, &ie) {
				t.Fatalf("accepted (%+v, %v); want a refusal", imp, err)
			}
			if !errors.Is(err, ErrInvalidImport) || !errors.Is(err, ErrRefused) {
				t.Errorf("the error does not wrap ErrInvalidImport and ErrRefused")
			}
			if len(ie.Faults) != len(tc.Faults) {
				t.Fatalf("%d faults, want %d: %v", len(ie.Faults), len(tc.Faults), err)
			}
			for i, want := range tc.Faults {
				got := ie.Faults[i]
				if got.Line != want.Line || got.Field != want.Field || !strings.Contains(got.Message, want.Says) {
					t.Errorf("fault %d is %+v; want line %d, field %q, saying %q", i, got, want.Line, want.Field, want.Says)
				}
			}
			if !strings.Contains(err.Error(), tc.Faults[0].Says) {
				t.Errorf("the message %q does not say %q", err, tc.Faults[0].Says)
			}
		})
	}
}

func parseImportFile(t *testing.T, name string) *Import {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata/imports", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imp, err := ParseImport(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return imp
}

// TestParseImportExamples reads the documented examples.
func TestParseImportExamples(t *testing.T) {
	a := parseImportFile(t, "search_a.jsonl")
	if a.Source != SourceSearchA || len(a.Search) != 5 || len(a.Weeks) != 0 || len(a.Ads) != 0 {
		t.Fatalf("search_a: %+v", a)
	}
	// position 2 over 100 impressions is a position sum of 200; positionSum
	// is taken as is; the blank line still counts as line 6.
	if a.Search[2].PositionSum != 200 || a.Search[3].PositionSum != 250 || a.Search[4].Line != 7 {
		t.Errorf("search_a rows: %+v", a.Search)
	}
	b := parseImportFile(t, "search_b.jsonl")
	if b.Source != SourceSearchB || len(b.Search) != 2 || len(b.Weeks) != 2 || b.Weeks[1].Position != 2.5 || b.Weeks[1].Week != "2026-06-14" {
		t.Errorf("search_b: %+v", b)
	}
	ads := parseImportFile(t, "ads_a.jsonl")
	if ads.Source != SourceAdsA || len(ads.Ads) != 4 {
		t.Fatalf("ads_a: %+v", ads)
	}
	if r := ads.Ads[1]; r.Spend != 12_500_000 || r.Currency != "EUR" || r.Campaign != "brand" || r.Clicks != 10 || r.Impressions != 200 {
		t.Errorf("ads_a row 2: %+v", r)
	}
}

// TestImportApply stores imports on a real bucket: the first import adds,
// the same import again changes nothing (not a byte written), a later one
// replaces the rows of its keys, and refusals store nothing.
func TestImportApply(t *testing.T) {
	env := newReportEnv(t, "testdata/report/channels-provision.json")
	ctx := context.Background()
	imports, err := NewImports(DefaultImportConfig(), env.bucket, env.cat, env.now)
	if err != nil {
		t.Fatal(err)
	}
	key := importKey(acqProject, SourceAdsA)
	etag := func() string {
		a, err := env.bucket.Attributes(ctx, key)
		if err != nil {
			t.Fatalf("cannot read %s: %v", key, err)
		}
		return a.ETag
	}
	res, err := imports.Apply(ctx, acqProject, parseImportFile(t, "ads_a.jsonl"))
	if err != nil || !res.Changed || res.Added != 4 || res.Replaced != 0 || res.Unchanged != 0 || !res.LastImportedAt.Equal(testNow) {
		t.Fatalf("first import: %+v %v", res, err)
	}
	first := etag()

	env.setNow(testNow.Add(time.Hour))
	res, err = imports.Apply(ctx, acqProject, parseImportFile(t, "ads_a.jsonl"))
	if err != nil || res.Changed || res.Unchanged != 4 || res.Added+res.Replaced != 0 || !res.LastImportedAt.Equal(testNow) {
		t.Fatalf("same import again: %+v %v", res, err)
	}
	if etag() != first {
		t.Fatal("importing the same rows again rewrote the object")
	}

	res, err = imports.Apply(ctx, acqProject, parseImportFile(t, "ads_a_update.jsonl"))
	if err != nil || !res.Changed || res.Added != 1 || res.Replaced != 1 || res.Unchanged != 1 || !res.LastImportedAt.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("update: %+v %v", res, err)
	}
	si, err := loadImport(ctx, env.bucket, acqProject, SourceAdsA)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range si.set.Ads {
		got = append(got, fmt.Sprintf("%s %s %s %d %s", r.Day, r.Account, r.Campaign, r.Spend, r.Currency))
	}
	want := []string{
		"2026-06-05 111-222-3333 brand 100000000 EUR",
		"2026-06-09 111-222-3333 brand 12500000 EUR",
		"2026-06-10 111-222-3333 brand 7500000 EUR",
		"2026-06-11 111-222-3333 brand 4250000 EUR",
		"2026-06-12 444-555-6666 generic 12000000 USD",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stored rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	after := etag()

	// Refusals by the catalog and the clock: nothing is stored.
	for _, tc := range []struct {
		name, project, file string
		line                int
		field, says         string
	}{
		{"account not listed", acqProject, "{\"version\":1,\"source\":\"ads_platform_a\"}\n" +
			`{"account":"999","day":"2026-06-10","spend":1,"currency":"EUR","clicks":1,"impressions":1}`, 2, "account", `lists no account "999"`},
		{"provider without accounts", acqProject, "{\"version\":1,\"source\":\"ads_platform_b\"}\n" +
			`{"account":"act_1","day":"2026-06-10","spend":1,"currency":"EUR","clicks":1,"impressions":1}`, 2, "account", "(it lists none)"},
		{"day in the future", acqProject, "{\"version\":1,\"source\":\"ads_platform_a\"}\n" +
			`{"account":"111-222-3333","day":"2026-06-17","spend":1,"currency":"EUR","clicks":1,"impressions":1}`, 2, "day", "in the future"},
		{"whole account beside stored campaigns", acqProject, "{\"version\":1,\"source\":\"ads_platform_a\"}\n" +
			`{"account":"111-222-3333","day":"2026-06-10","spend":1,"currency":"EUR","clicks":1,"impressions":1}`, 0, "campaign", "counts twice"},
		{"dataset off", quietProject, "{\"version\":1,\"source\":\"search_import_a\"}\n" +
			`{"account":"sc-domain:quiet.example","day":"2026-06-10","clicks":1,"impressions":1,"position":1}`, 1, "source", "is dataset_off"},
		{"provider not declared", quietProject, "{\"version\":1,\"source\":\"search_import_b\"}\n" +
			`{"account":"x","day":"2026-06-10","clicks":1,"impressions":1}`, 1, "source", "declares no provider search_import_b"},
	} {
		imp, err := ParseImport(strings.NewReader(tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = imports.Apply(ctx, tc.project, imp)
		var ie *ImportError
		if !errors.As(err, &ie) || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v; want an *ImportError", tc.name, err)
			continue
		}
		f := ie.Faults[0]
		if (tc.line > 0 && f.Line != tc.line) || f.Field != tc.field || !strings.Contains(f.Message, tc.says) {
			t.Errorf("%s: fault %+v; want line %d, field %s, saying %q", tc.name, f, tc.line, tc.field, tc.says)
		}
	}
	if etag() != after {
		t.Error("a refused import changed the stored rows")
	}
	if ok, err := storage.Exists(ctx, env.bucket, importKey(quietProject, SourceSearchA)); err != nil || ok {
		t.Errorf("a refused import stored an object (%v, %v)", ok, err)
	}
	if _, err := imports.Apply(ctx, "33000000-0000-4000-8000-0000000000ff", parseImportFile(t, "ads_a.jsonl")); !errors.Is(err, ErrNotFound) {
		t.Errorf("import into an unknown project: %v; want ErrNotFound", err)
	}
}

// TestImportApplyConcurrent races imports of different days of one source:
// every row must be stored (conditional puts lose no update).
func TestImportApplyConcurrent(t *testing.T) {
	env := newReportEnv(t, "testdata/report/channels-provision.json")
	ctx := context.Background()
	imports, err := NewImports(DefaultImportConfig(), env.bucket, env.cat, env.now)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := fmt.Sprintf("{\"version\":1,\"source\":\"search_import_b\"}\n"+
				`{"account":"acq.example","day":"2026-06-%02d","clicks":%d,"impressions":100}`, i+1, i)
			imp, err := ParseImport(strings.NewReader(file))
			if err == nil {
				_, err = imports.Apply(ctx, acqProject, imp)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	si, err := loadImport(ctx, env.bucket, acqProject, SourceSearchB)
	if err != nil {
		t.Fatal(err)
	}
	if len(si.set.Search) != n {
		t.Fatalf("%d rows stored, want %d", len(si.set.Search), n)
	}
	for i, r := range si.set.Search {
		if r.Day != fmt.Sprintf("2026-06-%02d", i+1) || r.Clicks != int64(i) {
			t.Errorf("row %d: %+v", i, r)
		}
	}
}
