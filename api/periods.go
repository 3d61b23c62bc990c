package api

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Periods (docs/reporting-api.md, "Periods"): pure functions of the
// request, the endpoint's options, the clock, the project's time zone, the
// plan's retention and the project's first event.

// Intervals (trend buckets).
const (
	IntervalMinute = "minute"
	IntervalHour   = "hour"
	IntervalDay    = "day"
	IntervalWeek   = "week"
	IntervalMonth  = "month"
)

// Presets lists every period name except custom, shortest first.
var Presets = []string{"1h", "24h", "7d", "30d", "90d", "12m"}

// maxDailyDays is the longest custom range bucketed by day.
const maxDailyDays = 120

// PeriodRequest is the period part of a request; nil means the parameter
// was not sent. An empty compare counts as not sent.
type PeriodRequest struct {
	Period  *string `json:"period,omitempty"`
	From    *string `json:"from,omitempty"`
	To      *string `json:"to,omitempty"`
	Compare *string `json:"compare,omitempty"`
}

// PeriodOptions are what an endpoint accepts.
type PeriodOptions struct {
	// Presets the endpoint offers; a known preset outside it gets 422.
	Presets []string
	// Default preset when period is absent.
	Default string
	// Custom allows period=custom (else 422).
	Custom bool
	// Compare allows compare=previous (else refused with 400).
	Compare bool
	// EndsNow makes the window end at the request's moment instead of the
	// end of the current minute, hour, day or month (the raw event list).
	EndsNow bool
}

// Endpoint period options.
var (
	// ReportPeriods: overview, goal report, search summary.
	ReportPeriods = PeriodOptions{Presets: Presets, Default: "30d", Custom: true, Compare: true}
	// ListPeriods: people, goals, funnel, channels, ads.
	ListPeriods = PeriodOptions{Presets: Presets, Default: "30d", Custom: true}
	// EventPeriods: the raw event list.
	EventPeriods = PeriodOptions{Presets: []string{"1h", "24h", "7d"}, Default: "24h", EndsNow: true}
)

// Window is a half-open span of time [From, To).
type Window struct {
	From time.Time
	To   time.Time
}

// Period is a resolved period.
type Period struct {
	Preset   string
	Window          // the window read
	Interval string // trend bucket
	Location *time.Location
	// Clamped: the window started before the retained history and was
	// moved to its first day.
	Clamped bool
	// Compare: the request asked for compare=previous.
	Compare bool
	// Previous is the window before, of the same length; nil when it would
	// start before the retained history or before the first event.
	Previous *Window
	// days is the number of calendar days of a day-cut window (custom and
	// day presets), months of 12m; 0 for 1h and 24h.
	days, months int
}

