package facts

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"slices"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/records"
)

// Buckets is the number of partitions the people, identities and members
// tables are split into, by the first hex digit of the ref: the table
// contract's (tables.Buckets, whose BucketName labels them).
const Buckets = tables.Buckets

// Bucket returns the bucket of a ref.
func Bucket(r Ref) int { return int(r[0] >> 4) }

// EventRow is a row of the events table: the event as kept (the archive
// that replay reads) and what it belongs to. It refers to the engine's
// copy of the event, which never changes, and to the strings of its day as
// they were at the Flush: it can be read on another goroutine while the
// engine goes on (Fill), without a copy of the event being made at the
// Flush.
type EventRow struct {
	ev   *event
	strs *arenaView
	// Unit is the ref of the browser, the user (no browser) or the
	// consentless visitor of the event; zero when none.
	Unit Ref
	// Visit is the id of the event's visit and Channel its channel; zero
	// and "" when the event belongs to no visit.
	Visit   Ref
	Channel string
}

// Fill sets out to the event of the row. Its strings point into the
// engine's memory of the event's day (no copy).
func (r *EventRow) Fill(out *Event) { r.ev.exportFrom(*r.strs, out) }

// Event returns the event of the row (Fill).
func (r *EventRow) Event() Event {
	var e Event
	r.Fill(&e)
	return e
}

// Time and ID are the row's event's.
func (r *EventRow) Time() int64      { return r.ev.Time }
func (r *EventRow) ID() records.UUID { return r.ev.ID }

// MarshalJSON writes the row as its event's fields and Unit, Visit,
// Channel (for tests that compare rows).
func (r EventRow) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Event
		Unit, Visit Ref
		Channel     string
	}{r.Event(), r.Unit, r.Visit, r.Channel})
}

