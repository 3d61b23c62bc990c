package facts

import (
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// A session visit's events arriving out of order (tabs that share a
// session, each sending its own queue) move the visit's start earlier.
// Its id is the session's, and an event row shows only the visit's id and
// channel, so while the channel stays the rows stored before are still
// right and the next Flush appends only the new event's row; an earlier
// landing with another channel changes every row of the visit, and the
// day is written whole. The rows written are those of an engine given
// every event at once.
func TestSessionStartMovingEarlier(t *testing.T) {
	ct := newColdTest(t)
	e, day := ct.e, coldDay0.Add(10*time.Hour)
	session := records.UUID{0x5e, 1, 6: 0x40, 8: 0x80}
	pv := func(at time.Duration, referrer string) records.Event {
		ev := ct.ev("a", "", day.Add(at))
		ev.SessionID = session
		if referrer != "" {
			ev.Page.Referrer = records.URL{Scheme: "https", Host: referrer, Path: "/"}
		}
		return ev
	}
	var all []records.Event
	step := func(received time.Duration, evs ...records.Event) *Changes {
		all = append(all, evs...)
		e.AddBatch(ct.batch(day.Add(received), evs...))
		return e.Flush()
	}
	d := e.DayOf(day.UnixMilli())
	channelOf := func(ch *Changes) map[string]bool {
		out := map[string]bool{}
		for _, r := range ch.EventDays[d] {
			if r.Visit != Ref(session) {
				t.Fatalf("an event row shows visit %s, want the session %s", r.Visit, Ref(session))
			}
			out[r.Channel] = true
		}
		return out
	}

	step(7*time.Minute, pv(5*time.Minute, ""), pv(6*time.Minute, ""))
	// Earlier, and direct like the landing before it: one row appended.
	ch := step(8*time.Minute, pv(0, ""))
	if !ch.EventAppend[d] || len(ch.EventDays[d]) != 1 {
		t.Fatalf("an earlier event of the same channel: %d rows written (append %v); want its row appended", len(ch.EventDays[d]), ch.EventAppend[d])
	}
	if got := channelOf(ch); !got["direct"] || len(got) != 1 {
		t.Fatalf("the appended row's channel is %v, want direct", got)
	}
	// Earlier again, from a search engine: the visit's channel changes, so
	// does every row of it.
	ch = step(9*time.Minute, pv(-5*time.Minute, "www.google.com"))
	if ch.EventAppend[d] || len(ch.EventDays[d]) != 4 {
		t.Fatalf("an earlier landing of another channel: %d rows written (append %v); want the day whole, 4 rows", len(ch.EventDays[d]), ch.EventAppend[d])
	}
	if got := channelOf(ch); !got["organic_search"] || len(got) != 1 {
		t.Fatalf("the rows' channels are %v, want organic_search", got)
	}

	once := newColdTest(t)
	once.e.AddBatch(once.batch(day.Add(9*time.Minute), all...))
	want := once.e.Flush()
	if got, w := channelOf(ch), channelOf(want); len(got) != len(w) || !w["organic_search"] || len(want.EventDays[d]) != 4 {
		t.Fatalf("rows of the events in turn %v, of all at once %v (%d rows)", got, w, len(want.EventDays[d]))
	}
}
