package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Event names the traffic sends; every one has a goal in the soak's
// provisioning (provision.go) so the reporting API can count it.
const (
	evPageview   = "$pageview"
	evIdentify   = "$identify"
	evCart       = "cart_added"
	evOrder      = "order_completed"
	evNewsletter = "newsletter_signup"
)

// eventNames lists them in a fixed order (indices of Counts).
var eventNames = [...]string{evPageview, evIdentify, evCart, evOrder, evNewsletter}

// Counts are events per name, indexed like eventNames.
type Counts [len(eventNames)]int64

// Total is the sum of c.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// browser is one visitor's browser in the pool: its ids, its visit in
// progress and how long it stays.
type browser struct {
	anon       string
	user       string // userId once signed in
	willSignIn bool
	session    string // the visit's sessionId
	pagesLeft  int    // pageviews left in the visit (0: no visit open)
	visitsLeft int    // visits before the browser leaves for good
	cart       bool   // added to the cart in this visit
	lastURL    string
	lastMs     int64 // time of its last event sent
}

// Traffic generates the batches of one sender: its share of the pool of
// browsers, each behaving as a visitor does: visits of a few pageviews
// (the first with a referrer and often campaign tags), some carts, orders
// and newsletter sign-ups, one browser in ten signing in (people have
// several browsers), visits that end (a new sessionId starts the next),
// and browsers that leave after a few visits, replaced by new ones. Each
// batch holds the next events of one browser, chosen at random, as a
// browser client sends them: its ids on every event, its page context
// (when a visit ends within a batch, the next one starts in it).
// Not safe for concurrent use: each sender has its own.
type Traffic struct {
	rng      *rand.Rand
	sender   uint64
	seed     uint64
	people   int // user ids are drawn from 0..people-1
	pool     []browser
	serial   uint64 // for ids
	perBatch int
}

// NewTraffic builds sender's share of browsers (at least 1) with batches
// of perBatch events; people is the number of distinct user ids of the
// whole pool.
func NewTraffic(seed, sender uint64, browsers, people, perBatch int) *Traffic {
	t := &Traffic{rng: rand.New(rand.NewPCG(seed, sender)), seed: seed, sender: sender,
		people: max(people, 1), perBatch: perBatch, pool: make([]browser, max(browsers, 1))}
	for i := range t.pool {
		t.pool[i] = t.newBrowser()
	}
	return t
}

// id is a fresh v4-shaped UUID, unique per seed, sender and serial.
func (t *Traffic) id() string {
	t.serial++
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(t.seed), uint16(t.sender), (t.sender>>16)&0xfff, (t.seed>>32)&0xfff, t.serial)
}

func (t *Traffic) newBrowser() browser {
	return browser{anon: t.id(), willSignIn: t.rng.IntN(10) == 0, visitsLeft: 1 + geometric(t.rng, 0.45)}
}

// geometric draws the number of failures before a success of chance p.
func geometric(rng *rand.Rand, p float64) int {
	n := 0
	for rng.Float64() >= p && n < 50 {
		n++
	}
	return n
}

var (
	referrers = []string{"", "", "", "https://www.google.com/", "https://duckduckgo.com/", "https://news.ycombinator.com/",
		"https://www.facebook.com/", "https://chatgpt.com/", "https://blog.example/post"}
	campaigns = []string{"", "", "", "", "?utm_source=newsletter&utm_medium=email&utm_campaign=spring", "?gclid=soak123",
		"?utm_source=linkedin&utm_medium=paid_social", "?fbclid=soak", "?utm_campaign=launch"}
	screens = [][2]int{{1920, 1080}, {1440, 900}, {390, 844}, {412, 915}, {1280, 800}}
	locales = []string{"de-DE", "en-US", "en-GB", "fr-FR"}
)

func (t *Traffic) page() (url, title string) {
	switch r := t.rng.IntN(20); {
	case r == 0:
		return "https://shop.example/pricing", "Pricing"
	case r < 3:
		return "https://shop.example/", "Shop"
	case r < 5:
		n := t.rng.IntN(50)
		return "https://shop.example/blog/post-" + strconv.Itoa(n), "Post " + strconv.Itoa(n)
	default:
		n := t.rng.IntN(300)
		return "https://shop.example/products/item-" + strconv.Itoa(n), "Item " + strconv.Itoa(n)
	}
}

