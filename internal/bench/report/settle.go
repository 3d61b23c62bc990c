package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
)

// settleRounds bounds the compaction rounds of settle: one round merges
// every quiet partition (a keyed one whole, another up to
// CompactTargetBytes a file), a second finds nothing left.
const settleRounds = 4

// fileCount counts the live data files of each table of project.
func fileCount(ctx context.Context, st *rollups.Store, project string) (map[string]int, int, error) {
	m, err := st.Load(ctx, rollups.Live(project))
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read the manifest of %s: %w", project, err)
	}
	out := map[string]int{}
	total := 0
	for name, ts := range m.Tables {
		for _, part := range ts.PartitionNames() {
			out[name] += len(ts.Partitions[part])
			total += len(ts.Partitions[part])
		}
	}
	return out, total, nil
}

// settle compacts every partition of project the way the processor does
// once a partition has been quiet for rollups.Config.CompactQuietAfter
// (an hour by default): a keyed partition merges all its files into its
// live rows, another its small files into as few as fit. It is what the
// tables of a live system look like an hour after a load ends; a build
// ends with partitions that are unsettled only because it just wrote
// them. The dataset in the bucket is changed for good (the replaced files
// are retired).
func settle(ctx context.Context, b storage.Bucket, project string, logger *slog.Logger, out io.Writer) error {
	cfg := rollups.DefaultConfig()
	quiet := cfg.CompactQuietAfter
	cfg.CompactQuietAfter = time.Nanosecond // every partition counts as quiet, as it would an hour on
	st, err := rollups.NewStore(b, cfg, logger)
	if err != nil {
		return fmt.Errorf("cannot open the tables for settling: %w", err)
	}
	before, nb, err := fileCount(ctx, st, project)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var sum rollups.CompactStats
	for range settleRounds {
		cs, err := st.Compact(ctx, rollups.Live(project))
		if err != nil {
			return fmt.Errorf("cannot settle the tables: %w", err)
		}
		sum.Merges += cs.Merges
		sum.Inputs += cs.Inputs
		sum.Rows += cs.Rows
		sum.PeakBytes = max(sum.PeakBytes, cs.PeakBytes)
		if cs.Merges == 0 {
			break
		}
	}
	after, na, err := fileCount(ctx, st, project)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "settled the tables as the processor does once a partition is quiet for %v: %d merges of %d files (%d rows) in %.1f s; live files %d -> %d",
		quiet, sum.Merges, sum.Inputs, sum.Rows, time.Since(t0).Seconds(), nb, na)
	for _, name := range []string{"people", "identities", "visits", "conversions", "events"} {
		if before[name] > 0 {
			fmt.Fprintf(out, " (%s %d -> %d)", name, before[name], after[name])
		}
	}
	fmt.Fprintln(out)
	// What the merges held is not the API's: the peak RSS printed after
	// the timing starts here.
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	return nil
}

// resetPeakRSS resets the kernel's peak resident set size of this process
// (Linux: writing 5 to /proc/self/clear_refs), so that peakRSS reports
// the peak from here on; a no-op elsewhere.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
