package ingest

import "sync/atomic"

// Share is this process's part of the rate budgets when several ingest
// processes serve one deployment: each of N live processes allows 1/N of
// every budget of the Limits table, so that together they allow the
// specification's figure, not N times it. The caller keeps N current (mf
// counts the ingest processes' heartbeats on the log); a nil or unset
// Share is a process alone. Safe for concurrent use.
type Share struct {
	n atomic.Int64
}

// NewShare returns the share of a process alone (N = 1).
func NewShare() *Share {
	s := new(Share)
	s.n.Store(1)
	return s
}

// Set records that n ingest processes are live (this one included); n
// below 1 counts as 1.
func (s *Share) Set(n int) { s.n.Store(int64(max(n, 1))) }

// Processes returns the number of live ingest processes the budgets are
// divided by (at least 1).
func (s *Share) Processes() int {
	if s == nil {
		return 1
	}
	return int(max(s.n.Load(), 1))
}
