package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Consumer names the durable consumer group the subscriber joins and,
	// when the group does not exist yet on a topic, the configuration it is
	// created with. A group that exists is joined as it is (Open creates the
	// groups of the stream table; a consumer is never deleted by mf).
	//
	// An empty Consumer.Group selects replay mode instead: every Subscribe
	// call reads the topic from its first message, through a consumer of its
	// own that the server forgets after a few minutes; nothing is
	// acknowledged to the server. Every process that reads the catalog this
	// way sees all of it.
	Consumer Consumer

	// NakDelay is how long after a Nack the message is delivered again.
	// Default 100ms.
	NakDelay time.Duration

	// CloseGrace is how long Close (or the end of a Subscribe context) waits
	// for the outcome of a message already handed to the handler before it
	// gives the message back to the server and cancels its context.
	// Default 5s.
	CloseGrace time.Duration

	// Prefetch is how many messages a Subscribe call asks the server for
	// at a time (it asks for more when half are used up). A group's server
	// never has more than the group's MaxAckPending messages out. At least
	// 4: with smaller requests the client library can miss re-requesting
	// and stall until its heartbeat check (30s). Default 256.
	Prefetch int
}

// DefaultSubscriberConfig returns the configuration of a subscriber in the
// durable consumer group group, or in replay mode for group "".
func DefaultSubscriberConfig(group string) SubscriberConfig {
	c := DefaultConsumer(group)
	return SubscriberConfig{Consumer: c, NakDelay: 100 * time.Millisecond, CloseGrace: 5 * time.Second, Prefetch: 256}
}

// Replay reports whether the configuration selects replay mode.
func (c SubscriberConfig) Replay() bool { return c.Consumer.Group == "" }

// Validate reports the first setting that cannot work.
func (c SubscriberConfig) Validate() error {
	if !c.Replay() {
		if err := c.Consumer.validate(); err != nil {
			return fmt.Errorf("subscriber config: %w", err)
		}
	}
	if c.NakDelay < 0 {
		return fmt.Errorf("subscriber config: NakDelay %s must not be negative", c.NakDelay)
	}
	if c.CloseGrace < 0 {
		return fmt.Errorf("subscriber config: CloseGrace %s must not be negative", c.CloseGrace)
	}
	if c.Prefetch < 4 {
		return fmt.Errorf("subscriber config: Prefetch %d must be at least 4 (default 256)", c.Prefetch)
	}
	return nil
}

// Subscriber reads topics of the log as Watermill messages, one message at a
// time per Subscribe call: the next message is sent on the channel only
// after the previous one was acked or nacked.
//
// In a consumer group, one subscriber of the group at a time receives
// messages (the server pins the group to it; when it closes, or after the
// group's PinnedTTL without news of it, another takes over). It fetches
// up to the group's MaxAckPending messages ahead and hands them out in log
// order. Ack sends the acknowledgement without waiting for the server (a
// lost one means the message is delivered again); Nack hands the same
// message out again after NakDelay, before any later one. The group
// resumes after its last acknowledged message when a process starts
// again. In replay mode, Nack delivers the same message again after
// NakDelay, locally.
//
// Every delivered message carries the metadata keys MetaSeq, MetaSubject,
// MetaTime, MetaDelivery and MetaPending.
type Subscriber struct {
	log    *Log
	cfg    SubscriberConfig
	logger *slog.Logger

	mu      sync.Mutex // orders Subscribe's wg.Add before Close's wg.Wait
	closing chan struct{}
	wg      sync.WaitGroup
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// Subscriber returns a Subscriber on the log's connection. Log.Close closes
// it if it is still open.
func (l *Log) Subscriber(cfg SubscriberConfig) (*Subscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Subscriber{
		log:     l,
		cfg:     cfg,
		logger:  l.logger.With("group", cfg.Consumer.Group),
		closing: make(chan struct{}),
	}
	if err := l.addSubscriber(s); err != nil {
		return nil, err
	}
	return s, nil
}

// SubscribeInitialize creates the subscriber's durable consumer on topic if
// it does not exist yet, so that messages published from now on are kept
// for the group even before it first subscribes. It does nothing in replay
// mode.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	r, err := s.log.route(topic)
	if err != nil {
		return err
	}
	if s.cfg.Replay() {
		return nil
	}
	_, err = s.bind(context.Background(), r)
	return err
}

