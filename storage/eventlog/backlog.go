package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Backlog is what a reader of a topic (or of one partition of it) has not
// consumed past a position: how many messages, and when the first of them
// was stored.
type Backlog struct {
	Messages uint64
	Oldest   time.Time // zero when Messages is 0
}

// BacklogAfter returns the messages of topic, or of partition part of it
// when part >= 0 (SubscribePartitionAfter), stored after position seq. It
// costs one request when there are none; otherwise a short-lived consumer
// counts them, for monitoring (not for every message).
func (l *Log) BacklogAfter(ctx context.Context, topic string, part int, seq uint64) (Backlog, error) {
	if l.isClosed() {
		return Backlog{}, ErrClosed
	}
	r, err := l.route(topic)
	if part >= 0 {
		r, err = l.partitionRoute(topic, part)
	}
	if err != nil {
		return Backlog{}, err
	}
	last, err := l.lastSeq(ctx, r)
	if err != nil || last <= seq {
		return Backlog{}, err
	}
	filters := r.filters
	if filters == nil {
		filters = []string{r.subject, r.subject + ".>"}
	}
	cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	s := r.stream.handle
	c, err := s.CreateConsumer(cctx, jetstream.ConsumerConfig{
		FilterSubjects:    filters,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       seq + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	})
	if err != nil {
		return Backlog{}, fmt.Errorf("%w: cannot count the backlog of topic %q: %w", ErrUnavailable, topic, err)
	}
	defer func() { _ = s.DeleteConsumer(context.WithoutCancel(cctx), c.CachedInfo().Name) }()
	b := Backlog{Messages: c.CachedInfo().NumPending}
	if b.Messages == 0 {
		return b, nil
	}
	for _, f := range filters {
		m, err := s.GetMsg(cctx, seq+1, jetstream.WithGetMsgSubject(f))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return b, fmt.Errorf("%w: cannot read the backlog of topic %q: %w", ErrUnavailable, topic, err)
		case b.Oldest.IsZero() || m.Time.Before(b.Oldest):
			b.Oldest = m.Time
		}
	}
	return b, nil
}
