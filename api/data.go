package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/catalog"
)

// The reporting data layer: the processor's tables of a project
// (docs/processor.md, "Tables") decoded once per snapshot and partition and
// kept in memory, so that a request scans cached slices and never decodes
// Parquet. People, identities, visits and conversions are decoded per
// partition and cached while the partition's files are unchanged; the
// events table (the largest) is read through the rollups reader's cache on
// every call that needs it.

// ref is a person, browser, visitor, visit or event ref (16 bytes).
type ref = [16]byte

// noPerson is the person index of a row without a person.
const noPerson int32 = -1

// touch is a person's first or last touch.
type touch struct {
	Channel, Source, Medium, Campaign, Landing, AdPlatform string
}

// personRow is a row of the people table.
type personRow struct {
	Ref                                   ref
	UserID, Name, Email, Stage            string
	Known, HasName, HasEmail              bool
	FirstSeen, LastSeen                   int64 // Unix ms
	Visits, ActiveDays, Events, Pageviews int64
	Orders                                int64
	Revenue                               []Money // per currency, reporting currency first
	Value                                 int64   // micro-units of the reporting currency
	FirstTouch, LastTouch                 touch
	FirstCh, LastCh                       uint8 // channelIndex of the touches' channels
	Country, Region, Device, Browser, OS  string
	Locale, LastPath                      string
	Traits                                string // JSON object of the latest identify, "" when none
	Browsers                              int64
	SharedBrowser                         bool
	FirstPurchase                         int64 // Unix ms, 0 when never bought
	Intent                                bool
}

// visitRow is a row of the visits table; Person is the index of the
// visit's person (the person of its touch event; noPerson for a
// consentless visit or a unit nobody knows).
type visitRow struct {
	Unit, ID   ref
	PersonRef  ref // the person column, or the unit where it is null
	Person     int32
	Start, End int64 // Unix ms
	Events     int32
	Pageviews  int32
	Consented  bool
	Session    bool // the visit is a sessionId
	Channel, Source, Medium, Campaign, Term, Content, AdPlatform, ClickID,
	ReferrerHost, ReferrerName, LandingHost, LandingPath, ExitPath,
	Country, Region, Device, Browser, OS, Locale, SourceID string
}

// conversionRow is a row of the conversions table; Person is the index
// of its owner (the event's part, resolved through identities), noPerson
// when none (consentless).
type conversionRow struct {
	Action, Role, Currency string
	Time                   int64 // Unix ms
	EventID, Unit, Visit   ref
	Owner                  ref // the owner column, or the unit where it is null
	Person                 int32
	Value                  int64 // micro-units of Currency
	HasValue               bool
	Consented              bool
}

// eventRow is a row of the events table. Visit is coalesce(visit,
// session_id) for an event with a channel (docs/processor.md), zero
// otherwise; Person is the index of the event's part (its userId's
// person, else its unit's person through identities), noPerson for a
// consentless event or one without ids.
type eventRow struct {
	Unit                                         ref
	Time                                         int64 // Unix ms
	ID                                           ref
	Name                                         string
	Source                                       string // source id
	Consented                                    bool
	Server                                       bool
	Origin, Path, Query, Title, Referrer, UserID string
	SessionID                                    ref
	Properties                                   string // JSON object, "" when none
	Revenue, Currency                            string
	Country, Region, Device, Browser, OS, Locale string
	Actions                                      string // matched action ids, comma-separated
	Value                                        int64  // micro-units of ValueCurrency
	HasValue                                     bool
	ValueCurrency                                string
	Purchase                                     bool
	Visit                                        ref
	Channel                                      string
	Person                                       int32
}

// purchaseRow is an event that is a purchase (events.purchase: it matched
// the purchase goal, or it carried revenue in a project without one, as
// decided when it was first processed). Person is the index of its part,
// noPerson for a consentless event or one without ids.
type purchaseRow struct {
	Time      int64 // Unix ms
	EventID   ref
	Unit      ref
	UserID    string
	Visit     ref // coalesce(visit, session_id) when the event has a visit
	Person    int32
	Value     int64 // micro-units of Currency
	HasValue  bool
	Currency  string
	Consented bool
}

