package processor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
)

// The tables the processor writes are defined by rollups/tables; these
// are their names as the processor's API has them.
const (
	TableEvents      = tables.Events
	TableVisits      = tables.Visits
	TableConversions = tables.Conversions
	TablePeople      = tables.People
	TableIdentities  = tables.Identities
	TableMembers     = tables.Members
	TableSegments    = tables.Segments
	TableState       = tables.State
	TableActivity    = tables.Activity
)

// segmentsPartition is the one partition of the segments table.
const segmentsPartition = tables.SegmentsPartition

// Tables returns the definitions of the processor's tables
// (tables.All).
func Tables() map[string]*rollups.Table { return tables.All() }

// revOf is the rev of a row of a keyed table written by the commit with
// counter rev (checkpoint.Rev): tables.RevOf.
func revOf(rev int64, deleted bool) int64 { return tables.RevOf(rev, deleted) }

// keyedRow appends the rev and deleted columns of a row.
func (b *builder) keyedRow(rev int64, deleted bool) {
	b.i64(revOf(rev, deleted))
	b.bool(deleted)
}

// builder wraps a RecordBuilder with appenders that turn the engine's
// zero values into nulls. A record is built in two passes over the rows
// (buildRecord): the first only measures the bytes of every string
// column, so that the second appends into buffers of the right size
// instead of growing (copying and zeroing) them again and again.
type builder struct {
	rb      *array.RecordBuilder
	col     int
	measure bool
	sizes   []int // string bytes per column, measured
}

// buildRecord builds a record of schema s from n rows that fill appends,
// row by row.
func buildRecord(alloc memory.Allocator, s *arrow.Schema, n int, fill func(b *builder)) arrow.Record {
	return buildRecordMeasured(alloc, s, n, true, fill)
}

// buildRecordMeasured is buildRecord, with the measuring pass only when
// measure is set: rows whose strings cost more to produce twice than a
// string buffer costs to grow (events, read from the engine's arenas)
// are appended in one pass.
func buildRecordMeasured(alloc memory.Allocator, s *arrow.Schema, n int, measure bool, fill func(b *builder)) arrow.Record {
	rb := array.NewRecordBuilder(alloc, s)
	rb.Reserve(n)
	b := &builder{rb: rb, measure: true, sizes: make([]int, s.NumFields())}
	if measure {
		fill(b)
		for i, size := range b.sizes {
			if sb, ok := rb.Field(i).(*array.StringBuilder); ok && size > 0 {
				sb.ReserveData(size)
			}
		}
	}
	b.measure = false
	fill(b)
	return b.record()
}

// skip passes a column in the measuring pass; it reports whether it did.
func (b *builder) skip() bool {
	if b.measure {
		b.col++
	}
	return b.measure
}

func (b *builder) next() array.Builder {
	f := b.rb.Field(b.col)
	b.col++
	return f
}

func (b *builder) row() { b.col = 0 }

func (b *builder) str(s string) {
	if b.measure {
		b.sizes[b.col] += len(s)
		b.col++
		return
	}
	f := b.next().(*array.StringBuilder)
	if s == "" {
		f.AppendNull()
		return
	}
	f.Append(s)
}

func (b *builder) strReq(s string) {
	if b.measure {
		b.sizes[b.col] += len(s)
		b.col++
		return
	}
	b.next().(*array.StringBuilder).Append(s)
}

func (b *builder) uuid(r facts.Ref) {
	if b.skip() {
		return
	}
	f := b.next().(*array.FixedSizeBinaryBuilder)
	if r.IsZero() {
		f.AppendNull()
		return
	}
	f.Append(r[:])
}

func (b *builder) uuidReq(r facts.Ref) {
	if b.skip() {
		return
	}
	b.next().(*array.FixedSizeBinaryBuilder).Append(r[:])
}

func (b *builder) ts(ms int64) {
	if b.skip() {
		return
	}
	b.next().(*array.TimestampBuilder).Append(arrow.Timestamp(ms))
}

func (b *builder) tsOpt(ms int64) {
	if b.skip() {
		return
	}
	f := b.next().(*array.TimestampBuilder)
	if ms == 0 {
		f.AppendNull()
		return
	}
	f.Append(arrow.Timestamp(ms))
}

