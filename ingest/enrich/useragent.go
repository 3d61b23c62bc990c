package enrich

import (
	"hash/maphash"
	"strings"

	"github.com/mileusna/useragent"
	"github.com/x-way/crawlerdetect"
)

// Device types (reporting API: Event device).
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
)

// Other is the browser family or OS of a User-Agent that the parser names
// but that is not one of the families mf reports by name.
const Other = "Other"

// uaInfo is what one User-Agent string tells: the cached value.
type uaInfo struct {
	Device  string
	Browser string
	OS      string
	Bot     bool
}

// browserFamilies maps the names mileusna/useragent gives to the browser
// families mf reports. Names not listed here are reported as Other, so the
// set of families stays closed (reporting filters treat it as a closed set)
// and no stray token of a User-Agent becomes a "browser".
var browserFamilies = map[string]string{
	useragent.Chrome:           "Chrome",
	useragent.Safari:           "Safari",
	useragent.Firefox:          "Firefox",
	useragent.Edge:             "Edge",
	useragent.Opera:            "Opera",
	useragent.OperaTouch:       "Opera",
	useragent.OperaMini:        "Opera Mini",
	useragent.Vivaldi:          "Vivaldi",
	useragent.InternetExplorer: "Internet Explorer",
	"Trident":                  "Internet Explorer", // IE 11 names no MSIE token
	useragent.SamsungBrowser:   "Samsung Internet",
	"YaBrowser":                "Yandex Browser",
	useragent.FacebookApp:      "Facebook",
	useragent.InstagramApp:     "Instagram",
	useragent.TiktokApp:        "TikTok",
	"Miui Browser":             "MIUI Browser",
	"Huawei Browser":           "Huawei Browser",
	"Android browser":          "Android Browser",
	"DuckDuckGo":               "DuckDuckGo",
	"Whale":                    "Whale",
	"QQBrowser":                "QQ Browser",
	useragent.NetFront:         "NetFront",
	useragent.BlackBerry:       "BlackBerry",
}

// productTokens name browsers whose User-Agent mimics another browser's so
// closely that mileusna/useragent reports the mimicked one (measured on
// testdata/useragents.tsv). The first token found in the User-Agent wins.
var productTokens = []struct{ token, family string }{
	{" GSA/", "Google"}, // the Google app on iOS
	{"UCBrowser/", "UC Browser"},
	{" Silk/", "Silk"}, // Amazon Fire tablets
	{"DuckDuckGo/", "DuckDuckGo"},
}

// osFamilies maps mileusna/useragent's OS names to the ones mf reports.
var osFamilies = map[string]string{
	useragent.Windows:      "Windows",
	useragent.WindowsPhone: "Windows Phone",
	useragent.MacOS:        "macOS",
	useragent.IOS:          "iOS",
	useragent.Android:      "Android",
	useragent.Linux:        "Linux",
	useragent.ChromeOS:     "ChromeOS",
	useragent.FreeBSD:      "FreeBSD",
	useragent.BlackBerry:   "BlackBerry",
	useragent.Harmony:      "HarmonyOS",
}

// uaClassifier classifies User-Agents through a bounded cache. The parse
// (~2–9 µs) and above all the crawler check (~150–450 µs here: one large regular
// expression) are paid once per distinct User-Agent while it stays cached.
type uaClassifier struct {
	seed    maphash.Seed
	cache   *uaCache[uaInfo]
	crawler *crawlerdetect.CrawlerDetect
}

func newUAClassifier(cacheEntries int) *uaClassifier {
	return &uaClassifier{
		seed:    maphash.MakeSeed(),
		cache:   newUACache[uaInfo](cacheEntries),
		crawler: crawlerdetect.New(),
	}
}

// classify returns what ua tells, from the cache when it can. The cache is
// keyed by a seeded 64-bit hash of the string rather than the string, so an
// entry costs the same whatever the length of the User-Agent; the seed is
// random per process, so nobody can craft two User-Agents that collide.
func (c *uaClassifier) classify(ua string) uaInfo {
	key := c.key(ua)
	if info, ok := c.cache.get(key); ok {
		return info
	}
	info := c.classifyUncached(ua)
	c.cache.put(key, info)
	return info
}

func (c *uaClassifier) key(ua string) uint64 { return maphash.String(c.seed, ua) }

// classifyUncached does the work of classify.
//
// A User-Agent that is empty or only white space is a bot: every browser
// sends one, so a website batch without it comes from a script.
func (c *uaClassifier) classifyUncached(ua string) uaInfo {
	if strings.TrimSpace(ua) == "" || c.crawler.IsCrawler(ua) {
		return uaInfo{Bot: true}
	}
	p := useragent.Parse(ua)

	info := uaInfo{OS: osFamilies[p.OS]}
	if info.OS == "" && p.OS != "" {
		info.OS = Other
	}
	// mileusna reads "Windows Phone 10.0; Android 6.0.1" as Android.
	if strings.Contains(ua, "Windows Phone") {
		info.OS = "Windows Phone"
	}

	info.Browser = browserFamily(ua, p)
	info.Device = deviceType(ua, p, info.OS)
	return info
}

func browserFamily(ua string, p useragent.UserAgent) string {
	for _, t := range productTokens {
		if strings.Contains(ua, t.token) {
			return t.family
		}
	}
	if p.Name == "" || p.Name == ua {
		// mileusna names a User-Agent it cannot read by the whole string.
		return ""
	}
	f, ok := browserFamilies[p.Name]
	if !ok {
		return Other
	}
	// The Android WebView marks itself with "; wv)" and is otherwise Chrome.
	if f == "Chrome" && p.OS == useragent.Android && strings.Contains(ua, "; wv)") {
		return "Chrome WebView"
	}
	return f
}

// deviceType decides desktop, mobile or tablet; "" when the User-Agent
// tells none of them (televisions, consoles, unknown systems).
//
// Android browsers put "Mobile" in the User-Agent of phones only (Chrome's
// and the Android compatibility definition's convention), so an Android
// User-Agent without it is a tablet; mileusna calls every Android device
// mobile. Opera Mini names no "Mobile" and runs on phones.
func deviceType(ua string, p useragent.UserAgent, os string) string {
	switch {
	case os == "Windows Phone":
		return DeviceMobile
	case p.Tablet:
		return DeviceTablet
	case p.OS == useragent.Android && p.Name != useragent.OperaMini && !strings.Contains(ua, "Mobile"):
		return DeviceTablet
	case p.Mobile:
		return DeviceMobile
	case p.Desktop:
		return DeviceDesktop
	}
	return ""
}