// SortEventRows puts rows in table order: unit, time, id.
func SortEventRows(rows []EventRow) {
	if len(rows) < 2 {
		return
	}
	keys := make([]eventKey, len(rows))
	sorted := true
	for i := range rows {
		k := &keys[i]
		k.unit, k.id, k.time, k.row = rows[i].Unit, rows[i].ev.ID, rows[i].ev.Time, int32(i)
		if sorted && i > 0 && compareEventKeys(&keys[i-1], k) > 0 {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(keys, func(a, b eventKey) int { return compareEventKeys(&a, &b) })
	out := make([]EventRow, len(rows))
	for i := range keys {
		out[i] = rows[keys[i].row]
	}
	copy(rows, out)
}

// VisitRow is a row of the visits table.
type VisitRow struct {
	ID Ref
	// Unit is the browser of the visit (or the user, or the consentless
	// visitor); zero when none.
	Unit Ref
	// Person is the person the visit is credited to in lists: the person
	// of the event its touch was decided from, else of its first event
	// with one; zero when none (consentless, server events without ids).
	// A visit with events of several persons counts in each one's visits
	// (PersonRow.Visits).
	Person      Ref
	Session     bool // the visit is a sessionId
	Start, End  int64
	Events      int32
	Pageviews   int32
	Consented   bool
	Touch       channels.Touch
	LandingHost string
	LandingPath string
	ExitPath    string // "" for consentless visits
	Client      *Client
	// Deleted marks the deletion of the visit ID from its partition (it
	// moved to another day, or vanished); the other fields are zero.
	Deleted bool
}

// ConversionRow is a row of the conversions table: one event that matched
// one action.
type ConversionRow struct {
	Time    int64
	EventID records.UUID
	Action  string
	Role    string // "" for an action that is not a goal (or no longer known)
	// Owner is the part the event counts for (user ref, else browser ref;
	// zero for consentless events); Unit and Visit as in the events table.
	Owner, Unit, Visit Ref
	HasValue           bool
	Value              int64
	Currency           string
	Consented          bool
}

// IdentityRow is a row of the identities table: a browser that a person
// claimed (signed in on it), and that person. Every other browser, and
// every user, is its own person: its ref is the person's ref.
type IdentityRow struct {
	Unit   Ref // the browser
	Person Ref // the user who claimed it
	// ClaimedAt is the time of the sign-in that made the browser part of
	// its person.
	ClaimedAt int64
	// Shared tells a browser on which more than one person signed in.
	Shared bool
	// Deleted marks a browser no longer claimed (Person is zero).
	Deleted bool
}

// MemberRow is a row of the segment members table.
type MemberRow struct {
	Segment string // the segment's opaque ref
	Person  Ref
	// Deleted marks a person no longer in the segment.
	Deleted bool
}

// Changes holds what changed since the previous Flush, by partition.
//
// EventDays and ConversionDays hold the full contents of their days,
// except for the days of EventAppend: their rows are to be added to the
// partitions' rows (events were added, and no row output before changed).
//
// VisitDays, People, Identities and Members are the keyed tables: their
// rows are the rows that changed, and deletions (rows with Deleted set)
// of rows output before, to be merged into the partitions by key (visits
// by ID, people by Ref, identities by Unit, members by Segment and
// Person); a partition in the Whole set of its table instead holds its
// full contents, which replace the partition.
type Changes struct {
	EventDays      map[int32][]EventRow
	ConversionDays map[int32][]ConversionRow
	EventAppend    map[int32]bool
	VisitDays      map[int32][]VisitRow
	People         map[int][]*PersonRow
	Identities     map[int][]IdentityRow
	Members        map[int][]MemberRow

	WholeVisitDays  map[int32]bool
	WholePeople     map[int]bool
	WholeIdentities map[int]bool
	WholeMembers    map[int]bool

	// EraseRows are days not in memory (cold or final) whose partitions
	// of the events and conversions tables lose the rows of the units
	// named (an erased person's browsers and user, sorted); their other
	// rows stay as stored. ErasedVisits are the ids of the erased visits
	// of such days, whose deletions VisitDays holds.
	EraseRows    map[int32][]Ref
	ErasedVisits map[int32][]Ref
	// State are the engine's state rows that changed (state.go), by
	// bucket of their ref: a row with nil Data is deleted (an erased
	// part). StateDays are the rows of the days' summaries and the
	// engine's row (nil Data: deleted). StateWhole: State and StateDays
	// hold every row, which replace those stored.
	State      map[int][]StateRow
	StateDays  []StateRow
	StateWhole bool

	// Activity are the rows of the days whose sets of active persons
	// changed (activity.go), each day's four; WholeActivity: every day's,
	// which replace the table.
	Activity      map[int32][]ActivityRow
	WholeActivity bool

	// Reclaimed are the rows of cold visits VisitDays holds because their
	// person changed (Engine.Reclaim), by day: Restore has them written
	// again (DropRows keeps them).
	Reclaimed map[int32][]VisitRow
}

// DropRows lets go of the rows of the events, conversions, visits and
// people partitions, keeping their keys (all Restore reads) and the
// identity and member rows.
func (c *Changes) DropRows() {
	for d := range c.EventDays {
		c.EventDays[d] = nil
	}
	for d := range c.ConversionDays {
		c.ConversionDays[d] = nil
	}
	for d := range c.VisitDays {
		c.VisitDays[d] = nil
	}
	for b := range c.People {
		c.People[b] = nil
	}
	for d := range c.Activity {
		c.Activity[d] = nil
	}
	for b, rows := range c.State {
		// A copy of the keys: rows is shared with the commit's records.
		keys := make([]StateRow, len(rows))
		for i, r := range rows {
			keys[i] = StateRow{Ref: r.Ref, Kind: r.Kind, Sub: r.Sub}
		}
		c.State[b] = keys
	}
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool {
	return len(c.EventDays) == 0 && len(c.VisitDays) == 0 && len(c.People) == 0 &&
		len(c.Identities) == 0 && len(c.Members) == 0 && len(c.EraseRows) == 0 &&
		len(c.State) == 0 && len(c.StateDays) == 0
}

// sortVisitRows puts rows in table order (unit, start, id), sorting
// indexes rather than the large rows.
func sortVisitRows(rows []VisitRow) {
	idx := make([]int32, len(rows))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int {
		a, b := &rows[i], &rows[j]
		if c := bytesCompare16(&a.Unit, &b.Unit); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Start, b.Start); c != 0 {
			return c
		}
		return bytesCompare16(&a.ID, &b.ID)
	})
	sorted := make([]VisitRow, len(rows))
	for i, j := range idx {
		sorted[i] = rows[j]
	}
	copy(rows, sorted)
}

// eventKey is a row's place in table order, copied out of the row so
// that sorting compares contiguous keys instead of following pointers.
type eventKey struct {
	unit Ref
	id   Ref
	time int64
	row  int32
}

func compareEventKeys(a, b *eventKey) int {
	if c := bytesCompare16(&a.unit, &b.unit); c != 0 {
		return c
	}
	if c := cmp.Compare(a.time, b.time); c != 0 {
		return c
	}
	return bytesCompare16(&a.id, &b.id)
}

// bytesCompare16 compares two 16-byte refs as big-endian numbers, which
// is their byte order.
func bytesCompare16(a, b *Ref) int {
	ah, bh := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if ah != bh {
		return cmp.Compare(ah, bh)
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}
