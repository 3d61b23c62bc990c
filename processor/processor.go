package processor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// MessageLog reads stored messages back by position, and holds the
// processor's lease on the log (eventlog.Log).
type MessageLog interface {
	GetMsg(ctx context.Context, topic string, seq uint64) (*message.Message, error)
	LastSeq(ctx context.Context, topic string) (uint64, error)
	LastSeqKey(ctx context.Context, topic, key string) (uint64, error)
	PurgePartition(ctx context.Context, topic string, part int, below uint64) error
	AcquireLease(ctx context.Context, name string, cfg eventlog.LeaseConfig) (*eventlog.Lease, error)
}

// LogReader reads a topic of the log, or one partition of it, from a
// position on (eventlog.Subscriber in replay mode).
type LogReader interface {
	SubscribeAfter(ctx context.Context, topic string, seq uint64) (<-chan *message.Message, error)
	SubscribePartitionAfter(ctx context.Context, topic string, part int, seq uint64) (<-chan *message.Message, error)
	SubscribeKeyAfter(ctx context.Context, topic, key string, seq uint64) (<-chan *message.Message, error)
}

// CatalogSource gives the current catalog (catalog.Catalog).
type CatalogSource interface {
	State() *catalog.State
}

// Deps are what a Processor works with.
type Deps struct {
	// Subscriber reads the topic from the processor's watermark on, one
	// message at a time in log order (a replay-mode subscriber:
	// eventlog.DefaultSubscriberConfig("")).
	Subscriber LogReader
	// Log holds the processor's lease and reads messages back by
	// position (the batches a project whose tables moved on must apply
	// again).
	Log MessageLog
	// Store writes the tables; Reader reads them back when a project's
	// state is rebuilt.
	Store  *rollups.Store
	Reader *rollups.Reader
	// Bucket holds the watermark object.
	Bucket storage.Bucket
	// Catalog gives projects' time zones, currencies, actions and segments.
	Catalog CatalogSource
	// Segments, when set, is kept current with each commit, so that
	// membership lookups in this process see commits at once.
	Segments *Segments
	// Logger may be nil.
	Logger *slog.Logger
	// Clock is the processor's clock: the time retention counts days
	// from, erasure records are stamped with, the log's retention is
	// counted back from, and every interval, back-off and lease wait is
	// measured on; nil: the wall clock. A clock other than the wall
	// clock must still advance with it (it may be offset).
	Clock func() time.Time
	// Hook, when set, is called at named points of an erasure:
	// "erasure-written" once the files of the commit that holds it are
	// written, before the manifest is updated; "erasure-committed" once
	// that commit is in the manifest, before the purge. The fault build of
	// mf (cmd/mf, tag mffaults) stands for a crash there; nil otherwise.
	Hook func(point string)
}

// Processor turns the log's accepted batches into the tables, exactly
// once: see docs/processor.md.
type Processor struct {
	cfg    Config
	deps   Deps
	logger *slog.Logger
	cl     *channels.Classifier

	// part is the partition of the topic this processor reads, of parts
	// (parts 0: the whole topic).
	part, parts int

	projects map[string]*project // owned by the Run goroutine
	// parked are the projects whose state could not be loaded: their
	// batches are passed over (and read back once the project loads), so
	// that one project does not hold up the others.
	parked   map[string]*parkedProject
	results  chan commitResult
	stopped  chan struct{} // closed when Run returns
	sem      chan struct{}
	inflight sync.WaitGroup

	lastSeq     atomic.Uint64 // the highest log position handled
	watermark   atomic.Uint64
	watermarkAt time.Time
	// watermarkChecks counts the times the watermark was due to be
	// written (written or not): tests wait on it.
	watermarkChecks atomic.Int64
	backlog         bool
	// waitFor is a project whose commit is in flight while MaxPendingEvents
	// more of its events are applied: Run reads no batch until that commit
	// is done.
	waitFor       *project
	stats         counters
	ready         atomic.Bool
	leading       atomic.Bool   // holds the lease and reads the log
	batch         records.Batch // the batch being applied (apply's scratch)
	unknownWarned map[string]bool
	// marks are log positions with when the log stored them, oldest
	// first (partitions only): the purge of the log finds in them the
	// position below which batches are past LogRetention.
	marks       []logMark
	markChecked time.Time
	purgedBelow uint64
	purgedAt    time.Time
	// Retention (retention.go): when the last look started, whether a
	// run is under way, and the projects a run rebuilt (their state is
	// rebuilt from the new tables).
	started    time.Time
	retainedAt time.Time
	// leaseAt is when this processor took its lease: files of the
	// project written before it and never committed are a crashed
	// writer's (an erasure's purge deletes them at once).
	leaseAt   time.Time
	retaining atomic.Bool
	retained  chan string
	// crashOnStop makes Run return at once when its context ends, without
	// the final commit: how the package's tests stand for a crash.
	crashOnStop atomic.Bool
}

type counters struct {
	batches, events, skipped, corrupt, commits, commitFailures, reloads, tooLate atomic.Int64
	bytes, parked, thawedDays, retentions, retentionLooks                        atomic.Int64
	residentDays, thawedUnitDays                                                 atomic.Int64
	reclaimDays, reclaimedVisits, reclaimMissing                                 atomic.Int64
	finalDaysRead                                                                atomic.Int64
	erasedDaysRead                                                               atomic.Int64
	maxCommitEvents                                                              atomic.Int64
	// hotEvents, hotDays: in memory after the last commit (set by
	// Metrics.observe's caller, Run's goroutine).
	hotEvents, hotDays atomic.Int64
}

// parkedProject is a project whose state could not be loaded.
type parkedProject struct {
	first    uint64 // the lowest position passed over
	err      error
	since    time.Time
	attempts int
	retryAt  time.Time
}

// Stats counts what a Processor did.
type Stats struct {
	// Batches and Events applied; Skipped batches already committed
	// (redeliveries); Corrupt batches that could not be decoded.
	Batches, Events, Skipped, Corrupt int64
	// Commits made and failed; Reloads of a project's state after another
	// committer moved its tables; TooLate events dropped for falling on a
	// day already final (older than the late window: see docs).
	Commits, CommitFailures, Reloads, TooLate int64
	// BytesWritten sums the sizes of the data files written.
	BytesWritten int64
	// ThawedDays counts days read back into memory for late events
	// (docs/processor.md, "Memory").
	ThawedDays int64
	// ThawedUnitDays counts days read for the visits of browsers whose
	// claim may move (only their rows come back).
	ThawedUnitDays int64
	// ReclaimDays counts the days whose visits partitions were read to
	// write cold visits again for claims that moved; ReclaimedVisits the
	// rows written again; ReclaimMissing the cold visits whose rows the
	// table did not hold (a bug: their events were read back instead).
	ReclaimDays, ReclaimedVisits, ReclaimMissing int64
	// FinalDaysRead counts the final days (past the late window) read
	// back for the erasure of a person who shares a browser or a visit.
	FinalDaysRead int64
	// ResidentDays counts the cold days left with residents (events of
	// visits that reach a day still in memory) after each freeze.
	ResidentDays int64
	// MaxCommitEvents is the most events one commit took: in a backlog
	// about MaxPendingEvents (plus a batch), whatever the backlog's size.
	MaxCommitEvents int64
	// HotEvents and HotDays are the events and the days whose events the
	// projects' facts held in memory after the last commit (a gauge, not
	// a count): what late events can still change without a read back.
	HotEvents, HotDays int64
	// ErasedDaysRead counts the days whose events and conversions
	// partitions an erasure read to rewrite them without the person's rows
	// (days not in memory; erasure_rows.go).
	ErasedDaysRead int64
	// Retentions counts the projects whose history past their retention
	// was deleted (retention.go), one per run and project.
	// RetentionLooks counts the looks at every project's retention (one
	// per RetentionInterval), counted when a look is over.
	Retentions, RetentionLooks int64
	// LastSeq is the highest log position handled, Watermark the position
	// below which everything is committed.
	LastSeq, Watermark uint64
	// Parked is how many projects are parked now: their state cannot be
	// loaded (their tables cannot be read), so their batches wait in the
	// log while the other projects go on; they are retried with a backoff.
	Parked int64
}

