package processor

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/processor/internal/facts"
)

// The readable view of a golden case's facts (want.json): refs are shown
// as labels ("a:<anonymousId>", "u:<userId>", "h:<visitor>"), visits as
// "<unit label>#<n>" (n counting the unit's visits by start), times in the
// project's time zone.

type viewTouch struct {
	Channel    string `json:"channel"`
	Source     string `json:"source,omitempty"`
	Medium     string `json:"medium,omitempty"`
	Campaign   string `json:"campaign,omitempty"`
	Landing    string `json:"landing,omitempty"`
	AdPlatform string `json:"adPlatform,omitempty"`
	At         string `json:"at,omitempty"`
}

type viewMoney struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

type viewVisit struct {
	Visit     string `json:"visit"`
	Person    string `json:"person,omitempty"`
	Session   bool   `json:"session,omitempty"`
	Start     string `json:"start"`
	End       string `json:"end"`
	Events    int32  `json:"events"`
	Pageviews int32  `json:"pageviews"`
	Consented bool   `json:"consented"`
	Channel   string `json:"channel"`
	Source    string `json:"source,omitempty"`
	Campaign  string `json:"campaign,omitempty"`
	Ad        string `json:"adPlatform,omitempty"`
	Landing   string `json:"landing,omitempty"`
	Exit      string `json:"exit,omitempty"`
}

type viewEvent struct {
	ID      string `json:"id"`
	Time    string `json:"time"`
	Name    string `json:"name"`
	Unit    string `json:"unit,omitempty"`
	Visit   string `json:"visit,omitempty"`
	Channel string `json:"channel,omitempty"`
	Actions string `json:"actions,omitempty"`
	Value   string `json:"value,omitempty"`
}

type viewPerson struct {
	Person        string      `json:"person"`
	Stage         string      `json:"stage"`
	Known         bool        `json:"known"`
	Name          *string     `json:"name"`
	Email         *string     `json:"email,omitempty"`
	FirstSeen     string      `json:"firstSeen"`
	LastSeen      string      `json:"lastSeen"`
	Visits        int64       `json:"visits"`
	ActiveDays    int64       `json:"activeDays"`
	Events        int64       `json:"events"`
	Pageviews     int64       `json:"pageviews"`
	Orders        int64       `json:"orders"`
	Revenue       []viewMoney `json:"revenue,omitempty"`
	FirstTouch    viewTouch   `json:"firstTouch"`
	LastTouch     viewTouch   `json:"lastTouch"`
	Country       string      `json:"country,omitempty"`
	Device        string      `json:"device,omitempty"`
	LastPath      string      `json:"lastPath,omitempty"`
	Traits        string      `json:"traits,omitempty"`
	Browsers      int64       `json:"browsers"`
	SharedBrowser bool        `json:"sharedBrowser,omitempty"`
	FirstPurchase string      `json:"firstPurchase,omitempty"`
	Intent        bool        `json:"intent,omitempty"`
}

type viewIdentity struct {
	Unit      string `json:"unit"`
	Person    string `json:"person"`
	ClaimedAt string `json:"claimedAt,omitempty"`
	Shared    bool   `json:"shared,omitempty"`
}

type viewGoal struct {
	Conversions int         `json:"conversions"`
	Consented   int         `json:"consented"`
	People      []string    `json:"people"`
	Revenue     []viewMoney `json:"revenue,omitempty"`
}

