package eventlog_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// A batch message carries the encoded batch, its receipt and its project,
// and is published under the project's subject with project:batch as
// dedupe id; read back, it gives the same batch and receipt. The batches
// are the record vectors of storage/records.
func TestBatchMessageRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../records/testdata/vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in ../records/testdata/vectors (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var b records.Batch
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatalf("cannot parse %s: %v", f, err)
			}
			msg, err := eventlog.NewBatchMessage(&b)
			if err != nil {
				t.Fatal(err)
			}
			if msg.UUID != b.ID.String() {
				t.Errorf("message id %q, want the batch id %q", msg.UUID, b.ID)
			}
			if got := eventlog.BatchProject(msg); got != b.Project {
				t.Errorf("project %q, want %q", got, b.Project)
			}
			rc, err := eventlog.BatchReceipt(msg)
			if err != nil {
				t.Fatal(err)
			}
			if rc != b.Receipt {
				t.Errorf("receipt %+v, want %+v", rc, b.Receipt)
			}
			back, err := records.Decode(msg.Payload)
			if err != nil {
				t.Fatalf("payload does not decode: %v", err)
			}
			if !reflect.DeepEqual(back, &b) {
				t.Errorf("payload decodes to %+v, want %+v", back, &b)
			}
			if got := eventlog.BatchDedupeID(b.Project, b.ID); len(got) != 22 || got != eventlog.BatchDedupeID(b.Project, b.ID) {
				t.Errorf("dedupe id %q: want 22 characters, the same each time", got)
			}
			if got, want := eventlog.BatchSubject(b.Project), "batches."+b.Project; got != want {
				t.Errorf("subject %q, want %q", got, want)
			}
		})
	}
}

// The dedupe id of a batch is pinned by vectors computed apart from the
// code (testdata/dedupe-ids.json): it is stored in the stream, and a new
// format would store a batch resent across an upgrade twice.
func TestBatchDedupeIDVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/dedupe-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct{ Project, Batch, ID string }
	}
	if err := json.Unmarshal(raw, &f); err != nil || len(f.Cases) == 0 {
		t.Fatalf("testdata/dedupe-ids.json: %v (%d cases)", err, len(f.Cases))
	}
	for _, c := range f.Cases {
		id, ok := records.ParseUUID(c.Batch)
		if !ok {
			t.Fatalf("batch %q is not a UUID", c.Batch)
		}
		if got := eventlog.BatchDedupeID(c.Project, id); got != c.ID {
			t.Errorf("BatchDedupeID(%q, %s) = %q, want %q", c.Project, c.Batch, got, c.ID)
		}
	}
}

// A message without a readable receipt is refused, naming the message.
func TestBatchReceiptUnreadable(t *testing.T) {
	raw, err := os.ReadFile("../records/testdata/vectors/full_website.json")
	if err != nil {
		t.Fatal(err)
	}
	var b records.Batch
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	msg, err := eventlog.NewBatchMessage(&b)
	if err != nil {
		t.Fatal(err)
	}
	msg.Metadata.Set(eventlog.MetaReceipt, "{")
	if _, err := eventlog.BatchReceipt(msg); err == nil {
		t.Fatal("an unreadable receipt was read")
	}
}
