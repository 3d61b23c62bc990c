package api

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/mfhq/mf/rollups/tables"
)

// The person index (personRow, one per person of the snapshot) keeps
// what counting, filtering and sorting people read. What only a page of
// people, a profile or a page of events shows (names, emails, traits,
// totals: personDetail) is read when a page shows someone of a bucket
// partition of the people table: that partition's detail columns,
// decoded into a detailChunk kept in the day cache (rowCache, under its
// byte budget) while the partition's files are unchanged. A question that
// only counts never reads them.

// detailChunk is the detail rows of one people partition, sorted by ref:
// fixed-size rows whose strings are ranges of one text (a person costs
// 88 bytes with their ref, and their strings, not the 160 of a
// personDetail and an allocation per string).
type detailChunk struct {
	refs []ref
	rows []detailRow
	text []byte
}

// detailRow is a personDetail in a detailChunk.
type detailRow struct {
	counts                    [5]int64  // visits, active days, events, pageviews, browsers
	at                        uint32    // where its strings start in the chunk's text
	ends                      [6]uint32 // where user id, name, email, last path, traits and revenue end
	hasName, hasEmail, shared bool
}

// detail returns row j as a personDetail.
func (c *detailChunk) detail(j int) personDetail {
	r := &c.rows[j]
	str := func(k int) string {
		from := r.at
		if k > 0 {
			from = r.ends[k-1]
		}
		return string(c.text[from:r.ends[k]])
	}
	pd := personDetail{UserID: str(0), Name: str(1), HasName: r.hasName, Email: str(2), HasEmail: r.hasEmail,
		LastPath: str(3), Traits: str(4), Visits: r.counts[0], ActiveDays: r.counts[1], Events: r.counts[2],
		Pageviews: r.counts[3], Browsers: r.counts[4], SharedBrowser: r.shared}
	pd.Revenue, _ = revenueOf(c.refs[j], str(5)) // checked when read
	return pd
}

// details returns the detail rows of the people idx (indexes into
// People), by index. A snapshot without tables gives empty details.
func (d *projectData) details(ctx context.Context, idx []int32) (map[int32]*personDetail, error) {
	out := make(map[int32]*personDetail, len(idx))
	need := make([]bool, len(d.peopleParts))
	for _, i := range idx {
		out[i] = &personDetail{Revenue: []Money{}}
		if b := int(d.People[i].bucket); d.snap != nil && b < len(need) {
			need[b] = true
		}
	}
	var buckets []int
	for b, ok := range need {
		if ok {
			buckets = append(buckets, b)
		}
	}
	chunks := make([]*detailChunk, len(d.peopleParts))
	err := d.prefetch(ctx, 0, len(buckets), func(ctx context.Context, k int) error {
		c, err := d.detailChunk(ctx, buckets[k])
		chunks[buckets[k]] = c
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, pd := range out {
		p := &d.People[i]
		if int(p.bucket) >= len(chunks) || chunks[p.bucket] == nil {
			continue
		}
		c := chunks[p.bucket]
		if j, ok := slices.BinarySearchFunc(c.refs, p.Ref, compareRef); ok {
			*pd = c.detail(j)
		}
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

// detailChunk returns the detail rows of people partition b: cached, or
// read.
func (d *projectData) detailChunk(ctx context.Context, b int) (*detailChunk, error) {
	name := d.peopleParts[b]
	key := d.pid + "\x00" + tables.People + "-detail/" + name + "\x00" + d.peopleSigs[b]
	if v, ok := d.rows.get(key, d.req); ok {
		return v.(*detailChunk), nil
	}
	c := &detailChunk{}
	err := d.scanPart(ctx, tables.People, name, detailColumns, func(rec arrow.Record) error {
		return decodeDetails(c, rec)
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the people of %s: %w", name, err)
	}
	if !slices.IsSortedFunc(c.refs, compareRef) {
		order := make([]int, len(c.refs))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return compareRef(c.refs[a], c.refs[b]) })
		refs, rows := make([]ref, len(order)), make([]detailRow, len(order))
		for i, o := range order {
			refs[i], rows[i] = c.refs[o], c.rows[o]
		}
		c.refs, c.rows = refs, rows
	}
	c.refs, c.rows, c.text = tight(c.refs), tight(c.rows), tight(c.text)
	size := int64(cap(c.refs))*16 + int64(cap(c.rows))*int64(unsafe.Sizeof(detailRow{})) + int64(cap(c.text))
	d.rows.put(key, c, size, d.req)
	d.supersede(tables.People+"-detail/"+name, key)
	return c, nil
}

// supersede records key as the newest cache entry of part (a people
// partition's details) and drops the one it replaces: a commit that
// changes a bucket leaves its old details no request of a newer snapshot
// reads, which would otherwise wait for eviction and push out days that
// are still read.
func (d *projectData) supersede(part, key string) {
	if d.pc == nil {
		return
	}
	d.pc.chunkMu.Lock()
	defer d.pc.chunkMu.Unlock()
	if d.pc.details == nil {
		d.pc.details = map[string]detailLatest{}
	}
	cur := d.pc.details[part]
	if cur.key != "" && (cur.gen > d.Generation || (cur.gen == d.Generation && cur.version > d.Version)) {
		return // a newer snapshot's details are already in
	}
	if cur.key != "" && cur.key != key {
		d.rows.remove(cur.key)
	}
	d.pc.details[part] = detailLatest{key: key, gen: d.Generation, version: d.Version}
}

// detailLatest is the newest details entry of a people partition.
type detailLatest struct {
	key          string
	gen, version int64
}
