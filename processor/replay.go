package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// ReplaySource says where a replay reads a project's history.
type ReplaySource string

// Replay sources.
const (
	// ReplayArchive reads the events table (the archive of raw events).
	ReplayArchive ReplaySource = "archive"
	// ReplayLog reads the log from its start (every batch still kept).
	ReplayLog ReplaySource = "log"
)

// ReplayOptions choose what Replay rebuilds.
type ReplayOptions struct {
	// Project is the project id.
	Project string
	// From, YYYY-MM-DD, keeps the day partitions before it as they are and
	// rewrites the days from it on (and every person). Empty: everything.
	// The whole history is read either way: people depend on all of it.
	From string
	// Source is where the history is read: ReplayArchive (default) or
	// ReplayLog.
	Source ReplaySource
	// Since, YYYY-MM-DD, leaves the events of the days before it out of
	// the rebuilt tables: with the generation they replace, they are gone
	// (retention, retention.go). Empty: none. Archive only.
	Since string
	// Attempts bounds how often replay catches up with a live processor
	// that committed meanwhile before it gives up (default 20).
	Attempts int
}

// ReplayDeps are what Replay works with.
type ReplayDeps struct {
	Store   *rollups.Store
	Reader  *rollups.Reader
	Catalog CatalogSource
	// Subscriber (replay mode: eventlog.DefaultSubscriberConfig("")) and
	// Log are needed for ReplayLog only.
	Subscriber KeyReader
	Log        KeyLog
	Logger     *slog.Logger
	// Bucket, when set, is where the erasure records are read: an
	// erasure that a live processor commits while the replay runs is
	// applied to the replay's state too (without it, a replay beside a
	// live erasure could bring the person back).
	Bucket storage.Bucket
	// Clock stamps the segments' builds and times the replay; nil: the
	// wall clock.
	Clock func() time.Time
}

// KeyReader reads the messages of one key (project) of a topic
// (eventlog.Subscriber in replay mode).
type KeyReader interface {
	SubscribeKeyAfter(ctx context.Context, topic, key string, seq uint64) (<-chan *message.Message, error)
}

// KeyLog tells the position of a key's last message (eventlog.Log).
type KeyLog interface {
	LastSeqKey(ctx context.Context, topic, key string) (uint64, error)
}

// ReplayStats says what a replay did.
type ReplayStats struct {
	// Events read; Batches read (ReplayLog); CatchUps rounds needed to
	// catch up with a live processor.
	Events, Batches int64
	CatchUps        int
	// Version and Generation of the live manifest promoted.
	Version, Generation int64
	// Checkpoint is the log position the rebuilt tables hold.
	Checkpoint uint64
	Took       time.Duration
}

