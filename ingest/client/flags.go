package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mfhq/mf/evaluator"
)

// flagState is the client's copy of the server flag document.
type flagState struct {
	mu          sync.Mutex
	doc         *document
	lastAttempt time.Time
	lastErr     error
	refreshing  bool
	// stopped is set after a 401 or 403 (wrapping ErrStopped).
	stopped error
	// fetchMu serialises fetches.
	fetchMu sync.Mutex
}

// document is one server flag document as fetched.
type document struct {
	raw    []byte
	etag   string
	parsed *evaluator.Document
	meta   map[string]flagMeta
}

// flagMeta is what the client needs to know of a flag before evaluating
// it: its unit, and whether its rules test segments.
type flagMeta struct {
	unit     string // "b" anonymous id, "p" user id
	segments bool
}

// Facts are what a flag is evaluated against.
type Facts struct {
	// AnonymousID is the browser or device id (the unit of flags with
	// u "b").
	AnonymousID string
	// UserID is the signed-in person's id (the unit of flags with u "p").
	UserID string
	// Properties are the person's or request's properties, JSON values.
	Properties map[string]any
	// Segments is the unit's membership. Nil makes the client look it up
	// (Client.Membership) when the flag's rules test segments; a failed
	// lookup counts as unavailable.
	Segments *Membership
}

// Decision is the result of evaluating one flag.
type Decision struct {
	// Variant is the variant; empty when Reason is "ERROR".
	Variant string
	// Reason is STATIC, TARGETING_MATCH, SPLIT, DEFAULT, DISABLED or ERROR.
	Reason string
	// Rule is the 0-based index of the deciding rule, -1 when none.
	Rule int
	// Value is the variant's value (canonical JSON), nil when none.
	Value json.RawMessage
	// ErrorCode is UNSUPPORTED or NOT_READY when Reason is ERROR.
	ErrorCode string
}

// OK reports whether the decision has a variant (the caller's fallback
// applies otherwise).
func (d Decision) OK() bool { return d.Reason != "ERROR" }

// Evaluate evaluates flag key of the server document for facts, locally.
// The first call fetches the document (and waits for it); later calls
// refresh it in the background once it is older than PollInterval. The
// error is ErrNoDocument (wrapping why) when no document could be had yet,
// ErrFlagNotFound when the document lacks key.
func (c *Client) Evaluate(ctx context.Context, key string, facts Facts) (Decision, error) {
	doc, err := c.current(ctx)
	if doc == nil {
		return Decision{}, err
	}
	f, ok := doc.parsed.Flag(key)
	if !ok {
		return Decision{}, fmt.Errorf("cannot evaluate %q: %w", key, ErrFlagNotFound)
	}
	segs, lookupFailed := facts.Segments, false
	if meta := doc.meta[key]; segs == nil && meta.segments {
		var u Unit
		if meta.unit == "p" {
			u.UserID = facts.UserID
		} else {
			u.AnonymousID = facts.AnonymousID
		}
		if u.id() != "" && evaluator.UsableID(u.id()) {
			m, err := c.Membership(ctx, u)
			if err != nil {
				c.logger.Debug("mf client: segment lookup failed; segments count as unavailable", "flag", key, "err", err)
				lookupFailed = true
			} else {
				segs = &m
			}
		}
	}
	fa, err := evaluator.ParseFacts(factsJSON(facts, segs, lookupFailed))
	if err != nil {
		return Decision{}, fmt.Errorf("cannot evaluate %q: the facts cannot be encoded: %w", key, err)
	}
	r := f.Evaluate(fa)
	d := Decision{Variant: r.Variant, Reason: r.Reason.String(), Rule: r.Rule}
	if r.Value != nil {
		d.Value = append(json.RawMessage(nil), r.Value...)
	}
	if r.Reason == evaluator.ReasonError {
		d.ErrorCode = r.ErrorCode.String()
	}
	return d, nil
}

// Variant returns the variant of flag key for facts, or fallback when the
// flag cannot be evaluated.
func (c *Client) Variant(ctx context.Context, key string, facts Facts, fallback string) string {
	d, err := c.Evaluate(ctx, key, facts)
	if err != nil || !d.OK() {
		return fallback
	}
	return d.Variant
}

// factsJSON encodes facts for evaluator.ParseFacts.
func factsJSON(f Facts, segs *Membership, unavailable bool) []byte {
	m := map[string]any{}
	if f.AnonymousID != "" {
		m["id"] = f.AnonymousID
	}
	if f.UserID != "" {
		m["userId"] = f.UserID
	}
	if f.Properties != nil {
		m["properties"] = f.Properties
	}
	switch {
	case segs != nil:
		in, un := segs.Segments, segs.Unavailable
		if in == nil {
			in = []string{}
		}
		if un == nil {
			un = []string{}
		}
		m["segments"] = map[string]any{"in": in, "unavailable": un}
	case unavailable:
		m["segments"] = "unavailable"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return []byte("{}") // properties that JSON cannot hold
	}
	return b
}

