package facts

import (
	"fmt"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// TestRestoredPartsOpenWhenReached: a restore keeps each part's days and
// cold touches encoded until something reaches the part (Engine.open).
// Whatever reaches one first (an event of its browser, a server-side
// event of its user, a sign-in linking two restored parts) must find it
// decoded: the restored engine's state rows, and the rows of the persons
// it computes, equal those of the engine that never stopped.
func TestRestoredPartsOpenWhenReached(t *testing.T) {
	day := coldDay0
	later := day.Add(72 * time.Hour)
	for _, c := range []struct {
		name string
		next func(ct *coldTest) *records.Batch
	}{
		{"an event of a restored browser", func(ct *coldTest) *records.Batch {
			return ct.batch(later.Add(time.Minute), ct.ev("b", "", later))
		}},
		{"a server-side event of a restored user", func(ct *coldTest) *records.Batch {
			b := ct.batch(later.Add(time.Minute), ct.ev("", "v", later))
			b.SourceKind = records.SourceServer
			return b
		}},
		{"a sign-in linking two restored parts", func(ct *coldTest) *records.Batch {
			return ct.batch(later.Add(time.Minute), ct.ev("c", "u", later))
		}},
		{"an event of a claimed browser", func(ct *coldTest) *records.Batch {
			return ct.batch(later.Add(time.Minute), ct.ev("a", "", later))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct := newColdTest(t)
			live := ct.e
			// Two days of history: browsers a, b and c visit, a signs in
			// as u, user v comes server-side; then every day goes cold.
			var history []*records.Batch
			for i := range 2 {
				d := day.Add(time.Duration(i) * 24 * time.Hour)
				history = append(history, ct.batch(d.Add(11*time.Hour),
					ct.ev("a", "", d.Add(9*time.Hour)), ct.ev("a", "u", d.Add(9*time.Hour+time.Minute)),
					ct.ev("b", "", d.Add(10*time.Hour)), ct.ev("c", "", d.Add(10*time.Hour+time.Minute))))
				srv := ct.batch(d.Add(12*time.Hour), ct.ev("", "v", d.Add(12*time.Hour)))
				srv.SourceKind = records.SourceServer
				history = append(history, srv)
			}
			for _, b := range history {
				live.AddBatch(b)
			}
			live.Flush()
			live.Freeze(later.Add(-time.Hour).UnixMilli(), 0)
			live.Flush()

			restored, days, th, err := Restore(live.cfg, live.State(), live.ActivityRows())
			if err != nil {
				t.Fatal(err)
			}
			if len(days) != 0 || th != nil {
				t.Fatalf("days to read back %v: the test wants every day cold, without residents", days)
			}
			restored.Settle()
			encoded := 0
			for _, n := range restored.nodes {
				if n.enc != nil {
					encoded++
				}
			}
			if encoded != 5 {
				t.Fatalf("%d parts restored encoded, want 5 (a, b, c, u, v)", encoded)
			}

			next := c.next(ct)
			live.AddBatch(next)
			restored.AddBatch(next)
			if diff := DiffStates(restored.State(), live.State()); diff != "" {
				t.Fatalf("state rows of the restored engine differ from the live one's: %s", diff)
			}
			want := map[Ref]string{}
			for _, rows := range live.All().People {
				for _, r := range rows {
					want[r.Ref] = fmt.Sprintf("%+v", *r)
				}
			}
			got := 0
			for _, rows := range restored.Flush().People {
				for _, r := range rows {
					got++
					if r.Deleted {
						if want[r.Ref] != "" {
							t.Errorf("person %x deleted by the restored engine, not by the live one", r.Ref[:])
						}
						continue
					}
					if s := fmt.Sprintf("%+v", *r); s != want[r.Ref] {
						t.Errorf("person %x computed by the restored engine:\n%s\nwant\n%s", r.Ref[:], s, want[r.Ref])
					}
				}
			}
			if got == 0 {
				t.Fatal("the restored engine computed no person")
			}
		})
	}
}

// TestEraseReadsEncodedPartsWithoutOpeningThem: whether a person can be
// erased from the days not in memory without reading them back (alone)
// depends on every other part's cold touches. A restored engine answers
// it from the parts' encoded bodies, as the engine that never stopped
// answers it from decoded ones, and opens none of them.
func TestEraseReadsEncodedPartsWithoutOpeningThem(t *testing.T) {
	day := coldDay0
	later := day.Add(72 * time.Hour)
	ct := newColdTest(t)
	live := ct.e
	// Browsers a and b share a session visit (a person's visit holds
	// another's events); c visits alone; d signs in as u.
	session := records.UUID{0x5e, 1, 6: 0x40, 8: 0x80}
	shared := []records.Event{ct.ev("a", "", day.Add(9*time.Hour)), ct.ev("b", "", day.Add(9*time.Hour+time.Minute))}
	for i := range shared {
		shared[i].SessionID = session
	}
	live.AddBatch(ct.batch(day.Add(10*time.Hour), shared...))
	live.AddBatch(ct.batch(day.Add(12*time.Hour), ct.ev("c", "", day.Add(11*time.Hour)), ct.ev("d", "u", day.Add(11*time.Hour+time.Minute))))
	live.Flush()
	live.Freeze(later.UnixMilli(), 0)
	live.Flush()
	restored, days, th, err := Restore(live.cfg, live.State(), live.ActivityRows())
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 0 || th != nil {
		t.Fatalf("days to read back %v: the test wants every day cold", days)
	}
	restored.Settle()
	for _, c := range []struct {
		ref  Ref
		want bool
	}{
		{NodeRef(coldProject, KindBrowser, "a"), false}, // b's events are in a's visit
		{NodeRef(coldProject, KindBrowser, "c"), true},
		{NodeRef(coldProject, KindUser, "u"), true},
	} {
		for name, e := range map[string]*Engine{"live": live, "restored": restored} {
			p := e.personNode(c.ref)
			if got := e.alone(p, p.members()); got != c.want {
				t.Errorf("%s engine: alone(%x) = %v, want %v", name, c.ref[:4], got, c.want)
			}
		}
	}
	// b was never asked about: its touches were read encoded.
	if restored.nodes[NodeRef(coldProject, KindBrowser, "b")].enc == nil {
		t.Error("b's part was opened: the erasure check decoded it")
	}
}
