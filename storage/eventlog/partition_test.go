package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestPartitions publishes to sub-topics of the partitioned batches
// stream and checks that the server stores each under the partition
// PartitionOf names, that a partition reader gets its partition's messages
// and the ones stored before partitioning (and nothing else), that a key
// reader gets its key's, and that a stream keeps the partition count it was
// created with.
func TestPartitions(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Before partitioning: a message on the topic and one on a sub-topic.
	cfg := testConfig(dir)
	cfg.Streams[0].Partitions = 0
	l := openLog(t, cfg)
	pub := l.Publisher()
	if err := pub.Publish(TopicBatches, message.NewMessage("legacy-0", []byte("k0"))); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(TopicBatches+".k1", message.NewMessage("legacy-1", []byte("k1"))); err != nil {
		t.Fatal(err)
	}
	if got := l.Partitions(TopicBatches); got != 0 {
		t.Fatalf("Partitions before partitioning = %d", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	const n = 8
	cfg = testConfig(dir)
	cfg.Streams[0].Partitions = n
	l = openLog(t, cfg)
	if got := l.Partitions(TopicBatches); got != n {
		t.Fatalf("Partitions = %d, want %d", got, n)
	}
	keys := make([]string, 40)
	seqs := map[string]uint64{}
	for i := range keys {
		keys[i] = "project-" + strconv.Itoa(i)
		r, err := l.Publisher().PublishOnce(ctx, TopicBatches+"."+keys[i], keys[i], message.NewMessage("u"+strconv.Itoa(i), []byte(keys[i])))
		if err != nil {
			t.Fatal(err)
		}
		seqs[keys[i]] = r.Seq
		m, err := l.GetMsg(ctx, TopicBatches, r.Seq)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("mf.batches.%d.%s", PartitionOf(keys[i], n), keys[i])
		if got := m.Metadata.Get(MetaSubject); got != want {
			t.Fatalf("key %q stored under %q, want %q (the server's partition() and PartitionOf differ)", keys[i], got, want)
		}
		if Legacy(m) {
			t.Fatalf("message on %q reads as stored before partitioning", want)
		}
	}

	sub, err := l.Subscriber(DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	read := func(ch <-chan *message.Message, count int) []string {
		t.Helper()
		var out []string
		for range count {
			m := receive(t, ch)
			if Legacy(m) {
				out = append(out, "legacy:"+string(m.Payload))
			} else {
				out = append(out, string(m.Payload))
			}
			m.Ack()
		}
		select {
		case m := <-ch:
			t.Fatalf("unexpected message %q on %s", m.Payload, m.Metadata.Get(MetaSubject))
		case <-time.After(200 * time.Millisecond):
		}
		return out
	}
	seen := 0
	for part := range n {
		var want []string
		want = append(want, "legacy:k0", "legacy:k1")
		for _, k := range keys {
			if PartitionOf(k, n) == part {
				want = append(want, k)
			}
		}
		pctx, pcancel := context.WithCancel(ctx)
		ch, err := sub.SubscribePartitionAfter(pctx, TopicBatches, part, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := read(ch, len(want))
		pcancel()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("partition %d delivered %v, want %v", part, got, want)
		}
		seen += len(want) - 2
	}
	if seen != len(keys) {
		t.Fatalf("partitions delivered %d keys' messages, want %d", seen, len(keys))
	}
	if _, err := sub.SubscribePartitionAfter(ctx, TopicBatches, n, 0); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("partition %d of %d: %v, want ErrUnknownTopic", n, n, err)
	}

	// One key, wherever the partitioning put it, after a position.
	k := keys[7]
	last, err := l.LastSeqKey(ctx, TopicBatches, k)
	if err != nil || last != seqs[k] {
		t.Fatalf("LastSeqKey = %d, %v; want %d", last, err, seqs[k])
	}
	kctx, kcancel := context.WithCancel(ctx)
	ch, err := sub.SubscribeKeyAfter(kctx, TopicBatches, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(ch, 2); fmt.Sprint(got) != fmt.Sprint([]string{"legacy:k0", k}) {
		t.Fatalf("key %q delivered %v", k, got)
	}
	kcancel()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A stream keeps its partition count.
	cfg = testConfig(dir)
	cfg.Streams[0].Partitions = 16
	l = openLog(t, cfg)
	if got := l.Partitions(TopicBatches); got != n {
		t.Fatalf("after reopening with 16: Partitions = %d, want the stream's %d", got, n)
	}
	r, err := l.Publisher().PublishOnce(ctx, TopicBatches+"."+keys[3], "again", message.NewMessage("again", []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.GetMsg(ctx, TopicBatches, r.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("mf.batches.%d.%s", PartitionOf(keys[3], n), keys[3]); m.Metadata.Get(MetaSubject) != want {
		t.Fatalf("stored under %q, want %q", m.Metadata.Get(MetaSubject), want)
	}
}

// TestTryLeaseAndList takes leases without waiting, lists them by prefix,
// and watches them change.
func TestTryLeaseAndList(t *testing.T) {
	l := openLog(t, testConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultLeaseConfig()
	changes, err := l.WatchLeases(ctx, "g.", cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.TryLease(ctx, "g.p.1", cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("no change signalled after a lease was taken")
	}
	if _, err := l.TryLease(ctx, "g.p.1", cfg, false); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second TryLease: %v, want ErrLeaseHeld", err)
	}
	if _, err := l.TryLease(ctx, "other", cfg, false); err != nil {
		t.Fatal(err)
	}
	got, err := l.Leases(ctx, "g.", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["g.p.1"] != l.Holder() {
		t.Fatalf("Leases = %v, want g.p.1 held by %s", got, l.Holder())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Leases(ctx, "g.", cfg); err != nil || len(got) != 0 {
		t.Fatalf("Leases after release = %v, %v", got, err)
	}
	b, err := l.TryLease(ctx, "g.p.1", cfg, false)
	if err != nil {
		t.Fatalf("TryLease after release: %v", err)
	}
	// takeover overwrites a held lease; the first holder learns it lost it.
	c, err := l.TryLease(ctx, "g.p.1", cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	select {
	case <-b.Context().Done():
		if !errors.Is(context.Cause(b.Context()), ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(b.Context()))
		}
	case <-time.After(time.Minute):
		t.Fatal("the overtaken holder did not notice within a minute")
	}
}
