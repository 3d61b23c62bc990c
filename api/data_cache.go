package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/catalog"
)

// The data cache: each project's tables decoded once per snapshot and
// partition (projectCache.load), kept while the partition's files are
// unchanged.

// data returns the tables of project p as of the latest snapshot the
// reader knows (an empty projectData without a Reader or tables).
func (r *Reporting) data(ctx context.Context, p *catalog.Project) (*projectData, error) {
	loc := p.Location()
	if r.deps.Reader == nil {
		return &projectData{Project: p, Loc: loc, shared: &dataShared{}, req: &pins{}}, nil
	}
	sn, err := r.deps.Reader.SnapshotRoot(ctx, p.ID)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
	}
	d, err := r.tables.project(p.ID).load(ctx, sn, r.rows)
	if err != nil {
		if !errors.Is(err, rollups.ErrFileGone) {
			return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
		}
		// The snapshot's files were collected: read the newest one.
		if sn, err = r.deps.Reader.RefreshRoot(ctx, p.ID); err != nil {
			return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
		}
		if d, err = r.tables.project(p.ID).load(ctx, sn, r.rows); err != nil {
			return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
		}
	}
	out := *d
	out.Project, out.Loc, out.req = p, loc, &pins{}
	return &out, nil
}

// dataCache holds the decoded tables per project. The zero value is ready.
type dataCache struct {
	mu       sync.Mutex
	projects map[string]*projectCache
}

func (c *dataCache) project(id string) *projectCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.projects == nil {
		c.projects = map[string]*projectCache{}
	}
	pc := c.projects[id]
	if pc == nil {
		pc = &projectCache{parts: map[string]*partCache{}, latest: map[string]latestChunk{}}
		c.projects[id] = pc
	}
	return pc
}

// projectCache is one project's decoded partitions and its latest
// projectData. One load runs at a time; others wait for it.
type projectCache struct {
	mu        sync.Mutex
	last      *projectData
	parts     map[string]*partCache // segment members, by table/partition
	peopleGen uint64                // the last people index built

	chunkMu sync.Mutex
	latest  map[string]latestChunk  // by table/partition (data_days.go)
	details map[string]detailLatest // by people partition (people_detail.go)
}

// partCache is the decoded rows of one partition, valid while its files
// (sig) are unchanged.
type partCache struct {
	sig    string
	people []personRow
	units  []ref // identities: unit
	owners []ref // identities: person
	visits []visitRow
	convs  []conversionRow
	buys   []purchaseRow // events: the purchases
	first  int64         // events: earliest time
	lastT  int64         // events: latest time
	seen   []seenPart    // events: parts with a consented event
	seenAt map[ref]int   // events, while decoding: index in seen
	// segment_members rows
	members []memberRow
	// while decoding: the shared values of the rows read
	places  *interner[place]
	sources *interner[visitSource]
	touches *interner[touch]
	strs    map[string]string // few-valued strings (stages, actions, currencies), copied once
	bucket  uint8             // people: the partition's ordinal
}

// intern returns s copied once per partCache: rows keep no decoded column.
func (pc *partCache) intern(s string) string {
	if v, ok := pc.strs[s]; ok {
		return v
	}
	if pc.strs == nil {
		pc.strs = map[string]string{}
	}
	v := strings.Clone(s)
	pc.strs[v] = v
	return v
}

func fileSig(files []rollups.DataFile) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f.Name)
		b.WriteByte(',')
	}
	return b.String()
}

// partsSig is the signature of every partition of a table.
func partsSig(parts []rollups.Partition) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Name)
		b.WriteByte(':')
		b.WriteString(fileSig(p.Files))
		b.WriteByte(';')
	}
	return b.String()
}

