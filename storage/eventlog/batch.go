package eventlog

import (
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

// BatchDedupeID is the dedupe id of a batch: "<project>:<batch id>".
func BatchDedupeID(project string, id records.UUID) string { return project + ":" + id.String() }

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
