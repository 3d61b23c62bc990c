// Package client is the Go client of the mf /v1 service, for servers. It
// reads the server flag document (GET /v1/flags, with If-None-Match) and
// evaluates flags locally with package evaluator; it looks segment
// membership up (POST /v1/flags/segments), combining the lookups of one
// tick into one request and caching answers briefly; and it sends events
// in batches (POST /v1/batch) with the retry policy of the specification:
// full-jitter backoff, Retry-After, the same bytes and batch id on every
// attempt, and batch ids derived from idempotency keys.
//
// A Client refreshes the document when a flag is read and the document is
// older than Config.PollInterval (30 s by default, never under 10 s),
// keeps evaluating with the last document when a refresh fails, and after
// a 401 or 403 stops fetching until it is built again.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sentinel errors of the package.
var (
	// ErrClosed: the client has been closed.
	ErrClosed = errors.New("mf client closed")
	// ErrStopped: the service answered 401 or 403; the client stopped
	// fetching until it is built again (the last document is kept).
	ErrStopped = errors.New("mf client stopped after the service refused its key")
	// ErrNoDocument: no flag document has been fetched yet.
	ErrNoDocument = errors.New("no flag document yet")
	// ErrFlagNotFound: the document has no flag with that key.
	ErrFlagNotFound = errors.New("flag not found in the document")
	// ErrQueueFull: Config.MaxQueuedEvents events wait already; the event
	// was dropped.
	ErrQueueFull = errors.New("event queue full")
	// ErrGaveUp: a batch was not accepted within Config.MaxAttempts
	// attempts. It may or may not be stored; resending it under the same
	// batch id is safe.
	ErrGaveUp = errors.New("batch not accepted after the last attempt")
)

// Config configures a Client. Start from DefaultConfig.
type Config struct {
	// BaseURL is the service's address, e.g. "http://127.0.0.1:8080"
	// (the /v1 paths are appended).
	BaseURL string
	// SecretKey is the secret key of a server source. Keep it on servers.
	SecretKey string
	// HTTPClient sends the requests. Default: a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// PollInterval is how old the flag document may get before a flag
	// read refreshes it (in the background). Default 30 s; at least 10 s.
	PollInterval time.Duration
	// Mode is the collection mode of batches: "full" (default) or
	// "consentless".
	Mode string
	// SDK is sent as context.sdk, "name/version". Default "mf-go/1".
	SDK string
	// FlushInterval is how long a tracked event waits at most before it
	// is sent. Default 1 s.
	FlushInterval time.Duration
	// MaxBatchEvents is the most events of one batch (1 to 1,000); a full
	// batch is sent at once. Default 500.
	MaxBatchEvents int
	// MaxQueuedEvents is the most events waiting to be sent; Track drops
	// events beyond it with ErrQueueFull. Default 10,000.
	MaxQueuedEvents int
	// MaxAttempts is how many times a batch is sent before giving up.
	// Default 5.
	MaxAttempts int
	// RetryBase and RetryCap shape the backoff: before retry n (0-based)
	// the client waits a random time between 0 and min(RetryCap,
	// RetryBase × 2^n), unless the answer (429, 503) carried Retry-After.
	// Defaults 500 ms and 30 s.
	RetryBase, RetryCap time.Duration
	// SegmentTick is how long a segment lookup waits for others to share
	// its request (at most 100 units each). Default 10 ms.
	SegmentTick time.Duration
	// SegmentCacheTTL is how long a unit's membership is reused. Default
	// 10 s.
	SegmentCacheTTL time.Duration
	// Logger receives what the client cannot report to a caller (failed
	// background refreshes, dropped batches). Default: discarded.
	Logger *slog.Logger
	// Clock is the time source; nil means time.Now.
	Clock func() time.Time
}

// DefaultConfig returns the defaults for a service at baseURL and a
// secret key.
func DefaultConfig(baseURL, secretKey string) Config {
	return Config{
		BaseURL:         baseURL,
		SecretKey:       secretKey,
		PollInterval:    30 * time.Second,
		Mode:            "full",
		SDK:             "mf-go/1",
		FlushInterval:   time.Second,
		MaxBatchEvents:  500,
		MaxQueuedEvents: 10000,
		MaxAttempts:     5,
		RetryBase:       500 * time.Millisecond,
		RetryCap:        30 * time.Second,
		SegmentTick:     10 * time.Millisecond,
		SegmentCacheTTL: 10 * time.Second,
	}
}

