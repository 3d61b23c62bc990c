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
)

// maxUnitsPerLookup is the most units of one POST /v1/flags/segments.
const maxUnitsPerLookup = 100

// Unit is a unit of a segment lookup: a signed-in person (UserID) or a
// browser or device (AnonymousID). Set exactly one.
type Unit struct {
	UserID      string
	AnonymousID string
}

func (u Unit) id() string {
	if u.UserID != "" {
		return u.UserID
	}
	return u.AnonymousID
}

func (u Unit) key() string {
	if u.UserID != "" {
		return "u:" + u.UserID
	}
	return "a:" + u.AnonymousID
}

// Membership is a unit's membership in the segments the server document
// tests.
type Membership struct {
	// Segments lists the refs the unit is in.
	Segments []string `json:"segments"`
	// Unavailable lists the refs that cannot be answered: conditions on
	// them are false, for both "in" and "not in".
	Unavailable []string `json:"unavailable"`
	// RefreshedAt is when the oldest answered segment was last built,
	// epoch milliseconds; nil when none was answered.
	RefreshedAt *int64 `json:"refreshedAt"`
	// Stale is true when RefreshedAt is older than the server's freshness
	// limit.
	Stale bool `json:"stale"`
}

// segmentBatcher combines the lookups of one tick into requests of at most
// 100 units and caches answers for SegmentCacheTTL.
type segmentBatcher struct {
	c       *Client
	mu      sync.Mutex
	cache   map[string]cachedMembership
	pending map[string]*lookupCall
	order   []Unit // pending units in arrival order
	stopped error
}

type cachedMembership struct {
	m       Membership
	expires time.Time
}

type lookupCall struct {
	done chan struct{}
	m    Membership
	err  error
}

func (b *segmentBatcher) init(c *Client) {
	b.c = c
	b.cache = map[string]cachedMembership{}
	b.pending = map[string]*lookupCall{}
}

// Membership returns a unit's segment membership: from the cache when it
// was looked up less than SegmentCacheTTL ago, else through one request
// shared with the other lookups of the same tick (SegmentTick). Lookups
// are charged per unit by the service.
func (c *Client) Membership(ctx context.Context, u Unit) (Membership, error) {
	if (u.UserID == "") == (u.AnonymousID == "") {
		return Membership{}, errors.New("mf client: a unit has exactly one of UserID and AnonymousID")
	}
	b := &c.segs
	k := u.key()
	b.mu.Lock()
	if e, ok := b.cache[k]; ok && c.clock().Before(e.expires) {
		b.mu.Unlock()
		return e.m, nil
	}
	if b.stopped != nil {
		err := b.stopped
		b.mu.Unlock()
		return Membership{}, err
	}
	call, ok := b.pending[k]
	if !ok {
		call = &lookupCall{done: make(chan struct{})}
		b.pending[k] = call
		b.order = append(b.order, u)
		if len(b.order) == 1 {
			time.AfterFunc(c.cfg.SegmentTick, b.flush)
		}
	}
	b.mu.Unlock()
	select {
	case <-call.done:
		return call.m, call.err
	case <-ctx.Done():
		return Membership{}, ctx.Err()
	}
}

// flush sends the tick's pending lookups, 100 units a request.
func (b *segmentBatcher) flush() {
	b.mu.Lock()
	units, calls := b.order, b.pending
	b.order, b.pending = nil, map[string]*lookupCall{}
	b.mu.Unlock()
	for len(units) > 0 {
		n := min(len(units), maxUnitsPerLookup)
		part := units[:n]
		units = units[n:]
		ms, err := b.lookup(part)
		now := b.c.clock()
		b.mu.Lock()
		if errors.Is(err, ErrStopped) {
			b.stopped = err
		}
		for i, u := range part {
			call := calls[u.key()]
			if err != nil {
				call.err = err
			} else {
				call.m = ms[i]
				if ttl := b.c.cfg.SegmentCacheTTL; ttl > 0 {
					b.cache[u.key()] = cachedMembership{m: ms[i], expires: now.Add(ttl)}
				}
			}
			close(call.done)
		}
		b.sweep(now)
		b.mu.Unlock()
	}
}

// sweep drops expired cache entries once the cache has grown.
func (b *segmentBatcher) sweep(now time.Time) {
	if len(b.cache) < 10000 {
		return
	}
	for k, e := range b.cache {
		if !now.Before(e.expires) {
			delete(b.cache, k)
		}
	}
}

// lookup sends one POST /v1/flags/segments.
func (b *segmentBatcher) lookup(units []Unit) ([]Membership, error) {
	c := b.c
	type unitJSON struct {
		UserID      string `json:"userId,omitempty"`
		AnonymousID string `json:"anonymousId,omitempty"`
	}
	req := struct {
		Units []unitJSON `json:"units"`
	}{Units: make([]unitJSON, len(units))}
	for i, u := range units {
		req.Units[i] = unitJSON{UserID: u.UserID, AnonymousID: u.AnonymousID}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("cannot encode a segment lookup: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hreq, err := c.newRequest(ctx, http.MethodPost, "/v1/flags/segments", body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("cannot look segments up: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%w: %w", ErrStopped, readStatusError(resp))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("cannot look segments up: %w", readStatusError(resp))
	}
	var out struct {
		Units []Membership `json:"units"`
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("cannot read a segment lookup answer: %w", err)
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Units) != len(units) {
		return nil, fmt.Errorf("cannot read a segment lookup answer: %d units for %d asked (%v)", len(out.Units), len(units), err)
	}
	return out.Units, nil
}
