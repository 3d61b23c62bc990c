package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parsing and checking an import file (docs/imports.md): ParseImport.

var (
	reCurrency = regexp.MustCompile(`^[A-Z]{3}$`)
	reDecimal  = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)
)

// Fields each kind of row takes, in the order faults are reported.
var (
	headerFields     = []string{"version", "source", "engine"}
	searchDayFields  = []string{"account", "day", "clicks", "impressions", "position", "positionSum"}
	searchWeekFields = []string{"account", "week", "position"}
	adsFields        = []string{"account", "day", "campaign", "spend", "currency", "clicks", "impressions"}
)

// ParseImport reads an import file (docs/imports.md) and checks every row.
// A refused file gives an *ImportError naming each fault's line and field.
// The rows' accounts are checked against the project's provider by
// Imports.Apply.
func ParseImport(r io.Reader) (*Import, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxImportLine)
	var fs faults
	imp := &Import{}
	header := false
	line := 0
	seen := map[string]int{} // row key → line
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		fields, ok := readObject(text, line, &fs)
		if !ok {
			if !header {
				break // without a header the rows cannot be read
			}
			continue
		}
		if !header {
			header = true
			if !parseHeader(fields, line, imp, &fs) {
				break
			}
			continue
		}
		if imp.Rows() >= maxImportRows {
			fs.add(line, "", "an import holds at most %d rows; split the file", maxImportRows)
			break
		}
		switch imp.Source {
		case SourceSearchA, SourceSearchB:
			parseSearchRow(fields, line, imp, seen, &fs)
		default:
			parseAdsRow(fields, line, imp, seen, &fs)
		}
		if fs.full() {
			break
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			fs.add(line+1, "", "a line is longer than %d bytes", maxImportLine)
		} else {
			return nil, fmt.Errorf("cannot read the import: %w", err)
		}
	}
	if !header && len(fs.list) == 0 {
		fs.add(0, "", `the import is empty; its first line is a header such as {"version":1,"source":"search_import_a"}`)
	}
	if err := fs.err(); err != nil {
		return nil, err
	}
	checkAdsMix(imp.Ads, &fs)
	if err := fs.err(); err != nil {
		return nil, err
	}
	return imp, nil
}

// readObject decodes one line as a JSON object of raw members, refusing
// repeated members.
func readObject(text []byte, line int, fs *faults) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(text))
	if err := dec.Decode(&m); err != nil || m == nil {
		fs.add(line, "", "not a JSON object: each line is one object such as {\"day\":\"2026-06-01\",…}")
		return nil, false
	}
	if dec.More() {
		fs.add(line, "", "more than one JSON value on the line; put one object per line")
		return nil, false
	}
	// encoding/json keeps the last of repeated members; refuse them.
	if n := countMembers(text); n != len(m) {
		fs.add(line, "", "a member is repeated")
		return nil, false
	}
	return m, true
}

// countMembers counts the top-level members of a JSON object.
func countMembers(text []byte) int {
	dec := json.NewDecoder(bytes.NewReader(text))
	if _, err := dec.Token(); err != nil {
		return -1
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return -1
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
		n++
	}
	return n
}

