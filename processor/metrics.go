package processor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mfhq/mf/storage/eventlog"
)

// Metrics are the processor's Prometheus collectors (docs/metrics.md).
// Build them with NewMetrics on the process's registry and pass them in
// Config.Metrics; a nil *Metrics records nothing. Every Processor of a
// Group (one per partition held) reports through the same Metrics; the
// gauges add up the partitions this process holds.
type Metrics struct {
	// Events counts the events committed to tables
	// (mf_processor_events_total, operations contract section 4).
	Events prometheus.Counter
	// Commits counts commits by outcome: ok, failed, moved (another
	// committer moved the tables on: the state is rebuilt).
	Commits *prometheus.CounterVec
	// CommitSeconds is how long a commit took (writes and manifest).
	CommitSeconds prometheus.Histogram
	// CommitBytes sums the bytes of the data files committed.
	CommitBytes prometheus.Counter

	// Retention (retention.go): runs by outcome (ok, failed), the files
	// they deleted by kind (table: data files of the replaced
	// generation; access: recent-access records), the bytes of those
	// data files, and when the last run that deleted history and the
	// last look ended (Unix seconds, 0 before the first).
	RetentionRuns  *prometheus.CounterVec
	RetentionFiles *prometheus.CounterVec
	RetentionBytes prometheus.Counter
	retentionLast  prometheus.Gauge
	retentionLook  prometheus.Gauge
	looks          prometheus.CounterFunc

	// The gauges are read at scrape time from the running processors.
	lagMessages, lagSeconds, leaseHeld, partsHeld, projects, parked prometheus.GaugeFunc
	// Batches applied, skipped as committed already (redeliveries) and
	// corrupt, read from the group's counters (Watch).
	batches, skipped, corrupt, thawed prometheus.CounterFunc
	hotEvents                         prometheus.GaugeFunc

	mu    sync.Mutex
	procs map[*Processor]*procState // running (consuming) processors
	group atomic.Pointer[Group]
	// Timeout bounds the log reads of a scrape (default 2s).
	Timeout time.Duration
	now     func() time.Time
}

// procState is what a processor's Run goroutine notes for the gauges.
type procState struct {
	committed atomic.Uint64 // the log position below which all is committed
	projects  atomic.Int64
	parked    atomic.Int64
}

// backlogLog counts what a reader has not consumed (eventlog.Log).
type backlogLog interface {
	BacklogAfter(ctx context.Context, topic string, part int, seq uint64) (eventlog.Backlog, error)
}

