package dashboard

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// CSP is the Content-Security-Policy of every dashboard answer: scripts,
// styles, images and API calls from the page's own origin only, no inline
// script or style attribute, no plugins, no frames, no form posts
// elsewhere, and DOM sinks that parse HTML closed (the pages build their
// DOM node by node).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

// Cache policies.
const (
	// ImmutableCache is for versioned assets: their URL changes with them.
	ImmutableCache = "public, max-age=31536000, immutable"
	// PageCache is for the page itself, revalidated on every load so that
	// a new version's asset URLs are picked up at once.
	PageCache = "no-cache"
)

// Dashboard serves the dashboard's page and assets.
type Dashboard struct {
	cfg    Config
	assets *assetSet
}

// New builds the dashboard from the embedded assets.
func New(cfg Config) (*Dashboard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		return nil, fmt.Errorf("cannot open the dashboard's embedded assets: %w", err)
	}
	set, err := loadAssets(sub, cfg.APIPath)
	if err != nil {
		return nil, err
	}
	return &Dashboard{cfg: cfg, assets: set}, nil
}

// Version names the current assets: their URLs are /assets/{Version}/….
func (d *Dashboard) Version() string { return d.assets.version }

// Size is the JavaScript and CSS a browser downloads.
func (d *Dashboard) Size() Size { return d.assets.size() }

// isPage tells the dashboard's page URLs: the sign-in page, the project
// list and every page of a project (/p/{project}/…).
func isPage(p string) bool {
	return p == "/" || p == "/signin" || p == "/projects" || strings.HasPrefix(p, "/p/")
}

// Handler answers GET and HEAD of the dashboard's URLs and passes
// everything else on (the API, /healthz, unknown paths).
func (d *Dashboard) Handler(c *fiber.Ctx) error {
	if m := c.Method(); m != fiber.MethodGet && m != fiber.MethodHead {
		return c.Next()
	}
	p := c.Path()
	switch {
	case strings.HasPrefix(p, "/assets/"):
		return d.serveAsset(c, strings.TrimPrefix(p, "/assets/"))
	case isPage(p):
		return d.servePage(c)
	}
	return c.Next()
}

func (d *Dashboard) headers(c *fiber.Ctx) {
	c.Set("Content-Security-Policy", CSP)
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("X-Frame-Options", "DENY")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// servePage answers index.html, the same for every page URL: the modules
// read the URL and draw the page.
func (d *Dashboard) servePage(c *fiber.Ctx) error {
	d.headers(c)
	etag := `"` + d.assets.version + `"`
	c.Set("Cache-Control", PageCache)
	c.Set("ETag", etag)
	c.Set("Content-Type", "text/html; charset=utf-8")
	if c.Get("If-None-Match") == etag {
		return c.SendStatus(fiber.StatusNotModified)
	}
	return c.Send(d.assets.index)
}

// serveAsset answers /assets/{version}/{name}; another version (an older
// page asking after an upgrade) or an unknown name is passed on to 404.
func (d *Dashboard) serveAsset(c *fiber.Ctx, rest string) error {
	version, name, ok := strings.Cut(rest, "/")
	a := d.assets.files[name]
	if !ok || version != d.assets.version || a == nil {
		return c.Next()
	}
	d.headers(c)
	c.Set("Cache-Control", ImmutableCache)
	c.Set("Content-Type", a.contentType)
	c.Set("Vary", "Accept-Encoding")
	if a.gzipped != nil && acceptsGzip(c.Get("Accept-Encoding")) {
		c.Set("Content-Encoding", "gzip")
		return c.Send(a.gzipped)
	}
	return c.Send(a.body)
}

// acceptsGzip reads Accept-Encoding for gzip without a zero q-value.
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
