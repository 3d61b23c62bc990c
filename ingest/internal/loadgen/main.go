// Command loadgen is the whole-system intake benchmark (go tool task
// bench:ingest): it starts a real `mf serve` on a fresh data directory,
// sends 1,000-event batches (~300 KB) to POST /v1/batch over loopback from
// this separate process, and reports events/s, p50/p99 latency and the
// server's peak RSS. In the same run it measures a floor: the same bodies
// only decoded and published to an embedded log in this process, without
// HTTP, and prints the ratio of the two.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/ingest/internal/mfserve"
	"github.com/mfhq/mf/storage/eventlog"
)

func main() {
	mf := flag.String("mf", "bin/mf", "path of the mf binary")
	provision := flag.String("provision", "docs/demo-provision.json", "provisioning file with the server key")
	key := flag.String("key", "mf_demosrv1_Server-Secret_1", "secret key of a server source in the provisioning file")
	duration := flag.Duration("duration", 20*time.Second, "how long to send")
	conns := flag.Int("conns", 8, "concurrent connections")
	events := flag.Int("events", 1000, "events per batch")
	floor := flag.Bool("floor", true, "also measure the floor (decode and publish, no HTTP)")
	flag.Parse()
	if err := run(*mf, *provision, *key, *duration, *conns, *events, *floor); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// body builds a batch of n events of a server SDK's mix (page views,
// custom events with properties, identifies), about 300 bytes each, with
// the batch id as 36 'x' to be replaced per request.
func body(n int, now time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"v":1,"batch":"%s","mode":"full","sentAt":%d,"context":{"sdk":"mf-go/1.0.0"},"events":[`, strings.Repeat("x", 36), now.UnixMilli())
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		t := now.Add(-time.Duration(n-i) * time.Millisecond).UnixMilli()
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `{"name":"$pageview","time":%d,"anonymousId":"anon-%06d","userId":"user-%05d","page":{"url":"https://shop.example/products/item-%d?utm_source=newsletter&utm_medium=email","title":"Item %d","referrer":"https://www.search.example/search?q=item"}}`, t, i*7919%100000, i%5000, i%300, i%300)
		case 1, 2:
			fmt.Fprintf(&b, `{"name":"add_to_cart","time":%d,"anonymousId":"anon-%06d","userId":"user-%05d","properties":{"sku":"SKU-%05d","price":%d.99,"quantity":%d,"category":"shoes/running","tags":["sale","new","spring-collection"],"in_stock":true,"warehouse":"berlin-tempelhof-2","list":"search results page 2"}}`, t, i*7919%100000, i%5000, i, i%200, i%3+1)
		default:
			fmt.Fprintf(&b, `{"name":"order_completed","time":%d,"userId":"user-%05d","properties":{"order":"o-%07d","revenue":%d.50,"currency":"EUR","items":%d,"coupon":null}}`, t, i%5000, i, i%500, i%5+1)
		}
	}
	b.WriteString("]}")
	return b.Bytes()
}

// stamp writes a fresh batch id (a v4-shaped UUID from a counter) into the
// placeholder of a body copy.
func stamp(dst, tmpl []byte, at int, worker, seq uint64) []byte {
	dst = append(dst[:0], tmpl...)
	copy(dst[at:], fmt.Sprintf("%08x-%04x-4000-8000-%012x", worker, seq>>48&0xffff, seq&0xffffffffffff))
	return dst
}

// rssKB is the server's resident memory in KB (0 when it cannot be read).
func rssKB(mf *mfserve.Server) int64 {
	n, _ := mf.RSS()
	return n / 1024
}

func run(mfPath, provision, key string, duration time.Duration, conns, events int, floor bool) error {
	data, err := os.MkdirTemp("", "mf-loadgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	mcfg := mfserve.DefaultConfig()
	mcfg.Binary, mcfg.Data, mcfg.Provision = mfPath, filepath.Join(data, "mf"), provision
	mcfg.Args = []string{"--rate-limit-scale", "100000", "--log-level", "warn"}
	mcfg.Stderr = os.Stderr
	mf, err := mfserve.Start(context.Background(), mcfg)
	if err != nil {
		return err
	}
	defer mf.Kill()
	base := mf.Ingest
	idleRSS := rssKB(mf)

	tmpl := body(events, time.Now())
	at := bytes.Index(tmpl, []byte(strings.Repeat("x", 36)))
	fmt.Printf("mf intake load: %d connections, %d-event batches of %d bytes, %s, server idle RSS %d MB\n",
		conns, events, len(tmpl), duration, idleRSS/1024)

	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var accepted, failed atomic.Int64
	var maxRSS atomic.Int64
	lat := make([][]time.Duration, conns)
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if r := rssKB(mf); r > maxRSS.Load() {
					maxRSS.Store(r)
				}
			}
		}
	}()
	start := time.Now()
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, 0, len(tmpl))
			for seq := uint64(0); time.Now().Before(stop); seq++ {
				buf = stamp(buf, tmpl, at, uint64(w), seq)
				req, _ := http.NewRequest("POST", base+"/v1/batch", bytes.NewReader(buf))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[w] = append(lat[w], time.Since(t0))
				var r struct{ Accepted int64 }
				if resp.StatusCode != 202 || json.Unmarshal(out, &r) != nil {
					failed.Add(1)
					continue
				}
				accepted.Add(r.Accepted)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	rate := float64(accepted.Load()) / elapsed.Seconds()
	fmt.Printf("through HTTP: %.0f events/s (%d batches, %d failed), latency p50 %s p99 %s, server peak RSS %d MB\n",
		rate, len(all), failed.Load(), pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), maxRSS.Load()/1024)
	if !floor {
		return nil
	}
	mf.Kill()
	frate, err := measureFloor(tmpl, at, duration, conns, filepath.Join(data, "floor"))
	if err != nil {
		return err
	}
	fmt.Printf("floor (decode + publish, no HTTP): %.0f events/s\nratio HTTP/floor: %.2f\n", frate, rate/frate)
	return nil
}

// measureFloor decodes the same bodies and publishes them to an embedded
// log in this process, as fast as conns goroutines can.
func measureFloor(tmpl []byte, at int, duration time.Duration, conns int, dir string) (float64, error) {
	ctx := context.Background()
	cfg := eventlog.DefaultConfig()
	cfg.Dir = dir
	lg, err := eventlog.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return 0, err
	}
	defer lg.Close()
	pub := lg.Publisher()
	var n atomic.Int64
	stop := time.Now().Add(duration)
	start := time.Now()
	var wg sync.WaitGroup
	var ferr atomic.Value
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, 0, len(tmpl))
			for seq := uint64(0); time.Now().Before(stop); seq++ {
				buf = stamp(buf, tmpl, at, uint64(w), seq)
				b, p := ingest.DecodeBatch(buf, time.Now(), ingest.DecodeOptions{})
				if p != nil {
					ferr.Store(fmt.Errorf("floor body refused: %s", p.Detail))
					return
				}
				msg := message.NewMessage(b.IDText(), append([]byte(nil), buf...))
				if _, err := pub.PublishOnce(ctx, eventlog.TopicBatches, "p:"+b.IDText(), msg); err != nil {
					ferr.Store(err)
					return
				}
				n.Add(int64(b.Len()))
			}
		}(w)
	}
	wg.Wait()
	if e, ok := ferr.Load().(error); ok {
		return 0, e
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