// project is the state of one project, owned by the Run goroutine.
type project struct {
	id        string
	engine    *facts.Engine
	reporting string
	segFP     string

	generation   int64      // of the manifest the state was built from
	committed    checkpoint // what the live manifest holds, as far as we know
	committedRaw string     // the same, as stored
	applied      uint64     // the highest position applied
	received     int64      // the newest received time applied (epoch ms)

	// Batches applied but not committed: uncommitted is the lowest
	// position among them (0: none), nextFirst the lowest applied since
	// the commit in flight started (0: none); pending tells whether any
	// was applied since the last commit started, pendingEvts how many
	// events, since when.
	uncommitted uint64
	nextFirst   uint64
	pending     bool
	pendingEvts int
	since       time.Time
	flushing    bool
	retryAt     time.Time // no commit before (a failure's backoff)
	failures    int

	compactedAt, collectedAt time.Time
	maintaining              atomic.Bool // a compaction runs
	// reclaimedAt is when claims that moved were last written to cold
	// visits (Config.ReclaimInterval). claimSince, while the stored
	// checkpoint names days whose visits wait for that, is its position:
	// the watermark stays below it, so that a restart reads the project's
	// batches again and loads it, which writes those days' visits.
	reclaimedAt time.Time
	claimSince  uint64

	// erasures applied since the last commit started (erasure.go); a
	// commit takes them and finishes them once it succeeded.
	erasures []appliedErasure
}

// firstSeq returns the lowest position not yet committed, 0 when none.
func (p *project) firstSeq() uint64 { return p.uncommitted }

// noteApplied records that the batch at seq, of n events, was applied at
// the time at.
func (p *project) noteApplied(seq uint64, n int, received int64, at time.Time) {
	p.applied = seq
	p.received = max(p.received, received)
	if p.uncommitted == 0 {
		p.uncommitted = seq
	}
	if p.flushing && p.nextFirst == 0 {
		p.nextFirst = seq
	}
	if !p.pending {
		p.pending, p.since = true, at
	}
	p.pendingEvts += n
}

// New returns a Processor; Run starts it.
func New(cfg Config, deps Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case deps.Subscriber == nil:
		return nil, errors.New("cannot create processor: no Subscriber")
	case deps.Log == nil:
		return nil, errors.New("cannot create processor: no Log")
	case deps.Store == nil || deps.Reader == nil:
		return nil, errors.New("cannot create processor: no rollups Store and Reader")
	case deps.Bucket == nil:
		return nil, errors.New("cannot create processor: no Bucket")
	case deps.Catalog == nil:
		return nil, errors.New("cannot create processor: no Catalog")
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	deps.Clock = clockOr(deps.Clock)
	cl, err := channels.Default()
	if err != nil {
		return nil, fmt.Errorf("cannot create processor: %w", err)
	}
	return &Processor{
		cfg:           cfg,
		deps:          deps,
		logger:        logger.With("component", "processor"),
		cl:            cl,
		projects:      map[string]*project{},
		parked:        map[string]*parkedProject{},
		results:       make(chan commitResult, 64),
		stopped:       make(chan struct{}),
		sem:           make(chan struct{}, 2),
		unknownWarned: map[string]bool{},
		retained:      make(chan string, 16),
		started:       deps.Clock(),
	}, nil
}

// Stats returns the processor's counters.
func (p *Processor) Stats() Stats {
	return Stats{
		Batches: p.stats.batches.Load(), Events: p.stats.events.Load(), Skipped: p.stats.skipped.Load(),
		Corrupt: p.stats.corrupt.Load(), Commits: p.stats.commits.Load(), CommitFailures: p.stats.commitFailures.Load(),
		Reloads: p.stats.reloads.Load(), TooLate: p.stats.tooLate.Load(), BytesWritten: p.stats.bytes.Load(),
		LastSeq: p.lastSeq.Load(), Watermark: p.watermark.Load(), Parked: p.stats.parked.Load(),
		ThawedDays: p.stats.thawedDays.Load(), Retentions: p.stats.retentions.Load(),
		RetentionLooks: p.stats.retentionLooks.Load(), ResidentDays: p.stats.residentDays.Load(),
		ThawedUnitDays: p.stats.thawedUnitDays.Load(),
		ReclaimDays:    p.stats.reclaimDays.Load(), ReclaimedVisits: p.stats.reclaimedVisits.Load(),
		ReclaimMissing: p.stats.reclaimMissing.Load(), FinalDaysRead: p.stats.finalDaysRead.Load(),
		ErasedDaysRead: p.stats.erasedDaysRead.Load(), MaxCommitEvents: p.stats.maxCommitEvents.Load(),
		HotEvents: p.stats.hotEvents.Load(), HotDays: p.stats.hotDays.Load(),
	}
}

// noteHot sets the hot events and days of Stats from the projects in
// memory (Run's goroutine).
func (p *Processor) noteHot() {
	var evs, days int64
	for _, ps := range p.projects {
		if ps.engine != nil {
			evs += int64(ps.engine.HotEvents())
			days += int64(ps.engine.HotDays())
		}
	}
	p.stats.hotEvents.Store(evs)
	p.stats.hotDays.Store(days)
}

// Ready reports whether the processor runs: it consumes the log, or it
// waits as a standby while another process holds the lease.
func (p *Processor) Ready() bool { return p.ready.Load() }

// Run takes the processor's lease on the log (waiting as a standby while
// another process holds it), then consumes the log from the watermark on
// until ctx ends, and commits what it has applied before it returns. It
// returns early when the log cannot be read or the lease is lost.
func (p *Processor) Run(ctx context.Context) error {
	p.ready.Store(true)
	lease, err := p.deps.Log.AcquireLease(ctx, p.cfg.LeaseName, p.cfg.Lease)
	if err != nil {
		close(p.stopped)
		if ctx.Err() != nil {
			return nil // stopped while waiting as a standby
		}
		return fmt.Errorf("cannot start processor: %w", err)
	}
	return p.runHeld(ctx, lease)
}