func (b *builder) i64(v int64) {
	if b.skip() {
		return
	}
	b.next().(*array.Int64Builder).Append(v)
}

func (b *builder) i64Opt(v int64, ok bool) {
	if b.skip() {
		return
	}
	f := b.next().(*array.Int64Builder)
	if !ok {
		f.AppendNull()
		return
	}
	f.Append(v)
}

func (b *builder) i32(v int32) {
	if b.skip() {
		return
	}
	b.next().(*array.Int32Builder).Append(v)
}

func (b *builder) bool(v bool) {
	if b.skip() {
		return
	}
	b.next().(*array.BooleanBuilder).Append(v)
}

func (b *builder) record() arrow.Record {
	r := b.rb.NewRecord()
	b.rb.Release()
	return r
}

// eventsRecord builds the record of rows, which it sorts first (a Flush
// leaves them in no order).
func eventsRecord(alloc memory.Allocator, rows []facts.EventRow) arrow.Record {
	facts.SortEventRows(rows)
	var ev facts.Event
	return buildRecordMeasured(alloc, tables.EventsSchema, len(rows), false, func(b *builder) {
		for i := range rows {
			row := &rows[i]
			row.Fill(&ev)
			r, c := &ev, ev.Client
			b.row()
			b.uuid(row.Unit)
			b.ts(r.Time)
			b.uuidReq(r.ID)
			b.strReq(r.Name)
			b.str(c.Source)
			b.bool(c.Consented)
			b.bool(c.Server)
			b.str(r.Origin)
			b.str(r.Path)
			b.str(r.Query)
			b.str(r.Title)
			b.str(r.Referrer)
			b.str(r.UserID)
			b.uuid(r.SessionID)
			b.str(r.Properties)
			b.str(r.Revenue)
			b.str(r.Currency)
			b.str(c.Country)
			b.str(c.Region)
			b.str(c.Device)
			b.str(c.Browser)
			b.str(c.OS)
			b.str(c.Locale)
			b.str(r.Actions)
			b.i64Opt(r.Value, r.HasValue)
			b.str(r.ValueCurrency)
			b.bool(r.Purchase)
			// A visit from a sessionId is that sessionId: not repeated.
			if row.Visit == r.SessionID {
				b.uuid(facts.Ref{})
			} else {
				b.uuid(row.Visit)
			}
			b.str(row.Channel)
		}
	})
}

func visitsRecord(alloc memory.Allocator, rows []facts.VisitRow, rev int64) arrow.Record {
	return buildRecord(alloc, tables.VisitsSchema, len(rows), func(b *builder) {
		for i := range rows {
			r := &rows[i]
			c := r.Client
			if c == nil {
				c = &facts.Client{}
			}
			b.row()
			b.uuid(r.Unit)
			b.ts(r.Start)
			b.uuidReq(r.ID)
			b.ts(r.End)
			// The person is the unit itself unless it differs.
			if r.Person == r.Unit {
				b.uuid(facts.Ref{})
			} else {
				b.uuid(r.Person)
			}
			b.bool(r.Session)
			b.i32(r.Events)
			b.i32(r.Pageviews)
			b.bool(r.Consented)
			b.strReq(r.Touch.Channel)
			b.str(r.Touch.Source)
			b.str(r.Touch.Medium)
			b.str(r.Touch.Campaign)
			b.str(r.Touch.Term)
			b.str(r.Touch.Content)
			b.str(r.Touch.AdPlatform)
			b.str(r.Touch.ClickID)
			b.str(r.Touch.RefHost)
			b.str(r.Touch.RefName)
			b.str(r.LandingHost)
			b.str(r.LandingPath)
			b.str(r.ExitPath)
			b.str(c.Country)
			b.str(c.Region)
			b.str(c.Device)
			b.str(c.Browser)
			b.str(c.OS)
			b.str(c.Locale)
			b.str(c.Source)
			b.keyedRow(rev, r.Deleted)
		}
	})
}

