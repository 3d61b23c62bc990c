package eventlog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
)

// Partitions of a stream. A stream with Stream.Partitions set stores a
// message published to the sub-topic "<topic>.<key>" under the subject
// "<prefix>.<topic>.<n>.<key>", n = PartitionOf(key, Partitions): the
// server maps it with a subject transform (partition()), so that a reader
// of one partition receives only its keys' messages, in log order, and the
// mapping is the server's, the same for every writer. docs/log.md,
// "Partitions".

// PartitionOf returns the partition of key among n: FNV-1a (32 bits) of the
// key modulo n, the hash of the server's partition() transform.
func PartitionOf(key string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// partitionDest matches the destination of the transform provision sets,
// to read the partition count of a stream created earlier.
var partitionDest = regexp.MustCompile(`\{\{\s*[Pp]artition\(\s*(\d+)\s*,\s*1\s*\)\s*\}\}`)

// partitionTransform is the subject transform of a partitioned stream.
func partitionTransform(subject string, n int) *jetstream.SubjectTransformConfig {
	return &jetstream.SubjectTransformConfig{
		Source:      subject + ".*",
		Destination: fmt.Sprintf("%s.{{partition(%d,1)}}.{{wildcard(1)}}", subject, n),
	}
}

// existingPartitions returns the partition count of a stream as the server
// has it: 0 when it does not exist or has no partition transform.
func (l *Log) existingPartitions(ctx context.Context, name string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	s, err := l.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: cannot read stream %s: %w", ErrUnavailable, name, err)
	}
	tr := s.CachedInfo().Config.SubjectTransform
	if tr == nil {
		return 0, nil
	}
	m := partitionDest.FindStringSubmatch(tr.Destination)
	if m == nil {
		return 0, nil
	}
	return strconv.Atoi(m[1])
}

// Partitions returns the number of partitions of a topic's stream, 0 when
// it is not partitioned.
func (l *Log) Partitions(topic string) int {
	head, _, _ := strings.Cut(topic, ".")
	if ref, ok := l.streams[head]; ok {
		return ref.partitions
	}
	return 0
}

// partitionRoute is where a reader of one partition of a stream topic
// reads: the partition's subjects, and the subjects messages were stored
// under before the stream was partitioned (the topic itself and its
// one-token sub-topics), which the reader must filter by key itself.
func (l *Log) partitionRoute(topic string, part int) (route, error) {
	r, err := l.route(topic)
	if err != nil {
		return route{}, err
	}
	if r.filters != nil {
		return route{}, fmt.Errorf("%w %q: partitions are read on a stream's topic, not a sub-topic", ErrUnknownTopic, topic)
	}
	n := r.stream.partitions
	if n == 0 {
		return route{}, fmt.Errorf("%w %q: the stream is not partitioned", ErrUnknownTopic, topic)
	}
	if part < 0 || part >= n {
		return route{}, fmt.Errorf("%w %q: partition %d is not in [0, %d)", ErrUnknownTopic, topic, part, n)
	}
	r.filters = []string{fmt.Sprintf("%s.%d.>", r.subject, part), r.subject, r.subject + ".*"}
	r.sub = "p" + strconv.Itoa(part)
	return r, nil
}

// keyRoute is where a reader of one key of a partitioned stream reads: the
// key's sub-topic (in its partition) and the stream's own subject, where
// messages were stored before the stream was partitioned (filtered by the
// reader).
func (l *Log) keyRoute(topic, key string) (route, error) {
	if strings.Contains(topic, ".") || key == "" || strings.Contains(key, ".") {
		return route{}, fmt.Errorf("%w %q: a key route needs a stream's topic and a one-token key, not %q", ErrUnknownTopic, topic, key)
	}
	r, err := l.route(topic + "." + key)
	if err != nil {
		return route{}, err
	}
	r.filters = append([]string{r.stream.subject}, r.filters...)
	return r, nil
}

// Legacy reports whether a delivered message was stored before its
// stream was partitioned (on the topic's own subject or a one-token
// sub-topic), so that a partition reader must check its key itself.
func Legacy(m *message.Message) bool {
	return strings.Count(m.Metadata.Get(MetaSubject), ".") < 3
}

// SubscribePartitionAfter reads partition part of a partitioned topic from
// the first message after log position seq, in replay mode (as
// SubscribeAfter). It delivers the partition's messages and those stored
// before the stream was partitioned (Legacy), whose keys the reader checks
// with PartitionOf.
func (s *Subscriber) SubscribePartitionAfter(ctx context.Context, topic string, part int, seq uint64) (<-chan *message.Message, error) {
	if !s.cfg.Replay() {
		return nil, fmt.Errorf("cannot read partition %d of topic %q: a consumer group cannot; use a replay-mode subscriber", part, topic)
	}
	r, err := s.log.partitionRoute(topic, part)
	if err != nil {
		return nil, err
	}
	// Without messages stored before partitioning after seq, read the
	// partition's subjects alone: a consumer with one filter costs the
	// server less per message than one with several.
	legacy, err := s.log.lastSeq(ctx, route{stream: r.stream, topic: topic, filters: r.filters[1:]})
	if err != nil {
		return nil, err
	}
	if legacy <= seq {
		r.filters = r.filters[:1]
	}
	return s.subscribeRoute(ctx, r, seq)
}

// SubscribeKeyAfter reads the messages of one key of a topic (its
// sub-topic "<topic>.<key>", in whichever partition), and those stored on
// the topic itself, from the first message after seq, in replay mode: a
// replay of one project reads its own messages only, wherever the
// partitioning put them.
func (s *Subscriber) SubscribeKeyAfter(ctx context.Context, topic, key string, seq uint64) (<-chan *message.Message, error) {
	if !s.cfg.Replay() {
		return nil, fmt.Errorf("cannot read key %q of topic %q: a consumer group cannot; use a replay-mode subscriber", key, topic)
	}
	r, err := s.log.keyRoute(topic, key)
	if err != nil {
		return nil, err
	}
	return s.subscribeRoute(ctx, r, seq)
}

// PurgePartition removes the messages of partition part of a partitioned
// topic stored before log position below (below itself is kept): the
// processor does it once their batches are committed to tables and past
// the log's retention. Messages stored before the stream was partitioned
// are not touched.
func (l *Log) PurgePartition(ctx context.Context, topic string, part int, below uint64) error {
	if l.isClosed() {
		return ErrClosed
	}
	r, err := l.partitionRoute(topic, part)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if err := r.stream.handle.Purge(ctx, jetstream.WithPurgeSubject(r.filters[0]), jetstream.WithPurgeSequence(below)); err != nil {
		return fmt.Errorf("%w: cannot purge partition %d of topic %q below %d: %w", ErrUnavailable, part, topic, below, err)
	}
	return nil
}
