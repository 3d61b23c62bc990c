package api

import (
	"net/netip"
	"sync"
	"time"
)

// windowLimiter admits at most quota events per key in a window that opens
// with the key's first event and lasts window (a fixed window per key). It
// is safe for concurrent use; keys whose window has closed are swept.
type windowLimiter struct {
	quota  int
	window time.Duration

	mu        sync.Mutex
	counts    map[string]*windowCount
	lastSweep time.Time
}

type windowCount struct {
	start time.Time
	n     int
}

// limitState is what the rate headers report after a decision.
type limitState struct {
	Quota     int
	Window    time.Duration
	Remaining int
	Reset     time.Duration // until the window closes
	Allowed   bool
}

func newWindowLimiter(quota int, window time.Duration) *windowLimiter {
	return &windowLimiter{quota: quota, window: window, counts: map[string]*windowCount{}}
}

// take counts one event for key at now when the quota allows it.
func (l *windowLimiter) take(key string, now time.Time) limitState {
	return l.decide(key, now, true)
}

// peek reports the state for key without counting.
func (l *windowLimiter) peek(key string, now time.Time) limitState {
	return l.decide(key, now, false)
}

func (l *windowLimiter) decide(key string, now time.Time, count bool) limitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= l.window {
		for k, c := range l.counts {
			if now.Sub(c.start) >= l.window {
				delete(l.counts, k)
			}
		}
		l.lastSweep = now
	}
	c := l.counts[key]
	if c == nil || now.Sub(c.start) >= l.window || now.Before(c.start) {
		if !count {
			return limitState{Quota: l.quota, Window: l.window, Remaining: l.quota, Reset: l.window, Allowed: true}
		}
		c = &windowCount{start: now}
		l.counts[key] = c
	}
	st := limitState{Quota: l.quota, Window: l.window, Reset: c.start.Add(l.window).Sub(now), Allowed: c.n < l.quota}
	if count && st.Allowed {
		c.n++
	}
	st.Remaining = max(l.quota-c.n, 0)
	return st
}

// resetSeconds is Reset rounded up to whole seconds, at least 1.
func (s limitState) resetSeconds() int {
	return max(int((s.Reset+time.Second-1)/time.Second), 1)
}

// networkOf returns the network a caller is counted in for refused
// tokens: the IPv4 address, or the /64 of an IPv6 address. The key is kept
// in memory only.
func networkOf(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is6() {
		p, err := addr.Prefix(64)
		if err == nil {
			return p.String()
		}
	}
	return addr.String()
}
