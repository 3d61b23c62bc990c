package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressLines: without a terminal, progress is a line every few
// seconds, with percentage, rate and ETA, and a last line when done.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pp := newProgressPrinter(&buf, "replay", func() time.Time { return clock })
	for i := int64(1); i <= 10; i++ {
		clock = clock.Add(time.Second)
		pp.update(replayProgress{Phase: "reading", BytesRead: i << 20, BytesTotal: 20 << 20})
	}
	clock = clock.Add(time.Second)
	pp.done(replayProgress{Phase: "writing", BytesRead: 19 << 20, BytesTotal: 20 << 20, FilesWritten: 3, BytesWritten: 5 << 20}, true)
	want := []string{
		"replay: reading, 5% (1.0 MiB of 20.0 MiB, 1.0 MiB/s, ETA 19s), 0 files written (0.0 KiB), 1s elapsed",
		"replay: reading, 30% (6.0 MiB of 20.0 MiB, 1.0 MiB/s, ETA 14s), 0 files written (0.0 KiB), 6s elapsed",
		"replay: done, 100% (19.0 MiB of 19.0 MiB, 1.7 MiB/s, ETA 0s), 3 files written (5.0 MiB), 11s elapsed",
	}
	if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("progress lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