// Replay rebuilds a project's tables from its history with the current
// catalog (actions matched again, segments evaluated again) into a staged
// generation, and promotes it in one atomic manifest update: readers see
// the old tables or the new ones, never a mix. A live processor that
// commits meanwhile is caught up with (its new events are added) before
// the promotion; it then rebuilds its own state from the new tables.
func Replay(ctx context.Context, cfg Config, deps ReplayDeps, opts ReplayOptions) (ReplayStats, error) {
	deps.Clock = clockOr(deps.Clock)
	start := deps.Clock()
	var st ReplayStats
	if err := cfg.Validate(); err != nil {
		return st, err
	}
	if deps.Store == nil || deps.Reader == nil || deps.Catalog == nil {
		return st, errors.New("cannot replay: Store, Reader and Catalog are required")
	}
	if opts.Project == "" {
		return st, errors.New("cannot replay: no project")
	}
	if opts.Source == "" {
		opts.Source = ReplayArchive
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 20
	}
	var fromDay int32
	if opts.From != "" {
		d, err := facts.ParseDay(opts.From)
		if err != nil {
			return st, fmt.Errorf("cannot replay: From %q is not a day YYYY-MM-DD: %w", opts.From, err)
		}
		fromDay = d
	}
	var sinceDay int32
	if opts.Since != "" {
		d, err := facts.ParseDay(opts.Since)
		if err != nil {
			return st, fmt.Errorf("cannot replay: Since %q is not a day YYYY-MM-DD: %w", opts.Since, err)
		}
		if opts.Source != ReplayArchive {
			return st, fmt.Errorf("cannot replay: Since needs the source %q", ReplayArchive)
		}
		sinceDay = d
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cl, err := channels.Default()
	if err != nil {
		return st, err
	}
	ecfg, _ := engineConfig(opts.Project, deps.Catalog.State(), cl, cfg.VisitTimeout)
	e, err := facts.New(ecfg)
	if err != nil {
		return st, err
	}
	sn, err := deps.Reader.Refresh(ctx, opts.Project)
	if err != nil {
		return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
	}
	base := sn.Manifest()
	cp, err := parseCheckpoint(base.Checkpoint(cfg.Checkpoint))
	if err != nil {
		return st, err
	}
	switch opts.Source {
	case ReplayArchive:
		if base.Version == 0 {
			return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, ErrNoProject)
		}
		n, err := foldEvents(ctx, sn, e, false, 0, sinceDay)
		if err != nil {
			return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
		}
		st.Events = n
	case ReplayLog:
		if deps.Subscriber == nil || deps.Log == nil {
			return st, errors.New("cannot replay from the log: Subscriber and Log are required")
		}
		seq, batches, err := readLog(ctx, cfg.Topic, deps, opts.Project, e, &cp)
		if err != nil {
			return st, fmt.Errorf("cannot replay project %q from the log: %w", opts.Project, err)
		}
		st.Batches = batches
		st.Events = e.Stats().Events
		if seq > cp.Seq {
			cp.Seq = seq
		}
	default:
		return st, fmt.Errorf("cannot replay: unknown source %q (use %q or %q)", opts.Source, ReplayArchive, ReplayLog)
	}
	cp.Segments = e.SegmentsFingerprint()
	cp.Rev++

	// Stage the new generation: the day partitions before From stay as
	// they are.
	keep := func(table, part string) bool {
		if fromDay == 0 {
			return false
		}
		d, err := facts.ParseDay(part)
		return err == nil && d < fromDay && d >= sinceDay && (table == TableEvents || table == TableVisits || table == TableConversions)
	}
	staged, err := deps.Store.StartGeneration(ctx, opts.Project, rollups.GenerationOptions{Keep: keep})
	if err != nil {
		return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
	}
	abort := func() {
		if err := deps.Store.AbortGeneration(context.WithoutCancel(ctx), staged); err != nil {
			logger.Warn("cannot abort staged generation", "project", opts.Project, "err", err)
		}
	}
	all := e.All()
	if fromDay != 0 {
		for d := range all.EventDays {
			if d < fromDay {
				delete(all.EventDays, d)
				delete(all.ConversionDays, d)
			}
		}
		for d := range all.VisitDays {
			if d < fromDay {
				delete(all.VisitDays, d)
			}
		}
	}
	e.Settle()
	now := deps.Clock().UnixMilli()
	ps := &project{id: opts.Project, engine: e}
	segs := segmentBuilds(deps.Catalog.State(), ps, now)
	parts := recordsOf(deps.Store.Allocator(), all, segs, ecfg.ReportingCurrency, cp.Rev)
	// The whole history's rows: each is let go once its partition's
	// record is built (commit), not held until the last is written.
	all.DropRows()
	if _, _, err := commit(ctx, deps.Store, cfg.Tables, opts.Project, staged, parts, cfg.Checkpoint, cp.String(),
		func(*rollups.Manifest) error { return nil }, nil); err != nil {
		abort()
		return st, err
	}
	// Promote over the live version read; when a live processor committed
	// meanwhile, add what it committed and try again.
	expect := base
	for attempt := 0; ; attempt++ {
		m, err := deps.Store.Promote(ctx, staged, rollups.PromoteOptions{ExpectLive: expect.Version})
		if err == nil {
			st.Version, st.Generation, st.Checkpoint = m.Version, m.Generation, cp.Seq
			st.Took = deps.Clock().Sub(start)
			logger.Info("project replayed", "project", opts.Project, "events", st.Events, "version", m.Version,
				"generation", m.Generation, "catch_ups", st.CatchUps, "took", st.Took.Round(time.Millisecond))
			return st, nil
		}
		if !errors.Is(err, rollups.ErrConflict) || attempt+1 >= opts.Attempts {
			abort()
			if errors.Is(err, rollups.ErrConflict) {
				return st, fmt.Errorf("cannot replay project %q: %w: %w", opts.Project, ErrReplayRace, err)
			}
			return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
		}
		st.CatchUps++
		sn, err := deps.Reader.Refresh(ctx, opts.Project)
		if err != nil {
			abort()
			return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
		}
		live := sn.Manifest()
		if live.Generation != expect.Generation {
			abort()
			return st, fmt.Errorf("cannot replay project %q: another replay promoted generation %d meanwhile: %w", opts.Project, live.Generation, ErrReplayRace)
		}
		lcp, err := parseCheckpoint(live.Checkpoint(cfg.Checkpoint))
		if err != nil {
			abort()
			return st, err
		}
		// Read the events partitions the live processor rewrote.
		var changed []string
		if ts := live.Table(TableEvents); ts != nil {
			for _, part := range ts.PartitionNames() {
				if d, err := facts.ParseDay(part); err == nil && d < sinceDay {
					continue // past retention: left out
				}
				if !slices.Equal(fileNames(live.Files(TableEvents, part)), fileNames(expect.Files(TableEvents, part))) {
					changed = append(changed, part)
				}
			}
		}
		if len(changed) > 0 {
			err := sn.Scan(ctx, TableEvents, rollups.ScanOptions{Partitions: changed, Uncached: true}, func(b rollups.Batch) error {
				r, err := newEventReader(b.Record)
				if err != nil {
					return err
				}
				for i := range int(b.Record.NumRows()) {
					if e.Add(r.event(e, i, false)) {
						st.Events++
					}
				}
				return nil
			})
			if err != nil {
				abort()
				return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
			}
		}
		if deps.Bucket != nil {
			// Erasures the live processor committed meanwhile: the
			// events read above lack the person, but the replay's state
			// still holds them from before.
			ecp, err := parseCheckpoint(expect.Checkpoint(cfg.Checkpoint))
			if err == nil {
				err = eraseCommitted(ctx, deps.Bucket, opts.Project, e, ecp.Seq, lcp.Seq)
			}
			if err != nil {
				abort()
				return st, fmt.Errorf("cannot replay project %q: %w", opts.Project, err)
			}
		}
		cp.Seq, cp.Received = max(cp.Seq, lcp.Seq), max(cp.Received, lcp.Received)
		cp.Rev = max(cp.Rev, lcp.Rev) + 1
		ch := e.Flush()
		segs := segmentBuilds(deps.Catalog.State(), ps, deps.Clock().UnixMilli())
		if _, _, err := commit(ctx, deps.Store, cfg.Tables, opts.Project, staged, recordsOf(deps.Store.Allocator(), ch, segs, ecfg.ReportingCurrency, cp.Rev),
			cfg.Checkpoint, cp.String(), func(*rollups.Manifest) error { return nil }, nil); err != nil {
			abort()
			return st, err
		}
		expect = live
	}
}

