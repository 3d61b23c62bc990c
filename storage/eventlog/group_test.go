package eventlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestGroupOrderAcrossSubscribers checks the delivery contract the
// processor relies on with a window of messages out: two subscribers of one
// group, and one of them at a time receives; messages come in log order,
// a nacked one again before the next, and when the receiving subscriber
// closes holding messages, the other takes over with them, in order.
func TestGroupOrderAcrossSubscribers(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, testConfig(t.TempDir()))
	// More than the group's window (MaxAckPending), so that messages are
	// still to deliver while both subscribers ask for them.
	const total = 1600
	for i := range total {
		if err := l.Publisher().Publish("batches", message.NewMessage(fmt.Sprintf("m%03d", i), []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	scfg := DefaultSubscriberConfig("processor")
	scfg.CloseGrace = 100 * time.Millisecond
	scfg.NakDelay = 10 * time.Millisecond
	subA, err := l.Subscriber(scfg)
	if err != nil {
		t.Fatal(err)
	}
	chA, err := subA.Subscribe(ctx, "batches")
	if err != nil {
		t.Fatal(err)
	}
	// A is pinned once it received a message; B subscribes after.
	first := receive(t, chA)
	if mustSeq(t, first) != 1 {
		t.Fatalf("first message at %d, want 1", mustSeq(t, first))
	}
	first.Ack()
	subB, err := l.Subscriber(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	chB, err := subB.Subscribe(ctx, "batches")
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(2)
	for ; next <= 1300; next++ {
		select {
		case m := <-chB:
			t.Fatalf("subscriber B received %d while A is pinned", mustSeq(t, m))
		default:
		}
		m := receive(t, chA)
		if got := mustSeq(t, m); got != next {
			t.Fatalf("A received %d, want %d", got, next)
		}
		if next%100 == 0 {
			// A nack hands the same message out again, before the next.
			m.Nack()
			m = receive(t, chA)
			if got := mustSeq(t, m); got != next || m.Metadata.Get(MetaDelivery) != "2" {
				t.Fatalf("after a nack A received %d (delivery %s), want %d again", got, m.Metadata.Get(MetaDelivery), next)
			}
		}
		m.Ack()
	}
	// A holds the next message and closes without settling it; B takes
	// over at once with that message and goes on in order.
	held := receive(t, chA)
	if got := mustSeq(t, held); got != next {
		t.Fatalf("A received %d, want %d", got, next)
	}
	if err := subA.Close(); err != nil {
		t.Fatal(err)
	}
	for ; next <= total; next++ {
		m := receive(t, chB)
		if got := mustSeq(t, m); got != next {
			t.Fatalf("B received %d, want %d", got, next)
		}
		m.Ack()
	}
}
