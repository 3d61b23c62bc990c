package eventlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseConfig configures a lease. Start from DefaultLeaseConfig.
type LeaseConfig struct {
	// TTL is how long a lease lasts without being renewed: the server
	// forgets it TTL after its holder's last renewal, and another process
	// may take it then. The holder renews it every TTL/3. It is the
	// bucket's setting: the first process to create the lease bucket
	// decides it, later ones update it to theirs. Default 15s.
	TTL time.Duration
	// Poll is how often a process waiting for the lease tries to take it.
	// Default 1s.
	Poll time.Duration
}

// DefaultLeaseConfig returns a TTL of 15s and a poll every second.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{TTL: 15 * time.Second, Poll: time.Second}
}

// Validate reports the first setting that cannot work.
func (c LeaseConfig) Validate() error {
	if c.TTL < time.Second {
		return fmt.Errorf("lease config: TTL %v must be at least 1s (default 15s)", c.TTL)
	}
	if c.Poll <= 0 {
		return fmt.Errorf("lease config: Poll %v must be positive (default 1s)", c.Poll)
	}
	return nil
}

// ErrLeaseLost is the cause of a Lease's context when it could not be
// renewed in time or another process took it.
var ErrLeaseLost = errors.New("lease lost")

// Lease is a named lock on the log that one process at a time holds: the
// processor takes one so that a second process on the same log waits as a
// standby instead of processing everything twice. It lives in a key-value
// bucket of the log (<prefix>_leases) whose entries the server forgets TTL
// after their last write; the holder renews it every TTL/3 with a
// compare-and-set on the revision it wrote, so that it learns at once
// when another process took it. docs/log.md, "Leases".
type Lease struct {
	name   string
	holder string
	kv     jetstream.KeyValue
	cfg    LeaseConfig
	log    *Log

	ctx    context.Context // ends when the lease is lost or released
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the renewing goroutine ends

	mu  sync.Mutex
	rev uint64 // the revision this holder wrote last
}

// leaseValue is what a lease's entry holds: who holds it, since when.
type leaseValue struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

// AcquireLease takes the lease name, waiting as long as another process
// holds it (trying every cfg.Poll), until ctx ends. On an embedded log a
// lease found at the first try is taken over: the embedded server is this
// process's alone, so its holder was this directory's previous process,
// which crashed. Release the lease when done; its Context ends when it is
// lost.
func (l *Log) AcquireLease(ctx context.Context, name string, cfg LeaseConfig) (*Lease, error) {
	le, kv, err := l.newLease(ctx, name, cfg)
	if err != nil {
		return nil, err
	}
	logger := l.logger.With("lease", name)
	waiting := false
	for first := true; ; first = false {
		err := le.take(ctx, kv, first && l.cfg.Embedded(), logger)
		if err == nil {
			break
		}
		switch {
		case errors.Is(err, jetstream.ErrKeyExists), revisionMoved(err):
			if !waiting {
				waiting = true
				held := ""
				if e, gerr := kv.Get(ctx, name); gerr == nil {
					held = string(e.Value())
				}
				logger.Info("another process holds the lease; waiting for it", "held_by", held, "ttl", cfg.TTL)
			}
		default:
			logger.Warn("cannot take the lease; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gave up waiting for lease %q: %w", name, context.Cause(ctx))
		case <-time.After(cfg.Poll):
		}
	}
	if waiting {
		logger.Info("lease taken over")
	}
	le.start(logger)
	return le, nil
}

// TryLease takes the lease name if nobody holds it, without waiting: nil
// and ErrLeaseHeld when another process holds it. takeover takes it from
// its holder all the same (an embedded log's previous process, which
// crashed: see AcquireLease).
func (l *Log) TryLease(ctx context.Context, name string, cfg LeaseConfig, takeover bool) (*Lease, error) {
	le, kv, err := l.newLease(ctx, name, cfg)
	if err != nil {
		return nil, err
	}
	logger := l.logger.With("lease", name)
	if err := le.take(ctx, kv, takeover, logger); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || revisionMoved(err) {
			return nil, fmt.Errorf("%w: %q", ErrLeaseHeld, name)
		}
		return nil, fmt.Errorf("%w: cannot take lease %q: %w", ErrUnavailable, name, err)
	}
	le.start(logger)
	return le, nil
}

// ErrLeaseHeld is returned by TryLease when another process holds the
// lease.
var ErrLeaseHeld = errors.New("lease is held by another process")

// Leases lists the leases held now whose names start with prefix, with
// their holders (a lease whose holder died is listed until its TTL has
// passed).
func (l *Log) Leases(ctx context.Context, prefix string, cfg LeaseConfig) (map[string]string, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	kv, err := l.leaseBucket(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	w, err := kv.WatchFiltered(ctx, []string{prefix + ">"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("%w: cannot list leases %q: %w", ErrUnavailable, prefix, err)
	}
	defer w.Stop()
	out := map[string]string{}
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out, nil // the initial values are all there
			}
			var v leaseValue
			_ = json.Unmarshal(e.Value(), &v)
			out[e.Key()] = v.Holder
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: cannot list leases %q: %w", ErrUnavailable, prefix, ctx.Err())
		}
	}
}

