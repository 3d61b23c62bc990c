package processor

import "time"

// clockOr returns c, or the wall clock when c is nil: the one place the
// processor reads the time itself. Every other reading goes through the
// clock its Deps, ReplayDeps or SegmentsConfig were given, so that a test
// can move it (a test clock must still advance: intervals, back-offs and
// leases are measured on it).
func clockOr(c func() time.Time) func() time.Time {
	if c == nil {
		return time.Now
	}
	return c
}

// now is the processor's clock (Deps.Clock).
func (p *Processor) now() time.Time { return p.deps.Clock() }