// projectData is one consistent snapshot of a project's tables (one
// manifest version). It is shared by concurrent requests and never
// modified after it is built.
type projectData struct {
	Project *catalog.Project
	Loc     *time.Location
	// Version and Generation are the manifest's (0: no tables yet).
	Version, Generation int64
	// People holds every person, sorted by ref; the index is the person
	// index used by the other rows.
	People []personRow

	peopleRefs []ref   // People[i].Ref, for binary search
	idUnits    []ref   // claimed browsers, sorted
	idPerson   []int32 // their person's index
	visits     []visitRow
	convs      []conversionRow
	purchases  []purchaseRow
	first      int64 // earliest event, Unix ms
	hasFirst   bool

	snap   *rollups.Snapshot // nil without tables
	events []string          // day partitions of the events table

	eventParts  []*partCache // decoded facts of each events partition
	memberParts []*partCache // segment_members partitions
	shared      *dataShared  // lazy indexes and caches of this snapshot
}

// Person returns the person index of a person ref or of a browser ref
// (claimed: its claimer; unclaimed: the browser is the person), false when
// nobody has this ref.
func (d *projectData) Person(r ref) (int32, bool) {
	if i, ok := slices.BinarySearchFunc(d.idUnits, r, compareRef); ok {
		if p := d.idPerson[i]; p >= 0 {
			return p, true
		}
	}
	if i, ok := slices.BinarySearchFunc(d.peopleRefs, r, compareRef); ok {
		return int32(i), true
	}
	return noPerson, false
}

func (d *projectData) personOf(r ref) int32 {
	if r == (ref{}) {
		return noPerson
	}
	p, _ := d.Person(r)
	return p
}

func compareRef(a, b ref) int { return bytes.Compare(a[:], b[:]) }

// UserRef is the person ref of a userId: SHA-256("mf/ref/v1" 0x00 project
// 0x00 'u' 0x00 userId)[0:16] as a version-8 UUID (docs/processor.md).
func UserRef(project, userID string) ref { return nodeRef(project, 'u', userID) }

// BrowserRef is the ref of an anonymousId.
func BrowserRef(project, anonymousID string) ref { return nodeRef(project, 'a', anonymousID) }

func nodeRef(project string, kind byte, id string) ref {
	h := sha256.New()
	h.Write([]byte("mf/ref/v1\x00"))
	h.Write([]byte(project))
	h.Write([]byte{0, kind, 0})
	h.Write([]byte(id))
	var r ref
	copy(r[:], h.Sum(nil)[:16])
	r[6] = r[6]&0x0f | 0x80
	r[8] = r[8]&0x3f | 0x80
	return r
}

// Visits returns the visits starting in [from, to), sorted by start and
// id. The slice is shared: do not modify it.
func (d *projectData) Visits(ctx context.Context, from, to time.Time) ([]visitRow, error) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	i := sort.Search(len(d.visits), func(i int) bool { return d.visits[i].Start >= lo })
	j := sort.Search(len(d.visits), func(i int) bool { return d.visits[i].Start >= hi })
	if j < i {
		j = i
	}
	return d.visits[i:j:j], ctx.Err()
}

// AllVisits returns every visit of the retained tables, sorted by start
// and id (shared: do not modify).
func (d *projectData) AllVisits() []visitRow { return d.visits[:len(d.visits):len(d.visits)] }

// Conversions returns the conversions with a time in [from, to), sorted by
// time, event id and action. The slice is shared: do not modify it.
func (d *projectData) Conversions(ctx context.Context, from, to time.Time) ([]conversionRow, error) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	i := sort.Search(len(d.convs), func(i int) bool { return d.convs[i].Time >= lo })
	j := sort.Search(len(d.convs), func(i int) bool { return d.convs[i].Time >= hi })
	if j < i {
		j = i
	}
	return d.convs[i:j:j], ctx.Err()
}

// AllConversions returns every conversion, sorted by time (shared).
func (d *projectData) AllConversions() []conversionRow {
	return d.convs[:len(d.convs):len(d.convs)]
}

// Purchases returns the purchases with a time in [from, to), sorted by
// time and event id. The slice is shared: do not modify it.
func (d *projectData) Purchases(ctx context.Context, from, to time.Time) ([]purchaseRow, error) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	i := sort.Search(len(d.purchases), func(i int) bool { return d.purchases[i].Time >= lo })
	j := sort.Search(len(d.purchases), func(i int) bool { return d.purchases[i].Time >= hi })
	if j < i {
		j = i
	}
	return d.purchases[i:j:j], ctx.Err()
}

