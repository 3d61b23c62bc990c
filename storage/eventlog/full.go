package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// JetStream error codes (nats-server's jetstream_errors_generated.go) that
// mean "no room": the stream reached its cap, or the account or the server
// is out of the storage it may use.
const (
	jsAccountResourcesExceeded jetstream.ErrorCode = 10002
	jsInsufficientResources    jetstream.ErrorCode = 10023
	jsStorageResourcesExceeded jetstream.ErrorCode = 10047
	jsStreamStoreFailed        jetstream.ErrorCode = 10077
)

// isFull reports whether a publish error is the server refusing the
// message for want of room. Nothing was stored.
func isFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jsAccountResourcesExceeded, jsInsufficientResources, jsStorageResourcesExceeded:
		return true
	case jsStreamStoreFailed:
		// The generic store failure carries the store's error: only the
		// limits of a discard-new stream mean "full"; an I/O error is not.
		d := apiErr.Description
		return strings.Contains(d, "maximum bytes exceeded") || strings.Contains(d, "maximum messages exceeded")
	}
	return false
}

// minAutoMaxBytes is the smallest cap AutoMaxBytes chooses while the
// server has that much room.
const minAutoMaxBytes = 64 << 20

// AutoMaxBytes is the size cap Open gives a RefuseWhenFull stream whose
// MaxBytes is 0, from what the stream holds (held) and the storage the
// embedded server's JetStream may use (maxStore: its max_store, by default
// 75% of the disk free under Dir when it started):
//
//	min(maxStore, held + max(maxStore/2, 64 MiB))
//
// New messages may take at most half of that storage, so the stream
// refuses them well before the disk fills (JetStream switches itself off
// on a write that finds the disk full), and the cap never falls below
// what the stream holds while the server has room for it. A server with
// no known limit (maxStore <= 0) gets no cap (0).
func AutoMaxBytes(held, maxStore int64) int64 {
	if maxStore <= 0 {
		return 0
	}
	return min(maxStore, held+max(maxStore/2, minAutoMaxBytes))
}

// autoMaxBytes chooses the cap of a RefuseWhenFull stream without one
// configured: AutoMaxBytes on the embedded server. On an external server
// mf sees neither its disks nor its max_file_store, so the stream keeps
// the cap it has (one that a process given Stream.MaxBytes, --log-max-bytes,
// set: a process started without the flag does not lift it), or none: the
// servers' storage limits then refuse messages (ErrFull) when reached.
func (l *Log) autoMaxBytes(ctx context.Context, name string) (int64, error) {
	var held, had int64
	cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	s, err := l.js.Stream(cctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return 0, fmt.Errorf("%w: cannot read stream %s: %w", ErrUnavailable, name, err)
	default:
		info := s.CachedInfo()
		held, had = int64(info.State.Bytes), max(info.Config.MaxBytes, 0)
	}
	if l.ns == nil {
		return had, nil
	}
	return AutoMaxBytes(held, l.ns.JetStreamConfig().MaxStore), nil
}

// MaxBytes returns the size cap of a topic's stream as the server has it,
// 0 when it has none.
func (l *Log) MaxBytes(topic string) int64 {
	head, _, _ := strings.Cut(topic, ".")
	if ref, ok := l.streams[head]; ok {
		return ref.maxBytes
	}
	return 0
}