// goldenViewOf builds the readable view of an engine's facts.
func goldenViewOf(t testing.TB, c *goldenCase, e *facts.Engine) []byte {
	t.Helper()
	loc := e.Location()
	ts := func(ms int64) string {
		if ms == 0 {
			return ""
		}
		return time.UnixMilli(ms).In(loc).Format("2006-01-02T15:04:05.000Z07:00")
	}
	labels := map[facts.Ref]string{}
	for _, b := range c.batches {
		for _, ev := range b.Events {
			if ev.AnonymousID != "" {
				labels[facts.NodeRef(c.project.ID, facts.KindBrowser, ev.AnonymousID)] = "a:" + ev.AnonymousID
			}
			if ev.UserID != "" {
				labels[facts.NodeRef(c.project.ID, facts.KindUser, ev.UserID)] = "u:" + ev.UserID
			}
		}
		if len(b.Edge.VisitorHash) > 0 {
			labels[facts.VisitorRef(c.project.ID, b.Edge.VisitorHash)] = "h:" + string(bytes.TrimRight(b.Edge.VisitorHash, "\x00"))
		}
	}
	label := func(r facts.Ref) string {
		if r.IsZero() {
			return ""
		}
		if l, ok := labels[r]; ok {
			return l
		}
		t.Fatalf("no label for ref %s", r)
		return ""
	}
	all := e.All()

	// Visits, labelled by unit and order.
	var visits []facts.VisitRow
	for _, rows := range all.VisitDays {
		visits = append(visits, rows...)
	}
	slices.SortFunc(visits, func(a, b facts.VisitRow) int {
		return cmp.Or(strings.Compare(label(a.Unit), label(b.Unit)), cmp.Compare(a.Start, b.Start), slices.Compare(a.ID[:], b.ID[:]))
	})
	vlabel := map[facts.Ref]string{}
	count := map[string]int{}
	var vv []viewVisit
	channelVisits := map[string]int{}
	for _, v := range visits {
		u := label(v.Unit)
		if u == "" {
			u = "-"
		}
		count[u]++
		l := fmt.Sprintf("%s#%d", u, count[u])
		vlabel[v.ID] = l
		channelVisits[v.Touch.Channel]++
		vv = append(vv, viewVisit{Visit: l, Person: label(v.Person), Session: v.Session, Start: ts(v.Start), End: ts(v.End),
			Events: v.Events, Pageviews: v.Pageviews, Consented: v.Consented, Channel: v.Touch.Channel,
			Source: v.Touch.Source, Campaign: v.Touch.Campaign, Ad: v.Touch.AdPlatform, Landing: v.LandingPath, Exit: v.ExitPath})
	}

	// Events, by time.
	var events []facts.EventRow
	for _, rows := range all.EventDays {
		events = append(events, rows...)
	}
	slices.SortFunc(events, func(a, b facts.EventRow) int {
		ai, bi := a.ID(), b.ID()
		return cmp.Or(cmp.Compare(a.Time(), b.Time()), slices.Compare(ai[:], bi[:]))
	})
	var ve []viewEvent
	for _, row := range events {
		ev := row.Event()
		x := viewEvent{ID: ev.ID.String()[24:], Time: ts(ev.Time), Name: ev.Name, Unit: label(row.Unit), Channel: row.Channel, Actions: shortIDs(ev.Actions)}
		if !row.Visit.IsZero() {
			x.Visit = vlabel[row.Visit]
		}
		if ev.HasValue {
			x.Value = facts.FormatAmount(ev.Value) + " " + ev.ValueCurrency
		}
		ve = append(ve, x)
	}

	// People and identities.
	var people []viewPerson
	for _, rows := range all.People {
		for _, p := range rows {
			vp := viewPerson{Person: label(p.Ref), Stage: p.Stage, Known: p.Known, FirstSeen: ts(p.FirstSeen), LastSeen: ts(p.LastSeen),
				Visits: p.Visits, ActiveDays: p.ActiveDays, Events: p.Events, Pageviews: p.Pageviews, Orders: p.Orders,
				FirstTouch: touchView(p.FirstTouch, ts), LastTouch: touchView(p.LastTouch, ts), Country: p.Country, Device: p.Device,
				LastPath: p.LastPath, Traits: p.Traits, Browsers: p.Browsers, SharedBrowser: p.SharedBrowser,
				FirstPurchase: ts(p.FirstPurchase), Intent: p.Intent}
			if p.HasName {
				vp.Name = &p.Name
			}
			if p.HasEmail {
				vp.Email = &p.Email
			}
			for _, a := range p.Revenue {
				vp.Revenue = append(vp.Revenue, viewMoney{a.Currency, facts.FormatAmount(a.Micro)})
			}
			people = append(people, vp)
		}
	}
	slices.SortFunc(people, func(a, b viewPerson) int { return strings.Compare(a.Person, b.Person) })
	var ids []viewIdentity
	personOf := map[facts.Ref]facts.Ref{}
	for _, rows := range all.Identities {
		for _, r := range rows {
			personOf[r.Unit] = r.Person
			ids = append(ids, viewIdentity{Unit: label(r.Unit), Person: label(r.Person), ClaimedAt: ts(r.ClaimedAt), Shared: r.Shared})
		}
	}
	slices.SortFunc(ids, func(a, b viewIdentity) int { return strings.Compare(a.Unit, b.Unit) })

	// Goals: conversions and people by action name.
	names := map[string]string{}
	for _, a := range c.project.Actions {
		names[a.ID] = a.Name
	}
	goals := map[string]*viewGoal{}
	for _, rows := range all.ConversionDays {
		for _, r := range rows {
			g := goals[names[r.Action]]
			if g == nil {
				g = &viewGoal{People: []string{}}
				goals[names[r.Action]] = g
			}
			g.Conversions++
			if r.Consented {
				g.Consented++
			}
			if !r.Owner.IsZero() {
				owner := r.Owner
				if p, ok := personOf[owner]; ok {
					owner = p
				}
				if p := label(owner); !slices.Contains(g.People, p) {
					g.People = append(g.People, p)
				}
			}
			if r.HasValue {
				addMoney(&g.Revenue, r.Currency, r.Value)
			}
		}
	}
	for _, g := range goals {
		slices.Sort(g.People)
	}

	// Segments.
	segs := map[string][]string{}
	for _, rows := range all.Members {
		for _, m := range rows {
			segs[m.Segment] = append(segs[m.Segment], label(m.Person))
		}
	}
	for _, s := range segs {
		slices.Sort(s)
	}

	var b bytes.Buffer
	b.WriteString("{\n")
	writeList(&b, "visits", vv)
	writeList(&b, "events", ve)
	writeList(&b, "people", people)
	writeList(&b, "identities", ids)
	writeMap(&b, "channelVisits", channelVisits)
	writeMap(&b, "goals", goals)
	writeMap(&b, "segments", segs)
	st := e.Stats()
	fmt.Fprintf(&b, " \"stats\": {\"events\": %d, \"duplicates\": %d, \"replaced\": %d}\n}\n", st.Events, st.Duplicates, st.Replaced)
	return b.Bytes()
}

