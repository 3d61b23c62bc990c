package enrich

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mfhq/mf/internal/apptest"
)

const firefox = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0"

// TestGeoLookups runs the lookups of testdata/geo.json through Enrich
// against databases built with mmdbwriter (db "" is no database).
func TestGeoLookups(t *testing.T) {
	f := loadGeoFixture(t)
	dir := t.TempDir()
	enrichers := map[string]*Enricher{"": newEnricher(t, DefaultConfig())}
	for name := range f.Databases {
		p := filepath.Join(dir, name+".mmdb")
		writeGeoDB(t, f, name, p)
		cfg := DefaultConfig()
		cfg.GeoIPFile = p
		enrichers[name] = newEnricher(t, cfg)
	}
	for _, l := range f.Lookups {
		t.Run(l.DB+"/"+l.Addr, func(t *testing.T) {
			e, ok := enrichers[l.DB]
			if !ok {
				t.Fatalf("geo.json: lookup in unknown database %q", l.DB)
			}
			r := RequestFacts{Peer: netip.MustParseAddr(l.Addr), UserAgent: firefox}
			edge, err := e.Enrich(t.Context(), r, Source{ProjectID: "p", Website: true}, fixedNow)
			if err != nil {
				t.Fatal(err)
			}
			if edge.Country != l.Country || edge.Region != l.Region {
				t.Errorf("(country, region) = (%q, %q), want (%q, %q)", edge.Country, edge.Region, l.Country, l.Region)
			}
		})
	}
}

// TestGeoThroughProxy: location comes from the client address that
// X-Forwarded-For names, not from the proxy.
func TestGeoThroughProxy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GeoIPFile = geoDBPath(t, "city")
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	e := newEnricher(t, cfg)
	r := RequestFacts{Peer: netip.MustParseAddr("198.51.100.1"), XForwardedFor: "2001:db8:1::77", UserAgent: firefox}
	edge, err := e.Enrich(t.Context(), r, Source{ProjectID: "p", Website: true}, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if edge.Country != "FR" || edge.Region != "FR-IDF" {
		t.Errorf("(country, region) = (%q, %q), want (FR, FR-IDF) of the forwarded client", edge.Country, edge.Region)
	}
}

func TestGeoOpenErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.GeoIPFile = filepath.Join(dir, "missing.mmdb")
	if _, err := New(cfg, NewBucketSaltStore(apptest.OpenBucket(t, t.TempDir())), nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing database: err = %v, want a not-exist error", err)
	}
	bad := filepath.Join(dir, "bad.mmdb")
	if err := os.WriteFile(bad, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.GeoIPFile = bad
	if _, err := New(cfg, NewBucketSaltStore(apptest.OpenBucket(t, t.TempDir())), nil); err == nil {
		t.Errorf("corrupt database: no error")
	}
	e := newEnricher(t, DefaultConfig())
	if err := e.ReloadGeoIP(); !errors.Is(err, ErrNoGeoIP) {
		t.Errorf("ReloadGeoIP without database: err = %v, want ErrNoGeoIP", err)
	}
}

// TestGeoReload replaces the database file and reloads it while lookups
// run on other goroutines (run with -race): every lookup answers from the
// old or the new database, a broken file leaves the current one in place,
// and after Close lookups give no location.
func TestGeoReload(t *testing.T) {
	f := loadGeoFixture(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "geo.mmdb")
	writeGeoDB(t, f, "country", path) // 192.0.2.10 -> US
	cfg := DefaultConfig()
	cfg.GeoIPFile = path
	e := newEnricher(t, cfg)

	addr := netip.MustParseAddr("2001:db8:1::77") // only in "city": FR
	lookup := func() string {
		edge, err := e.Enrich(t.Context(), RequestFacts{Peer: addr, UserAgent: firefox}, Source{ProjectID: "p", Website: true}, fixedNow)
		if err != nil {
			t.Error(err)
		}
		return edge.Country
	}
	if got := lookup(); got != "" {
		t.Fatalf("before reload: country %q, want none", got)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if c := lookup(); c != "" && c != "FR" {
					bad.Store(c)
				}
			}
		})
	}
	next := filepath.Join(dir, "next.mmdb")
	writeGeoDB(t, f, "city", next)
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if err := e.ReloadGeoIP(); err != nil {
		t.Fatalf("ReloadGeoIP: %v", err)
	}
	if got := lookup(); got != "FR" {
		t.Errorf("after reload: country %q, want FR", got)
	}

	if err := os.WriteFile(path, []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.ReloadGeoIP(); err == nil {
		t.Errorf("reload of a broken file: no error")
	}
	if got := lookup(); got != "FR" {
		t.Errorf("after failed reload: country %q, want FR from the database in use", got)
	}
	stop.Store(true)
	wg.Wait()
	if c := bad.Load(); c != nil {
		t.Errorf("a lookup during reload answered %q", c)
	}

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := lookup(); got != "" {
		t.Errorf("after Close: country %q, want none", got)
	}
}
