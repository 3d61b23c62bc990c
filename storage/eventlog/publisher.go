package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Receipt is what the log answers to a stored message.
type Receipt struct {
	// Seq is the message's position in its topic's stream. For a duplicate
	// it is the position of the message first stored under the dedupe id.
	Seq uint64
	// Duplicate is true when the dedupe id had been stored already within
	// the stream's Duplicates window: nothing was stored this time.
	Duplicate bool
}

// Publisher publishes Watermill messages to the log. Each publish returns
// only after the server has stored the message and answered with its
// PubAck: a nil error means the message is in the log. Safe for concurrent
// use; it holds nothing of its own, so Close only stops further publishes.
type Publisher struct {
	log    *Log
	closed atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// Publisher returns a Publisher on the log's connection.
func (l *Log) Publisher() *Publisher { return &Publisher{log: l} }

// Publish stores the messages in topic, in order, one after the other, each
// acknowledged by the server before the next is sent. On the first failure
// it stops and returns the error; the messages before it are stored.
// Messages published with Publish are not deduplicated.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if err := p.usable(); err != nil {
		return err
	}
	r, err := p.log.route(topic)
	if err != nil {
		return err
	}
	for _, msg := range msgs {
		m, err := encode(r.subject, msg)
		if err != nil {
			return err
		}
		if _, err := p.publish(msg.Context(), r, m); err != nil {
			return fmt.Errorf("cannot publish message %s to %q: %w", msg.UUID, topic, err)
		}
	}
	return nil
}

// PublishOnce stores msg in topic under the dedupe id id (the Nats-Msg-Id
// header): within the stream's Duplicates window a message with an id
// already stored is not stored again, and the receipt says Duplicate with
// the first message's Seq. The server rebuilds its window of ids from the
// stored messages when it restarts, so this holds across restarts.
func (p *Publisher) PublishOnce(ctx context.Context, topic, id string, msg *message.Message) (Receipt, error) {
	if err := p.usable(); err != nil {
		return Receipt{}, err
	}
	if id == "" {
		return Receipt{}, fmt.Errorf("%w: empty dedupe id", ErrBadMessage)
	}
	if err := checkHeaderValue(id); err != nil {
		return Receipt{}, fmt.Errorf("%w: dedupe id %q: %w", ErrBadMessage, id, err)
	}
	r, err := p.log.route(topic)
	if err != nil {
		return Receipt{}, err
	}
	m, err := encode(r.subject, msg)
	if err != nil {
		return Receipt{}, err
	}
	m.Header.Set(HeaderMsgID, id)
	ack, err := p.publishRetrying(ctx, r, m)
	if err != nil {
		return Receipt{}, fmt.Errorf("cannot publish message %s (dedupe id %q) to %q: %w", msg.UUID, id, topic, err)
	}
	return Receipt{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// GetMsg reads a stored message back; see Log.GetMsg.
func (p *Publisher) GetMsg(ctx context.Context, topic string, seq uint64) (*message.Message, error) {
	return p.log.GetMsg(ctx, topic, seq)
}

// Close stops the Publisher: later publishes fail with ErrClosed. Publishes
// in flight finish. The log's connection stays open. Calling it again does
// nothing.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}

func (p *Publisher) usable() error {
	if p.closed.Load() || p.log.isClosed() {
		return ErrClosed
	}
	return nil
}

// publish sends one message and waits for its PubAck, at most
// Config.Timeout. Failures to reach or hear from the server wrap
// ErrUnavailable.
func (p *Publisher) publish(ctx context.Context, r route, m *nats.Msg) (*jetstream.PubAck, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if size := int64(len(m.Data) + headerSize(m.Header)); size > p.log.nc.MaxPayload() {
		return nil, fmt.Errorf("%w: %d bytes, the server takes at most %d", ErrTooLarge, size, p.log.nc.MaxPayload())
	}
	tctx, cancel := context.WithTimeout(ctx, p.log.cfg.Timeout)
	defer cancel()
	ack, err := p.log.js.PublishMsg(tctx, m, jetstream.WithExpectStream(r.stream.name))
	switch {
	case err == nil:
		return ack, nil
	case errors.Is(err, nats.ErrMaxPayload):
		return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
	case isFull(err):
		// Not retried: room returns when batches are purged, minutes
		// away, not within a publish.
		return nil, fmt.Errorf("%w: stream %s refused the message: %w", ErrFull, r.stream.name, err)
	case ctx.Err() != nil:
		// The caller gave up; the message may or may not be stored.
		return nil, fmt.Errorf("publish abandoned by the caller: %w", err)
	default:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
}

// publishRetrying publishes a message that carries a dedupe id, trying
// again while the log is unavailable until ctx ends (at most Config.Timeout
// when ctx has no deadline): sending the same id again is safe, and on a
// cluster a stream whose leader died answers again once the remaining
// nodes elected a new one (a few seconds), so a publish spans the
// election instead of failing in it.
func (p *Publisher) publishRetrying(ctx context.Context, r route, m *nats.Msg) (*jetstream.PubAck, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.log.cfg.Timeout)
		defer cancel()
	}
	wait := 50 * time.Millisecond
	var unavailable error // the last attempt's failure to reach the server
	for {
		ack, err := p.publish(ctx, r, m)
		if err != nil && unavailable != nil && ctx.Err() != nil {
			// The caller's deadline ended a retry: what kept the message
			// from being stored is the server's unavailability, not the
			// caller (TestClusterReplicas, without a quorum, saw one or
			// the other depending on when the deadline fell).
			return nil, fmt.Errorf("%w (retried until the caller's deadline)", unavailable)
		}
		if err == nil || !errors.Is(err, ErrUnavailable) || p.log.isClosed() {
			return ack, err
		}
		unavailable = err
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// headerSize is the encoded size of NATS headers, close enough to compare
// a message with the server's maximum payload.
func headerSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}
