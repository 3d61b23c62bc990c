package processor

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// midnightCase is testdata/cold/midnight.json: the shape of the traffic
// TestColdDaysWithResidents generates.
type midnightCase struct {
	Seed                uint64 `json:"seed"`
	Days                int    `json:"days"`
	Browsers            int    `json:"browsers"`
	VisitsPerDay        int    `json:"visitsPerDay"`
	CrossingPerMidnight int    `json:"crossingPerMidnight"`
	SessionPercent      int    `json:"sessionPercent"`
	SignInPercent       int    `json:"signInPercent"`
	SignInFromDay       int    `json:"signInFromDay"`
	LatePercent         int    `json:"latePercent"`
	ResendPercent       int    `json:"resendPercent"`
	StepHours           int    `json:"stepHours"`
	HotWindowMinutes    int    `json:"hotWindowMinutes"`
}

// midnightTraffic makes the case's batches, in the order received: one
// batch per visit (a visit across midnight is sent as two, one per day),
// some received a day or two late, some sent again later under another
// batch id. tmpl gives the project, source and edge.
func midnightTraffic(t *testing.T, mc midnightCase, tmpl *records.Batch, loc *time.Location) []*records.Batch {
	t.Helper()
	r := rand.New(rand.NewPCG(mc.Seed, 1))
	first := time.UnixMilli(tmpl.Events[0].Time).In(loc)
	day0 := time.Date(first.Year(), first.Month(), first.Day(), 0, 0, 0, 0, loc)
	var seq uint32
	id := func(kind byte) records.UUID {
		seq++
		return records.UUID{kind, 0xc0, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), 0x40, 0, 0x80}
	}
	paths := []string{"/", "/pricing", "/docs", "/blog/a", "/blog/b", "/cart", "/checkout"}
	var out []*records.Batch
	send := func(evs []records.Event, received int64) {
		if len(evs) == 0 {
			return
		}
		b := *tmpl
		b.ID = id(0xb0)
		b.Events = evs
		b.ReceivedAt = received
		b.Receipt.Batch, b.Receipt.Accepted = b.ID.String(), len(evs)
		out = append(out, &b)
		if r.IntN(100) < mc.ResendPercent {
			again := b
			again.ID = id(0xb1)
			again.Receipt.Batch = again.ID.String()
			again.Events = slices.Clone(evs)
			again.ReceivedAt = received + int64(1+r.IntN(30))*3_600_000
			out = append(out, &again)
		}
	}
	visit := func(browser int, start time.Time, n int) {
		anon := fmt.Sprintf("mid-b%d", browser)
		user := ""
		if r.IntN(100) < mc.SignInPercent && (browser%2 == 0 || !start.Before(day0.AddDate(0, 0, mc.SignInFromDay))) {
			user = fmt.Sprintf("mid-u%d", browser%(mc.Browsers/2+1))
		}
		var session records.UUID
		if r.IntN(100) < mc.SessionPercent {
			session = id(0x5e)
		}
		late := int64(0)
		if r.IntN(100) < mc.LatePercent {
			late = int64(20+r.IntN(30)) * 3_600_000
		}
		at := start
		var part []records.Event
		for i := range n {
			ev := records.Event{ID: id(0xe0), Name: "$pageview", Time: at.UnixMilli(), AnonymousID: anon, SessionID: session,
				Page: records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: paths[r.IntN(len(paths))]}}}
			if i == 0 {
				ev.Page.Referrer = records.URL{Scheme: "https", Host: []string{"duckduckgo.com", "news.example", "mail.example"}[r.IntN(3)], Path: "/"}
			}
			if user != "" && i >= n/2 {
				ev.UserID = user
			}
			next := at.Add(time.Duration(1+r.IntN(9)) * time.Minute)
			part = append(part, ev)
			if y1, m1, d1 := at.Date(); i == n-1 || func() bool { y2, m2, d2 := next.Date(); return y1 != y2 || m1 != m2 || d1 != d2 }() {
				send(part, part[len(part)-1].Time+1000+late)
				part = nil
			}
			at = next.In(loc)
		}
	}
	for d := range mc.Days {
		day := day0.AddDate(0, 0, d)
		for b := range mc.Browsers {
			for range mc.VisitsPerDay {
				visit(b, day.Add(time.Duration(r.IntN(22*60))*time.Minute), 1+r.IntN(5))
			}
		}
		if d < mc.Days-1 {
			for k := range mc.CrossingPerMidnight {
				visit(k%mc.Browsers, day.AddDate(0, 0, 1).Add(-time.Duration(10+r.IntN(30))*time.Minute), 6+r.IntN(6))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *records.Batch) int { return int(a.ReceivedAt - b.ReceivedAt) })
	return out
}