// runHeld consumes the log (or the processor's partition of it) while it
// holds lease, and releases the lease when it stops.
func (p *Processor) runHeld(ctx context.Context, lease *eventlog.Lease) error {
	defer p.cfg.Metrics.running(p)()
	defer func() {
		close(p.stopped)
		p.inflight.Wait()
	}()
	p.ready.Store(true)
	defer func() {
		if p.crashOnStop.Load() {
			lease.Abandon() // a crash leaves its lease to expire
			return
		}
		if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
			p.logger.Warn("cannot release the processor lease", "err", err)
		}
	}()
	p.leaseAt = p.now()
	// Read after the lease is held: a processor that held it before may
	// have moved the watermark on while this one waited.
	wm, err := p.readWatermark(ctx)
	if err != nil {
		return err
	}
	// Every batch up to the watermark is committed; those after it may
	// be committed for some projects (their checkpoints say) and are
	// skipped there.
	var msgs <-chan *message.Message
	if p.parts > 0 {
		msgs, err = p.deps.Subscriber.SubscribePartitionAfter(ctx, p.cfg.Topic, p.part, wm)
	} else {
		msgs, err = p.deps.Subscriber.SubscribeAfter(ctx, p.cfg.Topic, wm)
	}
	if err != nil {
		return fmt.Errorf("cannot start processor: cannot read topic %q: %w", p.cfg.Topic, err)
	}
	p.watermark.Store(wm)
	p.lastSeq.Store(wm)
	p.leading.Store(true)
	defer p.leading.Store(false)
	p.logger.Debug("processor started", "watermark", wm, "lease", lease.Holder())
	p.finishPendingErasures(ctx)
	tick := time.NewTicker(p.cfg.FlushInterval / 4)
	defer tick.Stop()
	for {
		// A project with MaxPendingEvents applied while its commit is in
		// flight holds the next batches back until that commit is done:
		// in a backlog the batches come faster than commits go, and the
		// next commit would otherwise take all of them (its records grow
		// with it: 470,000 events, 1.2 GB, in the soak).
		in := msgs
		if p.waitFor != nil {
			in = nil
		}
		select {
		case m, ok := <-in:
			if !ok {
				// The subscription ends with ctx (or the log closed).
				if ctx.Err() != nil && p.crashOnStop.Load() {
					return nil
				}
				p.shutdown()
				return nil
			}
			p.handle(ctx, m)
			p.flushDue(ctx, false)
		case r := <-p.results:
			p.done(ctx, r)
		case <-tick.C:
			p.retryParked(ctx)
			p.cfg.Metrics.observe(p)
			p.flushDue(ctx, false)
			p.writeWatermark(ctx, false)
			p.purgeLog(ctx)
			p.retain(ctx)
		case id := <-p.retained:
			p.afterRetention(ctx, id)
		case <-lease.Context().Done():
			// Another process took the log over: what this one applied is
			// committed only if its tables did not move meanwhile
			// (ErrMoved otherwise).
			p.shutdown()
			return fmt.Errorf("processor stopped: %w", context.Cause(lease.Context()))
		case <-ctx.Done():
			if p.crashOnStop.Load() {
				return nil
			}
			p.shutdown()
			return nil
		}
	}
}

// shutdown commits everything applied, waiting for commits in flight. A
// commit that fails here is not retried: its batches are in the log above
// the watermark and are read again at the next start.
func (p *Processor) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CommitTimeout)
	defer cancel()
	if !p.waitCommits(ctx) {
		return
	}
	for _, ps := range p.projects {
		if ps.pending || ps.engine.Dirty() {
			p.startCommit(ctx, ps)
		}
	}
	if !p.waitCommits(ctx) {
		return
	}
	// Days that went cold after the last commit (Freeze follows each
	// commit) are committed as cold too: the state rows would otherwise
	// have the next start read them back as days in memory.
	for _, ps := range p.projects {
		if ps.engine.FrozenSinceFlush() {
			p.startCommit(ctx, ps)
		}
	}
	if !p.waitCommits(ctx) {
		return
	}
	p.writeWatermark(ctx, true)
}

