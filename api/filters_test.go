package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type filterCase struct {
	Name              string   `json:"name"`
	Kind              string   `json:"kind"`
	ConsentlessOnly   bool     `json:"consentlessOnly"`
	Known             []string `json:"known"`
	Query             string   `json:"query"`
	Generate          int      `json:"generate"`
	GenerateField     string   `json:"generateField"`
	ValueLength       int      `json:"valueLength"`
	FieldLength       int      `json:"fieldLength"`
	PropertyKeyLength int      `json:"propertyKeyLength"`
	Want              struct {
		Status  int       `json:"status"`
		Param   string    `json:"param"`
		Detail  string    `json:"detail"`
		Count   *int      `json:"count"`
		Filters []wantFlt `json:"filters"`
	} `json:"want"`
}

type wantFlt struct {
	Index      int              `json:"index"`
	Field      string           `json:"field"`
	Property   string           `json:"property"`
	Op         string           `json:"op"`
	Value      string           `json:"value"`
	Number     float64          `json:"number"`
	Funnel     *FunnelValue     `json:"funnel"`
	Experiment *ExperimentValue `json:"experiment"`
}

func TestFilters(t *testing.T) {
	files, _ := filepath.Glob("testdata/filters/*.json")
	if len(files) == 0 {
		t.Fatal("no filter cases")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []filterCase
		if err := json.Unmarshal(raw, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range cases {
			t.Run(filepath.Base(f)+"/"+tc.Name, func(t *testing.T) { runFilterCase(t, tc) })
		}
	}
}

func runFilterCase(t *testing.T, tc filterCase) {
	q, err := url.ParseQuery(tc.Query)
	if err != nil {
		t.Fatal(err)
	}
	field := tc.GenerateField
	if field == "" {
		field = "event_name"
	}
	for i := 0; i < tc.Generate; i++ {
		q.Set(fmt.Sprintf("filters[%d][field]", i), field)
		q.Set(fmt.Sprintf("filters[%d][op]", i), "set")
	}
	if tc.ValueLength > 0 {
		q.Set("filters[0][value]", strings.Repeat("é", tc.ValueLength)) // characters, not bytes
	}
	generated := ""
	if tc.FieldLength > 0 {
		generated = strings.Repeat("f", tc.FieldLength)
	}
	if tc.PropertyKeyLength > 0 {
		generated = "properties." + strings.Repeat("k", tc.PropertyKeyLength)
	}
	if generated != "" {
		q.Set("filters[0][field]", generated)
	}
	var got []Filter
	var perr *APIError
	switch tc.Kind {
	case "event":
		got, perr = ParseEventFilters(q, EventFilterOptions{ConsentlessOnly: tc.ConsentlessOnly})
	case "person":
		var opts PersonFilterOptions
		if tc.Known != nil {
			opts.Known = func(kind, id string) bool { return slices.Contains(tc.Known, id) }
		}
		got, perr = ParsePersonFilters(q, opts)
	default:
		t.Fatalf("kind %q", tc.Kind)
	}
	w := tc.Want
	if w.Status != 0 {
		if perr == nil {
			t.Fatalf("accepted %+v, want %d", got, w.Status)
		}
		if perr.Status != w.Status || (w.Param != "" && perr.Parameter != w.Param) || (w.Detail != "" && perr.Detail != w.Detail) {
			t.Fatalf("refused %d %s %q, want %d %s %q", perr.Status, perr.Parameter, perr.Detail, w.Status, w.Param, w.Detail)
		}
		return
	}
	if perr != nil {
		t.Fatalf("refused: %d %s %s", perr.Status, perr.Parameter, perr.Detail)
	}
	if w.Count != nil && len(got) != *w.Count {
		t.Fatalf("%d filters, want %d", len(got), *w.Count)
	}
	if w.Filters == nil {
		return
	}
	if len(got) != len(w.Filters) {
		t.Fatalf("%d filters, want %d: %+v", len(got), len(w.Filters), got)
	}
	for i, g := range got {
		want := w.Filters[i]
		if want.Field == "<generated>" {
			want.Field = generated
			want.Property = strings.TrimPrefix(generated, "properties.")
		}
		gw := wantFlt{Index: g.Index, Field: g.Field, Property: g.Property, Op: g.Op, Value: g.Value, Number: g.Number, Funnel: g.Funnel, Experiment: g.Experiment}
		if !reflect.DeepEqual(gw, want) {
			t.Errorf("filter %d: %+v, want %+v", i, gw, want)
		}
	}
}
