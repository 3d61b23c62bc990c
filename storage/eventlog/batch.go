package eventlog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/storage/records"
)

// The batch message: one accepted batch on TopicBatches, as ingest
// publishes it and the processor and replay read it. Its payload is the
// batch encoded by records.Encode; its metadata holds the batch's receipt
// (MetaReceipt, JSON) and its project (MetaProject); it is published under
// BatchSubject with BatchDedupeID, so that a batch id is stored once per
// project.
const (
	// MetaReceipt is the metadata key of the receipt given for the batch
	// (records.Receipt as JSON): a duplicate answers with it.
	MetaReceipt = "receipt"
	// MetaProject is the metadata key of the batch's project id.
	MetaProject = "project"
)

// NewBatchMessage returns the batch message of b.
func NewBatchMessage(b *records.Batch) (*message.Message, error) {
	payload, err := records.Encode(b) // its errors name the batch
	if err != nil {
		return nil, err
	}
	receipt, err := json.Marshal(b.Receipt)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the receipt of batch %s: %w", b.ID, err)
	}
	msg := message.NewMessage(b.ID.String(), payload)
	msg.Metadata.Set(MetaReceipt, string(receipt))
	msg.Metadata.Set(MetaProject, b.Project)
	return msg, nil
}

// BatchSubject is the topic a batch of project is published to:
// "batches.<project>", a partition of TopicBatches.
func BatchSubject(project string) string { return TopicBatches + "." + project }

// BatchDedupeID is the dedupe id of a batch of project: the first 16
// bytes of SHA-256("mf.batch:<project>:<batch id>"), unpadded base64url
// (22 characters). The log server keeps every id of the stream's 24-hour
// window in memory: 142 bytes an id in this form, 198 with the
// "<project>:<batch id>" it replaces (BenchmarkDedupeMemory). The id is
// stored in the stream: changing its form makes a batch resent across the
// change stored twice (docs/log.md).
func BatchDedupeID(project string, id records.UUID) string {
	h := sha256.New()
	h.Write([]byte("mf.batch:"))
	h.Write([]byte(project))
	h.Write([]byte(":"))
	h.Write([]byte(id.String()))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:16])
}

// BatchReceipt reads the receipt stored with a batch message.
func BatchReceipt(m *message.Message) (records.Receipt, error) {
	var r records.Receipt
	if err := json.Unmarshal([]byte(m.Metadata.Get(MetaReceipt)), &r); err != nil {
		return r, fmt.Errorf("batch message %s has no readable receipt: %w", m.UUID, err)
	}
	return r, nil
}

// BatchProject returns the project of a batch message, "" when the
// message does not say (a message of an older ingest).
func BatchProject(m *message.Message) string { return m.Metadata.Get(MetaProject) }
