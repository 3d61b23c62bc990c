// Package storage owns mf's durable state below the services: the object
// store (the Bucket interface with a local-directory and an S3/MinIO backend),
// and, in its subpackages, the Watermill log over NATS JetStream (eventlog)
// and the catalog of organizations, users, keys, projects, sources, actions,
// funnels, segments, flags and providers (catalog).
//
// Open picks the object store backend from a Config: a local directory (the
// embedded default) or an S3 URL (--store). Readers take a BucketReader,
// writers a Bucket. Conditional puts (PutIf with IfAbsent or IfMatch) are
// linearizable on both backends, across processes, so they can serve as
// commit points (manifests, checkpoints). docs/object-store.md describes
// the semantics, the ETags, the local layout and locking, and what an S3
// server must support.
//
// Every Bucket implementation passes storagetest.Acceptance.
//
// It imports the standard library and its drivers (minio-go, NATS,
// Watermill) only: every other package builds on it, and it on none of
// them.
package storage