// FirstEvent is the time of the project's earliest event in its tables.
func (d *projectData) FirstEvent() (time.Time, bool) {
	if !d.hasFirst {
		return time.Time{}, false
	}
	return time.UnixMilli(d.first), true
}

// firstEventPtr is FirstEvent as ResolvePeriod takes it.
func (d *projectData) firstEventPtr() *time.Time {
	t, ok := d.FirstEvent()
	if !ok {
		return nil
	}
	return &t
}

// errStopScan ends an events scan early.
var errStopScan = errors.New("scan stopped")

// Events calls fn with every event whose time is in [from, to), in order
// of (time, id), or of (time, id) descending with newestFirst, until fn
// returns false. The row passed to fn is reused: copy what you keep. The
// events are read through the rollups reader (and its cache) day by day.
func (d *projectData) Events(ctx context.Context, from, to time.Time, newestFirst bool, fn func(*eventRow) bool) error {
	if d.snap == nil || !from.Before(to) {
		return nil
	}
	lo, hi := from.UnixMilli(), to.UnixMilli()
	// A day partition is the day in the project's zone; read one day more
	// on each side in case the zone changed since the rows were written.
	firstDay := from.In(d.Loc).AddDate(0, 0, -1).Format(tables.DayLayout)
	lastDay := to.Add(-time.Millisecond).In(d.Loc).AddDate(0, 0, 1).Format(tables.DayLayout)
	var days []string
	for _, p := range d.events {
		if p >= firstDay && p <= lastDay {
			days = append(days, p)
		}
	}
	if newestFirst {
		slices.Reverse(days)
	}
	var rows []eventRow
	for _, day := range days {
		rows = rows[:0]
		err := d.snap.Scan(ctx, tables.Events, rollups.ScanOptions{Partitions: []string{day}, Columns: eventColumns}, func(b rollups.Batch) error {
			var err error
			rows, err = d.appendEvents(rows, b.Record, lo, hi)
			return err
		})
		if err != nil {
			return fmt.Errorf("cannot read the events of %s: %w", day, err)
		}
		slices.SortFunc(rows, func(a, b eventRow) int {
			if c := cmp.Compare(a.Time, b.Time); c != 0 {
				return c
			}
			return compareRef(a.ID, b.ID)
		})
		if newestFirst {
			slices.Reverse(rows)
		}
		for i := range rows {
			if !fn(&rows[i]) {
				return nil
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

var eventColumns = []string{tables.ColUnit, tables.ColTime, tables.ColID, tables.ColName, tables.ColSource,
	tables.ColConsented, tables.ColServer, tables.ColOrigin, tables.ColPath, tables.ColQuery, tables.ColTitle,
	tables.ColReferrer, tables.ColUserID, tables.ColSessionID, tables.ColProperties, tables.ColRevenue,
	tables.ColCurrency, tables.ColCountry, tables.ColRegion, tables.ColDevice, tables.ColBrowser, tables.ColOS,
	tables.ColLocale, tables.ColActions, tables.ColValue, tables.ColValueCurrency, tables.ColPurchase,
	tables.ColVisit, tables.ColChannel}

func (d *projectData) appendEvents(rows []eventRow, rec arrow.Record, lo, hi int64) ([]eventRow, error) {
	c, err := tables.ColumnsOf(rec, eventColumns)
	if err != nil {
		return rows, err
	}
	times := c[1].(*array.Timestamp)
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		t := int64(times.Value(i))
		if t < lo || t >= hi {
			continue
		}
		e := eventRow{
			Unit: tables.RefAt(c[0], i), Time: t, ID: tables.RefAt(c[2], i), Name: tables.StrAt(c[3], i), Source: tables.StrAt(c[4], i),
			Consented: tables.BoolAt(c[5], i), Server: tables.BoolAt(c[6], i), Origin: tables.StrAt(c[7], i), Path: tables.StrAt(c[8], i),
			Query: tables.StrAt(c[9], i), Title: tables.StrAt(c[10], i), Referrer: tables.StrAt(c[11], i), UserID: tables.StrAt(c[12], i),
			SessionID: tables.RefAt(c[13], i), Properties: tables.StrAt(c[14], i), Revenue: tables.StrAt(c[15], i),
			Currency: tables.StrAt(c[16], i), Country: tables.StrAt(c[17], i), Region: tables.StrAt(c[18], i), Device: tables.StrAt(c[19], i),
			Browser: tables.StrAt(c[20], i), OS: tables.StrAt(c[21], i), Locale: tables.StrAt(c[22], i), Actions: tables.StrAt(c[23], i),
			ValueCurrency: tables.StrAt(c[25], i), Purchase: tables.BoolAt(c[26], i), Visit: tables.RefAt(c[27], i),
			Channel: tables.StrAt(c[28], i), Person: noPerson,
		}
		e.Value, e.HasValue = tables.Int64At(c[24], i)
		if e.Channel != "" && e.Visit == (ref{}) {
			e.Visit = e.SessionID
		}
		if e.Consented {
			switch {
			case e.UserID != "":
				if p, ok := d.Person(UserRef(d.Project.ID, e.UserID)); ok {
					e.Person = p
				}
			default:
				e.Person = d.personOf(e.Unit)
			}
		}
		rows = append(rows, e)
	}
	return rows, nil
}

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

func sortVisits(v []visitRow) {
	if slices.IsSortedFunc(v, compareVisits) {
		return
	}
	slices.SortFunc(v, compareVisits)
}

func compareVisits(a, b visitRow) int {
	if c := cmp.Compare(a.Start, b.Start); c != 0 {
		return c
	}
	return compareRef(a.ID, b.ID)
}

func compareConversions(a, b conversionRow) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	if c := compareRef(a.EventID, b.EventID); c != 0 {
		return c
	}
	return strings.Compare(a.Action, b.Action)
}

// Columns read per table, in the order the decoders index them.
var (
	peopleColumns = []string{tables.ColRef, tables.ColUserID, tables.ColKnown, tables.ColName,
		tables.ColEmail, tables.ColStage, tables.ColFirstSeen, tables.ColLastSeen, tables.ColVisits,
		tables.ColActiveDays, tables.ColEvents, tables.ColPageviews, tables.ColOrders, tables.ColRevenue,
		tables.ColValue, tables.ColFTChannel, tables.ColFTSource, tables.ColFTMedium, tables.ColFTCampaign,
		tables.ColFTLanding, tables.ColFTAdPlatform, tables.ColLTChannel, tables.ColLTSource, tables.ColLTMedium,
		tables.ColLTCampaign, tables.ColLTLanding, tables.ColLTAdPlatform, tables.ColCountry, tables.ColRegion,
		tables.ColDevice, tables.ColBrowser, tables.ColOS, tables.ColLocale, tables.ColLastPath, tables.ColTraits,
		tables.ColBrowsers, tables.ColSharedBrowser, tables.ColFirstPurchase, tables.ColIntent}
	identityColumns = []string{tables.ColUnit, tables.ColPerson}
	visitColumns    = []string{tables.ColUnit, tables.ColStart, tables.ColID, tables.ColEnd, tables.ColPerson,
		tables.ColSession, tables.ColEvents, tables.ColPageviews, tables.ColConsented, tables.ColChannel,
		tables.ColSource, tables.ColMedium, tables.ColCampaign, tables.ColTerm, tables.ColContent,
		tables.ColAdPlatform, tables.ColClickID, tables.ColReferrerHost, tables.ColReferrerName,
		tables.ColLandingHost, tables.ColLandingPath, tables.ColExitPath, tables.ColCountry, tables.ColRegion,
		tables.ColDevice, tables.ColBrowser, tables.ColOS, tables.ColLocale, tables.ColSourceID}
	conversionColumns = []string{tables.ColAction, tables.ColTime, tables.ColEventID, tables.ColRole,
		tables.ColOwner, tables.ColUnit, tables.ColVisit, tables.ColValue, tables.ColCurrency, tables.ColConsented}
)

func decodePeople(pc *partCache, rec arrow.Record) error {
	c, err := tables.ColumnsOf(rec, peopleColumns)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		p := personRow{
			Ref: tables.RefAt(c[0], i), UserID: tables.StrAt(c[1], i), Known: tables.BoolAt(c[2], i),
			Name: tables.StrAt(c[3], i), HasName: !c[3].IsNull(i), Email: tables.StrAt(c[4], i), HasEmail: !c[4].IsNull(i),
			Stage: tables.StrAt(c[5], i), FirstSeen: tables.TimeAt(c[6], i), LastSeen: tables.TimeAt(c[7], i),
			FirstTouch: touch{tables.StrAt(c[15], i), tables.StrAt(c[16], i), tables.StrAt(c[17], i), tables.StrAt(c[18], i), tables.StrAt(c[19], i), tables.StrAt(c[20], i)},
			LastTouch:  touch{tables.StrAt(c[21], i), tables.StrAt(c[22], i), tables.StrAt(c[23], i), tables.StrAt(c[24], i), tables.StrAt(c[25], i), tables.StrAt(c[26], i)},
			Country:    tables.StrAt(c[27], i), Region: tables.StrAt(c[28], i), Device: tables.StrAt(c[29], i), Browser: tables.StrAt(c[30], i),
			OS: tables.StrAt(c[31], i), Locale: tables.StrAt(c[32], i), LastPath: tables.StrAt(c[33], i), Traits: tables.StrAt(c[34], i),
			SharedBrowser: tables.BoolAt(c[36], i), FirstPurchase: tables.TimeAt(c[37], i), Intent: tables.BoolAt(c[38], i),
		}
		p.FirstCh, p.LastCh = channelIndex(p.FirstTouch.Channel), channelIndex(p.LastTouch.Channel)
		p.Visits, _ = tables.Int64At(c[8], i)
		p.ActiveDays, _ = tables.Int64At(c[9], i)
		p.Events, _ = tables.Int64At(c[10], i)
		p.Pageviews, _ = tables.Int64At(c[11], i)
		p.Orders, _ = tables.Int64At(c[12], i)
		p.Value, _ = tables.Int64At(c[14], i)
		p.Browsers, _ = tables.Int64At(c[35], i)
		if s := tables.StrAt(c[13], i); s != "" {
			if err := json.Unmarshal([]byte(s), &p.Revenue); err != nil {
				return fmt.Errorf("cannot read the revenue of person %x: %w", p.Ref, err)
			}
		}
		if p.Revenue == nil {
			p.Revenue = []Money{}
		}
		pc.people = append(pc.people, p)
	}
	return nil
}

func decodeIdentities(pc *partCache, rec arrow.Record) error {
	c, err := tables.ColumnsOf(rec, identityColumns)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		pc.units = append(pc.units, tables.RefAt(c[0], i))
		pc.owners = append(pc.owners, tables.RefAt(c[1], i))
	}
	return nil
}

