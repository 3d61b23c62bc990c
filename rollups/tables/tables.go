package tables

import "github.com/mfhq/mf/rollups"

// Table names.
const (
	Events      = "events"
	Visits      = "visits"
	Conversions = "conversions"
	People      = "people"
	Identities  = "identities"
	Members     = "segment_members"
	Segments    = "segments"
	// Activity holds, per day, the sets of persons active on it (as
	// person numbers, roaring bitmaps): docs/rollups.md, "Activity".
	Activity = "activity"
	// State is the processor's own: no reader but the processor reads
	// it, and it is not part of the reporting data.
	State = "processor_state"
)

// StatePartitionDays is the partition of the state table holding the
// days' summaries and the engine's row; the parts' rows are in bucket
// partitions (BucketName) by ref.
const StatePartitionDays = "days"

// Names returns the names of every table, in the order above.
func Names() []string {
	return []string{Events, Visits, Conversions, People, Identities, Members, Segments, Activity}
}

// EventsRowGroupRows is the row group size of the events table: the
// processor reads a browser's rows of a day back (a sign-in that may move
// its claim) with a key range on the unit, which reads whole row groups;
// at the store's 131,072 rows a day of a busy site is one group.
const EventsRowGroupRows = 8192

// All returns the definitions of the tables, a new map on every call.
// Visits, people, identities and segment members are keyed
// (rollups.Table.Key): a commit adds the rows that changed, with the
// commit's rev, instead of rewriting their partitions.
func All() map[string]*rollups.Table {
	return map[string]*rollups.Table{
		Events: {Name: Events, Schema: EventsSchema, SortKey: []string{ColUnit, ColTime, ColID},
			NoDictionary: []string{ColTime, ColID, ColUnit, ColSessionID}, RowGroupRows: EventsRowGroupRows},
		Visits: {Name: Visits, Schema: VisitsSchema, SortKey: []string{ColUnit, ColStart, ColID},
			NoDictionary: []string{ColStart, ColEnd, ColID, ColUnit, ColPerson}, Key: []string{ColID}},
		Conversions: {Name: Conversions, Schema: ConversionsSchema, SortKey: []string{ColAction, ColTime, ColEventID},
			NoDictionary: []string{ColTime, ColEventID, ColOwner, ColUnit, ColVisit}},
		People: {Name: People, Schema: PeopleSchema, SortKey: []string{ColRef},
			NoDictionary: []string{ColRef, ColFirstSeen, ColLastSeen}, Key: []string{ColRef}},
		Identities: {Name: Identities, Schema: IdentitiesSchema, SortKey: []string{ColUnit},
			NoDictionary: []string{ColUnit, ColClaimedAt}, Key: []string{ColUnit}},
		Members:  {Name: Members, Schema: MembersSchema, SortKey: []string{ColSegment, ColPerson}, Key: []string{ColSegment, ColPerson}},
		Segments: {Name: Segments, Schema: SegmentsSchema, SortKey: []string{ColSegment}},
		Activity: {Name: Activity, Schema: ActivitySchema, SortKey: []string{ColKind}, NoDictionary: []string{ColPeople}},
		State: {Name: State, Schema: StateSchema, SortKey: []string{ColRef, ColKind, ColSub},
			NoDictionary: []string{ColRef, ColSub, ColData}, Key: []string{ColRef, ColKind, ColSub}},
	}
}

// RevOf is the rev of a row of a keyed table written by the commit with
// counter rev: 2·rev+1, and 2·rev for a deletion. A key that moves to
// another partition (a visit whose start moved to another day) leaves a
// deletion in the old one below its new row, so that over the whole
// table, not only within a partition, the highest rev of a key is its row.
func RevOf(rev int64, deleted bool) int64 {
	if deleted {
		return 2 * rev
	}
	return 2*rev + 1
}