// TestColdDaysWithResidents delivers traffic whose visits cross every
// midnight in steps, each committed before the next, with a short hot
// window: days go cold while visits of theirs still reach a day in memory
// (their events stay, as residents), and late batches and resends land on
// such days later. A restart halfway starts from the tables. The tables
// must be those of a processor that keeps every day in memory.
func TestColdDaysWithResidents(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "cold", "midnight.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mc midnightCase
	if err := json.Unmarshal(data, &mc); err != nil {
		t.Fatalf("testdata/cold/midnight.json: %v", err)
	}
	if os.Getenv("MF_COLD_SEED") != "" {
		mc.Seed = coldSeed()
	}
	c, _ := exactlyOnceInput(t)
	loc, err := time.LoadLocation(c.project.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	all := midnightTraffic(t, mc, c.batches[0], loc)
	wide := func(cfg *Config) { cfg.LateWindow = 400 * 24 * time.Hour }

	kept := newEnv(t, "")
	kept.provision(c)
	seqs := kept.publish(all...)
	r := kept.start(func(cfg *Config) { wide(cfg); cfg.HotWindow = cfg.LateWindow }, nil)
	kept.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
	if st := r.p.Stats(); st.ResidentDays != 0 || st.ThawedDays != 0 || st.ThawedUnitDays != 0 || st.ReclaimDays != 0 {
		t.Fatalf("a processor keeping every day left %d days with residents and read back %d (%d for browsers, %d visits partitions)",
			st.ResidentDays, st.ThawedDays, st.ThawedUnitDays, st.ReclaimDays)
	}
	r.stop(t)

	want := kept.segmentIDs(c.project.ID, kept.tableDump(c.project.ID))
	var steps [][]*records.Batch
	step := int64(mc.StepHours) * 3_600_000
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].ReceivedAt < all[i].ReceivedAt+step {
			j++
		}
		steps = append(steps, all[i:j])
		i = j
	}
	// Claims that move are written to cold visits at every commit, or at
	// the next commit while they read few rows (ReclaimRows, the
	// processor being at the head of the log), or left pending
	// (ReclaimInterval) until a restart, which restores the browsers
	// whose claims wait from the state rows and writes their rows from
	// the visits table at its first commit, as any reclaim.
	for _, v := range []struct {
		name     string
		interval time.Duration
		rows     int
	}{{"every commit", 0, 0}, {"few rows", time.Hour, 50_000}, {"pending across a restart", time.Hour, 0}} {
		t.Run(v.name, func(t *testing.T) {
			cold := func(cfg *Config) {
				wide(cfg)
				cfg.HotWindow = time.Duration(mc.HotWindowMinutes) * time.Minute
				cfg.ReclaimInterval = v.interval
				cfg.ReclaimRows = v.rows
			}
			stepped := newEnv(t, "")
			stepped.provision(c)
			var total Stats
			var r *running
			// startedPending: the running processor started with claims
			// pending, which it takes up at its first commit (a restore;
			// MF_STATE_ROUND_TRIP folds, which writes the days whole).
			roundTrip := os.Getenv("MF_STATE_ROUND_TRIP") != ""
			startedPending, pendingReclaims := false, 0
			stop := func() {
				r.stop(t)
				st := r.p.Stats()
				if v.interval > 0 && v.rows == 0 {
					switch {
					case startedPending && st.ReclaimDays == 0 && !roundTrip:
						t.Fatal("a restart with claims pending wrote no visit row from the visits table (the state rows name the browsers: no day is written whole)")
					case startedPending:
						pendingReclaims++
					case st.ReclaimDays != 0:
						t.Fatalf("%d visits partitions read for claims within the hour; want them all pending", st.ReclaimDays)
					}
				}
				total.ResidentDays += st.ResidentDays
				total.ThawedDays += st.ThawedDays
				total.ThawedUnitDays += st.ThawedUnitDays
				total.ReclaimDays += st.ReclaimDays
				total.ReclaimedVisits += st.ReclaimedVisits
				total.ReclaimMissing += st.ReclaimMissing
				startedPending = false
			}
			// A restart halfway, and with claims pending after a step (the
			// checkpoint names their days: a later read back of those days
			// may take them before the end), a restart right then.
			var pendingRestarts []string
			r = stepped.start(cold, nil)
			for i, bs := range steps {
				seqs := stepped.publish(bs...)
				stepped.waitCheckpoint(c.project.ID, seqs[len(seqs)-1])
				days := stepped.checkpoint(c.project.ID).Reclaim
				// Claims written at every commit: a restart every third
				// step too, so that some restore days with residents
				// from the state table (checkRestore compares each with
				// a fold).
				often := v.interval == 0 && i%3 == 2
				if i == len(steps)/2 || often || days != "" && len(pendingRestarts) < 3 || i == len(steps)-1 {
					stop()
					// The stop's own commit may name more: days that went
					// cold after the last one.
					days = stepped.checkpoint(c.project.ID).Reclaim
					r = stepped.start(cold, nil)
					if days != "" {
						pendingRestarts = append(pendingRestarts, days)
						startedPending = true
						// The restart writes those days' visits again.
						waitUntil(t, func() bool { return stepped.checkpoint(c.project.ID).Reclaim == "" })
					}
				}
			}
			stop()
			// Reads for browsers signing in happen here when no late event
			// read their days back first, which depends on the commits'
			// timing: TestSignInRewritesColdVisitsFromTheirRows and
			// TestSignInReadsBackTheBrowsersVisits (facts) make them for sure.
			if total.ResidentDays == 0 || total.ThawedDays == 0 {
				t.Fatalf("%d days were left with residents and %d read back; the test needs both", total.ResidentDays, total.ThawedDays)
			}
			if total.ReclaimMissing != 0 {
				t.Fatalf("%d cold visits to write again for a claim that moved were not in the visits table", total.ReclaimMissing)
			}
			t.Logf("%d batches in %d steps: %d days left with residents, %d read back, %d read for browsers signing in, "+
				"%d visits partitions read for claims that moved (%d rows written again)",
				len(all), len(steps), total.ResidentDays, total.ThawedDays, total.ThawedUnitDays, total.ReclaimDays, total.ReclaimedVisits)
			if v.interval == 0 || v.rows > 0 {
				if total.ReclaimedVisits == 0 {
					t.Fatal("no cold visit was written again for a browser that signed in after it went cold; the test needs some (signInFromDay)")
				}
			} else {
				if pendingReclaims == 0 {
					t.Fatal("no checkpoint named days whose visits wait for a claim that moved; the test needs some (signInFromDay)")
				}
				t.Logf("restarts with claims pending, and the days they took them up on: %v", pendingRestarts)
			}
			if got := stepped.segmentIDs(c.project.ID, stepped.tableDump(c.project.ID)); got != want {
				t.Fatalf("tables built with days going cold around residents differ from those of every day in memory:\n%s", diffLines(got, want))
			}
			stepped.checkState(c.project.ID, cold)
		})
	}
}

