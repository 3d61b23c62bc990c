package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/mfhq/mf/evaluator"
)

// lookupBodySeeds adds the request body of every POST case of
// testdata/flags/cases.
func lookupBodySeeds(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "flags", "cases", "post_*.txtar"))
	for _, p := range paths {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			if file.Name == "request" {
				if _, body, ok := bytes.Cut(file.Data, []byte("\n\n")); ok {
					f.Add(bytes.TrimSuffix(body, []byte("\n")))
				}
			}
		}
	}
}

// FuzzLookupUnits feeds arbitrary bodies of POST /v1/flags/segments to
// parseLookupUnits (ingest-and-flags spec, flag endpoints, rule 4). Seeds:
// the POST bodies of testdata/flags/cases and
// testdata/fuzz/FuzzLookupUnits. Properties:
//   - a refusal is 422 invalid_units, or 422 too_many_units for a list of
//     more than 100 units;
//   - a request is charged one per unit of a list, and 1 otherwise;
//   - accepted units are at most 100, each read from a member named
//     exactly userId or anonymousId holding that string, the other absent
//     or null, from a member named exactly units;
//   - accepted units written back parse to the same units.
func FuzzLookupUnits(f *testing.F) {
	lookupBodySeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		units, cost, prob := parseLookupUnits(body)
		var top map[string]json.RawMessage
		var list []json.RawMessage
		if json.Unmarshal(body, &top) == nil && json.Unmarshal(top["units"], &list) == nil && list != nil {
			if cost != max(1, len(list)) {
				t.Fatalf("a list of %d units costs %d", len(list), cost)
			}
		} else if prob == nil {
			t.Fatalf("body without a units list accepted: %q", body)
		}
		if prob != nil {
			if prob.Status != http.StatusUnprocessableEntity || (prob.Code != CodeInvalidUnits && prob.Code != CodeTooManyUnits) ||
				(prob.Code == CodeTooManyUnits) != (len(list) > maxLookupUnits) || prob.Detail == "" {
				t.Fatalf("refusal %+v of a list of %d", prob, len(list))
			}
			return
		}
		if len(units) != len(list) || len(units) > maxLookupUnits {
			t.Fatalf("%d units from a list of %d", len(units), len(list))
		}
		var back bytes.Buffer
		back.WriteString(`{"units":[`)
		for i, u := range units {
			var m map[string]json.RawMessage
			if json.Unmarshal(list[i], &m) != nil {
				t.Fatalf("unit %d accepted from %s", i, list[i])
			}
			name, other := "userId", "anonymousId"
			if u.Kind == UnitAnonymous {
				name, other = other, name
			}
			var id string
			if json.Unmarshal(m[name], &id) != nil || id != u.ID || (len(m[other]) > 0 && string(m[other]) != "null") {
				t.Fatalf("unit %d read as %+v from %s", i, u, list[i])
			}
			if i > 0 {
				back.WriteByte(',')
			}
			enc, _ := json.Marshal(map[string]string{name: u.ID})
			back.Write(enc)
		}
		back.WriteString("]}")
		again, _, aprob := parseLookupUnits(back.Bytes())
		if aprob != nil || len(again) != len(units) {
			t.Fatalf("accepted units written back as %s: %+v %+v", back.Bytes(), again, aprob)
		}
		for i := range units {
			if again[i] != units[i] {
				t.Fatalf("unit %d %+v written back reads %+v", i, units[i], again[i])
			}
		}
	})
}

// FuzzLookupUnit feeds arbitrary bodies of POST /v1/flags/{websiteKey} to
// lookupUnit. Seeds: as FuzzLookupUnits, and
// testdata/fuzz/FuzzLookupUnit. Properties: a unit is read only from a
// JSON object of at most 1,024 bytes whose member anonymousId is a usable
// id, which it keeps as is; identified is true only for a JSON true.
func FuzzLookupUnit(f *testing.F) {
	lookupBodySeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		u, ok := lookupUnit(body)
		if !ok {
			return
		}
		var m map[string]json.RawMessage
		var id string
		if len(body) > maxLookupBody || json.Unmarshal(body, &m) != nil || json.Unmarshal(m["anonymousId"], &id) != nil {
			t.Fatalf("unit %+v read from %q", u, body)
		}
		if u.Kind != UnitAnonymous || u.ID != id || !evaluator.UsableID(id) {
			t.Fatalf("unit %+v read from anonymousId %q", u, id)
		}
		if u.Identified != (strings.TrimSpace(string(m["identified"])) == "true") {
			t.Fatalf("identified %v from %s", u.Identified, m["identified"])
		}
	})
}

