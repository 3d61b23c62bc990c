package main

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// GenConfig says what dataset to generate. Everything but End and Loc is
// part of the committed, seeded shape; End is the moment the 90 days end
// (now), so the same seed gives the same traffic relative to its last day.
type GenConfig struct {
	// Seed makes the dataset: the same seed and sizes give the same batches.
	Seed uint64
	// People is the number of people (each one browser, or two for some
	// who sign in on both); Events the number of events aimed at (the
	// generator calibrates visit lengths to land within about 1% of it).
	People, Events int
	// Days is the span of the traffic, ending on End's day (inclusive).
	Days int
	// End is the last moment of traffic (events stop a few minutes before).
	End time.Time
	// Loc is the project's time zone: days start at its midnight.
	Loc *time.Location
	// Project and Source are the catalog ids the batches carry.
	Project, Source string
}

// Validate reports a configuration that cannot generate.
func (c GenConfig) Validate() error {
	switch {
	case c.People < 1:
		return errors.New("generator: People must be at least 1")
	case c.Events < c.People:
		return errors.New("generator: Events must be at least People")
	case c.Days < 1:
		return errors.New("generator: Days must be at least 1")
	case c.Loc == nil:
		return errors.New("generator: Loc is required")
	case c.End.IsZero():
		return errors.New("generator: End is required")
	case c.Project == "" || c.Source == "":
		return errors.New("generator: Project and Source are required")
	}
	return nil
}

// Start is the first moment of traffic: midnight Days-1 days before End's
// day, in Loc.
func (c GenConfig) Start() time.Time {
	e := c.End.In(c.Loc)
	return time.Date(e.Year(), e.Month(), e.Day()-(c.Days-1), 0, 0, 0, 0, c.Loc)
}

// The nine visit channels, as the processor classifies the landing pages
// the generator makes (docs/processor.md; processor/internal/channels).
var channelNames = []string{"paid_search", "paid_social", "email", "ai_assistant", "organic_search",
	"organic_social", "campaign", "referral", "direct"}

// Channel shares of first visits and of return visits (per mille).
var (
	firstVisitMix  = []int{120, 60, 30, 30, 330, 90, 40, 80, 220}
	returnVisitMix = []int{60, 20, 140, 20, 200, 50, 30, 30, 450}
)

// Generated events besides pageviews.
const (
	evPageview = "$pageview"
	evIdentify = "$identify"
	evSignup   = "newsletter_signup"
	evCart     = "cart_added"
	evCheckout = "checkout_started"
	evOrder    = "order_completed"
	pricing    = "/pricing"
	siteHost   = "shop.example"
)

// Truth is what the generator knows about its own traffic, to check the
// tables against (tests) and to size the dataset (reports).
type Truth struct {
	Events, Pageviews, Batches, Visits, People, Orders int
	// RevenueMicro is the revenue of the orders per currency, micro-units.
	RevenueMicro map[string]int64
	// Window figures are for [WindowFrom, WindowTo) when it was set.
	WindowFrom, WindowTo int64
	// WindowPeople: people with an event in the window; WindowNew: of them
	// first seen in it; WindowKnown: of them signed in at some time (so far);
	// WindowBuyers: people with an order in it; WindowRevenue per currency.
	WindowPeople, WindowNew, WindowKnown, WindowBuyers int
	WindowRevenue                                      map[string]int64
	// WindowVisits counts visits starting in the window per channel.
	WindowVisits map[string]int
}

// visitPlan is one scheduled visit: when it starts, whose, which.
type visitPlan struct {
	start int64
	human int32
	index uint8
}

// Generator makes the dataset's batches in the order they are received.
type Generator struct {
	cfg      GenConfig
	paths    []string
	titles   []string
	visits   []visitPlan
	meanView float64 // m of the pageviews per visit: 1 + floor(m·Exp(1))
	start    int64
	end      int64
}

// humanRand is the random source of person h (their browsers, visits,
// sign-in); visitRand the source of one of their visits. Both depend on the
// seed and the indexes only, so visits can be made in any order.
func (g *Generator) humanRand(h int32) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed, uint64(h)))
}

func (g *Generator) visitRand(h int32, i uint8) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed^0x5bd1e995c0ffee, uint64(h)<<8|uint64(i)))
}