// Subscribe starts reading topic. The channel is closed when ctx ends or the
// Subscriber is closed.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	return s.subscribe(ctx, topic, 0)
}

// SubscribeAfter reads topic from the first message after log position
// seq, in replay mode: a reader that keeps its own position (the
// processor's watermark) resumes from it, and nothing is acknowledged to
// the server, which keeps no state of the reader beyond the few minutes of
// an ordered consumer. SubscribeAfter(ctx, topic, 0) is Subscribe. A
// consumer group's position is the server's: there it is refused.
func (s *Subscriber) SubscribeAfter(ctx context.Context, topic string, seq uint64) (<-chan *message.Message, error) {
	if !s.cfg.Replay() {
		return nil, fmt.Errorf("cannot read topic %q after position %d: consumer group %q resumes where the group stands; use a replay-mode subscriber",
			topic, seq, s.cfg.Consumer.Group)
	}
	return s.subscribe(ctx, topic, seq)
}

func (s *Subscriber) subscribe(ctx context.Context, topic string, after uint64) (<-chan *message.Message, error) {
	r, err := s.log.route(topic)
	if err != nil {
		return nil, err
	}
	return s.subscribeRoute(ctx, r, after)
}

func (s *Subscriber) subscribeRoute(ctx context.Context, r route, after uint64) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosing() || s.log.isClosed() {
		return nil, ErrClosed
	}
	sctx, cancel := context.WithCancel(ctx)
	sub := &subscription{s: s, r: r, ctx: sctx, out: make(chan *message.Message), lastSeq: after}
	if err := sub.open(); err != nil {
		cancel()
		return nil, err
	}
	s.wg.Add(2)
	go func() {
		// Ends the subscription when the Subscriber closes.
		defer s.wg.Done()
		select {
		case <-s.closing:
			cancel()
		case <-sctx.Done():
		}
		sub.drain()
	}()
	go func() {
		defer s.wg.Done()
		defer close(sub.out)
		defer cancel()
		sub.run()
	}()
	return sub.out, nil
}

// Close ends every subscription: each gives the message its handler holds
// back to the server unless the handler acks or nacks it within CloseGrace,
// and gives back the messages it had fetched but not handed out. The
// durable consumer stays on the server with the group's position. Calling
// it again does nothing.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.isClosing() {
		close(s.closing)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.log.removeSubscriber(s)
	return nil
}

func (s *Subscriber) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// bind returns the group's durable consumer on a topic, creating it when it
// does not exist. An existing consumer is used as it is.
func (s *Subscriber) bind(ctx context.Context, r route) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, s.log.cfg.Timeout)
	defer cancel()
	want := consumerConfig(r, s.cfg.Consumer)
	c, err := r.stream.handle.CreateConsumer(ctx, want)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		c, err = r.stream.handle.Consumer(ctx, want.Durable)
		if err == nil {
			got := c.CachedInfo().Config
			s.logger.Warn("joined a consumer group whose server configuration differs from this subscriber's; the server's applies",
				"consumer", want.Durable, "ack_wait", got.AckWait, "max_ack_pending", got.MaxAckPending)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot create or join consumer %q on topic %q: %w", ErrUnavailable, want.Durable, r.topic, err)
	}
	return c, nil
}

