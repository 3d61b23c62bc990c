// Package processor holds the Watermill consumer that turns accepted
// batches into facts: visits, identities and people, channels, goals and
// revenue, saved-segment membership; their checkpoints; and replay.
//
// Processor reads the log's batches topic from its watermark, holding the
// processor lease on the log, and keeps, per project, the tables of
// Tables() in the rollups store:
// every commit writes the partitions that changed together with the
// project's checkpoint, so that redelivery, a crash or a restart never
// loses or double-counts anything. Replay rebuilds a project's tables from
// its archive (or the log) into a staged generation and promotes it
// atomically. Segments answers saved-segment membership lookups for the
// flag service.
//
// The facts themselves are derived by the pure engine in internal/facts,
// from the set of a project's events whatever their order; channels come
// from internal/channels with Matomo's referrer lists. docs/processor.md
// describes the rules, the tables and the exactly-once design.
//
// It imports storage (the log, the catalog, the object store) and rollups,
// with rollups/tables for the tables it writes (names, schemas, partition
// labels); never ingest or api.
package processor