// human is the stable shape of one person.
type human struct {
	visits   int
	signIn   int // the visit they first sign in on; -1 never
	browsers int // 1, or 2 (the second one signs in on its first visit)
	anon     [2]string
	edge     [2]records.Edge
	user     string
	firstAt  int64
}

var edges = []records.Edge{
	{Country: "DE", Region: "DE-BE", Device: "desktop", Browser: "Firefox", OS: "Linux"},
	{Country: "DE", Region: "DE-BY", Device: "desktop", Browser: "Chrome", OS: "Windows"},
	{Country: "DE", Region: "DE-NW", Device: "mobile", Browser: "Safari", OS: "iOS"},
	{Country: "DE", Region: "DE-HH", Device: "mobile", Browser: "Chrome", OS: "Android"},
	{Country: "AT", Region: "AT-9", Device: "desktop", Browser: "Edge", OS: "Windows"},
	{Country: "CH", Region: "CH-ZH", Device: "mobile", Browser: "Safari", OS: "iOS"},
	{Country: "FR", Region: "FR-IDF", Device: "desktop", Browser: "Chrome", OS: "macOS"},
	{Country: "NL", Region: "NL-NH", Device: "tablet", Browser: "Safari", OS: "iPadOS"},
	{Country: "US", Region: "US-CA", Device: "mobile", Browser: "Chrome", OS: "Android"},
	{Country: "GB", Region: "GB-ENG", Device: "desktop", Browser: "Safari", OS: "macOS"},
}

func (g *Generator) human(h int32) human {
	r := g.humanRand(h)
	x := human{signIn: -1, browsers: 1}
	x.firstAt = g.start + r.Int64N(g.end-g.start)
	x.visits = 1 + int(math.Floor(r.ExpFloat64()*1.6))
	x.anon[0] = fmt.Sprintf("%016x", r.Uint64())
	x.anon[1] = fmt.Sprintf("%016x", r.Uint64())
	x.edge[0] = edges[r.IntN(len(edges))]
	x.edge[1] = edges[2+r.IntN(2)] // a phone
	// About one in five sign in.
	if r.IntN(5) == 0 {
		x.user = fmt.Sprintf("u%07d", h)
		x.signIn = min(x.visits-1, int(math.Floor(r.ExpFloat64()*0.8)))
		if r.IntN(7) == 0 {
			x.browsers = 2
		}
	}
	return x
}

// browserOf is the browser visit i of x is made on: the second browser
// takes every other visit after the sign-in.
func (x *human) browserOf(i int) int {
	if x.browsers == 2 && x.signIn >= 0 && i > x.signIn && (i-x.signIn)%2 == 1 {
		return 1
	}
	return 0
}

// visitGap is the time between a person's visits: at least two hours,
// about five days on average.
func visitGap(r *rand.Rand) int64 {
	return 2*3_600_000 + int64(r.ExpFloat64()*5*86_400_000)
}

// hourWeight shapes the time of day (project time): quiet nights, busy
// evenings.
var hourWeight = []int{2, 1, 1, 1, 1, 2, 3, 5, 7, 8, 8, 8, 9, 8, 8, 8, 8, 9, 10, 11, 11, 9, 6, 4}

// NewGenerator schedules every visit (start times only) and calibrates the
// visit lengths so that the events land near cfg.Events.
func NewGenerator(cfg GenConfig) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, start: cfg.Start().UnixMilli(), end: cfg.End.Add(-5 * time.Minute).UnixMilli()}
	if g.end <= g.start {
		return nil, errors.New("generator: End is less than five minutes after the first day starts")
	}
	sections := []string{"products", "products", "products", "blog", "help", "collections", "about", "shop"}
	g.paths = append(g.paths, "/")
	g.titles = append(g.titles, "Shop: home")
	for i := 1; i < 400; i++ {
		s := sections[i%len(sections)]
		g.paths = append(g.paths, fmt.Sprintf("/%s/item-%d", s, i))
		g.titles = append(g.titles, fmt.Sprintf("%s item %d | Shop", s, i))
	}
	g.paths[7], g.titles[7] = pricing, "Pricing | Shop"
	g.visits = make([]visitPlan, 0, cfg.People*2)
	for h := range int32(cfg.People) {
		x := g.human(h)
		r := g.humanRand(h)
		r.Uint64() // apart from the fields human() drew
		at := shapeTime(r, x.firstAt, g.start, g.cfg.Loc)
		for i := 0; i < x.visits && i < 250 && at < g.end; i++ {
			g.visits = append(g.visits, visitPlan{start: at, human: h, index: uint8(i)})
			at += visitGap(r)
		}
	}
	slices.SortFunc(g.visits, func(a, b visitPlan) int {
		if a.start != b.start {
			return cmpInt(a.start, b.start)
		}
		if a.human != b.human {
			return cmpInt(a.human, b.human)
		}
		return cmpInt(a.index, b.index)
	})
	// Events per visit: pageviews 1 + floor(m·E) (mean 1 + 1/(e^(1/m) − 1)),
	// plus about 0.2 other events (cart, checkout, order, sign-up, identify).
	perVisit := float64(cfg.Events)/float64(len(g.visits)) - 0.2
	if perVisit < 1.05 {
		perVisit = 1.05
	}
	g.meanView = 1 / math.Log(1+1/(perVisit-1))
	return g, nil
}