func decodeVisits(pc *partCache, rec arrow.Record) error {
	c, err := tables.ColumnsOf(rec, visitColumns)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		v := visitRow{
			Unit: tables.RefAt(c[0], i), Start: tables.TimeAt(c[1], i), ID: tables.RefAt(c[2], i), End: tables.TimeAt(c[3], i),
			PersonRef: tables.RefAt(c[4], i), Session: tables.BoolAt(c[5], i), Events: tables.Int32At(c[6], i), Pageviews: tables.Int32At(c[7], i),
			Consented: tables.BoolAt(c[8], i), Channel: tables.StrAt(c[9], i), Source: tables.StrAt(c[10], i), Medium: tables.StrAt(c[11], i),
			Campaign: tables.StrAt(c[12], i), Term: tables.StrAt(c[13], i), Content: tables.StrAt(c[14], i), AdPlatform: tables.StrAt(c[15], i),
			ClickID: tables.StrAt(c[16], i), ReferrerHost: tables.StrAt(c[17], i), ReferrerName: tables.StrAt(c[18], i),
			LandingHost: tables.StrAt(c[19], i), LandingPath: tables.StrAt(c[20], i), ExitPath: tables.StrAt(c[21], i),
			Country: tables.StrAt(c[22], i), Region: tables.StrAt(c[23], i), Device: tables.StrAt(c[24], i), Browser: tables.StrAt(c[25], i),
			OS: tables.StrAt(c[26], i), Locale: tables.StrAt(c[27], i), SourceID: tables.StrAt(c[28], i), Person: noPerson,
		}
		if v.PersonRef == (ref{}) {
			v.PersonRef = v.Unit
		}
		pc.visits = append(pc.visits, v)
	}
	return nil
}

