package channels

import (
	"bufio"
	_ "embed"
	"fmt"
	"strings"
)

// referrerData is the compact list of AI assistants, search engines and
// social networks, converted from Matomo's searchengine-and-social-list
// (header of the file: source, commit, licence, how it was converted).
//
//go:embed data/referrers.txt
var referrerData string

// Kind is the kind of a listed referrer.
type Kind uint8

// Kinds of listed referrers. The order is the precedence when one host is
// listed under several kinds (facebook.com is both a social network and,
// for its own search pages, a search engine: social wins).
const (
	KindNone Kind = iota
	KindAI
	KindSocial
	KindSearch
)

// String is the kind's name in the data file: ai, search, social.
func (k Kind) String() string {
	switch k {
	case KindAI:
		return "ai"
	case KindSearch:
		return "search"
	case KindSocial:
		return "social"
	}
	return "none"
}

func parseKind(s string) (Kind, bool) {
	switch s {
	case "ai":
		return KindAI, true
	case "search":
		return KindSearch, true
	case "social":
		return KindSocial, true
	}
	return KindNone, false
}

// Site is what a referrer list says about a host.
type Site struct {
	Kind Kind
	// Name is the list's name of the site, e.g. "Google" or "ChatGPT".
	Name string
}

// entry is one pattern of a list: a host pattern and an optional path
// prefix.
type entry struct {
	site Site
	path string // "" or a path prefix starting with '/'
}

// Lists matches referrer hosts against the referrer lists. Build it with
// ParseLists; the zero value matches nothing. It is read-only once built
// and safe for concurrent use.
type Lists struct {
	// byPattern maps a host pattern ("google.com", "google.{}",
	// "{}.bing.com") to its entries, longest path first.
	byPattern map[string][]entry
	// wildcard tells whether any pattern has a {} label, and in which
	// positions: first label, last label, other.
	wildFirst, wildLast, wildMiddle bool
	// names maps a lower-case site name and each plain host of a site to
	// the site, for recognising utm_source values such as "chatgpt.com"
	// or "facebook".
	names map[string]Site
	count int
}

// Len returns how many patterns the lists hold.
func (l *Lists) Len() int { return l.count }

// ParseLists reads the data file format (see data/referrers.txt).
func ParseLists(data string) (*Lists, error) {
	l := &Lists{byPattern: map[string][]entry{}, names: map[string]Site{}}
	sc := bufio.NewScanner(strings.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || text[0] == '#' {
			continue
		}
		parts := strings.Split(text, "\t")
		if len(parts) != 3 {
			return nil, fmt.Errorf("cannot read referrer lists: line %d: want kind, pattern and name separated by tabs", line)
		}
		kind, ok := parseKind(parts[0])
		if !ok {
			return nil, fmt.Errorf("cannot read referrer lists: line %d: unknown kind %q", line, parts[0])
		}
		host, path, _ := strings.Cut(parts[1], "/")
		if path != "" {
			path = "/" + path
		}
		if host == "" || parts[2] == "" {
			return nil, fmt.Errorf("cannot read referrer lists: line %d: empty pattern or name", line)
		}
		site := Site{Kind: kind, Name: parts[2]}
		l.add(host, entry{site: site, path: path})
		l.addName(strings.ToLower(site.Name), site)
		if path == "" && !strings.Contains(host, "{}") {
			l.addName(host, site)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read referrer lists: %w", err)
	}
	return l, nil
}

// addName keeps the site of the kind with precedence for a name.
func (l *Lists) addName(name string, site Site) {
	if old, ok := l.names[name]; !ok || site.Kind < old.Kind {
		l.names[name] = site
	}
}

func (l *Lists) add(host string, e entry) {
	l.count++
	labels := strings.Split(host, ".")
	for i, lab := range labels {
		if lab != "{}" {
			continue
		}
		switch {
		case i == 0:
			l.wildFirst = true
		case i == len(labels)-1:
			l.wildLast = true
		default:
			l.wildMiddle = true
		}
	}
	es := l.byPattern[host]
	// Keep one entry per (path, kind): the first listed.
	for _, o := range es {
		if o.path == e.path && o.site.Kind == e.site.Kind {
			return
		}
	}
	es = append(es, e)
	// Longest path first, then by kind precedence.
	for i := len(es) - 1; i > 0; i-- {
		a, b := es[i-1], es[i]
		if len(a.path) > len(b.path) || (len(a.path) == len(b.path) && a.site.Kind <= b.site.Kind) {
			break
		}
		es[i-1], es[i] = b, a
	}
	l.byPattern[host] = es
}

// Match finds the site of a referrer: host in lower case (a leading "www."
// is ignored) and path. The most specific pattern wins: a longer host
// suffix before a shorter one, an exact label before a {} label, a longer
// path prefix before a shorter one. ok is false when no list has the host.
func (l *Lists) Match(host, path string) (Site, bool) {
	if l == nil || len(l.byPattern) == 0 {
		return Site{}, false
	}
	host = strings.TrimPrefix(host, "www.")
	if host == "" {
		return Site{}, false
	}
	// Try each suffix of the host on label boundaries, longest first.
	for suffix := host; ; {
		if s, ok := l.matchHost(suffix, path); ok {
			return s, true
		}
		i := strings.IndexByte(suffix, '.')
		if i < 0 {
			return Site{}, false
		}
		suffix = suffix[i+1:]
	}
}

// matchHost matches one candidate host exactly or through one {} label.
func (l *Lists) matchHost(host, path string) (Site, bool) {
	if s, ok := l.lookup(host, path); ok {
		return s, true
	}
	if !l.wildFirst && !l.wildLast && !l.wildMiddle {
		return Site{}, false
	}
	labels := strings.Split(host, ".")
	if len(labels) < 2 {
		return Site{}, false
	}
	// A trailing {} stands for a top-level domain of one or two labels.
	if l.wildLast {
		if s, ok := l.lookup(strings.Join(labels[:len(labels)-1], ".")+".{}", path); ok {
			return s, true
		}
		if len(labels) >= 3 {
			if s, ok := l.lookup(strings.Join(labels[:len(labels)-2], ".")+".{}", path); ok {
				return s, true
			}
		}
	}
	if l.wildFirst {
		if s, ok := l.lookup("{}."+strings.Join(labels[1:], "."), path); ok {
			return s, true
		}
	}
	if l.wildMiddle {
		for i := 1; i < len(labels)-1; i++ {
			p := strings.Join(labels[:i], ".") + ".{}." + strings.Join(labels[i+1:], ".")
			if s, ok := l.lookup(p, path); ok {
				return s, true
			}
		}
	}
	return Site{}, false
}

func (l *Lists) lookup(pattern, path string) (Site, bool) {
	for _, e := range l.byPattern[pattern] {
		if e.path == "" || pathHasPrefix(path, e.path) {
			return e.site, true
		}
	}
	return Site{}, false
}

// pathHasPrefix reports whether path starts with prefix on a segment
// boundary ("/i/grok" matches "/i/grok" and "/i/grok/x", not "/i/groks").
func pathHasPrefix(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// Name finds a site by a utm_source value: a site's name ("Facebook",
// case-insensitive) or one of its plain hosts ("chatgpt.com").
func (l *Lists) Name(source string) (Site, bool) {
	if l == nil {
		return Site{}, false
	}
	s := strings.ToLower(strings.TrimSpace(source))
	if site, ok := l.names[s]; ok {
		return site, true
	}
	if site, ok := l.names[strings.TrimPrefix(s, "www.")]; ok {
		return site, true
	}
	return Site{}, false
}
