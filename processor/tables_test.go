package processor

import (
	"testing"
	"time"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups/tables"
)

// The engine's day labels are the table contract's (its buckets are the
// contract's own: facts.Buckets is tables.Buckets, labelled by
// tables.BucketName).
func TestPartitionLabelsAreTheContracts(t *testing.T) {
	for _, day := range []int32{0, 1, 19000, 20000, 20500} {
		want := tables.DayName(time.Unix(int64(day)*86400, 0).UTC())
		if got := facts.DayName(day); got != want {
			t.Errorf("day %d: engine labels it %q, the contract %q", day, got, want)
		}
	}
}
