package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
