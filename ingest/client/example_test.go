package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/mfhq/mf/ingest/client"
	"github.com/mfhq/mf/ingest/internal/flagstack"
)

// secretKey is the secret key of the server source in
// testdata/provision.json.
const secretKey = "mf_clientt1_Client-Test-Secret-Key_0123456789"

// startService runs the /v1 service on real parts in a temporary
// directory, provisioned with testdata/provision.json, and returns its
// address and a function that stops it. A service that cannot start ends
// the example's process.
func startService() (string, func()) {
	dir, err := os.MkdirTemp("", "mf-client-example")
	if err != nil {
		log.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join("testdata", "provision.json"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := flagstack.Start(ctx, flagstack.Options{Dir: dir, Provision: file})
	if err != nil {
		log.Fatalf("cannot start the service: %v", err)
	}
	for s.Flags.Version() < s.Catalog.State().Version() {
		time.Sleep(time.Millisecond)
	}
	return s.URL, func() { _ = s.Close(); _ = os.RemoveAll(dir) }
}

// Evaluating flags locally: the first read fetches the server document;
// later reads use it and refresh it in the background every 30 seconds.
func ExampleClient_Evaluate() {
	url, stop := startService()
	defer stop()
	ctx := context.Background()

	c, err := client.New(client.DefaultConfig(url, secretKey))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	d, err := c.Evaluate(ctx, "new-checkout", client.Facts{UserID: "user-42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Variant, d.Reason, d.Rule)

	d, _ = c.Evaluate(ctx, "pricing", client.Facts{UserID: "user-7", Properties: map[string]any{"plan": "pro"}})
	fmt.Println(d.Variant, string(d.Value))

	fmt.Println(c.Variant(ctx, "missing-flag", client.Facts{}, "fallback"))
	// Output:
	// on SPLIT 0
	// discount {"price":8}
	// fallback
}

// Sending a batch under an idempotency key: the batch id is derived from
// the key, so sending it again (after a crash, from another process) is
// stored once and answered with the same receipt.
func ExampleClient_SendBatch() {
	url, stop := startService()
	defer stop()
	ctx := context.Background()
	c, err := client.New(client.DefaultConfig(url, secretKey))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	events := []client.Event{{Name: "order_completed", UserID: "user-42", Properties: map[string]any{"total": 49.9}}}
	first, err := c.SendBatch(ctx, events, "order-1001")
	if err != nil {
		fmt.Println(err)
		return
	}
	again, _ := c.SendBatch(ctx, events, "order-1001")
	fmt.Println(first.Batch, first.Accepted, again == first)
	// Output: 53b0aad4-29f4-8acd-b9c4-ecf83a3edbc4 1 true
}

// Segment lookups of one tick share one request; the answer lists the
// refs the server document tests. Until the processor provides
// membership, every ref is unavailable.
func ExampleClient_Membership() {
	url, stop := startService()
	defer stop()
	ctx := context.Background()
	c, err := client.New(client.DefaultConfig(url, secretKey))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	m, err := c.Membership(ctx, client.Unit{AnonymousID: "visitor-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(m.Segments), len(m.Unavailable), m.RefreshedAt == nil, m.Stale)
	// Output: 0 1 true false
}

func ExampleDerivedBatchID() {
	fmt.Println(client.DerivedBatchID("order-1001"))
	// Output: 53b0aad4-29f4-8acd-b9c4-ecf83a3edbc4
}