// TestPendingClaimsHoldTheWatermark: a browser signs in after its visit
// went cold, and the claim waits (ReclaimInterval); a late event then
// reads that day back, so the next checkpoint names no day; the day goes
// cold again after it, and the stop's commit, at the same log position,
// names it. The watermark must not have passed that position meanwhile,
// or the next processor never loads the project to write the visit's row
// again (until the project's next batch).
func TestPendingClaimsHoldTheWatermark(t *testing.T) {
	c, _ := exactlyOnceInput(t)
	tmpl := c.batches[0]
	day0 := time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)
	var n byte
	batch := func(received time.Time, anon, user string, at time.Time) *records.Batch {
		n++
		b := *tmpl
		b.ID = records.UUID{0xb7, n, 6: 0x40, 8: 0x80}
		b.Events = []records.Event{{ID: records.UUID{0xe7, n, 6: 0x40, 8: 0x80}, Name: "$pageview", Time: at.UnixMilli(),
			AnonymousID: anon, UserID: user, Page: records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: "/"}}}}
		b.ReceivedAt = received.UnixMilli()
		b.Receipt.Batch, b.Receipt.Accepted = b.ID.String(), 1
		return &b
	}
	day1 := day0.Add(24 * time.Hour)
	cfg := func(cfg *Config) {
		cfg.LateWindow = 400 * 24 * time.Hour
		cfg.HotWindow = time.Hour
		cfg.ReclaimInterval = time.Hour
		cfg.ReclaimRows = 0
		cfg.WatermarkInterval = time.Millisecond
	}
	e := newEnv(t, "")
	e.provision(c)
	project := c.project.ID
	r := e.start(cfg, nil)
	// Day 0: browser a visits; day 1: b visits, and day 0 goes cold.
	seqs := e.publish(batch(day0.Add(9*time.Hour+time.Minute), "pw-a", "", day0.Add(9*time.Hour)),
		batch(day1.Add(12*time.Hour), "pw-b", "", day1.Add(12*time.Hour)))
	e.waitCheckpoint(project, seqs[1])
	// a signs in: its cold visit's row waits for the claim.
	seqs = e.publish(batch(day1.Add(12*time.Hour+5*time.Minute), "pw-a", "pw-u", day1.Add(12*time.Hour+4*time.Minute)))
	e.waitCheckpoint(project, seqs[0])
	if cp := e.checkpoint(project); cp.Reclaim == "" {
		t.Fatal("the sign-in left no claim waiting; the test needs one (ReclaimInterval)")
	}
	// A late event reads day 0 back: no day named, the claim still waits.
	seqs = e.publish(batch(day1.Add(12*time.Hour+10*time.Minute), "pw-c", "", day0.Add(9*time.Hour+30*time.Minute)))
	last := seqs[0]
	e.waitCheckpoint(project, last)
	if cp := e.checkpoint(project); cp.Reclaim != "" {
		t.Fatalf("after day 0 was read back the checkpoint names %q; the test wants none", cp.Reclaim)
	}
	// The watermark as the processor would write it after that commit
	// (its Freeze makes day 0 cold again).
	p := r.p.processorOf(project)
	checks := p.watermarkChecks.Load()
	waitUntil(t, func() bool { return p.watermarkChecks.Load() >= checks+3 })
	r.stop(t)
	if cp := e.checkpoint(project); cp.Reclaim == "" || cp.Seq != last {
		t.Fatalf("the stop's commit: checkpoint %+v; want day 0 named again at position %d", cp, last)
	}
	if wm := p.watermark.Load(); wm >= last {
		t.Fatalf("watermark %d with a claim waiting since before position %d", wm, last)
	}
	// The next processor loads the project and writes the row.
	r = e.start(cfg, nil)
	defer r.stop(t)
	waitUntil(t, func() bool { return e.checkpoint(project).Reclaim == "" })
}

// processorOf returns the processor of the group that holds project's
// partition (nil when none does).
func (g *Group) processorOf(project string) *Processor {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := 0
	if g.parts > 0 {
		k = eventlog.PartitionOf(project, g.parts)
	}
	if w := g.workers[k]; w != nil {
		return w.p
	}
	return nil
}
