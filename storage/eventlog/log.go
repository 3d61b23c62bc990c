package eventlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("log is closed")
	// ErrUnavailable wraps every failure to reach the log or to have it
	// store a message in time: the server is down, unreachable, without
	// JetStream, or did not answer within Config.Timeout. Ingest answers 503
	// sink_unavailable on it. A publish that failed with it may or may not
	// have been stored; publishing again with the same dedupe id is safe.
	ErrUnavailable = errors.New("log is unavailable")
	// ErrUnknownTopic is returned for a topic that is not in the stream
	// table or is not a valid topic name.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrBadMessage is returned for a message whose UUID or metadata cannot
	// be stored as NATS headers and read back unchanged.
	ErrBadMessage = errors.New("message cannot be stored")
	// ErrTooLarge is returned for a message larger than the server's
	// maximum payload.
	ErrTooLarge = errors.New("message is larger than the log accepts")
	// ErrFull is returned by a publish to a stream that reached its size
	// cap (Stream.MaxBytes with RefuseWhenFull) or to a server out of
	// the storage it may use: the message was not stored. Ingest answers
	// 503 sink_unavailable on it; room returns as committed batches are
	// purged. Publishing again with the same dedupe id later is safe.
	ErrFull = errors.New("log is full")
	// ErrNotFound is returned by GetMsg for a sequence that holds no message
	// of the topic.
	ErrNotFound = errors.New("message not found")
	// ErrDirLocked is returned by Open when another process has the
	// embedded log's directory open.
	ErrDirLocked = errors.New("log directory is in use by another process")
)

// Log is an open connection to the log: an embedded NATS server or an
// external one, with mf's streams created. Publishers and Subscribers made
// from it share its connection. Safe for concurrent use.
type Log struct {
	cfg     Config
	logger  *slog.Logger
	ns      *server.Server // nil for an external server
	lock    *dirLock       // nil for an external server
	nc      *nats.Conn
	js      jetstream.JetStream
	streams map[string]*streamRef // by topic

	holder   string // this process's name in leases
	replicas int    // copies of each stream: Config.Replicas, or chosen

	mu       sync.Mutex
	closed   bool
	leaseKV  jetstream.KeyValue // the lease bucket, once opened
	leaseTTL time.Duration      // with this TTL
	subs     map[*Subscriber]struct{}
}

// streamRef is one stream of the table, as created on the server.
type streamRef struct {
	spec    Stream
	name    string // JetStream stream name: PREFIX_TOPIC
	subject string // prefix.topic
	handle  jetstream.Stream
	// partitions is the stream's partition count as the server has it (0:
	// not partitioned).
	partitions int
	// maxBytes is the stream's size cap as the server has it (0: none).
	maxBytes int64
}

// newStreamRef names a stream of the table: PREFIX_TOPIC, on the subjects
// prefix.topic and prefix.topic.>.
func newStreamRef(prefix string, spec Stream) *streamRef {
	return &streamRef{
		spec:    spec,
		name:    strings.ToUpper(prefix + "_" + spec.Topic),
		subject: prefix + "." + spec.Topic,
	}
}

// route is where a topic leads: a stream, the subject to publish to, and the
// subjects a consumer of the topic reads.
type route struct {
	stream  *streamRef
	topic   string
	subject string
	// filters are the consumer filter subjects; nil for the whole stream.
	filters []string
	// sub is the part of the topic after the stream's topic ("" for the
	// whole stream), with '.' replaced by '+', for consumer names.
	sub string
}

// Open starts the embedded server (cfg.URL "") or connects to the external
// one, then creates or updates the streams of cfg.Streams and their durable
// consumers. Close releases everything it started.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		cfg:     cfg,
		logger:  logger.With("component", "eventlog"),
		streams: map[string]*streamRef{},
		subs:    map[*Subscriber]struct{}{},
		holder:  leaseHolder(),
	}
	start := time.Now()
	if err := l.connect(ctx); err != nil {
		l.shutdown()
		return nil, err
	}
	js, err := jetstream.New(l.nc, jetstream.WithDefaultTimeout(cfg.Timeout))
	if err != nil {
		l.shutdown()
		return nil, fmt.Errorf("cannot use JetStream: %w", err)
	}
	l.js = js
	l.replicas = cfg.Replicas
	if l.replicas == 0 {
		l.replicas = 1
		if !cfg.Embedded() {
			l.replicas = min(3, max(1, len(l.nc.Servers())))
		}
	}
	if err := l.provision(ctx); err != nil {
		l.shutdown()
		return nil, err
	}
	attrs := []any{"embedded", cfg.Embedded(), "streams", len(l.streams), "replicas", l.replicas,
		"max_payload", l.nc.MaxPayload(), "took", time.Since(start).Round(time.Millisecond)}
	if cfg.Embedded() {
		attrs = append(attrs, "dir", cfg.Dir, "sync", string(cfg.Sync))
		if cfg.Sync == SyncPolicyInterval {
			attrs = append(attrs, "sync_interval", cfg.SyncInterval)
		}
		if cfg.ListenAddr != "" {
			attrs = append(attrs, "client_url", l.ns.ClientURL())
		}
	} else {
		attrs = append(attrs, "url", redactURL(cfg.URL))
	}
	l.logger.Info("log ready", attrs...)
	return l, nil
}