// NewMetrics builds the collectors and registers them on reg. now is the
// clock that ages the oldest uncommitted batch (nil: time.Now).
func NewMetrics(reg prometheus.Registerer, now func() time.Time) (*Metrics, error) {
	now = clockOr(now)
	m := &Metrics{
		Events: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_processor_events_total",
			Help: "Events committed to tables."}),
		Commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_processor_commits_total",
			Help: "Commits of facts to tables, by outcome (ok, failed, moved)."}, []string{"outcome"}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mf_processor_commit_duration_seconds",
			Help: "Time one commit took (data files and manifest).", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)}),
		CommitBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_processor_committed_bytes_total",
			Help: "Bytes of the data files committed."}),
		RetentionRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_retention_runs_total",
			Help: "Retention runs that rebuilt a project's tables without its history past the plan's retention, by outcome (ok, failed)."}, []string{"outcome"}),
		RetentionFiles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_retention_files_deleted_total",
			Help: "Files retention deleted, by kind (table: data files holding history past retention; access: recent-access records)."}, []string{"kind"}),
		RetentionBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_retention_bytes_deleted_total",
			Help: "Bytes of the table data files retention deleted."}),
		retentionLast: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mf_retention_last_run_timestamp_seconds",
			Help: "When the last retention run that deleted history ended (Unix time; 0 before the first)."}),
		retentionLook: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mf_retention_last_look_timestamp_seconds",
			Help: "When the last look at every project's retention ended (Unix time; 0 before the first)."}),
		Timeout: 2 * time.Second,
		now:     now,
		procs:   map[*Processor]*procState{},
	}
	m.lagMessages = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_lag_messages",
		Help: "Accepted batches not yet committed to tables, in the partitions this process holds."},
		func() float64 { n, _ := m.lag(); return float64(n) })
	m.lagSeconds = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_lag_seconds",
		Help: "Age of the oldest accepted batch not yet committed to tables (0 when none)."},
		func() float64 { _, age := m.lag(); return age.Seconds() })
	m.leaseHeld = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_lease_held",
		Help: "1 while this process consumes the log (holds the lease of at least one partition), 0 as a standby."},
		func() float64 { return float64(min(m.held(), 1)) })
	m.partsHeld = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_partitions_held",
		Help: "Partitions of the log this process consumes."},
		func() float64 { return float64(m.held()) })
	m.projects = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_projects_in_memory",
		Help: "Projects whose facts the processors of this process hold in memory (a project once per partition)."},
		func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			var n int64
			for _, st := range m.procs {
				n += st.projects.Load()
			}
			return float64(n)
		})
	m.parked = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_projects_parked",
		Help: "Projects whose batches wait in the log because their state cannot be loaded or a batch of theirs cannot be decoded (the others go on)."},
		func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			var n int64
			for _, st := range m.procs {
				n += st.parked.Load()
			}
			return float64(n)
		})
	stat := func(f func(Stats) int64) func() float64 {
		return func() float64 {
			if g := m.group.Load(); g != nil {
				return float64(f(g.Stats()))
			}
			return 0
		}
	}
	m.batches = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_processor_batches_total",
		Help: "Batches applied to the processor's state."}, stat(func(s Stats) int64 { return s.Batches }))
	m.skipped = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_processor_batches_skipped_total",
		Help: "Batches delivered again that the tables already held."}, stat(func(s Stats) int64 { return s.Skipped }))
	m.corrupt = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_processor_batches_corrupt_total",
		Help: "Batches that could not be decoded (their project is parked; a batch that names no project is skipped)."}, stat(func(s Stats) int64 { return s.Corrupt }))
	m.thawed = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_processor_days_read_back_total",
		Help: "Cold days read back from the events table for late events (docs/processor.md, \"Memory\")."},
		stat(func(s Stats) int64 { return s.ThawedDays }))
	m.hotEvents = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_processor_events_in_memory",
		Help: "Events the processors of this process hold in memory after their last commit: the days late events can still change without a read back (docs/processor.md, \"Memory\")."},
		func() float64 {
			if g := m.group.Load(); g != nil {
				return float64(g.Stats().HotEvents)
			}
			return 0
		})
	m.looks = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_retention_looks_total",
		Help: "Looks at every project's retention (one per RetentionInterval, counted when over)."},
		stat(func(s Stats) int64 { return s.RetentionLooks }))
	for _, c := range []prometheus.Collector{m.Events, m.batches, m.skipped, m.corrupt, m.thawed, m.hotEvents, m.Commits, m.CommitSeconds,
		m.CommitBytes, m.lagMessages, m.lagSeconds, m.leaseHeld, m.partsHeld, m.projects, m.parked,
		m.RetentionRuns, m.RetentionFiles, m.RetentionBytes, m.retentionLast, m.retentionLook, m.looks} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range []string{"ok", "failed", "moved"} {
		m.Commits.WithLabelValues(o)
	}
	for _, o := range []string{"ok", "failed"} {
		m.RetentionRuns.WithLabelValues(o)
	}
	for _, k := range []string{"table", "access"} {
		m.RetentionFiles.WithLabelValues(k)
	}
	return m, nil
}

