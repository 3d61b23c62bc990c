package api

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/rollups/tables"
)

// Decoding the rows of the processor's tables (rollups/tables) from
// scanned records.

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

// Columns read per table, in the order the decoders index them.
var (
	// peopleColumns are the person index's (personRow), detailColumns the
	// rest (personDetail).
	peopleColumns = []string{tables.ColRef, tables.ColKnown, tables.ColStage, tables.ColFirstSeen,
		tables.ColLastSeen, tables.ColOrders, tables.ColRevenue, tables.ColValue, tables.ColFTChannel,
		tables.ColFTSource, tables.ColFTMedium, tables.ColFTCampaign, tables.ColFTLanding, tables.ColFTAdPlatform,
		tables.ColLTChannel, tables.ColLTSource, tables.ColLTMedium, tables.ColLTCampaign, tables.ColLTLanding,
		tables.ColLTAdPlatform, tables.ColCountry, tables.ColRegion, tables.ColDevice, tables.ColBrowser,
		tables.ColOS, tables.ColLocale, tables.ColFirstPurchase, tables.ColIntent}
	detailColumns = []string{tables.ColRef, tables.ColUserID, tables.ColName, tables.ColEmail,
		tables.ColVisits, tables.ColActiveDays, tables.ColEvents, tables.ColPageviews, tables.ColRevenue,
		tables.ColLastPath, tables.ColTraits, tables.ColBrowsers, tables.ColSharedBrowser}
	identityColumns = []string{tables.ColUnit, tables.ColPerson}
	visitColumns    = []string{tables.ColUnit, tables.ColStart, tables.ColID, tables.ColEnd, tables.ColPerson,
		tables.ColSession, tables.ColEvents, tables.ColPageviews, tables.ColConsented, tables.ColChannel,
		tables.ColSource, tables.ColMedium, tables.ColCampaign, tables.ColTerm, tables.ColContent,
		tables.ColAdPlatform, tables.ColClickID, tables.ColReferrerHost, tables.ColReferrerName,
		tables.ColLandingHost, tables.ColCountry, tables.ColRegion,
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
	pc.people = slices.Grow(pc.people, n)
	for i := 0; i < n; i++ {
		if pc.places == nil {
			pc.places, pc.touches = newPlaces(), newTouches()
		}
		stage := pc.intern(tables.StrAt(c[2], i))
		p := personRow{
			Ref: tables.RefAt(c[0], i), Known: tables.BoolAt(c[1], i), Stage: stage,
			FirstSeen: tables.TimeAt(c[3], i), LastSeen: tables.TimeAt(c[4], i),
			FirstTouch: pc.touches.of(touch{tables.StrAt(c[8], i), tables.StrAt(c[9], i), tables.StrAt(c[10], i), tables.StrAt(c[11], i), tables.StrAt(c[12], i), tables.StrAt(c[13], i)}, touchBytes),
			LastTouch:  pc.touches.of(touch{tables.StrAt(c[14], i), tables.StrAt(c[15], i), tables.StrAt(c[16], i), tables.StrAt(c[17], i), tables.StrAt(c[18], i), tables.StrAt(c[19], i)}, touchBytes),
			place: pc.places.of(place{tables.StrAt(c[20], i), tables.StrAt(c[21], i), tables.StrAt(c[22], i), tables.StrAt(c[23], i),
				tables.StrAt(c[24], i), tables.StrAt(c[25], i)}, placeBytes),
			FirstPurchase: tables.TimeAt(c[26], i), Intent: tables.BoolAt(c[27], i), bucket: pc.bucket,
		}
		p.FirstCh, p.LastCh = channelIndex(p.FirstTouch.Channel), channelIndex(p.LastTouch.Channel)
		p.Orders, _ = tables.Int64At(c[5], i)
		p.Value, _ = tables.Int64At(c[7], i)
		rev, err := revenueOf(p.Ref, tables.StrAt(c[6], i))
		if err != nil {
			return err
		}
		p.HasRevenue = len(rev) > 0
		pc.people = append(pc.people, p)
	}
	return nil
}

// revenueOf decodes a people row's revenue column (empty: none).
func revenueOf(r ref, s string) ([]Money, error) {
	var out []Money
	if s != "" && s != "[]" {
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			return nil, fmt.Errorf("cannot read the revenue of person %x: %w", r, err)
		}
	}
	if out == nil {
		out = []Money{}
	}
	return out, nil
}

