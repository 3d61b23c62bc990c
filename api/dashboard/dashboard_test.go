package dashboard

import (
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func newApp(t *testing.T) (*fiber.App, *Dashboard) {
	t.Helper()
	d, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(d.Handler)
	app.Use(func(c *fiber.Ctx) error { return c.Status(404).SendString("passed on") })
	return app, d
}

func get(t *testing.T, app *fiber.App, method, target string, header ...string) (int, map[string]string, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	h := map[string]string{}
	for k := range res.Header {
		h[k] = res.Header.Get(k)
	}
	return res.StatusCode, h, string(b)
}

func TestRoutes(t *testing.T) {
	app, d := newApp(t)
	v := d.Version()
	if len(v) != 16 {
		t.Fatalf("version %q", v)
	}
	cases := []struct {
		method, path string
		status       int
		cache        string
	}{
		{"GET", "/", 200, PageCache},
		{"HEAD", "/", 200, PageCache},
		{"GET", "/signin", 200, PageCache},
		{"GET", "/projects", 200, PageCache},
		{"GET", "/p/x/overview?period=7d", 200, PageCache},
		{"GET", "/assets/" + v + "/app.js", 200, ImmutableCache},
		{"GET", "/assets/" + v + "/pages/overview.js", 200, ImmutableCache},
		{"GET", "/assets/" + v + "/app.css", 200, ImmutableCache},
		{"GET", "/assets/" + v + "/index.html", 404, ""},
		{"GET", "/assets/0123456789abcdef/app.js", 404, ""},
		{"GET", "/assets/" + v + "/nothing.js", 404, ""},
		{"GET", "/assets/" + v, 404, ""},
		{"POST", "/", 404, ""},
		{"GET", "/api/v1/projects", 404, ""},
		{"GET", "/healthz", 404, ""},
		{"GET", "/elsewhere", 404, ""},
	}
	for _, c := range cases {
		code, h, body := get(t, app, c.method, c.path)
		if code != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, code, c.status)
			continue
		}
		if code == 404 {
			if body != "passed on" || h["Content-Security-Policy"] != "" {
				t.Errorf("%s %s: not passed on untouched (%q, CSP %q)", c.method, c.path, body, h["Content-Security-Policy"])
			}
			continue
		}
		if h["Cache-Control"] != c.cache || h["Content-Security-Policy"] != CSP || h["X-Content-Type-Options"] != "nosniff" {
			t.Errorf("%s %s: Cache-Control %q, CSP %q, nosniff %q", c.method, c.path, h["Cache-Control"], h["Content-Security-Policy"], h["X-Content-Type-Options"])
		}
	}
}

func TestIndexNamesTheVersionedAssets(t *testing.T) {
	app, d := newApp(t)
	_, h, body := get(t, app, "GET", "/")
	if !strings.Contains(body, `src="/assets/`+d.Version()+`/app.js"`) || !strings.Contains(body, `content="/api/v1"`) || strings.Contains(body, "{{") {
		t.Errorf("index.html not filled in:\n%s", body)
	}
	if code, _, _ := get(t, app, "GET", "/", "If-None-Match", h["Etag"]); code != 304 {
		t.Errorf("If-None-Match with the ETag: %d, want 304", code)
	}
}

func TestGzip(t *testing.T) {
	app, d := newApp(t)
	for _, c := range []struct{ accept, want string }{{"gzip, br", "gzip"}, {"br", ""}, {"gzip;q=0", ""}, {"", ""}, {"deflate, GZIP;q=0.5", "gzip"}} {
		_, h, _ := get(t, app, "GET", "/assets/"+d.Version()+"/app.js", "Accept-Encoding", c.accept)
		if h["Content-Encoding"] != c.want || h["Vary"] != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q (Vary %q)", c.accept, h["Content-Encoding"], c.want, h["Vary"])
		}
	}
}

func TestConfig(t *testing.T) {
	for _, p := range []string{"", "api/v1", "/api/v1/", `/a"b`} {
		if err := (Config{APIPath: p}).Validate(); err == nil {
			t.Errorf("APIPath %q accepted", p)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

// TestSize is the dashboard's size budget: its JavaScript and CSS under
// 100 KB gzipped in all, as served.
func TestSize(t *testing.T) {
	d, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := d.Size()
	t.Logf("dashboard: %d JavaScript and CSS files, %d bytes, %d bytes gzipped; index.html %d bytes", s.Files, s.Bytes, s.GzipBytes, s.IndexBytes)
	if s.GzipBytes > 100*1024 {
		t.Errorf("the dashboard's JavaScript and CSS are %d bytes gzipped, over the 100 KB budget", s.GzipBytes)
	}
}

// TestModules runs the node:test tests of the modules that need no
// browser (e2e/unit, on the cases of testdata/); the pages themselves are
// tested in Chromium by cmd/mf's TestDashboard.
func TestModules(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the dashboard's module tests: bash .ci/tools.sh installs it")
	}
	cmd := exec.Command(node, "--test", filepath.Join("e2e", "unit", "modules.test.mjs"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test e2e/unit: %v\n%s", err, out)
	}
}
