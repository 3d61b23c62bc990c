package enrich

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/mileusna/useragent"
	"github.com/x-way/crawlerdetect"
)

const chromeWindows = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"

var (
	sinkEdge Edge
	sinkInfo uaInfo
	sinkStr  string
	sinkBool bool
)

// benchEnricher returns an Enricher with the city fixture database, a
// trusted proxy, and today's salt cached.
func benchEnricher(b *testing.B) *Enricher {
	cfg := DefaultConfig()
	cfg.GeoIPFile = geoDBPath(b, "city")
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	e := newEnricher(b, cfg)
	if err := e.RotateSalts(b.Context(), fixedNow); err != nil {
		b.Fatal(err)
	}
	return e
}

var benchFacts = RequestFacts{
	Peer:          netip.MustParseAddr("10.1.2.3"),
	XForwardedFor: "192.0.2.10",
	UserAgent:     chromeWindows,
}

// BenchmarkEnrich is the hot path of a website batch: User-Agent cached,
// salt cached, one GeoIP lookup (and for consentless one SHA-256).
func BenchmarkEnrich(b *testing.B) {
	for _, bc := range []struct {
		name string
		src  Source
	}{
		{"website-consentless", Source{ProjectID: "proj_1", Website: true, Consentless: true}},
		{"website-full", Source{ProjectID: "proj_1", Website: true}},
		{"server", Source{ProjectID: "proj_1"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := benchEnricher(b)
			ctx := b.Context()
			if _, err := e.Enrich(ctx, benchFacts, bc.src, fixedNow); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(benchFacts.UserAgent)))
			b.ReportAllocs()
			for b.Loop() {
				sinkEdge, _ = e.Enrich(ctx, benchFacts, bc.src, fixedNow)
			}
		})
	}
}

// BenchmarkEnrichParallel is the consentless hot path from all cores.
func BenchmarkEnrichParallel(b *testing.B) {
	e := benchEnricher(b)
	src := Source{ProjectID: "proj_1", Website: true, Consentless: true}
	ctx := b.Context()
	if _, err := e.Enrich(ctx, benchFacts, src, fixedNow); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchFacts.UserAgent)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			edge, _ := e.Enrich(ctx, benchFacts, src, fixedNow)
			_ = edge
		}
	})
}

// BenchmarkClassify measures the User-Agent cache: hit, and miss (a new
// User-Agent each time: crawler check, parse, insert with eviction).
func BenchmarkClassify(b *testing.B) {
	b.Run("hit", func(b *testing.B) {
		c := newUAClassifier(DefaultConfig().UserAgentCacheSize)
		c.classify(chromeWindows)
		b.SetBytes(int64(len(chromeWindows)))
		b.ReportAllocs()
		for b.Loop() {
			sinkInfo = c.classify(chromeWindows)
		}
	})
	b.Run("miss", func(b *testing.B) {
		c := newUAClassifier(DefaultConfig().UserAgentCacheSize)
		uas := make([]string, 1<<16)
		for i := range uas {
			uas[i] = chromeWindows + " Build/" + strconv.Itoa(i)
		}
		b.SetBytes(int64(len(uas[0])))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			sinkInfo = c.classify(uas[i%len(uas)])
			i++
		}
	})
}

// BenchmarkLibraries measures the two libraries uncached, for reference.
func BenchmarkLibraries(b *testing.B) {
	b.Run("crawlerdetect", func(b *testing.B) {
		cd := crawlerdetect.New()
		b.SetBytes(int64(len(chromeWindows)))
		b.ReportAllocs()
		for b.Loop() {
			sinkBool = cd.IsCrawler(chromeWindows)
		}
	})
	b.Run("useragent.Parse", func(b *testing.B) {
		b.SetBytes(int64(len(chromeWindows)))
		b.ReportAllocs()
		for b.Loop() {
			sinkStr = useragent.Parse(chromeWindows).Name
		}
	})
}

// BenchmarkGeoLookup is one city lookup with a region.
func BenchmarkGeoLookup(b *testing.B) {
	g, err := openGeoDB(geoDBPath(b, "city"), discardLogger())
	if err != nil {
		b.Fatal(err)
	}
	a := netip.MustParseAddr("192.0.2.10")
	b.ReportAllocs()
	for b.Loop() {
		sinkStr, _ = g.lookup(a)
	}
}

func BenchmarkVisitorHash(b *testing.B) {
	var salt [SaltSize]byte
	nk := netKeyOf(netip.MustParseAddr("2001:db8:1:2::5"))
	b.SetBytes(int64(len(chromeWindows)))
	b.ReportAllocs()
	for b.Loop() {
		sinkStr = visitorHash(&salt, "proj_1", nk, chromeWindows)
	}
}

// BenchmarkNetKey resolves a client behind three trusted proxies.
func BenchmarkNetKey(b *testing.B) {
	e := newEnricher(b, Config{
		TrustedProxies:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")},
		UserAgentCacheSize: 64,
	})
	r := RequestFacts{Peer: netip.MustParseAddr("10.0.0.1"), XForwardedFor: "203.0.113.9, 198.51.100.1, 2001:db8:ffff::7, 10.2.2.2"}
	b.SetBytes(int64(len(r.XForwardedFor)))
	b.ReportAllocs()
	for b.Loop() {
		k, _ := e.NetKey(r)
		sinkBool = k.IsValid()
	}
}