// decodeDetails appends the detail columns of a people partition's rows
// to c: their strings (and the revenue, as stored) to its text, checked
// as they will be read.
func decodeDetails(c *detailChunk, rec arrow.Record) error {
	col, err := tables.ColumnsOf(rec, detailColumns)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	c.refs, c.rows = slices.Grow(c.refs, n), slices.Grow(c.rows, n)
	for i := 0; i < n; i++ {
		r := tables.RefAt(col[0], i)
		dr := detailRow{at: uint32(len(c.text))}
		for k, j := range [...]int{1, 2, 3, 9, 10, 8} { // detailRow.ends' order
			if j == 8 {
				if _, err := revenueOf(r, tables.StrAt(col[j], i)); err != nil {
					return err
				}
			}
			c.text = append(c.text, tables.StrAt(col[j], i)...)
			if len(c.text) > math.MaxUint32 {
				return fmt.Errorf("the people of one partition hold more than %d bytes of text", math.MaxUint32)
			}
			dr.ends[k] = uint32(len(c.text))
		}
		dr.hasName, dr.hasEmail, dr.shared = !col[2].IsNull(i), !col[3].IsNull(i), tables.BoolAt(col[12], i)
		for k, j := range [...]int{4, 5, 6, 7, 11} { // detailRow.counts' order
			dr.counts[k], _ = tables.Int64At(col[j], i)
		}
		c.refs, c.rows = append(c.refs, r), append(c.rows, dr)
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
	pc.visits = slices.Grow(pc.visits, n) // exactly: the cache counts capacity
	for i := 0; i < n; i++ {
		if pc.places == nil {
			pc.places, pc.sources = newPlaces(), newSources()
		}
		v := visitRow{
			Start: tables.TimeAt(c[1], i), ID: tables.RefAt(c[2], i), End: tables.TimeAt(c[3], i),
			PersonRef: tables.RefAt(c[4], i), Session: tables.BoolAt(c[5], i), Events: tables.Int32At(c[6], i), Pageviews: tables.Int32At(c[7], i),
			Consented: tables.BoolAt(c[8], i),
			visitSource: pc.sources.of(visitSource{Channel: tables.StrAt(c[9], i), Source: tables.StrAt(c[10], i), Medium: tables.StrAt(c[11], i),
				Campaign: tables.StrAt(c[12], i), Term: tables.StrAt(c[13], i), Content: tables.StrAt(c[14], i), AdPlatform: tables.StrAt(c[15], i),
				ReferrerHost: tables.StrAt(c[17], i), ReferrerName: tables.StrAt(c[18], i), LandingHost: tables.StrAt(c[19], i),
				SourceID: tables.StrAt(c[26], i)}, sourceBytes),
			place: pc.places.of(place{tables.StrAt(c[20], i), tables.StrAt(c[21], i), tables.StrAt(c[22], i), tables.StrAt(c[23], i),
				tables.StrAt(c[24], i), tables.StrAt(c[25], i)}, placeBytes),
			ClickID: strings.Clone(tables.StrAt(c[16], i)), Person: noPerson,
		}
		if v.PersonRef == (ref{}) {
			v.PersonRef = tables.RefAt(c[0], i) // the unit
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
	pc.convs = slices.Grow(pc.convs, n) // exactly: the cache counts capacity
	for i := 0; i < n; i++ {
		cv := conversionRow{
			Action: pc.intern(tables.StrAt(c[0], i)), Time: tables.TimeAt(c[1], i), EventID: tables.RefAt(c[2], i), Role: pc.intern(tables.StrAt(c[3], i)),
			Owner: tables.RefAt(c[4], i), Unit: tables.RefAt(c[5], i), Visit: tables.RefAt(c[6], i), Currency: pc.intern(tables.StrAt(c[8], i)),
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
