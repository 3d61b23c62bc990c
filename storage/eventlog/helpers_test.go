package eventlog

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// testLogger writes the log's own lines (debug level) to stderr when
// MF_TEST_LOG=1, and discards them otherwise.
func testLogger(testing.TB) *slog.Logger {
	if os.Getenv("MF_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is DefaultConfig on dir.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	return cfg
}

// openLog opens a log and closes it when the test ends.
func openLog(t testing.TB, cfg Config) *Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := Open(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// receive reads one message from ch, failing the test after a generous
// deadline.
func receive(t testing.TB, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("subscription channel closed early")
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message within 30s")
	}
	return nil
}

// mustSeq returns the log position of a delivered message.
func mustSeq(t testing.TB, m *message.Message) uint64 {
	t.Helper()
	seq, ok := Seq(m)
	if !ok {
		t.Fatalf("message %s has no %s metadata: %v", m.UUID, MetaSeq, m.Metadata)
	}
	return seq
}
