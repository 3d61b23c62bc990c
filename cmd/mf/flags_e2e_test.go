package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// TestFlagChangeServedThroughBinary: a flag changed through the admin API
// is served by the flag endpoints of the running binary within a second,
// and a client holding the old ETag gets the new document on its next poll.
func TestFlagChangeServedThroughBinary(t *testing.T) {
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", demoFile)
	auth := []string{"Authorization", "Bearer " + demoSecretKey}
	code, hdr, doc := do(t, "GET", p.ingest+"/v1/flags", nil, auth...)
	etag := hdr.Get("ETag")
	if code != 200 || !strings.HasPrefix(etag, `W/"`) || hdr.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("GET /v1/flags: %d %v %s", code, hdr, doc)
	}
	if !bytes.Contains(doc, []byte(`"search-backend"`)) || bytes.Contains(doc, []byte(`"dark-mode"`)) {
		t.Fatalf("server document holds the wrong flags: %s", doc)
	}
	if code, _, _ := do(t, "GET", p.ingest+"/v1/flags", nil, append(auth, "If-None-Match", etag)...); code != 304 {
		t.Fatalf("unchanged document: %d, want 304", code)
	}
	code, hdr, web := do(t, "GET", p.ingest+"/v1/flags/"+demoWebsiteKey, nil)
	if code != 200 || hdr.Get("Cache-Control") != "no-store" || !bytes.Contains(web, []byte(`"dark-mode"`)) || bytes.Contains(web, []byte(`"search-backend"`)) {
		t.Fatalf("browser document: %d %v %s", code, hdr, web)
	}

	// Change the server flag's default through the admin API.
	raw, err := os.ReadFile(demoFile)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(raw, []byte(`"d": "classic"`), []byte(`"d": "vector"`), 1)
	if bytes.Equal(changed, raw) {
		t.Fatal("the demo file no longer has the flag this test changes")
	}
	start := time.Now()
	if code, _, body := do(t, "PUT", p.admin+"/admin/v1/provision", changed); code != 200 {
		t.Fatalf("PUT /admin/v1/provision: %d %s", code, body)
	}
	var newDoc []byte
	waitFor(t, 10*time.Second, func() bool {
		code, _, b := do(t, "GET", p.ingest+"/v1/flags", nil, append(auth, "If-None-Match", etag)...)
		newDoc = b
		return code == 200
	})
	t.Logf("new document served %v after the admin API call started", time.Since(start).Round(time.Millisecond))
	var d struct {
		Flags map[string]struct{ D string } `json:"flags"`
	}
	if err := json.Unmarshal(newDoc, &d); err != nil || d.Flags["search-backend"].D != "vector" {
		t.Fatalf("new document %s (%v), want search-backend default vector", newDoc, err)
	}
	// Preview tokens come from the admin API for an unstarted draft
	// experiment; the browser document with the token holds the draft.
	heroOff := func(doc []byte) bool {
		var d struct {
			Flags map[string]struct {
				Off int `json:"off"`
				R   []json.RawMessage
			} `json:"flags"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatalf("browser document %s: %v", doc, err)
		}
		h, ok := d.Flags["hero-test"]
		if !ok {
			t.Fatalf("browser document without the draft experiment: %s", doc)
		}
		return h.Off == 1 && len(h.R) == 0
	}
	if !heroOff(web) {
		t.Fatalf("the draft experiment is served started without a token: %s", web)
	}
	code, _, body := do(t, "POST", p.admin+"/admin/v1/projects/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03/flags/hero-test/preview-token", nil)
	var tok struct{ Token string }
	if code != 201 || json.Unmarshal(body, &tok) != nil || tok.Token == "" {
		t.Fatalf("preview token: %d %s", code, body)
	}
	code, _, web = do(t, "GET", p.ingest+"/v1/flags/"+demoWebsiteKey+"?svc-preview-token="+url.QueryEscape(tok.Token), nil)
	if code != 200 || heroOff(web) {
		t.Fatalf("browser document with a preview token does not start the draft: %d %s", code, web)
	}
	// A started flag is no draft (422); an unknown flag is 404.
	if code, _, body := do(t, "POST", p.admin+"/admin/v1/projects/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03/flags/new-checkout/preview-token", nil); code != 422 {
		t.Fatalf("preview token for a started flag: %d %s, want 422", code, body)
	}
	if code, _, body := do(t, "POST", p.admin+"/admin/v1/projects/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03/flags/nope/preview-token", nil); code != 404 {
		t.Fatalf("preview token for an unknown flag: %d %s, want 404", code, body)
	}
}
