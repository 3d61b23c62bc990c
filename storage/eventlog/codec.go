package eventlog

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names of a stored message. docs/log.md describes the encoding.
const (
	// HeaderUUID carries the Watermill message UUID.
	HeaderUUID = "Mf-Uuid"
	// HeaderMsgID is JetStream's dedupe id header, set by PublishOnce.
	HeaderMsgID = jetstream.MsgIDHeader
)

// Metadata keys that a subscriber adds to each delivered message, and that
// GetMsg adds to the message it returns. They describe the delivery, not the
// message: a publisher does not store them (they are dropped on publish, so
// a consumer may republish a delivered message as it is).
const (
	// MetaSeq is the message's stream sequence, its position in the log, in
	// decimal. Unique and increasing within a topic's stream; key outputs by
	// it to make a redelivery change nothing.
	MetaSeq = "log-seq"
	// MetaSubject is the NATS subject the message was stored under
	// (prefix.topic[.sub...]).
	MetaSubject = "log-subject"
	// MetaTime is when the server stored the message, RFC 3339 with
	// nanoseconds, UTC.
	MetaTime = "log-time"
	// MetaDelivery is how many times this message has been delivered to the
	// consumer group, 1 on the first delivery. Absent from GetMsg.
	MetaDelivery = "log-delivery"
	// MetaPending is how many messages of the topic were still to deliver
	// after this one when the server sent it; "0" means the subscriber had
	// caught up with the log at that moment. Absent from GetMsg.
	MetaPending = "log-pending"
)

// deliveryKeys are the metadata keys a publisher drops.
var deliveryKeys = map[string]bool{
	MetaSeq: true, MetaSubject: true, MetaTime: true, MetaDelivery: true, MetaPending: true,
}

// encode builds the NATS message stored for msg: the payload as is, the
// UUID and each metadata entry as a header.
func encode(subject string, msg *message.Message) (*nats.Msg, error) {
	if err := checkHeaderValue(msg.UUID); err != nil {
		return nil, fmt.Errorf("%w: message UUID %q: %w", ErrBadMessage, msg.UUID, err)
	}
	m := nats.NewMsg(subject)
	m.Data = msg.Payload
	if msg.UUID != "" {
		m.Header.Set(HeaderUUID, msg.UUID)
	}
	for k, v := range msg.Metadata {
		if deliveryKeys[k] {
			continue
		}
		if err := checkMetadata(k, v); err != nil {
			return nil, fmt.Errorf("%w: message %s: %w", ErrBadMessage, msg.UUID, err)
		}
		m.Header.Set(k, v)
	}
	return m, nil
}

// checkMetadata reports why a metadata entry cannot be stored as a header
// and read back unchanged.
func checkMetadata(k, v string) error {
	if k == "" {
		return fmt.Errorf("metadata key is empty")
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f || k[i] == ':' {
			return fmt.Errorf("metadata key %q: use printable ASCII without spaces or ':'", k)
		}
	}
	if k == HeaderUUID || isNatsHeader(k) {
		return fmt.Errorf("metadata key %q is reserved (%s and Nats-*)", k, HeaderUUID)
	}
	if err := checkHeaderValue(v); err != nil {
		return fmt.Errorf("metadata %q: %w", k, err)
	}
	return nil
}

// checkHeaderValue reports why v would not read back unchanged from a NATS
// header: the client replaces line breaks and trims blanks at both ends.
func checkHeaderValue(v string) error {
	if strings.ContainsAny(v, "\r\n") {
		return fmt.Errorf("value contains a line break")
	}
	if v != "" && (isBlank(v[0]) || isBlank(v[len(v)-1])) {
		return fmt.Errorf("value starts or ends with a blank")
	}
	return nil
}

func isBlank(b byte) bool { return b == ' ' || b == '\t' }

// decode turns a stored message back into a Watermill message: the UUID and
// the metadata from the headers (Nats-* headers are JetStream's, not
// metadata) and the delivery keys from what the server says about it.
func decode(header nats.Header, data []byte, subject string, seq uint64, stored time.Time) *message.Message {
	msg := message.NewMessage(header.Get(HeaderUUID), data)
	// Sized for the headers kept, the three keys below and the two a
	// subscriber adds: no growing on every message, and (up to eight
	// entries, the usual case) a map of one group rather than a table.
	n := 5
	for k, vs := range header {
		if keptHeader(k, vs) {
			n++
		}
	}
	msg.Metadata = make(message.Metadata, n)
	for k, vs := range header {
		if keptHeader(k, vs) {
			msg.Metadata.Set(k, vs[0])
		}
	}
	msg.Metadata.Set(MetaSeq, strconv.FormatUint(seq, 10))
	msg.Metadata.Set(MetaSubject, subject)
	msg.Metadata.Set(MetaTime, stored.UTC().Format(time.RFC3339Nano))
	return msg
}

// keptHeader reports whether a header of a stored message is metadata.
func keptHeader(k string, vs []string) bool {
	return k != HeaderUUID && len(vs) > 0 && !isNatsHeader(k)
}

// isNatsHeader reports whether k is a Nats-* header (any case), without
// allocating a lower-case copy per header of every message.
func isNatsHeader(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "nats-")
}

// Seq returns the log position of a delivered message (metadata MetaSeq),
// or false when msg carries none.
func Seq(msg *message.Message) (uint64, bool) {
	seq, err := strconv.ParseUint(msg.Metadata.Get(MetaSeq), 10, 64)
	return seq, err == nil && seq > 0
}
