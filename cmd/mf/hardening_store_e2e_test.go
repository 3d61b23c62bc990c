package main

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/storagetest"
)

// TestStoreCredentialsFromTheEnvironment runs mf serve on a real MinIO
// with a --store URL that carries no keys: mf takes them from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the standard chain),
// accepts batches and counts them; the secret is in no output.
func TestStoreCredentialsFromTheEnvironment(t *testing.T) {
	u, err := url.Parse(storagetest.StartMinIO(t))
	if err != nil {
		t.Fatal(err)
	}
	access := u.User.Username()
	secret, _ := u.User.Password()
	u.User = nil
	p := startMFBin(t, mfBinary, []string{"AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret},
		t.TempDir(), "serve", "--provision", demoFile, "--store", u.String())
	for i := range 3 {
		body := batchBody(fmt.Sprintf("3c3c3c3c-0000-4000-8000-%012d", i), "full",
			fmt.Sprintf(`{"name":"$pageview","anonymousId":"env-%d","page":{"url":"https://shop.example/"}}`, i))
		if code, _, b := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json"); code != 202 {
			t.Fatalf("batch %d: %d %s", i, code, b)
		}
	}
	waitForEvery(t, 30*time.Second, 500*time.Millisecond, func() bool { return overviewNumbers(t, p.api)["people"] == 3.0 })
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM", c)
	}
	if strings.Contains(p.out.String(), secret) {
		t.Error("mf's output holds the store's secret key")
	}
}

// TestStoreThatIgnoresConditionalWritesIsRefused: on a real MinIO behind
// a proxy that drops If-Match and If-None-Match (a store that silently
// ignores conditional writes), mf serve refuses to start, naming the
// store and the check that failed; on the same MinIO directly it starts.
func TestStoreThatIgnoresConditionalWritesIsRefused(t *testing.T) {
	minio := storagetest.StartMinIO(t)
	bad := storagetest.ConditionalHeaderDropper(t, storagetest.FreshBucket(t, minio))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, mfBinary, "serve", "--data", t.TempDir(), "--store", bad,
		"--ingest-addr", freeAddr(t), "--api-addr", freeAddr(t), "--admin-addr", freeAddr(t)).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mf serve still running after 30s on a store that ignores conditional writes; output:\n%s", tail(string(out), 3000))
	}
	bu, _ := url.Parse(bad)
	for _, want := range []string{"the object store s3://" + bu.Host + "/" + strings.TrimPrefix(bu.Path, "/"), "ignores conditional writes",
		"create-only put (If-None-Match: *)"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("mf serve: %v, want an exit naming %q; output:\n%s", err, want, tail(string(out), 3000))
		}
	}
	secret, _ := bu.User.Password()
	if strings.Contains(string(out), secret) {
		t.Error("the output holds the store's secret key")
	}
	p := startMF(t, t.TempDir(), "serve", "--store", minio)
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve on MinIO itself: exit %d on SIGTERM", c)
	}
}
