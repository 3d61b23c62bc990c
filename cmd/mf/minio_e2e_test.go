package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/storagetest"
)

// TestServeOnMinIO runs mf with its tables in a real MinIO (--store
// s3://…): accepted events reach the reporting API through the processor,
// a restart reads the same tables back from the bucket, a replay rebuilds
// them there, and nothing lands in the local object directory.
func TestServeOnMinIO(t *testing.T) {
	store := storagetest.StartMinIO(t)
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", demoFile, "--store", store)
	now := time.Now().UnixMilli()
	body := batchBody("5e5e5e5e-0000-4000-8000-000000000001", "full",
		fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"s3-a","page":{"url":"https://shop.example/"}}`, now-60_000),
		fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"s3-a","page":{"url":"https://shop.example/cart"}}`, now-50_000),
		fmt.Sprintf(`{"name":"order_completed","time":%d,"anonymousId":"s3-a","properties":{"total":30}}`, now-40_000),
		fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"s3-b","page":{"url":"https://shop.example/"}}`, now-30_000))
	code, _, resp := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
		"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
	if code != 202 {
		t.Fatalf("batch: %d %s", code, resp)
	}
	// Two people active today, one of them bought for 30 EUR.
	numbers := func(p *mfProc) map[string]any { return overviewNumbers(t, p.api) }
	want := map[string]any{"people": 2.0, "buyers": 1.0, "revenue": 30.0}
	same := func(got map[string]any) bool {
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	var got map[string]any
	waitFor(t, time.Minute, func() bool { got = numbers(p); return same(got) })

	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("exit %d on SIGTERM", c)
	}
	p = startMF(t, data, "serve", "--store", store)
	if got = numbers(p); !same(got) {
		t.Fatalf("after a restart the overview reads %v, want %v", got, want)
	}
	if code, out, errOut := runMF(t, nil, "replay", "--admin-url", p.admin, "--project", demoProject); code != 0 {
		t.Fatalf("mf replay: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, time.Minute, func() bool { got = numbers(p); return same(got) })
	if entries, err := os.ReadDir(filepath.Join(data, "objects")); err == nil && len(entries) > 0 {
		t.Errorf("with --store, mf wrote into the local object directory: %v", entries)
	}
}
