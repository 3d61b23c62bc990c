package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/mfhq/mf/evaluator"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// View bytes of contentSum.
const (
	viewBrowser = 'b'
	viewValues  = 'v'
	viewServer  = 's'
)

// maxAt is the widest `at` (13 digits, epoch milliseconds until the year
// 2286), used when sizes are checked.
const maxAt = 9999999999999

// compileProject compiles a project's three documents from its compiled
// flags. A document whose content equals that of prev is taken from prev;
// the others get the `at` recorded for their content in the object store
// (atStamps), or now when the content is new.
func (d *FlagDocuments) compileProject(ctx context.Context, st *catalog.State, projectID string, pf *catalog.ProjectFlags, prev *projectDocs, now int64) (*projectDocs, error) {
	if err := d.waitEngine(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.CompileTimeout)
	defer cancel()
	pd := &projectDocs{flags: pf, browserRefs: refsOf(st, pf.Browser), serverRefs: refsOf(st, pf.Server)}

	browser0 := pf.AppendDocument(nil, catalog.ViewBrowser, 0)
	server0 := pf.AppendDocument(nil, catalog.ViewServer, 0)
	bsum, ssum := sumWithoutAt(viewBrowser, browser0), sumWithoutAt(viewServer, server0)
	var want []stampWant
	if prev != nil && prev.browser.sum == bsum {
		pd.browser, pd.values = prev.browser, prev.values
	} else {
		entries, err := d.valuesEntries(ctx, pf, browser0)
		if err != nil {
			return nil, err
		}
		pd.values = &flagDocument{body: entries} // the values members until `at` is known
		want = append(want, stampWant{viewBrowser, bsum}, stampWant{viewValues, sumWithoutAt(viewValues, appendValuesDocument(nil, pf.Orig, entries, 0))})
	}
	if prev != nil && prev.server.sum == ssum {
		pd.server = prev.server
	} else {
		want = append(want, stampWant{viewServer, ssum})
	}
	if len(want) == 0 {
		return pd, nil
	}
	d.cfg.Metrics.documentsCompiled(len(want))
	ats := d.stampTimes(ctx, projectID, want, now)
	for _, w := range want {
		at := ats[w.view]
		switch w.view {
		case viewBrowser:
			pd.browser = d.newFlagDocument(pf.AppendDocument(nil, catalog.ViewBrowser, at), w.sum, at)
		case viewValues:
			pd.values = d.newFlagDocument(appendValuesDocument(nil, pf.Orig, pd.values.body, at), w.sum, at)
		case viewServer:
			pd.server = d.newFlagDocument(pf.AppendDocument(nil, catalog.ViewServer, at), w.sum, at)
		}
	}
	return pd, nil
}

// stampWant is a document whose `at` is asked for: its view and content
// sum.
type stampWant struct {
	view byte
	sum  [32]byte
}

// atStamp is the compile time recorded for one view's content.
type atStamp struct {
	Sum string `json:"sum"` // hex SHA-256 of the content without `at`
	At  int64  `json:"at"`
}

// atStampKey is the object recording a project's compile times.
func atStampKey(projectID string) string { return "flags/at/" + projectID + ".json" }

var stampViewNames = map[byte]string{viewBrowser: "browser", viewValues: "values", viewServer: "server"}

// stampTimes returns the `at` of each wanted document: the time recorded
// in the object store for the same content, or now, which it records (by
// compare-and-swap, so processes compiling the same change at once agree
// on one time). Every process, and the same process after a restart, thus
// serves a document with the same `at` until its content changes. Without
// an object store, or when it fails, `at` is now.
func (d *FlagDocuments) stampTimes(ctx context.Context, projectID string, want []stampWant, now int64) map[byte]int64 {
	out := make(map[byte]int64, len(want))
	for _, w := range want {
		out[w.view] = now
	}
	if d.bucket == nil {
		return out
	}
	key := atStampKey(projectID)
	for attempt := 0; attempt < 4; attempt++ {
		stamps := map[string]atStamp{}
		data, attrs, err := storage.ReadAll(ctx, d.bucket, key)
		cond := storage.IfAbsent()
		switch {
		case err == nil:
			cond = storage.IfMatch(attrs.ETag)
			if json.Unmarshal(data, &stamps) != nil {
				stamps = map[string]atStamp{} // unreadable: replace it
			}
		case !errors.Is(err, storage.ErrNotFound):
			d.logger.Warn("flags: cannot read the compile times; using this process's", "project", projectID, "err", err)
			return out
		}
		changed := false
		for _, w := range want {
			name, sum := stampViewNames[w.view], hex.EncodeToString(w.sum[:])
			if s, ok := stamps[name]; ok && s.Sum == sum {
				out[w.view] = s.At
				continue
			}
			stamps[name] = atStamp{Sum: sum, At: now}
			out[w.view] = now
			changed = true
		}
		if !changed {
			return out
		}
		body, _ := json.Marshal(stamps) // a map of plain structs
		_, err = d.bucket.PutIf(ctx, key, bytes.NewReader(body), cond)
		if err == nil {
			return out
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) {
			d.logger.Warn("flags: cannot record the compile times; using this process's", "project", projectID, "err", err)
			return out
		}
		// Another process recorded first: read its times.
	}
	for _, w := range want {
		out[w.view] = now
	}
	return out
}

