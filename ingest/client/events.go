package client

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// Event is one analytics event (specification, "Event").
type Event struct {
	// Name is the event name: 1 to 128 characters; a leading $ only for
	// the names the specification defines.
	Name string
	// Time is when it happened; zero: when the batch is sent.
	Time time.Time
	// ID is the event's UUID; empty: the server derives a stable one.
	ID string
	// AnonymousID, UserID and SessionID identify the browser or device,
	// the person and the visit (full mode only).
	AnonymousID, UserID, SessionID string
	// Properties are the event's properties (at most 64 top-level keys,
	// 32,768 bytes as JSON).
	Properties map[string]any
}

// Receipt is the service's answer to a stored batch.
type Receipt struct {
	Batch    string `json:"batch"`
	Accepted int    `json:"accepted"`
	Dropped  int    `json:"dropped"`
	Reason   string `json:"reason,omitempty"`
}

type eventJSON struct {
	Name        string         `json:"name"`
	Time        *int64         `json:"time,omitempty"`
	ID          string         `json:"id,omitempty"`
	AnonymousID string         `json:"anonymousId,omitempty"`
	UserID      string         `json:"userId,omitempty"`
	SessionID   string         `json:"sessionId,omitempty"`
	Properties  map[string]any `json:"properties,omitempty"`
}

type batchJSON struct {
	V       int               `json:"v"`
	Batch   string            `json:"batch"`
	Mode    string            `json:"mode"`
	SentAt  int64             `json:"sentAt"`
	Context map[string]string `json:"context"`
	Events  []eventJSON       `json:"events"`
}

// eventQueue collects tracked events and sends them in batches from one
// goroutine.
type eventQueue struct {
	c      *Client
	mu     sync.Mutex
	events []Event
	// kick asks the sender to send now; flushes are Flush calls waiting.
	kick    chan struct{}
	flushes chan chan error
}

func (q *eventQueue) init(c *Client) {
	q.c = c
	q.kick = make(chan struct{}, 1)
	q.flushes = make(chan chan error)
}

