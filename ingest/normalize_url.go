package ingest

import (
	"strings"

	"github.com/mfhq/mf/storage/records"
)

// Page URL storage of the specification: scheme, host, port and path; from
// the query only the utm parameters and the click ids (click id values only
// in full mode); referrers without their query; nothing for an address that
// is not http or https or that does not parse.

// storedURL returns the stored form of raw. withQuery keeps the utm and
// click id parameters; clickValues keeps the click id values.
func storedURL(raw string, withQuery, clickValues bool) records.URL {
	var u records.URL
	rest, scheme := cutScheme(raw)
	if scheme == "" {
		return u
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f {
			return u // control characters: the address does not parse
		}
	}
	if !strings.HasPrefix(rest, "//") {
		return u
	}
	rest = rest[2:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	rest = rest[end:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:] // user information is never stored
	}
	host, port, ok := splitHostPort(authority)
	if !ok {
		return u
	}
	if port == "80" && scheme == "http" || port == "443" && scheme == "https" {
		port = ""
	}
	path, query := rest, ""
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query = path[:i], path[i+1:]
	}
	if path == "" {
		path = "/"
	}
	u = records.URL{Scheme: scheme, Host: host, Port: port, Path: path}
	if withQuery && query != "" {
		u.Query = keptQuery(query, clickValues)
	}
	return u
}

// cutScheme returns the address after `http:` or `https:` (any case) and the
// scheme in lower case, or "" for any other scheme.
func cutScheme(raw string) (rest, scheme string) {
	switch {
	case len(raw) >= 5 && strings.EqualFold(raw[:5], "http:"):
		return raw[5:], "http"
	case len(raw) >= 6 && strings.EqualFold(raw[:6], "https:"):
		return raw[6:], "https"
	}
	return "", ""
}

// splitHostPort splits an authority without user information. The host is
// lower-cased; an IPv6 address keeps its brackets; the port is decimal
// digits up to 65535 (an empty port counts as none).
func splitHostPort(a string) (host, port string, ok bool) {
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 2 {
			return "", "", false
		}
		for i := 1; i < end; i++ {
			c := a[i]
			if !(c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' || c == ':' || c == '.') {
				return "", "", false
			}
		}
		host = strings.ToLower(a[:end+1])
		a = a[end+1:]
		switch {
		case a == "":
		case a[0] == ':':
			port = a[1:]
		default:
			return "", "", false
		}
	} else {
		if i := strings.LastIndexByte(a, ':'); i >= 0 {
			a, port = a[:i], a[i+1:]
		}
		if a == "" {
			return "", "", false
		}
		for i := 0; i < len(a); i++ {
			switch a[i] {
			case ' ', '#', '%', '/', ':', '<', '>', '?', '@', '[', '\\', ']', '^', '|':
				return "", "", false
			}
		}
		host = strings.ToLower(a)
	}
	if len(port) > 5 {
		return "", "", false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return "", "", false
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return "", "", false
	}
	if port != "" {
		port = strings.TrimLeft(port, "0")
		if port == "" {
			port = "0"
		}
	}
	return host, port, true
}

// keptQuery returns the parameters of query whose name is one of the utm
// parameters or click ids, in order and in their original encoding, joined
// by `&`; click ids lose their value unless clickValues.
func keptQuery(query string, clickValues bool) string {
	if keepsWhole(query, clickValues) {
		return query
	}
	var b strings.Builder
	b.Grow(len(query))
	for query != "" {
		var param string
		param, query, _ = strings.Cut(query, "&")
		name, _, _ := strings.Cut(param, "=")
		switch keptParam(name) {
		case paramDropped:
			continue
		case paramClickID:
			if !clickValues {
				param = name + "="
			}
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(param)
	}
	return b.String()
}

// keepsWhole reports whether keptQuery would return query unchanged.
func keepsWhole(query string, clickValues bool) bool {
	if strings.HasSuffix(query, "&") {
		return false
	}
	for query != "" {
		var param string
		param, query, _ = strings.Cut(query, "&")
		name, value, _ := strings.Cut(param, "=")
		switch keptParam(name) {
		case paramDropped:
			return false
		case paramClickID:
			if !clickValues && (value != "" || name == param) {
				return false
			}
		}
		if param == "" {
			return false
		}
	}
	return true
}

// Kinds of query parameters.
const (
	paramDropped = iota
	paramUTM
	paramClickID
)

func keptParam(name string) int {
	switch name {
	case "utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content":
		return paramUTM
	case "gclid", "gbraid", "wbraid", "fbclid", "msclkid", "ttclid", "li_fat_id":
		return paramClickID
	}
	return paramDropped
}
