package eventlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/storage/eventlog/natstest"
)

// TestClusterReplicas runs the log on a real three-node cluster of
// nats-server processes: the streams are created with three replicas; with
// the batches stream's leader SIGKILLed, publishing goes on (a publish
// spans the election); with a second node gone (no quorum) a publish fails
// with ErrUnavailable and nothing is acknowledged; once the nodes are back
// publishing works again, every acknowledged message is there once, and a
// resend of an acknowledged one is recognized as a duplicate.
func TestClusterReplicas(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	cfg := DefaultConfig()
	cfg.URL = c.URL()
	l := openLog(t, cfg)
	ctx := context.Background()

	ref := l.streams[TopicBatches]
	info, err := ref.handle.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("batches stream: %d replicas configured, cluster %+v; want 3 (a leader and 2 replicas)", info.Config.Replicas, info.Cluster)
	}
	pub := l.Publisher()
	acked := map[string]uint64{}
	publish := func(id string, within time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		r, err := pub.PublishOnce(pctx, TopicBatches+".p1", id, message.NewMessage(id, []byte(id)))
		if err == nil {
			if r.Duplicate {
				return fmt.Errorf("first publish of %s reported a duplicate", id)
			}
			acked[id] = r.Seq
		}
		return err
	}
	for i := range 20 {
		if err := publish(fmt.Sprintf("before-%d", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// The leader of the batches stream dies.
	var leader *natstest.Node
	for _, nd := range c.Nodes() {
		if nd.Name == info.Cluster.Leader {
			leader = nd
		}
	}
	if leader == nil {
		t.Fatalf("no node named %q, the stream's leader", info.Cluster.Leader)
	}
	c.Kill(leader)
	killed := time.Now()
	if err := publish("after-leader-death", 30*time.Second); err != nil {
		t.Fatalf("publish with two of three nodes up: %v", err)
	}
	t.Logf("first publish acknowledged %v after the stream leader was SIGKILLed", time.Since(killed).Round(time.Millisecond))
	for i := range 20 {
		if err := publish(fmt.Sprintf("two-nodes-%d", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// A second node dies: no quorum, nothing acknowledged.
	var second *natstest.Node
	for _, nd := range c.Nodes() {
		if nd != leader {
			second = nd
			break
		}
	}
	c.Kill(second)
	if err := publish("no-quorum", 8*time.Second); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("publish without a quorum: %v, want ErrUnavailable", err)
	}
	delete(acked, "no-quorum")

	c.Start(leader)
	c.Start(second)
	c.WaitReady(2 * time.Minute)
	back := time.Now()
	if err := publish("after-return", 60*time.Second); err != nil {
		t.Fatalf("publish once the nodes are back: %v", err)
	}
	t.Logf("publishing again %v after the nodes were started", time.Since(back).Round(time.Millisecond))
	// A resend of an acknowledged message is a duplicate of the first.
	r, err := pub.PublishOnce(ctx, TopicBatches+".p1", "before-3", message.NewMessage("x", []byte("x")))
	if err != nil || !r.Duplicate || r.Seq != acked["before-3"] {
		t.Fatalf("resend of before-3: %+v, %v; want a duplicate of %d", r, err, acked["before-3"])
	}
	// Every acknowledged message is stored once, at its position.
	for id, seq := range acked {
		m, err := l.GetMsg(ctx, TopicBatches, seq)
		if err != nil {
			t.Fatalf("acknowledged %s at %d: %v", id, seq, err)
		}
		if string(m.Payload) != id {
			t.Fatalf("position %d holds %q, not %q", seq, m.Payload, id)
		}
	}
	last, err := l.LastSeq(ctx, TopicBatches)
	if err != nil {
		t.Fatal(err)
	}
	if int(last) < len(acked) {
		t.Fatalf("last position %d, fewer than the %d messages acknowledged", last, len(acked))
	}
}
