package facts

import (
	"fmt"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// TestIdlePartsCloseAndReopen: a Flush encodes back the history of the
// parts whose visits all went cold (Engine.closeIdle), and whatever
// reaches one later (its browser returning, a sign-in linking it to
// another, a server-side event of its user, a late event on a day in
// memory) finds it whole: the engine's state rows and the persons it
// computes equal those of an engine that keeps every part open.
func TestIdlePartsCloseAndReopen(t *testing.T) {
	day := coldDay0
	later := day.Add(72 * time.Hour)
	for _, c := range []struct {
		name string
		next func(ct *coldTest) []*records.Batch
		// flush: a Flush after each batch (which may close what the
		// batch reached, were it idle).
		flush bool
	}{
		{"a browser returns", func(ct *coldTest) []*records.Batch {
			return []*records.Batch{ct.batch(later.Add(time.Minute), ct.ev("b", "", later))}
		}, false},
		{"a sign-in links two closed parts", func(ct *coldTest) []*records.Batch {
			return []*records.Batch{ct.batch(later.Add(time.Minute), ct.ev("c", "u", later))}
		}, false},
		{"a server-side event of a closed user", func(ct *coldTest) []*records.Batch {
			b := ct.batch(later.Add(time.Minute), ct.ev("", "v", later))
			b.SourceKind = records.SourceServer
			return []*records.Batch{b}
		}, false},
		{"an event of a claimed browser, then of its user", func(ct *coldTest) []*records.Batch {
			return []*records.Batch{
				ct.batch(later.Add(time.Minute), ct.ev("a", "", later)),
				ct.batch(later.Add(2*time.Minute), ct.ev("d", "u", later.Add(time.Minute))),
			}
		}, false},
		{"a server-side event replaced on a day in memory", func(ct *coldTest) []*records.Batch {
			// A user with server-side events only has no visit: only the
			// day in memory tells that its event may still change it.
			first := ct.batch(later.Add(time.Minute), ct.ev("", "v", later.Add(time.Minute)))
			first.SourceKind = records.SourceServer
			ev := first.Events[0]
			ev.Time = later.UnixMilli() // the copy that sorts first replaces it
			again := ct.batch(later.Add(2*time.Minute), ev)
			again.SourceKind = records.SourceServer
			return []*records.Batch{first, again}
		}, true},
		{"the same browser twice in a row", func(ct *coldTest) []*records.Batch {
			// The engine remembers the last browser it looked up: the
			// history's last batch is c's, closed since.
			return []*records.Batch{ct.batch(later.Add(time.Minute), ct.ev("c", "", later), ct.ev("c", "", later.Add(time.Minute)))}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct := newColdTest(t)
			closing := ct.e
			open, err := New(func() Config { cfg := closing.cfg; cfg.KeepPartsOpen = true; return cfg }())
			if err != nil {
				t.Fatal(err)
			}
			both := func(f func(e *Engine)) { f(closing); f(open) }
			// Two days of history: browsers a, b and c visit, a signs in
			// as u, user v comes server-side; then every day goes cold.
			for i := range 2 {
				d := day.Add(time.Duration(i) * 24 * time.Hour)
				web := ct.batch(d.Add(11*time.Hour),
					ct.ev("a", "", d.Add(9*time.Hour)), ct.ev("a", "u", d.Add(9*time.Hour+time.Minute)),
					ct.ev("b", "", d.Add(10*time.Hour)), ct.ev("c", "", d.Add(10*time.Hour+time.Minute)))
				srv := ct.batch(d.Add(12*time.Hour), ct.ev("", "v", d.Add(12*time.Hour)))
				srv.SourceKind = records.SourceServer
				both(func(e *Engine) { e.AddBatch(web); e.AddBatch(srv) })
			}
			both(func(e *Engine) {
				e.Flush()
				e.Freeze(later.Add(-time.Hour).UnixMilli(), 0)
				e.Flush() // writes the parts whose visits went cold, and closes them
			})
			closed := 0
			for _, n := range closing.nodes {
				if n.enc != nil {
					closed++
				}
			}
			if closed != 5 || closing.Stats().ClosedParts != 5 {
				t.Fatalf("%d parts closed (Stats %d), want 5 (a, b, c, u, v)", closed, closing.Stats().ClosedParts)
			}
			for _, n := range open.nodes {
				if n.enc != nil {
					t.Fatal("KeepPartsOpen closed a part")
				}
			}
			if diff := DiffStates(closing.State(), open.State()); diff != "" {
				t.Fatalf("state rows after closing differ from the open engine's: %s", diff)
			}
			for _, b := range c.next(ct) {
				both(func(e *Engine) {
					e.AddBatch(b)
					if c.flush {
						e.Flush()
					}
				})
			}
			if diff := DiffStates(closing.State(), open.State()); diff != "" {
				t.Fatalf("state rows after reopening differ from the open engine's: %s", diff)
			}
			people := func(e *Engine) map[Ref]string {
				out := map[Ref]string{}
				for _, rows := range e.All().People {
					for _, r := range rows {
						out[r.Ref] = fmt.Sprintf("%+v", *r)
					}
				}
				return out
			}
			got, want := people(closing), people(open)
			if len(want) == 0 {
				t.Fatal("no person computed")
			}
			for ref, w := range want {
				if got[ref] != w {
					t.Errorf("person %x after reopening:\n%s\nwant\n%s", ref[:], got[ref], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d persons written after reopening, want %d", len(got), len(want))
			}
			// And once everything is cold again, they close again.
			both(func(e *Engine) {
				e.Freeze(later.Add(30*24*time.Hour).UnixMilli(), 0)
				e.Flush()
			})
			if diff := DiffStates(closing.State(), open.State()); diff != "" {
				t.Fatalf("state rows after closing again differ: %s", diff)
			}
		})
	}
}
