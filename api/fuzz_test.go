package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzFilters feeds arbitrary query strings to ParseEventFilters and
// ParsePersonFilters (docs/reporting-api.md, "Filters"). Seeds: the query
// of every case of testdata/filters and testdata/fuzz/FuzzFilters.
// Properties:
//   - the same query gives the same answer every time (Go randomizes map
//     order, so a parser that reports the first fault met in a map would
//     answer differently);
//   - a refusal is 400 invalid_parameter naming the parameter, with a
//     readable (UTF-8) detail;
//   - accepted filters are at most 20 (event) or 12 (person), in order of
//     index, each with an operator its field takes, a value within the
//     limits and of the field's closed set, a finite number for gt and lt;
//   - accepted filters written back as a query parse to the same filters.
func FuzzFilters(f *testing.F) {
	files, _ := filepath.Glob("testdata/filters/*.json")
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var cases []filterCase
		if err := json.Unmarshal(raw, &cases); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		for _, tc := range cases {
			f.Add(tc.Query, tc.Kind == "person", tc.ConsentlessOnly)
		}
	}
	f.Fuzz(func(t *testing.T, query string, person, consentless bool) {
		q, _ := url.ParseQuery(query)
		parse := func(q url.Values) ([]Filter, *APIError) {
			if person {
				return ParsePersonFilters(q, PersonFilterOptions{})
			}
			return ParseEventFilters(q, EventFilterOptions{ConsentlessOnly: consentless})
		}
		got, perr := parse(q)
		if again, aerr := parse(q); !reflect.DeepEqual(again, got) || !reflect.DeepEqual(aerr, perr) {
			t.Fatalf("not deterministic on %q: %+v %+v, then %+v %+v", query, got, perr, again, aerr)
		}
		if perr != nil {
			checkBadParam(t, perr)
			return
		}
		fields, values, maxN, maxValue := eventFields, eventValues, MaxEventFilters, maxEventValue
		if person {
			fields, values, maxN, maxValue = personFields, personValues, MaxPersonFilters, maxPersonValue
		}
		if len(got) > maxN {
			t.Fatalf("%d filters accepted", len(got))
		}
		back := url.Values{}
		for i, fl := range got {
			if i > 0 && got[i-1].Index >= fl.Index {
				t.Fatalf("filters out of order: %+v", got)
			}
			ops, ok := fields[fl.Field]
			if !person && strings.HasPrefix(fl.Field, "properties.") {
				ops, ok = allOps, fl.Property == strings.TrimPrefix(fl.Field, "properties.") && rePropertyKey.MatchString(fl.Property)
			}
			if !ok || !slices.Contains(ops, fl.Op) {
				t.Fatalf("filter %+v accepted", fl)
			}
			if !person && fl.Field == "channel" && consentless {
				t.Fatalf("channel filter accepted on a consentless project")
			}
			switch {
			case fl.Op == "set" || fl.Op == "not_set":
				if fl.Value != "" {
					t.Fatalf("%s with value %q accepted", fl.Op, fl.Value)
				}
			case fl.Value == "" || utf8.RuneCountInString(fl.Value) > maxValue:
				t.Fatalf("value %q accepted", fl.Value)
			case fl.Op == "gt" || fl.Op == "lt":
				if math.IsNaN(fl.Number) || math.IsInf(fl.Number, 0) {
					t.Fatalf("number %v accepted", fl.Number)
				}
			}
			if set, closed := values[fl.Field]; closed && fl.Op != "set" && fl.Op != "not_set" && !slices.Contains(set, fl.Value) {
				t.Fatalf("%s value %q accepted", fl.Field, fl.Value)
			}
			if fl.Field == "country" && fl.Value != "" && !reUpperCC.MatchString(fl.Value) {
				t.Fatalf("country %q accepted", fl.Value)
			}
			p := "filters[" + strconv.Itoa(fl.Index) + "]"
			back.Set(p+"[field]", fl.Field)
			back.Set(p+"[op]", fl.Op)
			if fl.Value != "" {
				back.Set(p+"[value]", fl.Value)
			}
		}
		again, aerr := parse(back)
		if aerr != nil || !reflect.DeepEqual(filtersOrEmpty(again), filtersOrEmpty(got)) {
			t.Fatalf("accepted filters written back as %q parse as %+v %+v, not %+v", back.Encode(), again, aerr, got)
		}
	})
}

