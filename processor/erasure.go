package processor

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// Person erasure (docs/privacy.md; operations contract section 4).
//
// A request is checked against the tables (the ref must be a person or a
// browser joined to one), recorded as an object erasures/<project>/<id>.json
// (state pending), and published to the project's subject of the batches
// topic as a message of its own kind, so that every processor sees it in
// log order with the project's batches and replay from the log applies it
// again. The processor that holds the project's partition reads the
// person's cold days back, takes every event of theirs out of its state
// (facts.Engine.Erase), commits the rewritten partitions, rewrites each
// partition that commit touched into one file without deletion markers,
// deletes the files that held the old rows at once, and marks the record
// done. A crash in between is finished at the project's next load: a
// pending record at or below the project's checkpoint is committed, only
// the purge remains.

// Message metadata of the batches topic: MetaKind tells a message that is
// not a batch (absent on batches).
const (
	MetaKind    = "kind"
	KindErasure = "erasure"
)

// Erasure states.
const (
	ErasurePending = "pending"
	ErasureDone    = "done"
)

// ErrUnknownPerson is returned for an erasure or export of a ref that is
// neither a person nor a browser joined to one.
var ErrUnknownPerson = errors.New("no person has this ref")

// Erasure is the record of an erasure request: what GET
// /admin/v1/projects/{project}/erasures/{id} answers. It keeps the ref the
// request named (a pseudonymous hash, never a raw id) and counts, none of
// the person's data.
type Erasure struct {
	ID          string     `json:"id"`
	Person      string     `json:"person"`
	State       string     `json:"state"`
	RequestedAt time.Time  `json:"requestedAt"`
	DoneAt      *time.Time `json:"doneAt"`
	// Events is how many stored events were erased (once done).
	Events int `json:"events"`
	// Seq is the log position of the erasure message (0 until published).
	Seq uint64 `json:"seq,omitempty"`
}

// erasureMessage is the payload of an erasure message.
type erasureMessage struct {
	ID     string `json:"id"`
	Person string `json:"person"`
}

func erasureKey(project, id string) string { return "erasures/" + project + "/" + id + ".json" }

// ErasureDeps are what a request for an erasure needs.
type ErasureDeps struct {
	Bucket storage.Bucket
	Reader *rollups.Reader
	Log    interface {
		PublishOnce(ctx context.Context, topic, id string, msg *message.Message) (eventlog.Receipt, error)
	}
	Catalog CatalogSource
	// Topic is the batches topic (eventlog.TopicBatches).
	Topic string
}

// RequestErasure records and publishes the erasure of the person of ref
// in project. It fails with ErrNoProject or ErrUnknownPerson.
func RequestErasure(ctx context.Context, d ErasureDeps, project, ref string, now time.Time) (Erasure, error) {
	if st := d.Catalog.State(); st == nil {
		return Erasure{}, fmt.Errorf("%w: %q (the catalog is not loaded)", ErrNoProject, project)
	} else if _, ok := st.Project(project); !ok {
		return Erasure{}, fmt.Errorf("%w: %q", ErrNoProject, project)
	}
	r, ok := records.ParseUUID(ref)
	if !ok {
		return Erasure{}, fmt.Errorf("%w: %q is not a ref (a UUID)", ErrUnknownPerson, ref)
	}
	person, err := resolvePerson(ctx, d.Reader, project, r)
	if err != nil {
		return Erasure{}, err
	}
	id := newRequestID()
	rec := Erasure{ID: id, Person: r.String(), State: ErasurePending, RequestedAt: now.UTC()}
	data, _ := json.Marshal(rec)
	etag, err := d.Bucket.PutIf(ctx, erasureKey(project, id), bytes.NewReader(data), storage.IfAbsent())
	if err != nil {
		return Erasure{}, fmt.Errorf("cannot write erasure record %s: %w", id, err)
	}
	payload, _ := json.Marshal(erasureMessage{ID: id, Person: person.String()})
	msg := message.NewMessage(id, payload)
	msg.Metadata.Set(MetaKind, KindErasure)
	msg.Metadata.Set(eventlog.MetaProject, project)
	rc, err := d.Log.PublishOnce(ctx, d.Topic+"."+project, project+":erasure:"+id, msg)
	if err != nil {
		return Erasure{}, fmt.Errorf("cannot publish the erasure to the log: %w", err)
	}
	// The position, unless the processor was faster and marked the
	// record done already (then its record stands).
	rec.Seq = rc.Seq
	data, _ = json.Marshal(rec)
	if _, err := d.Bucket.PutIf(ctx, erasureKey(project, id), bytes.NewReader(data), storage.IfMatch(etag)); err != nil &&
		!errors.Is(err, storage.ErrPreconditionFailed) {
		return Erasure{}, fmt.Errorf("cannot write erasure record %s: %w", id, err)
	}
	return rec, nil
}

