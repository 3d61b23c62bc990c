package processor

import (
	"testing"
	"time"
)

// A backlog is committed in commits of about MaxPendingEvents: while a
// commit is in flight the processor applies at most that many more of
// the project's events, then reads no batch until the commit is done,
// instead of piling the rest of the backlog into the next commit (whose
// records grow with it). The tables hold every event at the end.
func TestBacklogCommitsStayBounded(t *testing.T) {
	c := benchCase(t)
	e := newEnv(t, "")
	defer e.close()
	e.provision(c)
	bs, _ := newTraffic(c.project.ID, 5).batches(20_000)
	n, largest := 0, 0
	for _, b := range bs {
		n += len(b.Events)
		largest = max(largest, len(b.Events))
	}
	seqs := e.publish(bs...)
	const limit = 500
	r := e.start(func(cfg *Config) {
		cfg.MaxPendingEvents = limit
		// Commits only when limit events wait, never for the time.
		cfg.FlushInterval = time.Hour
		cfg.BacklogFlushInterval = time.Hour
	}, nil)
	// The last commit is the one a stop makes of what waits.
	deadline := time.Now().Add(2 * time.Minute)
	for r.p.Stats().Events < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events applied after 2 minutes", r.p.Stats().Events, n)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	r.stop(t)
	st := r.p.Stats()
	t.Logf("%d events in %d batches: %d commits, the largest of %d events", n, len(bs), st.Commits, st.MaxCommitEvents)
	if st.MaxCommitEvents > limit+int64(largest)-1 {
		t.Fatalf("a commit took %d events; with MaxPendingEvents %d and batches of at most %d events, at most %d", st.MaxCommitEvents, limit, largest, limit+largest-1)
	}
	if min := int64(n / (limit + largest)); st.Commits < min {
		t.Fatalf("%d commits of %d events, want at least %d", st.Commits, n, min)
	}
	if cp := e.checkpoint(c.project.ID); cp.Seq != seqs[len(seqs)-1] {
		t.Fatalf("checkpoint at %d after the stop, want the last batch %d", cp.Seq, seqs[len(seqs)-1])
	}
}
