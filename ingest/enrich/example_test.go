package enrich_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/mfhq/mf/ingest/enrich"
	"github.com/mfhq/mf/storage"
)

func ExampleEnricher_Enrich() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "enrich-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bucket, err := storage.Open(ctx, storage.Config{Dir: dir}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bucket.Close()

	cfg := enrich.DefaultConfig()
	cfg.TrustedProxies, _ = enrich.ParseTrustedProxies("10.0.0.0/8")
	e, err := enrich.New(cfg, enrich.NewBucketSaltStore(bucket), slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	// What a handler hands over: peer, X-Forwarded-For, User-Agent.
	r := enrich.RequestFacts{
		Peer:          netip.MustParseAddr("10.0.0.7"),
		XForwardedFor: "203.0.113.9",
		UserAgent:     "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
	}
	edge, err := e.Enrich(ctx, r, enrich.Source{ProjectID: "proj_1", Website: true, Consentless: true}, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(edge.Device, edge.Browser, edge.OS, edge.Bot)
	fmt.Println(len(edge.VisitorHash), "hex digits of visitor hash")
	fmt.Println(edge.NetKey) // never the address

	bot, _ := e.Enrich(ctx, enrich.RequestFacts{Peer: r.Peer, UserAgent: "curl/8.5.0"}, enrich.Source{ProjectID: "proj_1", Website: true}, time.Now())
	fmt.Println("curl is a bot:", bot.Bot)
	// Output:
	// mobile Safari iOS false
	// 32 hex digits of visitor hash
	// netkey(ipv4)
	// curl is a bot: true
}
