// Package eventlog is mf's durable log: Watermill publishers and subscribers
// over NATS JetStream, on an in-process server with file storage (the
// embedded default) or on an external server or cluster (--log nats://...).
//
// Open starts or connects to the server and creates or updates the streams
// of the stream table (DefaultStreams: "batches", "catalog") and their
// durable consumer groups. A Publisher returns only once the server has
// stored the message (its PubAck): ingest's "durable before 202".
// PublishOnce stores a message under a dedupe id and reports a duplicate
// with the first message's sequence; GetMsg reads a stored message back.
//
// A Subscriber either joins a durable consumer group (processes sharing a
// group share its work and its position, which survives restarts; the
// consumer is never deleted) or, with an empty group, replays a topic from
// its first message (the catalog). Delivered messages carry their log
// position in the metadata key MetaSeq.
//
// The adapter passes Watermill's pubsub/tests.TestPubSub in both modes.
// docs/log.md describes streams, subjects, headers, metadata keys,
// consumers and the fsync policy, with measurements.
package eventlog