// FuzzPreviewToken feeds arbitrary svc-preview-token values to
// parsePreviewToken (docs/flag-documents.md, "Preview tokens"). Seeds:
// tokens as IssuePreviewToken signs them, and
// testdata/fuzz/FuzzPreviewToken. Properties: a signed token opens to
// what it was signed for until it expires; a token that opens is exactly
// the text signing what it opened to would give (no other spelling of a
// token works) and has not expired.
func FuzzPreviewToken(f *testing.F) {
	key := bytes.Repeat([]byte{7}, 32)
	now := time.UnixMilli(1_780_000_000_000)
	tok := signPreviewToken(key, "11000000-0000-4000-8000-000000000001", "new-checkout", now.Add(PreviewTokenTTL))
	f.Add(tok, "11000000-0000-4000-8000-000000000001", "new-checkout", int64(1000))
	f.Add("p1.eA.eA", "a", "b", int64(-1))
	f.Fuzz(func(t *testing.T, tok, project, flag string, ttl int64) {
		exp := now.Add(time.Duration(ttl) * time.Millisecond)
		signed := signPreviewToken(key, project, flag, exp)
		p, fl, ok := parsePreviewToken(key, signed, now)
		wantOK := ttl > 0 && len(signed) <= 512 && !strings.Contains(project, ":") && !strings.Contains(flag, ":")
		if ok != wantOK || ok && (p != project || fl != flag) {
			t.Fatalf("token for %q %q ttl %d opens as %q %q %v", project, flag, ttl, p, fl, ok)
		}
		p, fl, ok = parsePreviewToken(key, tok, now)
		if !ok {
			return
		}
		payload, _, _ := strings.Cut(strings.TrimPrefix(tok, previewTokenPrefix), ".")
		raw, _ := base64.RawURLEncoding.DecodeString(payload)
		parts := strings.Split(string(raw), ":")
		ms, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || ms <= now.UnixMilli() {
			t.Fatalf("token %q expired at %s accepted", tok, parts[2])
		}
		if again := signPreviewToken(key, p, fl, time.UnixMilli(ms)); again != tok {
			t.Fatalf("token %q opens to %q %q, which signs as %q", tok, p, fl, again)
		}
	})
}

// reKey is the key form of the specification's Authentication section,
// with the legacy prefix svc_.
var reKey = regexp.MustCompile(`^(mf|svc)_[a-z0-9]{8}_[A-Za-z0-9_-]+$`)

// FuzzRequestHeaders feeds arbitrary header values to what reads them on
// the ingest and flag endpoints: Authorization (bearerToken and the key
// form), Origin (originAllowed), Accept-Encoding (acceptsGzip) and
// If-None-Match (etagMatch). Seeds: below and
// testdata/fuzz/FuzzRequestHeaders. Properties:
//   - a bearer token is the header after a case-insensitive "Bearer ",
//     without surrounding blanks, and reads back the same;
//   - a key has the specification's form exactly when looksLikeKey says so;
//   - an origin that parses is allowed by an allow-list of itself and by
//     an empty one, and only an origin that parses is allowed by a list;
//   - gzip alone is accepted, gzip;q=0 refused;
//   - a tag matches itself, and a header matches only with * or the tag.
func FuzzRequestHeaders(f *testing.F) {
	f.Add("Bearer mf_shopsrv1_Server-Secret-Key_0123", "https://www.shop.example", "gzip, deflate;q=0.5", `W/"abc", "def"`)
	f.Add("bearer\tsvc_abcdefgh_x", "http://localhost:3000", "*;q=0", `*`)
	f.Add("Basic dXNlcg==", "https://shop.example:443/", "br;q=1.0, gzip;q=0.000", `"abc"`)
	f.Fuzz(func(t *testing.T, auth, originHeader, acceptEncoding, ifNoneMatch string) {
		if tok, ok := bearerToken(auth); ok {
			if tok == "" || strings.TrimLeft(tok, " \t") != tok || strings.TrimRight(tok, " \t") != tok ||
				!strings.EqualFold(auth[:7], "bearer ") || !strings.HasSuffix(strings.TrimRight(auth, " \t"), tok) {
				t.Fatalf("bearer token %q from %q", tok, auth)
			}
			if again, ok := bearerToken("Bearer " + tok); !ok || again != tok {
				t.Fatalf("token %q reads back as %q", tok, again)
			}
		}
		if looksLikeKey(auth) != reKey.MatchString(auth) {
			t.Fatalf("looksLikeKey(%q) = %v", auth, looksLikeKey(auth))
		}
		if !originAllowed(originHeader, nil) {
			t.Fatalf("an empty allow-list refuses %q", originHeader)
		}
		_, parses := parseOrigin(originHeader)
		if parses && !originAllowed(originHeader, []string{originHeader}) {
			t.Fatalf("origin %q is not allowed by itself", originHeader)
		}
		if !parses && originAllowed(originHeader, []string{acceptEncoding}) {
			t.Fatalf("origin %q that does not parse is allowed by %q", originHeader, acceptEncoding)
		}
		_ = acceptsGzip(acceptEncoding)
		if !acceptsGzip("gzip") || acceptsGzip("gzip;q=0") {
			t.Fatal("acceptsGzip")
		}
		etag := `W/"` + strings.Map(func(r rune) rune {
			if r == '"' || r == ',' || r < ' ' {
				return -1
			}
			return r
		}, acceptEncoding) + `"`
		if !etagMatch(etag, etag) {
			t.Fatalf("tag %q does not match itself", etag)
		}
		if etagMatch(ifNoneMatch, etag) && !strings.Contains(ifNoneMatch, "*") && !strings.Contains(ifNoneMatch, strings.TrimPrefix(etag, "W/")) {
			t.Fatalf("If-None-Match %q matches %q", ifNoneMatch, etag)
		}
	})
}
