// Package dashboard serves mf's dashboard: static pages that read the public
// reporting API (/api/v1) from their own origin with the signed-in person's
// API key, so that what they show can never disagree with it.
//
// The assets (plain ES modules, one stylesheet, an icon) are embedded with
// go:embed and served under /assets/{version}/, where the version is a hash
// of their contents: those answers are cached immutably, and the page
// itself (the same index.html for every dashboard URL) is revalidated on
// each load. Every dashboard answer carries a Content-Security-Policy that
// allows the page's own origin only and no inline script. docs/dashboard.md
// describes the pages.
package dashboard