// waitCommits waits for the commits in flight; false when ctx ended first.
func (p *Processor) waitCommits(ctx context.Context) bool {
	for slices.ContainsFunc(mapValues(p.projects), func(ps *project) bool { return ps.flushing }) {
		select {
		case r := <-p.results:
			p.done(ctx, r)
		case <-ctx.Done():
			p.logger.Warn("processor stopped before its last commits finished; they are redone at the next start")
			return false
		}
	}
	return true
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// drainResults handles the commit results available now.
func (p *Processor) drainResults(ctx context.Context) {
	for {
		select {
		case r := <-p.results:
			p.done(ctx, r)
		default:
			return
		}
	}
}

// handle acknowledges one delivered message, then applies it. The
// acknowledgement comes first so that the subscriber hands the next
// message out (it has it decoded already) while this one is applied; a
// message acknowledged but not committed is above the watermark and read
// again after a crash. A message of a project whose state cannot be
// loaded parks the project (apply).
func (p *Processor) handle(ctx context.Context, m *message.Message) {
	seq, ok := eventlog.Seq(m)
	m.Ack()
	if !ok {
		p.logger.Error("message without log position; skipping it", "uuid", m.UUID)
		return
	}
	p.note(m, seq)
	// Behind the log: many messages still to deliver, or this one stored
	// a while ago.
	// Nothing left to deliver is never a backlog, however old the message:
	// the processor is at the head of the log and commits at the fast pace.
	pending, err := strconv.ParseUint(m.Metadata.Get(eventlog.MetaPending), 10, 64)
	p.backlog = err == nil && pending > p.cfg.BacklogMessages
	if err == nil && pending > 0 && !p.backlog {
		if at, err := time.Parse(time.RFC3339Nano, m.Metadata.Get(eventlog.MetaTime)); err == nil && p.now().Sub(at) > p.cfg.BacklogLag {
			p.backlog = true
		}
	}
	p.apply(ctx, m, seq)
}

// apply adds a batch to its project's state, unless the project's tables
// hold it already. A project whose state cannot be loaded is parked: its
// batches are passed over until it loads, then read back from the log.
func (p *Processor) apply(ctx context.Context, m *message.Message, seq uint64) {
	if m.Metadata.Get(MetaKind) == KindErasure {
		p.applyErasure(ctx, m, seq)
		return
	}
	// Decoded without copies into a batch reused message after message:
	// the engine copies what it keeps (facts.Engine.AddBatch).
	b := &p.batch
	err := records.DecodeShared(m.Payload, b)
	if err != nil {
		p.stats.corrupt.Add(1)
		p.handled(seq)
		p.parkUndecodable(m, seq, err)
		return
	}
	if p.parts > 0 && eventlog.Legacy(m) && eventlog.PartitionOf(b.Project, p.parts) != p.part {
		// Stored before the log was partitioned: another partition's.
		p.handled(seq)
		return
	}
	if pk := p.parked[b.Project]; pk != nil {
		p.handled(seq) // read back once the project loads
		return
	}
	ps, err := p.project(ctx, b.Project)
	if err != nil {
		p.park(strings.Clone(b.Project), seq, err)
		p.handled(seq)
		return
	}
	p.handled(seq)
	if seq <= ps.applied {
		p.stats.skipped.Add(1)
		return
	}
	late := ps.engine.Stats().TooLate
	n, err := p.addBatch(ctx, ps, b)
	if err != nil {
		// The project's state is incomplete without the days it could
		// not read back: let it go and load it again (from its tables
		// and the log after its checkpoint) once the store answers.
		delete(p.projects, ps.id)
		first := seq
		if u := ps.firstSeq(); u > 0 {
			first = min(first, u) // the watermark stays below what it applied
		}
		p.park(ps.id, first, err)
		return
	}
	p.stats.batches.Add(1)
	p.stats.events.Add(int64(n))
	if d := ps.engine.Stats().TooLate - late; d > 0 {
		p.stats.tooLate.Add(d)
		p.logger.Warn("events for days already final were dropped (older than the late window)", "project", ps.id, "seq", seq, "events", d)
	}
	ps.noteApplied(seq, len(b.Events), b.ReceivedAt, p.now())
	if ps.flushing && ps.pendingEvts >= p.cfg.MaxPendingEvents {
		p.waitFor = ps
	}
}

// parkUndecodable parks the project of a batch that cannot be decoded (a
// newer ingest's format, damaged bytes), named by the message's header,
// from that batch on: the batch stays in the log (the watermark stays
// below it) and the project's later batches wait with it, while the
// other projects go on. Each retry reads the batch back and fails the same
// way until mf can decode it (an upgrade) or an operator removes it from
// the log (docs/processor.md, "Poisoned projects"). A batch that names no
// project is skipped, as before.
func (p *Processor) parkUndecodable(m *message.Message, seq uint64, err error) {
	id := eventlog.BatchProject(m)
	if id == "" {
		p.logger.Error("cannot decode a batch that names no project; skipping it", "seq", seq, "err", err)
		return
	}
	if p.parked[id] != nil {
		return
	}
	// The project's state, up to the batch before, stays in memory and is
	// committed as usual; the retries read back from there (retryParked).
	p.park(strings.Clone(id), seq, fmt.Errorf("batch at log position %d cannot be decoded: %w", seq, err))
}

// park passes over a project whose state cannot be loaded, from position
// seq on, and schedules a retry.
func (p *Processor) park(id string, seq uint64, err error) {
	pk := &parkedProject{first: seq, err: err, since: p.now(), attempts: 1, retryAt: p.now().Add(p.cfg.RetryBackoff)}
	p.parked[id] = pk
	p.stats.parked.Add(1)
	p.logger.Error("cannot load the state of a project; parking it while the others go on", "project", id, "seq", seq,
		"retry_in", p.cfg.RetryBackoff, "err", err)
}

// retryParked tries to load the parked projects whose retry is due; one
// that loads reads back the batches passed over and goes on.
func (p *Processor) retryParked(ctx context.Context) {
	now := p.now()
	for id, pk := range p.parked {
		if now.Before(pk.retryAt) || ctx.Err() != nil {
			continue
		}
		// A project parked for an undecodable batch keeps its state in
		// memory: it goes on from there.
		ps := p.projects[id]
		var err error
		if ps == nil {
			ps, err = p.load(ctx, id)
		}
		if err == nil {
			err = p.readBack(ctx, ps, p.lastSeq.Load())
		}
		if err != nil {
			pk.attempts++
			wait := min(p.cfg.RetryBackoff<<min(pk.attempts-1, 6), time.Minute)
			pk.retryAt, pk.err = now.Add(wait), err
			p.logger.Warn("parked project still cannot be loaded", "project", id, "parked_for", now.Sub(pk.since).Round(time.Second),
				"attempts", pk.attempts, "retry_in", wait, "err", err)
			continue
		}
		delete(p.parked, id)
		p.stats.parked.Add(-1)
		p.projects[id] = ps
		p.logger.Info("parked project loaded; going on", "project", id, "parked_for", now.Sub(pk.since).Round(time.Second))
	}
}

// handled records that every batch up to seq was applied or skipped.
func (p *Processor) handled(seq uint64) {
	if seq > p.lastSeq.Load() {
		p.lastSeq.Store(seq)
	}
}

// project returns the state of a project, building it from its tables
// when this process has not seen the project yet.
func (p *Processor) project(ctx context.Context, id string) (*project, error) {
	if ps := p.projects[id]; ps != nil {
		return ps, nil
	}
	id = strings.Clone(id) // kept: it may point into a message
	ps, err := p.load(ctx, id)
	if err != nil {
		return nil, err
	}
	p.projects[id] = ps
	p.finishCommittedErasures(ctx, ps)
	return ps, nil
}

// engineConfig derives a project's engine configuration from the catalog.
func engineConfig(id string, st *catalog.State, cl *channels.Classifier, timeout time.Duration) (facts.Config, bool) {
	cfg := facts.Config{Project: id, Location: time.UTC, ReportingCurrency: "EUR", Classifier: cl, VisitTimeout: timeout}
	if st == nil {
		return cfg, false
	}
	pr, ok := st.Project(id)
	if !ok {
		return cfg, false
	}
	cfg.Location = pr.Location()
	if pr.ReportingCurrency != "" {
		cfg.ReportingCurrency = pr.ReportingCurrency
	}
	cfg.Actions = st.Actions(id)
	cfg.Segments = st.Segments(id)
	return cfg, true
}

// load builds a project's state from its tables: the events table is read
// and folded again, with the matches it was first processed with.
func (p *Processor) load(ctx context.Context, id string) (*project, error) {
	return p.loadWith(ctx, id, nil, nil)
}

// loadWith builds a project's state from its tables, folding the events
// table again, or, with rows (the engine's state rows as of the tables'
// checkpoint, facts.Engine.State), restoring them and reading back only
// the days that were in memory.
func (p *Processor) loadWith(ctx context.Context, id string, rows []facts.StateRow, act map[int32][]facts.ActivityRow) (*project, error) {
	cfg, known := engineConfig(id, p.deps.Catalog.State(), p.cl, p.cfg.VisitTimeout)
	cfg.CheckActivity = p.cfg.checkActivity
	if !known && !p.unknownWarned[id] {
		p.unknownWarned[id] = true
		p.logger.Warn("batch of a project the catalog does not know; using UTC and EUR", "project", id)
	}
	sn, err := p.deps.Reader.Refresh(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cannot load the state of project %q: %w", id, err)
	}
	m := sn.Manifest()
	cp, err := parseCheckpoint(m.Checkpoint(p.cfg.Checkpoint))
	if err != nil {
		return nil, err
	}
	start := p.now()
	horizon, hot := int64(0), int64(0)
	if cp.Received > 0 {
		horizon = cp.Received - p.cfg.LateWindow.Milliseconds()
		hot = cp.Received - p.cfg.HotWindow.Milliseconds()
	}
	var e *facts.Engine
	var n int64
	how := "folded"
	switch {
	case rows != nil:
		how = "restored"
		e, n, err = p.restoreState(ctx, id, sn, cfg, func(add func(*facts.StateRow) error) error {
			for i := range rows {
				if err := add(&rows[i]); err != nil {
					return err
				}
			}
			return nil
		}, func(rs *facts.Restoring) error {
			for d, day := range act {
				for _, r := range day {
					if err := rs.Activity(d, r.Kind, r.People); err != nil {
						return err
					}
				}
			}
			return nil
		})
	case cp.State && !p.cfg.stateRoundTrip && !p.cfg.foldOnly:
		how = "restored"
		e, n, err = p.restoreState(ctx, id, sn, cfg, func(add func(*facts.StateRow) error) error {
			return scanState(ctx, sn, add)
		}, func(rs *facts.Restoring) error {
			return scanActivity(ctx, sn, rs)
		})
	default:
		if e, err = facts.New(cfg); err != nil {
			return nil, err
		}
		n, err = foldEvents(ctx, sn, e, true, hot, 0)
		// The state table does not hold this state yet: the next
		// commit writes it whole.
		e.WriteWholeState()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot load the state of project %q: %w", id, err)
	}
	if rows != nil {
		// Tests (stateRoundTrip): the rows are the fold's, which writes
		// its state whole (the table may hold memberships under other
		// segments).
		e.WriteWholeState()
	}
	segmentsChanged := cp.Seq > 0 && cp.Segments != e.SegmentsFingerprint()
	if segmentsChanged && how == "restored" {
		// The memberships restored were evaluated under the segments
		// stored.
		e.ReevaluateSegments()
	}
	e.Settle()
	if segmentsChanged {
		// The segments changed while nobody processed the project.
		e.RewriteMembers()
	}
	if cp.Received > 0 {
		e.Freeze(cp.Received-p.cfg.HotWindow.Milliseconds(), horizon)
	}
	// Claims that moved before the last commit whose cold visits were not
	// written again: unless the state rows name the browsers (restored:
	// ClaimsRestored), which rows they are is not known, so those days'
	// visits are written whole.
	days, err := parseDays(cp.Reclaim)
	if err != nil {
		return nil, fmt.Errorf("cannot load the state of project %q: %w", id, err)
	}
	// (Restored from rows that name the browsers whose claims wait, the
	// engine reclaims their rows as any other time. Rows given, in tests,
	// are a fold's, which wrote the days whole.)
	claimsRestored := e.ClaimsRestored() && rows == nil
	if !claimsRestored {
		e.RewriteVisitDays(days)
	}
	if p.cfg.checkRestore && how == "restored" && rows == nil && len(days) == 0 {
		// (With claims pending, the cold days' sums and touches restored
		// hash the rows as stored, a fold's the rows with the claims
		// now: both have those days' visits written whole.)
		p.checkRestored(ctx, id, e)
	}
	if p.cfg.stateRoundTrip && rows == nil {
		// Tests: load again from the state rows of the engine just folded.
		return p.loadWith(ctx, id, e.State(), e.ActivityRows())
	}
	if m.Version > 0 {
		p.logger.Info("project state rebuilt from its tables", "project", id, "how", how, "events", n, "checkpoint", cp.Seq,
			"version", m.Version, "took", p.now().Sub(start).Round(time.Millisecond))
	}
	ps := &project{id: id, engine: e, reporting: cfg.ReportingCurrency, segFP: e.SegmentsFingerprint(),
		generation: m.Generation, committed: cp, committedRaw: m.Checkpoint(p.cfg.Checkpoint),
		applied: cp.Seq, received: cp.Received, reclaimedAt: p.now()}
	if claimsRestored && e.ClaimsPending() {
		// The claims pending at the last commit are taken up at the first
		// (from the visits table), as the whole days were written there
		// before the rows named them.
		ps.reclaimedAt = time.Time{}
	}
	return ps, nil
}

// checkRestored (tests: Config.checkRestore) panics unless e, restored
// from the state table, has the state a fold of the events table gives.
func (p *Processor) checkRestored(ctx context.Context, id string, e *facts.Engine) {
	cfg := p.cfg
	cfg.foldOnly, cfg.checkRestore = true, false
	q := &Processor{cfg: cfg, deps: p.deps, logger: p.logger, cl: p.cl, unknownWarned: map[string]bool{}}
	ps, err := q.load(ctx, id)
	if err != nil && ctx.Err() != nil {
		return // stopped meanwhile
	}
	if err != nil {
		panic(fmt.Sprintf("checkRestore: cannot fold project %q: %v", id, err))
	}
	if diff := facts.DiffStates(e.State(), ps.engine.State()); diff != "" {
		panic(fmt.Sprintf("checkRestore: project %q restored from its state table differs from its fold: %s", id, diff))
	}
}

// restoreState returns an engine restored from state rows, with the days
// that were in memory read back from the events table, and how many
// events it read.
func (p *Processor) restoreState(ctx context.Context, id string, sn *rollups.Snapshot, cfg facts.Config, rows func(add func(*facts.StateRow) error) error,
	activity func(*facts.Restoring) error) (*facts.Engine, int64, error) {
	rs, err := facts.NewRestoring(cfg)
	if err != nil {
		return nil, 0, err
	}
	if err := rows(rs.Add); err != nil {
		return nil, 0, err
	}
	if err := activity(rs); err != nil {
		return nil, 0, err
	}
	e, days, th, err := rs.Finish()
	if err != nil {
		return nil, 0, err
	}
	if th == nil {
		return e, 0, nil
	}
	before := e.Stats().ThawedEvents
	if err := p.thawFrom(ctx, sn, &project{id: id, engine: e}, days, th); err != nil {
		return nil, 0, err
	}
	return e, e.Stats().ThawedEvents - before, nil
}

// foldEvents adds every row of the snapshot's events table to e, day by
// day; days whose visits ended before hot (epoch ms, 0: none) go cold as
// the scan passes them. derived keeps the stored catalog matches. Days
// before since (a day number, 0: none) are left out.
func foldEvents(ctx context.Context, sn *rollups.Snapshot, e *facts.Engine, derived bool, hot int64, since int32) (int64, error) {
	horizon := hot
	var n int64
	lastPart := ""
	opts := rollups.ScanOptions{Uncached: true} // read once into the engine: no use keeping the columns
	if since != 0 {
		if ts := sn.Manifest().Table(TableEvents); ts != nil {
			for _, part := range ts.PartitionNames() {
				if d, err := facts.ParseDay(part); err != nil || d >= since {
					opts.Partitions = append(opts.Partitions, part)
				}
			}
		}
		if len(opts.Partitions) == 0 {
			return 0, nil
		}
	}
	err := sn.Scan(ctx, TableEvents, opts, func(b rollups.Batch) error {
		if b.Partition != lastPart {
			if lastPart != "" && horizon > 0 {
				if d, err := facts.ParseDay(b.Partition); err == nil {
					e.Settle()
					e.Freeze(min(horizon, e.DayStart(d)-2*86_400_000), 0)
				}
			}
			lastPart = b.Partition
		}
		r, err := newEventReader(b.Record)
		if err != nil {
			return err
		}
		rows := int(b.Record.NumRows())
		for i := range rows {
			e.Add(r.event(e, i, derived))
		}
		n += int64(rows)
		return ctx.Err()
	})
	return n, err
}

// flushDue starts the commits that are due: every project with batches
// waiting longer than the flush interval or more events than the limit
// (all with pending batches when all is set).
func (p *Processor) flushDue(ctx context.Context, all bool) {
	now := p.now()
	interval := p.cfg.FlushInterval
	if p.backlog {
		interval = p.cfg.BacklogFlushInterval
	}
	for _, ps := range p.projects {
		claims := p.claimsDue(ps)
		if ps.flushing || !ps.pending && !ps.engine.Dirty() && !claims {
			continue
		}
		if !all && now.Before(ps.retryAt) {
			continue
		}
		due := all || claims || ps.pendingEvts >= p.cfg.MaxPendingEvents || now.Sub(ps.since) >= interval
		if !due {
			continue
		}
		p.startCommit(ctx, ps)
	}
}

// commitResult is the outcome of a commit in flight.
type commitResult struct {
	ps       *project
	ch       *facts.Changes
	cp       checkpoint
	manifest *rollups.Manifest
	bytes    int64
	err      error
	builtAt  int64
	took     time.Duration
	backlog  bool // started in a backlog
	// flushTook is how long the engine's Flush took (on the Run goroutine).
	flushTook time.Duration
	// erasures the commit holds, finished once it succeeded.
	erasures []appliedErasure
	events   int // applied events the commit holds
}

// startCommit takes the changes of a project and commits them in the
// background.
func (p *Processor) startCommit(ctx context.Context, ps *project) {
	if st := p.deps.Catalog.State(); st != nil {
		if pr, ok := st.Project(ps.id); ok {
			ps.engine.SetCatalog(st.Actions(pr.ID), st.Segments(pr.ID))
		}
	}
	// The browsers whose claim may have moved since the last time have
	// the rows of their cold visits read back from the visits table, each
	// day once, to be written again with their new person; the few whose
	// visits cannot be told that way have their events read back instead
	// (ClaimDays). Each time costs a pass over those days' visits however
	// many browsers it serves, so it comes once a ReclaimInterval; the
	// checkpoint names the days still to do meanwhile. The compute first:
	// the claims the batches since the last commit moved are among them.
	ps.engine.Compute()
	if p.claimsDue(ps) {
		if err := p.reclaimClaims(ctx, ps); err != nil {
			delete(p.projects, ps.id)
			first := ps.applied + 1
			if u := ps.firstSeq(); u > 0 {
				first = min(first, u)
			}
			p.park(ps.id, first, err)
			return
		}
		ps.reclaimedAt = p.now()
	}
	for {
		days := ps.engine.ThawForFlush()
		if len(days) == 0 {
			break
		}
		if err := p.thaw(ctx, ps, days); err != nil {
			// As in addBatch: let the project go and load it again.
			delete(p.projects, ps.id)
			first := ps.applied + 1
			if u := ps.firstSeq(); u > 0 {
				first = min(first, u)
			}
			p.park(ps.id, first, err)
			return
		}
	}
	flushStart := p.now()
	ch := ps.engine.Flush()
	flushTook := p.now().Sub(flushStart)
	backlog := p.backlog
	cp := checkpoint{Seq: ps.applied, Received: ps.received, Segments: ps.engine.SegmentsFingerprint(),
		Reclaim: formatDays(ps.engine.PendingClaimDays()), State: ps.committed.State || ch.StateWhole}
	if ch.Empty() && cp.sameData(ps.committed) {
		ps.pending, ps.pendingEvts, ps.uncommitted = false, 0, 0
		if len(ps.erasures) > 0 {
			p.finishErasures(ctx, ps, ch, ps.erasures)
			ps.erasures = nil
		}
		return
	}
	cp.Rev = ps.committed.Rev + 1
	now := p.now().UnixMilli()
	var segs []segmentBuild
	if len(ch.People) > 0 || len(ch.Members) > 0 || cp.Segments != ps.committed.Segments {
		segs = segmentBuilds(p.deps.Catalog.State(), ps, now)
	}
	ps.flushing = true
	ps.nextFirst = 0
	erasures := ps.erasures
	var onWritten func()
	if len(erasures) > 0 && p.deps.Hook != nil {
		onWritten = func() { p.deps.Hook("erasure-written") }
	}
	ps.erasures = nil
	events := ps.pendingEvts
	ps.pending, ps.pendingEvts = false, 0
	if int64(events) > p.stats.maxCommitEvents.Load() {
		p.stats.maxCommitEvents.Store(int64(events)) // only Run's goroutine writes it
	}
	expect, gen := ps.committedRaw, ps.generation
	reporting := ps.reporting
	started := p.now()
	p.inflight.Add(1)
	go func() {
		defer p.inflight.Done()
		p.sem <- struct{}{}
		defer func() { <-p.sem }()
		// The rows of ch are shared with the engine but never modified by
		// it: they can be encoded while the engine goes on.
		parts := recordsOf(p.deps.Store.Allocator(), ch, segs, reporting, cp.Rev)
		if len(ch.EraseRows) > 0 {
			// An erasure's rows on days not in memory: their partitions
			// are rewritten from the stored rows without them.
			ep, err := p.erasedPartitions(ctx, ps.id, ch)
			if err != nil {
				select {
				case p.results <- commitResult{ps: ps, ch: ch, cp: cp, err: err, builtAt: now, took: p.now().Sub(started),
					flushTook: flushTook, backlog: backlog, events: events, erasures: erasures}:
				case <-p.stopped:
				}
				return
			}
			parts = append(parts, ep...)
		}
		// From here the rows live in parts only, each dropped once its
		// record is built (commit): ch keeps the partitions' keys, which
		// Restore needs, and the identity and member rows the Segments
		// view is updated from. A large commit then does not hold every
		// row of the Flush while it writes, and the heap (whose goal is a
		// multiple of what is live) grows less.
		ch.DropRows()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CommitTimeout)
		defer cancel()
		m, n, err := commit(cctx, p.deps.Store, p.cfg.Tables, ps.id, rollups.Live(ps.id), parts, p.cfg.Checkpoint, cp.String(),
			func(m *rollups.Manifest) error {
				if m.Checkpoint(p.cfg.Checkpoint) != expect || m.Generation != gen {
					return fmt.Errorf("%w: project %q is at checkpoint %q generation %d, not %q generation %d",
						ErrMoved, ps.id, m.Checkpoint(p.cfg.Checkpoint), m.Generation, expect, gen)
				}
				return nil
			}, onWritten)
		select {
		case p.results <- commitResult{ps: ps, ch: ch, cp: cp, manifest: m, bytes: n, err: err, builtAt: now, took: p.now().Sub(started),
			flushTook: flushTook, backlog: backlog, events: events, erasures: erasures}:
		case <-p.stopped:
		}
	}()
}

