package processor

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// sharedFinalCase is testdata/erasure/shared-final.json.
type sharedFinalCase struct {
	Erase    string `json:"erase"`
	Days     int    `json:"days"`
	FillerAt string `json:"fillerAt"`
	Visits   []struct {
		Day    int    `json:"day"`
		At     string `json:"at"`
		Anon   string `json:"anon"`
		User   string `json:"user"`
		Events int    `json:"events"`
	} `json:"visits"`
}

// TestEraseSharedOnFinalDays erases a person who shares a browser and
// signs in on someone else's, whose activity together with the other
// person's lies on days past the late window (final): those days are read
// back (they are never read back for late events), the erased person's
// rows go and the other person's visits there are recomputed without
// theirs. The tables must equal those of a replay of the log, which
// applies the erasure with the whole history in memory, and hold the
// erased user's ref nowhere.
func TestEraseSharedOnFinalDays(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "erasure", "shared-final.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sc sharedFinalCase
	if err := json.Unmarshal(data, &sc); err != nil {
		t.Fatalf("testdata/erasure/shared-final.json: %v", err)
	}
	c, _ := exactlyOnceInput(t)
	project := c.project.ID
	loc, err := time.LoadLocation(c.project.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := c.batches[0]
	first := time.UnixMilli(tmpl.Events[0].Time).In(loc)
	day0 := time.Date(first.Year(), first.Month(), first.Day(), 0, 0, 0, 0, loc)
	var n uint32
	id := func(kind byte) records.UUID {
		n++
		return records.UUID{kind, 0xf1, byte(n >> 16), byte(n >> 8), byte(n), 6: 0x40, 8: 0x80}
	}
	type visit struct {
		at         time.Time
		anon, user string
		events     int
	}
	var visits []visit
	at := func(day int, hm string) time.Time {
		clock, err := time.Parse("15:04", hm)
		if err != nil {
			t.Fatalf("time %q: %v", hm, err)
		}
		d := day0.AddDate(0, 0, day)
		return time.Date(d.Year(), d.Month(), d.Day(), clock.Hour(), clock.Minute(), 0, 0, loc)
	}
	for _, v := range sc.Visits {
		visits = append(visits, visit{at(v.Day, v.At), v.Anon, v.User, v.Events})
	}
	for d := 0; d <= sc.Days; d++ {
		visits = append(visits, visit{at(d, sc.FillerAt), fmt.Sprintf("filler-%d", d), "", 1})
	}
	var all []*records.Batch
	for _, v := range visits {
		b := *tmpl
		b.ID = id(0xb0)
		b.Events = nil
		for i := range v.events {
			b.Events = append(b.Events, records.Event{ID: id(0xe0), Name: "$pageview", Time: v.at.Add(time.Duration(i) * time.Minute).UnixMilli(),
				AnonymousID: v.anon, UserID: v.user,
				Page: records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: fmt.Sprintf("/p%d", i)}}})
		}
		b.ReceivedAt = b.Events[len(b.Events)-1].Time + 1000
		b.Receipt.Batch, b.Receipt.Accepted = b.ID.String(), len(b.Events)
		all = append(all, &b)
	}
	slices.SortStableFunc(all, func(a, b *records.Batch) int { return cmp.Compare(a.ReceivedAt, b.ReceivedAt) })

	e := newEnv(t, "")
	e.provision(c)
	r := e.start(nil, nil)
	defer func() {
		if r != nil {
			r.stop(t)
		}
	}()
	// In two steps: the days of the first go cold at its commit, and
	// final once the second moves the end past the late window.
	var seqs []uint64
	last := day0.AddDate(0, 0, sc.Days-10).UnixMilli()
	for _, part := range [][]*records.Batch{
		all[:slices.IndexFunc(all, func(b *records.Batch) bool { return b.ReceivedAt > last })],
		all[slices.IndexFunc(all, func(b *records.Batch) bool { return b.ReceivedAt > last }):],
	} {
		seqs = e.publish(part...)
		e.waitCheckpoint(project, seqs[len(seqs)-1])
	}
	if st := r.p.Stats(); st.TooLate != 0 {
		t.Fatalf("%d events too late: a replay of the log would keep them", st.TooLate)
	}
	ref := facts.NodeRef(project, facts.KindUser, sc.Erase)
	before := r.p.Stats()
	deps := ErasureDeps{Bucket: e.bucket, Reader: e.reader, Log: e.log.Publisher(), Catalog: e.cat, Topic: eventlog.TopicBatches}
	rec, err := RequestErasure(context.Background(), deps, project, ref.String(), time.Now())
	if err != nil {
		t.Fatalf("erasure of %s: %v", sc.Erase, err)
	}
	var done Erasure
	waitFor(t, "erasure "+rec.ID+" done", func() bool {
		done, err = ErasureStatus(context.Background(), e.bucket, project, rec.ID)
		return err == nil && done.State == ErasureDone
	})
	after := r.p.Stats()
	thawed, final := after.ThawedDays-before.ThawedDays, after.FinalDaysRead-before.FinalDaysRead
	t.Logf("%s: %d events erased, %d days read back, %d of them final", sc.Erase, done.Events, thawed, final)
	if done.Events == 0 || final == 0 {
		t.Fatalf("the erasure erased %d events and read back %d final days; the case needs both (a person who shares, on final days)", done.Events, final)
	}
	r.stop(t)
	r = nil

	live := e.tableDump(project)
	if s := base64.StdEncoding.EncodeToString(ref[:]); strings.Contains(live, s) {
		t.Errorf("the tables still hold erased user %s", sc.Erase)
	}
	e.checkReplayOfLog(project, live, "the tables after the erasure")

}
