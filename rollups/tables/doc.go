// Package tables is the contract of the tables the processor writes and
// the reporting API reads (docs/processor.md, "Tables"): their names
// (Events, Visits, …), column names (Col…), Arrow schemas and definitions
// (All), the partition labels (DayName, BucketName, SegmentsPartition), the
// rev of a keyed row (RevOf), and the accessors that read a scanned
// record's columns (StrAt, RefAt, …) with one behaviour on both sides.
//
// Writers (processor) and readers (api) import this package; it imports
// rollups, Arrow and the standard library only.
package tables
