package tables

import "time"

// Partition labels. The events, visits and conversions tables are
// partitioned by day (DayName); people, identities and segment members by
// bucket of their key (BucketName); segments has the one partition
// SegmentsPartition.

// Buckets is the number of partitions of the people, identities and
// segment members tables.
const Buckets = 16

// BucketName returns the partition label of bucket b: b0 to bf.
func BucketName(b int) string { return "b" + string("0123456789abcdef"[b&15]) }

// SegmentsPartition is the one partition of the segments table.
const SegmentsPartition = "all"

// DayLayout is the layout of a day partition's label (YYYY-MM-DD).
const DayLayout = time.DateOnly

// DayName returns the label of the day partition of t, the day of t in
// t's location.
func DayName(t time.Time) string { return t.Format(DayLayout) }
