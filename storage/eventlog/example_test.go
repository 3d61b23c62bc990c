package eventlog_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/mfhq/mf/storage/eventlog"
)

// An embedded log: ingest publishes a batch once under its batch id, the
// processor's group reads it with its log position.
func Example() {
	dir, err := os.MkdirTemp("", "mf-log-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	cfg := eventlog.DefaultConfig()
	cfg.Dir = dir
	log, err := eventlog.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close()

	pub := log.Publisher()
	batch := message.NewMessage("0b9c1c1e-7f6a-4a51-9d0e-3c6b2a1f4e55", []byte(`{"events":[]}`))
	batch.Metadata.Set("project", "3f2a9c1e")
	for range 2 { // a client retry: stored once
		r, err := pub.PublishOnce(ctx, "batches.3f2a9c1e", batch.UUID, batch)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("seq %d duplicate %v\n", r.Seq, r.Duplicate)
	}

	sub, err := log.Subscriber(eventlog.DefaultSubscriberConfig("processor"))
	if err != nil {
		fmt.Println(err)
		return
	}
	msgs, err := sub.Subscribe(ctx, eventlog.TopicBatches)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := <-msgs
	seq, _ := eventlog.Seq(m)
	fmt.Printf("%s at %d of %s: %s\n", m.Metadata.Get("project"), seq, m.Metadata.Get(eventlog.MetaSubject), m.Payload)
	m.Ack()
	// Output:
	// seq 1 duplicate false
	// seq 1 duplicate true
	// 3f2a9c1e at 1 of mf.batches.31.3f2a9c1e: {"events":[]}
}
