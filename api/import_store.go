package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// Storing imports: Imports merges a parsed import into the stored rows of
// the project's source (one object per project and source, replaced with a
// conditional put) and reads them back.

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
