package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The processor's log lines the restart measurement reads
// (processor/processor.go).
const (
	msgRebuilt   = "project state rebuilt from its tables"
	msgCommitted = "committed"
)

// restartLog is a slog handler that passes every record on to another
// handler (when that one takes its level) and keeps what the processor
// says about one project's rebuild and commits: the restart
// measurement's load time and events folded.
type restartLog struct {
	inner   slog.Handler
	project string
	st      *restartLogState
}

type restartLogState struct {
	mu         sync.Mutex
	loadAt     time.Time
	load       time.Duration
	loadEvents int64
	loadHow    string
	commits    []loggedCommit
}

// loggedCommit is one "committed" line: the checkpoint's log position,
// when it was logged, how long the commit took and its Flush of them.
type loggedCommit struct {
	seq         uint64
	at          time.Time
	took, flush time.Duration
}

func newRestartLog(inner slog.Handler, project string) *restartLog {
	return &restartLog{inner: inner, project: project, st: &restartLogState{}}
}

// Enabled takes debug records too: the processor logs its commits at
// debug level.
func (h *restartLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.inner.Enabled(ctx, l)
}

func (h *restartLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == msgRebuilt || r.Message == msgCommitted {
		h.keep(r)
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *restartLog) keep(r slog.Record) {
	var project string
	var events int64
	var how string
	var took, flush time.Duration
	var seq uint64
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch a.Key {
		case "project":
			project = v.String()
		case "how":
			how = v.String()
		case "events":
			if v.Kind() == slog.KindInt64 {
				events = v.Int64()
			}
		case "took":
			if v.Kind() == slog.KindDuration {
				took = v.Duration()
			}
		case "flush":
			if v.Kind() == slog.KindDuration {
				flush = v.Duration()
			}
		case "seq":
			switch v.Kind() {
			case slog.KindUint64:
				seq = v.Uint64()
			case slog.KindInt64:
				seq = uint64(max(v.Int64(), 0))
			}
		}
		return true
	})
	if project != h.project {
		return
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	switch r.Message {
	case msgRebuilt:
		if h.st.loadAt.IsZero() {
			h.st.loadAt, h.st.load, h.st.loadEvents, h.st.loadHow = r.Time, took, events, how
		}
	case msgCommitted:
		h.st.commits = append(h.st.commits, loggedCommit{seq: seq, at: r.Time, took: took, flush: flush})
	}
}

func (h *restartLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &restartLog{inner: h.inner.WithAttrs(as), project: h.project, st: h.st}
}

func (h *restartLog) WithGroup(name string) slog.Handler {
	return &restartLog{inner: h.inner.WithGroup(name), project: h.project, st: h.st}
}

// restartLines is a copy of what was kept.
type restartLines struct {
	loadAt     time.Time
	load       time.Duration
	loadEvents int64
	loadHow    string
	commits    []loggedCommit
}

func (h *restartLog) result() restartLines {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return restartLines{loadAt: h.st.loadAt, load: h.st.load, loadEvents: h.st.loadEvents, loadHow: h.st.loadHow,
		commits: append([]loggedCommit(nil), h.st.commits...)}
}