func shortIDs(ids string) string {
	if ids == "" {
		return ""
	}
	var out []string
	for id := range strings.SplitSeq(ids, ",") {
		out = append(out, id[len(id)-4:])
	}
	return strings.Join(out, ",")
}

func touchView(t facts.Touch, ts func(int64) string) viewTouch {
	return viewTouch{Channel: t.Channel, Source: t.Source, Medium: t.Medium, Campaign: t.Campaign, Landing: t.Landing, AdPlatform: t.AdPlatform, At: ts(t.At)}
}

func addMoney(m *[]viewMoney, cur string, micro int64) {
	var mm facts.Money
	for _, a := range *m {
		v, _ := facts.ParseAmount(a.Amount)
		mm.Add(a.Currency, v)
	}
	mm.Add(cur, micro)
	*m = (*m)[:0]
	for _, a := range mm {
		*m = append(*m, viewMoney{a.Currency, facts.FormatAmount(a.Micro)})
	}
}

// writeList writes a list with one compact element per line.
func writeList[T any](b *bytes.Buffer, key string, items []T) {
	fmt.Fprintf(b, " %q: [", key)
	for i, it := range items {
		j, _ := json.Marshal(it)
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  ")
		b.Write(j)
	}
	if len(items) > 0 {
		b.WriteString("\n ")
	}
	b.WriteString("],\n")
}

func writeMap[V any](b *bytes.Buffer, key string, m map[string]V) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(b, " %q: {", key)
	for i, k := range keys {
		j, _ := json.Marshal(m[k])
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(b, "\n  %q: %s", k, j)
	}
	if len(keys) > 0 {
		b.WriteString("\n ")
	}
	b.WriteString("},\n")
}
