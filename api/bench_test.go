package api

import (
	"net/url"
	"testing"
	"time"
)

func BenchmarkCursorOpen(b *testing.B) {
	c := NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	params := Bind("user", adaID, "sort", "last_seen")
	cur := c.Seal("people", params, []byte("0123456789012345678901234567890123456789"))
	b.ReportAllocs()
	b.SetBytes(int64(len(cur)))
	for b.Loop() {
		if _, ok := c.Open("people", params, cur); !ok {
			b.Fatal("cursor refused")
		}
	}
}

func BenchmarkResolvePeriod(b *testing.B) {
	loc, _ := time.LoadLocation("Europe/Berlin")
	now := time.Date(2026, 3, 31, 10, 0, 0, 0, time.UTC)
	first := now.AddDate(-1, 0, 0)
	period, cmp := "30d", "previous"
	b.ReportAllocs()
	for b.Loop() {
		p, err := ResolvePeriod(PeriodRequest{Period: &period, Compare: &cmp}, ReportPeriods, now, loc, 366, &first)
		if err != nil || len(p.Buckets(p.Window)) != 30 {
			b.Fatal("unexpected period")
		}
	}
}

func BenchmarkParseEventFilters(b *testing.B) {
	raw := "filters[0][field]=page_host&filters[0][op]=is&filters[0][value]=www.shop.example&filters[1][field]=properties.plan&filters[1][op]=gt&filters[1][value]=2&filters[2][field]=channel&filters[2][op]=is_not&filters[2][value]=direct"
	q, _ := url.ParseQuery(raw)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if f, err := ParseEventFilters(q, EventFilterOptions{}); err != nil || len(f) != 3 {
			b.Fatal("unexpected filters")
		}
	}
}