// subscription is one Subscribe call: a server-side iterator, and the loop
// that hands its messages out one at a time. In a group, a fetcher moves
// the iterator's messages into a queue of its own as they come (the
// server sends up to MaxAckPending ahead), so that the subscription can
// keep every message it holds alive and give them all back in order.
type subscription struct {
	s   *Subscriber
	r   route
	ctx context.Context // ends with the Subscribe context or Close
	out chan *message.Message

	mu      sync.Mutex
	iter    jetstream.MessagesContext
	cons    jetstream.Consumer // group: the durable consumer
	drained bool

	ackWait atomic.Int64 // the durable consumer's AckWait (ns), for in-progress signals; set by open
	// progress ticks every ackWait/2 while a handed-out message waits for
	// its outcome (group mode); one ticker for the subscription rather
	// than one per message. Used by the delivering goroutine only.
	progress *time.Ticker
	lastSeq  uint64 // replay: the last stream sequence fetched (the fetcher's)

	// Group mode: messages fetched and not handed out yet, in log order;
	// queued is signalled when the queue grows.
	qmu    sync.Mutex
	queue  []jetstream.Msg
	queued chan struct{}
	pin    string // the pin id of the last message fetched
	acked  bool   // an ack was sent since the last flush
}

// open starts a server-side iterator: on the group's durable consumer, or
// on a new ordered consumer that starts after lastSeq.
func (sub *subscription) open() error {
	cfg := sub.s.cfg
	var (
		c    jetstream.Consumer
		opts []jetstream.PullMessagesOpt
		err  error
	)
	if cfg.Replay() {
		occ := jetstream.OrderedConsumerConfig{FilterSubjects: sub.r.filters, DeliverPolicy: jetstream.DeliverAllPolicy}
		if sub.lastSeq > 0 {
			occ.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
			occ.OptStartSeq = sub.lastSeq + 1
		}
		ctx, cancel := context.WithTimeout(sub.ctx, sub.s.log.cfg.Timeout)
		c, err = sub.r.stream.handle.OrderedConsumer(ctx, occ)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: cannot create a replay consumer on topic %q: %w", ErrUnavailable, sub.r.topic, err)
		}
		opts = append(opts, jetstream.PullMaxMessages(cfg.Prefetch))
	} else {
		c, err = sub.s.bind(sub.ctx, sub.r)
		if err != nil {
			return err
		}
		info := c.CachedInfo().Config
		sub.ackWait.Store(int64(info.AckWait))
		opts = append(opts, jetstream.PullMaxMessages(cfg.Prefetch),
			jetstream.WithMessagesErrOnMissingHeartbeat(false))
		if info.PriorityPolicy == jetstream.PriorityPolicyPinned && slices.Contains(info.PriorityGroups, pinGroup) {
			// Ask again well within the pin's time to live, so that the
			// server keeps delivering to this subscriber while it runs.
			opts = append(opts, jetstream.PullPriorityGroup(pinGroup),
				jetstream.PullExpiry(max(info.PinnedTTL/3, time.Second)))
		}
	}
	it, err := c.Messages(opts...)
	if err != nil {
		return fmt.Errorf("%w: cannot read topic %q: %w", ErrUnavailable, sub.r.topic, err)
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.drained {
		it.Stop()
		return ErrClosed
	}
	sub.iter, sub.cons = it, c
	return nil
}

// drain stops fetching: the iterator hands out what it already holds (to
// be given back), then reports that it is closed. Without a connection
// nothing could be given back and a drain would wait for the server, so the
// iterator just stops.
//
// A replay-mode iterator (an ordered consumer) holds nothing to give back,
// so it just stops: draining one whose consumer the server lost (a cluster
// that came back) never ended, and a closing Subscriber waited on it for
// ever. A group's drain that has not ended within drainGrace is stopped.
func (sub *subscription) drain() {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.drained = true
	if sub.iter == nil {
		return
	}
	if sub.s.cfg.Replay() || sub.s.log.nc.Status() != nats.CONNECTED {
		sub.iter.Stop()
		return
	}
	it := sub.iter
	it.Drain()
	time.AfterFunc(drainGrace, it.Stop)
}

// drainGrace bounds a group subscription's drain.
const drainGrace = 5 * time.Second

func (sub *subscription) current() jetstream.MessagesContext {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.iter
}

