package tables

import (
	"github.com/apache/arrow/go/v17/arrow"

	"github.com/mfhq/mf/rollups"
)

var (
	tsType   = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	uuidType = &arrow.FixedSizeBinaryType{ByteWidth: 16}
	str      = arrow.BinaryTypes.String
	i64      = arrow.PrimitiveTypes.Int64
	i32      = arrow.PrimitiveTypes.Int32
	boolean  = arrow.FixedWidthTypes.Boolean
)

func field(name string, t arrow.DataType, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: nullable}
}

// The schemas of the tables, in column order. Every string column is
// nullable: null where the fact is absent.
var EventsSchema = arrow.NewSchema([]arrow.Field{
	field(ColUnit, uuidType, true),
	field(ColTime, tsType, false),
	field(ColID, uuidType, false),
	field(ColName, str, false),
	field(ColSource, str, true),
	field(ColConsented, boolean, false),
	field(ColServer, boolean, false),
	field(ColOrigin, str, true),
	field(ColPath, str, true),
	field(ColQuery, str, true),
	field(ColTitle, str, true),
	field(ColReferrer, str, true),
	field(ColUserID, str, true),
	field(ColSessionID, uuidType, true),
	field(ColProperties, str, true),
	field(ColRevenue, str, true),
	field(ColCurrency, str, true),
	field(ColCountry, str, true),
	field(ColRegion, str, true),
	field(ColDevice, str, true),
	field(ColBrowser, str, true),
	field(ColOS, str, true),
	field(ColLocale, str, true),
	field(ColActions, str, true),
	field(ColValue, i64, true),
	field(ColValueCurrency, str, true),
	field(ColPurchase, boolean, false),
	field(ColVisit, uuidType, true),
	field(ColChannel, str, true),
}, nil)

var VisitsSchema = arrow.NewSchema([]arrow.Field{
	field(ColUnit, uuidType, true),
	field(ColStart, tsType, false),
	field(ColID, uuidType, false),
	field(ColEnd, tsType, false),
	field(ColPerson, uuidType, true),
	field(ColSession, boolean, false),
	field(ColEvents, i32, false),
	field(ColPageviews, i32, false),
	field(ColConsented, boolean, false),
	field(ColChannel, str, false),
	field(ColSource, str, true),
	field(ColMedium, str, true),
	field(ColCampaign, str, true),
	field(ColTerm, str, true),
	field(ColContent, str, true),
	field(ColAdPlatform, str, true),
	field(ColClickID, str, true),
	field(ColReferrerHost, str, true),
	field(ColReferrerName, str, true),
	field(ColLandingHost, str, true),
	field(ColLandingPath, str, true),
	field(ColExitPath, str, true),
	field(ColCountry, str, true),
	field(ColRegion, str, true),
	field(ColDevice, str, true),
	field(ColBrowser, str, true),
	field(ColOS, str, true),
	field(ColLocale, str, true),
	field(ColSourceID, str, true),
	field(rollups.RevColumn, i64, false),
	field(rollups.DeletedColumn, boolean, false),
}, nil)

var ConversionsSchema = arrow.NewSchema([]arrow.Field{
	field(ColAction, str, false),
	field(ColTime, tsType, false),
	field(ColEventID, uuidType, false),
	field(ColRole, str, true),
	field(ColOwner, uuidType, true),
	field(ColUnit, uuidType, true),
	field(ColVisit, uuidType, true),
	field(ColValue, i64, true),
	field(ColCurrency, str, true),
	field(ColConsented, boolean, false),
}, nil)

// FirstTouchColumns and LastTouchColumns are a person's first and last
// touch in the people table: channel, source, medium, campaign, landing
// page, ad platform.
var (
	FirstTouchColumns = []string{ColFTChannel, ColFTSource, ColFTMedium, ColFTCampaign, ColFTLanding, ColFTAdPlatform}
	LastTouchColumns  = []string{ColLTChannel, ColLTSource, ColLTMedium, ColLTCampaign, ColLTLanding, ColLTAdPlatform}
)

