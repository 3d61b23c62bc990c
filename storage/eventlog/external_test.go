package eventlog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
)

// startServer runs a separate NATS server with JetStream, listening on
// 127.0.0.1 (port 0: a free one), the way an external deployment would.
func startServer(t *testing.T, storeDir string, port int) *server.Server {
	t.Helper()
	if port == 0 {
		port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "external-test",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("external NATS server not ready within 30s")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// waitFor polls cond until it returns nil, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 60s", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExternalServer connects to a separate server by nats:// URL, uses it,
// loses it (Check and Publish fail with ErrUnavailable within the timeout),
// and gets it back: the connection and a running subscriber recover.
func TestExternalServer(t *testing.T) {
	store := t.TempDir()
	ns := startServer(t, store, 0)
	port := ns.Addr().(*net.TCPAddr).Port
	ctx := context.Background()

	cfg := DefaultConfig()
	cfg.URL = ns.ClientURL()
	cfg.Timeout = 2 * time.Second
	l := openLog(t, cfg)
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if l.ClientURL() != "" {
		t.Fatalf("ClientURL %q on an external server, want empty", l.ClientURL())
	}
	pub := l.Publisher()
	r, err := pub.PublishOnce(ctx, "batches.p1", "b1", message.NewMessage("m1", []byte("one")))
	if err != nil || r != (Receipt{Seq: 1}) {
		t.Fatalf("PublishOnce: %+v, %v", r, err)
	}
	if r, err := pub.PublishOnce(ctx, "batches.p1", "b1", message.NewMessage("m1", []byte("one"))); err != nil || r != (Receipt{Seq: 1, Duplicate: true}) {
		t.Fatalf("PublishOnce again: %+v, %v", r, err)
	}
	sub, err := l.Subscriber(DefaultSubscriberConfig("processor"))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := sub.Subscribe(ctx, "batches")
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ch); m.UUID != "m1" {
		t.Fatalf("received %s, want m1", m.UUID)
	} else {
		m.Ack()
	}

	// The server goes away.
	ns.Shutdown()
	ns.WaitForShutdown()
	waitFor(t, "Check with the server down", func() error {
		if err := l.Check(ctx); !errors.Is(err, ErrUnavailable) {
			return fmt.Errorf("Check = %v, want ErrUnavailable", err)
		}
		return nil
	})
	if err := pub.Publish("batches.p1", message.NewMessage("lost", []byte("x"))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish with the server down: %v, want ErrUnavailable", err)
	}
	if _, err := pub.PublishOnce(ctx, "batches.p1", "b2", message.NewMessage("m2", []byte("two"))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PublishOnce with the server down: %v, want ErrUnavailable", err)
	}

	// It comes back on the same address with the same files.
	startServer(t, store, port)
	waitFor(t, "Check after the server came back", func() error { return l.Check(ctx) })
	var r2 Receipt
	waitFor(t, "PublishOnce after the server came back", func() error {
		var err error
		r2, err = pub.PublishOnce(ctx, "batches.p1", "b2", message.NewMessage("m2", []byte("two")))
		return err
	})
	if r2.Seq != 2 {
		t.Fatalf("receipt after the server came back: %+v, want seq 2", r2)
	}
	m := receive(t, ch)
	if m.UUID != "m2" || mustSeq(t, m) != 2 {
		t.Fatalf("after the server came back the subscriber got %s at %d, want m2 at 2", m.UUID, mustSeq(t, m))
	}
	m.Ack()
}

// TestGroupAcrossProcesses runs an embedded server with a TCP listener and a
// second log connected to it by URL, as a scaled-out mf process would: the
// two share the group's work, each message handled once.
func TestGroupAcrossProcesses(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.ListenAddr = "127.0.0.1:0"
	a := openLog(t, cfg)
	if a.ClientURL() == "" {
		t.Fatal("no ClientURL with ListenAddr set")
	}
	bcfg := DefaultConfig()
	bcfg.URL = a.ClientURL()
	b := openLog(t, bcfg)
	ctx := context.Background()

	got := make(chan string, 100)
	for _, l := range []*Log{a, b} {
		sub, err := l.Subscriber(DefaultSubscriberConfig("processor"))
		if err != nil {
			t.Fatal(err)
		}
		ch, err := sub.Subscribe(ctx, "batches")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for m := range ch {
				got <- m.UUID
				m.Ack()
			}
		}()
	}
	const n = 40
	for i := range n {
		pub := []*Log{a, b}[i%2].Publisher()
		if err := pub.Publish("batches.p", message.NewMessage(fmt.Sprintf("m%02d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range n {
		select {
		case id := <-got:
			if seen[id] {
				t.Fatalf("%s handled twice", id)
			}
			seen[id] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d messages handled within 30s", len(seen), n)
		}
	}
}

// TestExternalUnreachable: Open gives up after StartTimeout with
// ErrUnavailable when nothing listens.
func TestExternalUnreachable(t *testing.T) {
	ns := startServer(t, t.TempDir(), 0)
	url := ns.ClientURL()
	ns.Shutdown()
	ns.WaitForShutdown()
	cfg := DefaultConfig()
	cfg.URL = url
	cfg.StartTimeout = time.Second
	cfg.Timeout = time.Second
	l, err := Open(context.Background(), cfg, testLogger(t))
	if !errors.Is(err, ErrUnavailable) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("Open with nothing at %s: %v, want ErrUnavailable", url, err)
	}
}
