package eventlog

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// SyncPolicy says when the embedded server forces stored messages to disk
// (fsync). Every policy writes a message to its file before the PubAck, so a
// published message survives a crash of the process; the policy decides what
// survives a power loss or a kernel crash.
type SyncPolicy string

const (
	// SyncPolicyInterval fsyncs every Config.SyncInterval in the background.
	// A power loss can lose the messages of the last interval. The default.
	SyncPolicyInterval SyncPolicy = "interval"
	// SyncPolicyAlways fsyncs every message before its PubAck, so an
	// acknowledged message survives a power loss. Slower; see docs/log.md.
	SyncPolicyAlways SyncPolicy = "always"
)

// Topics of mf's streams.
const (
	// TopicBatches carries accepted ingest batches, one message per batch,
	// published with the batch id as dedupe id. Ingest publishes to
	// "batches.<project id>"; the stream is partitioned by project, and
	// each processor reads the partitions it holds. NewBatchMessage builds
	// the message (BatchSubject, BatchDedupeID).
	TopicBatches = "batches"
	// TopicCatalog carries catalog change events. Kept forever; every
	// process reads all of it from the start (SubscriberConfig.Group "").
	TopicCatalog = "catalog"
)

// Config configures the log. The zero value is not usable: start from
// DefaultConfig.
type Config struct {
	// URL selects the server. "" runs an embedded NATS server in this
	// process with its files under Dir. Otherwise a comma-separated list of
	// nats://host:port (or tls://host:port) addresses of an external NATS
	// server or cluster with JetStream enabled (contract flag --log).
	URL string

	// CredsFile is a NATS credentials file (a user JWT and its NKey
	// seed) to authenticate to an external server (--log-creds). NKeyFile
	// is a file holding an NKey user seed instead (--log-nkey). At most
	// one of the two.
	CredsFile, NKeyFile string

	// TLSCAFile holds the PEM certificates of the CAs that sign an external
	// server's certificate (--log-tls-ca); setting it turns TLS on for
	// nats:// URLs as tls:// does. TLSCertFile and TLSKeyFile are a client
	// certificate and its key, for servers that verify their clients.
	// Without a CA file, a tls:// URL is checked against the system's CAs.
	TLSCAFile, TLSCertFile, TLSKeyFile string

	// Dir is where the embedded server keeps its files (its JetStream store
	// directory). Required when URL is "", ignored otherwise. One process
	// at a time may use a Dir: Open locks it.
	Dir string

	// Sync is the fsync policy of the embedded server: SyncPolicyInterval
	// (default) or SyncPolicyAlways. An external server syncs as its own
	// configuration says (jetstream { sync_interval: always }), so
	// SyncPolicyAlways with a URL is refused rather than silently ignored.
	Sync SyncPolicy

	// SyncInterval is how often the embedded server fsyncs under
	// SyncPolicyInterval. Default 1s (JetStream's own default is 2m).
	SyncInterval time.Duration

	// ListenAddr, when set, makes the embedded server accept NATS clients
	// on this TCP address too (e.g. "127.0.0.1:4222", port 0 picks a free
	// one), for the nats CLI or other processes. "" (default): in-process
	// connections only, no port is opened.
	ListenAddr string

	// MaxPayload is the largest message (payload plus headers, in bytes)
	// the embedded server accepts. Default 8 MiB, room for a 1 MiB batch
	// after enrichment. An external server's max_payload applies instead;
	// Open reports it in the log.
	MaxPayload int32

	// Timeout bounds every request to the server: each publish (until the
	// PubAck), each health check, each stream or consumer operation.
	// Default 5s.
	Timeout time.Duration

	// StartTimeout bounds how long Open waits for the embedded server to
	// recover its store and become ready, or for the first connection to an
	// external server. Default 2m (recovery reads the dedupe window back).
	StartTimeout time.Duration

	// Replicas is the number of copies each stream keeps (contract flag
	// --log-replicas); a publish is acknowledged once a majority has the
	// message. 0 (the default) chooses: 1 on the embedded server, 3 on an
	// external cluster, at most as many as the servers the client knows
	// of (one external server: 1). Open raises the replicas of streams
	// created with fewer.
	Replicas int

	// Prefix is the first token of every subject and, upper-cased, of every
	// stream name, so that several deployments can share one cluster.
	// Lower-case letters, digits and '-'. Default "mf".
	Prefix string

	// Streams is the table of streams Open creates or updates, with the
	// durable consumers it creates up front. Default DefaultStreams().
	Streams []Stream
}

