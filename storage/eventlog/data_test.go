package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

// readCases decodes a testdata file of cases.
func readCases[T any](t *testing.T, name string) []T {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("cannot read cases: %v", err)
	}
	var cases []T
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("cannot decode testdata/%s: %v", name, err)
	}
	if len(cases) == 0 {
		t.Fatalf("testdata/%s has no cases", name)
	}
	return cases
}

// TestConfigValidate applies each case's patch to DefaultConfig and checks
// what Validate says (testdata/config.json).
func TestConfigValidate(t *testing.T) {
	type tcase struct {
		Name   string
		Patch  json.RawMessage
		Error  string
		Absent string
	}
	for _, c := range readCases[tcase](t, "config.json") {
		t.Run(c.Name, func(t *testing.T) {
			cfg := DefaultConfig()
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(c.Patch, &fields); err != nil {
				t.Fatalf("bad patch: %v", err)
			}
			if _, ok := fields["Streams"]; ok {
				cfg.Streams = nil // replace the table, do not merge into it
			}
			if err := json.Unmarshal(c.Patch, &cfg); err != nil {
				t.Fatalf("bad patch: %v", err)
			}
			err := cfg.Validate()
			switch {
			case c.Error == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case c.Error != "" && err == nil:
				t.Fatalf("Validate: nil, want an error with %q", c.Error)
			case c.Error != "" && !strings.Contains(err.Error(), c.Error):
				t.Fatalf("Validate: %v, want an error with %q", err, c.Error)
			}
			if c.Absent != "" && err != nil && strings.Contains(err.Error(), c.Absent) {
				t.Fatalf("Validate: %v shows %q", err, c.Absent)
			}
		})
	}
}

// TestRoute resolves topics against the default stream table
// (testdata/topics.json): subject, stream, consumer filters and the durable
// name of group "processor".
func TestRoute(t *testing.T) {
	type tcase struct {
		Topic   string
		Subject string
		Stream  string
		Filters []string
		Durable string
		Error   string
	}
	cfg := DefaultConfig()
	l := &Log{cfg: cfg, streams: map[string]*streamRef{}}
	for _, s := range cfg.Streams {
		l.streams[s.Topic] = newStreamRef(cfg.Prefix, s)
	}
	for _, c := range readCases[tcase](t, "topics.json") {
		t.Run(c.Topic, func(t *testing.T) {
			r, err := l.route(c.Topic)
			if c.Error != "" {
				if err == nil || !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), c.Error) {
					t.Fatalf("route(%q): %v, want ErrUnknownTopic with %q", c.Topic, err, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("route(%q): %v", c.Topic, err)
			}
			if r.subject != c.Subject || r.stream.name != c.Stream || !slices.Equal(r.filters, c.Filters) {
				t.Fatalf("route(%q) = subject %q stream %q filters %q, want %q %q %q",
					c.Topic, r.subject, r.stream.name, r.filters, c.Subject, c.Stream, c.Filters)
			}
			if got := durableName("processor", r); got != c.Durable {
				t.Fatalf("durable name on %q = %q, want %q", c.Topic, got, c.Durable)
			}
		})
	}
}

// TestMetadataRoundTrip publishes each case of testdata/metadata.json on a
// real embedded log and reads it back through GetMsg and a subscriber:
// UUID, payload and metadata come back unchanged, delivery keys are
// replaced by the log's own; cases that cannot round-trip are refused with
// ErrBadMessage and store nothing.
func TestMetadataRoundTrip(t *testing.T) {
	type tcase struct {
		Name     string
		UUID     string
		Metadata map[string]string
		Stored   map[string]string // what comes back, when not Metadata
		Error    string
	}
	l := openLog(t, testConfig(t.TempDir()))
	pub := l.Publisher()
	ctx := context.Background()
	sub, err := l.Subscriber(DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := sub.Subscribe(ctx, "catalog.meta")
	if err != nil {
		t.Fatal(err)
	}
	var stored uint64
	for _, c := range readCases[tcase](t, "metadata.json") {
		t.Run(c.Name, func(t *testing.T) {
			msg := message.NewMessage(c.UUID, []byte("payload of "+c.Name))
			maps.Copy(msg.Metadata, c.Metadata)
			err := pub.Publish("catalog.meta", msg)
			if c.Error != "" {
				if !errors.Is(err, ErrBadMessage) || !strings.Contains(err.Error(), c.Error) {
					t.Fatalf("Publish: %v, want ErrBadMessage with %q", err, c.Error)
				}
				if last, err := l.LastSeq(ctx, "catalog.meta"); err != nil || last != stored {
					t.Fatalf("LastSeq = %d, %v; want %d: a refused message was stored", last, err, stored)
				}
				return
			}
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			stored++
			want := c.Stored
			if want == nil {
				want = c.Metadata
			}
			delivered := receive(t, ch)
			delivered.Ack()
			got, err := l.GetMsg(ctx, "catalog.meta", stored)
			if err != nil {
				t.Fatalf("GetMsg(%d): %v", stored, err)
			}
			check := func(how string, m *message.Message, extra ...string) {
				if m.UUID != c.UUID || string(m.Payload) != "payload of "+c.Name {
					t.Fatalf("%s: UUID %q payload %q, want %q %q", how, m.UUID, m.Payload, c.UUID, "payload of "+c.Name)
				}
				for k, v := range want {
					if m.Metadata.Get(k) != v {
						t.Fatalf("%s: metadata %q = %q, want %q (all: %v)", how, k, m.Metadata.Get(k), v, m.Metadata)
					}
				}
				keys := append([]string{MetaSeq, MetaSubject, MetaTime}, extra...)
				if len(m.Metadata) != len(want)+len(keys) {
					t.Fatalf("%s: metadata %v, want %v plus %v", how, m.Metadata, want, keys)
				}
				if seq, _ := Seq(m); seq != stored || m.Metadata.Get(MetaSubject) != "mf.catalog.meta" {
					t.Fatalf("%s: seq %d subject %q, want %d mf.catalog.meta", how, seq, m.Metadata.Get(MetaSubject), stored)
				}
			}
			check("GetMsg", got)
			check("subscriber", delivered, MetaDelivery, MetaPending)
		})
	}
}
