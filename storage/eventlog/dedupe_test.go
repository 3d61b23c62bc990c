package eventlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestDedupe publishes under the same dedupe id twice: the second is not
// stored and its receipt names the first's sequence, also after a restart
// (the server rebuilds its window of ids from the stored messages).
func TestDedupe(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l, err := Open(ctx, testConfig(dir), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	pub := l.Publisher()
	once := func(l *Log, topic, id, body string) Receipt {
		t.Helper()
		r, err := l.Publisher().PublishOnce(ctx, topic, id, message.NewMessage("uuid-"+body, []byte(body)))
		if err != nil {
			t.Fatalf("PublishOnce(%s, %s): %v", topic, id, err)
		}
		return r
	}
	want := func(got, want Receipt) {
		t.Helper()
		if got != want {
			t.Fatalf("receipt %+v, want %+v", got, want)
		}
	}
	want(once(l, "batches.p1", "batch-1", "first"), Receipt{Seq: 1})
	// Same id, other body, other sub-topic of the same stream: not stored.
	want(once(l, "batches.p1", "batch-1", "second"), Receipt{Seq: 1, Duplicate: true})
	want(once(l, "batches.p2", "batch-1", "third"), Receipt{Seq: 1, Duplicate: true})
	want(once(l, "batches.p1", "batch-2", "fourth"), Receipt{Seq: 2})
	// Ids are per stream.
	want(once(l, "catalog", "batch-1", "catalog"), Receipt{Seq: 1})
	// A plain Publish is never deduplicated.
	if err := pub.Publish("batches.p1", message.NewMessage("x", []byte("x")), message.NewMessage("x", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if last, err := l.LastSeq(ctx, "batches"); err != nil || last != 4 {
		t.Fatalf("LastSeq = %d, %v; want 4", last, err)
	}
	first, err := l.GetMsg(ctx, "batches.p1", 1)
	if err != nil || string(first.Payload) != "first" || first.UUID != "uuid-first" {
		t.Fatalf("GetMsg(1) = %v, %v; want the first body", first, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, testConfig(dir))
	want(once(l, "batches.p1", "batch-1", "after restart"), Receipt{Seq: 1, Duplicate: true})
	want(once(l, "batches.p1", "batch-2", "after restart"), Receipt{Seq: 2, Duplicate: true})
	want(once(l, "batches.p1", "batch-3", "new"), Receipt{Seq: 5})

	// The configured window is the stream's.
	info, err := l.streams["batches"].handle.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Duplicates != 24*time.Hour {
		t.Fatalf("batches dedupe window %s, want 24h", info.Config.Duplicates)
	}
}

// TestDedupeWindow shows that an id is accepted again once the stream's
// Duplicates window has passed.
func TestDedupeWindow(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Streams = append(cfg.Streams, Stream{Topic: "short", Duplicates: time.Second})
	l := openLog(t, cfg)
	ctx := context.Background()
	pub := l.Publisher()
	r, err := pub.PublishOnce(ctx, "short", "id", message.NewMessage("a", nil))
	if err != nil || r != (Receipt{Seq: 1}) {
		t.Fatalf("first publish: %+v, %v", r, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := pub.PublishOnce(ctx, "short", "id", message.NewMessage("a", nil))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Duplicate {
			if r.Seq != 2 {
				t.Fatalf("publish after the window: %+v, want seq 2", r)
			}
			return
		}
		if r.Seq != 1 {
			t.Fatalf("duplicate within the window: %+v, want seq 1", r)
		}
		if time.Now().After(deadline) {
			t.Fatal("the id is still a duplicate 30s after a 1s window")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPublishErrors covers the caller's mistakes: they fail with their own
// sentinel, not ErrUnavailable, and store nothing.
func TestPublishErrors(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxPayload = 64 << 10
	l := openLog(t, cfg)
	ctx := context.Background()
	pub := l.Publisher()
	cases := []struct {
		name string
		err  error
		do   func() error
	}{
		{"unknown topic", ErrUnknownTopic, func() error { return pub.Publish("visits", message.NewMessage("a", nil)) }},
		{"bad sub-topic", ErrUnknownTopic, func() error { return pub.Publish("batches.a*", message.NewMessage("a", nil)) }},
		{"too large", ErrTooLarge, func() error { return pub.Publish("batches", message.NewMessage("a", make([]byte, 65<<10))) }},
		{"empty dedupe id", ErrBadMessage, func() error {
			_, err := pub.PublishOnce(ctx, "batches", "", message.NewMessage("a", nil))
			return err
		}},
		{"dedupe id with a line break", ErrBadMessage, func() error {
			_, err := pub.PublishOnce(ctx, "batches", "a\nb", message.NewMessage("a", nil))
			return err
		}},
		{"GetMsg of nothing", ErrNotFound, func() error { _, err := l.GetMsg(ctx, "batches", 7); return err }},
		{"GetMsg of seq 0", ErrNotFound, func() error { _, err := l.GetMsg(ctx, "batches", 0); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if !errors.Is(err, c.err) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v, want %v", err, c.err)
			}
		})
	}
	if last, err := l.LastSeq(ctx, "batches"); err != nil || last != 0 {
		t.Fatalf("LastSeq = %d, %v; want 0", last, err)
	}
	// A message of another sub-topic is not found under this one.
	if err := pub.Publish("batches.p1", message.NewMessage("a", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.GetMsg(ctx, "batches.p2", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetMsg of another sub-topic: %v, want ErrNotFound", err)
	}
	if last, err := l.LastSeq(ctx, "batches.p2"); err != nil || last != 0 {
		t.Fatalf("LastSeq(batches.p2) = %d, %v; want 0", last, err)
	}
	if last, err := l.LastSeq(ctx, "batches.p1"); err != nil || last != 1 {
		t.Fatalf("LastSeq(batches.p1) = %d, %v; want 1", last, err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("batches", message.NewMessage("a", nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}
}

// TestDirLock refuses a second embedded log on the same directory.
func TestDirLock(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l, err := Open(ctx, testConfig(dir), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if l2, err := Open(ctx, testConfig(dir), testLogger(t)); !errors.Is(err, ErrDirLocked) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("second Open on the same directory: %v, want ErrDirLocked", err)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Check after Close: %v, want ErrClosed", err)
	}
	if _, err := l.LastSeq(ctx, "batches"); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastSeq after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	openLog(t, testConfig(dir))
}