// Stream describes one JetStream stream and the topics it carries: the
// topic Topic itself and its sub-topics "Topic.<token>[.<token>...]".
type Stream struct {
	// Topic names the stream's topic. Lower-case letters, digits and '-',
	// starting with a letter.
	Topic string

	// Duplicates is the window within which a message published again with
	// the same dedupe id (Nats-Msg-Id) is recognized and not stored twice.
	// 0 takes JetStream's default of 2 minutes. At most MaxAge when MaxAge is
	// set. The server keeps every id of the window in memory and reads the
	// window back from disk when it starts.
	Duplicates time.Duration

	// MaxAge removes messages older than this. 0 keeps them forever.
	MaxAge time.Duration

	// MaxBytes caps the stream's size; the oldest messages go first (see
	// RefuseWhenFull). 0 means no cap, or with RefuseWhenFull the cap
	// Open chooses (AutoMaxBytes).
	MaxBytes int64

	// RefuseWhenFull makes a stream at MaxBytes refuse new messages (a
	// publish fails with ErrFull) instead of removing its oldest ones:
	// nothing stored is ever dropped to make room. Room returns when
	// messages are purged (the processor purges committed batches past
	// their retention). With MaxBytes 0 the cap is chosen at Open: see
	// AutoMaxBytes.
	RefuseWhenFull bool

	// Consumers are durable consumer groups on the whole topic, created (or
	// updated to this configuration) by Open.
	Consumers []Consumer

	// Partitions, when set, splits the stream's sub-topics into this many
	// partitions: a message published to "<topic>.<key>" is stored under
	// "<topic>.<n>.<key>", n = PartitionOf(key, Partitions), by a subject
	// transform of the server. The count is fixed once the stream is
	// partitioned (a stream created earlier keeps its own). 0: none.
	Partitions int
}

// DefaultPartitions is the partition count of the batches stream.
const DefaultPartitions = 32

// Consumer configures a durable consumer group: every Subscriber with the
// same Group shares its position and its work.
type Consumer struct {
	// Group names the durable consumer. Letters, digits, '_' and '-'.
	Group string

	// AckWait is how long the server waits for the ack of a delivered
	// message before it delivers it again. A subscriber extends it while its
	// handler still holds the message (it sends "in progress" every
	// AckWait/2), so AckWait is the time to notice a process that died
	// holding a message, not a limit on handling time. Default 30s.
	AckWait time.Duration

	// MaxAckPending is how many delivered messages may be unacknowledged at
	// once across the whole group: the window a subscriber fetches ahead
	// while its handler works and its acks travel. Log order is kept for
	// any window: one subscriber of the group at a time receives messages
	// (the pinned one, see PinnedTTL), it hands them out one at a time in
	// log order, and it redelivers a nacked message itself before the next
	// one. Default 1024.
	MaxAckPending int

	// PinnedTTL is how long the group's server waits for the subscriber it
	// delivers to (the pinned one) to ask for messages before it lets
	// another subscriber of the group take over. A subscriber asks at least
	// every PinnedTTL/3 while it runs and hands the group over at once when
	// it closes, so this is the time to notice a dead process. 0 or at
	// least 3s; 0 means 30s, the default.
	PinnedTTL time.Duration
}

// DefaultStreams returns mf's table of streams. Add a stream here to make it
// part of every deployment.
func DefaultStreams() []Stream {
	return []Stream{
		{
			Topic:          TopicBatches,
			Duplicates:     24 * time.Hour,
			Partitions:     DefaultPartitions,
			RefuseWhenFull: true,
		},
		{
			Topic: TopicCatalog,
		},
	}
}

