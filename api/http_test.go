package api

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// httpCase is one request and what its answer must hold
// (testdata/http/cases.json).
type httpCase struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Auth   string `json:"auth"`
	Addr   string `json:"addr"`
	Status int    `json:"status"`
	// Headers must be present with these values; a value "" means absent.
	Headers map[string]string `json:"headers"`
	// JSON maps dotted paths of the answer to expected values; the value
	// "<absent>" means the path must not exist.
	JSON map[string]any `json:"json"`
	// Body, when set, must be contained in the raw answer.
	Body string `json:"body"`
}

// securityHeaders expected on every reporting answer.
var wantSecurity = map[string]string{
	"X-Content-Type-Options":        "nosniff",
	"X-Frame-Options":               "DENY",
	"Referrer-Policy":               "strict-origin-when-cross-origin",
	"Content-Security-Policy":       "default-src 'none'; frame-ancestors 'none'",
	"Access-Control-Allow-Origin":   "",
	"Access-Control-Allow-Methods":  "",
	"Access-Control-Allow-Headers":  "",
	"Access-Control-Expose-Headers": "",
}

func TestHTTPCases(t *testing.T) {
	raw, err := os.ReadFile("testdata/http/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []httpCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("testdata/http/cases.json: %v", err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	env := newTestEnv(t, DefaultReportingConfig())
	for i, tc := range cases {
		// Each case comes from its own address so that refused-credential
		// cases do not share a budget.
		addr := tc.Addr
		if addr == "" {
			addr = fmt.Sprintf("198.51.100.%d", i%250+1)
		}
		status, hdr, body := env.send(t, tc.Method, tc.Path, tc.Auth, addr)
		if status != tc.Status {
			t.Errorf("%s: status %d, want %d: %s", tc.Name, status, tc.Status, body)
			continue
		}
		for k, v := range wantSecurity {
			if got := hdr.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", tc.Name, k, got, v)
			}
		}
		if strings.HasPrefix(tc.Path, "/api/v1") {
			if got := hdr.Get("Content-Type"); got != "application/vnd.api+json" {
				t.Errorf("%s: Content-Type %q", tc.Name, got)
			}
			if hdr.Get("RateLimit") == "" || hdr.Get("RateLimit-Policy") == "" {
				t.Errorf("%s: rate-limit headers missing: %v", tc.Name, hdr)
			}
		}
		for k, v := range tc.Headers {
			if got := hdr.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", tc.Name, k, got, v)
			}
		}
		if tc.Body != "" && !strings.Contains(string(body), tc.Body) {
			t.Errorf("%s: answer lacks %q: %s", tc.Name, tc.Body, body)
		}
		if len(tc.JSON) == 0 {
			continue
		}
		if tc.Method == "HEAD" {
			t.Errorf("%s: a HEAD answer has no body to check", tc.Name)
			continue
		}
		doc := decode(t, body)
		for path, want := range tc.JSON {
			got, ok := lookup(doc, path)
			if want == "<absent>" {
				if ok {
					t.Errorf("%s: %s present (%v), want absent", tc.Name, path, got)
				}
				continue
			}
			if !ok {
				t.Errorf("%s: %s missing in %s", tc.Name, path, body)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s = %#v, want %#v", tc.Name, path, got, want)
			}
		}
	}
}