// Batch returns the body of the next batch, sent at now, and the events
// of each name it holds.
func (t *Traffic) Batch(now time.Time) ([]byte, Counts) {
	b := &t.pool[t.rng.IntN(len(t.pool))]
	var c Counts
	n := t.perBatch
	times := make([]int64, n)
	at := now.UnixMilli()
	for i := n - 1; i >= 0; i-- {
		times[i] = at
		at -= int64(500 + t.rng.IntN(3500))
	}
	// A browser's events happen in order: a batch never holds an event
	// older than one of its batch before (when the browser is picked again
	// within the span of a batch, its times are pushed after the last).
	last := b.lastMs
	for i := range times {
		times[i] = max(times[i], last+1)
		last = times[i]
	}
	buf := make([]byte, 0, 256+n*330)
	buf = append(buf, `{"v":1,"batch":"`...)
	buf = append(buf, t.id()...)
	buf = append(buf, `","mode":"full","sentAt":`...)
	buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
	sc := screens[t.rng.IntN(len(screens))]
	buf = fmt.Appendf(buf, `,"context":{"sdk":"mf-browser/soak","locale":%q,"timezone":"Europe/Berlin","screen":[%d,%d]},"events":[`,
		locales[t.rng.IntN(len(locales))], sc[0], sc[1])
	for i := 0; i < n; i++ {
		if i > 0 {
			buf = append(buf, ',')
		}
		var k int
		buf, k = t.event(buf, b, times[i], i == 0)
		c[k]++
	}
	buf = append(buf, "]}"...)
	b.lastMs = last // after the events: a browser that left was replaced in the first
	return buf, c
}

// event appends b's next event at time ms and returns the index of its
// name; first is true for the first event of a batch.
func (t *Traffic) event(buf []byte, b *browser, ms int64, first bool) ([]byte, int) {
	if b.pagesLeft == 0 { // the visit ended: the next one, or a new browser
		if b.session != "" {
			b.visitsLeft--
			// A browser that is done leaves between batches: within one,
			// it makes one more visit.
			if b.visitsLeft <= 0 && first {
				*b = t.newBrowser()
			}
		}
		b.session, b.pagesLeft, b.cart, b.lastURL = t.id(), 1+geometric(t.rng, 0.25), false, ""
	}
	name := evPageview
	if b.lastURL != "" { // not the landing pageview: sometimes something else
		switch r := t.rng.IntN(100); {
		case b.willSignIn && b.user == "" && r < 15:
			name = evIdentify
		case r < 25:
			name = evCart
		case r < 30 && b.cart:
			name = evOrder
		case r < 32:
			name = evNewsletter
		}
	}
	if name == evIdentify {
		b.user = "user-" + strconv.Itoa(t.rng.IntN(t.people))
	}
	buf = append(buf, `{"name":"`...)
	buf = append(buf, name...)
	buf = append(buf, `","id":"`...)
	buf = append(buf, t.id()...)
	buf = append(buf, `","time":`...)
	buf = strconv.AppendInt(buf, ms, 10)
	buf = append(buf, `,"anonymousId":"`...)
	buf = append(buf, b.anon...)
	buf = append(buf, `","sessionId":"`...)
	buf = append(buf, b.session...)
	buf = append(buf, '"')
	if b.user != "" {
		buf = append(buf, `,"userId":"`...)
		buf = append(buf, b.user...)
		buf = append(buf, '"')
	}
	switch name {
	case evPageview:
		url, title := t.page()
		ref := b.lastURL
		if ref == "" {
			ref = referrers[t.rng.IntN(len(referrers))]
			url += campaigns[t.rng.IntN(len(campaigns))]
		}
		buf = fmt.Appendf(buf, `,"page":{"url":%q,"title":%q`, url, title)
		if ref != "" {
			buf = fmt.Appendf(buf, `,"referrer":%q`, ref)
		}
		buf = append(buf, '}')
		b.lastURL = url
		b.pagesLeft--
	case evIdentify:
		buf = fmt.Appendf(buf, `,"properties":{"name":"Person %s","email":"%s@example.com","plan":%q}`,
			b.user, b.user, []string{"free", "pro"}[t.rng.IntN(2)])
	case evCart:
		buf = fmt.Appendf(buf, `,"properties":{"sku":"SKU-%05d","price":%d.99,"quantity":%d}`,
			t.rng.IntN(300), 5+t.rng.IntN(200), 1+t.rng.IntN(3))
		b.cart = true
	case evOrder:
		buf = fmt.Appendf(buf, `,"properties":{"total":%d.5,"currency":"EUR","items":%d}`, 10+t.rng.IntN(400), 1+t.rng.IntN(4))
		b.cart = false
	case evNewsletter:
		buf = append(buf, `,"properties":{"list":"weekly"}`...)
	}
	if name != evPageview {
		buf = fmt.Appendf(buf, `,"page":{"url":%q}`, b.lastURL)
	}
	buf = append(buf, '}')
	k := 0
	for i, n := range eventNames {
		if n == name {
			k = i
		}
	}
	return buf, k
}