// ResolvePeriod applies every period rule. now is the request's moment;
// retentionDays the plan's history; firstEvent the project's first event
// (nil: none yet).
func ResolvePeriod(req PeriodRequest, opts PeriodOptions, now time.Time, loc *time.Location, retentionDays int, firstEvent *time.Time) (Period, *APIError) {
	name := opts.Default
	if req.Period != nil {
		name = *req.Period
	}
	p := Period{Preset: name, Location: loc}
	known := name == "custom" || slices.Contains(Presets, name)
	switch {
	case !known:
		return p, badParam("period", fmt.Sprintf("period must be one of %s or custom, not %q", strings.Join(Presets, ", "), clipValue(name)))
	case name == "custom" && !opts.Custom:
		return p, unprocessable("period", "this endpoint reads only the presets "+strings.Join(opts.Presets, ", ")+"; period=custom is not offered")
	case name != "custom" && !slices.Contains(opts.Presets, name):
		return p, unprocessable("period", fmt.Sprintf("this endpoint reads only the presets %s, not %s", strings.Join(opts.Presets, ", "), name))
	}
	if req.Compare != nil && *req.Compare != "" {
		if !opts.Compare {
			return p, badParam("compare", "this endpoint does not compare; remove compare")
		}
		if *req.Compare != "previous" {
			return p, badParam("compare", fmt.Sprintf("compare must be previous, not %q", clipValue(*req.Compare)))
		}
		p.Compare = true
	}
	if name != "custom" {
		for _, f := range []struct {
			param string
			v     *string
		}{{"from", req.From}, {"to", req.To}} {
			if f.v != nil {
				if opts.Custom {
					return p, badParam(f.param, f.param+" is read only with period=custom")
				}
				return p, badParam(f.param, "this endpoint takes no "+f.param+"; its window ends now")
			}
		}
	}
	today := civil(now, loc)
	retStart := today.addDays(-(retentionDays - 1))
	switch {
	case name == "custom":
		if req.From == nil || req.To == nil {
			missing := "from"
			if req.From != nil {
				missing = "to"
			}
			return p, badParam(missing, "period=custom needs both from and to, as YYYY-MM-DD")
		}
		from, ok := parseDate(*req.From)
		if !ok {
			return p, badParam("from", fmt.Sprintf("from must be a date YYYY-MM-DD, not %q", clipValue(*req.From)))
		}
		to, ok := parseDate(*req.To)
		if !ok {
			return p, badParam("to", fmt.Sprintf("to must be a date YYYY-MM-DD, not %q", clipValue(*req.To)))
		}
		if to.before(from) {
			return p, badParam("to", "to must be on or after from")
		}
		if today.before(from) {
			return p, badParam("from", "from is after today ("+today.String()+" in "+loc.String()+")")
		}
		if today.before(to) {
			to = today
		}
		if to.before(retStart) {
			return p, badParam("to", fmt.Sprintf("the range ends before the retained history, which starts on %s (%d days kept)", retStart, retentionDays))
		}
		if from.before(retStart) {
			from, p.Clamped = retStart, true
		}
		p.From, p.To = from.midnight(loc), to.addDays(1).midnight(loc)
		p.days = to.sub(from) + 1
		p.Interval = IntervalDay
		if p.days > maxDailyDays {
			p.Interval = IntervalWeek
		}
	case opts.EndsNow:
		p.To = now
		switch name {
		case "1h":
			p.From, p.Interval = now.Add(-time.Hour), IntervalMinute
		case "24h":
			p.From, p.Interval = now.Add(-24*time.Hour), IntervalHour
		default: // 7d
			p.From, p.Interval = now.In(loc).AddDate(0, 0, -7), IntervalDay
		}
	case name == "1h":
		end := now.Truncate(time.Minute).Add(time.Minute)
		p.From, p.To, p.Interval = end.Add(-time.Hour), end, IntervalMinute
	case name == "24h":
		end := hourStart(now, loc).Add(time.Hour)
		p.From, p.To, p.Interval = end.Add(-24*time.Hour), end, IntervalHour
	case name == "12m":
		first := date{today.y, today.m, 1}
		p.To = first.addMonths(1).midnight(loc)
		from := first.addMonths(-11)
		if from.before(retStart) {
			from, p.Clamped = retStart, true
		}
		p.From, p.Interval, p.months = from.midnight(loc), IntervalMonth, 12
	default: // 7d, 30d, 90d
		n := map[string]int{"7d": 7, "30d": 30, "90d": 90}[name]
		from := today.addDays(-(n - 1))
		if from.before(retStart) {
			from, p.Clamped = retStart, true
		}
		p.From, p.To, p.Interval = from.midnight(loc), today.addDays(1).midnight(loc), IntervalDay
		p.days = today.sub(from) + 1
	}
	p.Previous = p.previous(retStart.midnight(loc), firstEvent)
	return p, nil
}

// previous is the window before p of the same length (in calendar days or
// months where p is cut in days or months), or nil when it starts before
// the retained history or the first event.
func (p Period) previous(retained time.Time, firstEvent *time.Time) *Window {
	if p.Clamped || firstEvent == nil {
		return nil
	}
	var from time.Time
	switch {
	case p.months > 0:
		f := civil(p.From, p.Location)
		from = f.addMonths(-p.months).midnight(p.Location)
	case p.days > 0:
		from = civil(p.From, p.Location).addDays(-p.days).midnight(p.Location)
	case p.Preset == "7d": // 7d ending now
		from = p.From.In(p.Location).AddDate(0, 0, -7)
	default:
		from = p.From.Add(-p.To.Sub(p.From))
	}
	if from.Before(retained) || from.Before(*firstEvent) {
		return nil
	}
	return &Window{From: from, To: p.From}
}

