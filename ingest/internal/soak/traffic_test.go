package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mfhq/mf/ingest"
)

// TestTrafficBatches: every batch follows the specification (ingest's own
// decoder takes it), holds the events its counts say, of one browser,
// with ids never used twice; and the traffic looks like visitors': new
// visits and new browsers start, some sign in.
func TestTrafficBatches(t *testing.T) {
	const perBatch, batches = 10, 5000
	tr := NewTraffic(7, 3, 200, 50, perBatch)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ids := map[string]bool{}
	sessions, anons := map[string]bool{}, map[string]bool{}
	lastTime := map[string]int64{}
	var total Counts
	signedIn := 0
	for i := range batches {
		at := now.Add(time.Duration(i) * 10 * time.Millisecond)
		body, counts := tr.Batch(at)
		b, p := ingest.DecodeBatch(body, at, ingest.DecodeOptions{})
		if p != nil {
			t.Fatalf("batch %d refused: %s %s\n%s", i, p.Code, p.Detail, body)
		}
		if b.Len() != perBatch || counts.Total() != perBatch {
			t.Fatalf("batch %d: %d events, counts %v", i, b.Len(), counts)
		}
		var doc struct {
			Batch  string
			SentAt int64
			Events []struct {
				Name, ID, AnonymousID, SessionID, UserID string
				Time                                     int64
			}
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if ids[doc.Batch] {
			t.Fatalf("batch id %s used twice", doc.Batch)
		}
		ids[doc.Batch] = true
		var byName Counts
		for j, e := range doc.Events {
			if ids[e.ID] {
				t.Fatalf("event id %s used twice", e.ID)
			}
			ids[e.ID] = true
			if e.AnonymousID != doc.Events[0].AnonymousID {
				t.Fatalf("batch %d mixes browsers: %s", i, body)
			}
			if e.Time > doc.SentAt || (j > 0 && e.Time < doc.Events[j-1].Time) {
				t.Fatalf("batch %d: event times out of order or after sentAt: %s", i, body)
			}
			// A browser's events come in order across its batches too
			// (a real browser's queue does; out of order they move its
			// sessions' starts).
			if e.Time <= lastTime[e.AnonymousID] {
				t.Fatalf("batch %d: event at %d, after an earlier batch's of the same browser at %d", i, e.Time, lastTime[e.AnonymousID])
			}
			lastTime[e.AnonymousID] = e.Time
			sessions[e.SessionID], anons[e.AnonymousID] = true, true
			if e.Name == evIdentify {
				signedIn++
			}
			for k, n := range eventNames {
				if n == e.Name {
					byName[k]++
				}
			}
		}
		if byName != counts {
			t.Fatalf("batch %d: counts %v, events %v", i, counts, byName)
		}
		for k := range total {
			total[k] += counts[k]
		}
	}
	pv := float64(total[0]) / float64(total.Total())
	if pv < 0.6 || pv > 0.95 || total[2] == 0 || total[3] == 0 || total[4] == 0 || signedIn == 0 {
		t.Errorf("an odd mix of events: %v (pageviews %.2f), %d sign-ins", total, pv, signedIn)
	}
	if len(anons) <= 200 || len(sessions) <= len(anons) {
		t.Errorf("%d browsers and %d visits from a pool of 200: browsers should come and go, visits end", len(anons), len(sessions))
	}
}

// TestTrafficRepeatable: the same seed and sender give the same batches.
func TestTrafficRepeatable(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a, b := NewTraffic(1, 2, 50, 10, 10), NewTraffic(1, 2, 50, 10, 10)
	for i := range 100 {
		x, _ := a.Batch(now)
		y, _ := b.Batch(now)
		if string(x) != string(y) {
			t.Fatalf("batch %d differs", i)
		}
	}
	c := NewTraffic(1, 3, 50, 10, 10)
	x, _ := a.Batch(now)
	if y, _ := c.Batch(now); string(x) == string(y) {
		t.Fatal("two senders send the same batch")
	}
}
