package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// Batch cases: ingest/testdata/batch/*.txtar, one rule each. The format is
// described in ingest/testdata/batch/README.md; the handler tests read the
// same files through loadBatchCases and send them through the real HTTP
// handler.

// batchCaseDefaultReceivedAt is the time received of a case that names none:
// 2026-01-01T00:00:00Z.
const batchCaseDefaultReceivedAt = 1767225600000

// batchCase is one case file.
type batchCase struct {
	Name    string // file name without .txtar
	Comment string // what the case checks
	Request batchCaseRequest
	Body    []byte
	Want    batchCaseWant
}

// batchCaseRequest holds the request facts of a case.
type batchCaseRequest struct {
	// Source is the source the batch is sent to: mode `full` (default) or
	// `consentless`, kind `website` (default) or `server`.
	Source struct {
		Mode string `json:"mode"`
		Kind string `json:"kind"`
	} `json:"source"`
	// Headers are request headers besides authentication (Sec-GPC, DNT,
	// Content-Type).
	Headers map[string]string `json:"headers"`
	// ReceivedAt is the server time at receipt, epoch milliseconds.
	ReceivedAt int64 `json:"receivedAt"`
}

// batchCaseWant is the expected answer.
type batchCaseWant struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	// Errors are the expected field errors, paths in order; a message is
	// compared only when given.
	Errors []FieldError `json:"errors"`
	// Receipt is the expected 202 body.
	Receipt *records.Receipt `json:"receipt"`
	// Record is a partial JSON view of the stored record: objects match when
	// every key given matches (null: absent or null), lists element by
	// element with the same length.
	Record json.RawMessage `json:"record"`
	// PropertiesText, when given, is the exact stored properties text of
	// each kept event (null for none).
	PropertiesText []*string `json:"propertiesText"`
}

// header returns a request header of the case, the name matched without
// regard to case.
func (r *batchCaseRequest) header(name string) string {
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func (r *batchCaseRequest) sourceMode() records.Mode {
	if r.Source.Mode == "consentless" {
		return records.ModeConsentless
	}
	return records.ModeFull
}

// parseTxtar splits a txtar archive into its comment and files.
func parseTxtar(data []byte) (comment string, files map[string][]byte, order []string, err error) {
	files = map[string][]byte{}
	var cur string
	var buf []byte
	inFile := false
	flush := func() {
		if inFile {
			files[cur] = buf
			order = append(order, cur)
		} else {
			comment = string(buf)
		}
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if bytes.HasPrefix(trimmed, []byte("-- ")) && bytes.HasSuffix(trimmed, []byte(" --")) && len(trimmed) > 6 {
			flush()
			cur = strings.TrimSpace(string(trimmed[3 : len(trimmed)-3]))
			if _, dup := files[cur]; dup {
				return "", nil, nil, fmt.Errorf("file %q appears twice", cur)
			}
			buf, inFile = nil, true
			continue
		}
		buf = append(buf, line...)
	}
	flush()
	return comment, files, order, nil
}

// batchCaseFuncs are the functions of body.tmpl templates.
var batchCaseFuncs = template.FuncMap{
	// repeat returns s n times.
	"repeat": func(n int, s string) string { return strings.Repeat(s, n) },
	// seq returns 0 … n-1.
	"seq": func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	},
}