func decodeConversions(pc *partCache, rec arrow.Record) error {
	c, err := tables.ColumnsOf(rec, conversionColumns)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		cv := conversionRow{
			Action: tables.StrAt(c[0], i), Time: tables.TimeAt(c[1], i), EventID: tables.RefAt(c[2], i), Role: tables.StrAt(c[3], i),
			Owner: tables.RefAt(c[4], i), Unit: tables.RefAt(c[5], i), Visit: tables.RefAt(c[6], i), Currency: tables.StrAt(c[8], i),
			Consented: tables.BoolAt(c[9], i), Person: noPerson,
		}
		cv.Value, cv.HasValue = tables.Int64At(c[7], i)
		if cv.Owner == (ref{}) {
			cv.Owner = cv.Unit
		}
		pc.convs = append(pc.convs, cv)
	}
	return nil
}

// The one event-filter matcher of every endpoint (overview, events,
// channels). Filters choose people through their visits: the fields that
// say how a visit arrived (channel, utm_*, referrer_host, click_source)
// are read from the event's visit (its touch), empty for an event without
// a visit; every other field is read from the event itself.

// visitFilterFields are the event-filter fields read from the visit.
var visitFilterFields = map[string]bool{
	"channel": true, "utm_source": true, "utm_medium": true, "utm_campaign": true, "utm_term": true,
	"utm_content": true, "referrer_host": true, "click_source": true,
}