// load returns the tables of snapshot sn (from Reader.SnapshotRoot): it
// reads the bucket tables whole (people, identities, segment members: a
// group each) and, of the day-partitioned tables, only the groups of
// partitions that requests ask for (dayParts).
func (pc *projectCache) load(ctx context.Context, sn *rollups.Snapshot, rows *rowCache) (*projectData, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	last := pc.last
	if last != nil && last.snap != nil && last.Generation == sn.Generation() && last.Version == sn.Version() {
		return last, nil
	}
	if sn.Version() == 0 {
		d := &projectData{shared: &dataShared{}}
		pc.last = d
		return d, nil
	}
	d := &projectData{Version: sn.Version(), Generation: sn.Generation(), snap: sn, shared: &dataShared{},
		pid: sn.Project(), rows: rows, pc: pc, req: &pins{}}
	seen := map[string]bool{}
	part := func(table string, p rollups.Partition, decode func(*partCache, arrow.Record) error, cols []string) (*partCache, error) {
		key := table + "/" + p.Name
		seen[key] = true
		sig := fileSig(p.Files)
		if c := pc.parts[key]; c != nil && c.sig == sig {
			return c, nil
		}
		c := &partCache{sig: sig}
		err := sn.Scan(ctx, table, rollups.ScanOptions{Partitions: []string{p.Name}, Columns: cols}, func(b rollups.Batch) error {
			return decode(c, b.Record)
		})
		if err != nil {
			return nil, err
		}
		pc.parts[key] = c
		return c, nil
	}
	scan := func(table, p string, decode func(*partCache, arrow.Record) error, cols []string, into *partCache) error {
		return sn.Scan(ctx, table, rollups.ScanOptions{Partitions: []string{p}, Columns: cols, Uncached: true}, func(b rollups.Batch) error {
			return decode(into, b.Record)
		})
	}
	partitions := func(table string) ([]rollups.Partition, error) {
		parts, err := sn.Partitions(ctx, table, "", "")
		if err != nil {
			return nil, fmt.Errorf("cannot read the partitions of %s: %w", table, err)
		}
		return parts, nil
	}
	people, err := partitions(tables.People)
	if err != nil {
		return nil, err
	}
	idParts, err := partitions(tables.Identities)
	if err != nil {
		return nil, err
	}
	d.peopleSig = partsSig(people) + "|" + partsSig(idParts)

	// People and identities: decoded whole, again when any of their
	// partitions changed.
	if last != nil && last.snap != nil && last.peopleSig == d.peopleSig {
		d.People, d.peopleRefs, d.idUnits, d.idPerson, d.peopleGen = last.People, last.peopleRefs, last.idUnits, last.idPerson, last.peopleGen
		d.peoplePre, d.idPre = last.peoplePre, last.idPre
		d.peopleParts, d.peopleSigs, d.known, d.firstSeen = last.peopleParts, last.peopleSigs, last.known, last.firstSeen
	} else {
		pc.peopleGen++
		d.peopleGen = pc.peopleGen
		if len(people) > 256 {
			return nil, fmt.Errorf("the people table has %d partitions, more than the 256 the person index numbers", len(people))
		}
		buckets := make([]string, len(people))
		d.peopleSigs = make([]string, len(people))
		for i, p := range people {
			buckets[i], d.peopleSigs[i] = p.Name, fileSig(p.Files)
		}
		d.peopleParts = buckets
		decoded := make([]*partCache, len(buckets))
		err := d.prefetch(ctx, 0, len(buckets), func(ctx context.Context, i int) error {
			decoded[i] = &partCache{bucket: uint8(i)}
			return scan(tables.People, buckets[i], decodePeople, peopleColumns, decoded[i])
		})
		if err != nil {
			return nil, err
		}
		n := 0
		for _, c := range decoded {
			n += len(c.people)
		}
		d.People = make([]personRow, 0, n)
		for k, c := range decoded {
			d.People = append(d.People, c.people...)
			decoded[k] = nil
		}
		if !slices.IsSortedFunc(d.People, func(a, b personRow) int { return compareRef(a.Ref, b.Ref) }) {
			slices.SortFunc(d.People, func(a, b personRow) int { return compareRef(a.Ref, b.Ref) })
		}
		d.peopleRefs = make([]ref, len(d.People))
		for i := range d.People {
			d.peopleRefs[i] = d.People[i].Ref
		}
		d.peoplePre = newRefPrefixes(d.peopleRefs)
		d.indexColumns()
		type claim struct{ unit, person ref }
		ids := make([]*partCache, len(idParts))
		err = d.prefetch(ctx, 0, len(idParts), func(ctx context.Context, i int) error {
			ids[i] = &partCache{}
			return scan(tables.Identities, idParts[i].Name, decodeIdentities, identityColumns, ids[i])
		})
		if err != nil {
			return nil, err
		}
		n = 0
		for _, c := range ids {
			n += len(c.units)
		}
		claims := make([]claim, 0, n)
		for k, c := range ids {
			for i := range c.units {
				claims = append(claims, claim{c.units[i], c.owners[i]})
			}
			ids[k] = nil
		}
		slices.SortFunc(claims, func(a, b claim) int { return compareRef(a.unit, b.unit) })
		d.idUnits = make([]ref, len(claims))
		d.idPerson = make([]int32, len(claims))
		for i, c := range claims {
			d.idUnits[i] = c.unit
			d.idPerson[i] = noPerson
			if j, ok := d.peoplePre.find(d.peopleRefs, c.person); ok {
				d.idPerson[i] = int32(j)
			}
		}
		d.idPre = newRefPrefixes(d.idUnits)
	}

	// The day-partitioned tables: their groups of partitions, read as
	// requests need them; rows are read per request (data_days.go).
	d.days = map[string]dayParts{}
	for _, t := range []string{tables.Visits, tables.Conversions, tables.Events, tables.Activity} {
		d.days[t] = dayPartsOf(sn, t)
	}
	if err := d.firstEvent(ctx); err != nil {
		return nil, err
	}
	d.req = nil // the pins of the first request, not of the snapshot

	// Segment members: decoded per partition, indexed on first use.
	members, err := partitions(tables.Members)
	if err != nil {
		return nil, err
	}
	for _, p := range members {
		c, err := part(tables.Members, p, decodeMembers, memberColumns)
		if err != nil {
			return nil, err
		}
		d.memberParts = append(d.memberParts, c)
	}
	for k := range pc.parts {
		if !seen[k] {
			delete(pc.parts, k)
		}
	}
	pc.last = d
	return d, nil
}
