// Package channels decides the acquisition channel of a visit from its
// first page: ad click ids, UTM tags and the referrer, with Matomo's lists
// of AI assistants, search engines and social networks (data/referrers.txt,
// converted by TestReferrerLists from the files in testdata/matomo).
//
// The rules and their precedence are in docs/processor.md, "Channels".
package channels

import (
	"net/url"
	"strings"
	"sync"
)

// Channels of the reporting specification. None is for people only a
// server has seen (no visit); Classify never returns it.
const (
	PaidSearch    = "paid_search"
	PaidSocial    = "paid_social"
	Email         = "email"
	AIAssistant   = "ai_assistant"
	OrganicSearch = "organic_search"
	OrganicSocial = "organic_social"
	Campaign      = "campaign"
	Referral      = "referral"
	Direct        = "direct"
	None          = "none"
)

// Ad platforms credited for click ids (../shared/spec/NOTES.md).
const (
	AdsPlatformA = "ads_platform_a"
	AdsPlatformB = "ads_platform_b"
)

// clickIDs in order of precedence, with what each one means.
var clickIDs = []struct {
	param, channel, platform string
}{
	{"gclid", PaidSearch, AdsPlatformA},
	{"gbraid", PaidSearch, AdsPlatformA},
	{"wbraid", PaidSearch, AdsPlatformA},
	{"msclkid", PaidSearch, ""},
	{"fbclid", PaidSocial, AdsPlatformB},
	{"ttclid", PaidSocial, ""},
	{"li_fat_id", PaidSocial, ""},
}

// Medium classes of utm_medium values (lower case).
var (
	paidMediums = set("cpc", "ppc", "cpm", "cpv", "cpa", "paid", "paidsearch", "paid-search", "paid_search",
		"sem", "paidsocial", "paid-social", "paid_social", "paid-media", "paid_media", "display", "banner")
	paidSocialMediums = set("paidsocial", "paid-social", "paid_social")
	emailMediums      = set("email", "e-mail", "e_mail", "mail", "newsletter", "mailing")
	socialMediums     = set("social", "social-network", "social_network", "social-media", "social_media", "sm", "organic_social", "organic-social")
	searchMediums     = set("organic", "organic_search", "organic-search")
	referralMediums   = set("referral", "referrer", "link")
	aiMediums         = set("ai", "ai_assistant", "ai-assistant", "llm", "chatbot")
)

