package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// A refused file names the JSON path of every fault.
func ExampleParse() {
	_, err := catalog.Parse([]byte(`{"organizations": [{"id": "acme", "slug": "acme", "name": "Acme", "plan": "gold"}]}`))
	fmt.Println(err)
	var ve *catalog.ValidationError
	if errors.As(err, &ve) {
		for _, f := range ve.Faults {
			fmt.Println(f.Path)
		}
	}
	// Output:
	// provisioning file refused: 2 faults: organizations[0].id: must be a UUID in lower-case 8-4-4-4-12 hex form, not "acme"; organizations[0].plan: must be one of "free", "pro" or "enterprise", not "gold"
	// organizations[0].id
	// organizations[0].plan
}

// Wiring the catalog to the log, applying a file and looking a key up.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "mf-catalog-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)

	cfg := eventlog.DefaultConfig()
	cfg.Dir = dir
	l, err := eventlog.Open(ctx, cfg, logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	// A replay subscriber: every process reads the whole catalog topic.
	sub, err := l.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		fmt.Println(err)
		return
	}
	cat, err := catalog.Open(ctx, catalog.DefaultConfig(), catalog.Log{
		Publisher: l.Publisher(), Subscriber: sub, LastSeq: l.LastSeq, Seq: eventlog.Seq,
	}, logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()

	res, err := cat.Apply(ctx, []byte(`{"organizations": [{
	  "id": "2b7e4c1a-8d3f-4e6a-9c5b-1f0d2e3a4b02", "slug": "demo", "name": "Demo", "plan": "pro",
	  "projects": [{"id": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03", "slug": "shop", "name": "Shop",
	    "timezone": "Europe/Berlin", "reportingCurrency": "EUR",
	    "sources": [{"id": "d2e3f4a5-b6c7-4d8e-9f0a-1b2c3d4e5f05", "name": "Backend", "kind": "server",
	      "mode": "full", "key": "mf_demosrv1_Server-Secret_1"}]}]}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(res.Changes), "changes")
	src, ok := cat.State().SourceByKey("mf_demosrv1_Server-Secret_1")
	fmt.Println(ok, src.Name, src.Kind, src.Key == "")
	// Output:
	// 3 changes
	// true Backend server true
}
