package processor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage/records"
)

// Export writes what mf stores of the person of ref (a person's ref or a
// browser joined to one) as NDJSON, for an access request (operations
// contract section 4): the person's row of the people table on the first
// line ("type": "person"), then every stored event whose part is theirs
// (events with their userId, and the anonymous events of the browsers
// they claim; docs/processor.md, "Events, units and refs") with every
// column of the events table ("type": "event"), oldest first (time, then
// id). It fails with ErrNoProject or ErrUnknownPerson before writing
// anything.
func Export(ctx context.Context, rd *rollups.Reader, cat CatalogSource, project, ref string, w io.Writer) error {
	if st := cat.State(); st == nil {
		return fmt.Errorf("%w: %q (the catalog is not loaded)", ErrNoProject, project)
	} else if _, ok := st.Project(project); !ok {
		return fmt.Errorf("%w: %q", ErrNoProject, project)
	}
	r, ok := records.ParseUUID(ref)
	if !ok {
		return fmt.Errorf("%w: %q is not a ref (a UUID)", ErrUnknownPerson, ref)
	}
	person, err := resolvePerson(ctx, rd, project, r)
	if err != nil {
		return err
	}
	sn, err := rd.Refresh(ctx, project)
	if err != nil {
		return fmt.Errorf("cannot read the tables of project %q: %w", project, err)
	}
	// The person's row.
	var profile map[string]any
	part := tables.BucketName(facts.Bucket(person))
	err = sn.Scan(ctx, TablePeople, rollups.ScanOptions{Partitions: []string{part}, KeyMin: person[:], KeyMax: person[:]},
		func(b rollups.Batch) error {
			if b.Record.NumRows() > 0 {
				profile = rowJSON(b.Record, 0)
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("cannot read the people of project %q: %w", project, err)
	}
	// The browsers they claim.
	units := map[records.UUID]bool{person: true}
	err = sn.Scan(ctx, TableIdentities, rollups.ScanOptions{Columns: []string{"unit", "person"}}, func(b rollups.Batch) error {
		u, p := b.Record.Column(0).(*array.FixedSizeBinary), b.Record.Column(1).(*array.FixedSizeBinary)
		for i := range int(b.Record.NumRows()) {
			if records.UUID(p.Value(i)) == person {
				units[records.UUID(u.Value(i))] = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot read the identities of project %q: %w", project, err)
	}
	type row struct {
		t   int64
		id  records.UUID
		doc map[string]any
	}
	var rows []row
	err = sn.Scan(ctx, TableEvents, rollups.ScanOptions{Uncached: true}, func(b rollups.Batch) error {
		c, _ := newColumns(b.Record)
		unit, _ := c.col("unit")
		user, _ := c.col("user_id")
		consented, _ := c.col("consented")
		tm, _ := c.col("time")
		id, _ := c.col("id")
		for i := range int(b.Record.NumRows()) {
			if !boolAt(consented, i) {
				continue // consentless: no identifier, no one's
			}
			var theirs bool
			if uid := strAt(user, i); uid != "" {
				theirs = facts.NodeRef(project, facts.KindUser, uid) == person
			} else {
				theirs = units[uuidAt(unit, i)]
			}
			if theirs {
				rows = append(rows, row{t: int64(tm.(*array.Timestamp).Value(i)), id: uuidAt(id, i), doc: rowJSON(b.Record, i)})
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("cannot read the events of project %q: %w", project, err)
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.t, b.t), slices.Compare(a.id[:], b.id[:]))
	})
	enc := json.NewEncoder(w)
	if profile == nil {
		profile = map[string]any{"ref": person.String()}
	}
	profile["type"] = "person"
	if err := enc.Encode(profile); err != nil {
		return err
	}
	for _, r := range rows {
		r.doc["type"] = "event"
		if err := enc.Encode(r.doc); err != nil {
			return err
		}
	}
	return nil
}

// rowJSON returns row i of rec as a JSON object: refs as UUID strings,
// times as RFC 3339 with milliseconds (UTC), nulls as null.
func rowJSON(rec arrow.Record, i int) map[string]any {
	out := make(map[string]any, rec.NumCols())
	for j, f := range rec.Schema().Fields() {
		a := rec.Column(j)
		if a.IsNull(i) {
			out[f.Name] = nil
			continue
		}
		switch a := a.(type) {
		case *array.String:
			out[f.Name] = a.Value(i)
		case *array.Int64:
			out[f.Name] = a.Value(i)
		case *array.Int32:
			out[f.Name] = a.Value(i)
		case *array.Boolean:
			out[f.Name] = a.Value(i)
		case *array.Timestamp:
			out[f.Name] = time.UnixMilli(int64(a.Value(i))).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		case *array.FixedSizeBinary:
			out[f.Name] = records.UUID(a.Value(i)).String()
		case *array.Dictionary:
			if s, ok := a.Dictionary().(*array.String); ok {
				out[f.Name] = s.Value(a.GetValueIndex(i))
			} else {
				out[f.Name] = a.ValueStr(i)
			}
		default:
			out[f.Name] = a.ValueStr(i)
		}
	}
	return out
}
