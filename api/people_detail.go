package api

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
)

// The person index (personRow, one per person of the snapshot) keeps
// what counting, filtering and sorting people read; what only a page of
// people, a profile or a page of events shows (names, emails, traits,
// totals) is read here for the people of that page: from their bucket
// partitions of the people table, only the detail columns, only the
// row groups whose refs may hold them, and only their rows kept.

// details returns the detail rows of the people idx (indexes into
// People), by index. A snapshot without tables gives empty details.
func (d *projectData) details(ctx context.Context, idx []int32) (map[int32]*personDetail, error) {
	out := make(map[int32]*personDetail, len(idx))
	want := make([]map[ref]*personDetail, len(d.peopleParts))
	for _, i := range idx {
		if _, ok := out[i]; ok {
			continue
		}
		pd := &personDetail{Revenue: []Money{}}
		out[i] = pd
		p := &d.People[i]
		if d.snap == nil || int(p.bucket) >= len(want) {
			continue
		}
		if want[p.bucket] == nil {
			want[p.bucket] = map[ref]*personDetail{}
		}
		want[p.bucket][p.Ref] = pd
	}
	var buckets []int
	for b, m := range want {
		if m != nil {
			buckets = append(buckets, b)
		}
	}
	err := d.prefetch(ctx, 0, len(buckets), func(ctx context.Context, k int) error {
		b := buckets[k]
		refs := make([]ref, 0, len(want[b]))
		for r := range want[b] {
			refs = append(refs, r)
		}
		lo := slices.MinFunc(refs, func(a, b ref) int { return cmp.Compare(string(a[:]), string(b[:])) })
		hi := slices.MaxFunc(refs, func(a, b ref) int { return cmp.Compare(string(a[:]), string(b[:])) })
		// Uncached: a page's few rows are what is kept, not the columns.
		opts := rollups.ScanOptions{Partitions: []string{d.peopleParts[b]}, Columns: detailColumns, KeyMin: lo, KeyMax: hi, Uncached: true}
		decode := decodeDetail(want[b])
		err := d.snap.Scan(ctx, tables.People, opts, func(bt rollups.Batch) error { return decode(bt.Record) })
		if err != nil {
			return fmt.Errorf("cannot read the people of %s: %w", d.peopleParts[b], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// detail returns the detail row of person idx.
func (d *projectData) detail(ctx context.Context, idx int32) (*personDetail, error) {
	m, err := d.details(ctx, []int32{idx})
	if err != nil {
		return nil, err
	}
	return m[idx], nil
}