func filtersOrEmpty(fs []Filter) []Filter {
	if fs == nil {
		return []Filter{}
	}
	return fs
}

// checkBadParam checks the form of a 400 refusal of a query parameter.
func checkBadParam(t *testing.T, e *APIError) {
	t.Helper()
	if e.Status != 400 || e.Code != "invalid_parameter" || e.Parameter == "" || e.Detail == "" {
		t.Fatalf("refusal %+v is not 400 invalid_parameter naming a parameter", e)
	}
	if !utf8.ValidString(e.Detail) {
		t.Fatalf("refusal detail is not UTF-8: %q", e.Detail)
	}
}

// fuzzZones are the time zones FuzzPeriods picks from: whole, half and
// quarter hour offsets, DST at midnight, a 30-minute DST shift and a zone
// that skipped a whole day.
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "America/Santiago", "Asia/Kathmandu",
	"Australia/Lord_Howe", "Pacific/Apia", "America/Havana", "Asia/Tehran", "Pacific/Chatham"}

// FuzzPeriods feeds arbitrary period, from, to and compare values (each
// present or not, per the bits of present), endpoints, clocks, time zones,
// retentions and first events to ResolvePeriod (docs/reporting-api.md,
// "Periods"). Seeds: every case of testdata/periods and
// testdata/fuzz/FuzzPeriods. Properties:
//   - a refusal is 400 invalid_parameter or 422 unprocessable_parameter
//     naming period, from, to or compare, with a readable (UTF-8) detail;
//   - an accepted period is a preset the endpoint offers (or custom where
//     offered), a non-empty window that holds the request's moment (a
//     custom range: that ends by the end of today), starting no earlier
//     than the retained history for day-cut windows, clamped only to its
//     first day; its buckets start at the window's start, increase and stay
//     inside it; the previous window ends where the window starts and
//     starts within the retained history and after the first event;
//   - a custom range resolved is resolved again the same from the dates
//     it shows.
func FuzzPeriods(f *testing.F) {
	files, _ := filepath.Glob("testdata/periods/*.json")
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var cases []periodCase
		if err := json.Unmarshal(raw, &cases); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		for _, tc := range cases {
			var present uint8
			val := func(bit uint8, s *string) string {
				if s == nil {
					return ""
				}
				present |= bit
				return *s
			}
			r := tc.Request
			period, from, to, compare := val(1, r.Period), val(2, r.From), val(4, r.To), val(8, r.Compare)
			var ago int64
			if tc.FirstEvent != nil {
				present |= 16
				ago = int64(tc.Now.Sub(*tc.FirstEvent) / time.Second)
			}
			endpoint := uint8(slices.Index([]string{"report", "list", "events"}, tc.Endpoint))
			f.Add(period, from, to, compare, present, endpoint, tc.Now.Unix(), uint8(slices.Index(fuzzZones, tc.Timezone)), uint16(tc.RetentionDays), ago)
		}
	}
	endpoints := []PeriodOptions{ReportPeriods, ListPeriods, EventPeriods}
	zones := make([]*time.Location, len(fuzzZones))
	for i, name := range fuzzZones {
		loc, err := time.LoadLocation(name)
		if err != nil {
			f.Fatal(err)
		}
		zones[i] = loc
	}
	f.Fuzz(func(t *testing.T, period, from, to, compare string, present, endpoint uint8, nowUnix int64, zone uint8, retention uint16, firstAgo int64) {
		// Clocks from 1970 to 2200, retention 1 to 3,650 days.
		now := time.Unix(nowUnix%(230*365*86400), 0).UTC()
		if now.Before(time.Unix(0, 0)) {
			now = now.Add(230 * 365 * 86400 * time.Second)
		}
		loc := zones[int(zone)%len(zones)]
		opts := endpoints[int(endpoint)%len(endpoints)]
		days := 1 + int(retention)%3650
		var req PeriodRequest
		for bit, p := range map[uint8]**string{1: &req.Period, 2: &req.From, 4: &req.To, 8: &req.Compare} {
			if present&bit != 0 {
				*p = new(string)
			}
		}
		for p, v := range map[*string]string{req.Period: period, req.From: from, req.To: to, req.Compare: compare} {
			if p != nil {
				*p = v
			}
		}
		var first *time.Time
		if present&16 != 0 {
			fe := now.Add(-time.Duration(firstAgo%(4000*86400)) * time.Second)
			first = &fe
		}
		p, perr := ResolvePeriod(req, opts, now, loc, days, first)
		if perr != nil {
			if !(perr.Status == 400 && perr.Code == "invalid_parameter") && !(perr.Status == 422 && perr.Code == "unprocessable_parameter") {
				t.Fatalf("refusal %+v", perr)
			}
			if !slices.Contains([]string{"period", "from", "to", "compare"}, perr.Parameter) || perr.Detail == "" || !utf8.ValidString(perr.Detail) {
				t.Fatalf("refusal %+v", perr)
			}
			return
		}
		if p.Preset == "custom" && !opts.Custom || p.Preset != "custom" && !slices.Contains(opts.Presets, p.Preset) {
			t.Fatalf("period %q accepted by an endpoint offering %v (custom %v)", p.Preset, opts.Presets, opts.Custom)
		}
		if p.Compare != (req.Compare != nil && *req.Compare == "previous") {
			t.Fatalf("compare %v from %v", p.Compare, req.Compare)
		}
		if !p.From.Before(p.To) {
			t.Fatalf("empty window %v – %v", p.From, p.To)
		}
		today := civil(now, loc)
		retStart := today.addDays(-(days - 1)).midnight(loc)
		switch {
		case p.Preset == "custom":
			if p.To.After(today.addDays(1).midnight(loc)) {
				t.Fatalf("custom range ends %v, after today %v", p.To, today)
			}
		case opts.EndsNow:
			if !p.To.Equal(now) {
				t.Fatalf("window ends %v, not now %v", p.To, now)
			}
		case now.Before(p.From) || !now.Before(p.To):
			t.Fatalf("window %v – %v does not hold now %v", p.From, p.To, now)
		}
		if (p.days > 0 || p.months > 0) && p.From.Before(retStart) {
			t.Fatalf("window starts %v, before the retained history %v", p.From, retStart)
		}
		if p.Clamped && !p.From.Equal(retStart) {
			t.Fatalf("clamped to %v, not to the retained history's start %v", p.From, retStart)
		}
		b := p.Buckets(p.Window)
		if len(b) == 0 || !b[0].Equal(p.From) || len(b) > 800 {
			t.Fatalf("%d buckets from %v for %v – %v", len(b), b, p.From, p.To)
		}
		for i := 1; i < len(b); i++ {
			if !b[i-1].Before(b[i]) || !b[i].Before(p.To) {
				t.Fatalf("bucket %d at %v after %v in %v – %v", i, b[i], b[i-1], p.From, p.To)
			}
		}
		if pr := p.Previous; pr != nil {
			if !pr.To.Equal(p.From) || !pr.From.Before(pr.To) || pr.From.Before(retStart) || first == nil || pr.From.Before(*first) {
				t.Fatalf("previous %v – %v for %v – %v", pr.From, pr.To, p.From, p.To)
			}
		}
		if _, err := json.Marshal(p.Meta()); err != nil {
			t.Fatalf("meta: %v", err)
		}
		if p.Preset == "custom" {
			f, l := civil(p.From, loc).String(), civil(p.To.Add(-time.Nanosecond), loc).String()
			again, aerr := ResolvePeriod(PeriodRequest{Period: req.Period, From: &f, To: &l, Compare: req.Compare}, opts, now, loc, days, first)
			if aerr != nil || !again.From.Equal(p.From) || !again.To.Equal(p.To) || again.Interval != p.Interval {
				t.Fatalf("custom %s – %s resolved as %v – %v, again from %s – %s as %v – %v %+v", from, to, p.From, p.To, f, l, again.From, again.To, aerr)
			}
		}
	})
}