// emptyDocs are the documents of a project with nothing compiled: no flags,
// `at` 0.
func (d *FlagDocuments) emptyDocs() *projectDocs {
	pf := &catalog.ProjectFlags{}
	doc := func(view byte, body []byte) *flagDocument {
		return d.newFlagDocument(body, sumWithoutAt(view, body), 0)
	}
	return &projectDocs{
		flags:   pf,
		browser: doc(viewBrowser, pf.AppendDocument(nil, catalog.ViewBrowser, 0)),
		values:  doc(viewValues, appendValuesDocument(nil, nil, nil, 0)),
		server:  doc(viewServer, pf.AppendDocument(nil, catalog.ViewServer, 0)),
	}
}

// valuesEntries evaluates every flag of the browser document browserDoc
// with empty facts in the WebAssembly evaluator and returns the members of
// the values object: `"key":["variant"]` or `"key":["variant",value]`,
// sorted by key, comma-separated. Flags whose evaluation fails are left
// out.
func (d *FlagDocuments) valuesEntries(ctx context.Context, pf *catalog.ProjectFlags, browserDoc []byte) ([]byte, error) {
	if len(pf.Browser) == 0 {
		return nil, nil
	}
	keys := make([]string, len(pf.Browser))
	for i, cf := range pf.Browser {
		keys[i] = cf.Key
	}
	engine, err := d.eng(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := engine.LoadDocument(ctx, browserDoc)
	if err != nil {
		return nil, fmt.Errorf("cannot load the browser document into the evaluator: %w", err)
	}
	results, err := doc.EvaluateAll(ctx, make([]evaluator.Result, 0, len(keys)), keys, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot compute the values view: %w", err)
	}
	var dst []byte
	for i, r := range results {
		if r.Reason == evaluator.ReasonError {
			continue
		}
		if len(dst) > 0 {
			dst = append(dst, ',')
		}
		dst = catalog.AppendJSONString(dst, keys[i])
		dst = append(dst, ":["...)
		dst = catalog.AppendJSONString(dst, r.Variant)
		if r.Value != nil {
			dst = append(dst, ',')
			dst = append(dst, r.Value...)
		}
		dst = append(dst, ']')
	}
	return dst, nil
}

// appendValuesDocument writes `{"at":…,"orig":[…],"v":1,"values":{…}}`,
// orig only when not empty.
func appendValuesDocument(dst []byte, orig []string, entries []byte, at int64) []byte {
	dst = append(dst, `{"at":`...)
	dst = strconv.AppendInt(dst, at, 10)
	if len(orig) > 0 {
		dst = append(dst, `,"orig":[`...)
		for i, k := range orig {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = catalog.AppendJSONString(dst, k)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"v":1,"values":{`...)
	dst = append(dst, entries...)
	return append(dst, "}}"...)
}

// sumWithoutAt hashes a document without its compile time: every document
// starts `{"at":<digits>`.
func sumWithoutAt(view byte, body []byte) [32]byte {
	rest := bytes.TrimPrefix(body, []byte(`{"at":`))
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return contentSum(view, rest[i:])
}

// refsOf lists the segment refs that the rules of flags test, sorted. A
// flag that is off has no rules in its document.
func refsOf(st *catalog.State, flags []catalog.CompiledFlag) []string {
	var refs []string
	for _, cf := range flags {
		if cf.Flag == nil || cf.Flag.Off {
			continue
		}
		refs = appendFlagRefs(refs, st, cf.Flag)
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

func appendFlagRefs(refs []string, st *catalog.State, f *catalog.Flag) []string {
	for _, r := range f.Rules {
		for _, c := range r.If {
			if c.Kind != catalog.CondSegment || st == nil {
				continue
			}
			if seg, ok := st.Segment(c.Segment); ok && seg.Ref != "" {
				refs = append(refs, seg.Ref)
			}
		}
	}
	return refs
}

// isDraftExperiment reports whether f is an unstarted draft code
// experiment: a counting experiment (`e`) the website reads, turned off,
// and not a page experiment showing everyone the original (`orig`).
func isDraftExperiment(f *catalog.Flag) bool {
	return f != nil && f.ReadByWebsite() && f.Experiment != "" && f.Off && !f.Orig
}

// previewDocument returns the project's browser document with the draft
// experiment key started (its rules in force, no `off`), and the segment
// refs that document tests. ok is false when the project has no such
// draft.
func previewDocument(st *catalog.State, pd *projectDocs, key string) (doc []byte, refs []string, ok bool) {
	pf := pd.flags
	i, found := sort.Find(len(pf.Browser), func(i int) int {
		switch k := pf.Browser[i].Key; {
		case key < k:
			return -1
		case key > k:
			return 1
		}
		return 0
	})
	if !found || !isDraftExperiment(pf.Browser[i].Flag) {
		return nil, nil, false
	}
	f := pf.Browser[i].Flag
	started := *pf
	started.Browser = slices.Clone(pf.Browser)
	started.Browser[i].JSON = appendStartedFlag(nil, f, func(id string) string {
		if seg, ok := st.Segment(id); ok {
			return seg.Ref
		}
		return ""
	})
	refs = appendFlagRefs(slices.Clone(pd.browserRefs), st, f)
	slices.Sort(refs)
	return started.AppendDocument(nil, catalog.ViewBrowser, pd.browser.at), slices.Compact(refs), true
}

// appendStartedFlag writes the canonical browser-view JSON of flag f as if
// it were not off: keys in byte order c d e need p r s t u, segment ids
// replaced by ref.
func appendStartedFlag(dst []byte, f *catalog.Flag, ref func(id string) string) []byte {
	dst = append(dst, '{')
	if f.Counted != "" {
		dst = append(dst, `"c":`...)
		dst = catalog.AppendJSONString(dst, f.Counted)
		dst = append(dst, ',')
	}
	dst = append(dst, `"d":`...)
	dst = catalog.AppendJSONString(dst, f.Default)
	if f.Experiment != "" {
		dst = append(dst, `,"e":`...)
		dst = catalog.AppendJSONString(dst, f.Experiment)
	}
	if f.Need != nil {
		dst = append(dst, `,"need":`...)
		dst = strconv.AppendInt(dst, int64(*f.Need), 10)
	}
	if len(f.Payloads) > 0 {
		dst = append(dst, `,"p":{`...)
		keys := make([]string, 0, len(f.Payloads))
		for k := range f.Payloads {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = catalog.AppendJSONString(dst, k)
			dst = append(dst, ':')
			dst = append(dst, f.Payloads[k]...)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"r":[`...)
	for i, r := range f.Rules {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRule(dst, r, ref)
	}
	dst = append(dst, `],"s":`...)
	dst = catalog.AppendJSONString(dst, f.Seed)
	dst = append(dst, `,"t":`...)
	dst = catalog.AppendJSONString(dst, f.Type)
	dst = append(dst, `,"u":`...)
	dst = catalog.AppendJSONString(dst, f.Unit)
	return append(dst, '}')
}

// appendRule writes a rule with keys in byte order: if sh w x.
func appendRule(dst []byte, r catalog.Rule, ref func(string) string) []byte {
	dst = append(dst, '{')
	sep := false
	comma := func() {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
	}
	if r.HasIf {
		comma()
		dst = append(dst, `"if":[`...)
		for i, c := range r.If {
			if i > 0 {
				dst = append(dst, ',')
			}
			if c.Kind == catalog.CondSegment {
				dst = append(dst, `["s",`...)
				dst = catalog.AppendJSONString(dst, ref(c.Segment))
				if c.Not {
					dst = append(dst, ",1"...)
				}
				dst = append(dst, ']')
				continue
			}
			dst = append(dst, `["p",`...)
			dst = catalog.AppendJSONString(dst, c.Property)
			dst = append(dst, ',')
			dst = catalog.AppendJSONString(dst, c.Op)
			dst = append(dst, ',')
			dst = append(dst, c.Value...)
			dst = append(dst, ']')
		}
		dst = append(dst, ']')
	}
	if r.Share != nil {
		comma()
		dst = append(dst, `"sh":`...)
		dst = strconv.AppendInt(dst, int64(*r.Share), 10)
	}
	if r.HasWeights {
		comma()
		dst = append(dst, `"w":[`...)
		for i, w := range r.Weights {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = catalog.AppendJSONString(dst, w.Variant)
			dst = append(dst, ',')
			dst = strconv.AppendInt(dst, int64(w.Weight), 10)
			dst = append(dst, ']')
		}
		dst = append(dst, ']')
	}
	if r.X != "" {
		comma()
		dst = append(dst, `"x":`...)
		dst = catalog.AppendJSONString(dst, r.X)
	}
	return append(dst, '}')
}

// gzipBytes compresses a document once, at compile time.
func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // the level is valid
	_, _ = zw.Write(b)                                       // a bytes.Buffer does not fail
	_ = zw.Close()
	return buf.Bytes()
}

// CheckDocuments is the catalog's Config.CheckDocuments hook: it compiles
// the documents of every project whose compiled flags changed in st (the
// State an apply would lead to) and refuses the apply with a
// *catalog.ValidationError when one would exceed its size cap: the browser
// and values documents 64,000 bytes, the server document 256,000 bytes,
// each measured with a 13-digit `at`, and the browser document with any one
// draft experiment previewed (a preview token adds it) 64,000 bytes.
func (d *FlagDocuments) CheckDocuments(st *catalog.State) error {
	var faults []catalog.Fault
	for _, org := range st.Organizations() {
		for _, p := range st.Projects(org.ID) {
			pf := st.CompiledFlags(p.ID)
			d.checkMu.Lock()
			done := d.checked[p.ID] == pf
			d.checkMu.Unlock()
			if done {
				continue
			}
			fs, err := d.checkProject(st, pf)
			if err != nil {
				return fmt.Errorf("cannot check the flag documents of project %s: %w", p.ID, err)
			}
			path := fmt.Sprintf("organizations[id=%s].projects[id=%s].flags", org.ID, p.ID)
			for _, msg := range fs {
				faults = append(faults, catalog.Fault{Path: path, Message: msg})
			}
			if len(fs) == 0 {
				d.checkMu.Lock()
				d.checked[p.ID] = pf
				d.checkMu.Unlock()
			}
		}
	}
	if len(faults) > 0 {
		return &catalog.ValidationError{Faults: faults}
	}
	return nil
}

// engineWait bounds the wait for the evaluator's one-off compilation at
// start, which CompileTimeout (a project's documents) does not include: on
// a loaded machine compiling the WebAssembly module takes longer than
// compiling a project's documents ever should.
const engineWait = 5 * time.Minute

// waitEngine waits until the evaluator is compiled, at most engineWait.
func (d *FlagDocuments) waitEngine(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, engineWait)
	defer cancel()
	_, err := d.eng(ctx)
	return err
}

// checkProject measures one project's documents; it returns a message per
// cap exceeded.
func (d *FlagDocuments) checkProject(st *catalog.State, pf *catalog.ProjectFlags) ([]string, error) {
	if err := d.waitEngine(context.Background()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.CompileTimeout)
	defer cancel()
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrFlagDocumentsClosed
	}
	var msgs []string
	browser := pf.AppendDocument(nil, catalog.ViewBrowser, maxAt)
	if n := len(browser); n > catalog.MaxBrowserDocument {
		msgs = append(msgs, fmt.Sprintf("the browser flag document (flags read by the website) would be %d bytes, over its cap of %d bytes", n, catalog.MaxBrowserDocument))
	} else {
		entries, err := d.valuesEntries(ctx, pf, browser)
		if err != nil {
			return nil, err
		}
		if n := len(appendValuesDocument(nil, pf.Orig, entries, maxAt)); n > catalog.MaxValuesDocument {
			msgs = append(msgs, fmt.Sprintf("the values flag document (answers of the flags read by the website) would be %d bytes, over its cap of %d bytes", n, catalog.MaxValuesDocument))
		}
		pd := &projectDocs{flags: pf, browser: &flagDocument{at: maxAt}, browserRefs: refsOf(st, pf.Browser)}
		for _, cf := range pf.Browser {
			if !isDraftExperiment(cf.Flag) {
				continue
			}
			doc, _, _ := previewDocument(st, pd, cf.Key)
			if n := len(doc); n > catalog.MaxBrowserDocument {
				msgs = append(msgs, fmt.Sprintf("the browser flag document with draft experiment %q previewed would be %d bytes, over its cap of %d bytes", cf.Key, n, catalog.MaxBrowserDocument))
			}
		}
	}
	if n := len(pf.AppendDocument(nil, catalog.ViewServer, maxAt)); n > catalog.MaxServerDocument {
		msgs = append(msgs, fmt.Sprintf("the server flag document (flags read by servers) would be %d bytes, over its cap of %d bytes", n, catalog.MaxServerDocument))
	}
	return msgs, nil
}
