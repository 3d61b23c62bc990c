package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// datasetCase is one entry of testdata/datasets.json.
type datasetCase struct {
	Name   string `json:"name"`
	Seed   uint64 `json:"seed"`
	People int    `json:"people"`
	Events int    `json:"events"`
	Days   int    `json:"days"`
}

func loadDatasets(t *testing.T) map[string]datasetCase {
	t.Helper()
	data, err := os.ReadFile("testdata/datasets.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []datasetCase
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("cannot read testdata/datasets.json: %v", err)
	}
	out := map[string]datasetCase{}
	for _, c := range list {
		out[c.Name] = c
	}
	return out
}

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func genConfig(c datasetCase, end time.Time, loc *time.Location) GenConfig {
	return GenConfig{Seed: c.Seed, People: c.People, Events: c.Events, Days: c.Days, End: end, Loc: loc,
		Project: benchProject, Source: benchSource}
}

// digest generates a dataset and returns a hash of its encoded batches in
// the order emitted, checking on the way that they come in receipt order,
// that each is received after its events and that no event falls outside
// the days.
func digest(t *testing.T, cfg GenConfig) (string, Truth) {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var last int64
	start, end := cfg.Start().UnixMilli(), cfg.End.UnixMilli()
	truth := Truth{WindowFrom: start, WindowTo: end}
	err = g.Run(func(b *records.Batch) error {
		if b.ReceivedAt < last {
			return fmt.Errorf("batch %s received at %d after one received at %d", b.ID, b.ReceivedAt, last)
		}
		last = b.ReceivedAt
		for _, e := range b.Events {
			if e.Time < start || e.Time >= end || e.Time > b.ReceivedAt {
				return fmt.Errorf("event %s at %d: outside [%d, %d) or after its batch's receipt %d", e.ID, e.Time, start, end, b.ReceivedAt)
			}
			if e.Page.URL.Port != "" {
				return fmt.Errorf("event %s still carries the generator's channel tag %q", e.ID, e.Page.URL.Port)
			}
		}
		data, err := records.Encode(b)
		if err != nil {
			return err
		}
		h.Write(data)
		truth.Batches++
		return nil
	}, &truth)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), truth
}

// TestGeneratorIsDeterministic generates the same dataset twice (same
// seed, same end) and another seed's, and checks the sizes land near what
// was asked.
func TestGeneratorIsDeterministic(t *testing.T) {
	cases := loadDatasets(t)
	loc := berlin(t)
	end := time.Date(2026, 3, 29, 14, 0, 0, 0, loc) // across a DST change
	a, ta := digest(t, genConfig(cases["small"], end, loc))
	b, tb := digest(t, genConfig(cases["small"], end, loc))
	c, _ := digest(t, genConfig(cases["other-seed"], end, loc))
	if a != b {
		t.Errorf("the same seed made different batches: %s, %s", a, b)
	}
	if a == c {
		t.Errorf("seeds %d and %d made the same batches", cases["small"].Seed, cases["other-seed"].Seed)
	}
	if ta.Events != tb.Events || ta.Batches != tb.Batches {
		t.Errorf("counts differ between runs: %+v vs %+v", ta, tb)
	}
	want := cases["small"]
	if d := float64(ta.Events-want.Events) / float64(want.Events); d < -0.05 || d > 0.05 {
		t.Errorf("generated %d events, asked for about %d", ta.Events, want.Events)
	}
	if ta.People > want.People || ta.People < want.People*9/10 {
		t.Errorf("generated %d people with events, asked for %d", ta.People, want.People)
	}
	if ta.Orders == 0 || ta.Visits == 0 || ta.Pageviews == 0 {
		t.Errorf("no orders, visits or pageviews: %+v", ta)
	}
	for _, ch := range channelNames {
		if ta.WindowVisits[ch] == 0 {
			t.Errorf("no visit of channel %s", ch)
		}
	}
	if ta.WindowPeople != ta.People || ta.WindowKnown == 0 || ta.WindowBuyers == 0 || len(ta.WindowRevenue) != 2 {
		t.Errorf("over the whole span: %d people active of %d, %d signed in, %d buyers, revenue %v (want EUR and USD)",
			ta.WindowPeople, ta.People, ta.WindowKnown, ta.WindowBuyers, ta.WindowRevenue)
	}
}

