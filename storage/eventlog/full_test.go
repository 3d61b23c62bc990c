package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestFullStreamRefusesAndRecovers fills a batches stream capped at 64 KiB:
// publishes past the cap fail with ErrFull (not ErrUnavailable, and at
// once: a full stream is not retried), nothing stored is removed to make
// room, a resend of a stored id is still answered as a duplicate, and a
// purge of the partition gives room back. The cap survives a restart
// (Open keeps a configured MaxBytes, DiscardNew).
func TestFullStreamRefusesAndRecovers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Streams[0].MaxBytes = 64 << 10
	l := openLog(t, cfg)
	if got := l.MaxBytes(TopicBatches); got != 64<<10 {
		t.Fatalf("MaxBytes(batches) = %d, want %d", got, 64<<10)
	}
	pub := l.Publisher()
	ctx := context.Background()
	payload := []byte(strings.Repeat("x", 4000))
	const project = "p1"
	topic := TopicBatches + "." + project
	stored := 0
	var full error
	for i := range 100 {
		start := time.Now()
		_, err := pub.PublishOnce(ctx, topic, fmt.Sprintf("b%d", i), message.NewMessage(fmt.Sprintf("m%d", i), payload))
		if err != nil {
			if took := time.Since(start); took > time.Second {
				t.Errorf("a refused publish took %v: a full stream must answer at once", took)
			}
			full = err
			break
		}
		stored++
	}
	if !errors.Is(full, ErrFull) || errors.Is(full, ErrUnavailable) {
		t.Fatalf("publish past the cap: %v, want ErrFull only", full)
	}
	if stored < 10 || stored > 16 {
		t.Fatalf("%d messages of 4000 bytes stored under a 64 KiB cap, want 10 to 16", stored)
	}
	r, err := pub.PublishOnce(ctx, topic, "b0", message.NewMessage("again", payload))
	if err != nil || !r.Duplicate || r.Seq != 1 {
		t.Fatalf("resend of a stored id on a full stream: %+v, %v; want the duplicate of seq 1", r, err)
	}
	stats, err := l.StreamStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Topic == TopicBatches && (s.Messages != uint64(stored) || s.FirstSeq != 1 || s.MaxBytes != 64<<10) {
			t.Fatalf("full stream holds %+v, want all %d messages from seq 1, cap 64 KiB", s, stored)
		}
	}
	part := PartitionOf(project, DefaultPartitions)
	if err := l.PurgePartition(ctx, TopicBatches, part, uint64(stored/2)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.PublishOnce(ctx, topic, "after-purge", message.NewMessage("after", payload)); err != nil {
		t.Fatalf("publish after a purge gave room back: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, cfg)
	if got := l2.MaxBytes(TopicBatches); got != 64<<10 {
		t.Fatalf("after a restart MaxBytes(batches) = %d, want %d", got, 64<<10)
	}
}

// TestAutoMaxBytes: the chosen cap is half of what the server may store
// (at least 64 MiB), above what the stream holds, never above the server's
// limit.
func TestAutoMaxBytes(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ held, maxStore, want int64 }{
		{0, 0, 0},
		{0, -1, 0},
		{0, 1000 * mib, 500 * mib},
		{300 * mib, 1000 * mib, 800 * mib},
		{900 * mib, 1000 * mib, 1000 * mib},
		{0, 100 * mib, 64 * mib},
		{0, 40 * mib, 40 * mib},
	} {
		if got := AutoMaxBytes(c.held, c.maxStore); got != c.want {
			t.Errorf("AutoMaxBytes(%d MiB, %d MiB) = %d MiB, want %d MiB", c.held/mib, c.maxStore/mib, got/mib, c.want/mib)
		}
	}
}

// TestAutoMaxBytesEmbedded: an embedded log without a configured cap
// gives the batches stream the automatic one, and refuses new messages
// at it rather than dropping old ones (the catalog keeps no cap).
func TestAutoMaxBytesEmbedded(t *testing.T) {
	l := openLog(t, testConfig(t.TempDir()))
	want := AutoMaxBytes(0, l.ns.JetStreamConfig().MaxStore)
	if got := l.MaxBytes(TopicBatches); got != want || got == 0 {
		t.Fatalf("MaxBytes(batches) = %d, want %d", got, want)
	}
	if got := l.MaxBytes(TopicCatalog); got != 0 {
		t.Fatalf("MaxBytes(catalog) = %d, want no cap", got)
	}
	info, err := l.streams[TopicBatches].handle.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Discard.String() != "DiscardNew" {
		t.Fatalf("batches discard policy %s, want DiscardNew", info.Config.Discard)
	}
}

// TestFullStreamExternal: on an external server the stream keeps the cap
// one process gave it when another opens the log without one (it cannot
// choose a cap for disks it does not see), and refuses at it with ErrFull;
// without any cap given, the stream has none.
func TestFullStreamExternal(t *testing.T) {
	ns := startServer(t, t.TempDir(), 0)
	ctx := context.Background()
	none := DefaultConfig()
	none.URL = ns.ClientURL()
	if got := openLog(t, none).MaxBytes(TopicBatches); got != 0 {
		t.Fatalf("external stream with no cap given: MaxBytes %d, want 0", got)
	}
	capped := none
	capped.Streams = DefaultStreams()
	capped.Streams[0].MaxBytes = 64 << 10
	if got := openLog(t, capped).MaxBytes(TopicBatches); got != 64<<10 {
		t.Fatalf("MaxBytes %d after a process gave 64 KiB", got)
	}
	l := openLog(t, none)
	if got := l.MaxBytes(TopicBatches); got != 64<<10 {
		t.Fatalf("a process without a cap lifted it: MaxBytes %d, want %d", got, 64<<10)
	}
	payload := make([]byte, 4000)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = l.Publisher().PublishOnce(ctx, "batches.p1", fmt.Sprintf("b%d", i), message.NewMessage(fmt.Sprintf("m%d", i), payload))
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("publish past the cap on an external server: %v, want ErrFull", err)
	}
}
