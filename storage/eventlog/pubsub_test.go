package eventlog

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
)

// suiteTopic is the stream the Watermill suite publishes to: every test
// topic is a sub-topic of it ("suite.<test id>"), the way ingest publishes
// to "batches.<project>".
const suiteTopic = "suite"

// TestPubSub runs Watermill's own acceptance suite on the embedded server,
// once with consumer groups (durable consumers, the processor's way) and
// once in replay mode (every subscriber reads everything, the catalog's
// way).
func TestPubSub(t *testing.T) {
	for _, mode := range []struct {
		name     string
		replay   bool
		features tests.Features
	}{
		{
			name: "group",
			features: tests.Features{
				ConsumerGroups: true,
				// One subscriber of a group at a time receives (a pinned
				// priority group); it hands messages out one at a time in
				// log order and redelivers a nacked one before the next,
				// so order holds across subscribers.
				GuaranteedOrder:                  true,
				Persistent:                       true,
				NewSubscriberReceivesOldMessages: false,
			},
		},
		{
			name:   "replay",
			replay: true,
			features: tests.Features{
				ConsumerGroups:                   false,
				GuaranteedOrder:                  true,
				Persistent:                       true,
				NewSubscriberReceivesOldMessages: true,
			},
		},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t.TempDir())
			cfg.Streams = append(cfg.Streams, Stream{Topic: suiteTopic})
			l := openLog(t, cfg)

			features := mode.features
			features.GenerateTopicFunc = func(tctx tests.TestContext) string {
				return suiteTopic + "." + string(tctx.TestID)
			}
			newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
				if mode.replay {
					group = ""
				}
				scfg := DefaultSubscriberConfig(group)
				// Timing only, not behaviour: the suite closes subscribers
				// that hold messages it will never ack (each Close waits
				// CloseGrace for them, one subscriber after the other), and
				// nacks hundreds of times in a row (each waits NakDelay).
				scfg.CloseGrace = 100 * time.Millisecond
				scfg.NakDelay = 10 * time.Millisecond
				sub, err := l.Subscriber(scfg)
				if err != nil {
					t.Fatalf("Subscriber: %v", err)
				}
				return l.Publisher(), sub
			}
			tests.TestPubSub(t, features,
				func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, "suite") },
				newPubSub,
			)
		})
	}
}
