// Package records is the format of accepted batches on the log: what ingest
// writes once a batch has been decoded, validated, normalized and enriched,
// and what the processor reads back. It imports nothing of mf, so both sides
// depend on it and on nothing of each other.
//
// A record is one Batch: where it came from (project, source, source kind),
// the collection mode it is stored under, the batch id and receipt, the edge
// fields derived from the request (never the client address) and the
// normalized events. Encode and Decode turn it into bytes and back; the byte
// layout, version 1, is described in docs/records.md.
package records
