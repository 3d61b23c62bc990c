package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// runningProcessor is the processor role: a processor Group (the log's
// partitions this process holds) consuming the log in its own goroutine, with a context of its own so that shutdown stops it
// after the ingest has drained and before the log closes.
type runningProcessor struct {
	p      *processor.Group
	cancel context.CancelFunc
	done   chan error // Run's result, once
	closer func() error

	stopping atomic.Bool
	result   error
}

// startProcessor starts the processor on the log's batches topic, writing
// the tables through a rollups Store on b and keeping segs current.
func startProcessor(ctx context.Context, cfg processor.Config, rm *rollups.Metrics, lg *eventlog.Log, b storage.Bucket, rd *rollups.Reader,
	cat *catalog.Catalog, segs *processor.Segments, logger *slog.Logger) (*runningProcessor, error) {
	scfg := rollups.DefaultConfig()
	scfg.Metrics = rm
	st, err := rollups.NewStore(b, scfg, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot open the tables for writing: %w", err)
	}
	sub, err := lg.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe the processor to the log: %w", err)
	}
	deps := processor.Deps{Subscriber: sub, Log: lg, Store: st, Reader: rd, Bucket: b,
		Catalog: cat, Segments: segs, Logger: logger, Hook: faultHook(logger)}
	faultClock(&cfg, &deps, logger)
	p, err := processor.NewGroup(cfg, deps)
	if err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("cannot start the processor: %w", err)
	}
	cfg.Metrics.Watch(p)
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rp := &runningProcessor{p: p, cancel: cancel, done: make(chan error, 1), closer: sub.Close}
	go func() {
		// Losing the log or a lease is not the end of the process: the
		// group then waits as a standby and tries again, and should its
		// run end all the same, it starts again after a pause, while
		// ingest and the API go on serving.
		for pause := time.Second; ; pause = min(2*pause, 30*time.Second) {
			err := p.Run(pctx)
			if rp.stopping.Load() || pctx.Err() != nil {
				rp.done <- err
				return
			}
			if err == nil {
				err = errors.New("it stopped by itself")
			}
			logger.Error("the processor stopped; starting it again", "err", err, "retry_in", pause)
			select {
			case <-pctx.Done():
				rp.done <- nil
				return
			case <-time.After(pause):
			}
		}
	}()
	return rp, nil
}

// stop ends the processor the orderly way: it commits what it applied.
func (rp *runningProcessor) stop() error {
	if !rp.stopping.Swap(true) {
		rp.cancel()
		rp.result = <-rp.done
	}
	err := rp.result
	if errors.Is(err, context.Canceled) {
		err = nil // stopped while it was still starting
	}
	if cerr := rp.closer(); err == nil && cerr != nil {
		err = fmt.Errorf("cannot close the processor's subscription: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	return nil
}

// segmentMembership answers the flag service's segment lookups from the
// segment tables the processor builds (processor.Segments). A ref the
// processor has never built is unavailable; RefreshedAt is the build time
// of the oldest segment answered.
type segmentMembership struct {
	segs *processor.Segments
}

// Membership implements ingest.MembershipSource.
func (m segmentMembership) Membership(ctx context.Context, project string, refs []string, units []ingest.MembershipUnit) ([]ingest.MembershipResult, error) {
	out := make([]ingest.MembershipResult, len(units))
	if m.segs == nil {
		for i := range out {
			out[i].Unavailable = refs
		}
		return out, nil
	}
	for i, u := range units {
		var pu processor.Unit
		switch u.Kind {
		case ingest.UnitAnonymous:
			pu.AnonymousID = u.ID
		case ingest.UnitUser:
			pu.UserID = u.ID
		default:
			return nil, fmt.Errorf("cannot look segments up for a unit of kind %v", u.Kind)
		}
		ms, err := m.segs.Lookup(ctx, project, pu)
		if err != nil {
			return nil, err
		}
		out[i] = membershipResult(ms, refs)
	}
	return out, nil
}

// membershipResult narrows a processor answer to the refs asked for.
func membershipResult(ms processor.Membership, refs []string) ingest.MembershipResult {
	var r ingest.MembershipResult
	var oldest time.Time
	for _, ref := range refs {
		built, ok := ms.Built[ref]
		if !ok {
			r.Unavailable = append(r.Unavailable, ref)
			continue
		}
		if oldest.IsZero() || built.Before(oldest) {
			oldest = built
		}
		if _, in := slices.BinarySearch(ms.In, ref); in {
			r.In = append(r.In, ref)
		}
	}
	r.RefreshedAt = oldest
	return r
}