// FuzzCursors feeds arbitrary lists, parameters, positions and cursor
// texts to Cursors (docs/reporting-api.md, "Pagination"). The parameters
// are name/value pairs separated by "|". Seeds: cursors as the lists seal
// them and testdata/fuzz/FuzzCursors. Properties:
//   - a sealed position opens again, unchanged, with the same list and
//     parameters, and with no other list or parameters (a cursor longer
//     than 2,048 characters never opens);
//   - a cursor text that opens is exactly the text Seal makes for what it
//     opened to (no second spelling of a cursor is accepted).
func FuzzCursors(f *testing.F) {
	c := NewCursors([]byte("fuzz-cursor-key-0123456789abcdef"))
	events := "period|24h|project|p1|f0.field|event_name|f0.op|is|f0.value|signup"
	pos := make([]byte, 24)
	pos[7] = 42
	for _, s := range []struct{ list, a, b string }{
		{"events", events, events},
		{"events", events, "period|24h|project|p1"},
		{"people", "project|p1|sort|last_seen", "project|p1|sort|visits"},
		{"projects", "user|u1", "user|u2"},
	} {
		f.Add(s.list, s.a, s.b, pos, c.Seal(s.list, Bind(strings.Split(s.a, "|")...), pos))
	}
	// A line break inside a sealed cursor: the decoder skips it, the
	// cursor must not open (one spelling).
	sealed := c.Seal("events", Bind(strings.Split(events, "|")...), pos)
	f.Add("events", events, events, pos, sealed[:5]+"\r"+sealed[5:])
	f.Add("projects", "user|u1", "user|u1", []byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 'i', 'd'}, "AQ")
	f.Fuzz(func(t *testing.T, list, a, b string, pos []byte, cursor string) {
		pa, pb := Bind(strings.Split(a, "|")...), Bind(strings.Split(b, "|")...)
		sealed := c.Seal(list, pa, pos)
		got, ok := c.Open(list, pa, sealed)
		if len(sealed) > cursorMaxLen {
			// Longer than any list's position (at most 45 bytes); Open
			// reads no cursor text over the bound.
			if ok {
				t.Fatalf("a cursor of %d characters opens", len(sealed))
			}
			return
		}
		if !ok || string(got) != string(pos) {
			t.Fatalf("sealed %x opens as %x %v", pos, got, ok)
		}
		same := slices.Equal(pa, pb)
		if _, ok := c.Open(list, pb, sealed); ok != same {
			t.Fatalf("a cursor sealed with %q opens with %q: %v", pa, pb, ok)
		}
		if _, ok := c.Open(list+"x", pa, sealed); ok {
			t.Fatalf("a cursor of list %q opens for list %q", list, list+"x")
		}
		if got, ok := c.Open(list, pb, cursor); ok {
			if again := c.Seal(list, pb, got); again != cursor {
				t.Fatalf("cursor %q opens to %x, which seals as %q", cursor, got, again)
			}
		}
	})
}

