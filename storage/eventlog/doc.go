// Package eventlog is mf's durable log: Watermill publishers and subscribers
// over NATS JetStream, either an in-process server with file storage (the
// embedded default) or an external server or cluster. Streams and durable
// consumers are created on start; a publish returns only once JetStream has
// stored the message.
package eventlog
