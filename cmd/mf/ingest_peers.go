package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/storage/eventlog"
)

// ingestPeersPrefix names the leases of live ingest processes in the log's
// lease bucket: one per process, ingest.<random id>, renewed every TTL/3.
const ingestPeersPrefix = "ingest."

// ingestPeers keeps this process's Share of the rate budgets current: it
// holds a lease of its own among the ingest processes' leases and counts
// them, on every change the bucket signals and every Poll (a process that
// died is forgotten TTL after its last renewal, which is not signalled).
// When the log cannot be reached the last count stays.
type ingestPeers struct {
	log     *eventlog.Log
	cfg     eventlog.LeaseConfig
	share   *ingest.Share
	name    string
	logger  *slog.Logger
	stop    context.CancelFunc
	done    chan struct{}
	lease   *eventlog.Lease // owned by run once it started
	logged  bool            // the count was logged once (count runs in one goroutine at a time)
	failing bool            // the last count failed (said once per outage)
}

// startIngestPeers takes this process's lease and counts the live ingest
// processes once before returning, so that the budgets are divided from
// the first request on.
func startIngestPeers(ctx context.Context, lg *eventlog.Log, cfg eventlog.LeaseConfig, share *ingest.Share, logger *slog.Logger) (*ingestPeers, error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	p := &ingestPeers{log: lg, cfg: cfg, share: share, name: ingestPeersPrefix + hex.EncodeToString(id[:]),
		logger: logger.With("lease", ingestPeersPrefix+"*"), done: make(chan struct{})}
	le, err := lg.TryLease(ctx, p.name, cfg, false)
	if err != nil {
		return nil, fmt.Errorf("cannot register this ingest process on the log (to share the rate budgets): %w", err)
	}
	p.lease = le
	p.count(ctx)
	bg, stop := context.WithCancel(context.Background())
	p.stop = stop
	go p.run(bg)
	return p, nil
}

// count sets the share from the leases held now.
func (p *ingestPeers) count(ctx context.Context) {
	held, err := p.log.Leases(ctx, ingestPeersPrefix, p.cfg)
	if err != nil {
		if !p.failing && ctx.Err() == nil {
			p.logger.Warn("cannot count the live ingest processes; the rate budgets stay divided as they were",
				"processes", p.share.Processes(), "err", err)
		}
		p.failing = true
		return
	}
	p.failing = false
	n := max(len(held), 1)
	if n != p.share.Processes() || !p.logged {
		p.logged = true
		p.share.Set(n)
		p.logger.Info("ingest processes sharing the rate budgets", "processes", n)
	}
}

func (p *ingestPeers) run(ctx context.Context) {
	defer close(p.done)
	changed, err := p.log.WatchLeases(ctx, ingestPeersPrefix, p.cfg)
	if err != nil {
		p.logger.Warn("cannot watch the ingest processes' leases; counting them every poll only", "err", err)
	}
	t := time.NewTicker(p.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
		if p.lease.Context().Err() != nil {
			// Lost (the log was out of reach for a TTL): take a new one.
			if le, err := p.log.TryLease(ctx, p.name, p.cfg, true); err == nil {
				p.lease = le
				p.logger.Info("this ingest process is registered on the log again")
			}
		}
		p.count(ctx)
	}
}

// close stops counting and gives this process's lease up, so the others
// take its part of the budgets at once.
func (p *ingestPeers) close() error {
	p.stop()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.lease.Release(ctx)
}