// DefaultConsumer returns the default configuration of a durable consumer
// group.
func DefaultConsumer(group string) Consumer {
	return Consumer{Group: group, AckWait: 30 * time.Second, MaxAckPending: 1024, PinnedTTL: 30 * time.Second}
}

// DefaultConfig returns the configuration of the embedded log. Set Dir (or
// URL) before use.
func DefaultConfig() Config {
	return Config{
		Sync:         SyncPolicyInterval,
		SyncInterval: time.Second,
		MaxPayload:   8 << 20,
		Timeout:      5 * time.Second,
		StartTimeout: 2 * time.Minute,
		Replicas:     0,
		Prefix:       "mf",
		Streams:      DefaultStreams(),
	}
}

// Embedded reports whether the configuration runs an in-process server.
func (c Config) Embedded() bool { return c.URL == "" }

// Validate reports the first setting that cannot work, saying how to fix it.
func (c Config) Validate() error {
	if c.Embedded() {
		if c.Dir == "" {
			return errors.New("log config: Dir is empty: the embedded log needs a directory for its files (or set URL to use an external NATS server)")
		}
		if c.ListenAddr != "" {
			if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
				return fmt.Errorf("log config: ListenAddr %q is not host:port: %w", c.ListenAddr, err)
			}
		}
		if c.CredsFile != "" || c.NKeyFile != "" || c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "" {
			return errors.New("log config: CredsFile, NKeyFile and TLS files apply to an external server (URL) only")
		}
		if c.MaxPayload < 1024 {
			return fmt.Errorf("log config: MaxPayload %d is too small: give at least 1024 bytes (default 8 MiB)", c.MaxPayload)
		}
	} else {
		if err := validateURL(c.URL); err != nil {
			return err
		}
		if c.CredsFile != "" && c.NKeyFile != "" {
			return errors.New("log config: CredsFile and NKeyFile are both set: authenticate with one")
		}
		if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
			return errors.New("log config: TLSCertFile and TLSKeyFile go together")
		}
		if c.Sync == SyncPolicyAlways {
			return errors.New("log config: Sync \"always\" applies to the embedded server only: configure sync_interval: always in the external server's jetstream block and leave Sync at its default")
		}
	}
	switch c.Sync {
	case SyncPolicyInterval:
		if c.SyncInterval <= 0 {
			return fmt.Errorf("log config: SyncInterval %s must be positive with Sync %q", c.SyncInterval, c.Sync)
		}
	case SyncPolicyAlways:
	default:
		return fmt.Errorf("log config: Sync %q is unknown: use %q or %q", c.Sync, SyncPolicyInterval, SyncPolicyAlways)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("log config: Timeout %s must be positive (default 5s)", c.Timeout)
	}
	if c.StartTimeout <= 0 {
		return fmt.Errorf("log config: StartTimeout %s must be positive (default 2m)", c.StartTimeout)
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return fmt.Errorf("log config: Replicas %d must be between 1 and 5 (0: 1 embedded, 3 on a cluster)", c.Replicas)
	}
	if c.Embedded() && c.Replicas > 1 {
		return fmt.Errorf("log config: Replicas %d needs a cluster: the embedded server keeps 1 copy", c.Replicas)
	}
	if !isLowerName(c.Prefix) {
		return fmt.Errorf("log config: Prefix %q must be lower-case letters, digits and '-', starting with a letter", c.Prefix)
	}
	if len(c.Streams) == 0 {
		return errors.New("log config: Streams is empty: start from DefaultStreams()")
	}
	seen := map[string]bool{}
	for i, s := range c.Streams {
		if !isLowerName(s.Topic) {
			return fmt.Errorf("log config: Streams[%d].Topic %q must be lower-case letters, digits and '-', starting with a letter", i, s.Topic)
		}
		if seen[s.Topic] {
			return fmt.Errorf("log config: Streams[%d].Topic %q is listed twice", i, s.Topic)
		}
		seen[s.Topic] = true
		if s.Duplicates < 0 || s.MaxAge < 0 || s.MaxBytes < 0 {
			return fmt.Errorf("log config: stream %q: Duplicates, MaxAge and MaxBytes must not be negative", s.Topic)
		}
		if s.Partitions < 0 || s.Partitions > 1024 {
			return fmt.Errorf("log config: stream %q: Partitions %d must be between 0 (none) and 1024", s.Topic, s.Partitions)
		}
		if s.MaxAge > 0 && s.Duplicates > s.MaxAge {
			return fmt.Errorf("log config: stream %q: Duplicates %s exceeds MaxAge %s: the dedupe window cannot outlive the messages", s.Topic, s.Duplicates, s.MaxAge)
		}
		groups := map[string]bool{}
		for j, cons := range s.Consumers {
			if err := cons.validate(); err != nil {
				return fmt.Errorf("log config: Streams[%d].Consumers[%d]: %w", i, j, err)
			}
			if groups[cons.Group] {
				return fmt.Errorf("log config: stream %q: consumer group %q is listed twice", s.Topic, cons.Group)
			}
			groups[cons.Group] = true
		}
	}
	return nil
}

