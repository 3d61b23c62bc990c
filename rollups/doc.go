// Package rollups owns the tables in object storage: Arrow schemas, Parquet
// encoding, the object layout, per-project manifests committed atomically,
// compaction, and cached readers.
//
// A table (Table) has a name, a flat Arrow schema and a sort key. Writers
// store rows as immutable Parquet files (Store.Write), partitioned by
// project and day, and make them visible with a commit (Store.Commit,
// Store.Update): one conditional put of the project's manifest, which lists
// every live file and the consumers' checkpoints, so data and checkpoints
// become visible together or not at all. Store.Compact merges small files,
// Store.Collect deletes files no manifest needs, and generations
// (Store.StartGeneration, Store.Promote) let a replay rebuild a project's
// tables while readers keep reading the old ones.
//
// Readers (Reader) accept a read-only storage.BucketReader, keep each
// project's latest manifest fresh within ReaderConfig.Freshness by polling
// its ETag, and scan tables by day range, columns and key range through a
// byte-bounded cache of decoded column data. A snapshot from
// Reader.SnapshotRoot reads the manifest's root only and fetches a group
// of partitions when a call first needs it (snapshot.go), so opening a
// project costs the period read, not its history.
//
// The processor's tables themselves (names, columns, schemas, partition
// labels and column accessors) are the contract of the subpackage
// rollups/tables, which the processor writes and the reporting API reads.
//
// It imports storage only (and Arrow and Parquet); it knows nothing of
// the processor or the api.
//
// The object layout, manifest format and protocols are described in
// docs/rollups.md.
package rollups