// Buckets returns the start of every trend bucket of w, cut like p: the
// first bucket starts at w.From; later ones at each minute, hour, local
// midnight, local Monday midnight or first of the month.
func (p Period) Buckets(w Window) []time.Time {
	var out []time.Time
	for t := w.From; t.Before(w.To); t = p.nextBucket(t) {
		out = append(out, t)
	}
	return out
}

func (p Period) nextBucket(t time.Time) time.Time {
	loc := p.Location
	switch p.Interval {
	case IntervalMinute:
		return t.Truncate(time.Minute).Add(time.Minute)
	case IntervalHour:
		return hourStart(t, loc).Add(time.Hour)
	case IntervalDay:
		return civil(t, loc).addDays(1).midnight(loc)
	case IntervalWeek:
		d := civil(t, loc)
		wd := (int(d.weekday()) + 6) % 7 // Monday 0
		return d.addDays(7 - wd).midnight(loc)
	default:
		d := civil(t, loc)
		return date{d.y, d.m, 1}.addMonths(1).midnight(loc)
	}
}

// Meta is the meta.period object.
func (p Period) Meta() map[string]any {
	var cmp any
	if p.Compare && p.Previous != nil {
		cmp = map[string]string{"from": Bound(p.Previous.From, p.Location), "to": Bound(p.Previous.To, p.Location)}
	}
	return map[string]any{
		"preset": p.Preset, "from": Bound(p.From, p.Location), "to": Bound(p.To, p.Location),
		"timezone": p.Location.String(), "interval": p.Interval, "comparison": cmp,
		"clampedToRetention": p.Clamped,
	}
}

// hourStart is the start of t's hour on the local clock (whole-hour and
// half-hour offsets alike), computed by subtracting the local minutes so
// that a repeated hour at a DST change is not confused with its twin.
func hourStart(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return t.Add(-time.Duration(l.Minute())*time.Minute - time.Duration(l.Second())*time.Second - time.Duration(l.Nanosecond()))
}

// date is a calendar day.
type date struct {
	y int
	m time.Month
	d int
}

func civil(t time.Time, loc *time.Location) date {
	y, m, d := t.In(loc).Date()
	return date{y, m, d}
}

func parseDate(s string) (date, bool) {
	t, err := time.Parse("2006-01-02", s)
	if err != nil || t.Format("2006-01-02") != s {
		return date{}, false
	}
	return civil(t, time.UTC), true
}

func (d date) utc() time.Time     { return time.Date(d.y, d.m, d.d, 0, 0, 0, 0, time.UTC) }
func (d date) addDays(n int) date { return civil(d.utc().AddDate(0, 0, n), time.UTC) }
func (d date) addMonths(n int) date {
	return civil(time.Date(d.y, d.m+time.Month(n), 1, 0, 0, 0, 0, time.UTC), time.UTC)
}
func (d date) before(e date) bool    { return d.utc().Before(e.utc()) }
func (d date) sub(e date) int        { return int(d.utc().Sub(e.utc()).Hours() / 24) }
func (d date) weekday() time.Weekday { return d.utc().Weekday() }
func (d date) String() string        { return d.utc().Format("2006-01-02") }
func (d date) midnight(loc *time.Location) time.Time {
	// The first moment of the day: midnight, or the end of a DST gap that
	// swallows midnight.
	t := time.Date(d.y, d.m, d.d, 0, 0, 0, 0, loc)
	if c := civil(t, loc); c != d {
		t = time.Date(d.y, d.m, d.d, 1, 0, 0, 0, loc).Truncate(time.Hour)
	}
	return t
}

// clipValue shortens a value quoted in a message: at most 60 bytes, cut
// between characters, with bytes that are not UTF-8 replaced, so that a
// message is always readable text.
func clipValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "…"
	}
	return s
}

// periodRequest reads period, from, to and compare from a query (the
// first value of each; absent parameters stay nil).
func periodRequest(q url.Values) PeriodRequest {
	get := func(name string) *string {
		if v, ok := q[name]; ok {
			s := v[0]
			return &s
		}
		return nil
	}
	return PeriodRequest{Period: get("period"), From: get("from"), To: get("to"), Compare: get("compare")}
}
