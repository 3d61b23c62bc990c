package api

import (
	"slices"
	"time"

	"github.com/mfhq/mf/rollups/tables"
)

// pinDays makes d (a projectData built by hand, for benchmarks) serve
// visits, conversions and events facts as its day partitions: rows by the
// day of their time in d.Loc, facts under the day of their first time,
// every chunk pinned to the request so nothing is read.
func pinDays(d *projectData, visits []visitRow, convs []conversionRow, facts []*partCache) {
	d.req, d.rows, d.pc = &pins{}, newRowCache(0), &projectCache{latest: map[string]latestChunk{}}
	d.days = map[string]dayParts{}
	day := func(t int64) string { return time.UnixMilli(t).In(d.Loc).Format(tables.DayLayout) }
	vis := map[string][]visitRow{}
	for _, v := range visits {
		vis[day(v.Start)] = append(vis[day(v.Start)], v)
	}
	cvs := map[string][]conversionRow{}
	for _, c := range convs {
		cvs[day(c.Time)] = append(cvs[day(c.Time)], c)
	}
	fs := map[string]*partCache{}
	for _, f := range facts {
		fs[day(f.first)] = f
	}
	pin := func(table string, names []string, chunk func(string) any) {
		slices.Sort(names)
		d.days[table] = dayParts{names: names, sigs: make([]string, len(names))}
		for ord, n := range names {
			d.req.put(pinKey{table, ord}, chunk(n))
		}
	}
	keys := func(m any) []string {
		var out []string
		switch m := m.(type) {
		case map[string][]visitRow:
			for k := range m {
				out = append(out, k)
			}
		case map[string][]conversionRow:
			for k := range m {
				out = append(out, k)
			}
		case map[string]*partCache:
			for k := range m {
				out = append(out, k)
			}
		}
		return out
	}
	pin(tables.Visits, keys(vis), func(n string) any {
		rows := vis[n]
		sortVisits(rows)
		c := &visitChunk{rows: rows}
		for _, v := range rows {
			c.maxEnd = max(c.maxEnd, v.End)
		}
		return c
	})
	pin(tables.Conversions, keys(cvs), func(n string) any {
		rows := cvs[n]
		slices.SortFunc(rows, compareConversions)
		return &convChunk{rows: rows}
	})
	pin(tables.Events, keys(fs), func(n string) any { return d.resolveFacts(fs[n]) })
	d.events = d.days[tables.Events].names
}