// retentionRun records a retention run of a project: whether it
// deleted the history past retention, and the data files (and their
// bytes) it deleted.
func (m *Metrics) retentionRun(ok bool, files int, bytes int64) {
	if m == nil {
		return
	}
	if !ok {
		m.RetentionRuns.WithLabelValues("failed").Inc()
		return
	}
	m.RetentionRuns.WithLabelValues("ok").Inc()
	m.RetentionFiles.WithLabelValues("table").Add(float64(files))
	m.RetentionBytes.Add(float64(bytes))
	m.retentionLast.Set(float64(m.now().UnixMilli()) / 1000)
}

// retentionLooked records the end of a look at retention and the
// recent-access records it deleted.
func (m *Metrics) retentionLooked(access int) {
	if m == nil {
		return
	}
	m.RetentionFiles.WithLabelValues("access").Add(float64(access))
	m.retentionLook.Set(float64(m.now().UnixMilli()) / 1000)
}

// Watch makes the batch counters read g's (the partitions it runs and
// ran).
func (m *Metrics) Watch(g *Group) {
	if m != nil {
		m.group.Store(g)
	}
}

// held counts the processors consuming the log.
func (m *Metrics) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for p := range m.procs {
		if p.leading.Load() {
			n++
		}
	}
	return n
}

// lag returns how many batches of the partitions held are not committed
// yet, and the age of the oldest of them.
func (m *Metrics) lag() (uint64, time.Duration) {
	m.mu.Lock()
	type held struct {
		p    *Processor
		done uint64
	}
	var hs []held
	for p, st := range m.procs {
		if p.leading.Load() {
			hs = append(hs, held{p, st.committed.Load()})
		}
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.Timeout)
	defer cancel()
	var n uint64
	var oldest time.Time
	for _, h := range hs {
		bl, ok := h.p.deps.Log.(backlogLog)
		if !ok {
			continue
		}
		part := -1
		if h.p.parts > 0 {
			part = h.p.part
		}
		b, err := bl.BacklogAfter(ctx, h.p.cfg.Topic, part, h.done)
		if err != nil {
			continue
		}
		n += b.Messages
		if !b.Oldest.IsZero() && (oldest.IsZero() || b.Oldest.Before(oldest)) {
			oldest = b.Oldest
		}
	}
	if n == 0 || oldest.IsZero() {
		return n, 0
	}
	return n, max(0, m.now().Sub(oldest))
}

// running registers p, whose Run goroutine consumes the log, until the
// returned func is called.
func (m *Metrics) running(p *Processor) (stopped func()) {
	if m == nil {
		return func() {}
	}
	m.mu.Lock()
	m.procs[p] = &procState{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.procs, p)
		m.mu.Unlock()
	}
}

// observe notes, on the Run goroutine, the position below which every
// batch of p is committed and the projects in memory.
func (m *Metrics) observe(p *Processor) {
	if m == nil {
		return
	}
	m.mu.Lock()
	st := m.procs[p]
	m.mu.Unlock()
	if st == nil {
		return
	}
	safe := p.lastSeq.Load()
	for _, ps := range p.projects {
		if s := ps.firstSeq(); s > 0 && s-1 < safe {
			safe = s - 1
		}
	}
	for _, pk := range p.parked {
		safe = min(safe, pk.first-1)
	}
	st.committed.Store(safe)
	st.projects.Store(int64(len(p.projects)))
	st.parked.Store(int64(len(p.parked)))
}

// commitDone records the outcome of a commit: events and bytes
// committed, or a failure.
func (m *Metrics) commitDone(r commitResult, moved bool) {
	if m == nil {
		return
	}
	switch {
	case r.err == nil:
		m.Commits.WithLabelValues("ok").Inc()
		m.CommitSeconds.Observe(r.took.Seconds())
		m.Events.Add(float64(r.events))
		m.CommitBytes.Add(float64(r.bytes))
	case moved:
		m.Commits.WithLabelValues("moved").Inc()
	default:
		m.Commits.WithLabelValues("failed").Inc()
	}
}
