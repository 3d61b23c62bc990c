package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// browserUA is a browser's User-Agent: a bot's batches are answered but
// not kept.
const browserUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"

// tries is how often a batch is sent before it is given up, as the
// browser client does (ingest/client/browser/mf.mjs, TRIES).
const tries = 4

// Load sends the traffic and keeps its counts. The counters are read by
// the sampler while the senders run.
type Load struct {
	cfg    Config
	target Target
	url    string
	client *http.Client
	pacer  *Pacer

	accepted   atomic.Int64 // events of 202 receipts
	dropped    atomic.Int64 // events 202 receipts did not keep
	partial    atomic.Int64 // accepted events of batches with some dropped
	unanswered atomic.Int64 // events of batches given up without a 202
	rejected   atomic.Int64 // events of batches refused for good (4xx)
	errors     atomic.Int64 // attempts answered otherwise than 202, or not

	mu        sync.Mutex
	sent      Counts // by name, batches accepted whole
	interval  Hist   // latencies since the last sample
	total     Hist   // all latencies
	firstFail string // the first refusal, for the report
}

// NewLoad prepares the senders of cfg against the ingest listener.
func NewLoad(cfg Config, t Target, ingest string) *Load {
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Conns, MaxConnsPerHost: cfg.Conns,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	l := &Load{cfg: cfg, target: t, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	l.url = ingest + "/v1/batch"
	if t.Website {
		l.url += "/" + t.Key
	}
	return l
}

// Run sends from start until stop or until ctx ends, and returns when
// every sender has finished its batch.
func (l *Load) Run(ctx context.Context, start, stop time.Time) {
	burst := max(l.cfg.Conns, int(l.cfg.Rate/float64(l.cfg.Batch)/10)) // 100 ms of batches
	l.pacer = NewPacer(start, SlotInterval(l.cfg.Rate, l.cfg.Batch), burst)
	var wg sync.WaitGroup
	for w := 0; w < l.cfg.Conns; w++ {
		share := l.cfg.Browsers / l.cfg.Conns
		if w < l.cfg.Browsers%l.cfg.Conns {
			share++
		}
		tr := NewTraffic(l.cfg.Seed, uint64(w), share, l.cfg.People, l.cfg.Batch)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.send(ctx, tr, stop, uint64(w))
		}()
	}
	wg.Wait()
	l.client.CloseIdleConnections()
}

// Missed is the number of events the pacer gave up (the rate was not
// kept).
func (l *Load) Missed() int64 {
	if l.pacer == nil {
		return 0
	}
	return l.pacer.Missed() * int64(l.cfg.Batch)
}

func (l *Load) send(ctx context.Context, tr *Traffic, stop time.Time, w uint64) {
	rng := rand.New(rand.NewPCG(l.cfg.Seed, w^0x5eed))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		wait := l.pacer.Take(now)
		if !now.Add(wait).Before(stop) {
			return
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		body, counts := tr.Batch(time.Now())
		l.post(ctx, body, counts, rng)
	}
}

// post sends one batch, again on a network error, 408, 429 or 5xx as the
// browser client does (the same bytes, so the same batch id), and counts
// its receipt.
func (l *Load) post(ctx context.Context, body []byte, counts Counts, rng *rand.Rand) {
	n := counts.Total()
	for attempt := 0; attempt < tries; attempt++ {
		status, retryAfter, resp, took, err := l.postOnce(ctx, body)
		if err == nil {
			l.mu.Lock()
			l.interval.Add(took)
			l.total.Add(took)
			l.mu.Unlock()
		}
		if err == nil && status == http.StatusAccepted {
			var r struct{ Accepted, Dropped int64 }
			if json.Unmarshal(resp, &r) != nil {
				l.fail(fmt.Sprintf("a 202 receipt that does not parse: %s", clip(resp)))
				l.unanswered.Add(n)
				return
			}
			l.accepted.Add(r.Accepted)
			l.dropped.Add(r.Dropped)
			if r.Accepted == n {
				l.mu.Lock()
				for i, c := range counts {
					l.sent[i] += c
				}
				l.mu.Unlock()
			} else {
				l.partial.Add(r.Accepted)
				l.fail(fmt.Sprintf("a receipt kept %d of %d events: %s", r.Accepted, n, clip(resp)))
			}
			return
		}
		l.errors.Add(1)
		if ctx.Err() != nil {
			l.unanswered.Add(n)
			return
		}
		if err == nil && !retryable(status) {
			l.rejected.Add(n)
			l.fail(fmt.Sprintf("%d %s", status, clip(resp)))
			return
		}
		// Full jitter over 100 ms · 2^attempt, or the server's Retry-After.
		wait := time.Duration(rng.Int64N(int64(100*time.Millisecond) << attempt))
		if retryAfter > 0 {
			wait = retryAfter
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	l.unanswered.Add(n)
	l.fail("a batch was given up after " + strconv.Itoa(tries) + " attempts")
}

func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

func (l *Load) postOnce(ctx context.Context, body []byte) (status int, retryAfter time.Duration, resp []byte, took time.Duration, err error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), "POST", l.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, nil, 0, err
	}
	req.Header.Set("User-Agent", browserUA)
	if l.target.Website {
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		if l.target.Origin != "" {
			req.Header.Set("Origin", l.target.Origin)
		}
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+l.target.Key)
	}
	t0 := time.Now()
	r, err := l.client.Do(req)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	resp, err = io.ReadAll(r.Body)
	r.Body.Close()
	took = time.Since(t0)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	if s, e := strconv.Atoi(r.Header.Get("Retry-After")); e == nil && s > 0 {
		retryAfter = time.Duration(min(s, 5)) * time.Second
	}
	return r.StatusCode, retryAfter, resp, took, nil
}

func (l *Load) fail(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstFail == "" {
		l.firstFail = what
	}
}

// takeInterval returns the latencies since the last call and starts a
// new interval.
func (l *Load) takeInterval() Hist {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.interval
	l.interval = Hist{}
	return h
}

// Sent is the events per name of batches accepted whole.
func (l *Load) Sent() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}
