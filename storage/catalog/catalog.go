package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	rec "github.com/mfhq/mf/storage/records" // the package has a function named records (tests)
)

// Publisher appends messages to a log topic; Publish returns once the log
// has stored them (Watermill's message.Publisher without Close).
type Publisher interface {
	Publish(topic string, messages ...*message.Message) error
}

// Subscriber reads a log topic (Watermill's message.Subscriber without
// Close). For the catalog, every Subscribe call must deliver every message
// of the topic from the first one, in log order, then follow it live: each
// process reads the whole topic (no shared consumer group).
type Subscriber interface {
	Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error)
}

// Log is what the catalog needs of the event log.
type Log struct {
	Publisher  Publisher
	Subscriber Subscriber
	// LastSeq returns the log sequence of the newest message of a topic, 0
	// when it has none. Open reads it once and returns when it has folded
	// the topic up to there.
	LastSeq func(ctx context.Context, topic string) (uint64, error)
	// Seq returns the log sequence of a delivered message (unique and
	// increasing within the topic), false when it carries none.
	Seq func(msg *message.Message) (uint64, bool)
}

// Config configures a Catalog. Start from DefaultConfig.
type Config struct {
	// Topic is the log topic of catalog events. It must be kept forever:
	// the catalog is rebuilt from it at every start. Default "catalog".
	Topic string

	// ApplyTimeout bounds how long Apply and MarkSecretKeyExposed wait for
	// the log to deliver their own events back, after publishing them.
	// Default 30s.
	ApplyTimeout time.Duration

	// MaxApplyAttempts is how many times Apply plans and publishes again
	// when another process changed the catalog in between (its
	// transaction is then dropped by every process, and replanned on the
	// newer catalog). Default 8.
	MaxApplyAttempts int

	// MaxRecordBytes is the size above which an apply's events are split
	// into several log messages of one transaction. Keep it well below the
	// log's maximum message size (1 MiB on a default NATS server).
	// Default 256 KiB.
	MaxRecordBytes int

	// ResubscribeDelay is the pause before subscribing again when the
	// subscription ends while the catalog is open. Default 1s.
	ResubscribeDelay time.Duration

	// CheckDocuments, when set, is called with the State that an apply
	// would lead to, after every other rule passed; an error refuses the
	// apply (a *ValidationError's faults are reported as they are, any
	// other error as one fault). The flag-document compiler hooks in here
	// to check the real values documents; without it the values view is
	// checked by an upper bound (ProjectFlags.ValuesDocumentBound).
	CheckDocuments func(*State) error
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		Topic:            "catalog",
		ApplyTimeout:     30 * time.Second,
		MaxApplyAttempts: 8,
		MaxRecordBytes:   256 << 10,
		ResubscribeDelay: time.Second,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Topic == "":
		return errors.New("catalog config: Topic is empty; use \"catalog\"")
	case c.ApplyTimeout <= 0:
		return fmt.Errorf("catalog config: ApplyTimeout must be positive, not %s", c.ApplyTimeout)
	case c.MaxApplyAttempts < 1:
		return fmt.Errorf("catalog config: MaxApplyAttempts must be at least 1, not %d", c.MaxApplyAttempts)
	case c.MaxRecordBytes < 1024:
		return fmt.Errorf("catalog config: MaxRecordBytes must be at least 1024, not %d", c.MaxRecordBytes)
	case c.ResubscribeDelay <= 0:
		return fmt.Errorf("catalog config: ResubscribeDelay must be positive, not %s", c.ResubscribeDelay)
	}
	return nil
}

func (l Log) validate() error {
	switch {
	case l.Publisher == nil:
		return errors.New("catalog: Log.Publisher is nil")
	case l.Subscriber == nil:
		return errors.New("catalog: Log.Subscriber is nil")
	case l.LastSeq == nil:
		return errors.New("catalog: Log.LastSeq is nil")
	case l.Seq == nil:
		return errors.New("catalog: Log.Seq is nil")
	}
	return nil
}

// Catalog is the live catalog of one process: it folds the log's catalog
// topic into an immutable State, swapped atomically on every change, and
// appends the changes of applies and runtime facts to the log. Safe for
// concurrent use.
type Catalog struct {
	cfg    Config
	log    Log
	logger *slog.Logger

	state atomic.Pointer[State]

	// applyMu serialises this process's applies.
	applyMu sync.Mutex

	mu      sync.Mutex
	waiters map[string]chan txOutcome
	closed  bool

	// Owned by the run goroutine.
	fd       *folder
	target   uint64
	ready    bool
	changed  bool
	outcomes map[string]txOutcome

	readyCh chan struct{}
	openErr error
	cancel  context.CancelFunc
	done    chan struct{}
}