func cmpInt[T int64 | int32 | uint8](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// shapeTime moves t to an hour of the same local day drawn by hourWeight
// (keeping it at or after start).
func shapeTime(r *rand.Rand, t, start int64, loc *time.Location) int64 {
	lt := time.UnixMilli(t).In(loc)
	total := 0
	for _, w := range hourWeight {
		total += w
	}
	n := r.IntN(total)
	hour := 0
	for hour = range hourWeight {
		if n < hourWeight[hour] {
			break
		}
		n -= hourWeight[hour]
	}
	day := time.Date(lt.Year(), lt.Month(), lt.Day(), hour, 0, 0, 0, loc)
	out := day.UnixMilli() + r.Int64N(3_600_000)
	return max(out, start)
}

// Visits is the number of scheduled visits.
func (g *Generator) Visits() int { return len(g.visits) }

// pendingHeap holds the batches waiting for their receipt time.
type pendingHeap []*records.Batch

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	if h[i].ReceivedAt != h[j].ReceivedAt {
		return h[i].ReceivedAt < h[j].ReceivedAt
	}
	return string(h[i].ID[:]) < string(h[j].ID[:])
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(*records.Batch)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Run makes every batch and hands them to emit in the order received
// (ReceivedAt ascending). truth, when not nil, is filled in; its window
// figures need WindowFrom and WindowTo set.
func (g *Generator) Run(emit func(*records.Batch) error, truth *Truth) error {
	var q pendingHeap
	t := truth
	if t == nil {
		t = &Truth{}
	}
	t.RevenueMicro, t.WindowRevenue, t.WindowVisits = map[string]int64{}, map[string]int64{}, map[string]int{}
	// Per person: first event, whether active / buying in the window.
	first := make([]int64, g.cfg.People)
	for i := range first {
		first[i] = math.MaxInt64
	}
	const (
		flagActive = 1 << iota
		flagBuyer
		flagKnown
	)
	flags := make([]uint8, g.cfg.People)
	inWindow := func(ms int64) bool { return ms >= t.WindowFrom && ms < t.WindowTo }
	var cache struct {
		h int32
		x human
	}
	cache.h = -1
	for _, v := range g.visits {
		for q.Len() > 0 && q[0].ReceivedAt <= v.start {
			if err := emit(heap.Pop(&q).(*records.Batch)); err != nil {
				return err
			}
		}
		if cache.h != v.human {
			cache.h, cache.x = v.human, g.human(v.human)
		}
		bs := g.visit(&cache.x, v)
		t.Visits++
		if inWindow(v.start) {
			t.WindowVisits[bs[0].Events[0].Page.URL.Port]++
		}
		for _, b := range bs {
			for i := range b.Events {
				e := &b.Events[i]
				if e.Page.URL.Port != "" { // the channel tag rides in Port until here
					e.Page.URL.Port = ""
				}
				t.Events++
				first[v.human] = min(first[v.human], e.Time)
				if inWindow(e.Time) {
					flags[v.human] |= flagActive
				}
				switch e.Name {
				case evPageview:
					t.Pageviews++
				case evIdentify:
					flags[v.human] |= flagKnown
				case evOrder:
					micro := parseMicro(e.Revenue)
					t.Orders++
					t.RevenueMicro[e.Currency] += micro
					if inWindow(e.Time) {
						flags[v.human] |= flagBuyer
						t.WindowRevenue[e.Currency] += micro
					}
				}
			}
			heap.Push(&q, b)
		}
	}
	for q.Len() > 0 {
		if err := emit(heap.Pop(&q).(*records.Batch)); err != nil {
			return err
		}
	}
	for h := range flags {
		if first[h] != math.MaxInt64 {
			t.People++
		}
		if flags[h]&flagActive != 0 {
			t.WindowPeople++
			if first[h] >= t.WindowFrom {
				t.WindowNew++
			}
			if flags[h]&flagKnown != 0 {
				t.WindowKnown++
			}
		}
		if flags[h]&flagBuyer != 0 {
			t.WindowBuyers++
		}
	}
	return nil
}

// parseMicro reads a decimal amount with at most two decimals into
// micro-units.
func parseMicro(s string) int64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return int64(math.Round(f*100)) * 10_000
}