// segmentBuilds lists the segments of a project with their build time and
// member counts.
func segmentBuilds(st *catalog.State, ps *project, now int64) []segmentBuild {
	if st == nil {
		return []segmentBuild{}
	}
	segs := st.Segments(ps.id)
	out := make([]segmentBuild, 0, len(segs))
	for _, s := range segs {
		out = append(out, segmentBuild{Ref: s.Ref, ID: s.ID, BuiltAt: now, Members: int64(ps.engine.Members(s.Ref))})
	}
	slices.SortFunc(out, func(a, b segmentBuild) int {
		if a.Ref < b.Ref {
			return -1
		}
		if a.Ref > b.Ref {
			return 1
		}
		return 0
	})
	return out
}

// done handles the outcome of a commit.
func (p *Processor) done(ctx context.Context, r commitResult) {
	ps := r.ps
	ps.flushing = false
	if p.waitFor == ps {
		p.waitFor = nil
		defer p.flushDue(ctx, false) // the events held back's commit is due
	}
	p.cfg.Metrics.commitDone(r, errors.Is(r.err, ErrMoved))
	switch {
	case r.err == nil:
		p.stats.commits.Add(1)
		p.stats.bytes.Add(r.bytes)
		p.logger.Debug("committed", "project", ps.id, "seq", r.cp.Seq, "bytes", r.bytes, "took", r.took.Round(time.Millisecond),
			"flush", r.flushTook.Round(time.Millisecond), "backlog", r.backlog)
		ps.committed = r.cp
		ps.committedRaw = r.cp.String()
		// While claims wait, whether or not their visits are cold at this
		// commit: visits back in memory (a late event read their day back)
		// go cold again, and a commit of the same position (a stop's, or
		// one without new batches) then names their days. The watermark
		// must not have passed that position, or a restart would not load
		// the project to take them up until its next batch.
		switch {
		case !ps.engine.ClaimsPending():
			ps.claimSince = 0
		case ps.claimSince == 0:
			ps.claimSince = r.cp.Seq
		}
		ps.generation = r.manifest.Generation
		ps.uncommitted = ps.nextFirst
		p.cfg.Metrics.observe(p)
		ps.failures = 0
		ps.engine.Stored(r.ch)
		if ps.received > 0 {
			ps.engine.Freeze(ps.received-p.cfg.HotWindow.Milliseconds(), ps.received-p.cfg.LateWindow.Milliseconds())
			p.stats.residentDays.Add(int64(ps.engine.ResidentDays()))
		}
		p.noteHot()
		if p.deps.Segments != nil {
			p.deps.Segments.apply(ps.id, r.manifest, r.ch)
		}
		if len(r.erasures) > 0 {
			if p.deps.Hook != nil {
				p.deps.Hook("erasure-committed")
			}
			p.finishErasures(ctx, ps, r.ch, r.erasures)
		}
		p.maintain(ctx, ps)
	case errors.Is(r.err, ErrMoved):
		p.stats.reloads.Add(1)
		p.logger.Warn("project tables moved on; rebuilding its state", "project", ps.id, "err", r.err)
		p.reload(ctx, ps)
	default:
		p.stats.commitFailures.Add(1)
		ps.engine.Restore(r.ch)
		ps.erasures = append(r.erasures, ps.erasures...)
		ps.pendingEvts += r.events
		if !ps.pending {
			ps.pending, ps.since = true, p.now()
		}
		ps.failures++
		wait := min(p.cfg.RetryBackoff<<min(ps.failures-1, 6), time.Minute)
		ps.retryAt = p.now().Add(wait)
		p.logger.Warn("cannot commit facts; retrying", "project", ps.id, "retry_in", wait, "err", r.err)
	}
}