func conversionsRecord(alloc memory.Allocator, rows []facts.ConversionRow) arrow.Record {
	return buildRecord(alloc, tables.ConversionsSchema, len(rows), func(b *builder) {
		for i := range rows {
			r := &rows[i]
			b.row()
			b.strReq(r.Action)
			b.ts(r.Time)
			b.uuidReq(r.EventID)
			b.str(r.Role)
			// The owner is the unit itself unless it differs.
			if r.Owner == r.Unit {
				b.uuid(facts.Ref{})
			} else {
				b.uuid(r.Owner)
			}
			b.uuid(r.Unit)
			b.uuid(r.Visit)
			b.i64Opt(r.Value, r.HasValue)
			b.str(r.Currency)
			b.bool(r.Consented)
		}
	})
}

// moneyJSON writes amounts as [{"currency":"EUR","amount":12.5}], the
// reporting currency first, then by currency; "" when empty.
func moneyJSON(m facts.Money, reporting string) string {
	if len(m) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteByte('[')
	first := true
	write := func(a facts.Amount) {
		if !first {
			sb.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&sb, `{"currency":%q,"amount":%s}`, a.Currency, facts.FormatAmount(a.Micro))
	}
	for _, a := range m {
		if a.Currency == reporting {
			write(a)
		}
	}
	for _, a := range m {
		if a.Currency != reporting {
			write(a)
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

func (b *builder) touch(t facts.Touch) {
	b.strReq(t.Channel)
	b.str(t.Source)
	b.str(t.Medium)
	b.str(t.Campaign)
	b.str(t.Landing)
	b.str(t.AdPlatform)
}

func peopleRecord(alloc memory.Allocator, rows []*facts.PersonRow, reporting string, rev int64) arrow.Record {
	return buildRecord(alloc, tables.PeopleSchema, len(rows), func(b *builder) {
		for _, r := range rows {
			b.row()
			b.uuidReq(r.Ref)
			b.str(r.UserID)
			b.bool(r.Known)
			if r.HasName {
				b.strReq(r.Name)
			} else {
				b.str("")
			}
			if r.HasEmail {
				b.strReq(r.Email)
			} else {
				b.str("")
			}
			b.strReq(r.Stage)
			b.ts(r.FirstSeen)
			b.ts(r.LastSeen)
			b.i64(r.Visits)
			b.i64(r.ActiveDays)
			b.i64(r.Events)
			b.i64(r.Pageviews)
			b.i64(r.Orders)
			b.str(moneyJSON(r.Revenue, reporting))
			b.i64(r.Value)
			b.touch(r.FirstTouch)
			b.touch(r.LastTouch)
			b.str(r.Country)
			b.str(r.Region)
			b.str(r.Device)
			b.str(r.Browser)
			b.str(r.OS)
			b.str(r.Locale)
			b.str(r.LastPath)
			b.str(r.Traits)
			b.i64(r.Browsers)
			b.bool(r.SharedBrowser)
			b.tsOpt(r.FirstPurchase)
			b.bool(r.Intent)
			b.keyedRow(rev, r.Deleted)
		}
	})
}

// stateRecord builds the rows of the state table (a deletion for a row
// without data).
func stateRecord(alloc memory.Allocator, rows []facts.StateRow, rev int64) arrow.Record {
	return buildRecordMeasured(alloc, tables.StateSchema, len(rows), false, func(b *builder) {
		for i := range rows {
			r := &rows[i]
			b.row()
			b.uuidReq(r.Ref)
			b.i32(int32(r.Kind))
			b.uuidReq(r.Sub)
			f := b.next().(*array.BinaryBuilder)
			if r.Data == nil {
				f.AppendNull()
			} else {
				f.Append(r.Data)
			}
			b.keyedRow(rev, r.Data == nil)
		}
	})
}

// activityRecord builds a day's partition of the activity table.
func activityRecord(alloc memory.Allocator, rows []facts.ActivityRow) arrow.Record {
	return buildRecordMeasured(alloc, tables.ActivitySchema, len(rows), false, func(b *builder) {
		for _, r := range rows {
			b.row()
			b.strReq(r.Kind)
			b.ts(r.Start)
			b.i64(int64(r.Count))
			b.next().(*array.BinaryBuilder).Append(r.People)
		}
	})
}

// scanActivity gives rs the sets of every day of the snapshot's activity
// table (facts.Restoring.Activity).
func scanActivity(ctx context.Context, sn *rollups.Snapshot, rs *facts.Restoring) error {
	if sn.Manifest().Table(TableActivity) == nil {
		return nil
	}
	cols := []string{tables.ColKind, tables.ColPeople}
	err := sn.Scan(ctx, TableActivity, rollups.ScanOptions{Uncached: true, Columns: cols}, func(b rollups.Batch) error {
		day, err := facts.ParseDay(b.Partition)
		if err != nil {
			return fmt.Errorf("activity partition %q: %w", b.Partition, err)
		}
		c, err := tables.ColumnsOf(b.Record, cols)
		if err != nil {
			return err
		}
		people, ok := c[1].(*array.Binary)
		if !ok {
			return fmt.Errorf("activity partition %q: column %s is %s, not binary", b.Partition, tables.ColPeople, c[1].DataType())
		}
		for i := range int(b.Record.NumRows()) {
			if err := rs.Activity(day, tables.StrAt(c[0], i), people.Value(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot read the activity table: %w", err)
	}
	return nil
}

// scanState gives add every live row of the snapshot's state table. The
// table is read (files merged by key, columns decoded) on another
// goroutine while add decodes the rows read before.
func scanState(ctx context.Context, sn *rollups.Snapshot, add func(*facts.StateRow) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var parts []string
	if ts := sn.Manifest().Table(TableState); ts != nil {
		parts = ts.PartitionNames()
	}
	// Two readers, each on every other partition (the rows may come in
	// any order): reading and merging a partition's files is most of a
	// restore, and the decoding beside them takes less than one reader.
	const readers = 2
	recs := make(chan arrow.Record, 4)
	scanErr := make(chan error, readers)
	var wg sync.WaitGroup
	for i := range readers {
		var mine []string
		for j := i; j < len(parts); j += readers {
			mine = append(mine, parts[j])
		}
		if len(mine) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			scanErr <- sn.Scan(ctx, TableState, rollups.ScanOptions{Uncached: true, Partitions: mine}, func(b rollups.Batch) error {
				b.Record.Retain()
				select {
				case recs <- b.Record:
					return nil
				case <-ctx.Done():
					b.Record.Release()
					return ctx.Err()
				}
			})
		}()
	}
	go func() {
		wg.Wait()
		close(recs)
		close(scanErr)
	}()
	var err error
	for rec := range recs {
		if err == nil {
			err = addStateRows(rec, add)
			if err != nil {
				cancel()
			}
		}
		rec.Release()
	}
	for e := range scanErr {
		err = cmp.Or(err, e)
	}
	return err
}

// addStateRows gives add the rows of a record of the state table.
func addStateRows(rec arrow.Record, add func(*facts.StateRow) error) error {
	cols, err := newColumns(rec)
	if err != nil {
		return err
	}
	ref, err1 := cols.col(tables.ColRef)
	kind, err2 := cols.col(tables.ColKind)
	sub, err3 := cols.col(tables.ColSub)
	data, err4 := cols.col(tables.ColData)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	kinds, ok1 := kind.(*array.Int32)
	datas, ok2 := data.(*array.Binary)
	if !ok1 || !ok2 {
		return fmt.Errorf("state table: columns kind %s and data %s, want int32 and binary", kind.DataType(), data.DataType())
	}
	var r facts.StateRow
	for i := range int(rec.NumRows()) {
		r.Ref, r.Kind, r.Sub = uuidAt(ref, i), facts.StateKind(kinds.Value(i)), uuidAt(sub, i)
		r.Data = datas.Value(i)
		if err := add(&r); err != nil {
			return err
		}
	}
	return nil
}

func identitiesRecord(alloc memory.Allocator, rows []facts.IdentityRow, rev int64) arrow.Record {
	return buildRecord(alloc, tables.IdentitiesSchema, len(rows), func(b *builder) {
		for i := range rows {
			r := &rows[i]
			b.row()
			b.uuidReq(r.Unit)
			b.uuidReq(r.Person)
			b.ts(r.ClaimedAt)
			b.bool(r.Shared)
			b.keyedRow(rev, r.Deleted)
		}
	})
}

func membersRecord(alloc memory.Allocator, rows []facts.MemberRow, rev int64) arrow.Record {
	return buildRecord(alloc, tables.MembersSchema, len(rows), func(b *builder) {
		for i := range rows {
			b.row()
			b.strReq(rows[i].Segment)
			b.uuidReq(rows[i].Person)
			b.keyedRow(rev, rows[i].Deleted)
		}
	})
}

// segmentBuild is a row of the segments table.
type segmentBuild struct {
	Ref, ID string
	BuiltAt int64
	Members int64
}

func segmentsRecord(alloc memory.Allocator, rows []segmentBuild) arrow.Record {
	return buildRecord(alloc, tables.SegmentsSchema, len(rows), func(b *builder) {
		for _, r := range rows {
			b.row()
			b.strReq(r.Ref)
			b.strReq(r.ID)
			b.ts(r.BuiltAt)
			b.i64(r.Members)
		}
	})
}

// columns gives typed access to the columns of a scanned record by name.
type columns struct {
	rec arrow.Record
	idx map[string]int
}

func newColumns(rec arrow.Record) (*columns, error) {
	c := &columns{rec: rec, idx: map[string]int{}}
	for i, f := range rec.Schema().Fields() {
		c.idx[f.Name] = i
	}
	return c, nil
}

func (c *columns) col(name string) (arrow.Array, error) {
	i, ok := c.idx[name]
	if !ok {
		return nil, fmt.Errorf("column %q is missing", name)
	}
	return c.rec.Column(i), nil
}

// eventReader reads rows of the events table back as events.
type eventReader struct {
	unit, time, id, name, source, consented, server, origin, path, query, title, referrer,
	user, session, props, revenue, currency, country, region, device, browser, os, locale,
	actions, value, valueCurrency, purchase arrow.Array
	// visit and channel are read for thawing only (thawed).
	visit, channel arrow.Array
}

func newEventReader(rec arrow.Record) (*eventReader, error) {
	c, _ := newColumns(rec)
	r := &eventReader{}
	for _, x := range []struct {
		name string
		dst  *arrow.Array
	}{
		{tables.ColUnit, &r.unit}, {tables.ColTime, &r.time}, {tables.ColID, &r.id}, {tables.ColName, &r.name}, {tables.ColSource, &r.source},
		{tables.ColConsented, &r.consented}, {tables.ColServer, &r.server}, {tables.ColOrigin, &r.origin}, {tables.ColPath, &r.path},
		{tables.ColQuery, &r.query}, {tables.ColTitle, &r.title}, {tables.ColReferrer, &r.referrer},
		{tables.ColUserID, &r.user}, {tables.ColSessionID, &r.session}, {tables.ColProperties, &r.props}, {tables.ColRevenue, &r.revenue},
		{tables.ColCurrency, &r.currency}, {tables.ColCountry, &r.country}, {tables.ColRegion, &r.region}, {tables.ColDevice, &r.device},
		{tables.ColBrowser, &r.browser}, {tables.ColOS, &r.os}, {tables.ColLocale, &r.locale}, {tables.ColActions, &r.actions},
		{tables.ColValue, &r.value}, {tables.ColValueCurrency, &r.valueCurrency}, {tables.ColPurchase, &r.purchase},
	} {
		a, err := c.col(x.name)
		if err != nil {
			return nil, fmt.Errorf("cannot read the events table: %w", err)
		}
		*x.dst = a
	}
	r.visit, _ = c.col(tables.ColVisit)
	r.channel, _ = c.col(tables.ColChannel)
	return r, nil
}

// thawed returns row i as a stored event of engine e, with the visit and
// channel its row shows (docs/processor.md, "Tables": the visit of an
// event with a channel is coalesce(visit, session_id)).
func (r *eventReader) thawed(e *facts.Engine, i int) facts.ThawedEvent {
	t := facts.ThawedEvent{Event: r.event(e, i, true)}
	if r.unit != nil {
		t.Unit = uuidAt(r.unit, i)
	}
	if r.channel != nil && r.visit != nil {
		if t.Channel = strAt(r.channel, i); t.Channel != "" {
			t.Visit = cmp.Or(uuidAt(r.visit, i), t.SessionID)
		}
	}
	return t
}

// visitReader reads rows of the visits table back (Engine.Reclaim).
type visitReader struct {
	unit, start, id, end, person, session, events, pageviews, consented   arrow.Array
	channel, source, medium, campaign, term, content, adPlatform, clickID arrow.Array
	refHost, refName, landingHost, landingPath, exitPath                  arrow.Array
	country, region, device, browser, os, locale, sourceID                arrow.Array
}

func newVisitReader(rec arrow.Record) (*visitReader, error) {
	c, _ := newColumns(rec)
	r := &visitReader{}
	for _, x := range []struct {
		name string
		dst  *arrow.Array
	}{
		{tables.ColUnit, &r.unit}, {tables.ColStart, &r.start}, {tables.ColID, &r.id}, {tables.ColEnd, &r.end},
		{tables.ColPerson, &r.person}, {tables.ColSession, &r.session}, {tables.ColEvents, &r.events},
		{tables.ColPageviews, &r.pageviews}, {tables.ColConsented, &r.consented}, {tables.ColChannel, &r.channel},
		{tables.ColSource, &r.source}, {tables.ColMedium, &r.medium}, {tables.ColCampaign, &r.campaign},
		{tables.ColTerm, &r.term}, {tables.ColContent, &r.content}, {tables.ColAdPlatform, &r.adPlatform},
		{tables.ColClickID, &r.clickID}, {tables.ColReferrerHost, &r.refHost}, {tables.ColReferrerName, &r.refName},
		{tables.ColLandingHost, &r.landingHost}, {tables.ColLandingPath, &r.landingPath}, {tables.ColExitPath, &r.exitPath},
		{tables.ColCountry, &r.country}, {tables.ColRegion, &r.region}, {tables.ColDevice, &r.device},
		{tables.ColBrowser, &r.browser}, {tables.ColOS, &r.os}, {tables.ColLocale, &r.locale}, {tables.ColSourceID, &r.sourceID},
	} {
		a, err := c.col(x.name)
		if err != nil {
			return nil, fmt.Errorf("cannot read the visits table: %w", err)
		}
		*x.dst = a
	}
	return r, nil
}

func (r *visitReader) unitAt(i int) facts.Ref { return uuidAt(r.unit, i) }

// row returns row i as visitsRecord wrote it (the person is the unit when
// the column is null; strings copied out of the record).
func (r *visitReader) row(i int) facts.VisitRow {
	s := func(a arrow.Array) string { return strings.Clone(strAt(a, i)) }
	v := facts.VisitRow{
		ID: uuidAt(r.id, i), Unit: uuidAt(r.unit, i), Person: uuidAt(r.person, i),
		Session: boolAt(r.session, i), Start: tables.TimeAt(r.start, i), End: tables.TimeAt(r.end, i),
		Events: tables.Int32At(r.events, i), Pageviews: tables.Int32At(r.pageviews, i), Consented: boolAt(r.consented, i),
		Touch: channels.Touch{Channel: s(r.channel), Source: s(r.source), Medium: s(r.medium), Campaign: s(r.campaign),
			Term: s(r.term), Content: s(r.content), AdPlatform: s(r.adPlatform), ClickID: s(r.clickID),
			RefHost: s(r.refHost), RefName: s(r.refName)},
		LandingHost: s(r.landingHost), LandingPath: s(r.landingPath), ExitPath: s(r.exitPath),
		Client: &facts.Client{Country: s(r.country), Region: s(r.region), Device: s(r.device), Browser: s(r.browser),
			OS: s(r.os), Locale: s(r.locale), Source: s(r.sourceID)},
	}
	if r.person.IsNull(i) {
		v.Person = v.Unit
	}
	return v
}

func strAt(a arrow.Array, i int) string { return tables.StrAt(a, i) }

func uuidAt(a arrow.Array, i int) facts.Ref { return facts.Ref(tables.RefAt(a, i)) }

func boolAt(a arrow.Array, i int) bool { return tables.BoolAt(a, i) }

// event returns row i as an event of engine e (client shared; strings
// point into the record). derived keeps the catalog matches stored with the row (a
// restart); without it the engine matches again (replay).
func (r *eventReader) event(e *facts.Engine, i int, derived bool) facts.Event {
	// The strings point into the Arrow buffers: the engine copies them
	// into its day arena.
	ev := facts.Event{
		Time:       int64(r.time.(*array.Timestamp).Value(i)),
		Name:       strAt(r.name, i),
		Origin:     strAt(r.origin, i),
		Path:       strAt(r.path, i),
		Query:      strAt(r.query, i),
		Title:      strAt(r.title, i),
		Referrer:   strAt(r.referrer, i),
		UserID:     strAt(r.user, i),
		Properties: strAt(r.props, i),
		Revenue:    strAt(r.revenue, i),
		Currency:   strAt(r.currency, i),
	}
	ev.ID = uuidAt(r.id, i)
	ev.SessionID = uuidAt(r.session, i)
	ev.Host = originHost(ev.Origin)
	ev.Client = e.Client(facts.Client{
		Source: strAt(r.source, i), Consented: boolAt(r.consented, i), Server: boolAt(r.server, i),
		Country: strAt(r.country, i), Region: strAt(r.region, i), Device: strAt(r.device, i),
		Browser: strAt(r.browser, i), OS: strAt(r.os, i), Locale: strAt(r.locale, i),
	})
	unit := uuidAt(r.unit, i)
	switch {
	case !ev.Client.Consented:
		// A consentless event's unit is its visitor ref.
		ev.Visitor = unit
	case unit.IsZero():
	case ev.UserID == "" || unit != e.UserRef(ev.UserID):
		// The unit of a full event is its browser, when it has one.
		ev.Browser = unit
	}
	if derived {
		ev.Derived = true
		ev.Actions = strAt(r.actions, i)
		if !r.value.IsNull(i) {
			ev.HasValue = true
			ev.Value = r.value.(*array.Int64).Value(i)
			ev.ValueCurrency = strAt(r.valueCurrency, i)
		}
		ev.Purchase = boolAt(r.purchase, i)
	}
	return ev
}

// originHost returns the host of scheme://host[:port].
func originHost(o string) string {
	if o == "" {
		return ""
	}
	h := o
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i >= 0 {
			return h[:i+1]
		}
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		return h[:i]
	}
	return h
}

// checkpoint is what the processor commits with its data in each
// project's manifest, under Config.Checkpoint.
type checkpoint struct {
	// Seq is the log position of the last batch of the project whose
	// events the tables hold.
	Seq uint64 `json:"seq"`
	// Received is when the newest batch applied was received (epoch ms):
	// events that can still arrive are no older than it minus the late
	// window.
	Received int64 `json:"received,omitempty"`
	// Segments fingerprints the segment definitions the membership was
	// built with.
	Segments string `json:"segments,omitempty"`
	// Rev counts the commits of the project's keyed tables: their rows
	// are written with revs from it (revOf), each commit with the rev
	// after the last.
	Rev int64 `json:"rev,omitempty"`
	// Reclaim names the days (YYYY-MM-DD, comma-separated) holding cold
	// visits of browsers whose claim moved and whose rows were not yet
	// written again (Config.ReclaimInterval): a state rebuilt from the
	// tables writes those days' visits whole.
	Reclaim string `json:"reclaim,omitempty"`
	// State tells that the state table holds the engine's state as of
	// this checkpoint (written whole once, then its changes with every
	// commit): a load restores it instead of folding the events table.
	State bool `json:"state,omitempty"`
}

// formatDays writes day numbers as Reclaim holds them.
func formatDays(days []int32) string {
	names := make([]string, len(days))
	for i, d := range days {
		names[i] = facts.DayName(d)
	}
	return strings.Join(names, ",")
}

// parseDays reads Reclaim back.
func parseDays(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var days []int32
	for _, name := range strings.Split(s, ",") {
		d, err := facts.ParseDay(name)
		if err != nil {
			return nil, fmt.Errorf("cannot read the days to write again %q: %w", s, err)
		}
		days = append(days, d)
	}
	return days, nil
}

// sameData reports whether two checkpoints hold the same batches and
// segments, whatever their revs.
func (c checkpoint) sameData(o checkpoint) bool {
	c.Rev, o.Rev = 0, 0
	return c == o
}

func parseCheckpoint(s string) (checkpoint, error) {
	var c checkpoint
	if s == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("cannot read processor checkpoint %q: %w", s, err)
	}
	return c, nil
}

func (c checkpoint) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}
