package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const demoPAT = "mf_pat_demo0001_DemoDemoDemoDemoDemoDemoDemoDemoDemoDemo"

// TestReportingProjectsThroughBinary: the reporting API of the real binary
// answers the project list with an API key and with an app token issued
// through the admin API, and records the calls as recent access.
func TestReportingProjectsThroughBinary(t *testing.T) {
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	code, hdr, body := do(t, "GET", p.api+"/api/v1/projects?unknown=1", nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 || hdr.Get("Content-Type") != "application/vnd.api+json" || hdr.Get("X-Frame-Options") != "DENY" ||
		hdr.Get("Access-Control-Allow-Origin") != "" || hdr.Get("RateLimit-Policy") == "" {
		t.Fatalf("GET /projects: %d %v %s", code, hdr, body)
	}
	if !strings.Contains(string(body), `"9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03"`) || !strings.Contains(string(body), `"Demo Shop"`) {
		t.Fatalf("project list without the demo project: %s", body)
	}
	if code, hdr, _ := do(t, "POST", p.api+"/api/v1/projects", nil, "Authorization", "Bearer "+demoPAT); code != 405 || hdr.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %v", code, hdr)
	}
	if code, _, _ := do(t, "GET", p.api+"/api/v1/projects", nil); code != 401 {
		t.Fatalf("no credential: %d", code)
	}
	code, _, body = do(t, "POST", p.admin+"/admin/v1/users/6f1c0a52-3f1e-4c55-9d3e-0b8a7c2d4e01/app-tokens", []byte(`{"app":"dashboard-sync"}`))
	var tok struct{ AccessToken, RefreshToken string }
	if code != 201 || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("issue app tokens: %d %s", code, body)
	}
	if code, _, body := do(t, "GET", p.api+"/api/v1/projects/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03", nil, "Authorization", "Bearer "+tok.AccessToken); code != 200 {
		t.Fatalf("project with an app token: %d %s", code, body)
	}
	code, _, body = do(t, "GET", p.admin+"/admin/v1/users/6f1c0a52-3f1e-4c55-9d3e-0b8a7c2d4e01/access", nil)
	if code != 200 || !strings.Contains(string(body), "app:dashboard-sync") || strings.Contains(string(body), "unknown=1") {
		t.Fatalf("recent access: %d %s", code, body)
	}
}
