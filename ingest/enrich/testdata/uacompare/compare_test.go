// Package uacompare compares User-Agent parser libraries on the corpus of
// ../useragents.tsv (accuracy) and on speed, uncached. It is its own module
// so that the losing libraries stay out of mf's go.mod. Run:
//
//	cd ingest/enrich/testdata/uacompare && go test -v -bench . .
package uacompare

import (
	"bufio"
	"os"
	"strings"
	"testing"

	mileusna "github.com/mileusna/useragent"
	mssola "github.com/mssola/useragent"
	"github.com/ua-parser/uap-go/uaparser"
)

type row struct{ device, browser, os, ua string }

func corpus(tb testing.TB) []row {
	f, err := os.Open("../useragents.tsv")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var rows []row
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		p := strings.SplitN(l, "\t", 4)
		rows = append(rows, row{p[0], p[1], p[2], p[3]})
	}
	return rows
}

// synonyms renames (only renames) library family names to the corpus's.
var synonyms = map[string]string{
	// browsers
	"Mobile Safari": "Safari", "Chrome Mobile": "Chrome", "Chrome Mobile iOS": "Chrome",
	"Firefox Mobile": "Firefox", "Firefox iOS": "Firefox", "Edge Mobile": "Edge",
	"Opera Mobile": "Opera", "IE": "Internet Explorer", "Trident": "Internet Explorer",
	"Samsung Browser": "Samsung Internet", "YaBrowser": "Yandex Browser",
	"Facebook App": "Facebook", "Instagram App": "Instagram", "Miui Browser": "MIUI Browser",
	"MiuiBrowser": "MIUI Browser", "Chrome Mobile WebView": "Chrome WebView",
	"Amazon Silk": "Silk", "Google App": "Google",
	// systems
	"Mac OS X": "macOS", "Ubuntu": "Linux", "Chrome OS": "ChromeOS", "CrOS x86_64": "ChromeOS",
	"iPhone OS": "iOS",
}

func syn(s string) string {
	if v, ok := synonyms[s]; ok {
		return v
	}
	return s
}

type result struct{ device, browser, os string }

func parseMileusna(ua string) result {
	p := mileusna.Parse(ua)
	d := "desktop"
	switch {
	case p.Tablet:
		d = "tablet"
	case p.Mobile:
		d = "mobile"
	}
	return result{d, syn(p.Name), syn(p.OS)}
}

var uap = func() *uaparser.Parser {
	p, err := uaparser.New(uaparser.WithCacheSize(1))
	if err != nil {
		panic(err)
	}
	return p
}()

func parseUAP(ua string) result {
	b, o, dv := uap.ParseUserAgent(ua), uap.ParseOs(ua), uap.ParseDevice(ua)
	d := "desktop"
	switch {
	case dv.Family == "iPad" || dv.Family == "Kindle" || strings.Contains(dv.Brand, "Tablet") || strings.Contains(dv.Family, "Tablet"):
		d = "tablet"
	case o.Family == "iOS" || o.Family == "Android" || o.Family == "Windows Phone":
		d = "mobile"
	}
	return result{d, syn(b.Family), syn(o.Family)}
}

func parseMssola(ua string) result {
	p := mssola.New(ua)
	d := "desktop"
	switch {
	case p.Platform() == "iPad" || p.Platform() == "Tablet":
		d = "tablet"
	case p.Mobile():
		d = "mobile"
	}
	n, _ := p.Browser()
	os := p.OSInfo().Name
	if p.Platform() == "iPad" {
		os = "iOS"
	}
	return result{d, syn(n), syn(os)}
}

var parsers = []struct {
	name  string
	parse func(string) result
}{
	{"mileusna/useragent v1.3.5", parseMileusna},
	{"ua-parser/uap-go", parseUAP},
	{"mssola/useragent v1.0.0", parseMssola},
}

// TestAccuracy logs how many corpus rows each library gets right.
func TestAccuracy(t *testing.T) {
	rows := corpus(t)
	for _, p := range parsers {
		var dev, br, os int
		for _, r := range rows {
			g := p.parse(r.ua)
			if g.device == r.device {
				dev++
			} else {
				t.Logf("%s: device %q for %s", p.name, g.device, r.ua)
			}
			if g.browser == r.browser {
				br++
			} else {
				t.Logf("%s: browser %q for %s", p.name, g.browser, r.ua)
			}
			if g.os == r.os {
				os++
			} else {
				t.Logf("%s: OS %q for %s", p.name, g.os, r.ua)
			}
		}
		t.Logf("%-28s device %d/%d  browser %d/%d  OS %d/%d", p.name, dev, len(rows), br, len(rows), os, len(rows))
	}
}

var sink result

func BenchmarkParse(b *testing.B) {
	rows := corpus(b)
	for _, p := range parsers {
		b.Run(strings.Fields(p.name)[0], func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sink = p.parse(rows[i%len(rows)].ua)
				i++
			}
		})
	}
}