// FuzzParseImport feeds arbitrary import files to ParseImport
// (docs/imports.md). Seeds: the example files and every refused case of
// testdata/imports, and testdata/fuzz/FuzzParseImport. Properties:
//   - a refusal is an *ImportError (ErrInvalidImport, ErrRefused: 422)
//     with 1 to 100 faults in line order, each on a line of the file,
//     its message and field readable (UTF-8);
//   - every accepted row is within the format's limits (accounts of 1 to
//     512 characters, dates, counts from 0 below 2^53 with clicks at most
//     impressions, amounts of at most a billion in micro-units, currency
//     codes, positions of at least 1) and no row is repeated;
//   - an accepted import written out again parses to the same rows.
func FuzzParseImport(f *testing.F) {
	names, _ := filepath.Glob("testdata/imports/*.jsonl")
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	raw, err := os.ReadFile("testdata/imports/refusals.json")
	if err != nil {
		f.Fatal(err)
	}
	var refusals struct {
		Cases []struct {
			Lines []string `json:"lines"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &refusals); err != nil {
		f.Fatal(err)
	}
	for _, c := range refusals.Cases {
		f.Add([]byte(strings.Join(c.Lines, "\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		imp, err := ParseImport(bytes.NewReader(data))
		if err != nil {
			var ie *ImportError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidImport) || !errors.Is(err, ErrRefused) {
				t.Fatalf("refusal %T %v", err, err)
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			if len(ie.Faults) == 0 || len(ie.Faults) > maxImportFaults {
				t.Fatalf("%d faults", len(ie.Faults))
			}
			for i, fl := range ie.Faults {
				if fl.Message == "" || !utf8.ValidString(fl.Message) || !utf8.ValidString(fl.Field) || fl.Line < 0 || fl.Line > lines+1 || i > 0 && fl.Line < ie.Faults[i-1].Line {
					t.Fatalf("fault %d %+v of a file of %d lines: %v", i, fl, lines, err)
				}
			}
			return
		}
		checkImportRows(t, imp)
		back, err := ParseImport(bytes.NewReader(writeImport(imp)))
		if err != nil {
			t.Fatalf("accepted import written back is refused: %v\n%s", err, writeImport(imp))
		}
		if a, b := importWithoutLines(imp), importWithoutLines(back); !reflect.DeepEqual(a, b) {
			t.Fatalf("accepted import written back reads\n%+v\nnot\n%+v", b, a)
		}
	})
}

func checkImportRows(t *testing.T, imp *Import) {
	t.Helper()
	if !slices.Contains([]string{SourceSearchA, SourceSearchB, SourceAdsA, SourceAdsB}, imp.Source) || imp.Rows() > maxImportRows {
		t.Fatalf("import of %s with %d rows accepted", imp.Source, imp.Rows())
	}
	account := func(s string) {
		if n := utf8.RuneCountInString(s); n < 1 || n > maxAccountLen {
			t.Fatalf("account %q accepted", s)
		}
	}
	day := func(s string) {
		if _, ok := parseDate(s); !ok {
			t.Fatalf("day %q accepted", s)
		}
	}
	count := func(n int64) {
		if n < 0 || n > maxImportCount {
			t.Fatalf("count %d accepted", n)
		}
	}
	seen := map[string]bool{}
	unique := func(k ...string) {
		key := fmt.Sprintf("%q", k)
		if seen[key] {
			t.Fatalf("row %s accepted twice", key)
		}
		seen[key] = true
	}
	for _, d := range imp.Search {
		account(d.Account)
		day(d.Day)
		count(d.Clicks)
		count(d.Impressions)
		unique("d", d.Account, d.Day)
		if d.Clicks > d.Impressions || d.PositionSum < 0 || math.IsInf(d.PositionSum, 0) || math.IsNaN(d.PositionSum) ||
			d.Impressions > 0 && imp.Source == SourceSearchA && d.PositionSum < float64(d.Impressions) {
			t.Fatalf("search row %+v accepted", d)
		}
	}
	for _, w := range imp.Weeks {
		account(w.Account)
		day(w.Week)
		unique("w", w.Account, w.Week)
		if imp.Source != SourceSearchB || w.Position < 1 || math.IsInf(w.Position, 0) {
			t.Fatalf("week row %+v of %s accepted", w, imp.Source)
		}
	}
	whole := map[string]bool{}
	for _, a := range imp.Ads {
		account(a.Account)
		day(a.Day)
		count(a.Clicks)
		count(a.Impressions)
		unique("a", a.Account, a.Day, a.Campaign)
		whole[a.Account+"\x00"+a.Day] = whole[a.Account+"\x00"+a.Day] || a.Campaign == ""
		if a.Spend < 0 || a.Spend > maxSpendMicros || !reCurrency.MatchString(a.Currency) || utf8.RuneCountInString(a.Campaign) > maxCampaignLen {
			t.Fatalf("ads row %+v accepted", a)
		}
	}
	for _, a := range imp.Ads {
		if a.Campaign != "" && whole[a.Account+"\x00"+a.Day] {
			t.Fatalf("ads day %s of %q given whole and by campaign accepted", a.Day, a.Account)
		}
	}
	if imp.Source != SourceSearchA && imp.Source != SourceSearchB && len(imp.Search)+len(imp.Weeks) > 0 ||
		(imp.Source == SourceSearchA || imp.Source == SourceSearchB) && len(imp.Ads) > 0 {
		t.Fatalf("rows of another source accepted: %+v", imp)
	}
}

// writeImport writes an import in the file format, one row a line.
func writeImport(imp *Import) []byte {
	var b bytes.Buffer
	line := func(v map[string]any) {
		data, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	line(map[string]any{"version": 1, "source": imp.Source})
	for _, d := range imp.Search {
		row := map[string]any{"account": d.Account, "day": d.Day, "clicks": d.Clicks, "impressions": d.Impressions}
		if imp.Source == SourceSearchA {
			row["positionSum"] = d.PositionSum
		}
		line(row)
	}
	for _, w := range imp.Weeks {
		line(map[string]any{"account": w.Account, "week": w.Week, "position": w.Position})
	}
	for _, a := range imp.Ads {
		row := map[string]any{"account": a.Account, "day": a.Day, "spend": json.Number(fmt.Sprintf("%d.%06d", a.Spend/1e6, a.Spend%1e6)),
			"currency": a.Currency, "clicks": a.Clicks, "impressions": a.Impressions}
		if a.Campaign != "" {
			row["campaign"] = a.Campaign
		}
		line(row)
	}
	return b.Bytes()
}

func importWithoutLines(imp *Import) Import {
	out := Import{Source: imp.Source}
	for _, d := range imp.Search {
		d.Line = 0
		out.Search = append(out.Search, d)
	}
	for _, w := range imp.Weeks {
		w.Line = 0
		out.Weeks = append(out.Weeks, w)
	}
	for _, a := range imp.Ads {
		a.Line = 0
		out.Ads = append(out.Ads, a)
	}
	return out
}

// FuzzAgentRequest feeds arbitrary tool arguments to every agent tool's
// translation into its REST request (contracts/agents.md). Seeds: the
// arguments of every case of testdata/agent/calls.json and
// testdata/fuzz/FuzzAgentRequest. Properties:
//   - a refusal names the argument and says what is wrong;
//   - an accepted call reads the tool's own endpoint: the path has the
//     route's segments, each path argument stays inside its segment (not
//     empty) and reads back as given (a "." or ".." segment is the
//     endpoint's to refuse, as testdata/agent/calls.json checks);
//   - the query is well formed, and its parameters are the REST
//     parameters of the tools (filters as filters[i][field|op|value]);
//   - the project named is the project_id argument, and only a UUID.
func FuzzAgentRequest(f *testing.F) {
	raw, err := os.ReadFile("testdata/agent/calls.json")
	if err != nil {
		f.Fatal(err)
	}
	var calls struct {
		Cases []struct {
			Tool string          `json:"tool"`
			Args json.RawMessage `json:"args"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		f.Fatal(err)
	}
	tools := agentTools()
	for _, c := range calls.Cases {
		i := slices.IndexFunc(tools, func(t *agentTool) bool { return t.name == c.Tool })
		f.Add(uint8(i), []byte(c.Args))
	}
	known := map[string]bool{}
	for _, t := range tools {
		for _, p := range t.params {
			known[p.query] = true
		}
	}
	for _, p := range passThrough {
		known[p.query] = true
	}
	reFilterQuery := regexp.MustCompile(`^filters\[[0-9]+\]\[(field|op|value)\]$`)
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		tl := tools[int(tool)%len(tools)]
		uri, project, perr := tl.request(args)
		if perr != nil {
			if perr.param == "" || perr.detail == "" {
				t.Fatalf("refusal %+v", perr)
			}
			return
		}
		u, err := url.ParseRequestURI(uri)
		if err != nil {
			t.Fatalf("%s gives %q: %v", tl.name, uri, err)
		}
		route := strings.Split(tl.route, "/")
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != len(route) {
			t.Fatalf("%s gives path %q for route %q", tl.name, u.EscapedPath(), tl.route)
		}
		var m map[string]json.RawMessage
		_ = json.Unmarshal(args, &m)
		for i, s := range segs {
			if s == route[i] {
				continue
			}
			name, ok := strings.CutPrefix(route[i], "{")
			name, ok2 := strings.CutSuffix(name, "}")
			v, err := url.PathUnescape(s)
			want, _ := scalarText(m[name])
			if !ok || !ok2 || err != nil || v != want || v == "" {
				t.Fatalf("%s gives segment %q for %q of route %q from %s", tl.name, s, route[i], tl.route, args)
			}
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			t.Fatalf("%s gives query %q: %v", tl.name, u.RawQuery, err)
		}
		for name := range q {
			if !known[name] && !reFilterQuery.MatchString(name) {
				t.Fatalf("%s sends parameter %q", tl.name, name)
			}
		}
		if project != "" {
			id, _ := scalarText(m["project_id"])
			if project != id || !reProjectID.MatchString(project) {
				t.Fatalf("project %q from %s", project, args)
			}
		}
	})
}

