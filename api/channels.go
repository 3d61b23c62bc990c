package api

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The channels report (GET /projects/{id}/acquisition/channels): visits
// per channel, and the people of the period credited to the channel of
// their first or last touch (docs/reporting-api.md, "Acquisition").

// channelNone is the channel of people without any visit.
const channelNone = "none"

// channelIDs are the listed channels, in order: the nine visit channels,
// then none.
var channelIDs = append(append([]string(nil), Channels...), channelNone)

// channelIndex is the position of a person's touch channel in channelIDs:
// none for "" (no visit), direct for a channel this build does not know.
func channelIndex(ch string) uint8 {
	if ch == "" {
		ch = channelNone
	}
	for i, id := range channelIDs {
		if id == ch {
			return uint8(i)
		}
	}
	return channelIndex("direct")
}

// channelCounts are the numbers of one channel (or of all).
type channelCounts struct {
	visits, people, newPeople, buyers, customers int
}

func (n channelCounts) conversion() any {
	if n.people == 0 {
		return nil
	}
	return float64(n.customers) / float64(n.people)
}

// channelReport is the computed report.
type channelReport struct {
	byChannel map[string]*channelCounts
	all       channelCounts
	pageviews int64
	consented int64 // pageviews of consented visits
}

// computeChannels counts the visits starting in w that the filters
// choose, and the people: without filters everyone active in w (an event
// in it), with filters the people of the chosen visits. Each person counts
// once, in the channel of their first or last touch.
func computeChannels(ctx context.Context, d *projectData, w Window, touch string, filters []Filter) (*channelReport, error) {
	rep := &channelReport{byChannel: map[string]*channelCounts{}}
	for _, ch := range channelIDs {
		rep.byChannel[ch] = &channelCounts{}
	}
	chosen, err := d.chosenVisits(ctx, w, filters)
	if err != nil {
		return nil, err
	}
	n := len(d.People)
	var people bitset
	if chosen == nil {
		if people, err = d.ActiveIn(ctx, w.From, w.To); err != nil {
			return nil, err
		}
	} else {
		people = newBitset(n)
	}
	if chosen == nil {
		// Every visit, people from the activity index: the day
		// partitions' totals.
		var visits int
		visits, rep.pageviews, rep.consented, err = d.visitTotals(ctx, w.From, w.To, func(ch string, n int) {
			if rep.byChannel[ch] == nil {
				ch = "direct" // a channel this build does not know
			}
			rep.byChannel[ch].visits += n
		})
		rep.all.visits += visits
	} else {
		err = d.eachChosenVisit(ctx, w, chosen, rep, people)
	}
	if err != nil {
		return nil, err
	}
	return rep.finish(ctx, d, w, touch, people)
}

// eachChosenVisit counts the chosen visits of w into rep, and their
// people into people.
func (d *projectData) eachChosenVisit(ctx context.Context, w Window, chosen *visitChoice, rep *channelReport, people bitset) error {
	return d.eachVisit(ctx, w.From, w.To, func(k vpos, v *visitRow) {
		if !chosen.has(k) {
			return
		}
		ch := v.Channel
		if rep.byChannel[ch] == nil {
			ch = "direct" // a channel this build does not know
		}
		rep.byChannel[ch].visits++
		rep.all.visits++
		rep.pageviews += int64(v.Pageviews)
		if v.Consented {
			rep.consented += int64(v.Pageviews)
		}
		if v.Person >= 0 {
			people.add(v.Person)
		}
	})
}

// finish counts people into rep: each of people once, in the channel of
// their first or last touch.
func (rep *channelReport) finish(ctx context.Context, d *projectData, w Window, touch string, people bitset) (*channelReport, error) {
	lo, hi := w.From.UnixMilli(), w.To.UnixMilli()
	bought, err := d.Buyers(ctx, w.From, w.To)
	if err != nil {
		return nil, err
	}
	// Per person: counts by channel index, no map lookups (a 30-day
	// window holds hundreds of thousands of people).
	counts := make([]channelCounts, len(channelIDs))
	last := touch == "last"
	people.each(func(i int32) {
		p := &d.People[i]
		c := &counts[p.FirstCh]
		if last {
			c = &counts[p.LastCh]
		}
		c.people++
		if p.FirstSeen >= lo && p.FirstSeen < hi {
			c.newPeople++
		}
		if bought.has(i) {
			c.buyers++
		}
		if p.FirstPurchase > 0 && p.FirstPurchase < hi {
			c.customers++
		}
	})
	for k, id := range channelIDs {
		c, k := rep.byChannel[id], counts[k]
		c.people += k.people
		c.newPeople += k.newPeople
		c.buyers += k.buyers
		c.customers += k.customers
		rep.all.people += k.people
		rep.all.newPeople += k.newPeople
		rep.all.buyers += k.buyers
		rep.all.customers += k.customers
	}
	return rep, nil
}

// listChannels answers GET /projects/{project_id}/acquisition/channels.
func (r *Reporting) listChannels(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	p := vp.p
	touch := "first"
	q := queryOf(c)
	if v := q.Get("touch"); v != "" {
		touch = v
	}
	if touch != "first" && touch != "last" {
		return badParam("touch", fmt.Sprintf("touch must be first or last, not %q", clipValue(touch)))
	}
	st := r.deps.Catalog.State()
	filters, ferr := ParseEventFilters(q, EventFilterOptions{ConsentlessOnly: consentlessOnly(st, p.ID)})
	if ferr != nil {
		return ferr
	}
	ctx := c.UserContext()
	d, err := r.data(ctx, p)
	if err != nil {
		return err
	}
	period, perr := ResolvePeriod(periodRequest(q), ListPeriods, r.deps.Clock(), p.Location(), catalog.RetentionDays(vp.org.Plan), d.firstEventPtr())
	if perr != nil {
		return perr
	}
	rep, err := computeChannels(ctx, d, period.Window, touch, filters)
	if err != nil {
		return err
	}
	data := make([]Resource, 0, len(channelIDs))
	for _, ch := range channelIDs {
		n := rep.byChannel[ch]
		data = append(data, Resource{ID: ch, Type: "channels", Attributes: []Attr{
			{"visits", n.visits},
			{"people", n.people},
			{"newPeople", n.newPeople},
			{"buyers", n.buyers},
			{"customers", n.customers},
			{"conversion", n.conversion()},
		}})
	}
	var coverage any
	if rep.pageviews > 0 {
		coverage = float64(rep.consented) / float64(rep.pageviews)
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: data, Meta: map[string]any{
		"period": period.Meta(),
		"touch":  touch,
		"visits": rep.all.visits,
		"people": map[string]any{
			"people": rep.all.people, "newPeople": rep.all.newPeople, "buyers": rep.all.buyers,
			"customers": rep.all.customers, "conversion": rep.all.conversion(),
		},
		"coverage": coverage,
	}})
}
