package ingest

import (
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// limit is one budget of the specification's Limits table: Amount units
// per Per, refilled continuously.
type limit struct {
	Amount float64
	Per    time.Duration
}

// limiter is a set of token buckets, one per key. A bucket refuses only once
// it is spent: a charge larger than what is left still passes and takes the
// bucket below zero, so one big batch is never refused while budget remains.
// Buckets live in shards so that concurrent callers rarely share a lock;
// idle buckets are dropped as they refill to full. With a Share of N live
// ingest processes every bucket holds and refills 1/N of the budget.
type limiter struct {
	lim    limit
	rate   float64 // units per second, the whole budget's
	share  *Share  // nil: this process alone
	seed   maphash.Seed
	shards [64]limiterShard
}

type limiterShard struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
	sweeps  int
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(l limit, share *Share) *limiter {
	lt := &limiter{lim: l, rate: l.Amount / l.Per.Seconds(), share: share, seed: maphash.MakeSeed()}
	for i := range lt.shards {
		lt.shards[i].buckets = make(map[string]*tokenBucket)
	}
	return lt
}

// take charges n units to key at now. It reports whether the request may
// go on and, when it may not, how long until the bucket holds budget again.
func (l *limiter) take(key string, n float64, now time.Time) (bool, time.Duration) {
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	part := 1 / float64(l.share.Processes())
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.buckets[key]
	if !ok {
		b = &tokenBucket{tokens: l.lim.Amount * part, last: now}
		sh.buckets[key] = b
		sh.sweep(l, now, part)
	} else {
		l.refill(b, now, part)
	}
	if b.tokens <= 0 {
		return false, l.wait(b, part)
	}
	b.tokens -= n
	return true, 0
}

// refill adds what the bucket earned since its last charge, up to part of
// the budget; a bucket fuller than that (another process just joined)
// is cut down to it.
func (l *limiter) refill(b *tokenBucket, now time.Time, part float64) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens += el * l.rate * part
		b.last = now
	}
	b.tokens = math.Min(l.lim.Amount*part, b.tokens)
}

// wait is the time until a spent bucket holds budget again, rounded up to
// whole seconds for Retry-After (at least one).
func (l *limiter) wait(b *tokenBucket, part float64) time.Duration {
	secs := math.Ceil((-b.tokens + 1e-9) / (l.rate * part))
	if secs < 1 {
		secs = 1
	}
	return time.Duration(secs) * time.Second
}

// sweep drops buckets that have refilled to full, at most once per 1024
// new buckets of the shard, so memory follows the number of active keys.
func (sh *limiterShard) sweep(l *limiter, now time.Time, part float64) {
	sh.sweeps++
	if sh.sweeps < 1024 {
		return
	}
	sh.sweeps = 0
	for k, b := range sh.buckets {
		l.refill(b, now, part)
		if b.tokens >= l.lim.Amount*part {
			delete(sh.buckets, k)
		}
	}
}

// retryAfterSeconds renders a wait for the Retry-After header.
func retryAfterSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