// MinPollInterval is the shortest PollInterval (the specification: never
// more often than every 10 seconds).
const MinPollInterval = 10 * time.Second

// Validate reports the first setting that cannot work, and how to fix it.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("mf client config: BaseURL %q must be an http or https address such as http://127.0.0.1:8080", c.BaseURL)
	case c.SecretKey == "":
		return errors.New("mf client config: SecretKey is empty; use the secret key of a server source")
	case c.PollInterval < MinPollInterval:
		return fmt.Errorf("mf client config: PollInterval must be at least %s, not %s", MinPollInterval, c.PollInterval)
	case c.Mode != "full" && c.Mode != "consentless":
		return fmt.Errorf("mf client config: Mode must be \"full\" or \"consentless\", not %q", c.Mode)
	case !validSDK(c.SDK):
		return fmt.Errorf("mf client config: SDK must be name/version (name 1 to 64 characters without /, version 1 to 32), not %q", c.SDK)
	case c.FlushInterval <= 0:
		return errors.New("mf client config: FlushInterval must be positive")
	case c.MaxBatchEvents < 1 || c.MaxBatchEvents > 1000:
		return fmt.Errorf("mf client config: MaxBatchEvents must be 1 to 1000, not %d", c.MaxBatchEvents)
	case c.MaxQueuedEvents < c.MaxBatchEvents:
		return fmt.Errorf("mf client config: MaxQueuedEvents must be at least MaxBatchEvents (%d), not %d", c.MaxBatchEvents, c.MaxQueuedEvents)
	case c.MaxAttempts < 1:
		return fmt.Errorf("mf client config: MaxAttempts must be at least 1, not %d", c.MaxAttempts)
	case c.RetryBase <= 0 || c.RetryCap < c.RetryBase:
		return errors.New("mf client config: RetryBase must be positive and RetryCap at least RetryBase")
	case c.SegmentTick <= 0 || c.SegmentCacheTTL < 0:
		return errors.New("mf client config: SegmentTick must be positive and SegmentCacheTTL not negative")
	}
	return nil
}

func validSDK(s string) bool {
	name, version, ok := strings.Cut(s, "/")
	return ok && len([]rune(name)) >= 1 && len([]rune(name)) <= 64 &&
		len([]rune(version)) >= 1 && len([]rune(version)) <= 32 && !strings.Contains(version, "/")
}

// Client talks to the /v1 service for one server source. It is safe for
// concurrent use. Close it to send the events still queued.
type Client struct {
	cfg    Config
	http   *http.Client
	base   string
	logger *slog.Logger
	clock  func() time.Time
	// sleep waits d or until ctx ends (tests shorten it).
	sleep func(ctx context.Context, d time.Duration) error
	// jitter returns a random duration in [0, max] (full jitter).
	jitter func(max time.Duration) time.Duration

	flags flagState
	segs  segmentBatcher
	ev    eventQueue

	closeOnce sync.Once
	closing   chan struct{}
	done      chan struct{}
}

// New builds a Client. It fetches nothing until a flag is read (or
// Refresh is called).
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:     cfg,
		http:    cfg.HTTPClient,
		base:    strings.TrimRight(cfg.BaseURL, "/"),
		logger:  cfg.Logger,
		clock:   cfg.Clock,
		sleep:   sleepCtx,
		jitter:  func(max time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(max) + 1)) },
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 10 * time.Second}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	c.segs.init(c)
	c.ev.init(c)
	go c.ev.run()
	return c, nil
}

// Close sends the events still queued (until ctx ends) and stops the
// client. Later calls fail with ErrClosed.
func (c *Client) Close(ctx context.Context) error {
	var err error
	c.closeOnce.Do(func() {
		err = c.Flush(ctx)
		close(c.closing)
		<-c.done
	})
	return err
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StatusError is an answer of the service that the client does not retry
// (or stopped retrying).
type StatusError struct {
	Status int
	// Code and Detail are the error body's, when it had them.
	Code, Detail string
}

func (e *StatusError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("mf service answered %d %s: %s", e.Status, e.Code, e.Detail)
	}
	return fmt.Sprintf("mf service answered %d", e.Status)
}

// newRequest builds an authenticated request to path.
func (c *Client) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("cannot build a request to %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.SecretKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.cfg.SDK)
	return req, nil
}
