// Package storage owns mf's durable state below the services: the object
// store (the Bucket interface with a local-directory and an S3/MinIO backend),
// and, in its subpackages, the Watermill log over NATS JetStream (eventlog)
// and the catalog of organizations, users, keys, projects, sources, actions,
// funnels, segments, flags and providers (catalog).
//
// Every Bucket implementation passes storagetest.Acceptance.
package storage