// loadBatchCases reads every case of dir (ingest/testdata/batch).
func loadBatchCases(t testing.TB, dir string) []batchCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no batch cases in %s (%v)", dir, err)
	}
	sort.Strings(paths)
	cases := make([]batchCase, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("cannot read case %s: %v", p, err)
		}
		comment, files, order, err := parseTxtar(data)
		if err != nil {
			t.Fatalf("cannot read case %s: %v", p, err)
		}
		for _, name := range order {
			switch name {
			case "request.json", "body", "body.tmpl", "want.json":
			default:
				t.Fatalf("case %s: unknown section %q", p, name)
			}
		}
		c := batchCase{Name: strings.TrimSuffix(filepath.Base(p), ".txtar"), Comment: strings.TrimSpace(comment)}
		if c.Comment == "" {
			t.Fatalf("case %s: the comment must say what rule the case checks", p)
		}
		if raw, ok := files["request.json"]; ok {
			if err := strictJSON(raw, &c.Request); err != nil {
				t.Fatalf("case %s: request.json: %v", p, err)
			}
		}
		if c.Request.ReceivedAt == 0 {
			c.Request.ReceivedAt = batchCaseDefaultReceivedAt
		}
		if c.Request.Source.Mode == "" {
			c.Request.Source.Mode = "full"
		}
		if c.Request.Source.Kind == "" {
			c.Request.Source.Kind = "website"
		}
		body, hasBody := files["body"]
		tmpl, hasTmpl := files["body.tmpl"]
		switch {
		case hasBody == hasTmpl:
			t.Fatalf("case %s: needs exactly one of body and body.tmpl", p)
		case hasBody:
			c.Body = body
		default:
			tp, err := template.New(c.Name).Funcs(batchCaseFuncs).Parse(string(tmpl))
			if err != nil {
				t.Fatalf("case %s: body.tmpl: %v", p, err)
			}
			var out bytes.Buffer
			if err := tp.Execute(&out, nil); err != nil {
				t.Fatalf("case %s: body.tmpl: %v", p, err)
			}
			c.Body = out.Bytes()
		}
		raw, ok := files["want.json"]
		if !ok {
			t.Fatalf("case %s: no want.json", p)
		}
		if err := strictJSON(raw, &c.Want); err != nil {
			t.Fatalf("case %s: want.json: %v", p, err)
		}
		if c.Want.Status == 0 {
			t.Fatalf("case %s: want.json has no status", p)
		}
		cases = append(cases, c)
	}
	return cases
}

func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// runBatchCase sends a case through DecodeBatch and Normalize the way the
// handler does.
func runBatchCase(c *batchCase) (*Batch, *records.Batch, *Problem) {
	b, p := DecodeBatch(c.Body, time.UnixMilli(c.Request.ReceivedAt), DecodeOptions{SourceMode: c.Request.sourceMode()})
	if p != nil {
		return nil, nil, p
	}
	downgrade := PrivacySignal(c.Request.header("Sec-GPC"), c.Request.header("DNT"))
	return b, Normalize(b, NormalizeOptions{Downgrade: downgrade}), nil
}

// fieldPathPattern is the shape of every error path: names and indexes
// joined by dots; no value of the body can appear in it.
var fieldPathPattern = regexp.MustCompile(`^([a-zA-Z]+(\.([a-zA-Z]+|[0-9]+))*)?$`)

// knownMessages are the only messages a field error may carry.
var knownMessages = map[string]bool{
	msgRequired: true, msgDuplicateKey: true, msgObject: true, msgString: true, msgInteger: true,
	msgIntRange: true, msgVersion: true, msgUUID: true, msgMode: true, msgEventsList: true,
	msgEventCount: true, msgNameLen: true, msgNameSpace: true, msgNameReserved: true, msgURLLen: true,
	msgTitleLen: true, msgIDLen: true, msgIDBlank: true, msgDuplicateID: true, msgConsentless: true,
	msgSDK: true, msgLocale: true, msgTimezone: true, msgScreenList: true, msgScreenValue: true,
	msgPropKeys: true, msgPropKeyLen: true, msgPropDuplicate: true, msgPropBytes: true,
	msgPropLeaves: true, msgPropDepth: true, msgBodyObject: true,
}

func TestBatchCases(t *testing.T) {
	for _, c := range loadBatchCases(t, "testdata/batch") {
		t.Run(c.Name, func(t *testing.T) {
			b, rec, p := runBatchCase(&c)
			checkBatchCase(t, &c, b, rec, p)
		})
	}
}

