package processor

import (
	"errors"
	"fmt"
	"time"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/eventlog"
)

// Errors of the package.
var (
	// ErrMoved: a project's manifest no longer holds the checkpoint this
	// processor committed last (another processor or a replay committed
	// meanwhile). The processor rebuilds the project's state from the
	// tables and applies its pending batches again.
	ErrMoved = errors.New("the project's tables moved on since this processor last committed")
	// ErrNoProject: replay of a project that has no tables.
	ErrNoProject = errors.New("project has no tables")
	// ErrReplayRace: replay lost the race against the live processor more
	// often than ReplayOptions.Attempts allows.
	ErrReplayRace = errors.New("replay could not catch up with the live tables")
)

// Config configures a Processor. Start from DefaultConfig.
type Config struct {
	// Topic is the log topic of accepted batches (eventlog.TopicBatches).
	Topic string
	// Checkpoint names the processor's checkpoint in each project's
	// manifest.
	Checkpoint string
	// FlushInterval is how long an applied batch may wait before its facts
	// are committed while the processor keeps up with the log: the main
	// part of the freshness of the tables.
	FlushInterval time.Duration
	// BacklogFlushInterval replaces FlushInterval while the processor
	// works through a backlog (more than BacklogMessages messages behind),
	// so that busy partitions are rewritten less often.
	BacklogFlushInterval time.Duration
	// BacklogMessages is how many messages still to deliver count as a
	// backlog; BacklogLag how old a delivered message must be.
	BacklogMessages uint64
	BacklogLag      time.Duration
	// MaxPendingEvents commits a project as soon as this many events wait
	// (and no commit of it is in flight), whatever the interval: in a
	// backlog, commits of bounded size follow one another, so that the
	// memory a commit holds stays bounded and the end of the backlog is
	// committed soon after its last batch is applied. (Commits add the
	// rows that changed: committing often costs no rewrites.)
	MaxPendingEvents int
	// VisitTimeout ends a visit without sessionId (30 minutes).
	VisitTimeout time.Duration
	// LateWindow is how far behind the time its batch was received an
	// event can be (ingest replaces older times): 30 days, plus a margin.
	// Days older than the newest batch received minus LateWindow are final
	// and leave memory.
	LateWindow time.Duration
	// HotWindow is how long a day stays in memory after its last visit
	// ended, counted back from the newest batch received (2 hours): then
	// its events leave memory (they are in the events table), and an
	// event that arrives later for it has the day read back first
	// (docs/processor.md, "Memory"). 0 lets days go as soon as their
	// visits end (tests use it to read days back all the time).
	HotWindow time.Duration

	// stateRoundTrip (tests) has every load restore the project from the
	// state rows of the engine it folded (facts.Engine.State).
	stateRoundTrip bool
	// checkActivity (tests) has every Flush check the engine's day sets
	// of active persons (facts.Config.CheckActivity).
	checkActivity bool
	// foldOnly (tests) has every load fold the events table, whatever the
	// state table holds.
	foldOnly bool
	// checkRestore (tests) has every load from the state table compared
	// with a fold of the events table (checkRestored).
	checkRestore bool
	// ReclaimInterval is how often at most the cold visits of browsers
	// whose claim moved (a first sign-in after their visits went cold)
	// are written again with their new person (1 minute): each time
	// reads the visits partitions of the days they span, once for every
	// browser that signed in meanwhile. Until then those rows show the
	// browser's former person. 0 does it at every commit.
	ReclaimInterval time.Duration
	// ReclaimRows lets a processor at the head of the log (no backlog)
	// write them at its next commit, without waiting for ReclaimInterval,
	// while the days to read hold at most this many cold visits (50,000:
	// a small site's claims show at once, a busy one's once a minute).
	// 0 always waits.
	ReclaimRows int
	// WatermarkKey is the object in the bucket where the processor keeps
	// the log position below which every batch is committed: a restart
	// reads the log from there on.
	WatermarkKey string
	// WatermarkInterval is how often the watermark is written at most.
	WatermarkInterval time.Duration
	// LeaseName names the lease on the log that one processor at a time
	// holds (eventlog.Log.AcquireLease): a second process waits as a
	// standby and takes over when the first stops, or Lease.TTL after it
	// died.
	LeaseName string
	Lease     eventlog.LeaseConfig
	// CommitTimeout bounds one commit (writes and manifest update).
	CommitTimeout time.Duration
	// RetryBackoff is the first wait after a failed commit; it doubles up
	// to a minute.
	RetryBackoff time.Duration
	// CompactInterval is how often a project's small data files (the rows
	// added commit by commit) are merged (rollups Store.Compact), at
	// most; CollectInterval how often files no manifest needs any more are
	// deleted (Store.Collect). Both run in the background after a commit.
	CompactInterval time.Duration
	CollectInterval time.Duration
	// LogRetention is how long the log keeps a partition's batches once
	// they are committed to tables: older ones are purged from it (their
	// events live on in the archive, which replay reads). Measured from
	// when the log stored them, checked every PurgeInterval, so a batch
	// leaves the log at most LogRetention plus about two PurgeIntervals
	// after its commit. 0 keeps them forever. Default 6 days (the
	// operations contract allows 7).
	LogRetention  time.Duration
	PurgeInterval time.Duration
	// RetentionInterval is how often the processor looks for history past
	// the retention of each project of its partitions (its
	// organization's plan: catalog.RetentionDays) and deletes it from the
	// archive and every table (retention.go; docs/privacy.md,
	// "Retention"). The first look comes one interval after the start. 0
	// keeps everything. Default 1 hour.
	RetentionInterval time.Duration
	// RetentionGrace is how many days (whole days) a day may be past its
	// project's retention before a run deletes it; a run then deletes
	// every day past the retention, so that a project's history is
	// rebuilt about once per grace, not every day. Default 3 days, at
	// most 7.
	RetentionGrace time.Duration
	// Tables are the table definitions (Tables()).
	Tables map[string]*rollups.Table
	// Metrics records what the processor does (NewMetrics); nil: nothing.
	Metrics *Metrics
}

