package api

import (
	"cmp"
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
		return &projectData{Project: p, Loc: loc, shared: &dataShared{}}, nil
	}
	sn, err := r.deps.Reader.Snapshot(ctx, p.ID)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
	}
	d, err := r.tables.project(p.ID).load(ctx, sn)
	if err != nil {
		if !errors.Is(err, rollups.ErrFileGone) {
			return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
		}
		// The snapshot's files were collected: read the newest one.
		if sn, err = r.deps.Reader.Refresh(ctx, p.ID); err != nil {
			return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
		}
		if d, err = r.tables.project(p.ID).load(ctx, sn); err != nil {
			return nil, fmt.Errorf("cannot read the tables of project %s: %w", p.ID, err)
		}
	}
	out := *d
	out.Project, out.Loc = p, loc
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
		pc = &projectCache{parts: map[string]*partCache{}}
		c.projects[id] = pc
	}
	return pc
}

// projectCache is one project's decoded partitions and its latest
// projectData. One load runs at a time; others wait for it.
type projectCache struct {
	mu    sync.Mutex
	last  *projectData
	parts map[string]*partCache // by table/partition
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
}

func fileSig(files []rollups.DataFile) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f.Name)
		b.WriteByte(',')
	}
	return b.String()
}

// tableSig is the signature of every partition of a table.
func tableSig(m *rollups.Manifest, table string) string {
	ts := m.Tables[table]
	if ts == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range ts.PartitionNames() {
		b.WriteString(p)
		b.WriteByte(':')
		b.WriteString(fileSig(ts.Partitions[p]))
		b.WriteByte(';')
	}
	return b.String()
}