// ErasureStatus reads an erasure's record; storage.ErrNotFound when there
// is none.
func ErasureStatus(ctx context.Context, b storage.BucketReader, project, id string) (Erasure, error) {
	data, _, err := storage.ReadAll(ctx, b, erasureKey(project, id))
	if err != nil {
		return Erasure{}, err
	}
	var rec Erasure
	if err := json.Unmarshal(data, &rec); err != nil {
		return Erasure{}, fmt.Errorf("erasure record %s: %w", erasureKey(project, id), err)
	}
	return rec, nil
}

func putErasure(ctx context.Context, b storage.Bucket, project string, rec Erasure) error {
	data, _ := json.Marshal(rec)
	if _, err := b.Put(ctx, erasureKey(project, rec.ID), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("cannot write erasure record %s: %w", rec.ID, err)
	}
	return nil
}

// pendingErasures lists the project's erasure records still pending.
func pendingErasures(ctx context.Context, b storage.Bucket, project string) ([]Erasure, error) {
	return listErasures(ctx, b, project, func(rec Erasure) bool { return rec.State == ErasurePending })
}

// listErasures lists the project's erasure records that keep says to.
func listErasures(ctx context.Context, b storage.Bucket, project string, keep func(Erasure) bool) ([]Erasure, error) {
	var out []Erasure
	err := b.List(ctx, "erasures/"+project+"/", func(o storage.ObjectInfo) error {
		data, _, err := storage.ReadAll(ctx, b, o.Key)
		if err != nil {
			return err
		}
		var rec Erasure
		if json.Unmarshal(data, &rec) == nil && keep(rec) {
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// eraseCommitted applies to e, in log order, the project's erasures whose
// message lies after position after, up to upTo.
func eraseCommitted(ctx context.Context, b storage.Bucket, project string, e *facts.Engine, after, upTo uint64) error {
	if upTo <= after {
		return nil
	}
	recs, err := listErasures(ctx, b, project, func(rec Erasure) bool { return rec.Seq > after && rec.Seq <= upTo })
	if err != nil {
		return fmt.Errorf("cannot read the erasures of project %q: %w", project, err)
	}
	slices.SortFunc(recs, func(x, y Erasure) int { return cmp.Compare(x.Seq, y.Seq) })
	for _, rec := range recs {
		if ref, ok := records.ParseUUID(rec.Person); ok {
			e.Erase(ref)
		}
	}
	return nil
}

// resolvePerson returns the person of ref from the tables: ref itself when
// it is a person (people table), its claimer when it is a browser joined
// to one (identities table); ErrUnknownPerson otherwise.
func resolvePerson(ctx context.Context, rd *rollups.Reader, project string, ref records.UUID) (records.UUID, error) {
	sn, err := rd.Refresh(ctx, project)
	if err != nil {
		return ref, fmt.Errorf("cannot read the tables of project %q: %w", project, err)
	}
	part := tables.BucketName(facts.Bucket(ref))
	found := false
	err = sn.Scan(ctx, TablePeople, rollups.ScanOptions{Partitions: []string{part}, Columns: []string{"ref"}, KeyMin: ref[:], KeyMax: ref[:]},
		func(b rollups.Batch) error {
			found = found || b.Record.NumRows() > 0
			return nil
		})
	if err != nil {
		return ref, fmt.Errorf("cannot read the people of project %q: %w", project, err)
	}
	if found {
		return ref, nil
	}
	person := ref
	err = sn.Scan(ctx, TableIdentities, rollups.ScanOptions{Partitions: []string{part}, Columns: []string{"unit", "person"}, KeyMin: ref[:], KeyMax: ref[:]},
		func(b rollups.Batch) error {
			if b.Record.NumRows() > 0 {
				found = true
				copy(person[:], b.Record.Column(1).(*array.FixedSizeBinary).Value(0))
			}
			return nil
		})
	if err != nil {
		return ref, fmt.Errorf("cannot read the identities of project %q: %w", project, err)
	}
	if !found {
		return ref, fmt.Errorf("%w: %s", ErrUnknownPerson, ref)
	}
	return person, nil
}

// newRequestID returns a random UUID v4 string.
func newRequestID() string {
	var u records.UUID
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

// appliedErasure is an erasure applied to a project's state, waiting for
// the commit that holds it.
type appliedErasure struct {
	id     string
	events int
}

// applyErasure applies an erasure message read from the log.
func (p *Processor) applyErasure(ctx context.Context, m *message.Message, seq uint64) {
	project := eventlog.BatchProject(m)
	if p.parked[project] != nil {
		p.handled(seq) // read back once the project loads
		return
	}
	ps, err := p.project(ctx, project)
	if err != nil {
		p.park(project, seq, err)
		p.handled(seq)
		return
	}
	p.handled(seq)
	if seq <= ps.applied {
		p.stats.skipped.Add(1)
		return
	}
	if err := p.eraseIn(ctx, ps, m, seq); err != nil {
		delete(p.projects, ps.id)
		first := seq
		if u := ps.firstSeq(); u > 0 {
			first = min(first, u)
		}
		p.park(ps.id, first, err)
	}
}

// eraseIn applies an erasure message at seq to a project's state: the
// person's cold days are read back, their events taken out.
func (p *Processor) eraseIn(ctx context.Context, ps *project, m *message.Message, seq uint64) error {
	var em erasureMessage
	ref, ok := records.UUID{}, false
	if json.Unmarshal(m.Payload, &em) == nil {
		ref, ok = records.ParseUUID(em.Person)
	}
	if !ok {
		p.stats.corrupt.Add(1)
		p.logger.Error("cannot decode erasure message; skipping it", "project", ps.id, "seq", seq)
		ps.noteApplied(seq, 0, ps.received, p.now())
		return nil
	}
	// Only a person who shares a visit or a browser with someone else
	// needs days read back: the others' rows on days not in memory are
	// taken out by the commit (erasedPartitions).
	final := ps.engine.Stats().FinalDaysRead
	days := ps.engine.ErasePlan(ref)
	p.stats.finalDaysRead.Add(ps.engine.Stats().FinalDaysRead - final)
	if len(days) > 0 {
		if err := p.thaw(ctx, ps, days); err != nil {
			return err
		}
	}
	_, n, _ := ps.engine.Erase(ref)
	ps.erasures = append(ps.erasures, appliedErasure{id: em.ID, events: n})
	// The record keeps the count and the position: a crash after the
	// commit is finished from them (finishCommittedErasures).
	if rec, err := ErasureStatus(ctx, p.deps.Bucket, ps.id, em.ID); err == nil && rec.State == ErasurePending {
		rec.Seq, rec.Events = seq, n
		if err := putErasure(ctx, p.deps.Bucket, ps.id, rec); err != nil {
			p.logger.Warn("cannot note an erasure's count in its record", "project", ps.id, "erasure", em.ID, "err", err)
		}
	}
	ps.noteApplied(seq, 0, ps.received, p.now())
	p.logger.Info("person erased from the processor's state; committing", "project", ps.id, "erasure", em.ID, "events", n)
	return nil
}

// erasedPartitions reads the partitions that ch.EraseRows names from the
// project's live tables and returns them without the erased rows.
func (p *Processor) erasedPartitions(ctx context.Context, project string, ch *facts.Changes) ([]partitionRows, error) {
	sn, err := p.deps.Reader.Refresh(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tables of project %q to erase rows: %w", project, err)
	}
	parts, err := erasedPartitions(ctx, sn, p.cfg.Tables, p.deps.Store.Allocator(), ch)
	if err != nil {
		return nil, fmt.Errorf("project %q: %w", project, err)
	}
	p.stats.erasedDaysRead.Add(int64(len(ch.EraseRows)))
	return parts, nil
}

// finishErasures completes erasures whose commit succeeded: every
// partition the commit changed is rewritten without the rows it replaced
// or deleted, the files that held them are deleted, and the records are
// marked done.
func (p *Processor) finishErasures(ctx context.Context, ps *project, ch *facts.Changes, done []appliedErasure) {
	parts := map[string][]string{}
	if ch != nil {
		for d := range ch.EventDays {
			parts[TableEvents] = append(parts[TableEvents], facts.DayName(d))
			parts[TableConversions] = append(parts[TableConversions], facts.DayName(d))
		}
		for d := range ch.EraseRows {
			if _, ok := ch.EventDays[d]; !ok {
				parts[TableEvents] = append(parts[TableEvents], facts.DayName(d))
				parts[TableConversions] = append(parts[TableConversions], facts.DayName(d))
			}
		}
		for d := range ch.VisitDays {
			parts[TableVisits] = append(parts[TableVisits], facts.DayName(d))
		}
		for b := range ch.People {
			parts[TablePeople] = append(parts[TablePeople], tables.BucketName(b))
		}
		for b := range ch.Identities {
			parts[TableIdentities] = append(parts[TableIdentities], tables.BucketName(b))
		}
		for b := range ch.Members {
			parts[TableMembers] = append(parts[TableMembers], tables.BucketName(b))
		}
		// The erased parts' rows of the engine's state.
		for b := range ch.State {
			parts[TableState] = append(parts[TableState], tables.BucketName(b))
		}
	}
	if err := p.purge(ctx, ps.id, parts); err != nil {
		// The records stay pending; the project's next load finishes them.
		p.logger.Error("cannot purge the files an erasure rewrote; it stays pending", "project", ps.id, "err", err)
		return
	}
	now := p.now().UTC()
	for _, e := range done {
		rec, err := ErasureStatus(ctx, p.deps.Bucket, ps.id, e.id)
		if err != nil {
			p.logger.Error("cannot read an erasure record", "project", ps.id, "erasure", e.id, "err", err)
			continue
		}
		rec.State, rec.DoneAt, rec.Events = ErasureDone, &now, e.events
		if err := putErasure(ctx, p.deps.Bucket, ps.id, rec); err != nil {
			p.logger.Error("cannot mark an erasure done", "project", ps.id, "erasure", e.id, "err", err)
			continue
		}
		p.logger.Info("erasure done", "project", ps.id, "erasure", e.id, "events", e.events)
	}
}

// purge rewrites the named partitions whole and deletes every retired
// file of the project at once.
func (p *Processor) purge(ctx context.Context, project string, parts map[string][]string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CommitTimeout)
	defer cancel()
	if len(parts) > 0 {
		if _, err := p.deps.Store.CompactWhole(cctx, rollups.Live(project), parts); err != nil {
			return err
		}
	}
	_, err := p.deps.Store.CollectPurge(cctx, project, p.leaseAt)
	return err
}

// finishCommittedErasures completes the erasures of a project that a
// commit holds (their message is at or below its checkpoint) but that a
// crash or a failed purge left pending: what remains is the purge. Every
// partition is rewritten, since which ones the erasure changed is not
// known any more.
func (p *Processor) finishCommittedErasures(ctx context.Context, ps *project) {
	recs, err := pendingErasures(ctx, p.deps.Bucket, ps.id)
	if err != nil || len(recs) == 0 {
		return
	}
	var done []appliedErasure
	for _, r := range recs {
		if r.Seq > 0 && r.Seq <= ps.committed.Seq {
			done = append(done, appliedErasure{id: r.ID, events: r.Events})
		}
	}
	if len(done) == 0 {
		return
	}
	sn, err := p.deps.Reader.Refresh(ctx, ps.id)
	if err != nil {
		p.logger.Error("cannot finish pending erasures", "project", ps.id, "err", err)
		return
	}
	parts := map[string][]string{}
	m := sn.Manifest()
	for name, ts := range m.Tables {
		parts[name] = ts.PartitionNames()
	}
	if err := p.purge(ctx, ps.id, parts); err != nil {
		p.logger.Error("cannot finish pending erasures", "project", ps.id, "err", err)
		return
	}
	p.finishErasures(ctx, ps, nil, done)
}

// finishPendingErasures loads, when the processor starts, the projects of
// its partitions that have a pending erasure: one whose commit a crash
// left unpurged is finished now (project), not only when the project's
// next batch comes.
func (p *Processor) finishPendingErasures(ctx context.Context) {
	projects := map[string]bool{}
	err := p.deps.Bucket.List(ctx, "erasures/", func(o storage.ObjectInfo) error {
		rest := strings.TrimPrefix(o.Key, "erasures/")
		id, _, ok := strings.Cut(rest, "/")
		if !ok || projects[id] || p.parts > 0 && eventlog.PartitionOf(id, p.parts) != p.part {
			return nil
		}
		data, _, err := storage.ReadAll(ctx, p.deps.Bucket, o.Key)
		if err != nil {
			return err
		}
		var rec Erasure
		if json.Unmarshal(data, &rec) == nil && rec.State == ErasurePending {
			projects[id] = true
		}
		return nil
	})
	if err != nil {
		p.logger.Warn("cannot look for pending erasures; they are finished when their project is next loaded", "err", err)
		return
	}
	for id := range projects {
		if p.projects[id] != nil || p.parked[id] != nil {
			continue
		}
		if _, err := p.project(ctx, id); err != nil {
			p.logger.Warn("cannot load a project with a pending erasure; it is finished when the project is next loaded", "project", id, "err", err)
		}
	}
}