// run hands messages out until the subscription ends. In replay mode it
// hands each message out as the iterator gives it; in a group a fetcher
// queues them and run takes them from the queue, and when the subscription
// ends it gives back, in log order, whatever it still holds.
func (sub *subscription) run() {
	logger := sub.s.logger.With("topic", sub.r.topic)
	if sub.s.cfg.Replay() {
		// A fetcher turns messages into Watermill messages up to Prefetch
		// ahead, so that the next one is ready the moment the handler
		// settles the last (decoding it then would put its cost on the
		// handler's path). Nothing fetched is given back.
		ready := make(chan prepared, sub.s.cfg.Prefetch)
		fetched := make(chan struct{})
		go func() {
			defer close(fetched)
			sub.fetch(logger, func(jm jetstream.Msg) {
				p, ok := sub.prepare(jm, logger)
				if !ok {
					return
				}
				// A reopened iterator starts after what was fetched: the
				// messages waiting in ready are still handed out.
				sub.lastSeq = p.md.Sequence.Stream
				select {
				case ready <- p:
				case <-sub.ctx.Done():
				}
			})
		}()
		for {
			select {
			case p := <-ready:
				sub.deliver(p, logger)
				continue
			case <-sub.ctx.Done():
			}
			break
		}
		// The iterator was stopped (drain); an ordered consumer that the
		// server lost while it was being reset can leave its Next waiting
		// on the old pull all the same (seen in TestClusterFaults: mf did
		// not exit on SIGTERM). Nothing fetched in replay mode is given
		// back, so the fetcher is left to end with the connection.
		select {
		case <-fetched:
		case <-time.After(drainGrace):
			logger.Warn("the log iterator did not stop; leaving it to the connection's close", "grace", drainGrace)
		}
		return
	}
	sub.queued = make(chan struct{}, 1)
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		sub.fetch(logger, sub.push)
	}()
	stopProgress := sub.keepQueueAlive()
	for {
		jm, ok := sub.pop()
		if !ok {
			break
		}
		if p, ok := sub.prepare(jm, logger); ok {
			sub.deliver(p, logger)
		}
	}
	if sub.progress != nil {
		sub.progress.Stop()
	}
	// The subscription ended: the held message was settled or given back
	// by deliver; give back the queue, including what the iterator hands
	// out while it drains, after the acks sent so far reached the server.
	<-fetched
	stopProgress()
	sub.flushAcks(logger, false)
	for _, jm := range sub.takeQueue() {
		sub.giveBack(jm)
	}
	// Flushed even when nothing was settled, so that the server has
	// dropped this subscription's interest before unpin reads the
	// consumer's info (see unpin).
	sub.flushAcks(logger, true)
	sub.unpin(logger)
}

