// Package ingest is the /v1 service: batch intake (decoding, validation,
// authentication, CORS, rate limits, idempotency, enrichment at the edge),
// flag documents (compiler and endpoints), segment lookups, and the Go client
// of the /v1 service.
//
// It imports storage (the log it appends accepted batches to, through
// eventlog.NewBatchMessage; the catalog), evaluator and wasm; never
// processor, rollups or api. Its Go client (ingest/client) imports only
// evaluator and storage/records, both standard-library only; the browser
// module has no runtime dependencies. ingest/internal/flagstack, the /v1
// service on real parts for the tests and the flag load generator, is
// built on internal/apptest (the storage parts every package's tests use).
package ingest