// TestPipelineMatchesTheGenerator builds a small dataset the way the
// bench does (publish to a real embedded log, real catalog, the real
// processor into a local object store), then answers the questions with
// DuckDB (Node) over the live Parquet files and checks the numbers against
// what the generator knows it made: people active in the last 30 days, new
// ones, signed-in ones, buyers, revenue per currency, visits per channel.
func TestPipelineMatchesTheGenerator(t *testing.T) {
	cases := loadDatasets(t)
	c := cases["small"]
	loc := berlin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e, err := openEnv(ctx, dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	cfg := DefaultConfig()
	cfg.Seed, cfg.People, cfg.Events, cfg.Days = c.Seed, c.People, c.Events, c.Days
	ds, err := build(ctx, cfg, e, loc, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.checkpoint(ctx, benchProject)
	if err != nil {
		t.Fatal(err)
	}
	if cp < ds.LastSeq || ds.ProcessStats.Events != int64(ds.Truth.Events) {
		t.Fatalf("tables cover the log to %d (want %d), processor applied %d events (generated %d)", cp, ds.LastSeq, ds.ProcessStats.Events, ds.Truth.Events)
	}
	// The marker round-trips, so --dir reuses the dataset.
	if err := writeDataset(dir, ds); err != nil {
		t.Fatal(err)
	}
	back, ok, err := readDataset(dir)
	if err != nil || !ok || back.LastSeq != ds.LastSeq || back.Truth.Events != ds.Truth.Events {
		t.Fatalf("dataset marker: %+v, %v, %v", back, ok, err)
	}

	files, err := e.liveFiles(ctx, benchProject, duckTables...)
	if err != nil {
		t.Fatal(err)
	}
	in := duckInput{Files: files, Keys: tableKeys(duckTables), Lo: ds.Truth.WindowFrom, Hi: ds.Truth.WindowTo, Warmup: 0, N: 1}
	in.Funnel.Steps, in.Funnel.WindowMs = funnelSteps, funnelWindowDays*86_400_000
	out, err := runDuckDB(ctx, "duckdb", in)
	if err != nil {
		t.Fatal(err)
	}
	tr := ds.Truth
	ov := out.Results["overview"].Rows
	if len(ov) != 1 {
		t.Fatalf("overview rows: %v", ov)
	}
	for k, want := range map[string]int{"people": tr.WindowPeople, "newPeople": tr.WindowNew, "known": tr.WindowKnown, "buyers": tr.WindowBuyers} {
		if got := ov[0][k]; got != strconv.Itoa(want) {
			t.Errorf("overview %s: DuckDB over the tables says %s, the generator made %d", k, got, want)
		}
	}
	var rev []struct{ Currency, Micro string }
	if err := json.Unmarshal([]byte(ov[0]["revenue"]), &rev); err != nil {
		t.Fatalf("revenue %q: %v", ov[0]["revenue"], err)
	}
	gotRev := map[string]int64{}
	for _, r := range rev {
		gotRev[r.Currency], _ = strconv.ParseInt(r.Micro, 10, 64)
	}
	if fmt.Sprint(gotRev) != fmt.Sprint(tr.WindowRevenue) {
		t.Errorf("revenue: DuckDB over the tables says %v, the generator made %v", gotRev, tr.WindowRevenue)
	}
	gotVisits := map[string]int{}
	for _, r := range out.Results["channels"].Rows {
		n, _ := strconv.Atoi(r["visits"])
		if n > 0 {
			gotVisits[r["channel"]] = n
		}
	}
	if fmt.Sprint(gotVisits) != fmt.Sprint(tr.WindowVisits) {
		t.Errorf("visits per channel: DuckDB over the tables says %v, the generator made %v", gotVisits, tr.WindowVisits)
	}
	f := out.Results["funnel"].Rows
	if len(f) != 1 {
		t.Fatalf("funnel rows: %v", f)
	}
	prev := tr.WindowPeople
	for i := range funnelSteps {
		n, err := strconv.Atoi(f[0]["step"+strconv.Itoa(i+1)])
		if err != nil || n > prev || n == 0 {
			t.Errorf("funnel step %d: %q (previous %d): steps must be positive and not grow", i+1, f[0]["step"+strconv.Itoa(i+1)], prev)
		}
		prev = n
	}
	people := out.Results["people"].Rows
	if len(people) != 50 {
		t.Fatalf("people page: %d rows", len(people))
	}
	if !slices.IsSortedFunc(people, func(a, b map[string]string) int {
		x, _ := strconv.ParseInt(a["lastSeen"], 10, 64)
		y, _ := strconv.ParseInt(b["lastSeen"], 10, 64)
		return int(y - x)
	}) {
		t.Errorf("people page not by last seen, newest first: %v", people)
	}
}

// TestCompare runs the comparison of API answers with DuckDB rows over
// testdata/compare.json: which figures are compared and which differ.
func TestCompare(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string              `json:"name"`
		Question string              `json:"question"`
		API      json.RawMessage     `json:"api"`
		Duck     []map[string]string `json:"duck"`
		Compared int                 `json:"compared"`
		Diffs    []string            `json:"diffs"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			diffs, n, err := compare(c.Question, c.API, c.Duck)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, d := range diffs {
				got = append(got, d.What)
			}
			if n != c.Compared || !slices.Equal(got, c.Diffs) {
				t.Errorf("compared %d, differing %v (%+v); want %d, %v", n, got, diffs, c.Compared, c.Diffs)
			}
		})
	}
}

// TestPercentile checks the nearest-rank percentiles the report prints.
func TestPercentile(t *testing.T) {
	ms := make([]float64, 50)
	for i := range ms {
		ms[i] = float64(50 - i) // 50 down to 1
	}
	for _, c := range []struct{ p, want float64 }{{50, 25}, {95, 48}, {100, 50}, {1, 1}} {
		if got := pct(ms, c.p); got != c.want {
			t.Errorf("p%v of 1..50 = %v, want %v", c.p, got, c.want)
		}
	}
	if got := pct(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}
