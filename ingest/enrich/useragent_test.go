package enrich

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"testing"
)

var peer = netip.MustParseAddr("198.51.100.1")

// TestUserAgents runs testdata/useragents.tsv through Enrich: device,
// browser family and OS of real browser User-Agents, none of them a bot.
func TestUserAgents(t *testing.T) {
	e := newEnricher(t, DefaultConfig())
	for _, c := range readTSV(t, "useragents.tsv", 4) {
		device, browser, os, ua := c[0], c[1], c[2], c[3]
		t.Run(ua, func(t *testing.T) {
			for pass := range 2 { // the second pass is served by the cache
				edge, err := e.Enrich(t.Context(), RequestFacts{Peer: peer, UserAgent: ua}, Source{ProjectID: "p", Website: true}, fixedNow)
				if err != nil {
					t.Fatal(err)
				}
				got := [4]string{edge.Device, edge.Browser, edge.OS, strconv.FormatBool(edge.Bot)}
				want := [4]string{device, browser, os, "false"}
				if got != want {
					t.Errorf("pass %d: (device, browser, os, bot) = %q, want %q", pass, got, want)
				}
			}
		})
	}
}

// TestBots runs testdata/bots.txt through Enrich: every one is a bot for a
// website source, and a bot gets no device, location or hash.
func TestBots(t *testing.T) {
	e := newEnricher(t, Config{GeoIPFile: geoDBPath(t, "city"), UserAgentCacheSize: 1024})
	uas := append(readLines(t, "bots.txt"), "", " ", "\t")
	for _, ua := range uas {
		t.Run(fmt.Sprintf("%q", ua), func(t *testing.T) {
			r := RequestFacts{Peer: netip.MustParseAddr("192.0.2.10"), UserAgent: ua}
			edge, err := e.Enrich(t.Context(), r, Source{ProjectID: "p", Website: true, Consentless: true}, fixedNow)
			if err != nil {
				t.Fatal(err)
			}
			if !edge.Bot {
				t.Fatalf("not classified as a bot")
			}
			if edge.Device != "" || edge.Browser != "" || edge.OS != "" || edge.Country != "" || edge.Region != "" || edge.VisitorHash != "" {
				t.Errorf("bot edge carries derived facts: %+v", edge)
			}
			if !edge.NetKey.IsValid() {
				t.Errorf("bot edge has no NetKey for rate limiting")
			}
			if !e.IsBot(ua) {
				t.Errorf("IsBot = false")
			}
		})
	}
}

// TestServerSourceNoDeviceNoLocation: events from a server source carry no
// device and no location, and a bot User-Agent does not matter there.
func TestServerSourceNoDeviceNoLocation(t *testing.T) {
	e := newEnricher(t, Config{GeoIPFile: geoDBPath(t, "city"), UserAgentCacheSize: 1024})
	for _, ua := range []string{"curl/8.5.0", "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0"} {
		for _, consentless := range []bool{false, true} {
			edge, err := e.Enrich(t.Context(), RequestFacts{Peer: netip.MustParseAddr("192.0.2.10"), UserAgent: ua}, Source{ProjectID: "p", Consentless: consentless}, fixedNow)
			if err != nil {
				t.Fatal(err)
			}
			want := Edge{NetKey: netKeyOf(netip.MustParseAddr("192.0.2.10"))}
			if edge != want {
				t.Errorf("server source, UA %q, consentless %v: edge = %+v, want only the NetKey", ua, consentless, edge)
			}
		}
	}
}

// TestUACacheBounded fills the classification cache with far more distinct
// User-Agents than it may hold and checks the bound, and that the entries
// used last are still there.
func TestUACacheBounded(t *testing.T) {
	const size = 256
	c := newUAClassifier(size)
	base := "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Test/"
	for i := range 20 * size {
		c.classify(base + strconv.Itoa(i))
	}
	if n := c.cache.len(); n > size+2*cacheShards {
		t.Errorf("cache holds %d entries, bound is about %d", n, size)
	}
	hot := base + strconv.Itoa(20*size-1)
	if _, ok := c.cache.get(c.key(hot)); !ok {
		t.Errorf("the last User-Agent classified is not cached")
	}
	if _, ok := c.cache.get(c.key(base + "0")); ok {
		t.Errorf("the first of %d User-Agents is still cached", 20*size)
	}
}

// TestUACacheKeepsUsedEntries: an entry looked up again survives the
// rotation of its shard's generations.
func TestUACacheKeepsUsedEntries(t *testing.T) {
	c := newUACache[int](2 * cacheShards * 4) // 4 entries per generation
	const keep = uint64(7) << 60              // lands in shard 7
	c.put(keep, 42)
	for i := range uint64(100) {
		c.put(keep+1+i, int(i)) // same shard
		if v, ok := c.get(keep); !ok || v != 42 {
			t.Fatalf("after %d inserts the used entry is gone (%v, %v)", i+1, v, ok)
		}
	}
	if n := c.len(); n > 8 {
		t.Errorf("cache holds %d entries, want at most 8", n)
	}
}

// TestUAClassifierConcurrent classifies from many goroutines at once (run
// with -race): every answer equals the uncached one.
func TestUAClassifierConcurrent(t *testing.T) {
	c := newUAClassifier(64) // small, so entries rotate while in use
	rows := readTSV(t, "useragents.tsv", 4)
	want := make(map[string]uaInfo)
	for _, r := range rows {
		want[r[3]] = c.classifyUncached(r[3])
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 400 {
				ua := rows[(g*31+i)%len(rows)][3]
				if got := c.classify(ua); got != want[ua] {
					select {
					case errs <- fmt.Sprintf("classify(%q) = %+v, want %+v", ua, got, want[ua]):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