// Track queues an event; it is sent within FlushInterval, or at once when
// MaxBatchEvents are waiting. It fails with ErrQueueFull when
// MaxQueuedEvents wait already (the event is dropped) and with ErrClosed
// after Close. Use SendBatch to know the outcome of a batch.
func (c *Client) Track(ev Event) error {
	if c.isClosed() {
		return ErrClosed
	}
	q := &c.ev
	q.mu.Lock()
	if len(q.events) >= c.cfg.MaxQueuedEvents {
		q.mu.Unlock()
		return ErrQueueFull
	}
	q.events = append(q.events, ev)
	full := len(q.events) >= c.cfg.MaxBatchEvents
	q.mu.Unlock()
	if full {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Flush sends every queued event now and returns when they were sent (or
// given up on), or when ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	if c.isClosed() {
		return ErrClosed
	}
	done := make(chan error, 1)
	select {
	case c.ev.flushes <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the sender goroutine.
func (q *eventQueue) run() {
	c := q.c
	defer close(c.done)
	t := time.NewTicker(c.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-t.C:
			q.sendQueued(context.Background())
		case <-q.kick:
			q.sendQueued(context.Background())
		case done := <-q.flushes:
			done <- q.sendQueued(context.Background())
		}
	}
}

// sendQueued sends the queued events in batches of MaxBatchEvents; a batch
// that is given up on is logged and dropped.
func (q *eventQueue) sendQueued(ctx context.Context) error {
	c := q.c
	var errs []error
	for {
		q.mu.Lock()
		n := min(len(q.events), c.cfg.MaxBatchEvents)
		batch := q.events[:n:n]
		q.events = q.events[n:]
		q.mu.Unlock()
		if n == 0 {
			return errors.Join(errs...)
		}
		if _, err := c.SendBatch(ctx, batch, ""); err != nil {
			c.logger.Error("mf client: a batch of events was dropped", "events", n, "err", err)
			errs = append(errs, err)
		}
	}
}

// SendBatch sends events as one batch and returns the receipt, retrying as
// the specification says: on 408, 429, 5xx, network errors and timeouts,
// with the byte-identical body and batch id, after Retry-After (429, 503)
// or a full-jitter backoff, at most MaxAttempts times. A non-empty
// idempotencyKey derives the batch id (DerivedBatchID), so sending the
// same key again — from any process — is stored once; without one the
// batch id is random.
func (c *Client) SendBatch(ctx context.Context, events []Event, idempotencyKey string) (Receipt, error) {
	if len(events) == 0 || len(events) > 1000 {
		return Receipt{}, fmt.Errorf("mf client: a batch holds 1 to 1000 events, not %d", len(events))
	}
	id := records.NewUUIDv4().String()
	if idempotencyKey != "" {
		id = DerivedBatchID(idempotencyKey)
	}
	b := batchJSON{V: 1, Batch: id, Mode: c.cfg.Mode, SentAt: c.clock().UnixMilli(),
		Context: map[string]string{"sdk": c.cfg.SDK}, Events: make([]eventJSON, len(events))}
	for i, ev := range events {
		e := eventJSON{Name: ev.Name, ID: ev.ID, AnonymousID: ev.AnonymousID, UserID: ev.UserID,
			SessionID: ev.SessionID, Properties: ev.Properties}
		if !ev.Time.IsZero() {
			ms := ev.Time.UnixMilli()
			e.Time = &ms
		}
		b.Events[i] = e
	}
	body, err := json.Marshal(b)
	if err != nil {
		return Receipt{}, fmt.Errorf("mf client: cannot encode batch %s: %w", id, err)
	}
	return c.post(ctx, id, body)
}

// post sends one batch body until it is answered for good.
func (c *Client) post(ctx context.Context, id string, body []byte) (Receipt, error) {
	var last error
	for attempt := 0; ; attempt++ {
		rec, wait, err := c.postOnce(ctx, body)
		if err == nil {
			return rec, nil
		}
		var serr *StatusError
		if errors.As(err, &serr) && !retryable(serr.Status) {
			return Receipt{}, fmt.Errorf("batch %s refused: %w", id, err)
		}
		last = err
		if ctx.Err() != nil {
			return Receipt{}, fmt.Errorf("batch %s not sent: %w", id, ctx.Err())
		}
		if attempt+1 >= c.cfg.MaxAttempts {
			break
		}
		if wait <= 0 {
			wait = c.jitter(backoff(c.cfg.RetryBase, c.cfg.RetryCap, attempt))
		}
		if err := c.sleep(ctx, wait); err != nil {
			return Receipt{}, fmt.Errorf("batch %s not sent: %w", id, err)
		}
	}
	return Receipt{}, fmt.Errorf("batch %s: %w after %d attempts: %w", id, ErrGaveUp, c.cfg.MaxAttempts, last)
}

// postOnce sends the body once. It returns the receipt of a 202; a
// *StatusError for another answer, with the Retry-After wait of a 429 or
// 503; or the network error.
func (c *Client) postOnce(ctx context.Context, body []byte) (Receipt, time.Duration, error) {
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/batch", body)
	if err != nil {
		return Receipt{}, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Receipt{}, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		var r Receipt
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err != nil {
			// Accepted, but the receipt is unreadable: the batch is
			// stored; resending it would be answered with the same receipt.
			return Receipt{}, 0, fmt.Errorf("cannot read the receipt: %w", err)
		}
		return r, 0, nil
	}
	var wait time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		wait = retryAfter(resp.Header.Get("Retry-After"), c.clock())
	}
	return Receipt{}, wait, readStatusError(resp)
}

// retryable reports whether a status is retried: 408, 429 and 5xx.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// backoff is the upper bound of the wait before retry n (0-based):
// min(cap, base × 2^n).
func backoff(base, cap time.Duration, n int) time.Duration {
	if n >= 62 {
		return cap
	}
	d := base << n
	if d <= 0 || d > cap {
		return cap
	}
	return d
}

// retryAfter reads Retry-After: seconds or an HTTP date; 0 when absent or
// unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// DerivedBatchID is the batch id derived from a caller's idempotency key
// (specification, "Derived batch ids"): the first 16 bytes of SHA-256 of
// "svc:batch:" + key, with the version and variant bits set, as a
// lower-case UUID. The key is used exactly as given; it must not be empty
// (SendBatch draws a random id for an empty key).
func DerivedBatchID(key string) string {
	sum := sha256.Sum256([]byte("svc:batch:" + key))
	var u records.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}
