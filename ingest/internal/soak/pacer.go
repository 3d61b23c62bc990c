package main

import (
	"sync"
	"time"
)

// Pacer hands out send slots at a steady rate, as a token bucket: one slot
// per batch, due every interval (batch/rate seconds) from the start. A
// sender takes the next slot and waits until it is due. Slots left untaken
// pile up to a burst of them; beyond it the oldest are given up and
// counted as missed: the senders could not keep the rate (the server was
// slower than the rate, or the senders were starved), and a burst never
// makes up for more than a burst's worth of lateness.
type Pacer struct {
	mu       sync.Mutex
	interval time.Duration
	burst    int64
	next     time.Time // due time of the next slot
	missed   int64     // slots given up
}

// NewPacer paces slots of interval from start, keeping at most burst (>= 1)
// slots that are due but not taken.
func NewPacer(start time.Time, interval time.Duration, burst int) *Pacer {
	return &Pacer{interval: interval, burst: int64(max(burst, 1)), next: start}
}

// SlotInterval is the time between slots of batch events each at rate
// events per second.
func SlotInterval(rate float64, batch int) time.Duration {
	return time.Duration(float64(batch) / rate * float64(time.Second))
}

// Take reserves the next slot at now and returns how long to wait until
// it is due (0 when it is due already).
func (p *Pacer) Take(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Slots due at or before oldest are more than a burst late.
	oldest := now.Add(-time.Duration(p.burst) * p.interval)
	if !p.next.After(oldest) {
		n := int64(oldest.Sub(p.next)/p.interval) + 1
		p.missed += n
		p.next = p.next.Add(time.Duration(n) * p.interval)
	}
	due := p.next
	p.next = p.next.Add(p.interval)
	if due.After(now) {
		return due.Sub(now)
	}
	return 0
}

// Missed is the number of slots given up so far.
func (p *Pacer) Missed() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.missed
}