// fetch reads the iterator and passes each message to handle until the
// subscription ends, reopening the iterator when it ends on its own (the
// server went away, the consumer was deleted).
func (sub *subscription) fetch(logger *slog.Logger, handle func(jetstream.Msg)) {
	backoff := 100 * time.Millisecond
	for {
		jm, err := sub.current().Next()
		if err != nil {
			if sub.ctx.Err() != nil {
				return
			}
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				logger.Warn("reading the log failed; going on", "err", err)
				select {
				case <-sub.ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			logger.Warn("log iterator ended; reopening it", "err", err, "retry_in", backoff)
			select {
			case <-sub.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			if err := sub.open(); err != nil && sub.ctx.Err() == nil {
				logger.Warn("cannot reopen the log iterator", "err", err)
			}
			continue
		}
		backoff = 100 * time.Millisecond
		handle(jm)
	}
}

// push queues a fetched message (group mode).
func (sub *subscription) push(jm jetstream.Msg) {
	pin := jm.Headers().Get(pinHeader)
	sub.qmu.Lock()
	sub.queue = append(sub.queue, jm)
	if pin != "" {
		sub.pin = pin
	}
	sub.qmu.Unlock()
	select {
	case sub.queued <- struct{}{}:
	default:
	}
}

// pinHeader carries the pin id on messages of a pinned priority group.
const pinHeader = "Nats-Pin-Id"

// pop takes the next queued message; false when the subscription ended.
func (sub *subscription) pop() (jetstream.Msg, bool) {
	for {
		if sub.ctx.Err() != nil {
			return nil, false
		}
		sub.qmu.Lock()
		if len(sub.queue) > 0 {
			jm := sub.queue[0]
			sub.queue[0] = nil
			sub.queue = sub.queue[1:]
			sub.qmu.Unlock()
			return jm, true
		}
		sub.qmu.Unlock()
		select {
		case <-sub.queued:
		case <-sub.ctx.Done():
		}
	}
}

// takeQueue empties the queue and returns what it held.
func (sub *subscription) takeQueue() []jetstream.Msg {
	sub.qmu.Lock()
	defer sub.qmu.Unlock()
	q := sub.queue
	sub.queue = nil
	return q
}

// keepQueueAlive tells the server every AckWait/2 that the queued messages
// are in progress, so that it does not deliver them again while they wait
// behind a slow handler. It returns the function that stops it.
func (sub *subscription) keepQueueAlive() func() {
	ackWait := time.Duration(sub.ackWait.Load())
	if ackWait <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ackWait / 2)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sub.qmu.Lock()
				for _, jm := range sub.queue {
					if err := jm.InProgress(); err != nil {
						sub.s.logger.Debug("in-progress signal not sent", "err", err)
						break
					}
				}
				sub.qmu.Unlock()
			}
		}
	}()
	return func() { close(stop); <-done }
}

// flushAcks waits until the acks sent so far reached the server (they are
// sent without waiting for each).
func (sub *subscription) flushAcks(logger *slog.Logger, always bool) {
	sub.qmu.Lock()
	acked := sub.acked || always
	sub.acked = false
	sub.qmu.Unlock()
	if !acked || sub.s.log.nc.Status() != nats.CONNECTED {
		return
	}
	if err := sub.s.log.nc.FlushTimeout(sub.s.log.cfg.Timeout); err != nil {
		logger.Warn("acks not confirmed by the server; their messages may be delivered again", "err", err)
	}
}

// unpin hands the group over to another subscriber at once when this one
// is the one the server delivers to, instead of after PinnedTTL.
//
// It reads the consumer's info even when this subscriber was never
// pinned: reading it makes the server drop the pull requests nobody
// listens on any more, this subscription's among them. Left waiting, the
// server would pin the group to it when the next message comes (it picks
// the request at the head of its queue before it checks that anyone still
// listens on it), and every later subscriber would be passed over until
// PinnedTTL (Watermill's TestConsumerGroups: a group received nothing for
// 15 s, 6 runs in 400 on a loaded machine).
func (sub *subscription) unpin(logger *slog.Logger) {
	sub.qmu.Lock()
	pin := sub.pin
	sub.qmu.Unlock()
	sub.mu.Lock()
	c := sub.cons
	sub.mu.Unlock()
	if c == nil || sub.s.log.nc.Status() != nats.CONNECTED {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sub.s.log.cfg.Timeout)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		logger.Debug("cannot read the consumer's pin; another subscriber takes over after PinnedTTL", "err", err)
		return
	}
	for _, g := range info.PriorityGroups {
		if pin != "" && g.Group == pinGroup && g.PinnedClientID == pin {
			if err := sub.r.stream.handle.UnpinConsumer(ctx, info.Name, pinGroup); err != nil {
				logger.Debug("cannot unpin the consumer; another subscriber takes over after PinnedTTL", "err", err)
			}
		}
	}
}

// prepared is a fetched message and the Watermill message it is handed
// out as first.
type prepared struct {
	jm jetstream.Msg
	md *jetstream.MsgMetadata
	wm *message.Message
}

// prepare turns a fetched message into the Watermill message to hand out;
// false for a message without JetStream metadata (skipped).
func (sub *subscription) prepare(jm jetstream.Msg, logger *slog.Logger) (prepared, bool) {
	md, err := jm.Metadata()
	if err != nil {
		logger.Error("message without JetStream metadata; skipping it", "subject", jm.Subject(), "err", err)
		return prepared{}, false
	}
	return prepared{jm: jm, md: md, wm: delivered(jm, md, md.NumDelivered)}, true
}