// eventMatcher holds event filters (all must hold), split into those read
// from the visit and those read from the event.
type eventMatcher struct {
	visit, event []Filter
}

func newEventMatcher(fs []Filter) *eventMatcher {
	m := &eventMatcher{}
	for _, f := range fs {
		if visitFilterFields[f.Field] {
			m.visit = append(m.visit, f)
		} else {
			m.event = append(m.event, f)
		}
	}
	return m
}

// empty reports whether there is no filter.
func (m *eventMatcher) empty() bool { return len(m.visit)+len(m.event) == 0 }

// matchVisit reports whether the visit (nil: an event without one) holds
// the visit-level filters.
func (m *eventMatcher) matchVisit(v *visitRow) bool {
	for i := range m.visit {
		f := &m.visit[i]
		if !testOp(f, visitValue(v, f.Field), nil, false) {
			return false
		}
	}
	return true
}

// match reports whether the event, with its visit (nil when it has none),
// holds every filter.
func (m *eventMatcher) match(e *eventRow, v *visitRow) bool {
	return m.matchVisit(v) && m.matchEvent(e)
}

// visitValue is a visit-level field of v ("" for nil).
func visitValue(v *visitRow, field string) string {
	if v == nil {
		return ""
	}
	switch field {
	case "channel":
		return v.Channel
	case "utm_source":
		if v.Medium == "" && v.Campaign == "" && v.Term == "" && v.Content == "" && v.Source == v.ReferrerHost {
			return "" // the source is the referring host, not a tag
		}
		return v.Source
	case "utm_medium":
		return v.Medium
	case "utm_campaign":
		return v.Campaign
	case "utm_term":
		return v.Term
	case "utm_content":
		return v.Content
	case "referrer_host":
		return strings.TrimPrefix(strings.ToLower(v.ReferrerHost), "www.")
	case "click_source":
		return v.ClickID
	}
	return ""
}

// matchEvent reports whether e holds the event-level filters.
func (m *eventMatcher) matchEvent(e *eventRow) bool {
	var props map[string]any
	for i := range m.event {
		f := &m.event[i]
		var v string
		var raw any
		isProp := false
		switch f.Field {
		case "event_name":
			v = e.Name
		case "page_path":
			v = e.Path
		case "page_host":
			v = hostOf(e.Origin)
		case "region":
			v = e.Region
		case "country":
			v = e.Country
		case "device_type":
			v = e.Device
		case "browser":
			v = e.Browser
		case "os":
			v = e.OS
		case "locale":
			v = e.Locale
		case "source_type":
			v = "first_party_web"
			if e.Server {
				v = "first_party_server"
			}
		case "collection_mode":
			v = "consentless"
			if e.Consented {
				v = "full"
			}
		default:
			isProp = true
			if props == nil {
				props = map[string]any{}
				if e.Properties != "" {
					d := json.NewDecoder(strings.NewReader(e.Properties))
					d.UseNumber()
					_ = d.Decode(&props)
				}
			}
			var ok bool
			raw, ok = props[f.Property]
			if ok {
				switch x := raw.(type) {
				case string:
					v = x
				case json.Number:
					v = x.String()
				case bool:
					v = strconv.FormatBool(x)
				case nil:
				default:
					b, _ := json.Marshal(x)
					v = string(b)
				}
			}
		}
		if !testOp(f, v, raw, isProp) {
			return false
		}
	}
	return true
}