func (pc *projectCache) load(ctx context.Context, sn *rollups.Snapshot) (*projectData, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	m := sn.Manifest()
	last := pc.last
	if last != nil && last.snap != nil && last.Generation == m.Generation && last.Version == m.Version {
		return last, nil
	}
	if m.Version == 0 {
		d := &projectData{shared: &dataShared{}}
		pc.last = d
		return d, nil
	}
	d := &projectData{Version: m.Version, Generation: m.Generation, snap: sn, shared: &dataShared{}}
	seen := map[string]bool{}
	part := func(table, p string, decode func(*partCache, arrow.Record) error, cols []string) (*partCache, error) {
		key := table + "/" + p
		seen[key] = true
		sig := fileSig(m.Files(table, p))
		if c := pc.parts[key]; c != nil && c.sig == sig {
			return c, nil
		}
		c := &partCache{sig: sig}
		err := sn.Scan(ctx, table, rollups.ScanOptions{Partitions: []string{p}, Columns: cols}, func(b rollups.Batch) error {
			return decode(c, b.Record)
		})
		if err != nil {
			return nil, err
		}
		c.seenAt = nil // only needed while decoding
		pc.parts[key] = c
		return c, nil
	}
	partitions := func(table string) []string {
		if ts := m.Tables[table]; ts != nil {
			return ts.PartitionNames()
		}
		return nil
	}

	// People and identities: rebuilt when any of their partitions changed.
	if last != nil && last.snap != nil && tableSig(last.snap.Manifest(), tables.People) == tableSig(m, tables.People) &&
		tableSig(last.snap.Manifest(), tables.Identities) == tableSig(m, tables.Identities) {
		d.People, d.peopleRefs, d.idUnits, d.idPerson = last.People, last.peopleRefs, last.idUnits, last.idPerson
		for _, t := range []string{tables.People, tables.Identities} {
			for _, p := range partitions(t) {
				seen[t+"/"+p] = true
			}
		}
	} else {
		var parts []*partCache
		n := 0
		for _, p := range partitions(tables.People) {
			c, err := part(tables.People, p, decodePeople, peopleColumns)
			if err != nil {
				return nil, err
			}
			parts = append(parts, c)
			n += len(c.people)
		}
		d.People = make([]personRow, 0, n)
		for _, c := range parts {
			d.People = append(d.People, c.people...)
		}
		if !slices.IsSortedFunc(d.People, func(a, b personRow) int { return compareRef(a.Ref, b.Ref) }) {
			slices.SortFunc(d.People, func(a, b personRow) int { return compareRef(a.Ref, b.Ref) })
		}
		d.peopleRefs = make([]ref, len(d.People))
		for i := range d.People {
			d.peopleRefs[i] = d.People[i].Ref
		}
		type claim struct{ unit, person ref }
		var claims []claim
		for _, p := range partitions(tables.Identities) {
			c, err := part(tables.Identities, p, decodeIdentities, identityColumns)
			if err != nil {
				return nil, err
			}
			for i := range c.units {
				claims = append(claims, claim{c.units[i], c.owners[i]})
			}
		}
		slices.SortFunc(claims, func(a, b claim) int { return compareRef(a.unit, b.unit) })
		d.idUnits = make([]ref, len(claims))
		d.idPerson = make([]int32, len(claims))
		for i, c := range claims {
			d.idUnits[i] = c.unit
			d.idPerson[i] = noPerson
			if j, ok := slices.BinarySearchFunc(d.peopleRefs, c.person, compareRef); ok {
				d.idPerson[i] = int32(j)
			}
		}
	}
	peopleSame := last != nil && len(last.People) == len(d.People) && (len(d.People) == 0 || &last.People[0] == &d.People[0]) &&
		len(last.idUnits) == len(d.idUnits) && (len(d.idUnits) == 0 || &last.idUnits[0] == &d.idUnits[0])

	// Visits: the day partitions in order, each sorted by start.
	if peopleSame && last.snap != nil && tableSig(last.snap.Manifest(), tables.Visits) == tableSig(m, tables.Visits) {
		d.visits = last.visits
		for _, p := range partitions(tables.Visits) {
			seen[tables.Visits+"/"+p] = true
		}
	} else {
		n := 0
		var parts []*partCache
		for _, p := range partitions(tables.Visits) {
			c, err := part(tables.Visits, p, decodeVisits, visitColumns)
			if err != nil {
				return nil, err
			}
			parts = append(parts, c)
			n += len(c.visits)
		}
		d.visits = make([]visitRow, 0, n)
		for _, c := range parts {
			d.visits = append(d.visits, c.visits...)
		}
		sortVisits(d.visits)
		for i := range d.visits {
			v := &d.visits[i]
			v.Person = noPerson
			if v.Consented {
				v.Person = d.personOf(v.PersonRef)
			}
		}
	}

	// Conversions: by time.
	if peopleSame && last.snap != nil && tableSig(last.snap.Manifest(), tables.Conversions) == tableSig(m, tables.Conversions) {
		d.convs = last.convs
		for _, p := range partitions(tables.Conversions) {
			seen[tables.Conversions+"/"+p] = true
		}
	} else {
		n := 0
		var parts []*partCache
		for _, p := range partitions(tables.Conversions) {
			c, err := part(tables.Conversions, p, decodeConversions, conversionColumns)
			if err != nil {
				return nil, err
			}
			parts = append(parts, c)
			n += len(c.convs)
		}
		d.convs = make([]conversionRow, 0, n)
		for _, c := range parts {
			d.convs = append(d.convs, c.convs...)
		}
		slices.SortFunc(d.convs, compareConversions)
		for i := range d.convs {
			cv := &d.convs[i]
			cv.Person = noPerson
			if cv.Consented {
				cv.Person = d.personOf(cv.Owner)
			}
		}
	}

	// Events: the day partitions, the earliest time and the purchases.
	d.events = partitions(tables.Events)
	var buyParts [][]purchaseRow
	n := 0
	for _, p := range d.events {
		c, err := part(tables.Events, p, decodeEventFacts(projectID(m)), eventFactColumns)
		if err != nil {
			return nil, err
		}
		d.eventParts = append(d.eventParts, c)
		if c.first != 0 && (!d.hasFirst || c.first < d.first) {
			d.first, d.hasFirst = c.first, true
		}
		buyParts = append(buyParts, c.buys)
		n += len(c.buys)
	}
	d.purchases = make([]purchaseRow, 0, n)
	for _, b := range buyParts {
		d.purchases = append(d.purchases, b...)
	}
	slices.SortFunc(d.purchases, func(a, b purchaseRow) int {
		if c := cmp.Compare(a.Time, b.Time); c != 0 {
			return c
		}
		return compareRef(a.EventID, b.EventID)
	})
	for i := range d.purchases {
		b := &d.purchases[i]
		b.Person = noPerson
		if !b.Consented {
			continue
		}
		if b.UserID != "" {
			if p, ok := d.Person(UserRef(projectID(m), b.UserID)); ok {
				b.Person = p
			}
			continue
		}
		b.Person = d.personOf(b.Unit)
	}
	// Segment members: decoded per partition, indexed on first use.
	for _, p := range partitions(tables.Members) {
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

// projectID is the project of a manifest.
func projectID(m *rollups.Manifest) string { return m.Project }
