package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/mfhq/mf/ingest/client/browser"
	"github.com/mfhq/mf/wasm"
)

// TestSDKServed: the ingest listener of the real binary serves the browser
// client and the files it loads at the contract's paths, with their cache
// lifetimes, encodings, entity tags, the /v1 CORS headers, and 404 for an
// unknown version. Requests are data in testdata/sdk/requests.json.
func TestSDKServed(t *testing.T) {
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	raw, err := os.ReadFile("testdata/sdk/requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Path, AcceptEncoding, Cache, Encoding, Type, File string
		Status                                                  int
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("requests.json: %v", err)
	}
	files := map[string][]byte{"mf.mjs": browser.Minified, "evaluator.mjs": wasm.JS(), "evaluator.wasm": wasm.Module().Raw}
	version := browser.Version()
	for _, c := range cases {
		path := strings.ReplaceAll(c.Path, "{version}", version)
		// The Go client adds gzip itself unless Accept-Encoding is set;
		// "identity" stands for none.
		ae := c.AcceptEncoding
		if ae == "" {
			ae = "identity"
		}
		code, h, body := do(t, "GET", p.ingest+path, nil, "Accept-Encoding", ae, "Origin", "https://elsewhere.example")
		if code != c.Status {
			t.Errorf("%s: GET %s: %d, want %d (%s)", c.Name, path, code, c.Status, body)
			continue
		}
		if h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Expose-Headers") != "Retry-After" {
			t.Errorf("%s: CORS headers missing: %v", c.Name, h)
		}
		if code != 200 {
			var m struct{ Message string }
			if json.Unmarshal(body, &m) != nil || m.Message == "" {
				t.Errorf("%s: 404 body %q, want {message}", c.Name, body)
			}
			continue
		}
		if h.Get("Cache-Control") != c.Cache || h.Get("Content-Type") != c.Type || h.Get("Content-Encoding") != c.Encoding || h.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s: headers %v, want Cache-Control %q, Content-Type %q, Content-Encoding %q", c.Name, h, c.Cache, c.Type, c.Encoding)
		}
		got := decode(t, c.Encoding, body)
		if !bytes.Equal(got, files[c.File]) {
			t.Errorf("%s: body (%d bytes decoded) is not %s (%d bytes)", c.Name, len(got), c.File, len(files[c.File]))
		}
		etag := h.Get("ETag")
		if etag == "" {
			t.Errorf("%s: no ETag", c.Name)
			continue
		}
		if code, _, _ := do(t, "GET", p.ingest+path, nil, "Accept-Encoding", ae, "If-None-Match", etag); code != 304 {
			t.Errorf("%s: If-None-Match %s: %d, want 304", c.Name, etag, code)
		}
	}
	code, h, _ := do(t, "OPTIONS", p.ingest+"/v1/sdk/mf.mjs", nil, "Origin", "https://shop.example", "Access-Control-Request-Method", "GET")
	if code != 204 || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Max-Age") != "86400" {
		t.Errorf("preflight: %d %v", code, h)
	}
}

func decode(t *testing.T, enc string, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch enc {
	case "":
		return body
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gzip body: %v", err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s body: %v", enc, err)
	}
	return b
}
