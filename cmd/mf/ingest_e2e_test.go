package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

const (
	demoWebsiteKey = "mf_demoweb1_Website-Key_1"
	demoSecretKey  = "mf_demosrv1_Server-Secret_1"
	chromeUA       = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
)

// readBatches opens the embedded log of a stopped mf and returns every
// stored batch record by batch id, with how often each id was stored.
func readBatches(t *testing.T, data string) (map[string]*records.Batch, map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := eventlog.DefaultConfig()
	cfg.Dir = filepath.Join(data, "log")
	lg, err := eventlog.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("cannot open the log of the stopped mf: %v", err)
	}
	defer lg.Close()
	last, err := lg.LastSeq(ctx, eventlog.TopicBatches)
	if err != nil {
		t.Fatal(err)
	}
	got, count := map[string]*records.Batch{}, map[string]int{}
	if last == 0 {
		return got, count
	}
	sub, err := lg.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sub.Subscribe(ctx, eventlog.TopicBatches)
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs {
		rec, err := records.Decode(m.Payload)
		if err != nil {
			t.Fatalf("stored batch does not decode: %v", err)
		}
		id := rec.ID.String()
		got[id] = rec
		count[id]++
		m.Ack()
		if m.Metadata.Get(eventlog.MetaSeq) == fmt.Sprint(last) {
			break
		}
	}
	return got, count
}

func batchBody(id, mode string, events ...string) []byte {
	b := fmt.Sprintf(`{"v":1,"batch":%q,"mode":%q,"events":[`, id, mode)
	for i, e := range events {
		if i > 0 {
			b += ","
		}
		b += e
	}
	return []byte(b + "]}")
}

// TestIngestBothModesReachTheLog sends a consentless website batch and a
// full server batch through the real binary and reads them back from the
// log after a clean stop.
func TestIngestBothModesReachTheLog(t *testing.T) {
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", demoFile)

	web := batchBody("5b0f8d6e-1c2a-4e3f-9a8b-7c6d5e4f3a21", "consentless",
		`{"name":"$pageview","page":{"url":"https://shop.example/pricing?utm_source=news&secret=1#top","referrer":"https://www.search.example/q?x=1"}}`,
		`{"name":"$identify","properties":{"plan":"pro"}}`)
	code, hdr, body := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, web,
		"Content-Type", "text/plain;charset=UTF-8", "User-Agent", chromeUA, "Origin", "https://www.shop.example")
	if code != 202 || string(body) != `{"batch":"5b0f8d6e-1c2a-4e3f-9a8b-7c6d5e4f3a21","accepted":1,"dropped":1}` {
		t.Fatalf("website batch: %d %s", code, body)
	}
	if hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("no CORS header on a 202: %v", hdr)
	}
	srv := batchBody("6c1e9f7a-2d3b-4f4a-8b9c-8d7e6f5a4b32", "full",
		`{"name":"order_completed","userId":"user-42","anonymousId":"anon-1","properties":{"total":99.5,"revenue":99.5,"currency":"EUR"}}`,
		`{"name":"$identify","userId":"user-42","properties":{"email":"a@example.com"}}`,
		`{"name":"signup","userId":"guest"}`)
	code, _, body = do(t, "POST", p.ingest+"/v1/batch", srv,
		"Content-Type", "application/json", "Authorization", "bearer "+demoSecretKey)
	if code != 202 || string(body) != `{"batch":"6c1e9f7a-2d3b-4f4a-8b9c-8d7e6f5a4b32","accepted":3,"dropped":0}` {
		t.Fatalf("server batch: %d %s", code, body)
	}
	if c := p.stop(30 * time.Second); c != 0 {
		t.Fatalf("exit %d on SIGTERM; output:\n%s", c, p.out)
	}

	got, count := readBatches(t, data)
	if len(got) != 2 {
		t.Fatalf("log holds %d batches, want 2", len(got))
	}
	w := got["5b0f8d6e-1c2a-4e3f-9a8b-7c6d5e4f3a21"]
	if w == nil || w.Mode != records.ModeConsentless || w.SourceKind != records.SourceWebsite || len(w.Events) != 1 {
		t.Fatalf("website batch stored as %+v", w)
	}
	if u := w.Events[0].Page.URL.String(); u != "https://shop.example/pricing?utm_source=news" {
		t.Errorf("page URL stored as %q", u)
	}
	if len(w.Edge.VisitorHash) == 0 || w.Edge.Browser != "Chrome" || w.Edge.Device != "desktop" {
		t.Errorf("website edge facts: %+v", w.Edge)
	}
	s := got["6c1e9f7a-2d3b-4f4a-8b9c-8d7e6f5a4b32"]
	if s == nil || s.Mode != records.ModeFull || s.SourceKind != records.SourceServer || len(s.Events) != 3 {
		t.Fatalf("server batch stored as %+v", s)
	}
	if s.Events[0].UserID != "user-42" || s.Events[2].UserID != "" {
		t.Errorf("identifiers stored as %q and %q (placeholder must be empty)", s.Events[0].UserID, s.Events[2].UserID)
	}
	if s.Edge.Country != "" || s.Edge.Device != "" || len(s.Edge.VisitorHash) != 0 {
		t.Errorf("server batch carries edge facts: %+v", s.Edge)
	}
	for id, n := range count {
		if n != 1 {
			t.Errorf("batch %s stored %d times", id, n)
		}
	}
}