// Open starts following the catalog topic and returns once the State has
// caught up with the end of the topic as it was when Open started, so the
// first State a caller sees holds everything provisioned before. ctx bounds
// only that wait; Close stops the catalog.
func Open(ctx context.Context, cfg Config, log Log, logger *slog.Logger) (*Catalog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := log.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "catalog")
	target, err := log.LastSeq(ctx, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("cannot open the catalog: cannot read the end of topic %q: %w", cfg.Topic, err)
	}
	m := newModel()
	c := &Catalog{
		cfg:      cfg,
		log:      log,
		logger:   logger,
		waiters:  map[string]chan txOutcome{},
		fd:       newFolder(m, logger),
		target:   target,
		outcomes: map[string]txOutcome{},
		readyCh:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.state.Store(newState(m.clone(), nil))
	// The subscription lives until Close, not until ctx ends.
	runCtx, cancel := context.WithCancel(context.Background())
	msgs, err := log.Subscriber.Subscribe(runCtx, cfg.Topic)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cannot open the catalog: cannot subscribe to topic %q: %w", cfg.Topic, err)
	}
	c.cancel = cancel
	start := time.Now()
	if target == 0 {
		c.markReady()
	}
	go c.run(runCtx, msgs)
	select {
	case <-c.readyCh:
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("cannot open the catalog: topic %q not read up to sequence %d: %w", cfg.Topic, target, ctx.Err())
	}
	st := c.State()
	logger.Info("catalog ready", "version", st.Version(), "organizations", len(st.m.orgs),
		"projects", len(st.m.projects), "sources", len(st.m.sources), "flags", countFlags(st.m),
		"took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

func countFlags(m *model) int {
	n := 0
	for _, byKey := range m.flags {
		n += len(byKey)
	}
	return n
}

func (c *Catalog) markReady() {
	if !c.ready {
		c.ready = true
		close(c.readyCh)
	}
}

// State returns the current snapshot. It never blocks.
func (c *Catalog) State() *State { return c.state.Load() }

// WaitVersion returns the first State whose version is at least v, waiting
// for the log to deliver it.
func (c *Catalog) WaitVersion(ctx context.Context, v uint64) (*State, error) {
	for {
		st := c.State()
		if st.Version() >= v {
			return st, nil
		}
		select {
		case <-st.Stale():
		case <-c.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops following the log and fails waiting calls with ErrClosed. It
// does not close the log.
func (c *Catalog) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	<-c.done
	return nil
}

// run folds the topic until Close.
func (c *Catalog) run(ctx context.Context, msgs <-chan *message.Message) {
	defer close(c.done)
	for {
		c.consume(ctx, msgs)
		if ctx.Err() != nil {
			return
		}
		for {
			c.logger.Warn("catalog subscription ended; subscribing again", "after", c.cfg.ResubscribeDelay)
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.cfg.ResubscribeDelay):
			}
			var err error
			msgs, err = c.log.Subscriber.Subscribe(ctx, c.cfg.Topic)
			if err == nil {
				break
			}
			c.logger.Warn("catalog cannot subscribe", "topic", c.cfg.Topic, "err", err)
		}
	}
}

func (c *Catalog) consume(ctx context.Context, msgs <-chan *message.Message) {
	for {
		var msg *message.Message
		var ok bool
		select {
		case <-ctx.Done():
			return
		case msg, ok = <-msgs:
			if !ok {
				return
			}
		}
		seq, ok := c.log.Seq(msg)
		if !ok {
			c.logger.Warn("catalog: skipping a message without a log sequence", "uuid", msg.UUID)
			msg.Ack()
			continue
		}
		tx, out, done := c.fd.fold(seq, msg.Payload)
		msg.Ack()
		if done {
			c.outcomes[tx] = out
			if out.applied {
				c.changed = true
			}
		}
		if !c.ready && seq < c.target {
			continue
		}
		c.publish()
		c.markReady()
	}
}

// publish swaps in a new State when the model changed, then tells the
// waiters of finished transactions.
func (c *Catalog) publish() {
	if c.changed {
		prev := c.State()
		next := newState(c.fd.m.clone(), prev)
		c.fd.m.dirty = map[string]bool{}
		c.state.Store(next)
		close(prev.stale)
		c.changed = false
	}
	if len(c.outcomes) == 0 {
		return
	}
	c.mu.Lock()
	for tx, out := range c.outcomes {
		if ch, ok := c.waiters[tx]; ok {
			ch <- out
			delete(c.waiters, tx)
		}
		delete(c.outcomes, tx)
	}
	c.mu.Unlock()
}

// Result says what an apply did.
type Result struct {
	// Changes describes each entity created or updated (Plan.Describe);
	// empty when the file was already applied.
	Changes []string
	// Version is the version of the first State that holds the file.
	Version uint64
}

// Apply parses a provisioning file, merges it into the catalog and appends
// the changes to the log. It returns once the change is visible in State
// (and, within about a second, in every other process). A file that breaks
// a rule is refused whole with a *ValidationError and nothing is appended;
// applying the same file again appends nothing.
func (c *Catalog) Apply(ctx context.Context, data []byte) (*Result, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return c.ApplyFile(ctx, f)
}

// ApplyFile is Apply for a parsed file.
func (c *Catalog) ApplyFile(ctx context.Context, f *File) (*Result, error) {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	for attempt := 1; ; attempt++ {
		if c.isClosed() {
			return nil, ErrClosed
		}
		st := c.State()
		plan, err := st.plan(f, c.cfg.CheckDocuments)
		if err != nil {
			return nil, err
		}
		if plan.Len() == 0 {
			return &Result{Changes: []string{}, Version: st.Version()}, nil
		}
		base := plan.base
		out, err := c.transact(ctx, &base, plan.changes)
		if err != nil {
			return nil, fmt.Errorf("cannot apply the provisioning file: %w", err)
		}
		if out.applied {
			c.logger.Info("catalog: provisioning file applied", "changes", plan.Len(), "version", out.seq)
			return &Result{Changes: plan.Describe(), Version: out.seq}, nil
		}
		if attempt >= c.cfg.MaxApplyAttempts {
			return nil, fmt.Errorf("cannot apply the provisioning file after %d attempts: %w", attempt, ErrConflict)
		}
		c.logger.Debug("catalog: apply lost to a concurrent change; planning again", "attempt", attempt)
	}
}

// MarkSecretKeyExposed records that the current secret key of a server
// source was seen in a browser context. The mark is durable, visible to
// every process (State.SecretKeyExposed), and kept for the key's life:
// marking an exposed key again appends nothing. A new key (a provisioning
// change of the source's key) starts unexposed.
func (c *Catalog) MarkSecretKeyExposed(ctx context.Context, sourceID string) error {
	st := c.State()
	src, ok := st.Source(sourceID)
	if !ok {
		return fmt.Errorf("cannot mark the secret key of source %s exposed: %w", sourceID, ErrNotFound)
	}
	if src.Kind != KindServer {
		return fmt.Errorf("cannot mark the key of source %s exposed: %w", sourceID, ErrNotSecretKey)
	}
	if st.SecretKeyExposed(sourceID) {
		return nil
	}
	_, err := c.transact(ctx, nil, []change{{typ: typeKeyExposed, value: &keyExposed{Source: src.ID, KeyHash: src.KeyHash}}})
	if err != nil {
		return fmt.Errorf("cannot mark the secret key of source %s exposed: %w", sourceID, err)
	}
	return nil
}

func (c *Catalog) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// transact publishes one transaction and waits until the log delivers its
// last part back and the State holding it (if it took effect) is current.
func (c *Catalog) transact(ctx context.Context, base *uint64, changes []change) (txOutcome, error) {
	tx := newUUID()
	records, err := encodeRecords(tx, base, changes, c.cfg.MaxRecordBytes)
	if err != nil {
		return txOutcome{}, err
	}
	ch := make(chan txOutcome, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return txOutcome{}, ErrClosed
	}
	c.waiters[tx] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, tx)
		c.mu.Unlock()
	}()
	msgs := make([]*message.Message, len(records))
	for i, r := range records {
		msgs[i] = message.NewMessage(fmt.Sprintf("%s.%d", tx, i), r)
		msgs[i].SetContext(ctx)
	}
	if err := c.log.Publisher.Publish(c.cfg.Topic, msgs...); err != nil {
		return txOutcome{}, fmt.Errorf("cannot append to topic %q: %w", c.cfg.Topic, err)
	}
	timer := time.NewTimer(c.cfg.ApplyTimeout)
	defer timer.Stop()
	select {
	case out := <-ch:
		return out, nil
	case <-ctx.Done():
		return txOutcome{}, fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err())
	case <-timer.C:
		return txOutcome{}, fmt.Errorf("%w within %s", ErrUnconfirmed, c.cfg.ApplyTimeout)
	case <-c.done:
		return txOutcome{}, ErrClosed
	}
}

// newUUID returns a random (version 4) UUID (storage/records.NewUUIDv4).
func newUUID() string { return rec.NewUUIDv4().String() }
