package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/storage/eventlog"
)

// PartitionLog is what a Group shares partitions through: the log's
// partition count and its leases (eventlog.Log).
type PartitionLog interface {
	MessageLog
	Partitions(topic string) int
	TryLease(ctx context.Context, name string, cfg eventlog.LeaseConfig, takeover bool) (*eventlog.Lease, error)
	Leases(ctx context.Context, prefix string, cfg eventlog.LeaseConfig) (map[string]string, error)
	WatchLeases(ctx context.Context, prefix string, cfg eventlog.LeaseConfig) (<-chan struct{}, error)
	Embedded() bool
}

// Group shares the partitions of the log's batches among any number of
// processes: each partition is read by one Processor at a time, in the
// process that holds the partition's lease. A process joins the group with
// a member lease, and takes an equal share of the partitions (the count
// divided by the members, the first members in name order taking one more
// where it does not divide): it gives up the partitions beyond its share
// (committing them first) and takes free ones up to it. A process that
// stops gives its partitions up at once; one that dies loses them when
// their leases expire (Lease.TTL), and the others take them.
// docs/processor.md, "Partitions".
type Group struct {
	cfg    Config
	deps   Deps
	log    PartitionLog
	logger *slog.Logger
	sem    chan struct{} // commits and compactions at once, shared by the partitions
	lists  *channels.Lists
	// stale are the member leases of the embedded log's previous process,
	// found at the start: they are ignored until they expire.
	stale map[string]bool

	ready  atomic.Bool
	member string // this process's member lease name

	mu      sync.Mutex
	workers map[int]*worker // by partition
	ended   Stats           // the counters of partitions run and given up
	parts   int
	// crash stands for a crash in tests: partitions stop without their
	// last commit and keep their leases until they expire.
	crash atomic.Bool
	// noTakeover: several groups share one embedded log (tests).
	noTakeover bool
}

// worker is a partition held by this process.
type worker struct {
	part  int
	p     *Processor
	stop  context.CancelFunc
	done  chan struct{}
	err   error
	since time.Time
}