// landing is where a visit of a channel arrives from.
func landing(r *rand.Rand, channel string) (query string, ref records.URL) {
	https := func(host, path string) records.URL { return records.URL{Scheme: "https", Host: host, Path: path} }
	switch channel {
	case "paid_search":
		return fmt.Sprintf("utm_source=google&utm_medium=cpc&utm_campaign=brand&gclid=Cj0KCQ%08x", r.Uint32()), https("www.google.com", "/")
	case "paid_social":
		return fmt.Sprintf("utm_campaign=summer-sale&fbclid=IwAR%08x", r.Uint32()), https("l.facebook.com", "/")
	case "email":
		return "utm_source=newsletter&utm_medium=email&utm_campaign=weekly-" + strconv.Itoa(r.IntN(12)), records.URL{}
	case "ai_assistant":
		return "", https("claude.ai", "/")
	case "organic_search":
		return "", []records.URL{https("www.google.com", "/"), https("www.google.com", "/"), https("duckduckgo.com", "/"), https("www.bing.com", "/")}[r.IntN(4)]
	case "organic_social":
		return "", []records.URL{https("l.facebook.com", "/"), https("t.co", "/x"), https("www.linkedin.com", "/feed")}[r.IntN(3)]
	case "campaign":
		return "utm_source=partnerx&utm_campaign=spring-" + strconv.Itoa(r.IntN(4)), records.URL{}
	case "referral":
		return "", []records.URL{https("news.example.org", "/story"), https("blog.example.net", "/post"), https("forum.example.com", "/t/42")}[r.IntN(3)]
	}
	return "", records.URL{}
}

func pick(r *rand.Rand, mix []int) int {
	n := r.IntN(1000)
	for i, w := range mix {
		if n < w {
			return i
		}
		n -= w
	}
	return len(mix) - 1
}

