// Package rollups owns the tables in object storage: Arrow schemas, Parquet
// encoding, the object layout, per-project manifests committed atomically,
// compaction, and cached readers.
package rollups
