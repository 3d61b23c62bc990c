// Package ingest is the /v1 service: batch intake (decoding, validation,
// authentication, CORS, rate limits, idempotency, enrichment at the edge),
// flag documents (compiler and endpoints), segment lookups, and the Go client
// of the /v1 service.
package ingest