// touchFields are the fields of a touch's columns: the channel is never
// null.
func touchFields(cols []string) []arrow.Field {
	out := make([]arrow.Field, len(cols))
	for i, c := range cols {
		out[i] = field(c, str, i != 0)
	}
	return out
}

var PeopleSchema = arrow.NewSchema(concat(
	[]arrow.Field{
		field(ColRef, uuidType, false),
		field(ColUserID, str, true),
		field(ColKnown, boolean, false),
		field(ColName, str, true),
		field(ColEmail, str, true),
		field(ColStage, str, false),
		field(ColFirstSeen, tsType, false),
		field(ColLastSeen, tsType, false),
		field(ColVisits, i64, false),
		field(ColActiveDays, i64, false),
		field(ColEvents, i64, false),
		field(ColPageviews, i64, false),
		field(ColOrders, i64, false),
		field(ColRevenue, str, true),
		field(ColValue, i64, false),
	},
	touchFields(FirstTouchColumns),
	touchFields(LastTouchColumns),
	[]arrow.Field{
		field(ColCountry, str, true),
		field(ColRegion, str, true),
		field(ColDevice, str, true),
		field(ColBrowser, str, true),
		field(ColOS, str, true),
		field(ColLocale, str, true),
		field(ColLastPath, str, true),
		field(ColTraits, str, true),
		field(ColBrowsers, i64, false),
		field(ColSharedBrowser, boolean, false),
		field(ColFirstPurchase, tsType, true),
		field(ColIntent, boolean, false),
		field(rollups.RevColumn, i64, false),
		field(rollups.DeletedColumn, boolean, false),
	},
), nil)

var IdentitiesSchema = arrow.NewSchema([]arrow.Field{
	field(ColUnit, uuidType, false),
	field(ColPerson, uuidType, false),
	field(ColClaimedAt, tsType, false),
	field(ColShared, boolean, false),
	field(rollups.RevColumn, i64, false),
	field(rollups.DeletedColumn, boolean, false),
}, nil)

var MembersSchema = arrow.NewSchema([]arrow.Field{
	field(ColSegment, str, false),
	field(ColPerson, uuidType, false),
	field(rollups.RevColumn, i64, false),
	field(rollups.DeletedColumn, boolean, false),
}, nil)

// StateSchema is the processor's own table of its engine's state
// (docs/processor.md, "State rows"): a row per part (browser or user),
// keyed by its ref, and a row per day and the engine's, in partition
// StatePartitionDays. data is the processor's own encoding.
var StateSchema = arrow.NewSchema([]arrow.Field{
	field(ColRef, uuidType, false),
	field(ColKind, i32, false),
	field(ColSub, uuidType, false),
	field(ColData, arrow.BinaryTypes.Binary, true),
	field(rollups.RevColumn, i64, false),
	field(rollups.DeletedColumn, boolean, false),
}, nil)

// ActivitySchema is the table of the persons active per day (partition:
// the day): a row per kind of set (people, known, new, buyers), the
// day's first moment in the zone it was cut in, the set's size and its
// members, person numbers as a roaring bitmap in its portable format
// (docs/rollups.md, "Activity").
var ActivitySchema = arrow.NewSchema([]arrow.Field{
	field(ColKind, str, false),
	field(ColStart, tsType, false),
	field(ColCount, i64, false),
	field(ColPeople, arrow.BinaryTypes.Binary, false),
}, nil)

var SegmentsSchema = arrow.NewSchema([]arrow.Field{
	field(ColSegment, str, false),
	field(ColID, str, false),
	field(ColBuiltAt, tsType, false),
	field(ColMembers, i64, false),
}, nil)

func concat(parts ...[]arrow.Field) []arrow.Field {
	var out []arrow.Field
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