// TestIngestCrashKeepsEveryAcceptedBatchOnce: clients send batches with
// retries (same batch ids, same bytes) while mf serve is killed with
// SIGKILL and started again; afterwards every batch that got a 202 is in
// the log exactly once, and resends get the same receipt.
func TestIngestCrashKeepsEveryAcceptedBatchOnce(t *testing.T) {
	data := t.TempDir()
	// The load here is far above the specification's per-address and
	// per-key budgets; the test is about crashes, not rate limits.
	p := startMF(t, data, "serve", "--provision", demoFile, "--rate-limit-scale", "1000")
	addrs := []string{p.ingestAddr, p.apiAddr, p.admn}

	type sent struct {
		id, receipt string
	}
	var mu sync.Mutex
	var cur atomic.Pointer[string]
	base := p.ingest
	cur.Store(&base)
	accepted := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var total atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%08x-0000-4000-8000-%012x", w, i)
				n := 1 + rng.IntN(20)
				evs := make([]string, n)
				for j := range evs {
					evs[j] = fmt.Sprintf(`{"name":"e%d","userId":"u%d","properties":{"i":%d}}`, j, w, i)
				}
				body := batchBody(id, "full", evs...)
				for attempt := 0; attempt < 200; attempt++ {
					code, _, resp, err := tryDo("POST", *cur.Load()+"/v1/batch", body, "Authorization", "Bearer "+demoSecretKey)
					if err == nil && code == 202 {
						mu.Lock()
						accepted[id] = string(resp)
						mu.Unlock()
						total.Add(1)
						break
					}
					if err == nil && code != 503 && code != 429 {
						t.Errorf("batch %s: unexpected %d %s", id, code, resp)
						return
					}
					time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
				}
			}
		}(w)
	}
	for round := 0; round < 3; round++ {
		waitFor(t, 30*time.Second, func() bool { return total.Load() >= int64(50*(round+1)) })
		p.kill()
		p = startMFAt(t, data, addrs, "serve", "--rate-limit-scale", "1000")
	}
	waitFor(t, 30*time.Second, func() bool { return total.Load() >= 200 })
	close(stop)
	wg.Wait()

	// Resends after the crashes are answered with the same receipt.
	mu.Lock()
	defer mu.Unlock()
	checked := 0
	for id, receipt := range accepted {
		if checked == 20 {
			break
		}
		checked++
		var r struct{ Accepted int }
		_ = json.Unmarshal([]byte(receipt), &r)
		body := batchBody(id, "full", `{"name":"different"}`)
		code, _, resp := do(t, "POST", p.ingest+"/v1/batch", body, "Authorization", "Bearer "+demoSecretKey)
		if code != 202 || string(resp) != receipt {
			t.Fatalf("resend of %s: %d %s, want the first receipt %s", id, code, resp, receipt)
		}
	}
	if c := p.stop(30 * time.Second); c != 0 {
		t.Fatalf("exit %d on SIGTERM", c)
	}
	got, count := readBatches(t, data)
	for id, receipt := range accepted {
		rec, ok := got[id]
		if !ok {
			t.Errorf("batch %s got 202 %s but is not in the log", id, receipt)
			continue
		}
		if count[id] != 1 {
			t.Errorf("batch %s stored %d times", id, count[id])
		}
		var r struct{ Accepted int }
		_ = json.Unmarshal([]byte(receipt), &r)
		if len(rec.Events) != r.Accepted {
			t.Errorf("batch %s: receipt says %d accepted, log holds %d events", id, r.Accepted, len(rec.Events))
		}
	}
	t.Logf("%d batches accepted across 3 SIGKILLs, all in the log exactly once", len(accepted))
}

// TestShutdownDrainsPastUnusedConnections checks SIGTERM with connections
// that never carried a request (HTTP clients dial spare ones): the drain
// closes them instead of waiting for them until its limit and exiting 1,
// and a request in progress on another connection still gets its answer.
func TestShutdownDrainsPastUnusedConnections(t *testing.T) {
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	var idle []net.Conn
	for _, addr := range []string{p.ingestAddr, p.apiAddr, p.admn} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// A request that is half sent when SIGTERM comes: its answer must
	// still arrive once the rest is sent.
	busy, err := net.Dial("tcp", p.ingestAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := busy.Write([]byte("GET /healthz HTTP/1.1\r\nHost: mf\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	answered := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		if _, err := busy.Write([]byte("\r\n")); err != nil {
			answered <- err
			return
		}
		_ = busy.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	// Each listener would wait 20 s for its unused connection.
	if code := p.stop(90 * time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM with connections that never carried a request", code)
	}
	if err := <-answered; err != nil {
		t.Errorf("the request in progress at SIGTERM got no answer: %v", err)
	}
	for i, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("unused connection %d still open after mf exited", i)
		}
	}
}
