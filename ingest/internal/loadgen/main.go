// Command loadgen is the whole-system intake benchmark (go tool task
// bench:ingest): it starts a real `mf serve` on a fresh data directory,
// sends 1,000-event batches (~300 KB) to POST /v1/batch over loopback from
// this separate process, and reports events/s, p50/p99 latency and the
// server's peak RSS. In the same run it measures a floor: the same bodies
// only decoded and published to an embedded log in this process, without
// HTTP, and prints the ratio of the two.
//
// With -target it starts nothing and loads an mf ingest already running
// there instead (bench:cluster drives it so against a NATS cluster); with
// -answers it also prints a line per try (see printAnswer), for a caller
// that measures around events of its own, such as a node's death.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/ingest/internal/mfserve"
	"github.com/mfhq/mf/storage/eventlog"
)

// config is the flags.
type config struct {
	MF, Provision, Key string
	Target             string
	Duration           time.Duration
	Conns, Events      int
	Shape              string
	Floor              bool
	Retry, Answers     bool
	FirstWorker        int
}

func main() {
	var c config
	flag.StringVar(&c.MF, "mf", "bin/mf", "path of the mf binary")
	flag.StringVar(&c.Provision, "provision", "docs/demo-provision.json", "provisioning file with the server key")
	flag.StringVar(&c.Key, "key", "mf_demosrv1_Server-Secret_1", "secret key of a server source in the provisioning file")
	flag.StringVar(&c.Target, "target", "", "base URL of a running mf ingest to load instead of starting mf serve (no floor then)")
	flag.DurationVar(&c.Duration, "duration", 20*time.Second, "how long to send")
	flag.IntVar(&c.Conns, "conns", 8, "concurrent connections")
	flag.IntVar(&c.Events, "events", 1000, "events per batch")
	flag.StringVar(&c.Shape, "shape", shapeMix, "batches: mix (a server SDK's mix of events) or people (page views of one browser a batch, named by the batch id)")
	flag.BoolVar(&c.Floor, "floor", true, "also measure the floor (decode and publish, no HTTP)")
	flag.BoolVar(&c.Retry, "retry", false, "resend a batch not answered 202, with its id, until it is")
	flag.IntVar(&c.FirstWorker, "first-worker", 0, "number of the first connection: batch ids hold it, so a run with another one sends batches no earlier run sent")
	flag.BoolVar(&c.Answers, "answers", false, "print a line per try: answer SENT_UNIX_NS DONE_UNIX_NS STATUS ACCEPTED_EVENTS")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// rssKB is the server's resident memory in KB (0 when it cannot be read).
func rssKB(mf *mfserve.Server) int64 {
	n, _ := mf.RSS()
	return n / 1024
}

func run(c config) error {
	if c.Conns < 1 || c.Events < 1 || c.Events > 1000 || c.Duration <= 0 {
		return errors.New("-conns must be at least 1, -events 1 to 1000 and -duration positive")
	}
	b, err := body(c.Shape, c.Events, time.Now())
	if err != nil {
		return err
	}
	tmpl := newTemplate(b)
	if c.Target != "" {
		return runTarget(c, tmpl)
	}
	data, err := os.MkdirTemp("", "mf-loadgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	mcfg := mfserve.DefaultConfig()
	mcfg.Binary, mcfg.Data, mcfg.Provision = c.MF, filepath.Join(data, "mf"), c.Provision
	mcfg.Args = []string{"--rate-limit-scale", "100000", "--log-level", "warn"}
	mcfg.Stderr = os.Stderr
	mf, err := mfserve.Start(context.Background(), mcfg)
	if err != nil {
		return err
	}
	defer mf.Kill()
	idleRSS := rssKB(mf)
	fmt.Printf("mf intake load: %d connections, %d-event batches of %d bytes, %s, server idle RSS %d MB\n",
		c.Conns, c.Events, len(tmpl.body), c.Duration, idleRSS/1024)

	var maxRSS atomic.Int64
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
	var sum summary
	start := time.Now()
	drive(load{URL: mf.Ingest, Key: c.Key, Tmpl: tmpl, Conns: c.Conns, Duration: c.Duration, Retry: c.Retry, RetryPause: 50 * time.Millisecond},
		func(_ int, a answer) { sum.add(a) })
	elapsed := time.Since(start)
	close(done)
	rate := sum.print(elapsed)
	fmt.Printf("server peak RSS %d MB\n", maxRSS.Load()/1024)
	if !c.Floor {
		return nil
	}
	mf.Kill()
	frate, err := measureFloor(tmpl, c.Duration, c.Conns, filepath.Join(data, "floor"))
	if err != nil {
		return err
	}
	fmt.Printf("floor (decode + publish, no HTTP): %.0f events/s\nratio HTTP/floor: %.2f\n", frate, rate/frate)
	return nil
}

// runTarget loads a running mf ingest.
func runTarget(c config, tmpl template) error {
	fmt.Printf("mf intake load on %s: %d connections, %d-event batches (%s) of %d bytes, %s\n",
		c.Target, c.Conns, c.Events, c.Shape, len(tmpl.body), c.Duration)
	var sum summary
	var out sync.Mutex
	start := time.Now()
	drive(load{URL: c.Target, Key: c.Key, Tmpl: tmpl, Conns: c.Conns, FirstWorker: c.FirstWorker, Duration: c.Duration, Retry: c.Retry, RetryPause: 50 * time.Millisecond},
		func(_ int, a answer) {
			sum.add(a)
			if c.Answers {
				out.Lock()
				printAnswer(a)
				out.Unlock()
			}
		})
	sum.print(time.Since(start))
	return nil
}

// printAnswer prints a try as "answer SENT DONE STATUS ACCEPTED": the
// times in Unix nanoseconds, the status 0 for a failed request, the
// events a 202 accepted.
func printAnswer(a answer) {
	fmt.Printf("answer %d %d %d %d\n", a.Sent.UnixNano(), a.Done.UnixNano(), a.Status, a.Accepted)
}

// summary adds up the answers.
type summary struct {
	mu       sync.Mutex
	lat      []time.Duration
	accepted int64
	failed   int
	lastErr  error
}

func (s *summary) add(a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.Status != 0 {
		s.lat = append(s.lat, a.Done.Sub(a.Sent))
	}
	if a.Status == 202 {
		s.accepted += a.Accepted
		return
	}
	s.failed++
	if a.Err != nil {
		s.lastErr = a.Err
	}
}

// print prints events/s and latency and returns the events/s.
func (s *summary) print(elapsed time.Duration) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.Sort(s.lat)
	pct := func(p float64) time.Duration {
		if len(s.lat) == 0 {
			return 0
		}
		return s.lat[min(len(s.lat)-1, int(p*float64(len(s.lat))))]
	}
	rate := float64(s.accepted) / elapsed.Seconds()
	fmt.Printf("through HTTP: %.0f events/s (%d answers, %d failed), latency p50 %s p99 %s\n",
		rate, len(s.lat), s.failed, pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	if s.lastErr != nil {
		fmt.Printf("last failure: %v\n", s.lastErr)
	}
	return rate
}

// measureFloor decodes the same bodies and publishes them to an embedded
// log in this process, as fast as conns goroutines can.
func measureFloor(tmpl template, duration time.Duration, conns int, dir string) (float64, error) {
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
			buf := make([]byte, 0, len(tmpl.body))
			for seq := uint64(0); time.Now().Before(stop); seq++ {
				buf = tmpl.stamp(buf, uint64(w), seq)
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