// testOp applies one operator to a field's value (raw is a property's
// decoded JSON value, for gt and lt).
func testOp(f *Filter, v string, raw any, isProp bool) bool {
	switch f.Op {
	case "is":
		return v == f.Value
	case "is_not":
		return v != f.Value
	case "contains":
		return strings.Contains(strings.ToLower(v), strings.ToLower(f.Value))
	case "not_contains":
		return !strings.Contains(strings.ToLower(v), strings.ToLower(f.Value))
	case "starts_with":
		return strings.HasPrefix(v, f.Value)
	case "matches":
		return wildcard(f.Value, v)
	case "set":
		return v != ""
	case "not_set":
		return v == ""
	case "gt", "lt":
		var n float64
		if isProp {
			num, ok := raw.(json.Number)
			if !ok {
				return false
			}
			x, err := num.Float64()
			if err != nil {
				return false
			}
			n = x
		} else {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return false
			}
			n = x
		}
		if f.Op == "gt" {
			return n > f.Number
		}
		return n < f.Number
	}
	return false
}

// wildcard matches s against pattern, where * stands for any run of
// characters and everything else is literal.
func wildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return s == pattern
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// hostOf is the host of scheme://host[:port]/path, lower case, without
// www. and port.
func hostOf(u string) string {
	if u == "" {
		return ""
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.LastIndexByte(u, ':'); i >= 0 && !strings.HasSuffix(u, "]") {
		u = u[:i]
	}
	return strings.TrimPrefix(strings.ToLower(u), "www.")
}

// visitChoice is the visits of a window that event filters chose, by
// index in the visits table; a nil choice chooses every visit.
type visitChoice struct {
	d    *projectData
	base int
	keep []bool
}

// has reports whether visit i (an index of d.visits) is chosen.
func (c *visitChoice) has(i int) bool {
	return c == nil || (i >= c.base && i < c.base+len(c.keep) && c.keep[i-c.base])
}

// hasID reports whether the visit with this id is chosen (false for the
// zero id when filtering).
func (c *visitChoice) hasID(id ref) bool {
	if c == nil {
		return true
	}
	i, ok := c.d.visitIndex(id)
	return ok && c.has(i)
}

// chosenVisits returns the visits starting in w that the filters choose:
// the visit holds the visit-level filters and, when there are event-level
// ones, one of its events (whenever in the visit) holds them. nil without
// filters.
func (d *projectData) chosenVisits(ctx context.Context, w Window, fs []Filter) (*visitChoice, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	m := newEventMatcher(fs)
	i, j := d.visitRange(w.From, w.To)
	c := &visitChoice{d: d, base: i, keep: make([]bool, j-i)}
	if len(m.event) == 0 {
		for k := i; k < j; k++ {
			c.keep[k-i] = m.matchVisit(&d.visits[k])
		}
		return c, nil
	}
	// Candidates hold the visit-level filters; one of their events must
	// hold the others. Events of a visit may run past the window's end.
	cand := make([]bool, j-i)
	end, n := w.To.UnixMilli(), 0
	for k := i; k < j; k++ {
		if v := &d.visits[k]; m.matchVisit(v) {
			cand[k-i] = true
			end = max(end, v.End+1)
			n++
		}
	}
	if n == 0 {
		return c, nil
	}
	err := d.Events(ctx, w.From, time.UnixMilli(end), false, func(e *eventRow) bool {
		if e.Visit == (ref{}) {
			return true
		}
		k, ok := d.visitIndex(e.Visit)
		if !ok || k < i || k >= j || !cand[k-i] || c.keep[k-i] {
			return true
		}
		if m.matchEvent(e) {
			c.keep[k-i] = true
		}
		return true
	})
	return c, err
}