// NewGroup returns a Group; Run starts it. deps.Log must be a
// PartitionLog.
func NewGroup(cfg Config, deps Deps) (*Group, error) {
	deps.Clock = clockOr(deps.Clock)
	probe, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	pl, ok := deps.Log.(PartitionLog)
	if !ok {
		return nil, errors.New("cannot create processor group: its Log cannot share partitions")
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	return &Group{
		cfg: cfg, deps: deps, log: pl, logger: logger.With("component", "processor"),
		sem: make(chan struct{}, 2), member: cfg.LeaseName + ".m." + hex.EncodeToString(r[:]),
		workers: map[int]*worker{}, lists: probe.cl.Lists(), stale: map[string]bool{},
	}, nil
}

// partitionLease names the lease of a partition.
func (g *Group) partitionLease(part int) string {
	return g.cfg.LeaseName + ".p." + strconv.Itoa(part)
}

// Ready reports whether the group runs (also while it holds no
// partition: a standby).
func (g *Group) Ready() bool { return g.ready.Load() }

// Held returns the partitions this process reads now, in order: those
// whose Processor reads the log under the partition's lease (a Processor
// stops reading before it gives its lease up).
func (g *Group) Held() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int, 0, len(g.workers))
	for k, w := range g.workers {
		if w.p.leading.Load() {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Stats adds up the counters of the partitions this process runs and ran.
// LastSeq is the highest position handled; Watermark the lowest watermark
// of the partitions held (0 when none is held).
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.ended
	st.Watermark = 0
	for _, w := range g.workers {
		ws := w.p.Stats()
		st.add(ws)
		if st.Watermark == 0 || ws.Watermark < st.Watermark {
			st.Watermark = ws.Watermark
		}
	}
	return st
}

func (s *Stats) add(o Stats) {
	s.Batches += o.Batches
	s.Events += o.Events
	s.Skipped += o.Skipped
	s.Corrupt += o.Corrupt
	s.Commits += o.Commits
	s.CommitFailures += o.CommitFailures
	s.Reloads += o.Reloads
	s.TooLate += o.TooLate
	s.BytesWritten += o.BytesWritten
	s.ThawedDays += o.ThawedDays
	s.ResidentDays += o.ResidentDays
	s.HotEvents += o.HotEvents
	s.HotDays += o.HotDays
	s.ThawedUnitDays += o.ThawedUnitDays
	s.ReclaimDays += o.ReclaimDays
	s.ReclaimedVisits += o.ReclaimedVisits
	s.ReclaimMissing += o.ReclaimMissing
	s.FinalDaysRead += o.FinalDaysRead
	s.ErasedDaysRead += o.ErasedDaysRead
	s.MaxCommitEvents = max(s.MaxCommitEvents, o.MaxCommitEvents)
	s.Retentions += o.Retentions
	s.RetentionLooks += o.RetentionLooks
	s.Parked += o.Parked
	s.LastSeq = max(s.LastSeq, o.LastSeq)
}

// Run joins the group and processes the partitions of this process's
// share until ctx ends; then it commits what its partitions applied and
// gives them up. On a log that is not partitioned it runs one Processor
// on the whole topic (waiting as a standby for its lease).
func (g *Group) Run(ctx context.Context) error {
	g.parts = g.log.Partitions(g.cfg.Topic)
	if g.parts == 0 {
		p, err := New(g.cfg, g.deps)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.workers[0] = &worker{p: p, done: make(chan struct{})}
		g.mu.Unlock()
		g.ready.Store(true)
		return p.Run(ctx)
	}
	g.ready.Store(true)
	defer g.stopAll()
	// The log may not answer yet (a cluster electing its leaders): the
	// group waits for it rather than stopping the process.
	var changes <-chan struct{}
	for wait := g.cfg.Lease.Poll; ; wait = min(2*wait, 30*time.Second) {
		var err error
		if changes, err = g.log.WatchLeases(ctx, g.cfg.LeaseName+".", g.cfg.Lease); err == nil {
			break
		}
		g.logger.Warn("cannot watch the processor leases yet; trying again", "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	// The embedded log is this process's alone: leases found there at the
	// start were its previous process's, which crashed.
	takeover := g.log.Embedded() && !g.noTakeover
	var member *eventlog.Lease
	defer func() {
		switch {
		case member == nil:
		case g.crash.Load():
			member.Abandon()
		default:
			_ = member.Release(context.WithoutCancel(ctx))
		}
	}()
	tick := time.NewTicker(g.cfg.Lease.Poll)
	defer tick.Stop()
	ended := make(chan struct{}, 1)
	for {
		if member == nil || member.Context().Err() != nil {
			var err error
			member, err = g.log.TryLease(ctx, g.member, g.cfg.Lease, false)
			if err != nil {
				g.logger.Warn("cannot join the processor group; trying again", "err", err)
				member = nil
			}
		}
		if member != nil {
			if err := g.rebalance(ctx, takeover, ended); err != nil {
				g.logger.Warn("cannot share the log's partitions now; trying again", "err", err)
			} else {
				takeover = false
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-changes:
		case <-ended:
		}
	}
}

// rebalance gives up the partitions beyond this process's share and takes
// free ones up to it.
func (g *Group) rebalance(ctx context.Context, takeover bool, ended chan<- struct{}) error {
	g.reap()
	leases, err := g.log.Leases(ctx, g.cfg.LeaseName+".", g.cfg.Lease)
	if err != nil {
		return err
	}
	members := []string{g.member}
	taken := map[int]bool{}
	memberPrefix := g.cfg.LeaseName + ".m."
	partPrefix := g.cfg.LeaseName + ".p."
	for name := range leases {
		switch {
		case strings.HasPrefix(name, memberPrefix):
			if takeover {
				g.stale[name] = true
			}
			if name != g.member && !g.stale[name] {
				members = append(members, name)
			}
		case strings.HasPrefix(name, partPrefix):
			if k, err := strconv.Atoi(name[len(partPrefix):]); err == nil {
				taken[k] = true
			}
		}
	}
	slices.Sort(members)
	rank := slices.Index(members, g.member)
	share := g.parts / len(members)
	if rank < g.parts%len(members) {
		share++
	}
	g.mu.Lock()
	held := make([]int, 0, len(g.workers))
	for k := range g.workers {
		held = append(held, k)
	}
	g.mu.Unlock()
	slices.Sort(held)
	if len(held) > share {
		// Give up the last ones (commit, then release).
		for _, k := range held[share:] {
			g.release(k)
		}
		return nil
	}
	// Take free partitions, starting where this member's share would
	// start, so that members that start together rarely race.
	want := share - len(held)
	start := rank * g.parts / len(members)
	for i := 0; i < g.parts && want > 0; i++ {
		k := (start + i) % g.parts
		if (taken[k] && !takeover) || slices.Contains(held, k) {
			continue
		}
		le, err := g.log.TryLease(ctx, g.partitionLease(k), g.cfg.Lease, takeover)
		if errors.Is(err, eventlog.ErrLeaseHeld) {
			continue
		}
		if err != nil {
			return err
		}
		if err := g.start(ctx, k, le, ended); err != nil {
			_ = le.Release(context.WithoutCancel(ctx))
			return err
		}
		want--
	}
	return nil
}

// start runs a Processor on partition k under its lease.
func (g *Group) start(ctx context.Context, k int, le *eventlog.Lease, ended chan<- struct{}) error {
	p, err := New(g.cfg, g.deps)
	if err != nil {
		return err
	}
	p.part, p.parts, p.sem, p.cl = k, g.parts, g.sem, channels.New(g.lists)
	p.logger = p.logger.With("partition", k)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w := &worker{part: k, p: p, stop: stop, done: make(chan struct{}), since: g.deps.Clock()}
	g.mu.Lock()
	g.workers[k] = w
	g.mu.Unlock()
	g.logger.Info("partition taken", "partition", k, "of", g.parts)
	go func() {
		defer close(w.done)
		defer stop()
		if g.crash.Load() {
			p.crashOnStop.Store(true)
		}
		w.err = p.runHeld(wctx, le)
		select {
		case ended <- struct{}{}:
		default:
		}
	}()
	return nil
}

// release stops partition k: it commits what it applied, writes its
// watermark and gives its lease up.
func (g *Group) release(k int) {
	g.mu.Lock()
	w := g.workers[k]
	g.mu.Unlock()
	if w == nil {
		return
	}
	g.logger.Info("partition given up", "partition", k)
	w.stop()
}

// reap forgets the partitions whose Processor ended, by itself (its lease
// lost, its log unreadable) or released.
func (g *Group) reap() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, w := range g.workers {
		select {
		case <-w.done:
		default:
			continue
		}
		if w.err != nil {
			g.logger.Warn("partition stopped", "partition", k, "err", w.err)
		}
		g.ended.add(w.p.Stats())
		g.ended.Parked = 0 // a partition given up parks nothing
		delete(g.workers, k)
	}
}

// stopAll stops every partition (each commits first) and waits for them.
func (g *Group) stopAll() {
	g.mu.Lock()
	ws := make([]*worker, 0, len(g.workers))
	for _, w := range g.workers {
		ws = append(ws, w)
	}
	g.mu.Unlock()
	for _, w := range ws {
		if g.crash.Load() {
			w.p.crashOnStop.Store(true)
		}
		if w.stop != nil {
			w.stop()
		}
	}
	for _, w := range ws {
		if w.stop != nil {
			<-w.done
		}
	}
	g.reap()
}
