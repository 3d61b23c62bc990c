package processor

import (
	"context"
	"time"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// Retention that deletes (docs/privacy.md, "Retention").
//
// Every RetentionInterval the processor looks at each project of its
// partitions: the retained history is the last catalog.RetentionDays of
// the organization's plan, counted in the project's time zone with today
// as the first (what the reporting API reads). When a day partition older
// than that by more than RetentionGrace remains, the project's tables are
// rebuilt from its archive without the days before the retained history
// (Replay with Since, beside the live processor), the generation they
// replace is deleted at once (Store.CollectPurge: no superseded file
// keeps a deleted row), and the processor rebuilds its state of the
// project from the new tables. What is derived from the events (visits,
// conversions, people, identities, segment members and segments) is then
// what processing only the retained events gives: a person none of whose
// events is retained has no row left, and a person's first touch and
// counts start with the oldest retained event. Replay after deletion
// therefore equals live. One project is rebuilt at a time, in the
// background: processing goes on meanwhile.

// retentionCut returns the first retained day of a project (a day
// number) at now, and whether a run is due: a day partition of the
// events, visits or conversions older than the cut by more than grace
// days remains.
func retentionCut(st *catalog.State, m *rollups.Manifest, project string, now time.Time, grace time.Duration) (int32, bool) {
	pr, ok := st.Project(project)
	if !ok {
		return 0, false // a project the catalog does not know keeps its history
	}
	org, ok := st.Organization(pr.Organization)
	if !ok {
		return 0, false
	}
	today, err := facts.ParseDay(now.In(pr.Location()).Format(time.DateOnly))
	if err != nil {
		return 0, false
	}
	cut := today - int32(catalog.RetentionDays(org.Plan)-1)
	limit := cut - int32(grace/(24*time.Hour))
	for _, table := range []string{TableEvents, TableVisits, TableConversions} {
		ts := m.Table(table)
		if ts == nil {
			continue
		}
		for _, part := range ts.PartitionNames() {
			if d, err := facts.ParseDay(part); err == nil && d < limit {
				return cut, true
			}
		}
	}
	return cut, false
}

// retainProjects lists the projects of the catalog in this processor's
// partitions.
func (p *Processor) retainProjects(st *catalog.State) []string {
	var out []string
	for _, org := range st.Organizations() {
		for _, pr := range st.Projects(org.ID) {
			if p.parts == 0 || eventlog.PartitionOf(pr.ID, p.parts) == p.part {
				out = append(out, pr.ID)
			}
		}
	}
	return out
}

// retain starts a retention run in the background when one is due and
// none runs.
func (p *Processor) retain(ctx context.Context) {
	if p.cfg.RetentionInterval == 0 || p.retaining.Load() {
		return
	}
	now := p.now()
	last := p.retainedAt
	if last.IsZero() {
		last = p.started
	}
	if now.Sub(last) < p.cfg.RetentionInterval {
		return
	}
	st := p.deps.Catalog.State()
	if st == nil {
		return
	}
	p.retainedAt = now
	projects := p.retainProjects(st)
	p.retaining.Store(true)
	p.inflight.Add(1)
	go func() {
		defer p.inflight.Done()
		defer p.retaining.Store(false)
		access := 0
		defer func() {
			p.cfg.Metrics.retentionLooked(access)
			p.stats.retentionLooks.Add(1)
		}()
		if p.part == 0 {
			// Access records are per user, not per project: the first
			// partition's processor keeps them.
			n, err := retainAccess(ctx, p.deps.Bucket, st, p.now(), p.cfg.RetentionGrace)
			access = n
			if err != nil {
				p.logger.Warn("retention: cannot delete access records past their retention; trying again later", "err", err)
			} else if n > 0 {
				p.logger.Info("retention: deleted access records past their retention", "objects", n)
			}
		}
		for _, id := range projects {
			if ctx.Err() != nil {
				return
			}
			if !p.retainProject(ctx, id) {
				continue
			}
			select {
			case p.retained <- id:
			case <-p.stopped:
				return
			}
		}
	}()
}

// retainProject deletes the history of a project past its retention, when
// a run is due; it reports whether the tables changed.
func (p *Processor) retainProject(ctx context.Context, id string) bool {
	sn, err := p.deps.Reader.Refresh(ctx, id)
	if err != nil {
		p.logger.Warn("retention: cannot read the tables of a project; trying again later", "project", id, "err", err)
		return false
	}
	m := sn.Manifest()
	if m.Version == 0 {
		return false
	}
	cut, due := retentionCut(p.deps.Catalog.State(), m, id, p.now(), p.cfg.RetentionGrace)
	if !due {
		return false
	}
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	start := p.now()
	rs, err := Replay(ctx, p.cfg, ReplayDeps{Store: p.deps.Store, Reader: p.deps.Reader, Catalog: p.deps.Catalog,
		Logger: p.logger, Bucket: p.deps.Bucket}, ReplayOptions{Project: id, Since: facts.DayName(cut)})
	if err != nil {
		p.cfg.Metrics.retentionRun(false, 0, 0)
		p.logger.Warn("retention: cannot rebuild a project's tables without the history past its retention; trying again later",
			"project", id, "cut", facts.DayName(cut), "err", err)
		return false
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CommitTimeout)
	defer cancel()
	files, bytes := 0, int64(0)
	if now, err := p.deps.Store.Load(cctx, rollups.Live(id)); err == nil {
		files, bytes = replacedFiles(m, now)
	}
	cs, err := p.deps.Store.CollectPurge(cctx, id, p.leaseAt)
	if err != nil {
		// The next run (or the next collection) deletes them.
		p.logger.Warn("retention: cannot delete the replaced files; trying again later", "project", id, "err", err)
	}
	p.stats.retentions.Add(1)
	p.cfg.Metrics.retentionRun(true, files, bytes)
	p.logger.Info("retention: deleted the history past a project's retention", "project", id, "cut", facts.DayName(cut),
		"events_kept", rs.Events, "files_deleted", cs.Retired+cs.Orphans, "bytes_replaced", bytes, "took", p.now().Sub(start).Round(time.Millisecond))
	return true
}

// replacedFiles counts the data files (and their bytes) that manifest
// before lists and after does not: those a retention run replaced.
func replacedFiles(before, after *rollups.Manifest) (int, int64) {
	kept := map[string]bool{}
	for name, ts := range after.Tables {
		for _, fs := range ts.Partitions {
			for _, f := range fs {
				kept[name+"/"+f.Ref().String()] = true
			}
		}
	}
	files, bytes := 0, int64(0)
	for name, ts := range before.Tables {
		for _, fs := range ts.Partitions {
			for _, f := range fs {
				if !kept[name+"/"+f.Ref().String()] {
					files++
					bytes += f.Bytes
				}
			}
		}
	}
	return files, bytes
}

// afterRetention rebuilds the state of a project whose tables a retention
// run rebuilt (a commit in flight finds them moved and rebuilds it then).
func (p *Processor) afterRetention(ctx context.Context, id string) {
	ps := p.projects[id]
	if ps == nil || ps.flushing {
		return
	}
	p.stats.reloads.Add(1)
	p.reload(ctx, ps)
}
