package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The short text summary of each tool's answer, for an agent to quote;
// the numbers are read from the very document the tool returns.

// listShown is how many items a list summary names.
const listShown = 10

func attr(r map[string]any, name string) any {
	a, _ := r["attributes"].(map[string]any)
	return a[name]
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return num(x)
	}
	return fmt.Sprint(v)
}

func orText(v any, alt string) string {
	if s := str(v); s != "" {
		return s
	}
	return alt
}

// num writes a number as the API does, without a trailing .0; nil is
// "none".
func num(v any) string {
	f, ok := v.(float64)
	if !ok {
		if v == nil {
			return "none"
		}
		return fmt.Sprint(v)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// ratio writes a 0..1 ratio as a percentage.
func ratio(v any) string {
	f, ok := v.(float64)
	if !ok {
		return "none"
	}
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

func money(v any) string {
	list, _ := v.([]any)
	if len(list) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(list))
	for _, m := range list {
		mm := obj(m)
		parts = append(parts, fmt.Sprintf("%.2f %s", toFloat(mm["amount"]), str(mm["currency"])))
	}
	return strings.Join(parts, " + ")
}

func toFloat(v any) float64 { f, _ := v.(float64); return f }

// periodText is the period of meta.period.
func periodText(doc map[string]any) string {
	p := obj(obj(doc["meta"])["period"])
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" over %s (%s to %s, %s)", str(p["preset"]), str(p["from"]), str(p["to"]), str(p["timezone"]))
}

// change says how value moved from previous.
func change(value, previous any, format string) string {
	v, vok := value.(float64)
	p, pok := previous.(float64)
	switch {
	case !pok:
		return "no previous value"
	case !vok:
		return "previous " + num(previous)
	case format == "percent":
		return fmt.Sprintf("previous %s, %+.1f points", ratio(previous), (v-p)*100)
	case v == p:
		return "previous " + num(previous) + ", unchanged"
	case p == 0:
		return "previous 0"
	}
	return fmt.Sprintf("previous %s, %+.1f%%", num(previous), (v-p)/math.Abs(p)*100)
}

// nextText is the paging hint of a list.
func nextText(doc map[string]any) string {
	if c := str(obj(doc["meta"])["nextCursor"]); c != "" {
		return " More on the next page: cursor " + c + "."
	}
	return ""
}

func summarizeList(doc map[string]any, noun string, item func(map[string]any) string) string {
	list, _ := doc["data"].([]any)
	if len(list) == 0 {
		return "No " + noun + periodText(doc) + "."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s on this page%s: ", len(list), noun, periodText(doc))
	for i, r := range list {
		if i == listShown {
			fmt.Fprintf(&b, "; and %d more", len(list)-listShown)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(item(obj(r)))
	}
	b.WriteString(".")
	b.WriteString(nextText(doc))
	return b.String()
}

func summarizeProjects(doc map[string]any) string {
	s := summarizeList(doc, "projects", func(r map[string]any) string {
		return fmt.Sprintf("%s (id %s, %s, %s)", str(attr(r, "name")), str(r["id"]), str(attr(r, "timezone")), str(attr(r, "plan")))
	})
	return s + " Total: " + num(obj(doc["meta"])["total"]) + "."
}

func summarizeProject(doc map[string]any) string {
	r := obj(doc["data"])
	s := fmt.Sprintf("Project %s (id %s)", orText(attr(r, "name"), "?"), str(r["id"]))
	for _, k := range []string{"timezone", "reportingCurrency", "plan", "retentionDays", "archived"} {
		if v := attr(r, k); v != nil {
			s += fmt.Sprintf(", %s %s", k, str(v))
		}
	}
	return s + "."
}

func summarizeOverview(doc map[string]any) string {
	r := obj(doc["data"])
	var b strings.Builder
	fmt.Fprintf(&b, "Overview of project %s%s:", str(r["id"]), periodText(doc))
	numbers, _ := attr(r, "numbers").([]any)
	for i, n := range numbers {
		m := obj(n)
		v, p := m["value"], m["previous"]
		text := num(v)
		switch str(m["format"]) {
		case "percent":
			text = ratio(v)
		case "currency":
			if v != nil {
				text = fmt.Sprintf("%.2f %s", toFloat(v), str(m["currency"]))
			}
		}
		sep := " "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %s (%s)", sep, str(m["key"]), text, change(v, p, str(m["format"])))
		if others, _ := m["others"].([]any); len(others) > 0 {
			fmt.Fprintf(&b, ", besides %s", money(others))
		}
	}
	if c := attr(r, "coverage"); c != nil {
		fmt.Fprintf(&b, ". Consent coverage %s", ratio(c))
	}
	b.WriteString(".")
	return b.String()
}

func summarizePerson(doc map[string]any) string {
	r := obj(doc["data"])
	s := fmt.Sprintf("Person %s (ref %s)", orText(attr(r, "name"), "without a name"), str(r["id"]))
	for _, k := range []string{"stage", "visits", "events", "orders", "firstSeen", "lastSeen"} {
		if v := attr(r, k); v != nil {
			s += fmt.Sprintf(", %s %s", k, str(v))
		}
	}
	if v := attr(r, "revenue"); v != nil {
		s += ", revenue " + money(v)
	}
	return s + "."
}

func summarizeGoals(doc map[string]any) string {
	s := summarizeList(doc, "goals", func(r map[string]any) string {
		return fmt.Sprintf("%s (%s): %s conversions, %s people, rate %s", str(attr(r, "name")), str(attr(r, "role")),
			num(attr(r, "conversions")), num(attr(r, "people")), ratio(attr(r, "rate")))
	})
	m := obj(doc["meta"])
	return s + fmt.Sprintf(" Active people %s, visits %s.", num(m["active"]), num(m["visits"]))
}

func summarizeGoalReport(doc map[string]any) string {
	r := obj(doc["data"])
	prev := obj(attr(r, "previous"))
	s := fmt.Sprintf("Goal %s (%s)%s: %s conversions (%s), %s people (%s), rate %s (%s)",
		str(attr(r, "name")), str(attr(r, "role")), periodText(doc),
		num(attr(r, "conversions")), change(attr(r, "conversions"), prev["conversions"], "number"),
		num(attr(r, "people")), change(attr(r, "people"), prev["people"], "number"),
		ratio(attr(r, "rate")), change(attr(r, "rate"), prev["rate"], "percent"))
	if rev := attr(r, "revenue"); rev != nil {
		s += ", revenue " + money(rev)
	}
	return s + "."
}

func summarizeFunnel(doc map[string]any) string {
	r := obj(doc["data"])
	var b strings.Builder
	fmt.Fprintf(&b, "Funnel %s%s, window %s days, by %s:", orText(attr(r, "name"), str(r["id"])), periodText(doc),
		num(attr(r, "window")), str(attr(r, "basis")))
	steps, _ := attr(r, "steps").([]any)
	for i, st := range steps {
		m := obj(st)
		sep := " "
		if i > 0 {
			sep = " → "
		}
		fmt.Fprintf(&b, "%s%s %s (%s of the first step)", sep, str(m["name"]), num(m["count"]), ratio(m["conversion"]))
	}
	b.WriteString(".")
	return b.String()
}

func summarizeChannels(doc map[string]any) string {
	s := summarizeList(doc, "channels", func(r map[string]any) string {
		return fmt.Sprintf("%s: %s visits, %s people, %s customers", str(r["id"]),
			num(attr(r, "visits")), num(attr(r, "people")), num(attr(r, "customers")))
	})
	m := obj(doc["meta"])
	return s + fmt.Sprintf(" People credited by %s touch; %s visits in all.", str(m["touch"]), num(m["visits"]))
}

func summarizeSearch(doc map[string]any) string {
	r := obj(doc["data"])
	clicks := obj(attr(r, "clicks"))
	if clicks == nil {
		return fmt.Sprintf("No search import is ready for %s%s.", str(attr(r, "engine")), periodText(doc))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Search %s%s, published through %s:", str(attr(r, "engine")), periodText(doc), orText(attr(r, "through"), "none"))
	for i, k := range []string{"clicks", "impressions", "ctr", "position"} {
		m := obj(attr(r, k))
		f := "number"
		v := num(m["value"])
		if k == "ctr" {
			f, v = "percent", ratio(m["value"])
		}
		sep := " "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %s (%s)", sep, k, v, change(m["value"], m["previous"], f))
	}
	b.WriteString(".")
	return b.String()
}

func summarizeAds(doc map[string]any) string {
	r := obj(doc["data"])
	if attr(r, "clicks") == nil {
		return "No ad platform import is ready" + periodText(doc) + "."
	}
	roas := "none"
	if list, _ := attr(r, "roas").([]any); len(list) > 0 {
		parts := make([]string, 0, len(list))
		for _, x := range list {
			m := obj(x)
			parts = append(parts, fmt.Sprintf("%.2f (%s)", toFloat(m["value"]), str(m["currency"])))
		}
		roas = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("Ads%s: spend %s, %s clicks, %s impressions, click-through %s, ROAS %s, %s buyers after a paid click.",
		periodText(doc), money(attr(r, "spend")), num(attr(r, "clicks")), num(attr(r, "impressions")),
		ratio(attr(r, "ctr")), roas, num(attr(r, "buyers")))
}
