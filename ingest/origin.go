package ingest

import (
	"net/url"
	"strings"
)

// originAllowed applies the Origin check of the specification
// (Authentication, rule 4) to one request Origin header value. An apex
// domain and its `www.` twin count as one site when scheme and port match;
// localhost and 127.0.0.1 pass on any port; an empty allow-list accepts
// every origin.
func originAllowed(origin string, allowed []string) bool {
	if len(allowed) == 0 {
		return true
	}
	o, ok := parseOrigin(origin)
	if !ok {
		return false
	}
	if o.host == "localhost" || o.host == "127.0.0.1" {
		return true
	}
	for _, a := range allowed {
		w, ok := parseOrigin(a)
		if !ok || w.scheme != o.scheme || w.port != o.port {
			continue
		}
		if w.host == o.host || strings.TrimPrefix(w.host, "www.") == strings.TrimPrefix(o.host, "www.") {
			return true
		}
	}
	return false
}

type origin struct{ scheme, host, port string }

// parseOrigin reads scheme://host[:port], lower-casing scheme and host and
// making the default port explicit so that https://a and https://a:443 match.
func parseOrigin(s string) (origin, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return origin{}, false
	}
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o, o.host != ""
}