// connect starts the embedded server and connects in-process, or connects
// to the external server, retrying until cfg.StartTimeout.
func (l *Log) connect(ctx context.Context) error {
	cfg := l.cfg
	opts := []nats.Option{
		nats.Name("mf"),
		nats.Timeout(cfg.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// No buffering while disconnected: a publish then fails at once
		// (ErrUnavailable) instead of waiting for a PubAck that cannot come.
		nats.ReconnectBufSize(-1),
		nats.DrainTimeout(cfg.Timeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				l.logger.Warn("log connection lost", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { l.logger.Info("log connection restored") }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			l.logger.Warn("log connection error", "subject", subject, "err", err)
		}),
	}
	if cfg.Embedded() {
		lock, err := lockDir(cfg.Dir)
		if err != nil {
			return err
		}
		l.lock = lock
		ns, err := startEmbedded(cfg, l.logger)
		if err != nil {
			return err
		}
		l.ns = ns
		nc, err := nats.Connect("", append(opts, nats.InProcessServer(ns))...)
		if err != nil {
			return fmt.Errorf("cannot connect to the embedded log server: %w", err)
		}
		l.nc = nc
		return nil
	}
	sec, err := securityOptions(cfg)
	if err != nil {
		return err
	}
	opts = append(opts, sec...)
	deadline := time.Now().Add(cfg.StartTimeout)
	for {
		nc, err := nats.Connect(cfg.URL, opts...)
		if err == nil {
			l.nc = nc
			return nil
		}
		if refused(err) {
			// Waiting does not mend wrong credentials or certificates.
			return fmt.Errorf("cannot connect to %s: %w", redactURL(cfg.URL), err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: cannot connect to %s within %s: %w", ErrUnavailable, redactURL(cfg.URL), cfg.StartTimeout, err)
		}
		l.logger.Warn("log server not reachable yet, retrying", "url", redactURL(cfg.URL), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot connect to %s: %w", redactURL(cfg.URL), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// provision creates or updates every stream of the table and its declared
// durable consumers. Repeating it changes nothing.
func (l *Log) provision(ctx context.Context) error {
	for _, spec := range l.cfg.Streams {
		ref := newStreamRef(l.cfg.Prefix, spec)
		maxBytes := spec.MaxBytes
		if maxBytes == 0 && spec.RefuseWhenFull {
			auto, err := l.autoMaxBytes(ctx, ref.name)
			if err != nil {
				return err
			}
			maxBytes = auto
		}
		if maxBytes == 0 {
			maxBytes = -1
		}
		discard := jetstream.DiscardOld
		if spec.RefuseWhenFull {
			discard = jetstream.DiscardNew
		}
		parts := spec.Partitions
		if parts > 0 {
			// The count is fixed when the stream is partitioned: the
			// messages stored so far are where the server put them.
			had, err := l.existingPartitions(ctx, ref.name)
			if err != nil {
				return err
			}
			if had > 0 && had != parts {
				l.logger.Warn("the stream keeps the partition count it was created with", "stream", ref.name, "partitions", had, "configured", parts)
				parts = had
			}
		}
		scfg := jetstream.StreamConfig{
			Name:        ref.name,
			Description: "mf topic " + spec.Topic,
			Subjects:    []string{ref.subject, ref.subject + ".>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Discard:     discard,
			MaxAge:      spec.MaxAge,
			MaxBytes:    maxBytes,
			MaxMsgs:     -1,
			Duplicates:  spec.Duplicates,
			Replicas:    l.replicas,
		}
		if parts > 0 {
			scfg.SubjectTransform = partitionTransform(ref.subject, parts)
		}
		ref.partitions = parts
		cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		s, err := l.js.CreateOrUpdateStream(cctx, scfg)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: cannot create or update stream %s for topic %q: %w", ErrUnavailable, ref.name, spec.Topic, err)
		}
		ref.handle = s
		l.streams[spec.Topic] = ref
		for _, c := range spec.Consumers {
			r := route{stream: ref, topic: spec.Topic, subject: ref.subject}
			cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
			_, err := s.CreateOrUpdateConsumer(cctx, consumerConfig(r, c))
			cancel()
			if err != nil {
				return fmt.Errorf("%w: cannot create or update consumer group %q on topic %q: %w", ErrUnavailable, c.Group, spec.Topic, err)
			}
		}
		info := s.CachedInfo()
		ref.maxBytes = max(info.Config.MaxBytes, 0)
		l.logger.Debug("stream ready", "stream", ref.name, "messages", info.State.Msgs,
			"bytes", info.State.Bytes, "max_bytes", ref.maxBytes, "first_seq", info.State.FirstSeq, "last_seq", info.State.LastSeq)
	}
	return nil
}

// consumerConfig is the server configuration of a durable consumer group on
// a topic.
func consumerConfig(r route, c Consumer) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        durableName(c.Group, r),
		Description:    fmt.Sprintf("mf group %s on topic %s", c.Group, r.topic),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  c.MaxAckPending,
		FilterSubjects: r.filters,
		ReplayPolicy:   jetstream.ReplayInstantPolicy,
		// One subscriber of the group at a time receives messages.
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{pinGroup},
		PinnedTTL:      cmp.Or(c.PinnedTTL, 30*time.Second),
	}
}

// pinGroup is the priority group every subscriber of a consumer group pulls
// in: the server pins it to one subscriber at a time.
const pinGroup = "mf"

// durableName names a group's consumer of a topic: the group itself on the
// whole stream's topic, group=sub+topic on a sub-topic ("processor" on
// "batches", "processor=p1" on "batches.p1").
func durableName(group string, r route) string {
	if r.sub == "" {
		return group
	}
	return group + "=" + r.sub
}

// route resolves a topic: "<stream topic>" or "<stream topic>.<token>...",
// tokens made of letters, digits, '_' and '-'.
func (l *Log) route(topic string) (route, error) {
	head, rest, _ := strings.Cut(topic, ".")
	ref, ok := l.streams[head]
	if !ok {
		return route{}, fmt.Errorf("%w %q: the stream table has no topic %q", ErrUnknownTopic, topic, head)
	}
	r := route{stream: ref, topic: topic, subject: ref.subject}
	if rest == "" {
		if strings.Contains(topic, ".") {
			return route{}, fmt.Errorf("%w %q: empty sub-topic", ErrUnknownTopic, topic)
		}
		return r, nil
	}
	for tok := range strings.SplitSeq(rest, ".") {
		if tok == "" || len(tok) > 128 || !isTokenChars(tok) {
			return route{}, fmt.Errorf("%w %q: sub-topic tokens are 1 to 128 letters, digits, '_' or '-', separated by '.'", ErrUnknownTopic, topic)
		}
	}
	r.subject = ref.subject + "." + rest
	r.filters = []string{r.subject, r.subject + ".>"}
	if n := ref.partitions; n > 0 && !strings.Contains(rest, ".") {
		// Stored under its partition (docs/log.md, "Partitions"), unless
		// it was published before the stream was partitioned.
		part := strconv.Itoa(PartitionOf(rest, n))
		if part != rest { // else "<subject>.<rest>.>" covers it
			r.filters = append(r.filters, ref.subject+"."+part+"."+rest)
		}
	}
	r.sub = strings.ReplaceAll(rest, ".", "+")
	return r, nil
}

// matches reports whether a stored subject is one the route reads.
func (r route) matches(subject string) bool {
	if r.filters == nil {
		return subject == r.stream.subject || strings.HasPrefix(subject, r.stream.subject+".")
	}
	for _, f := range r.filters {
		if subjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// subjectMatches reports whether subject matches filter, with NATS
// wildcards: '*' one token, '>' the rest (one token or more).
func subjectMatches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || f != "*" && f != st[i] {
			return false
		}
	}
	return len(ft) == len(st)
}

func (l *Log) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Check reports whether the log can take messages now: connected, JetStream
// answering, and every stream of the table present with a leader. It returns
// nil or an error wrapping ErrUnavailable (or ErrClosed), within
// Config.Timeout. Health endpoints call it; a publish reports its own
// failure.
func (l *Log) Check(ctx context.Context) error {
	if l.isClosed() {
		return ErrClosed
	}
	if st := l.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w: connection is %s", ErrUnavailable, st)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	info, err := l.js.AccountInfo(ctx)
	if err != nil {
		return fmt.Errorf("%w: JetStream does not answer: %w", ErrUnavailable, err)
	}
	if info.Limits.MaxStore > 0 && info.Store >= uint64(info.Limits.MaxStore) {
		return fmt.Errorf("%w: JetStream storage is full (%d of %d bytes)", ErrUnavailable, info.Store, info.Limits.MaxStore)
	}
	for _, ref := range l.streams {
		si, err := ref.handle.Info(ctx)
		if err != nil {
			return fmt.Errorf("%w: stream %s does not answer: %w", ErrUnavailable, ref.name, err)
		}
		if c := si.Cluster; c != nil && c.Leader == "" {
			return fmt.Errorf("%w: stream %s has no leader", ErrUnavailable, ref.name)
		}
	}
	return nil
}

// LastSeq returns the sequence of the newest message of a topic, 0 when the
// topic has none. A reader that starts by reading the whole topic has caught
// up once it has seen this sequence (or a delivery with MetaPending "0").
func (l *Log) LastSeq(ctx context.Context, topic string) (uint64, error) {
	if l.isClosed() {
		return 0, ErrClosed
	}
	r, err := l.route(topic)
	if err != nil {
		return 0, err
	}
	return l.lastSeq(ctx, r)
}

// LastSeqKey returns the sequence of the newest message of one key of a
// topic (see SubscribeKeyAfter), 0 when it has none.
func (l *Log) LastSeqKey(ctx context.Context, topic, key string) (uint64, error) {
	if l.isClosed() {
		return 0, ErrClosed
	}
	r, err := l.keyRoute(topic, key)
	if err != nil {
		return 0, err
	}
	return l.lastSeq(ctx, r)
}

func (l *Log) lastSeq(ctx context.Context, r route) (uint64, error) {
	topic := r.topic
	s := r.stream.handle
	if r.filters == nil {
		cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		defer cancel()
		si, err := s.Info(cctx)
		if err != nil {
			return 0, fmt.Errorf("%w: cannot read the state of topic %q: %w", ErrUnavailable, topic, err)
		}
		return si.State.LastSeq, nil
	}
	var last uint64
	for _, f := range r.filters {
		cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		m, err := s.GetLastMsgForSubject(cctx, f)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return 0, fmt.Errorf("%w: cannot read the last message of topic %q: %w", ErrUnavailable, topic, err)
		default:
			last = max(last, m.Sequence)
		}
	}
	return last, nil
}

// GetMsg reads back the message stored at seq in topic's stream, with the
// metadata keys MetaSeq, MetaSubject and MetaTime set. It returns
// ErrNotFound when seq holds no message of topic (never stored, removed, or
// of another sub-topic).
func (l *Log) GetMsg(ctx context.Context, topic string, seq uint64) (*message.Message, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	r, err := l.route(topic)
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		return nil, fmt.Errorf("%w: sequences start at 1", ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	m, err := r.stream.handle.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: topic %q has no message %d", ErrNotFound, topic, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read message %d of topic %q: %w", ErrUnavailable, seq, topic, err)
	}
	if !r.matches(m.Subject) {
		return nil, fmt.Errorf("%w: message %d is not in topic %q", ErrNotFound, seq, topic)
	}
	return decode(m.Header, m.Data, m.Subject, m.Sequence, m.Time), nil
}

// MaxPayload is the largest message (payload plus headers) the server
// accepts.
func (l *Log) MaxPayload() int64 { return l.nc.MaxPayload() }

// ClientURL is the nats:// address of the embedded server's TCP listener,
// "" without Config.ListenAddr or with an external server.
func (l *Log) ClientURL() string {
	if l.ns == nil || l.cfg.ListenAddr == "" {
		return ""
	}
	return l.ns.ClientURL()
}

// Close stops every Subscriber made from the log (their unacknowledged
// messages go back to the server), drains the connection so that sent acks
// reach the server, then shuts the embedded server down, which flushes and
// syncs its files. Calling it again does nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	subs := make([]*Subscriber, 0, len(l.subs))
	for s := range l.subs {
		subs = append(subs, s)
	}
	l.mu.Unlock()

	var errs []error
	for _, s := range subs {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := l.shutdown(); err != nil {
		errs = append(errs, err)
	}
	l.logger.Info("log closed")
	return errors.Join(errs...)
}

// shutdown drains the connection, stops the embedded server and unlocks
// the directory, whichever of them exist.
func (l *Log) shutdown() error {
	var errs []error
	if l.nc != nil && l.nc.Status() != nats.CONNECTED {
		// A drain would wait for a server that is not there.
		l.nc.Close()
	} else if l.nc != nil {
		done := make(chan struct{})
		l.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err := l.nc.Drain(); err != nil {
			l.nc.Close()
		} else {
			select {
			case <-done:
			case <-time.After(l.cfg.Timeout):
				l.logger.Warn("log connection did not drain in time; closing it")
				l.nc.Close()
			}
		}
	}
	if l.ns != nil {
		l.ns.Shutdown()
		l.ns.WaitForShutdown()
	}
	if l.lock != nil {
		if err := l.lock.unlock(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *Log) addSubscriber(s *Subscriber) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.subs[s] = struct{}{}
	return nil
}

func (l *Log) removeSubscriber(s *Subscriber) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs, s)
}

// Embedded reports whether the log runs on this process's own embedded
// server.
func (l *Log) Embedded() bool { return l.cfg.Embedded() }
