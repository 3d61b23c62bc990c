package enrich

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/oschwald/maxminddb-golang/v2"
)

// geoRecord is the part of a GeoIP2/GeoLite2 City or Country record (and
// of DB-IP's MaxMind-format databases) that enrichment reads; the decoder
// skips every other field.
type geoRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	RegisteredCountry struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"registered_country"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"subdivisions"`
}

// geoDB looks up country and region in a MaxMind-format database. The file
// is read into memory whole and opened from there, so that Reload can swap
// in a new version while lookups run on the old one, and the old one is
// freed by the garbage collector once no lookup holds it: no lookup ever
// touches an unmapped file.
type geoDB struct {
	path   string
	logger *slog.Logger
	cur    atomic.Pointer[maxminddb.Reader]
	// regions interns "CC-SUB" strings so that a lookup does not allocate
	// a new one each time; keyed by the five code bytes. It holds at most
	// one entry per subdivision the databases name (a few thousand).
	regionsMu sync.RWMutex
	regions   map[uint64]string
}

func openGeoDB(path string, logger *slog.Logger) (*geoDB, error) {
	g := &geoDB{path: path, logger: logger, regions: make(map[uint64]string)}
	if err := g.reload(); err != nil {
		return nil, err
	}
	return g, nil
}

// reload reads the file again and, if it opens, puts it in place of the
// current database. On failure the current database stays.
func (g *geoDB) reload() error {
	data, err := os.ReadFile(g.path)
	if err != nil {
		return fmt.Errorf("cannot read GeoIP database %q: %w", g.path, err)
	}
	r, err := maxminddb.OpenBytes(data)
	if err != nil {
		return fmt.Errorf("cannot open GeoIP database %q: %w; give a MaxMind-format (.mmdb) country or city database", g.path, err)
	}
	t := r.Metadata.DatabaseType
	if lt := strings.ToLower(t); !strings.Contains(lt, "country") && !strings.Contains(lt, "city") {
		g.logger.Warn("GeoIP database is neither a country nor a city database; countries and regions may stay empty",
			"file", g.path, "type", t)
	}
	g.cur.Store(r)
	g.logger.Info("GeoIP database opened", "file", g.path, "type", t,
		"built", r.Metadata.BuildTime().UTC().Format("2006-01-02"))
	return nil
}

// lookup returns the ISO 3166-1 alpha-2 country and the ISO 3166-2
// subdivision code ("US-CA") of a, each empty when unknown.
//
// Lookup errors are dropped, not returned or logged: the reader's messages
// quote the address, which must not reach the log.
func (g *geoDB) lookup(a netip.Addr) (country, region string) {
	r := g.cur.Load()
	if r == nil {
		return "", ""
	}
	var rec geoRecord
	if err := r.Lookup(a).Decode(&rec); err != nil {
		return "", ""
	}
	country, ok := countryCode(rec.Country.ISOCode)
	if !ok {
		country, ok = countryCode(rec.RegisteredCountry.ISOCode)
		if !ok {
			return "", ""
		}
		// A registered country says who holds the network, not where the
		// client is, so it carries no region.
		return country, ""
	}
	if len(rec.Subdivisions) > 0 {
		region = g.region(country, rec.Subdivisions[0].ISOCode)
	}
	return country, region
}

// countryCode returns s upper-cased if it is two ASCII letters.
func countryCode(s string) (string, bool) {
	if len(s) != 2 || !isLetter(s[0]) || !isLetter(s[1]) {
		return "", false
	}
	if isUpper(s[0]) && isUpper(s[1]) {
		return s, true
	}
	return strings.ToUpper(s), true
}

// region builds the ISO 3166-2 code of subdivision sub (1 to 3 ASCII
// letters or digits) of country, or "" when sub is not such a code.
func (g *geoDB) region(country, sub string) string {
	if len(sub) < 1 || len(sub) > 3 {
		return ""
	}
	var b [6]byte
	n := copy(b[:], country)
	b[n] = '-'
	n++
	for i := 0; i < len(sub); i++ {
		c := sub[i]
		switch {
		case isUpper(c), '0' <= c && c <= '9':
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		default:
			return ""
		}
		b[n] = c
		n++
	}
	var key uint64
	for _, c := range b {
		key = key<<8 | uint64(c)
	}
	g.regionsMu.RLock()
	code, ok := g.regions[key]
	g.regionsMu.RUnlock()
	if ok {
		return code
	}
	code = string(b[:n])
	g.regionsMu.Lock()
	g.regions[key] = code
	g.regionsMu.Unlock()
	return code
}

func isLetter(c byte) bool { return isUpper(c) || 'a' <= c && c <= 'z' }
func isUpper(c byte) bool  { return 'A' <= c && c <= 'Z' }
