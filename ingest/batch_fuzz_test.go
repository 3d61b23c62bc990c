package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mfhq/mf/storage/records"
)

// FuzzDecodeBatch feeds arbitrary bodies to DecodeBatch and Normalize. It
// fails on a panic, on an answer whose JSON verdict disagrees with
// encoding/json plus independent UTF-8, surrogate and nesting checks, and on
// any accepted batch whose stored form breaks a rule, each rule checked
// again here without the decoder's code. The corpus is kept in
// testdata/fuzz/FuzzDecodeBatch; every case body of testdata/batch is a seed.
//
//	go test ./ingest -run '^$' -fuzz FuzzDecodeBatch -fuzztime 60s
func FuzzDecodeBatch(f *testing.F) {
	for _, c := range loadBatchCases(f, "testdata/batch") {
		if len(c.Body) <= 64<<10 {
			f.Add(c.Body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		now := time.UnixMilli(batchCaseDefaultReceivedAt)
		b, p := DecodeBatch(body, now, DecodeOptions{})
		checkJSONVerdict(t, body, p)
		if p != nil {
			checkProblem(t, p)
			return
		}
		for _, downgrade := range []bool{false, true} {
			rec := Normalize(b, NormalizeOptions{Downgrade: downgrade})
			if err := checkStoredBatch(body, b, rec, downgrade); err != nil {
				t.Fatalf("downgrade %v: %v\nbody: %q", downgrade, err, body)
			}
		}
		// A resend received later derives the same event ids.
		later, p := DecodeBatch(body, now.Add(time.Hour), DecodeOptions{})
		if p != nil {
			t.Fatalf("the same body decoded an hour later is refused: %v", p)
		}
		r1, r2 := Normalize(b, NormalizeOptions{}), Normalize(later, NormalizeOptions{})
		for i := range r1.Events {
			if r1.Events[i].ID != r2.Events[i].ID {
				t.Fatalf("event %d: id %s, resent %s", i, r1.Events[i].ID, r2.Events[i].ID)
			}
		}
	})
}

func checkProblem(t *testing.T, p *Problem) {
	t.Helper()
	if p.Status != 400 {
		t.Fatalf("status %d", p.Status)
	}
	switch p.Code {
	case CodeInvalidJSON:
		if len(p.Errors) != 0 {
			t.Fatalf("invalid_json with field errors")
		}
	case CodeValidationFailed:
		if len(p.Errors) == 0 || len(p.Errors) > batchMaxFieldErrors {
			t.Fatalf("validation_failed with %d field errors", len(p.Errors))
		}
		for _, e := range p.Errors {
			if !fieldPathPattern.MatchString(e.Path) || !knownMessages[e.Message] {
				t.Fatalf("field error %+v outside the fixed shapes", e)
			}
		}
	default:
		t.Fatalf("unexpected code %s", p.Code)
	}
}

// checkJSONVerdict compares the decoder's "is this JSON" answer with
// encoding/json and independent checks.
func checkJSONVerdict(t *testing.T, body []byte, p *Problem) {
	t.Helper()
	text := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	wellFormed := utf8.Valid(text) && json.Valid(text) && !hasLoneSurrogate(text) && nesting(text) <= batchMaxNesting
	refused := p != nil && p.Code == CodeInvalidJSON
	if wellFormed == refused {
		t.Fatalf("well-formed %v (utf8 %v, json %v, lone surrogate %v, nesting %d) but decoder verdict %+v\nbody: %q",
			wellFormed, utf8.Valid(text), json.Valid(text), hasLoneSurrogate(text), nesting(text), p, body)
	}
}

// hasLoneSurrogate scans well-formed JSON for a \u escape of a surrogate
// that is not part of a high-low pair.
func hasLoneSurrogate(text []byte) bool {
	if !json.Valid(text) {
		return false
	}
	inString := false
	pendingHigh := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			if pendingHigh {
				return true
			}
			inString = false
		case '\\':
			if text[i+1] != 'u' {
				if pendingHigh {
					return true
				}
				i++
				continue
			}
			var v uint16
			fmt.Sscanf(string(text[i+2:i+6]), "%04x", &v)
			i += 5
			switch {
			case v >= 0xd800 && v < 0xdc00:
				if pendingHigh {
					return true
				}
				pendingHigh = true
			case v >= 0xdc00 && v < 0xe000:
				if !pendingHigh {
					return true
				}
				pendingHigh = false
			default:
				if pendingHigh {
					return true
				}
			}
		default:
			if pendingHigh {
				return true
			}
		}
	}
	return false
}

