package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const demoFile = "../../docs/demo-provision.json"

func catalogSummary(t *testing.T, p *mfProc) string {
	t.Helper()
	code, _, body := do(t, "GET", p.admin+"/admin/v1/catalog", nil)
	if code != 200 {
		t.Fatalf("GET /admin/v1/catalog = %d %s", code, body)
	}
	return string(body)
}

// TestProvisionSurvivesSIGKILL: a catalog applied with `mf provision`
// through the admin API is all there after the process is killed and
// started again.
func TestProvisionSurvivesSIGKILL(t *testing.T) {
	data := t.TempDir()
	p := startMF(t, data, "serve")
	empty := catalogSummary(t, p)
	code, out, errOut := runMF(t, nil, "provision", "--admin-url", p.admin, demoFile)
	if code != 0 {
		t.Fatalf("mf provision exited %d: %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "applied") {
		t.Fatalf("mf provision did not say what it applied: %q", out)
	}
	before := catalogSummary(t, p)
	if before == empty || !strings.Contains(before, "Demo Shop") {
		t.Fatalf("catalog after provisioning does not hold the demo project: %s", before)
	}
	// Its members are camelCase, as every other answer's.
	for _, k := range []string{`"version":`, `"organizations":[{"id":`, `"projects":[{`, `"sources":[{`, `"timezone":`} {
		if !strings.Contains(before, k) {
			t.Fatalf("catalog summary lacks %s (camelCase members): %s", k, before)
		}
	}
	p.kill()

	p2 := startMF(t, data, "serve")
	after := catalogSummary(t, p2)
	if after != before {
		t.Fatalf("catalog changed across SIGKILL and restart:\nbefore %s\nafter  %s", before, after)
	}
	// Applying the same file again changes nothing.
	code, out, _ = runMF(t, nil, "provision", "--admin-url", p2.admin, demoFile)
	if code != 0 || !strings.Contains(out, "nothing to change") {
		t.Fatalf("second apply: exit %d, %q; want nothing to change", code, out)
	}
	if again := catalogSummary(t, p2); again != before {
		t.Fatalf("second apply changed the catalog:\n%s\n%s", before, again)
	}
	if c := p2.stop(30 * 1e9); c != 0 {
		t.Fatalf("mf serve exited %d on SIGTERM; output:\n%s", c, p2.out)
	}
}

// TestProvisionRefusals: malformed files are refused with a message naming
// the JSON path, and the catalog stays as it was; through the CLI against
// the admin API, through PUT /admin/v1/provision, and by mf serve
// --provision, which then does not start.
func TestProvisionRefusals(t *testing.T) {
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", demoFile)
	before := catalogSummary(t, p)
	files, _ := filepath.Glob("testdata/provision/*.json")
	if len(files) < 5 {
		t.Fatalf("want at least 5 refusal cases in testdata/provision, have %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				ExpectPath string          `json:"expectPath"`
				File       json.RawMessage `json:"file"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			// Admin API.
			code, _, body := do(t, "PUT", p.admin+"/admin/v1/provision", c.File, "Content-Type", "application/json")
			if code != 422 || !strings.Contains(string(body), c.ExpectPath) {
				t.Fatalf("PUT /admin/v1/provision = %d %s; want 422 naming %s", code, body, c.ExpectPath)
			}
			// CLI through the admin API.
			path := filepath.Join(t.TempDir(), "file.json")
			if err := os.WriteFile(path, c.File, 0o600); err != nil {
				t.Fatal(err)
			}
			ec, out, errOut := runMF(t, nil, "provision", "--admin-url", p.admin, path)
			if ec != 1 || !strings.Contains(errOut, c.ExpectPath) {
				t.Fatalf("mf provision exit %d, stdout %q, stderr %q; want exit 1 naming %s", ec, out, errOut, c.ExpectPath)
			}
			if after := catalogSummary(t, p); after != before {
				t.Fatalf("a refused file changed the catalog:\n%s\n%s", before, after)
			}
		})
	}
	p.kill()
	// mf serve --provision with a bad file refuses to start, and the
	// catalog on disk is unchanged.
	bad := filepath.Join(t.TempDir(), "bad.json")
	raw, _ := os.ReadFile("testdata/provision/bad_uuid.json")
	var c struct{ File json.RawMessage }
	_ = json.Unmarshal(raw, &c)
	_ = os.WriteFile(bad, c.File, 0o600)
	code, _, errOut := runMF(t, nil, "serve", "--data", data, "--ingest-addr", freeAddr(t), "--api-addr", freeAddr(t),
		"--admin-addr", freeAddr(t), "--provision", bad)
	if code == 0 || !strings.Contains(errOut, "organizations[0].projects[0].id") {
		t.Fatalf("mf serve with a bad provisioning file: exit %d, stderr %q", code, errOut)
	}
	p3 := startMF(t, data, "serve")
	if after := catalogSummary(t, p3); after != before {
		t.Fatalf("catalog changed by a refused --provision:\n%s\n%s", before, after)
	}
}

// TestProvisionOffline applies a file with `mf provision --data` while no
// mf runs, then serves it.
func TestProvisionOffline(t *testing.T) {
	data := t.TempDir()
	code, out, errOut := runMF(t, nil, "provision", "--data", data, demoFile)
	if code != 0 {
		t.Fatalf("mf provision --data: exit %d %s %s", code, out, errOut)
	}
	p := startMF(t, data, "serve")
	if s := catalogSummary(t, p); !strings.Contains(s, "Demo Shop") {
		t.Fatalf("catalog provisioned offline not served: %s", s)
	}
	// While mf serve holds the data directory, an offline apply is refused
	// with advice.
	code, _, errOut = runMF(t, nil, "provision", "--data", data, demoFile)
	if code == 0 || !strings.Contains(errOut, "--admin-url") {
		t.Fatalf("offline apply on a busy data dir: exit %d, %q", code, errOut)
	}
}