func (c Consumer) validate() error {
	if !isGroupName(c.Group) {
		return fmt.Errorf("group %q must be 1 to 64 letters, digits, '_' or '-'", c.Group)
	}
	if c.AckWait < time.Second {
		return fmt.Errorf("group %q: AckWait %s must be at least 1s (default 30s)", c.Group, c.AckWait)
	}
	if c.MaxAckPending < 1 {
		return fmt.Errorf("group %q: MaxAckPending %d must be at least 1 (default 1024)", c.Group, c.MaxAckPending)
	}
	if c.PinnedTTL != 0 && c.PinnedTTL < 3*time.Second {
		return fmt.Errorf("group %q: PinnedTTL %s must be 0 (30s) or at least 3s", c.Group, c.PinnedTTL)
	}
	return nil
}

// validateURL checks the --log value: comma-separated nats:// or tls://
// addresses with a host and a port.
func validateURL(raw string) error {
	for part := range strings.SplitSeq(raw, ",") {
		part = strings.TrimSpace(part)
		if !strings.Contains(part, "://") {
			return fmt.Errorf("log config: URL element %q must start with nats:// (or tls://), as in nats://host:4222", redactURL(part))
		}
		u, err := url.Parse(part)
		if err != nil {
			return fmt.Errorf("log config: URL element %q cannot be parsed: %w", redactURL(part), err)
		}
		if u.Scheme != "nats" && u.Scheme != "tls" {
			return fmt.Errorf("log config: URL element %q must start with nats:// (or tls://), as in nats://host:4222", redactURL(part))
		}
		if u.Hostname() == "" || u.Port() == "" {
			return fmt.Errorf("log config: URL element %q needs a host and a port, as in nats://host:4222", redactURL(part))
		}
	}
	return nil
}

// redactURL hides user names and passwords in a URL list before it is
// logged or shown.
func redactURL(raw string) string {
	var parts []string
	for part := range strings.SplitSeq(raw, ",") {
		start := 0
		if i := strings.Index(part, "://"); i >= 0 {
			start = i + len("://")
		}
		if at := strings.LastIndex(part, "@"); at >= start {
			part = part[:start] + "xxxxx" + part[at:]
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ",")
}

// isLowerName reports whether s is a stream topic or prefix:
// [a-z][a-z0-9-]{0,31}.
func isLowerName(s string) bool {
	if s == "" || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return false
		}
	}
	return true
}

// isGroupName reports whether s is a consumer group: [A-Za-z0-9_-]{1,64}.
func isGroupName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return isTokenChars(s)
}

// isTokenChars reports whether every byte of s is a letter, digit, '_' or '-'.
func isTokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}