// nesting returns the deepest nesting of objects and lists in JSON text.
func nesting(text []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

var (
	experimentPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{1,63}$`)
	variantPattern    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
)

// sentEvent is an event of the body as encoding/json reads it (into maps,
// so member names match exactly).
type sentEvent struct {
	Name       string
	ID         *string
	Properties map[string]any // nil when absent or null
}

func decodeJSONValue(text []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkStoredBatch checks a normalized batch against every rule, reading
// the body again with encoding/json.
func checkStoredBatch(body []byte, b *Batch, rec *records.Batch, downgrade bool) error {
	v, err := decodeJSONValue(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")))
	root, ok := v.(map[string]any)
	if err != nil || !ok {
		return fmt.Errorf("accepted, but encoding/json cannot read it as an object: %v", err)
	}
	list, _ := root["events"].([]any)
	sent := make([]sentEvent, len(list))
	for i, raw := range list {
		m, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("accepted with event %d not an object", i)
		}
		sent[i].Name, _ = m["name"].(string)
		if id, ok := m["id"].(string); ok {
			sent[i].ID = &id
		}
		sent[i].Properties, _ = m["properties"].(map[string]any)
	}
	if root["v"] != json.Number("1") {
		return fmt.Errorf("accepted with v %v", root["v"])
	}
	if len(sent) < 1 || len(sent) > batchMaxEvents || len(sent) != b.Len() {
		return fmt.Errorf("accepted with %d events (decoder counted %d)", len(sent), b.Len())
	}
	sentID, _ := root["batch"].(string)
	if id, ok := records.ParseUUID(sentID); !ok || id != rec.ID || rec.Receipt.Batch != sentID {
		return fmt.Errorf("batch id %q stored as %s, receipt %q", sentID, rec.ID, rec.Receipt.Batch)
	}
	sentMode, _ := root["mode"].(string)
	wantMode := map[string]records.Mode{"full": records.ModeFull, "consentless": records.ModeConsentless}[sentMode]
	if downgrade {
		wantMode = records.ModeConsentless
	}
	if wantMode == 0 || rec.Mode != wantMode {
		return fmt.Errorf("mode %q stored as %v", sentMode, rec.Mode)
	}
	if sentMode == "consentless" {
		ctx, _ := root["context"].(map[string]any)
		for _, k := range []string{"locale", "timezone", "screen"} {
			if ctx[k] != nil {
				return fmt.Errorf("consentless batch accepted with context.%s", k)
			}
		}
		for i, raw := range list {
			for _, k := range []string{"anonymousId", "userId", "sessionId"} {
				if raw.(map[string]any)[k] != nil {
					return fmt.Errorf("consentless batch accepted with events.%d.%s", i, k)
				}
			}
		}
	}
	full := rec.Mode == records.ModeFull
	// Receipt.
	if rec.Receipt.Accepted != len(rec.Events) || rec.Receipt.Accepted+rec.Receipt.Dropped != len(sent) {
		return fmt.Errorf("receipt %+v for %d events sent, %d kept", rec.Receipt, len(sent), len(rec.Events))
	}
	onlyChecks := true
	for _, e := range sent {
		onlyChecks = onlyChecks && e.Name == EventInstallCheck
	}
	if (rec.Receipt.Reason == ReceiptInstallCheck) != onlyChecks || (rec.Receipt.Reason != "" && rec.Receipt.Reason != ReceiptInstallCheck) {
		return fmt.Errorf("reason %q, only install checks %v", rec.Receipt.Reason, onlyChecks)
	}
	// Context.
	if !full && (rec.Context.Locale != "" || rec.Context.Timezone != "" || rec.Context.HasScreen) {
		return fmt.Errorf("consentless record with device context %+v", rec.Context)
	}
	if rec.Context.HasScreen && (rec.Context.ScreenWidth > 32768 || rec.Context.ScreenHeight > 32768) {
		return fmt.Errorf("screen %+v", rec.Context)
	}
	// Events: the kept ones are a subsequence of the sent ones.
	ids := map[records.UUID]bool{}
	j := 0
	for i := range rec.Events {
		e := &rec.Events[i]
		for j < len(sent) && sent[j].Name != e.Name {
			j++
		}
		if j == len(sent) {
			return fmt.Errorf("event %d (%q) is not one of the events sent, in order", i, e.Name)
		}
		if err := checkStoredEvent(e, &sent[j], full, rec.ReceivedAt); err != nil {
			return fmt.Errorf("event %d (sent %d): %v", i, j, err)
		}
		if ids[e.ID] {
			return fmt.Errorf("event %d: id %s is not unique", i, e.ID)
		}
		ids[e.ID] = true
		j++
	}
	// What is stored survives the log format.
	rec.Project, rec.Source, rec.SourceKind = "p", "s", records.SourceServer
	data, err := records.Encode(rec)
	if err != nil {
		return fmt.Errorf("cannot encode: %v", err)
	}
	back, err := records.Decode(data)
	if err != nil || !reflect.DeepEqual(back, rec) {
		return fmt.Errorf("record does not survive encoding: %v", err)
	}
	return nil
}

func checkStoredEvent(e *records.Event, sent *sentEvent, full bool, receivedAt int64) error {
	n := utf8.RuneCountInString(e.Name)
	first, _ := utf8.DecodeRuneInString(e.Name)
	last, _ := utf8.DecodeLastRuneInString(e.Name)
	switch {
	case n < 1 || n > 128:
		return fmt.Errorf("name of %d characters", n)
	case unicode.IsSpace(first) || unicode.IsSpace(last):
		return fmt.Errorf("name with outer white space")
	case e.Name == EventInstallCheck || e.Name == EventFlagProperties:
		return fmt.Errorf("%s stored", e.Name)
	case strings.HasPrefix(e.Name, "$") && e.Name != EventPageview && e.Name != EventAutocapture &&
		e.Name != EventIdentify && e.Name != EventSearch && e.Name != EventExposure:
		return fmt.Errorf("unknown reserved name stored")
	case !full && (e.Name == EventIdentify || e.Name == EventSearch || e.Name == EventExposure):
		return fmt.Errorf("%s stored in a consentless record", e.Name)
	case !full && (e.AnonymousID != "" || e.UserID != "" || !e.SessionID.IsZero()):
		return fmt.Errorf("identifiers in a consentless record")
	case e.Time > receivedAt+5*60*1000 || e.Time < receivedAt-30*24*3600*1000:
		return fmt.Errorf("time %d outside the window around %d", e.Time, receivedAt)
	case utf8.RuneCountInString(e.AnonymousID) > 256 || utf8.RuneCountInString(e.UserID) > 256:
		return fmt.Errorf("identifier longer than 256 characters")
	}
	for _, id := range []string{e.AnonymousID, e.UserID} {
		bare := strings.ToLower(strings.Trim(id, " \t\r\n\"'"))
		switch bare {
		case "undefined", "null", "none", "nan", "0", "true", "false", "anonymous", "guest", "id",
			"email", "distinct_id", "distinctid", "not_authenticated", "[object object]":
			return fmt.Errorf("placeholder id stored")
		}
		if id != "" && bare == "" {
			return fmt.Errorf("id of quotes and white space stored")
		}
	}
	if sent.ID != nil {
		if id, _ := records.ParseUUID(*sent.ID); id != e.ID {
			return fmt.Errorf("id %q stored as %s", *sent.ID, e.ID)
		}
	} else if e.ID[6]>>4 != 8 || e.ID[8]>>6 != 2 {
		return fmt.Errorf("derived id %s is not a version 8 UUID", e.ID)
	}
	if err := checkStoredURL(e.Page.URL, full); err != nil {
		return fmt.Errorf("page url: %v", err)
	}
	if err := checkStoredURL(e.Page.Referrer, full); err != nil || e.Page.Referrer.Query != "" {
		return fmt.Errorf("referrer %+v: %v", e.Page.Referrer, err)
	}
	if utf8.RuneCountInString(e.Page.Title) > 512 {
		return fmt.Errorf("title too long")
	}
	if e.Revenue != "" && strings.HasPrefix(e.Name, "$") {
		return fmt.Errorf("revenue on a reserved event")
	}
	if e.Currency != "" && (len(e.Currency) != 3 || strings.ToUpper(e.Currency) != e.Currency || e.Revenue == "") {
		return fmt.Errorf("currency %q (revenue %q)", e.Currency, e.Revenue)
	}
	if (sent.Properties == nil) != (e.Properties == nil) {
		return fmt.Errorf("properties sent %v, stored %v", sent.Properties != nil, e.Properties != nil)
	}
	if e.Properties == nil {
		if e.Name == EventSearch || e.Name == EventExposure {
			return fmt.Errorf("%s kept without properties", e.Name)
		}
		return nil
	}
	props, err := checkProperties(e.Properties, e.Name == EventSearch)
	if err != nil {
		return fmt.Errorf("properties %s: %v", e.Properties, err)
	}
	sentProps := sent.Properties
	switch e.Name {
	case EventSearch:
		q, _ := props["query"].(string)
		units := len(utf16.Encode([]rune(q)))
		if q == "" || units > 100 || strings.TrimSpace(q) != q || strings.ToLower(q) != q || digitRun(q) >= 6 {
			return fmt.Errorf("stored $search query %q (%d units)", q, units)
		}
		delete(props, "query")
		delete(sentProps, "query")
	case EventExposure:
		exp, _ := props["$experiment"].(string)
		v, _ := props["$variant"].(string)
		if !experimentPattern.MatchString(exp) || !variantPattern.MatchString(v) || (e.AnonymousID == "" && e.UserID == "") {
			return fmt.Errorf("invalid $exposure kept")
		}
	}
	if !reflect.DeepEqual(props, sentProps) {
		return fmt.Errorf("stored properties differ from the ones sent")
	}
	return nil
}

func digitRun(s string) int {
	run, longest := 0, 0
	for _, r := range s {
		if unicode.IsDigit(r) {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

func checkStoredURL(u records.URL, full bool) error {
	if u.IsZero() {
		if u != (records.URL{}) {
			return fmt.Errorf("parts without a scheme")
		}
		return nil
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || !strings.HasPrefix(u.Path, "/") {
		return fmt.Errorf("stored %+v", u)
	}
	if strings.ToLower(u.Host) != u.Host || strings.ContainsAny(u.Host, " /?#@") {
		return fmt.Errorf("host %q", u.Host)
	}
	if strings.ContainsAny(u.Path, "?#") {
		return fmt.Errorf("path %q holds a query or fragment", u.Path)
	}
	if u.Query == "" {
		return nil
	}
	for _, p := range strings.Split(u.Query, "&") {
		name, value, _ := strings.Cut(p, "=")
		switch name {
		case "utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content":
		case "gclid", "gbraid", "wbraid", "fbclid", "msclkid", "ttclid", "li_fat_id":
			if !full && value != "" {
				return fmt.Errorf("click id value in a consentless record")
			}
		default:
			return fmt.Errorf("query parameter %q kept", name)
		}
	}
	return nil
}

// checkProperties checks stored properties text: compact JSON, an object,
// within every limit, no duplicate key; it returns the value.
func checkProperties(text []byte, search bool) (map[string]any, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, text); err != nil || !bytes.Equal(compact.Bytes(), text) {
		return nil, fmt.Errorf("not compact JSON (%v)", err)
	}
	limit := batchMaxPropBytes
	if search {
		limit += 8 * searchMaxUnits // the query is rewritten after the check
	}
	if len(text) > limit {
		return nil, fmt.Errorf("%d bytes", len(text))
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	leaves, err := walkProps(dec, 1, true)
	if err != nil {
		return nil, err
	}
	if leaves > 64 {
		return nil, fmt.Errorf("%d values", leaves)
	}
	v, err := decodeJSONValue(text)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// walkProps reads one object from dec, checking keys and depth; it returns
// the number of values counted by the rule (lists and empty objects one).
func walkProps(dec *json.Decoder, level int, counted bool) (int, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, fmt.Errorf("expected an object at level %d", level)
	}
	if level > 5 {
		return 0, fmt.Errorf("object at level %d", level)
	}
	seen := map[string]bool{}
	leaves, keys := 0, 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, err
		}
		k := tok.(string)
		if seen[k] {
			return 0, fmt.Errorf("duplicate key")
		}
		seen[k] = true
		keys++
		if utf8.RuneCountInString(k) > 128 {
			return 0, fmt.Errorf("key of %d characters", utf8.RuneCountInString(k))
		}
		n, err := walkValue(dec, level)
		if err != nil {
			return 0, err
		}
		leaves += n
	}
	if level == 1 && keys > 64 {
		return 0, fmt.Errorf("%d top-level keys", keys)
	}
	if _, err := dec.Token(); err != nil {
		return 0, err
	}
	if keys == 0 {
		return 1, nil
	}
	if !counted {
		return 0, nil
	}
	return leaves, nil
}

func walkValue(dec *json.Decoder, level int) (int, error) {
	if !dec.More() {
		return 0, io.ErrUnexpectedEOF
	}
	raw := json.RawMessage{}
	if err := dec.Decode(&raw); err != nil {
		return 0, err
	}
	switch raw[0] {
	case '{':
		inner := json.NewDecoder(bytes.NewReader(raw))
		return walkProps(inner, level+1, true)
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return 0, err
		}
		for _, el := range list {
			if _, err := walkValue(json.NewDecoder(bytes.NewReader(el)), level); err != nil {
				return 0, err
			}
		}
		return 1, nil
	}
	return 1, nil
}
