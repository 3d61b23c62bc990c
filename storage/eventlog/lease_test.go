package eventlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestSubscribeAfter reads a topic from a position: the first message is
// the one after it, in order, nothing before it comes, and messages
// published later follow. A group subscriber refuses a position.
func TestSubscribeAfter(t *testing.T) {
	l := openLog(t, testConfig(t.TempDir()))
	ctx := context.Background()
	for i := range 10 {
		if err := l.Publisher().Publish("batches.p1", message.NewMessage(fmt.Sprintf("m%d", i), []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := l.Subscriber(DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, after := range []uint64{0, 4, 9} {
		sctx, cancel := context.WithCancel(ctx)
		ch, err := sub.SubscribeAfter(sctx, "batches", after)
		if err != nil {
			t.Fatal(err)
		}
		for want := after + 1; want <= 10; want++ {
			m := receive(t, ch)
			if got := mustSeq(t, m); got != want || m.UUID != fmt.Sprintf("m%d", want-1) {
				t.Fatalf("after %d: got %s at %d, want m%d at %d", after, m.UUID, got, want-1, want)
			}
			m.Ack()
		}
		cancel()
	}
	// Past the end: the next message published is the first.
	ch, err := sub.SubscribeAfter(ctx, "batches", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Publisher().Publish("batches.p1", message.NewMessage("late", nil)); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ch); m.UUID != "late" || mustSeq(t, m) != 11 {
		t.Fatalf("got %s at %d, want late at 11", m.UUID, mustSeq(t, m))
	} else {
		m.Ack()
	}

	group, err := l.Subscriber(DefaultSubscriberConfig("g"))
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	if _, err := group.SubscribeAfter(ctx, "batches", 3); err == nil {
		t.Fatal("a group subscriber read from a position")
	}
}

// TestLeaseOneHolder has two processes of one external server take the
// same lease: the second waits until the first releases it, or until the
// first stops renewing (a crash) and the TTL passes; a holder whose lease
// was taken learns it from its context.
func TestLeaseOneHolder(t *testing.T) {
	ns := startServer(t, t.TempDir(), 0)
	cfg := DefaultConfig()
	cfg.URL = ns.ClientURL()
	a, b := openLog(t, cfg), openLog(t, cfg)
	lcfg := LeaseConfig{TTL: 2 * time.Second, Poll: 50 * time.Millisecond}
	ctx := context.Background()

	la, err := a.AcquireLease(ctx, "processor", lcfg)
	if err != nil {
		t.Fatal(err)
	}
	// b waits as long as a holds and renews it (well past the TTL).
	wctx, cancel := context.WithTimeout(ctx, 3*lcfg.TTL)
	_, err = b.AcquireLease(wctx, "processor", lcfg)
	cancel()
	if err == nil {
		t.Fatal("a second process took a lease that the first held and renewed")
	}
	if la.Context().Err() != nil {
		t.Fatalf("the holder lost its lease while renewing it: %v", context.Cause(la.Context()))
	}

	// An orderly release hands it over at b's next try.
	got := make(chan *Lease, 1)
	go func() {
		lb, err := b.AcquireLease(ctx, "processor", lcfg)
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var lb *Lease
	select {
	case lb = <-got:
	case <-time.After(lcfg.TTL):
		t.Fatalf("the lease was not taken within the TTL of its release")
	}
	if took := time.Since(released); took > lcfg.TTL/2 {
		t.Fatalf("a released lease took %v to be taken, want about one poll", took)
	}
	if lb.Holder() == la.Holder() {
		t.Fatalf("both holders are named %q", lb.Holder())
	}

	// A crash: b stops renewing without releasing. a takes the lease once
	// the server has forgotten it, not before.
	lb.cancel(errors.New("crash"))
	<-lb.done
	crashed := time.Now()
	la2, err := a.AcquireLease(ctx, "processor", lcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer la2.Release(ctx)
	if took := time.Since(crashed); took < lcfg.TTL/2 {
		t.Fatalf("the lease of a crashed holder was taken after %v, before its TTL %v", took, lcfg.TTL)
	}

	// A holder whose lease another process overwrote learns it at its
	// next renewal.
	kv, err := b.leaseBucket(ctx, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "processor", []byte(`{"holder":"intruder"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la2.Context().Done():
		if !errors.Is(context.Cause(la2.Context()), ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(la2.Context()))
		}
	case <-time.After(2 * lcfg.TTL):
		t.Fatal("a holder did not notice its lease was taken")
	}
}

// TestLeaseEmbeddedTakeover restarts an embedded log after its process
// held a lease without releasing it: the new process takes it at once,
// since the embedded log is its alone.
func TestLeaseEmbeddedTakeover(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	lcfg := LeaseConfig{TTL: time.Minute, Poll: 50 * time.Millisecond}
	l, err := Open(ctx, testConfig(dir), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	le, err := l.AcquireLease(ctx, "processor", lcfg)
	if err != nil {
		t.Fatal(err)
	}
	le.cancel(errors.New("crash")) // never released
	<-le.done
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, testConfig(dir))
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	le2, err := l.AcquireLease(tctx, "processor", lcfg)
	if err != nil {
		t.Fatalf("the restarted embedded log's process could not take the lease: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v, want at once", took)
	}
	if err := le2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