func checkBatchCase(t *testing.T, c *batchCase, b *Batch, rec *records.Batch, p *Problem) {
	t.Helper()
	w := &c.Want
	if p != nil {
		if p.Status != w.Status || p.Code != w.Code {
			t.Fatalf("%s\ngot %d %s (%s) %v, want %d %s", c.Comment, p.Status, p.Code, p.Detail, p.Errors, w.Status, w.Code)
		}
		if len(p.Errors) > batchMaxFieldErrors {
			t.Fatalf("%d field errors, at most %d allowed", len(p.Errors), batchMaxFieldErrors)
		}
		if (p.Code == CodeValidationFailed) != (len(p.Errors) > 0) {
			t.Fatalf("code %s with %d field errors", p.Code, len(p.Errors))
		}
		for _, e := range p.Errors {
			if !fieldPathPattern.MatchString(e.Path) || !knownMessages[e.Message] {
				t.Fatalf("field error %+v: path or message outside the fixed shapes", e)
			}
		}
		var paths, wantPaths []string
		for _, e := range p.Errors {
			paths = append(paths, e.Path)
		}
		for i, e := range w.Errors {
			wantPaths = append(wantPaths, e.Path)
			if e.Message != "" && (i >= len(p.Errors) || p.Errors[i].Message != e.Message) {
				t.Errorf("error %d: got %+v, want message %q", i, p.Errors, e.Message)
			}
		}
		if !reflect.DeepEqual(paths, wantPaths) {
			t.Fatalf("%s\nerror paths %q, want %q", c.Comment, paths, wantPaths)
		}
		if w.Receipt != nil || w.Record != nil {
			t.Fatalf("case expects a receipt or record but the batch was refused")
		}
		return
	}
	if w.Status != 202 {
		t.Fatalf("%s\ngot 202 with receipt %+v, want %d %s %v", c.Comment, rec.Receipt, w.Status, w.Code, w.Errors)
	}
	if w.Code != "" || len(w.Errors) > 0 {
		t.Fatalf("a 202 case cannot expect an error code or errors")
	}
	// Rules of every receipt.
	if rec.Receipt.Accepted != len(rec.Events) || rec.Receipt.Accepted+rec.Receipt.Dropped != b.Len() {
		t.Fatalf("receipt %+v does not add up: %d events sent, %d kept", rec.Receipt, b.Len(), len(rec.Events))
	}
	if w.Receipt == nil {
		t.Fatalf("a 202 case must give the expected receipt")
	}
	if rec.Receipt != *w.Receipt {
		t.Fatalf("%s\nreceipt %+v, want %+v", c.Comment, rec.Receipt, *w.Receipt)
	}
	if w.Record != nil {
		got, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("cannot marshal the record: %v", err)
		}
		if err := matchJSON(decodeAny(t, w.Record), decodeAny(t, got), "record"); err != nil {
			t.Fatalf("%s\n%v\nrecord: %s", c.Comment, err, got)
		}
	}
	if w.PropertiesText != nil {
		if len(w.PropertiesText) != len(rec.Events) {
			t.Fatalf("propertiesText has %d entries for %d kept events", len(w.PropertiesText), len(rec.Events))
		}
		for i, want := range w.PropertiesText {
			got := rec.Events[i].Properties
			switch {
			case want == nil && got != nil:
				t.Fatalf("event %d: properties %s, want none", i, got)
			case want != nil && string(got) != *want:
				t.Fatalf("event %d: properties\n%s\nwant\n%s", i, got, *want)
			}
		}
	}
	// What is stored survives the log format.
	rec.Project, rec.Source, rec.SourceKind = "p", "s", records.SourceWebsite
	data, err := records.Encode(rec)
	if err != nil {
		t.Fatalf("cannot encode the record: %v", err)
	}
	back, err := records.Decode(data)
	if err != nil || !reflect.DeepEqual(back, rec) {
		t.Fatalf("record does not survive encoding: %v", err)
	}
}

func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("cannot parse JSON %s: %v", raw, err)
	}
	return v
}

// matchJSON checks got against the partial expectation want.
func matchJSON(want, got any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, want an object", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if w[k] == nil {
				if g[k] != nil {
					return fmt.Errorf("%s.%s: got %v, want absent or null", path, k, g[k])
				}
				continue
			}
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: absent, want %v", path, k, w[k])
			}
			if err := matchJSON(w[k], gv, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v, want a list of %d", path, got, len(w))
		}
		for i := range w {
			if err := matchJSON(w[i], g[i], fmt.Sprintf("%s.%d", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Errorf("%s: got %v, want %v", path, got, want)
		}
		return nil
	}
}