// newLease prepares a lease of this process.
func (l *Log) newLease(ctx context.Context, name string, cfg LeaseConfig) (*Lease, jetstream.KeyValue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if l.isClosed() {
		return nil, nil, ErrClosed
	}
	kv, err := l.leaseBucket(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return &Lease{name: name, holder: l.holder, kv: kv, cfg: cfg, log: l, done: make(chan struct{})}, kv, nil
}

// take creates the lease's entry (takeover: or overwrites it).
func (le *Lease) take(ctx context.Context, kv jetstream.KeyValue, takeover bool, logger *slog.Logger) error {
	value, _ := json.Marshal(leaseValue{Holder: le.holder, Since: time.Now().UTC()})
	rctx, cancel := context.WithTimeout(ctx, le.log.cfg.Timeout)
	defer cancel()
	rev, err := kv.Create(rctx, le.name, value)
	if errors.Is(err, jetstream.ErrKeyExists) && takeover {
		var had uint64
		if e, gerr := kv.Get(rctx, le.name); gerr == nil {
			had = e.Revision()
			logger.Info("taking over the lease of the embedded log's previous process", "held_by", string(e.Value()))
		}
		if had > 0 {
			rev, err = kv.Update(rctx, le.name, value, had)
		}
	}
	if err != nil {
		return err
	}
	le.rev = rev
	return nil
}

// start begins renewing a lease just taken.
func (le *Lease) start(logger *slog.Logger) {
	le.ctx, le.cancel = context.WithCancelCause(context.Background())
	go le.renew(logger)
}

// leaseBucket returns the log's lease bucket, creating it (or updating its
// TTL) first.
func (l *Log) leaseBucket(ctx context.Context, cfg LeaseConfig) (jetstream.KeyValue, error) {
	l.mu.Lock()
	kv, ttl := l.leaseKV, l.leaseTTL
	l.mu.Unlock()
	if kv != nil && ttl == cfg.TTL {
		return kv, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      l.cfg.Prefix + "_leases",
		Description: "mf leases: one holder at a time, forgotten TTL after the last renewal",
		History:     1,
		TTL:         cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    l.replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: cannot open the lease bucket: %w", ErrUnavailable, err)
	}
	l.mu.Lock()
	l.leaseKV, l.leaseTTL = kv, cfg.TTL
	l.mu.Unlock()
	return kv, nil
}

// Holder is the name this process holds leases under: host, pid and a
// random part, the same for every lease of the Log.
func (l *Log) Holder() string { return l.holder }

// leaseHolder names this process: host, pid and a random part.
func leaseHolder() string {
	host, _ := os.Hostname()
	var r [6]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// renew writes the lease again every TTL/3 on the revision it wrote last,
// until it is released, another process took it (the revision moved), or
// no renewal succeeded within TTL (the server may have forgotten it).
func (le *Lease) renew(logger *slog.Logger) {
	defer close(le.done)
	every := le.cfg.TTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	value, _ := json.Marshal(leaseValue{Holder: le.holder, Since: time.Now().UTC()})
	renewed := time.Now()
	for {
		select {
		case <-le.ctx.Done():
			return
		case <-t.C:
		}
		le.mu.Lock()
		rev := le.rev
		le.mu.Unlock()
		ctx, cancel := context.WithTimeout(le.ctx, min(le.log.cfg.Timeout, every))
		next, err := le.kv.Update(ctx, le.name, value, rev)
		cancel()
		switch {
		case err == nil:
			le.mu.Lock()
			le.rev = next
			le.mu.Unlock()
			renewed = time.Now()
		case le.ctx.Err() != nil:
			return
		case revisionMoved(err):
			logger.Error("lease taken by another process", "lease", le.name)
			le.cancel(fmt.Errorf("%w: %q was taken by another process", ErrLeaseLost, le.name))
			return
		default:
			if time.Since(renewed) >= le.cfg.TTL {
				logger.Error("lease not renewed within its TTL; another process may hold it now", "lease", le.name, "err", err)
				le.cancel(fmt.Errorf("%w: %q not renewed within %v: %w", ErrLeaseLost, le.name, le.cfg.TTL, err))
				return
			}
			logger.Warn("cannot renew the lease; trying again", "lease", le.name, "err", err)
		}
	}
}

// Context ends when the lease is lost (its cause wraps ErrLeaseLost) or
// released.
func (le *Lease) Context() context.Context { return le.ctx }

// Holder is the name this process holds the lease under.
func (le *Lease) Holder() string { return le.holder }

// Release gives the lease up, so that a waiting process takes it at its
// next try instead of after the TTL. It does nothing to a lease already
// lost or released.
func (le *Lease) Release(ctx context.Context) error {
	if le.ctx.Err() != nil {
		<-le.done
		return nil
	}
	le.cancel(errors.New("lease released"))
	<-le.done
	le.mu.Lock()
	rev := le.rev
	le.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, le.log.cfg.Timeout)
	defer cancel()
	if err := le.kv.Delete(ctx, le.name, jetstream.LastRevision(rev)); err != nil && !revisionMoved(err) {
		return fmt.Errorf("cannot release lease %q (it expires after %v): %w", le.name, le.cfg.TTL, err)
	}
	return nil
}

// revisionMoved reports whether a write conditional on a key's revision
// failed because the key is at another revision (or gone).
func revisionMoved(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// WatchLeases signals on the returned channel (at most one signal waiting)
// whenever a lease whose name starts with prefix is taken, renewed or
// given up, until ctx ends. A lease forgotten after its TTL is not
// signalled: poll Leases for those.
func (l *Log) WatchLeases(ctx context.Context, prefix string, cfg LeaseConfig) (<-chan struct{}, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	kv, err := l.leaseBucket(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchFiltered(ctx, []string{prefix + ">"}, jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("%w: cannot watch leases %q: %w", ErrUnavailable, prefix, err)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer w.Stop()
		for {
			select {
			case _, ok := <-w.Updates():
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Abandon stops renewing the lease without giving it up, as a crash
// would: the server forgets it TTL after its last renewal.
func (le *Lease) Abandon() {
	if le.ctx.Err() == nil {
		le.cancel(errors.New("lease abandoned"))
	}
	<-le.done
}