// maintain compacts a project's tables (and collects unneeded files) in
// the background when it is due.
func (p *Processor) maintain(ctx context.Context, ps *project) {
	now := p.now()
	if now.Sub(ps.compactedAt) < p.cfg.CompactInterval || ps.maintaining.Load() {
		return
	}
	if ps.compactedAt.IsZero() {
		// Not right after the start: the first interval passes first.
		ps.compactedAt, ps.collectedAt = now, now
		return
	}
	collect := now.Sub(ps.collectedAt) >= p.cfg.CollectInterval
	ps.compactedAt = now
	if collect {
		ps.collectedAt = now
	}
	ps.maintaining.Store(true)
	p.inflight.Add(1)
	go func() {
		defer p.inflight.Done()
		defer ps.maintaining.Store(false)
		p.sem <- struct{}{}
		defer func() { <-p.sem }()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CommitTimeout)
		defer cancel()
		st, err := p.deps.Store.Compact(cctx, rollups.Live(ps.id))
		if err != nil {
			p.logger.Warn("cannot compact project tables", "project", ps.id, "err", err)
		} else if st.Merges > 0 {
			p.logger.Debug("compacted project tables", "project", ps.id, "merges", st.Merges, "inputs", st.Inputs, "rows", st.Rows)
		}
		if collect {
			if _, err := p.deps.Store.Collect(cctx, ps.id); err != nil {
				p.logger.Warn("cannot collect unneeded files", "project", ps.id, "err", err)
			}
		}
	}()
}

