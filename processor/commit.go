package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
)

// partitionRows is the new content of one partition of one table (no
// rows empties it), or, with add, rows to add to it. build makes the
// record of the rows; nil when there are none.
type partitionRows struct {
	table     string
	partition string
	build     func() arrow.Record
	add       bool
}

// recordsOf turns the changes of a Flush into records, one per partition,
// built on alloc; rows of keyed tables get the revs of commit counter rev.
func recordsOf(alloc memory.Allocator, ch *facts.Changes, segs []segmentBuild, reporting string, rev int64) []partitionRows {
	var out []partitionRows
	add := func(table, part string, n int, build func() arrow.Record) {
		pr := partitionRows{table: table, partition: part}
		if n > 0 {
			pr.build = build
		}
		out = append(out, pr)
	}
	for _, d := range sortedKeys(ch.EventDays) {
		rows, conv := ch.EventDays[d], ch.ConversionDays[d]
		if ch.EventAppend[d] {
			if len(rows) > 0 {
				out = append(out, partitionRows{table: TableEvents, partition: facts.DayName(d), add: true,
					build: func() arrow.Record { return eventsRecord(alloc, rows) }})
			}
			if len(conv) > 0 {
				out = append(out, partitionRows{table: TableConversions, partition: facts.DayName(d), add: true,
					build: func() arrow.Record { return conversionsRecord(alloc, conv) }})
			}
			continue
		}
		add(TableEvents, facts.DayName(d), len(rows), func() arrow.Record { return eventsRecord(alloc, rows) })
		add(TableConversions, facts.DayName(d), len(conv), func() arrow.Record { return conversionsRecord(alloc, conv) })
	}
	// Keyed tables: a whole partition replaces the partition, changes
	// are added to it.
	keyed := func(table, part string, n int, whole bool, build func() arrow.Record) {
		if whole {
			add(table, part, n, build)
		} else if n > 0 {
			out = append(out, partitionRows{table: table, partition: part, add: true, build: build})
		}
	}
	for _, d := range sortedKeys(ch.VisitDays) {
		rows := ch.VisitDays[d]
		keyed(TableVisits, facts.DayName(d), len(rows), ch.WholeVisitDays[d], func() arrow.Record { return visitsRecord(alloc, rows, rev) })
	}
	for _, b := range sortedKeys(ch.People) {
		rows := ch.People[b]
		keyed(TablePeople, tables.BucketName(b), len(rows), ch.WholePeople[b], func() arrow.Record { return peopleRecord(alloc, rows, reporting, rev) })
	}
	for _, b := range sortedKeys(ch.Identities) {
		rows := ch.Identities[b]
		keyed(TableIdentities, tables.BucketName(b), len(rows), ch.WholeIdentities[b], func() arrow.Record { return identitiesRecord(alloc, rows, rev) })
	}
	for _, b := range sortedKeys(ch.Members) {
		rows := ch.Members[b]
		keyed(TableMembers, tables.BucketName(b), len(rows), ch.WholeMembers[b], func() arrow.Record { return membersRecord(alloc, rows, rev) })
	}
	if ch.StateWhole {
		for b := range tables.Buckets {
			rows := ch.State[b]
			add(TableState, tables.BucketName(b), len(rows), func() arrow.Record { return stateRecord(alloc, rows, rev) })
		}
	} else {
		for _, b := range sortedKeys(ch.State) {
			rows := ch.State[b]
			keyed(TableState, tables.BucketName(b), len(rows), false, func() arrow.Record { return stateRecord(alloc, rows, rev) })
		}
	}
	if rows := ch.StateDays; ch.StateWhole || len(rows) > 0 {
		keyed(TableState, tables.StatePartitionDays, len(rows), ch.StateWhole, func() arrow.Record { return stateRecord(alloc, rows, rev) })
	}
	for _, d := range sortedKeys(ch.Activity) {
		rows := ch.Activity[d]
		add(TableActivity, facts.DayName(d), len(rows), func() arrow.Record { return activityRecord(alloc, rows) })
	}
	if segs != nil {
		add(TableSegments, segmentsPartition, len(segs), func() arrow.Record { return segmentsRecord(alloc, segs) })
	}
	return out
}

// writeWorkers is how many partitions a commit builds and writes at once.
const writeWorkers = 4

func sortedKeys[K int | int32, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// commit writes the partitions as data files and commits them to target
// in one manifest version, with the checkpoint: every live file of each
// partition written is replaced, except for partitions that only gain
// rows (add). check is called with the manifest the
// commit would be based on and may refuse it (ErrMoved); it runs again
// for every retry of the commit race. written, when not nil, is called
// once the files are written, before the manifest is updated (the fault
// point "erasure-written": Deps.Hook).
func commit(ctx context.Context, store *rollups.Store, tables map[string]*rollups.Table, project string,
	target rollups.Target, parts []partitionRows, cpName, cp string, check func(*rollups.Manifest) error, onWritten func()) (*rollups.Manifest, int64, error) {
	// Build and write the files in parallel: encoding takes the cores,
	// and the store's writes wait for the disk or the network.
	files := make([]rollups.DataFile, len(parts))
	written := make([]bool, len(parts))
	errs := make([]error, len(parts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(writeWorkers, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p := parts[i]
				if p.build == nil || ctx.Err() != nil {
					continue
				}
				rec := p.build()
				// The rows are not needed once in the record: let them go.
				parts[i].build = nil
				f, err := store.Write(ctx, project, tables[p.table], p.partition, rec)
				rec.Release()
				if err != nil {
					errs[i] = fmt.Errorf("cannot write table %q partition %q of project %q: %w", p.table, p.partition, project, err)
					continue
				}
				files[i], written[i] = f, true
			}
		}()
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()
	// Files written for a commit that is not made hold rows nobody will
	// read (an erased person's, possibly): they go at once rather than
	// with the collection of orphans an hour later.
	discard := func() {
		var fs []rollups.DataFile
		for i, ok := range written {
			if ok {
				fs = append(fs, files[i])
			}
		}
		_ = store.Discard(context.WithoutCancel(ctx), project, fs...)
	}
	if err := errors.Join(errs...); err != nil {
		discard()
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		discard()
		return nil, 0, err
	}
	if onWritten != nil {
		onWritten()
	}
	var add []rollups.DataFile
	var bytes int64
	for i, ok := range written {
		if ok {
			add = append(add, files[i])
			bytes += files[i].Bytes
		}
	}
	m, err := store.Update(ctx, target, func(m *rollups.Manifest) (rollups.Change, error) {
		if err := check(m); err != nil {
			return rollups.Change{}, err
		}
		ch := rollups.Change{Add: add, Checkpoints: map[string]string{cpName: cp}}
		for _, p := range parts {
			if p.add {
				continue
			}
			for _, f := range m.Files(p.table, p.partition) {
				ch.Remove = append(ch.Remove, f.Ref())
			}
		}
		return ch, nil
	})
	if err != nil {
		if errors.Is(err, ErrMoved) {
			discard() // refused before its put: never committed
		}
		return nil, 0, fmt.Errorf("cannot commit the facts of project %q: %w", project, err)
	}
	return m, bytes, nil
}