// current returns the document to evaluate with. Without a document it
// fetches one and waits (at most one fetch per MinPollInterval while they
// fail); with one older than PollInterval it starts a background refresh.
func (c *Client) current(ctx context.Context) (*document, error) {
	fs := &c.flags
	fs.mu.Lock()
	doc := fs.doc
	due := c.clock().Sub(fs.lastAttempt) >= c.cfg.PollInterval
	if doc != nil && due && fs.stopped == nil && !fs.refreshing && !c.isClosed() {
		fs.refreshing = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.PollInterval)
			defer cancel()
			if err := c.fetch(ctx, false); err != nil {
				c.logger.Warn("mf client: cannot refresh the flag document; using the last one", "err", err)
			}
			fs.mu.Lock()
			fs.refreshing = false
			fs.mu.Unlock()
		}()
	}
	fs.mu.Unlock()
	if doc != nil {
		return doc, nil
	}
	err := c.fetch(ctx, true)
	fs.mu.Lock()
	doc = fs.doc
	fs.mu.Unlock()
	if doc == nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDocument, err)
	}
	return doc, nil
}

// Refresh fetches the server document now (with If-None-Match when it
// holds one), whatever its age. A failed fetch keeps the last document. A
// 401 or 403 stops the client's fetching: this and later calls return
// ErrStopped. Flag reads refresh by themselves; call Refresh to warm the
// client at start.
func (c *Client) Refresh(ctx context.Context) error {
	return c.fetch(ctx, false)
}

// fetch fetches the document. first is a fetch for a client without a
// document: it is skipped when another fetch got one meanwhile, or when
// the last attempt failed less than MinPollInterval ago.
func (c *Client) fetch(ctx context.Context, first bool) error {
	fs := &c.flags
	fs.fetchMu.Lock()
	defer fs.fetchMu.Unlock()
	fs.mu.Lock()
	prev, stopped := fs.doc, fs.stopped
	now := c.clock()
	if first && prev != nil {
		fs.mu.Unlock()
		return nil
	}
	if first && !fs.lastAttempt.IsZero() && now.Sub(fs.lastAttempt) < MinPollInterval && fs.lastErr != nil {
		err := fs.lastErr
		fs.mu.Unlock()
		return err
	}
	fs.lastAttempt = now
	fs.mu.Unlock()
	if stopped != nil {
		return stopped
	}
	if c.isClosed() {
		return ErrClosed
	}
	doc, err := c.get(ctx, prev)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.lastErr = err
	if errors.Is(err, ErrStopped) {
		fs.stopped = err
	}
	if doc != nil {
		fs.doc = doc
	}
	return err
}

// get sends one GET /v1/flags. It returns the new document, or nil when
// prev is current (304) or on failure.
func (c *Client) get(ctx context.Context, prev *document) (*document, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/flags", nil)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.etag != "" {
		req.Header.Set("If-None-Match", prev.etag)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot fetch the flag document: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && prev != nil:
		return nil, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%w: %w", ErrStopped, readStatusError(resp))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("cannot fetch the flag document: %w", readStatusError(resp))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("cannot read the flag document: %w", err)
	}
	return parseDocument(raw, resp.Header.Get("ETag"))
}

// parseDocument reads a server document and what the client needs of
// each flag.
func parseDocument(raw []byte, etag string) (*document, error) {
	parsed, err := evaluator.ParseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("the flag document is unreadable; keeping the last one: %w", err)
	}
	var env struct {
		Flags map[string]struct {
			U string `json:"u"`
			R []struct {
				If []json.RawMessage `json:"if"`
			} `json:"r"`
		} `json:"flags"`
	}
	meta := map[string]flagMeta{}
	if json.Unmarshal(raw, &env) == nil {
		for k, f := range env.Flags {
			m := flagMeta{unit: f.U}
			for _, r := range f.R {
				for _, cond := range r.If {
					var head []json.RawMessage
					if json.Unmarshal(cond, &head) == nil && len(head) > 0 && string(head[0]) == `"s"` {
						m.segments = true
					}
				}
			}
			meta[k] = m
		}
	}
	return &document{raw: raw, etag: etag, parsed: parsed, meta: meta}, nil
}

// readStatusError reads an error answer.
func readStatusError(resp *http.Response) *StatusError {
	e := &StatusError{Status: resp.StatusCode}
	var body struct {
		Code    string `json:"code"`
		Detail  string `json:"detail"`
		Message string `json:"message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &body) == nil {
		e.Code, e.Detail = body.Code, body.Detail
		if e.Detail == "" {
			e.Detail = body.Message
		}
	}
	return e
}

// DocumentETag returns the ETag of the document the client holds ("" for
// none).
func (c *Client) DocumentETag() string {
	c.flags.mu.Lock()
	defer c.flags.mu.Unlock()
	if c.flags.doc == nil {
		return ""
	}
	return c.flags.doc.etag
}

// Keys returns the flag keys of the document the client holds, sorted.
func (c *Client) Keys() []string {
	c.flags.mu.Lock()
	defer c.flags.mu.Unlock()
	if c.flags.doc == nil {
		return nil
	}
	return append([]string(nil), c.flags.doc.parsed.Keys()...)
}
