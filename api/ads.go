package api

import (
	"context"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The ads summary (GET /projects/{id}/acquisition/ads): the imported
// numbers of the ad platforms, and the revenue and buyers of the paid
// clicks the processor saw (docs/reporting-api.md, "Acquisition").

// adsLookback is how long before a purchase a paid click may be and still
// be credited with it: 30 days, the default click-through window of the
// big ad platforms.
const adsLookback = 30 * 24 * time.Hour

// adsTotals are the sums of the ready platforms' rows in a window.
type adsTotals struct {
	spend               map[string]int64 // micro-units per currency
	clicks, impressions int64
}

func sumAds(sets []*importSet, w Window, loc *time.Location) adsTotals {
	t := adsTotals{spend: map[string]int64{}}
	for _, set := range sets {
		for _, r := range set.Ads {
			if dayIn(r.Day, w, loc) {
				t.spend[r.Currency] += r.Spend
				t.clicks += r.Clicks
				t.impressions += r.Impressions
			}
		}
	}
	return t
}

// adsPurchase is one purchase for attribution.
type adsPurchase struct {
	time     int64 // Unix ms
	person   int32
	visit    ref
	value    int64 // micro-units
	currency string
}

// paidCredit is what paid clicks earned in a window.
type paidCredit struct {
	revenue map[string]int64 // micro-units per currency, of credited purchases
	buyers  int              // people with a credited purchase
	tracked bool             // some purchase in the window carried revenue
}

// creditPaid credits each purchase to the latest paid click before it
// (the purchase's own visit, or a visit of the same person, starting at
// most adsLookback before it): paid is the paid visits, sorted by start,
// that started up to the window's end; purchases those of the window.
func creditPaid(paid []visitRow, purchases []adsPurchase, people int) paidCredit {
	out := paidCredit{revenue: map[string]int64{}}
	byPerson := map[int32][]int64{} // starts, ascending
	visits := make(map[ref]int64, len(paid))
	for i := range paid {
		v := &paid[i]
		visits[v.ID] = v.Start
		if v.Person >= 0 {
			byPerson[v.Person] = append(byPerson[v.Person], v.Start)
		}
	}
	bought := newBitset(people)
	lookback := adsLookback.Milliseconds()
	for _, pu := range purchases {
		if pu.value > 0 {
			out.tracked = true
		}
		credited := false
		if pu.person >= 0 {
			starts := byPerson[pu.person]
			// The latest paid click at or before the purchase.
			i, found := slices.BinarySearch(starts, pu.time)
			if found {
				for i+1 < len(starts) && starts[i+1] == pu.time {
					i++
				}
			} else {
				i--
			}
			credited = i >= 0 && starts[i] >= pu.time-lookback
		}
		if !credited {
			if s, ok := visits[pu.visit]; ok && pu.visit != (ref{}) && s <= pu.time {
				credited = true
			}
		}
		if !credited {
			continue
		}
		if pu.value > 0 {
			out.revenue[pu.currency] += pu.value
		}
		if pu.person >= 0 && int(pu.person) < people && bought.add(pu.person) {
			out.buyers++
		}
	}
	return out
}

// adsPurchases lists the purchases of [from, to) (every purchase, with
// or without consent: docs/reporting-api.md, "Numbers").
func adsPurchases(ctx context.Context, d *projectData, from, to time.Time) ([]adsPurchase, error) {
	ps, err := d.Purchases(ctx, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]adsPurchase, 0, len(ps))
	for i := range ps {
		b := &ps[i]
		pu := adsPurchase{time: b.Time, person: b.Person, visit: b.Visit, currency: b.Currency}
		if b.HasValue {
			pu.value = b.Value
		}
		out = append(out, pu)
	}
	return out, nil
}

// roasEntry is one currency of roas.
type roasEntry struct {
	Currency string  `json:"currency"`
	Value    float64 `json:"value"`
}

// getAds answers GET /projects/{project_id}/acquisition/ads.
func (r *Reporting) getAds(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	p := vp.p
	loc := p.Location()
	ctx := c.UserContext()
	period, perr := ResolvePeriod(periodRequest(queryOf(c)), ListPeriods, r.deps.Clock(), loc, catalog.RetentionDays(vp.org.Plan), nil)
	if perr != nil {
		return perr
	}
	st := r.deps.Catalog.State()
	providers := make([]providerObject, 0, len(adsSources))
	var ready []*importSet
	platforms := map[string]bool{}
	for _, src := range adsSources {
		si, err := loadImport(ctx, r.deps.Bucket, p.ID, src)
		if err != nil {
			return err
		}
		po, ok := providerState(st, p, src, si)
		providers = append(providers, po)
		if ok {
			ready = append(ready, si.set)
			platforms[src] = true
		}
	}
	attrs := []Attr{{"providers", providers}}
	if len(ready) == 0 {
		for _, n := range []string{"spend", "clicks", "impressions", "ctr", "roas", "buyers", "revenueTracked"} {
			attrs = append(attrs, Attr{n, nil})
		}
		return r.sendAds(c, p.ID, attrs, period)
	}
	tot := sumAds(ready, period.Window, loc)
	spend := map[string]float64{}
	for cur, v := range tot.spend {
		spend[cur] = float64(v) / 1e6
	}
	var ctr any
	if tot.impressions > 0 {
		ctr = min(1, float64(tot.clicks)/float64(tot.impressions))
	}

	d, err := r.data(ctx, p)
	if err != nil {
		return err
	}
	var paid []visitRow
	err = d.eachVisit(ctx, period.From.Add(-adsLookback), period.To, func(_ vpos, v *visitRow) {
		if platforms[v.AdPlatform] {
			paid = append(paid, *v)
		}
	})
	if err != nil {
		return err
	}
	sortVisits(paid)
	purchases, err := adsPurchases(ctx, d, period.From, period.To)
	if err != nil {
		return err
	}
	credit := creditPaid(paid, purchases, len(d.People))
	tracked := credit.tracked
	for i := 0; !tracked && i < len(d.People); i++ {
		tracked = d.People[i].HasRevenue
	}
	var roas any
	if tracked {
		list := []roasEntry{}
		for _, m := range MoneyList(spend, p.ReportingCurrency) {
			if s := tot.spend[m.Currency]; s > 0 {
				list = append(list, roasEntry{Currency: m.Currency, Value: float64(credit.revenue[m.Currency]) / float64(s)})
			}
		}
		roas = list
	}
	attrs = append(attrs,
		Attr{"spend", MoneyList(spend, p.ReportingCurrency)},
		Attr{"clicks", tot.clicks},
		Attr{"impressions", tot.impressions},
		Attr{"ctr", ctr},
		Attr{"roas", roas},
		Attr{"buyers", credit.buyers},
		Attr{"revenueTracked", tracked},
	)
	return r.sendAds(c, p.ID, attrs, period)
}

func (r *Reporting) sendAds(c *fiber.Ctx, project string, attrs []Attr, period Period) error {
	res := Resource{ID: project, Type: "ads-summaries", Attributes: attrs,
		Self: r.baseURL(c) + "/projects/" + project + "/acquisition/ads"}
	return sendDocument(c, fiber.StatusOK, Document{Data: res, Meta: map[string]any{"period": period.Meta()}})
}