// unknownFields reports members a row does not take.
func unknownFields(m map[string]json.RawMessage, known []string, line int, what string, fs *faults) {
	var names []string
	for k := range m {
		if !slices.Contains(known, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		fs.add(line, clipValue(k), "%s takes no such field; its fields are %s", what, strings.Join(known, ", "))
	}
}

func parseHeader(m map[string]json.RawMessage, line int, imp *Import, fs *faults) bool {
	unknownFields(m, headerFields, line, "the header", fs)
	ok := true
	v, present, good := intField(m, "version", line, fs)
	switch {
	case !present:
		fs.add(line, "version", `the first line is the header {"version":1,"source":…}; version is missing`)
		ok = false
	case good && v != importVersion:
		fs.add(line, "version", "version %d is not read by this mf; use version 1", v)
		ok = false
	}
	src, present := strField(m, "source", line, fs)
	switch {
	case !present:
		fs.add(line, "source", "source is missing; it is one of search_import_a, search_import_b, ads_platform_a, ads_platform_b")
		return false
	case src != SourceSearchA && src != SourceSearchB && src != SourceAdsA && src != SourceAdsB:
		fs.add(line, "source", "source is one of search_import_a, search_import_b, ads_platform_a, ads_platform_b, not %q", clipValue(src))
		return false
	}
	imp.Source = src
	if eng, present := strField(m, "engine", line, fs); present {
		want, isSearch := searchEngineOf[src]
		switch {
		case !isSearch:
			fs.add(line, "engine", "an ads platform import names no engine")
		case eng != want:
			fs.add(line, "engine", "%s imports %s, not %q", src, want, clipValue(eng))
		}
	}
	return ok && len(fs.list) == 0
}

func parseSearchRow(m map[string]json.RawMessage, line int, imp *Import, seen map[string]int, fs *faults) {
	_, isDay := m["day"]
	_, isWeek := m["week"]
	engine := searchEngineOf[imp.Source]
	switch {
	case isDay && isWeek:
		fs.add(line, "week", "a row is a day (day) or a week of positions (week), not both")
		return
	case isWeek && engine != EngineB:
		fs.add(line, "week", "weekly position rows are for engine_b (search_import_b); engine_a's daily rows carry the position")
		return
	case isWeek:
		unknownFields(m, searchWeekFields, line, "a week row", fs)
		w := SearchWeek{Line: line}
		w.Account = accountField(m, line, fs)
		w.Week = dayField(m, "week", line, fs)
		pos, present, ok := numberField(m, "position", line, fs)
		switch {
		case !present:
			fs.add(line, "position", "position is missing: the week's average position, 1 is the top")
		case ok && pos < 1:
			fs.add(line, "position", "position is an average where 1 is the top, so at least 1, not %v", pos)
		}
		w.Position = pos
		if w.Account != "" && w.Week != "" {
			key := "w\x00" + w.Account + "\x00" + w.Week
			if first, dup := seen[key]; dup {
				fs.add(line, "week", "repeats the week of line %d (account %q, week %s)", first, w.Account, w.Week)
			}
			seen[key] = line
		}
		imp.Weeks = append(imp.Weeks, w)
		return
	}
	fields := searchDayFields
	if engine == EngineB {
		fields = []string{"account", "day", "clicks", "impressions"}
	}
	unknownFields(m, fields, line, "a day row of "+engine, fs)
	d := SearchDay{Line: line}
	d.Account = accountField(m, line, fs)
	if !isDay {
		fs.add(line, "day", "day is missing (YYYY-MM-DD)")
	} else {
		d.Day = dayField(m, "day", line, fs)
	}
	d.Clicks = countField(m, "clicks", line, fs)
	d.Impressions = countField(m, "impressions", line, fs)
	if d.Clicks > d.Impressions {
		fs.add(line, "clicks", "clicks (%d) cannot exceed impressions (%d)", d.Clicks, d.Impressions)
	}
	if engine == EngineA {
		pos, hasPos, okPos := numberField(m, "position", line, fs)
		sum, hasSum, okSum := numberField(m, "positionSum", line, fs)
		switch {
		case hasPos && hasSum:
			fs.add(line, "positionSum", "give position (the average) or positionSum (the sum over impressions), not both")
		case hasPos && okPos:
			if d.Impressions > 0 && pos < 1 {
				fs.add(line, "position", "position is an average where 1 is the top, so at least 1, not %v", pos)
			}
			d.PositionSum = pos * float64(d.Impressions)
		case hasSum && okSum:
			if sum < float64(d.Impressions) {
				fs.add(line, "positionSum", "positionSum sums positions of at least 1 over the impressions, so it is at least impressions (%d), not %v", d.Impressions, sum)
			}
			d.PositionSum = sum
		case !hasPos && !hasSum && d.Impressions > 0:
			fs.add(line, "position", "position (or positionSum) is missing for a day with impressions")
		}
		if d.Impressions == 0 {
			d.PositionSum = 0
		}
	}
	if d.Account != "" && d.Day != "" {
		key := "d\x00" + d.Account + "\x00" + d.Day
		if first, dup := seen[key]; dup {
			fs.add(line, "day", "repeats the day of line %d (account %q, day %s)", first, d.Account, d.Day)
		}
		seen[key] = line
	}
	imp.Search = append(imp.Search, d)
}

func parseAdsRow(m map[string]json.RawMessage, line int, imp *Import, seen map[string]int, fs *faults) {
	unknownFields(m, adsFields, line, "an ads row", fs)
	a := AdsDay{Line: line}
	a.Account = accountField(m, line, fs)
	a.Day = dayField(m, "day", line, fs)
	if c, present := strField(m, "campaign", line, fs); present {
		if utf8.RuneCountInString(c) > maxCampaignLen {
			fs.add(line, "campaign", "campaign is longer than %d characters", maxCampaignLen)
		}
		a.Campaign = c
	}
	a.Spend = moneyField(m, "spend", line, fs)
	cur, present := strField(m, "currency", line, fs)
	switch {
	case !present:
		fs.add(line, "currency", "currency is missing: the account's three-letter code, such as EUR")
	case !reCurrency.MatchString(cur):
		fs.add(line, "currency", "currency is a three-letter upper-case code such as EUR, not %q", clipValue(cur))
	}
	a.Currency = cur
	a.Clicks = countField(m, "clicks", line, fs)
	a.Impressions = countField(m, "impressions", line, fs)
	if a.Account != "" && a.Day != "" {
		key := a.Account + "\x00" + a.Day + "\x00" + a.Campaign
		if first, dup := seen[key]; dup {
			fs.add(line, "day", "repeats the row of line %d (account %q, day %s, campaign %q)", first, a.Account, a.Day, a.Campaign)
		}
		seen[key] = line
	}
	imp.Ads = append(imp.Ads, a)
}

// checkAdsMix refuses an account day given both as a whole (no campaign)
// and by campaign: the two would be counted twice.
func checkAdsMix(rows []AdsDay, fs *faults) {
	type day struct{ account, day string }
	whole := map[day]int{}
	split := map[day]int{}
	for _, a := range rows {
		k := day{a.Account, a.Day}
		if a.Campaign == "" {
			whole[k] = a.Line
		} else if _, ok := split[k]; !ok {
			split[k] = a.Line
		}
	}
	for k, l := range whole {
		if s, ok := split[k]; ok {
			fs.add(max(l, s), "campaign", "account %q has a row without campaign and rows by campaign for %s; give one or the other, or the day counts twice", k.account, k.day)
		}
	}
}

// strField reads an optional string member.
func strField(m map[string]json.RawMessage, name string, line int, fs *faults) (string, bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		fs.add(line, name, "%s must be a string", name)
		return "", true
	}
	return s, true
}

