package eventlog

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestBacklogAfter counts, for each partition and for the whole topic, the
// messages after a position, and the store time of the first of them.
func TestBacklogAfter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 4
	cfg := testConfig(t.TempDir())
	cfg.Streams[0].Partitions = n
	l := openLog(t, cfg)
	perPart := map[int][]uint64{} // partition -> positions, in order
	var all []uint64
	before := time.Now().Add(-time.Second)
	for i := 0; i < 30; i++ {
		key := "project-" + strconv.Itoa(i%7)
		r, err := l.Publisher().PublishOnce(ctx, TopicBatches+"."+key, key+":"+strconv.Itoa(i), message.NewMessage("u"+strconv.Itoa(i), []byte(key)))
		if err != nil {
			t.Fatal(err)
		}
		p := PartitionOf(key, n)
		perPart[p] = append(perPart[p], r.Seq)
		all = append(all, r.Seq)
	}
	check := func(part int, seqs []uint64, after uint64) {
		t.Helper()
		var want uint64
		var first uint64
		for _, s := range seqs {
			if s > after {
				if want == 0 {
					first = s
				}
				want++
			}
		}
		b, err := l.BacklogAfter(ctx, TopicBatches, part, after)
		if err != nil {
			t.Fatalf("BacklogAfter(part %d, after %d): %v", part, after, err)
		}
		if b.Messages != want {
			t.Errorf("BacklogAfter(part %d, after %d) = %d messages, want %d", part, after, b.Messages, want)
		}
		switch {
		case want == 0 && !b.Oldest.IsZero():
			t.Errorf("BacklogAfter(part %d, after %d): oldest %v with no message", part, after, b.Oldest)
		case want > 0:
			m, err := l.GetMsg(ctx, TopicBatches, first)
			if err != nil {
				t.Fatal(err)
			}
			at, _ := time.Parse(time.RFC3339Nano, m.Metadata.Get(MetaTime))
			if !b.Oldest.Equal(at) || b.Oldest.Before(before) {
				t.Errorf("BacklogAfter(part %d, after %d): oldest %v, want the time of message %d, %v", part, after, b.Oldest, first, at)
			}
		}
	}
	for part, seqs := range perPart {
		for _, after := range []uint64{0, seqs[0], seqs[len(seqs)/2], seqs[len(seqs)-1], all[len(all)-1] + 5} {
			check(part, seqs, after)
		}
	}
	check(-1, all, 0)
	check(-1, all, all[10])
	check(-1, all, all[len(all)-1])
}
