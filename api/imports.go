package api

import (
	"bufio"
	"bytes"
	"context"
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
	"time"
	"unicode/utf8"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// Imports of search-console and ads-platform numbers (docs/imports.md):
// a JSON-lines file (a header naming the source, then one row a line),
// parsed and checked whole by ParseImport, then merged into the stored rows
// of the project's source by Imports.Apply (one object per project and
// source, replaced with a conditional put, so that imports are atomic and
// re-importing the same rows changes nothing).

// Import errors. An *ImportError wraps ErrInvalidImport and ErrRefused (the
// admin API answers 422); an unknown project wraps ErrNotFound (404).
var (
	ErrInvalidImport  = errors.New("invalid import")
	ErrImportConflict = errors.New("import conflicted with concurrent imports")
)

// Import sources and the engines of the search sources.
const (
	SourceSearchA = "search_import_a"
	SourceSearchB = "search_import_b"
	SourceAdsA    = "ads_platform_a"
	SourceAdsB    = "ads_platform_b"
	EngineA       = "engine_a"
	EngineB       = "engine_b"
)

// searchEngineOf maps a search source to the engine it imports.
var searchEngineOf = map[string]string{SourceSearchA: EngineA, SourceSearchB: EngineB}

// searchSourceOf maps an engine to its search source.
var searchSourceOf = map[string]string{EngineA: SourceSearchA, EngineB: SourceSearchB}

// adsSources are the ads platforms, in the order the ads summary lists them.
var adsSources = []string{SourceAdsA, SourceAdsB}

// Import limits.
const (
	importVersion     = 1
	maxImportLine     = 64 << 10
	maxImportRows     = 1_000_000
	maxImportFaults   = 100
	maxAccountLen     = 512
	maxCampaignLen    = 512
	maxImportCount    = 1 << 53 // clicks, impressions: exact in a JSON number everywhere
	maxSpendMicros    = 1e15    // a billion currency units per row
	importFaultsShown = 10
)

// Import is one parsed import file: the rows of one source. Rows keep the
// file line they came from, for messages.
type Import struct {
	Source string
	// Search holds the daily rows of a search source.
	Search []SearchDay
	// Weeks holds the weekly position rows (engine_b only).
	Weeks []SearchWeek
	// Ads holds the rows of an ads platform.
	Ads []AdsDay
}

// Rows is the number of rows of the import.
func (imp *Import) Rows() int { return len(imp.Search) + len(imp.Weeks) + len(imp.Ads) }

// SearchDay is one day of one search property.
type SearchDay struct {
	Account     string  `json:"account"`
	Day         string  `json:"day"`
	Clicks      int64   `json:"clicks"`
	Impressions int64   `json:"impressions"`
	PositionSum float64 `json:"positionSum,omitempty"` // Σ position over impressions, 1 = top; 0 for engine_b
	Line        int     `json:"-"`
}

// SearchWeek is one published week of engine_b's position pages.
type SearchWeek struct {
	Account  string  `json:"account"`
	Week     string  `json:"week"` // the week's last day
	Position float64 `json:"position"`
	Line     int     `json:"-"`
}

// AdsDay is one day of one campaign (or of the whole account when
// Campaign is empty) of an ads account.
type AdsDay struct {
	Account     string `json:"account"`
	Day         string `json:"day"`
	Campaign    string `json:"campaign,omitempty"`
	Spend       int64  `json:"spend"` // micro-units of Currency
	Currency    string `json:"currency"`
	Clicks      int64  `json:"clicks"`
	Impressions int64  `json:"impressions"`
	Line        int    `json:"-"`
}

// ImportFault is one fault of a refused import.
type ImportFault struct {
	Line    int    `json:"line"` // 1-based; 0 for the file as a whole
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (f ImportFault) String() string {
	var b strings.Builder
	if f.Line > 0 {
		fmt.Fprintf(&b, "line %d", f.Line)
	} else {
		b.WriteString("file")
	}
	if f.Field != "" {
		fmt.Fprintf(&b, ", field %s", f.Field)
	}
	b.WriteString(": ")
	b.WriteString(f.Message)
	return b.String()
}

// ImportError is a refused import: every fault found (up to 100), in line
// order. Nothing of a refused import is stored.
type ImportError struct {
	Faults []ImportFault
}

func (e *ImportError) Error() string {
	var b strings.Builder
	b.WriteString("import refused: ")
	for i, f := range e.Faults {
		if i == importFaultsShown {
			fmt.Fprintf(&b, "; and %d more", len(e.Faults)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// Unwrap makes errors.Is match ErrInvalidImport and ErrRefused.
func (e *ImportError) Unwrap() []error { return []error{ErrInvalidImport, ErrRefused} }

// faults collects the faults of one parse or apply.
type faults struct{ list []ImportFault }

func (f *faults) add(line int, field, format string, args ...any) {
	if len(f.list) < maxImportFaults {
		f.list = append(f.list, ImportFault{Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
	}
}

func (f *faults) full() bool { return len(f.list) >= maxImportFaults }

func (f *faults) err() error {
	if len(f.list) == 0 {
		return nil
	}
	slices.SortStableFunc(f.list, func(a, b ImportFault) int { return a.Line - b.Line })
	return &ImportError{Faults: f.list}
}

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

// ImportConfig configures the import store.
type ImportConfig struct {
	// Attempts bounds the read-merge-write attempts of one Apply racing
	// other imports of the same source. Default 8.
	Attempts int
	// FutureDays is how many days after today (UTC) a row's day may be,
	// for sources that cut days in a zone ahead of UTC. Default 1.
	FutureDays int
}

// DefaultImportConfig returns the defaults.
func DefaultImportConfig() ImportConfig {
	return ImportConfig{Attempts: 8, FutureDays: 1}
}

// Validate reports a setting that cannot work.
func (c ImportConfig) Validate() error {
	switch {
	case c.Attempts < 1:
		return errors.New("import config: Attempts must be at least 1")
	case c.FutureDays < 0:
		return errors.New("import config: FutureDays must be 0 or more")
	}
	return nil
}

// Imports stores import rows per project and source, and reads them back
// for the search and ads summaries.
type Imports struct {
	cfg    ImportConfig
	bucket storage.Bucket
	cat    CatalogReader
	clock  func() time.Time
}

// NewImports builds the import store on bucket. cat supplies the projects
// and their providers; clock (nil: time.Now) stamps lastImportedAt.
func NewImports(cfg ImportConfig, bucket storage.Bucket, cat CatalogReader, clock func() time.Time) (*Imports, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bucket == nil || cat == nil {
		return nil, errors.New("cannot build the import store: a bucket and a catalog are required")
	}
	if clock == nil {
		clock = time.Now
	}
	return &Imports{cfg: cfg, bucket: bucket, cat: cat, clock: clock}, nil
}

// ImportResult says what an Apply did.
type ImportResult struct {
	Project string `json:"project"`
	Source  string `json:"source"`
	// Rows is the number of rows of the import; Added were new keys,
	// Replaced changed stored rows, Unchanged equalled them.
	Rows      int `json:"rows"`
	Added     int `json:"added"`
	Replaced  int `json:"replaced"`
	Unchanged int `json:"unchanged"`
	// Changed: something was stored (false: the import changed nothing and
	// nothing was written, lastImportedAt included).
	Changed bool `json:"changed"`
	// LastImportedAt is the source's lastImportedAt after the import.
	LastImportedAt *time.Time `json:"lastImportedAt"`
}

// importSet is the stored object of one project and source.
type importSet struct {
	Version        int          `json:"version"`
	Project        string       `json:"project"`
	Source         string       `json:"source"`
	LastImportedAt time.Time    `json:"lastImportedAt"`
	Search         []SearchDay  `json:"search,omitempty"`
	Weeks          []SearchWeek `json:"weeks,omitempty"`
	Ads            []AdsDay     `json:"ads,omitempty"`
}

// importKey is the object of one project's imports from one source.
func importKey(project, source string) string {
	return "imports/" + project + "/" + source + ".json"
}

// Apply checks imp against the project's provider in the catalog (declared,
// not not_available or dataset_off, every account listed) and merges its
// rows into the stored ones: a row replaces the stored row of the same key
// (account and day, plus campaign for ads; account and week for weekly
// positions). An import that changes nothing writes nothing. A refusal is
// an *ImportError (ErrRefused); an unknown project wraps ErrNotFound.
func (s *Imports) Apply(ctx context.Context, project string, imp *Import) (ImportResult, error) {
	res := ImportResult{Project: project, Source: imp.Source, Rows: imp.Rows()}
	st := s.cat.State()
	if _, ok := st.Project(project); !ok {
		return res, fmt.Errorf("cannot import into project %q: %w: no such project", project, ErrNotFound)
	}
	if err := s.check(st, project, imp); err != nil {
		return res, err
	}
	key := importKey(project, imp.Source)
	for attempt := 0; attempt < s.cfg.Attempts; attempt++ {
		cur, etag, err := s.read(ctx, key)
		if err != nil {
			return res, err
		}
		if cur == nil {
			cur = &importSet{Version: importVersion, Project: project, Source: imp.Source}
		}
		next, added, replaced, unchanged := mergeImport(cur, imp)
		res.Added, res.Replaced, res.Unchanged = added, replaced, unchanged
		if added+replaced == 0 {
			res.Changed = false
			if etag != "" {
				t := cur.LastImportedAt
				res.LastImportedAt = &t
			}
			return res, nil
		}
		var fs faults
		checkAdsMix(next.Ads, &fs)
		if err := fs.err(); err != nil {
			return res, err
		}
		next.LastImportedAt = s.clock().UTC()
		body, err := json.Marshal(next)
		if err != nil {
			return res, fmt.Errorf("cannot encode the import of %s: %w", key, err)
		}
		cond := storage.IfAbsent()
		if etag != "" {
			cond = storage.IfMatch(etag)
		}
		_, err = s.bucket.PutIf(ctx, key, bytes.NewReader(body), cond)
		if errors.Is(err, storage.ErrPreconditionFailed) {
			continue // another import won; merge into its result
		}
		if err != nil {
			return res, fmt.Errorf("cannot store the import %q: %w", key, err)
		}
		res.Changed = true
		t := next.LastImportedAt
		res.LastImportedAt = &t
		return res, nil
	}
	return res, fmt.Errorf("cannot store the import %q: %w (%d attempts)", key, ErrImportConflict, s.cfg.Attempts)
}

// check applies the catalog's rules and the future-day rule.
func (s *Imports) check(st *catalog.State, project string, imp *Import) error {
	var fs faults
	var prov *catalog.Provider
	for _, p := range st.Providers(project) {
		if p.Name == imp.Source {
			prov = p
		}
	}
	switch {
	case prov == nil:
		fs.add(1, "source", "project %s declares no provider %s; add it to the project's providers in the provisioning file, with its accounts", project, imp.Source)
	case prov.State == "not_available" || prov.State == "dataset_off":
		fs.add(1, "source", "provider %s of project %s is %s; imports are taken for it once its state allows them", imp.Source, project, prov.State)
	}
	if err := fs.err(); err != nil {
		return err
	}
	latest := civil(s.clock(), time.UTC).addDays(s.cfg.FutureDays)
	account := func(line int, a string) {
		if a != "" && !slices.Contains(prov.Accounts, a) {
			fs.add(line, "account", "%s of project %s lists no account %q (it lists %s)", imp.Source, project, clipValue(a), listOrNone(prov.Accounts))
		}
	}
	day := func(line int, field, d string) {
		if v, ok := parseDate(d); ok && latest.before(v) {
			fs.add(line, field, "%s %s is in the future", field, d)
		}
	}
	for _, r := range imp.Search {
		account(r.Line, r.Account)
		day(r.Line, "day", r.Day)
	}
	for _, r := range imp.Weeks {
		account(r.Line, r.Account)
		day(r.Line, "week", r.Week)
	}
	for _, r := range imp.Ads {
		account(r.Line, r.Account)
		day(r.Line, "day", r.Day)
	}
	return fs.err()
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// read loads the stored set under key with its ETag; nil and "" when none.
func (s *Imports) read(ctx context.Context, key string) (*importSet, string, error) {
	return readImportSet(ctx, s.bucket, key)
}

func readImportSet(ctx context.Context, b storage.BucketReader, key string) (*importSet, string, error) {
	body, attrs, err := storage.ReadAll(ctx, b, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot read the imports %q: %w", key, err)
	}
	var set importSet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, "", fmt.Errorf("cannot read the imports %q: %w", key, err)
	}
	if set.Version != importVersion {
		return nil, "", fmt.Errorf("cannot read the imports %q: version %d is not read by this mf", key, set.Version)
	}
	return &set, attrs.ETag, nil
}

// mergeImport returns cur with imp's rows merged in (sorted by key), and
// the counts of added, replaced and unchanged rows.
func mergeImport(cur *importSet, imp *Import) (next *importSet, added, replaced, unchanged int) {
	next = &importSet{Version: importVersion, Project: cur.Project, Source: cur.Source, LastImportedAt: cur.LastImportedAt}
	count := func(old any, ok bool, row any) {
		switch {
		case !ok:
			added++
		case old == row:
			unchanged++
		default:
			replaced++
		}
	}
	{
		m := map[[2]string]SearchDay{}
		for _, r := range cur.Search {
			m[[2]string{r.Account, r.Day}] = r
		}
		for _, r := range imp.Search {
			r.Line = 0
			k := [2]string{r.Account, r.Day}
			old, ok := m[k]
			count(old, ok, r)
			m[k] = r
		}
		next.Search = sortedValues(m, func(a, b SearchDay) int {
			return cmpPair(a.Day, a.Account, b.Day, b.Account)
		})
	}
	{
		m := map[[2]string]SearchWeek{}
		for _, r := range cur.Weeks {
			m[[2]string{r.Account, r.Week}] = r
		}
		for _, r := range imp.Weeks {
			r.Line = 0
			k := [2]string{r.Account, r.Week}
			old, ok := m[k]
			count(old, ok, r)
			m[k] = r
		}
		next.Weeks = sortedValues(m, func(a, b SearchWeek) int {
			return cmpPair(a.Week, a.Account, b.Week, b.Account)
		})
	}
	{
		m := map[[3]string]AdsDay{}
		for _, r := range cur.Ads {
			m[[3]string{r.Account, r.Day, r.Campaign}] = r
		}
		for _, r := range imp.Ads {
			r.Line = 0
			k := [3]string{r.Account, r.Day, r.Campaign}
			old, ok := m[k]
			count(old, ok, r)
			m[k] = r
		}
		next.Ads = sortedValues(m, func(a, b AdsDay) int {
			if c := cmpPair(a.Day, a.Account, b.Day, b.Account); c != 0 {
				return c
			}
			return strings.Compare(a.Campaign, b.Campaign)
		})
	}
	return next, added, replaced, unchanged
}

func cmpPair(a1, a2, b1, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}

func sortedValues[K comparable, V any](m map[K]V, cmpf func(a, b V) int) []V {
	if len(m) == 0 {
		return nil
	}
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, cmpf)
	return out
}

// storedImport is what the summaries read of one source: nil rows and a
// zero LastImportedAt when nothing was imported.
type storedImport struct {
	set *importSet
}

// imported reports whether the source has rows stored.
func (si storedImport) imported() bool { return si.set != nil }

// lastImportedAt is the moment of the last import that changed rows.
func (si storedImport) lastImportedAt() *time.Time {
	if si.set == nil {
		return nil
	}
	t := si.set.LastImportedAt
	return &t
}

// loadImport reads the stored rows of one project and source through a
// read-only bucket (the reporting API's).
func loadImport(ctx context.Context, b storage.BucketReader, project, source string) (storedImport, error) {
	set, _, err := readImportSet(ctx, b, importKey(project, source))
	return storedImport{set: set}, err
}

// providerObject is the Provider object of the search and ads summaries.
type providerObject struct {
	Source         string   `json:"source"`
	State          string   `json:"state"`
	Reconnect      bool     `json:"reconnect"`
	Accounts       []string `json:"accounts"`
	LastImportedAt *string  `json:"lastImportedAt"`
}

// providerState derives a source's Provider object from the project's
// provisioning (state and accounts; a provider the file does not declare
// is not_connected) and what was imported (docs/imports.md, "Provider
// states"): ready needs rows; a ready or importing provider without rows
// is importing; a not_connected or refused provider with rows has lost its
// grant after importing: ready with reconnect, its numbers readable.
// ready reports whether the summaries read the source's numbers.
func providerState(st *catalog.State, p *catalog.Project, source string, si storedImport) (providerObject, bool) {
	out := providerObject{Source: source, State: "not_connected", Accounts: []string{}}
	for _, pr := range st.Providers(p.ID) {
		if pr.Name == source {
			out.State = pr.State
			if pr.Accounts != nil {
				out.Accounts = pr.Accounts
			}
		}
	}
	if t := si.lastImportedAt(); t != nil {
		m := Moment(*t, p.Location())
		out.LastImportedAt = &m
	}
	switch out.State {
	case "ready", "importing":
		out.State = "importing"
		if si.imported() {
			out.State = "ready"
		}
	case "not_connected", "refused":
		if si.imported() {
			out.State, out.Reconnect = "ready", true
		}
	}
	return out, out.State == "ready"
}