// randomID is a random version-4 UUID, as browsers make them.
func randomID(r *rand.Rand) records.UUID {
	var u records.UUID
	x, y := r.Uint64(), r.Uint64()
	for i := range 8 {
		u[i] = byte(x >> (8 * i))
		u[8+i] = byte(y >> (8 * i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// visit makes the batches of one visit: one per visit (an SDK queueing
// until the page is hidden), split after 8 events. The first event's page
// carries the channel name in URL.Port for Run's truth; Run clears it
// before the batches go out.
func (g *Generator) visit(x *human, v visitPlan) []*records.Batch {
	r := g.visitRand(v.human, v.index)
	i := int(v.index)
	br := x.browserOf(i)
	mix := firstVisitMix
	if i > 0 {
		mix = returnVisitMix
	}
	channel := channelNames[pick(r, mix)]
	query, ref := landing(r, channel)
	views := 1 + int(math.Floor(r.ExpFloat64()*g.meanView))
	user := ""
	identify := -1 // the pageview after which $identify is sent
	if x.signIn >= 0 && i >= x.signIn {
		user = x.user
		firstOnBrowser := i == x.signIn || (br == 1 && i == x.signIn+1)
		if firstOnBrowser {
			identify = r.IntN(views)
		}
	}
	wantPricing := r.IntN(100) < 12
	pricingAt := -1
	if wantPricing {
		pricingAt = r.IntN(views)
	}
	cartP := 6
	if wantPricing {
		cartP = 25
	}
	cart := r.IntN(100) < cartP
	checkout := cart && r.IntN(100) < 55
	order := checkout && r.IntN(100) < 60
	signup := r.IntN(100) < 2
	session := randomID(r)
	at := v.start
	var events []records.Event
	add := func(name string, path, title string, props []byte) *records.Event {
		events = append(events, records.Event{ID: randomID(r), Name: name, Time: at,
			Page:        records.Page{URL: records.URL{Scheme: "https", Host: siteHost, Path: path}, Title: title},
			AnonymousID: x.anon[br], SessionID: session, Properties: props})
		at += 15_000 + r.Int64N(165_000)
		return &events[len(events)-1]
	}
	known := user != "" && identify < 0
	prev := ""
	for p := range views {
		k := int(zipfIndex(r, len(g.paths)))
		if p == pricingAt {
			k = 7
		} else if k == 7 {
			k = 8
		}
		e := add(evPageview, g.paths[k], g.titles[k], nil)
		if p == 0 {
			e.Page.URL.Query = query
			e.Page.Referrer = ref
			e.Page.URL.Port = channel // truth tag, cleared by Run
		} else {
			e.Page.Referrer = records.URL{Scheme: "https", Host: siteHost, Path: prev}
		}
		prev = e.Page.URL.Path
		if known {
			e.UserID = user
		}
		if p == identify {
			traits, _ := json.Marshal(map[string]any{"name": "Customer " + x.user[1:], "email": x.user + "@mail.example", "plan": []string{"basic", "plus"}[r.IntN(2)]})
			e := add(evIdentify, prev, "", traits)
			e.UserID = user
			known = true
		}
		if p == views-1 {
			if signup {
				e := add(evSignup, prev, "", []byte(`{"list":"weekly"}`))
				if known {
					e.UserID = user
				}
			}
			if cart {
				price := 5 + r.IntN(120)
				e := add(evCart, prev, "", fmt.Appendf(nil, `{"sku":"SKU-%d","price":%d}`, r.IntN(500), price))
				if known {
					e.UserID = user
				}
			}
			if checkout {
				e := add(evCheckout, "/checkout", "Checkout | Shop", nil)
				if known {
					e.UserID = user
				}
			}
			if order {
				cents := 990 + r.IntN(29_000)
				cur := "EUR"
				if r.IntN(20) == 0 {
					cur = "USD"
				}
				amount := fmt.Sprintf("%d.%02d", cents/100, cents%100)
				e := add(evOrder, "/checkout/done", "Thank you | Shop",
					fmt.Appendf(nil, `{"total":%s,"revenue":%s,"currency":%q,"items":%d}`, amount, amount, cur, 1+r.IntN(4)))
				e.Revenue, e.Currency = amount, cur
				if known {
					e.UserID = user
				}
			}
		}
	}
	// Nothing after End: a visit that starts just before it is cut there
	// (ingest would move a future time to the time received).
	for len(events) > 0 && events[len(events)-1].Time >= g.cfg.End.UnixMilli()-60_000 {
		events = events[:len(events)-1]
	}
	var out []*records.Batch
	for len(events) > 0 {
		n := min(len(events), 8)
		b := &records.Batch{Project: g.cfg.Project, Source: g.cfg.Source, SourceKind: records.SourceWebsite,
			Mode: records.ModeFull, ID: randomID(r), SentAt: -1, Edge: x.edge[br],
			Context: records.Context{SDK: "mf-js/1.4.2", Locale: "de-DE", Timezone: "Europe/Berlin",
				HasScreen: true, ScreenWidth: 1440, ScreenHeight: 900}}
		b.Events = events[:n:n]
		b.ReceivedAt = b.Events[n-1].Time + 200 + r.Int64N(2800)
		b.Receipt = records.Receipt{Batch: b.ID.String(), Accepted: n}
		out = append(out, b)
		events = events[n:]
	}
	return out
}

// zipfIndex picks a page: popular pages far more often (an approximate
// Zipf of exponent 1.1 over n pages, by inverse transform of its
// continuous form).
func zipfIndex(r *rand.Rand, n int) int {
	// P(k) ∝ 1/(k+1)^1.1; continuous inverse of the tail.
	const s = 1.1
	u := r.Float64()
	hn := (1 - math.Pow(float64(n+1), 1-s)) / (s - 1)
	x := math.Pow(1-u*hn*(s-1), 1/(1-s)) - 1
	k := int(x)
	if k < 0 {
		k = 0
	}
	if k >= n {
		k = n - 1
	}
	return k
}
