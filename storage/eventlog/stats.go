package eventlog

import (
	"context"
	"fmt"
	"sort"
)

// StreamStats is the state of one stream of the log, for monitoring.
type StreamStats struct {
	// Topic is the stream's topic (its name in the stream table).
	Topic string
	// Messages and Bytes are what the stream holds now; FirstSeq and
	// LastSeq the positions of its oldest and newest message.
	Messages, Bytes, FirstSeq, LastSeq uint64
	// Consumers counts the durable and ephemeral consumers reading it.
	Consumers int
	// MaxBytes is the stream's size cap, 0 when it has none.
	MaxBytes uint64
}

// StreamStats returns the state of every stream of the log, by topic.
func (l *Log) StreamStats(ctx context.Context) ([]StreamStats, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	out := make([]StreamStats, 0, len(l.streams))
	for topic, ref := range l.streams {
		cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		si, err := ref.handle.Info(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: cannot read the state of stream %s: %w", ErrUnavailable, ref.name, err)
		}
		out = append(out, StreamStats{Topic: topic, Messages: si.State.Msgs, Bytes: si.State.Bytes,
			FirstSeq: si.State.FirstSeq, LastSeq: si.State.LastSeq, Consumers: si.State.Consumers,
			MaxBytes: uint64(max(si.Config.MaxBytes, 0))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out, nil
}
