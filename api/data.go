package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/catalog"
)

// The reporting data layer: the processor's tables of a project
// (docs/processor.md, "Tables") as one consistent snapshot. People and
// identities are decoded per snapshot into the person index every report
// counts by (the columns counts, filters and sorts read; the rest of a
// person is read for the people a page shows: people_detail.go); the day-partitioned tables (visits, conversions, the
// events' facts) are read for the days a request asks for, through a
// byte-bounded cache (data_days.go); the events themselves are read
// through the rollups reader (and its column cache) on every call that
// needs them.

// projectData is one consistent snapshot of a project's tables (one
// manifest version), copied per request (each copy pins what its request
// read). It is never modified after it is built.
type projectData struct {
	Project *catalog.Project
	Loc     *time.Location
	// Version and Generation are the manifest's (0: no tables yet).
	Version, Generation int64
	// People holds every person, sorted by ref; the index is the person
	// index used by the other rows.
	People []personRow

	pid        string      // the project of the tables
	peopleRefs []ref       // People[i].Ref, for binary search
	peoplePre  refPrefixes // narrows the search in peopleRefs
	// peopleParts are the people table's partitions (personRow.bucket),
	// peopleSigs their files' signatures (fileSig).
	peopleParts, peopleSigs []string
	// peopleSig is the signature of the people and identities tables:
	// the people index is built again when it changes.
	peopleSig string
	known     bitset      // People[i].Known (people_columns.go)
	firstSeen []int64     // People[i].FirstSeen
	idUnits   []ref       // claimed browsers, sorted
	idPerson  []int32     // their person's index
	idPre     refPrefixes // narrows the search in idUnits
	peopleGen uint64      // identifies this people index (chunks resolved against it)
	first     int64       // earliest event, Unix ms
	hasFirst  bool

	snap        *rollups.Snapshot   // nil without tables
	events      []string            // day partitions of the events table, when days are known whole (not lazy)
	days        map[string]dayParts // visits, conversions, events: day partitions
	rows        *rowCache           // decoded day partitions, shared
	pc          *projectCache       // the project's cache (latest chunk resolutions)
	req         *pins               // the chunks this request read
	memberParts []*partCache        // segment_members partitions
	shared      *dataShared         // lazy indexes and caches of this snapshot
}

// Person returns the person index of a person ref or of a browser ref
// (claimed: its claimer; unclaimed: the browser is the person), false when
// nobody has this ref.
func (d *projectData) Person(r ref) (int32, bool) {
	if i, ok := d.idPre.find(d.idUnits, r); ok {
		if p := d.idPerson[i]; p >= 0 {
			return p, true
		}
	}
	if i, ok := d.peoplePre.find(d.peopleRefs, r); ok {
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

// eventDays returns the events table's day partitions in [first, last]
// (inclusive; shared: do not modify).
func (d *projectData) eventDays(ctx context.Context, first, last string) ([]string, error) {
	if parts := d.days[tables.Events]; parts.lazy != nil {
		days, err := parts.within(ctx, first, last)
		if err != nil {
			return nil, fmt.Errorf("cannot read the events' partitions from %s to %s: %w", first, last, err)
		}
		return days, nil
	}
	var days []string
	for _, p := range d.events {
		if p >= first && p <= last {
			days = append(days, p)
		}
	}
	return days, nil
}

// errStopScan ends an events scan early.
var errStopScan = errors.New("scan stopped")

// personColumns are what eventPersons reads of the events table.
var personColumns = []string{tables.ColUnit, tables.ColTime, tables.ColConsented, tables.ColUserID}

// eventPersons calls fn with the time and person of every consented event
// with a person whose time is in [from, to), in no particular order,
// until fn returns false. It reads the four columns that name the person,
// a batch at a time, and keeps nothing: counting who was active in a day
// of millions of events must not decode the day's events whole (Events).
func (d *projectData) eventPersons(ctx context.Context, from, to time.Time, fn func(t int64, person int32) bool) error {
	if d.snap == nil || !from.Before(to) {
		return nil
	}
	lo, hi := from.UnixMilli(), to.UnixMilli()
	firstDay := from.In(d.Loc).AddDate(0, 0, -1).Format(tables.DayLayout)
	lastDay := to.Add(-time.Millisecond).In(d.Loc).AddDate(0, 0, 1).Format(tables.DayLayout)
	days, err := d.eventDays(ctx, firstDay, lastDay)
	if err != nil || len(days) == 0 {
		return err
	}
	err = d.snap.Scan(ctx, tables.Events, rollups.ScanOptions{Partitions: days, Columns: personColumns, Uncached: true}, func(b rollups.Batch) error {
		c, err := tables.ColumnsOf(b.Record, personColumns)
		if err != nil {
			return err
		}
		times := c[1].(*array.Timestamp)
		for i := range int(b.Record.NumRows()) {
			t := int64(times.Value(i))
			if t < lo || t >= hi || !tables.BoolAt(c[2], i) {
				continue
			}
			p := noPerson
			if uid := tables.StrAt(c[3], i); uid != "" {
				if q, ok := d.Person(UserRef(d.Project.ID, uid)); ok {
					p = q
				}
			} else {
				p = d.personOf(tables.RefAt(c[0], i))
			}
			if p >= 0 && !fn(t, p) {
				return errStopScan
			}
		}
		return ctx.Err()
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the events' people from %s to %s: %w", days[0], days[len(days)-1], err)
	}
	return nil
}

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
	days, err := d.eventDays(ctx, firstDay, lastDay)
	if err != nil {
		return err
	}
	if newestFirst {
		days = slices.Clone(days)
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