// delivered is the Watermill message of a delivery of jm.
func delivered(jm jetstream.Msg, md *jetstream.MsgMetadata, delivery uint64) *message.Message {
	wm := decode(jm.Headers(), jm.Data(), jm.Subject(), md.Sequence.Stream, md.Timestamp)
	wm.Metadata.Set(MetaDelivery, strconv.FormatUint(delivery, 10))
	wm.Metadata.Set(MetaPending, strconv.FormatUint(md.NumPending, 10))
	return wm
}

// deliver hands one message out and waits for its outcome. A nacked
// message is handed out again after NakDelay, before any other, so that
// log order holds.
func (sub *subscription) deliver(p prepared, logger *slog.Logger) {
	jm, md, wm := p.jm, p.md, p.wm
	replay := sub.s.cfg.Replay()
	delivery := md.NumDelivered
	for {
		mctx, mcancel := context.WithCancel(context.WithoutCancel(sub.ctx))
		wm.SetContext(mctx)

		select {
		case sub.out <- wm:
		case <-sub.ctx.Done():
			mcancel()
			sub.giveBack(jm)
			return
		}

		acked, nacked := sub.await(wm, jm)
		mcancel()
		switch {
		case acked:
			if !replay {
				// Sent without waiting for the server: a lost ack only
				// means the message is delivered again.
				if err := jm.Ack(); err != nil {
					logger.Warn("ack not sent; the message will be delivered again", "seq", md.Sequence.Stream, "err", err)
				}
				sub.qmu.Lock()
				sub.acked = true
				sub.qmu.Unlock()
			}
			return
		case nacked:
			select {
			case <-sub.ctx.Done():
				sub.giveBack(jm)
				return
			case <-time.After(sub.s.cfg.NakDelay):
			}
			delivery++
			wm = delivered(jm, md, delivery)
		default:
			// No outcome within CloseGrace after the subscription ended.
			sub.giveBack(jm)
			return
		}
	}
}

// await waits for the handler to ack or nack wm. In a group it tells the
// server every AckWait/2 that the message is still being worked on. After
// the subscription ends it waits at most CloseGrace more.
func (sub *subscription) await(wm *message.Message, jm jetstream.Msg) (acked, nacked bool) {
	var progress <-chan time.Time
	if ackWait := time.Duration(sub.ackWait.Load()); !sub.s.cfg.Replay() && ackWait > 0 {
		// The first signal may come sooner than ackWait/2 after the
		// message was handed out, never later.
		if sub.progress == nil {
			sub.progress = time.NewTicker(ackWait / 2)
		}
		progress = sub.progress.C
	}
	ended := sub.ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case <-wm.Acked():
			return true, false
		case <-wm.Nacked():
			return false, true
		case <-progress:
			if err := jm.InProgress(); err != nil {
				sub.s.logger.Debug("in-progress signal not sent", "err", err)
			}
		case <-ended:
			ended = nil
			t := time.NewTimer(sub.s.cfg.CloseGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			return false, false
		}
	}
}

// giveBack returns a message the subscription will not handle: in a group
// the server delivers it again at once, to this or another process. A nak
// with a delay, unlike a plain one, is written to the consumer's stored
// state, so a server that restarts right after redelivers the message at
// once too instead of after AckWait.
func (sub *subscription) giveBack(jm jetstream.Msg) {
	if sub.s.cfg.Replay() {
		return
	}
	if err := jm.NakWithDelay(time.Millisecond); err != nil {
		sub.s.logger.Debug("giving a message back failed; the server delivers it again after AckWait", "err", err)
		return
	}
	// Like an ack, the give-back must reach the server before the
	// connection may close (flushAcks): one lost leaves its message to
	// come again only after AckWait, behind later ones.
	sub.qmu.Lock()
	sub.acked = true
	sub.qmu.Unlock()
}