// FuzzAccessToken feeds arbitrary bearer tokens to the app access token
// check (docs/agents.md, "App tokens"). Seeds: tokens as they are issued
// and testdata/fuzz/FuzzAccessToken. Properties: an issued token opens to
// what it was issued for; a token that opens names a user and is exactly
// the text issuing its payload gives (no other spelling of a token works).
func FuzzAccessToken(f *testing.F) {
	r := &Reporting{accessKey: []byte("fuzz-access-key-0123456789abcdef")}
	tok := r.sealAccess(accessPayload{User: "10000000-0000-4000-8000-000000000001", App: "claude", Expires: 1_780_000_000})
	f.Add(tok, "10000000-0000-4000-8000-000000000001", "claude", int64(1_780_000_000))
	f.Add("mf_oat_e30.AAAA", "", "", int64(0))
	f.Add(tok[:12]+"\n"+tok[12:], "10000000-0000-4000-8000-000000000001", "claude", int64(1_780_000_000)) // a line break the decoder skips
	f.Fuzz(func(t *testing.T, tok, user, app string, exp int64) {
		want := accessPayload{User: user, App: app, Expires: exp}
		sealed := r.sealAccess(want)
		got, ok := r.openAccess(sealed)
		if len(sealed) <= maxTokenLen && user != "" && (!ok || got != want) && utf8.ValidString(user) && utf8.ValidString(app) {
			t.Fatalf("token for %+v opens as %+v %v", want, got, ok)
		}
		p, ok := r.openAccess(tok)
		if !ok {
			return
		}
		if p.User == "" {
			t.Fatalf("token %q without a user opens", tok)
		}
		if again := r.sealAccess(p); again != tok {
			t.Fatalf("token %q opens to %+v, which is issued as %q", tok, p, again)
		}
	})
}