// DefaultConfig returns the defaults: topic "batches", checkpoint
// "processor", commits every 500ms (15s in a backlog of more than 10,000
// messages or 10 seconds, or at 200,000 waiting events), 30-minute
// visits, a late window of
// 31 days, the watermark in processor/watermark.json, the log's batches
// purged 6 days after their commit, history past a plan's retention
// (and a grace of 3 days) deleted, looked for every hour.
func DefaultConfig() Config {
	return Config{
		Topic:                "batches",
		Checkpoint:           "processor",
		FlushInterval:        500 * time.Millisecond,
		BacklogFlushInterval: 15 * time.Second,
		BacklogMessages:      10_000,
		BacklogLag:           10 * time.Second,
		MaxPendingEvents:     200_000,
		VisitTimeout:         30 * time.Minute,
		LateWindow:           31 * 24 * time.Hour,
		HotWindow:            2 * time.Hour,
		ReclaimInterval:      time.Minute,
		ReclaimRows:          50_000,
		WatermarkKey:         "processor/watermark.json",
		WatermarkInterval:    2 * time.Second,
		LeaseName:            "processor",
		Lease:                eventlog.DefaultLeaseConfig(),
		CommitTimeout:        2 * time.Minute,
		RetryBackoff:         time.Second,
		CompactInterval:      time.Minute,
		CollectInterval:      10 * time.Minute,
		LogRetention:         6 * 24 * time.Hour,
		PurgeInterval:        10 * time.Minute,
		RetentionInterval:    time.Hour,
		RetentionGrace:       3 * 24 * time.Hour,
		Tables:               Tables(),
	}
}

// Validate reports what in c is unusable, and how to fix it.
func (c Config) Validate() error {
	var errs []error
	if c.Topic == "" {
		errs = append(errs, errors.New("Topic is empty; use eventlog.TopicBatches"))
	}
	if c.Checkpoint == "" {
		errs = append(errs, errors.New(`Checkpoint is empty; use "processor"`))
	}
	if c.FlushInterval <= 0 || c.BacklogFlushInterval < c.FlushInterval {
		errs = append(errs, fmt.Errorf("FlushInterval %v must be positive and BacklogFlushInterval %v at least as long", c.FlushInterval, c.BacklogFlushInterval))
	}
	if c.BacklogLag <= 0 {
		errs = append(errs, fmt.Errorf("BacklogLag %v must be positive", c.BacklogLag))
	}
	if c.MaxPendingEvents < 1 {
		errs = append(errs, fmt.Errorf("MaxPendingEvents %d must be at least 1 (default 200,000)", c.MaxPendingEvents))
	}
	if c.VisitTimeout <= 0 {
		errs = append(errs, fmt.Errorf("VisitTimeout %v must be positive (30m)", c.VisitTimeout))
	}
	if c.LateWindow < 30*24*time.Hour+c.VisitTimeout {
		errs = append(errs, fmt.Errorf("LateWindow %v must cover ingest's 30 days and a visit timeout (default 31 days)", c.LateWindow))
	}
	if c.HotWindow < 0 || c.HotWindow > c.LateWindow {
		errs = append(errs, fmt.Errorf("HotWindow %v must be between 0 and LateWindow %v (default 2h)", c.HotWindow, c.LateWindow))
	}
	if c.ReclaimInterval < 0 || c.ReclaimRows < 0 {
		errs = append(errs, fmt.Errorf("ReclaimInterval %v and ReclaimRows %d must not be negative (default 1m, 50,000)", c.ReclaimInterval, c.ReclaimRows))
	}
	if c.WatermarkKey == "" {
		errs = append(errs, errors.New(`WatermarkKey is empty; use "processor/watermark.json"`))
	}
	if c.WatermarkInterval <= 0 || c.CommitTimeout <= 0 || c.RetryBackoff <= 0 ||
		c.CompactInterval <= 0 || c.CollectInterval <= 0 {
		errs = append(errs, errors.New("WatermarkInterval, CommitTimeout, RetryBackoff, CompactInterval and CollectInterval must be positive"))
	}
	if c.LogRetention < 0 || c.LogRetention > 7*24*time.Hour || c.LogRetention > 0 && c.PurgeInterval <= 0 {
		errs = append(errs, fmt.Errorf("LogRetention %v must be 0 (keep) or at most 7 days, with a positive PurgeInterval (%v)", c.LogRetention, c.PurgeInterval))
	}
	if c.RetentionInterval < 0 || c.RetentionGrace < 0 || c.RetentionGrace > 7*24*time.Hour || c.RetentionGrace%(24*time.Hour) != 0 {
		errs = append(errs, fmt.Errorf("RetentionInterval %v must be 0 (keep everything) or positive, RetentionGrace %v whole days between 0 and 7 (default 1h and 3 days)",
			c.RetentionInterval, c.RetentionGrace))
	}
	if c.LeaseName == "" {
		errs = append(errs, errors.New(`LeaseName is empty; use "processor"`))
	}
	if err := c.Lease.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, name := range []string{TableEvents, TableVisits, TableConversions, TablePeople, TableIdentities, TableMembers, TableSegments} {
		t := c.Tables[name]
		if t == nil {
			errs = append(errs, fmt.Errorf("Tables lacks table %q; start from Tables()", name))
			continue
		}
		if err := t.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid processor config: %w", err)
	}
	return nil
}
