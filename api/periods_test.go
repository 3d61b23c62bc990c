package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

type periodCase struct {
	Name          string        `json:"name"`
	Now           time.Time     `json:"now"`
	Timezone      string        `json:"timezone"`
	RetentionDays int           `json:"retentionDays"`
	FirstEvent    *time.Time    `json:"firstEvent"`
	Endpoint      string        `json:"endpoint"`
	Request       PeriodRequest `json:"request"`
	Want          struct {
		Status     int               `json:"status"`
		Param      string            `json:"param"`
		Detail     string            `json:"detail"`
		Preset     string            `json:"preset"`
		From       string            `json:"from"`
		To         string            `json:"to"`
		Interval   string            `json:"interval"`
		Clamped    bool              `json:"clamped"`
		Previous   map[string]string `json:"previous"`
		Comparison any               `json:"comparison"`
		Buckets    int               `json:"buckets"`
		BucketAt   map[string]string `json:"bucketAt"`
	} `json:"want"`
}

var periodOptions = map[string]PeriodOptions{"report": ReportPeriods, "list": ListPeriods, "events": EventPeriods}

func TestPeriods(t *testing.T) {
	files, _ := filepath.Glob("testdata/periods/*.json")
	if len(files) == 0 {
		t.Fatal("no period cases")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []periodCase
		if err := json.Unmarshal(raw, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range cases {
			t.Run(filepath.Base(f)+"/"+tc.Name, func(t *testing.T) { runPeriodCase(t, tc) })
		}
	}
}

func runPeriodCase(t *testing.T, tc periodCase) {
	loc, err := time.LoadLocation(tc.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	opts, ok := periodOptions[tc.Endpoint]
	if !ok {
		t.Fatalf("unknown endpoint %q", tc.Endpoint)
	}
	p, perr := ResolvePeriod(tc.Request, opts, tc.Now, loc, tc.RetentionDays, tc.FirstEvent)
	w := tc.Want
	if w.Status != 0 {
		if perr == nil {
			t.Fatalf("accepted (%v–%v), want %d", p.From, p.To, w.Status)
		}
		if perr.Status != w.Status || perr.Parameter != w.Param || (w.Detail != "" && perr.Detail != w.Detail) {
			t.Fatalf("refused %d %s %q, want %d %s %q", perr.Status, perr.Parameter, perr.Detail, w.Status, w.Param, w.Detail)
		}
		return
	}
	if perr != nil {
		t.Fatalf("refused: %d %s", perr.Status, perr.Detail)
	}
	meta := p.Meta()
	if w.Preset != "" && meta["preset"] != w.Preset {
		t.Errorf("preset %v, want %s", meta["preset"], w.Preset)
	}
	if meta["from"] != w.From || meta["to"] != w.To {
		t.Errorf("window %v – %v, want %s – %s", meta["from"], meta["to"], w.From, w.To)
	}
	if meta["interval"] != w.Interval || meta["clamped"+"ToRetention"] != w.Clamped || meta["timezone"] != tc.Timezone {
		t.Errorf("interval %v clamped %v timezone %v, want %s %v %s", meta["interval"], meta["clampedToRetention"], meta["timezone"], w.Interval, w.Clamped, tc.Timezone)
	}
	var prev map[string]string
	if p.Previous != nil {
		prev = map[string]string{"from": Bound(p.Previous.From, loc), "to": Bound(p.Previous.To, loc)}
	}
	if !reflect.DeepEqual(prev, w.Previous) {
		t.Errorf("previous %v, want %v", prev, w.Previous)
	}
	gotCmp, _ := json.Marshal(meta["comparison"])
	wantCmp, _ := json.Marshal(w.Comparison)
	if string(gotCmp) != string(wantCmp) {
		t.Errorf("comparison %s, want %s", gotCmp, wantCmp)
	}
	if w.Buckets == 0 && len(w.BucketAt) == 0 {
		return
	}
	b := p.Buckets(p.Window)
	if len(b) != w.Buckets {
		t.Errorf("%d buckets, want %d", len(b), w.Buckets)
	}
	if len(b) > 0 && !b[0].Equal(p.From) {
		t.Errorf("first bucket %v, want the window's start %v", b[0], p.From)
	}
	for k, want := range w.BucketAt {
		i, _ := strconv.Atoi(k)
		if i >= len(b) {
			t.Errorf("no bucket %d", i)
			continue
		}
		if got := Bound(b[i], loc); got != want {
			t.Errorf("bucket %d = %s, want %s", i, got, want)
		}
	}
	if p.Previous != nil {
		if pb := p.Buckets(*p.Previous); len(pb) == 0 || !pb[0].Equal(p.Previous.From) {
			t.Errorf("previous buckets %v", pb)
		}
	}
}