func accountField(m map[string]json.RawMessage, line int, fs *faults) string {
	s, present := strField(m, "account", line, fs)
	switch {
	case !present:
		fs.add(line, "account", "account is missing: the property, site or ad account as the project's provider lists it")
	case s == "" || utf8.RuneCountInString(s) > maxAccountLen:
		fs.add(line, "account", "account is 1 to %d characters", maxAccountLen)
		return ""
	}
	return s
}

func dayField(m map[string]json.RawMessage, name string, line int, fs *faults) string {
	s, present := strField(m, name, line, fs)
	if !present {
		fs.add(line, name, "%s is missing (YYYY-MM-DD)", name)
		return ""
	}
	if _, ok := parseDate(s); !ok {
		fs.add(line, name, "%s must be a date YYYY-MM-DD, not %q", name, clipValue(s))
		return ""
	}
	return s
}

// intField reads an optional JSON integer (5, not 5.0 or "5").
func intField(m map[string]json.RawMessage, name string, line int, fs *faults) (int64, bool, bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return 0, false, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		fs.add(line, name, "%s must be a whole number written without a fraction or exponent, not %s", name, clipValue(string(raw)))
		return 0, true, false
	}
	return n, true, true
}

func countField(m map[string]json.RawMessage, name string, line int, fs *faults) int64 {
	n, present, ok := intField(m, name, line, fs)
	switch {
	case !present:
		fs.add(line, name, "%s is missing (a whole number, 0 or more)", name)
	case ok && (n < 0 || n > maxImportCount):
		fs.add(line, name, "%s must be 0 or more (and below 2^53), not %d", name, n)
		return 0
	}
	return n
}

// numberField reads an optional finite JSON number.
func numberField(m map[string]json.RawMessage, name string, line int, fs *faults) (float64, bool, bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return 0, false, false
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		fs.add(line, name, "%s must be a number, not %s", name, clipValue(string(raw)))
		return 0, true, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
		fs.add(line, name, "%s must be a finite number, 0 or more, not %s", name, clipValue(string(raw)))
		return 0, true, false
	}
	return f, true, true
}

// moneyField reads a decimal amount (a JSON number such as 12.5, at most
// six decimals, no exponent) into micro-units, exactly.
func moneyField(m map[string]json.RawMessage, name string, line int, fs *faults) int64 {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		fs.add(line, name, "%s is missing: the amount spent, a number such as 12.5", name)
		return 0
	}
	s := string(raw)
	if !reDecimal.MatchString(s) {
		fs.add(line, name, "%s must be an amount of 0 or more written as a plain number such as 12.5 (no sign, exponent or quotes), not %s", name, clipValue(s))
		return 0
	}
	r, _ := new(big.Rat).SetString(s)
	r.Mul(r, big.NewRat(1_000_000, 1))
	if !r.IsInt() {
		fs.add(line, name, "%s has more than six decimals: %s", name, clipValue(s))
		return 0
	}
	if r.Cmp(big.NewRat(maxSpendMicros, 1)) > 0 {
		fs.add(line, name, "%s is above a billion: %s", name, clipValue(s))
		return 0
	}
	return r.Num().Int64()
}