// reload rebuilds a project's state from its tables after another
// committer moved them, and applies again, read back from the log, the
// batches it had applied that the tables do not hold.
func (p *Processor) reload(ctx context.Context, ps *project) {
	delete(p.projects, ps.id)
	fresh, err := p.load(ctx, ps.id)
	if err == nil {
		err = p.readBack(ctx, fresh, ps.applied)
	}
	if err != nil {
		// Keep the old state; try again later.
		p.logger.Warn("cannot rebuild project state; retrying", "project", ps.id, "err", err)
		ps.pending, ps.since = true, time.Time{}
		ps.retryAt = p.now().Add(p.cfg.RetryBackoff)
		p.projects[ps.id] = ps
		return
	}
	p.projects[ps.id] = fresh
}

// readBack applies the project's batches of positions after what its
// state holds up to to, read back from the log (the project's own
// messages only).
func (p *Processor) readBack(ctx context.Context, ps *project, to uint64) error {
	last, err := p.deps.Log.LastSeqKey(ctx, p.cfg.Topic, ps.id)
	if err != nil {
		return fmt.Errorf("cannot read back the batches of project %q: %w", ps.id, err)
	}
	to = min(to, last)
	if to <= ps.applied {
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, err := p.deps.Subscriber.SubscribeKeyAfter(rctx, p.cfg.Topic, ps.id, ps.applied)
	if err != nil {
		return fmt.Errorf("cannot read back the batches of project %q: %w", ps.id, err)
	}
	for {
		var m *message.Message
		select {
		case m = <-msgs:
		case <-time.After(p.cfg.CommitTimeout):
			return fmt.Errorf("cannot read back the batches of project %q: nothing from the log within %v", ps.id, p.cfg.CommitTimeout)
		}
		if m == nil {
			return fmt.Errorf("cannot read back the batches of project %q: %w", ps.id, cmp.Or(ctx.Err(), errors.New("the log ended the subscription")))
		}
		m.Ack()
		seq, ok := eventlog.Seq(m)
		if !ok || seq > to {
			return nil
		}
		if m.Metadata.Get(MetaKind) == KindErasure {
			if seq > ps.applied {
				if err := p.eraseIn(ctx, ps, m, seq); err != nil {
					return fmt.Errorf("cannot read back the batches of project %q: %w", ps.id, err)
				}
			}
		} else if b, err := records.Decode(m.Payload); err != nil {
			if seq > ps.applied && eventlog.BatchProject(m) == ps.id {
				return fmt.Errorf("cannot read back the batches of project %q: batch at log position %d cannot be decoded: %w", ps.id, seq, err)
			}
		} else if b.Project == ps.id && seq > ps.applied {
			if _, err := p.addBatch(ctx, ps, b); err != nil {
				return fmt.Errorf("cannot read back the batches of project %q: %w", ps.id, err)
			}
			ps.noteApplied(seq, len(b.Events), b.ReceivedAt, p.now())
		}
		if seq >= to {
			return nil
		}
	}
}

// watermarkDoc is the content of the watermark object.
type watermarkDoc struct {
	Seq uint64 `json:"seq"`
	// Marks are log positions and when the log stored them (epoch ms),
	// oldest first, kept for the purge of the log (partitions only).
	Marks []logMark `json:"marks,omitempty"`
}

// logMark is a log position and when the log stored it.
type logMark struct {
	Seq uint64 `json:"seq"`
	At  int64  `json:"at"`
}

// note records a mark for the message at seq now and then: every
// LogRetention/20 of log time at most, looking at most once a second.
func (p *Processor) note(m *message.Message, seq uint64) {
	if p.parts == 0 || p.cfg.LogRetention == 0 {
		return
	}
	now := p.now()
	if now.Sub(p.markChecked) < min(time.Second, p.cfg.LogRetention/20) {
		return
	}
	p.markChecked = now
	at, err := time.Parse(time.RFC3339Nano, m.Metadata.Get(eventlog.MetaTime))
	if err != nil {
		return
	}
	if n := len(p.marks); n > 0 && at.UnixMilli()-p.marks[n-1].At < (p.cfg.LogRetention/20).Milliseconds() {
		return
	}
	p.marks = append(p.marks, logMark{Seq: seq, At: at.UnixMilli()})
}

// purgeLog removes from the log the partition's batches that are both
// committed (below the watermark) and older than LogRetention.
func (p *Processor) purgeLog(ctx context.Context) {
	if p.parts == 0 || p.cfg.LogRetention == 0 || p.now().Sub(p.purgedAt) < p.cfg.PurgeInterval {
		return
	}
	p.purgedAt = p.now()
	cutoff := p.now().Add(-p.cfg.LogRetention).UnixMilli()
	below, keep := uint64(0), 0
	for i, mk := range p.marks {
		if mk.At >= cutoff {
			break
		}
		// Every message before mk.Seq was stored at mk.At or earlier.
		below, keep = mk.Seq, i
	}
	below = min(below, p.watermark.Load()+1)
	if below <= p.purgedBelow || below <= 1 {
		return
	}
	if err := p.deps.Log.PurgePartition(ctx, p.cfg.Topic, p.part, below); err != nil {
		p.logger.Warn("cannot purge committed batches from the log; trying again later", "below", below, "err", err)
		return
	}
	p.purgedBelow = below
	p.marks = p.marks[keep:]
	p.logger.Debug("purged committed batches past the log's retention", "below", below)
}

// watermarkKey is the object of this processor's watermark: the
// configured one, or for a partition "<key less .json>-p<n>.json".
func (p *Processor) watermarkKey() string {
	if p.parts == 0 {
		return p.cfg.WatermarkKey
	}
	return partitionWatermarkKey(p.cfg.WatermarkKey, p.part)
}

func partitionWatermarkKey(key string, part int) string {
	return strings.TrimSuffix(key, ".json") + "-p" + strconv.Itoa(part) + ".json"
}

// readWatermark reads the processor's watermark. A partition without one
// of its own starts from the watermark of the log before it was
// partitioned, when there is one.
func (p *Processor) readWatermark(ctx context.Context) (uint64, error) {
	w, ok, err := readWatermarkAt(ctx, p.deps.Bucket, p.watermarkKey())
	if err != nil || ok || p.parts == 0 {
		p.marks = w.Marks
		return w.Seq, err
	}
	w, _, err = readWatermarkAt(ctx, p.deps.Bucket, p.cfg.WatermarkKey)
	return w.Seq, err
}

func readWatermarkAt(ctx context.Context, b storage.Bucket, key string) (watermarkDoc, bool, error) {
	var w watermarkDoc
	data, _, err := storage.ReadAll(ctx, b, key)
	if errors.Is(err, storage.ErrNotFound) {
		return w, false, nil
	}
	if err != nil {
		return w, false, fmt.Errorf("cannot read the processor watermark %q: %w", key, err)
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return w, false, fmt.Errorf("cannot read the processor watermark %q: %w", key, err)
	}
	return w, true, nil
}

// writeWatermark stores the position below which every batch is
// committed: the lowest position not committed of any project, less one;
// the last position handled when everything is committed.
func (p *Processor) writeWatermark(ctx context.Context, force bool) {
	if !p.leading.Load() {
		return
	}
	if !force && p.now().Sub(p.watermarkAt) < p.cfg.WatermarkInterval {
		return
	}
	p.watermarkChecks.Add(1)
	safe := p.lastSeq.Load()
	for _, ps := range p.projects {
		if s := ps.firstSeq(); s > 0 && s-1 < safe {
			safe = s - 1
		}
		if s := ps.claimSince; s > 0 && s-1 < safe {
			safe = s - 1
		}
	}
	for _, pk := range p.parked {
		safe = min(safe, pk.first-1)
	}
	if safe <= p.watermark.Load() {
		return
	}
	data, _ := json.Marshal(watermarkDoc{Seq: safe, Marks: p.marks})
	if _, err := p.deps.Bucket.Put(ctx, p.watermarkKey(), bytes.NewReader(data)); err != nil {
		p.logger.Warn("cannot write the processor watermark", "err", err)
		return
	}
	p.watermark.Store(safe)
	p.watermarkAt = p.now()
}

// addBatch adds a batch to a project's engine, reading back first the
// cold days it needs (facts.Engine.ThawPlan), and after it those an
// event it replaced needs (ThawNeeded). It returns how many events were
// new.
func (p *Processor) addBatch(ctx context.Context, ps *project, b *records.Batch) (int, error) {
	if days := ps.engine.ThawPlan(b); len(days) > 0 {
		if err := p.thaw(ctx, ps, days); err != nil {
			return 0, err
		}
	}
	n := ps.engine.AddBatch(b)
	for {
		days := ps.engine.ThawNeeded()
		if len(days) == 0 {
			break
		}
		if err := p.thaw(ctx, ps, days); err != nil {
			return n, err
		}
	}

	if u := ps.engine.Stats().Unthawed; u > 0 {
		return n, fmt.Errorf("project %q: %d events fell on days not read back (a bug: ThawPlan missed them)", ps.id, u)
	}
	return n, nil
}

// thaw reads the events of a project's cold days back from its tables
// into its engine.
func (p *Processor) thaw(ctx context.Context, ps *project, days []int32) error {
	if err := p.thawWith(ctx, ps, days, ps.engine.Thaw(days)); err != nil {
		return err
	}
	p.stats.thawedDays.Add(int64(len(days)))
	return nil
}

// claimsDue reports whether the cold visits of browsers whose claim may
// have moved are to be written again now: once a ReclaimInterval, or at
// the head of the log while that reads few rows (ReclaimRows).
func (p *Processor) claimsDue(ps *project) bool {
	if !ps.engine.ClaimsPending() {
		return false
	}
	if p.now().Sub(ps.reclaimedAt) >= p.cfg.ReclaimInterval {
		return true
	}
	return !p.backlog && p.cfg.ReclaimRows > 0 && ps.engine.PendingClaimRows(p.cfg.ReclaimRows)
}

// reclaimClaims writes the cold visits of the browsers whose claim may
// have moved again: from the visits table (reclaim), or, for the few it
// cannot serve, from their events (ThawUnits).
func (p *Processor) reclaimClaims(ctx context.Context, ps *project) error {
	if days := ps.engine.ReclaimDays(); len(days) > 0 {
		if err := p.reclaim(ctx, ps, days); err != nil {
			return err
		}
	}
	if days := ps.engine.ClaimDays(); len(days) > 0 {
		if err := p.thawWith(ctx, ps, days, ps.engine.ThawUnits(days)); err != nil {
			return err
		}
		p.stats.thawedUnitDays.Add(int64(len(days)))
	}
	return nil
}

// reclaim reads the visits partitions of days back for the engine's
// Reclaim (facts/reclaim.go).
func (p *Processor) reclaim(ctx context.Context, ps *project, days []int32) error {
	start := p.now()
	before := ps.engine.Stats()
	sn, err := p.deps.Reader.Refresh(ctx, ps.id)
	if err != nil {
		ps.engine.ReclaimDone()
		return fmt.Errorf("cannot read back visits of project %q: %w", ps.id, err)
	}
	names := make([]string, len(days))
	for i, d := range days {
		names[i] = facts.DayName(d)
	}
	rows := 0
	err = sn.Scan(ctx, TableVisits, rollups.ScanOptions{Partitions: names, Uncached: true}, func(b rollups.Batch) error {
		d, err := facts.ParseDay(b.Partition)
		if err != nil {
			return err
		}
		r, err := newVisitReader(b.Record)
		if err != nil {
			return err
		}
		n := int(b.Record.NumRows())
		for i := range n {
			if ps.engine.ReclaimWants(r.unitAt(i)) {
				ps.engine.Reclaim(d, r.row(i))
			}
		}
		rows += n
		return ctx.Err()
	})
	ps.engine.ReclaimDone()
	after := ps.engine.Stats()
	p.stats.reclaimDays.Add(int64(len(days)))
	p.stats.reclaimedVisits.Add(after.ReclaimedVisits - before.ReclaimedVisits)
	if err != nil {
		// Rows not read are not missing: the caller lets the project go.
		return fmt.Errorf("cannot read back visits of days %s…%s of project %q: %w", names[0], names[len(names)-1], ps.id, err)
	}
	if missing := after.ReclaimMissing - before.ReclaimMissing; missing > 0 {
		p.stats.reclaimMissing.Add(missing)
		p.logger.Warn("cold visits to write again for claims that moved are not in the visits table; their browsers' events are read back instead",
			"project", ps.id, "visits", missing)
	}
	p.logger.Debug("visits read back for claims that moved", "project", ps.id, "days", len(days), "visits", rows,
		"rewritten", after.ReclaimedVisits-before.ReclaimedVisits, "took", p.now().Sub(start).Round(time.Millisecond))
	return nil
}

// maxUnitScans is the most units a read back for browsers' claims reads
// with a key range each; more are read in one pass over the days.
const maxUnitScans = 64

// thawWith gives th the rows of the events table of days and finishes it.
func (p *Processor) thawWith(ctx context.Context, ps *project, days []int32, th *facts.Thawing) error {
	sn, err := p.deps.Reader.Refresh(ctx, ps.id)
	if err != nil {
		th.Finish() // never half thawed (the caller lets the project go)
		return fmt.Errorf("cannot read back days of project %q: %w", ps.id, err)
	}
	return p.thawFrom(ctx, sn, ps, days, th)
}

// thawFrom is thawWith from the snapshot sn: a restore reads the days
// back from the snapshot whose checkpoint and state rows it restored, not
// from a newer one whose events would be linked back as already counted.
func (p *Processor) thawFrom(ctx context.Context, sn *rollups.Snapshot, ps *project, days []int32, th *facts.Thawing) error {
	start := p.now()
	var err error
	names := make([]string, len(days))
	for i, d := range days {
		names[i] = facts.DayName(d)
	}
	rows := 0
	read := func(b rollups.Batch) error {
		r, err := newEventReader(b.Record)
		if err != nil {
			return err
		}
		n := int(b.Record.NumRows())
		for i := range n {
			if r.unit != nil && th.Skips(uuidAt(r.unit, i)) {
				continue
			}
			th.Add(r.thawed(ps.engine, i))
		}
		rows += n
		return ctx.Err()
	}
	opts := rollups.ScanOptions{Partitions: names, Uncached: true}
	if units := th.Units(); len(units) > 0 && len(units) <= maxUnitScans {
		// The events table is sorted by unit: a key range per unit reads
		// only the row groups that may hold its rows.
		for _, u := range units {
			o := opts
			o.KeyMin, o.KeyMax = u[:], u[:]
			if err = sn.Scan(ctx, TableEvents, o, read); err != nil {
				break
			}
		}
	} else {
		err = sn.Scan(ctx, TableEvents, opts, read)
	}
	// Finish even after an error: the engine must not stay half thawed
	// (the caller lets the project go on an error).
	th.Finish()
	if err != nil {
		return fmt.Errorf("cannot read back days %s…%s of project %q: %w", names[0], names[len(names)-1], ps.id, err)
	}
	p.logger.Debug("days read back for late events", "project", ps.id, "days", len(days), "events", rows,
		"took", p.now().Sub(start).Round(time.Millisecond))
	return nil
}