// readLog adds the project's batches of the whole log to e, up to the
// log's end when reading started. It returns the last position read.
func readLog(ctx context.Context, topic string, deps ReplayDeps, project string, e *facts.Engine, cp *checkpoint) (uint64, int64, error) {
	last, err := deps.Log.LastSeqKey(ctx, topic, project)
	if err != nil {
		return 0, 0, err
	}
	if last == 0 {
		return 0, 0, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, err := deps.Subscriber.SubscribeKeyAfter(ctx, topic, project, 0)
	if err != nil {
		return 0, 0, err
	}
	var batches int64
	for m := range msgs {
		seq, _ := eventlog.Seq(m)
		if m.Metadata.Get(MetaKind) == KindErasure {
			// An erasure in the log erases again what came before it.
			var em erasureMessage
			if eventlog.BatchProject(m) == project && json.Unmarshal(m.Payload, &em) == nil {
				if ref, ok := records.ParseUUID(em.Person); ok {
					e.Erase(ref)
				}
			}
		} else if p := eventlog.BatchProject(m); p == "" || p == project {
			if b, err := records.Decode(m.Payload); err == nil && b.Project == project {
				e.AddBatch(b)
				batches++
				cp.Received = max(cp.Received, b.ReceivedAt)
			}
		}
		m.Ack()
		if seq >= last {
			return seq, batches, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, errors.New("the log ended the subscription early")
}