func set(vs ...string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// Input is what a visit's first event says about where it came from.
type Input struct {
	// PageHost is the host of the page (lower case), PageQuery the kept
	// query parameters of its address (records.URL.Query).
	PageHost, PageQuery string
	// RefHost and RefPath are the referrer's host (lower case) and path;
	// empty when the event had no referrer.
	RefHost, RefPath string
}

// Touch is the acquisition of a visit.
type Touch struct {
	// Channel is one of the nine channels.
	Channel string
	// Source is utm_source when tagged, else the referring host without
	// "www.", else empty.
	Source string
	// Medium, Campaign, Term and Content are the UTM tags as sent
	// (decoded), empty when absent.
	Medium, Campaign, Term, Content string
	// AdPlatform is ads_platform_a or ads_platform_b when a click id of
	// theirs decided the channel; ClickID names the click id parameter
	// that decided it (gclid, fbclid, ...).
	AdPlatform, ClickID string
	// RefHost is the referring host without "www.", RefName the list's
	// name of the referring site ("Google") when listed.
	RefHost, RefName string
}

// Classifier decides channels. It caches referrer lookups; safe for
// concurrent use.
type Classifier struct {
	lists *Lists

	mu    sync.Mutex
	cache map[string]Site // referrer host+path -> site (Kind 0: unlisted)
}

// maxCache bounds the referrer cache; it is emptied when full.
const maxCache = 1 << 16

// Default returns a Classifier with the embedded lists (parsed on each
// call: build one per process). It fails only when the embedded file is
// malformed, which the package's tests rule out.
func Default() (*Classifier, error) {
	l, err := ParseLists(referrerData)
	if err != nil {
		return nil, err
	}
	return New(l), nil
}

// New returns a Classifier with lists.
func New(lists *Lists) *Classifier {
	return &Classifier{lists: lists, cache: map[string]Site{}}
}

// Lists returns the classifier's referrer lists.
func (c *Classifier) Lists() *Lists { return c.lists }

// Classify decides the touch of a visit from its first event. The
// precedence, first match wins:
//
//  1. an ad click id in the page address (gclid, gbraid, wbraid, msclkid:
//     paid_search; fbclid, ttclid, li_fat_id: paid_social);
//  2. utm_source naming an AI assistant: ai_assistant;
//  3. utm_medium: a paid medium (cpc, ppc, paid, ...): paid_social when it
//     says social or the source or referrer is a social network, else
//     paid_search; email mediums: email; social mediums: organic_social;
//     organic: organic_search; AI mediums: ai_assistant; referral
//     mediums: referral;
//  4. utm_source naming a search engine or a social network:
//     organic_search or organic_social;
//  5. any other UTM tag: campaign;
//  6. the referrer: an AI assistant, a search engine, a social network
//     (ai_assistant, organic_search, organic_social), the page's own site
//     (direct), anything else (referral);
//  7. no referrer: direct.
func (c *Classifier) Classify(in Input) Touch {
	var t Touch
	q := parseQuery(in.PageQuery)
	t.Source = q.get("utm_source")
	t.Medium = q.get("utm_medium")
	t.Campaign = q.get("utm_campaign")
	t.Term = q.get("utm_term")
	t.Content = q.get("utm_content")
	ref := Site{}
	if in.RefHost != "" {
		t.RefHost = strings.TrimPrefix(in.RefHost, "www.")
		ref = c.match(in.RefHost, in.RefPath)
		t.RefName = ref.Name
	}
	if t.Source == "" {
		t.Source = t.RefHost
	}
	for _, ci := range clickIDs {
		if q.has(ci.param) {
			t.Channel, t.AdPlatform, t.ClickID = ci.channel, ci.platform, ci.param
			return t
		}
	}
	utmSource := q.get("utm_source")
	var srcSite Site
	if utmSource != "" {
		srcSite, _ = c.lists.Name(utmSource)
	}
	if srcSite.Kind == KindAI {
		t.Channel = AIAssistant
		return t
	}
	medium := strings.ToLower(strings.TrimSpace(t.Medium))
	switch {
	case paidMediums[medium]:
		if paidSocialMediums[medium] || srcSite.Kind == KindSocial || ref.Kind == KindSocial {
			t.Channel = PaidSocial
		} else {
			t.Channel = PaidSearch
		}
		return t
	case emailMediums[medium]:
		t.Channel = Email
		return t
	case socialMediums[medium]:
		t.Channel = OrganicSocial
		return t
	case searchMediums[medium]:
		t.Channel = OrganicSearch
		return t
	case aiMediums[medium]:
		t.Channel = AIAssistant
		return t
	case referralMediums[medium]:
		t.Channel = Referral
		return t
	}
	switch srcSite.Kind {
	case KindSearch:
		t.Channel = OrganicSearch
		return t
	case KindSocial:
		t.Channel = OrganicSocial
		return t
	}
	if utmSource != "" || t.Medium != "" || t.Campaign != "" || t.Term != "" || t.Content != "" {
		t.Channel = Campaign
		return t
	}
	switch {
	case in.RefHost == "":
		t.Channel = Direct
	case ref.Kind == KindAI:
		t.Channel = AIAssistant
	case ref.Kind == KindSearch:
		t.Channel = OrganicSearch
	case ref.Kind == KindSocial:
		t.Channel = OrganicSocial
	case sameSite(in.RefHost, in.PageHost):
		// Navigation inside the site that starts a new visit: no source.
		t.Channel, t.Source = Direct, ""
	default:
		t.Channel = Referral
	}
	return t
}

// match looks a referrer up in the lists through the cache.
func (c *Classifier) match(host, path string) Site {
	key := host + path
	c.mu.Lock()
	s, ok := c.cache[key]
	c.mu.Unlock()
	if ok {
		return s
	}
	s, _ = c.lists.Match(host, path)
	c.mu.Lock()
	if len(c.cache) >= maxCache {
		clear(c.cache)
	}
	c.cache[key] = s
	c.mu.Unlock()
	return s
}

// sameSite reports whether two hosts are one site: equal once a leading
// "www." is removed.
func sameSite(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return strings.TrimPrefix(a, "www.") == strings.TrimPrefix(b, "www.")
}

// query is a parsed list of kept query parameters.
type query []struct{ k, v string }

func parseQuery(raw string) query {
	if raw == "" {
		return nil
	}
	var q query
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		q = append(q, struct{ k, v string }{k, v})
	}
	return q
}

// get returns the first value of k, trimmed.
func (q query) get(k string) string {
	for _, p := range q {
		if p.k == k {
			return strings.TrimSpace(p.v)
		}
	}
	return ""
}

// has reports whether k is present (a consentless batch keeps a click id's
// name without its value).
func (q query) has(k string) bool {
	for _, p := range q {
		if p.k == k {
			return true
		}
	}
	return false
}
