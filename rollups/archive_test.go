package rollups

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/records"
)

// TestArchiveRoundTrip: batches archived in any order are read back by a
// scan in log order, byte for byte as the log record format encodes them.
func TestArchiveRoundTrip(t *testing.T) {
	ctx := t.Context()
	data, err := os.ReadFile("testdata/archive-batches.json")
	if err != nil {
		t.Fatal(err)
	}
	var batches []records.Batch
	if err := json.Unmarshal(data, &batches); err != nil {
		t.Fatalf("testdata/archive-batches.json: %v", err)
	}
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	s := newStore(t, b, nil)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// Log positions 100, 101, ... in order; archived shuffled, by day.
	byDay := map[string][]ArchivedBatch{}
	want := map[int64][]byte{}
	for i := range batches {
		seq := int64(100 + i)
		enc, err := records.Encode(&batches[i])
		if err != nil {
			t.Fatalf("batch %d does not encode: %v", i, err)
		}
		want[seq] = enc
		day := Day(time.UnixMilli(batches[i].ReceivedAt), berlin)
		byDay[day] = append(byDay[day], ArchivedBatch{Seq: seq, Batch: &batches[i]})
	}
	if len(byDay) < 2 {
		t.Fatalf("test batches fall on %d days; want several", len(byDay))
	}
	var ch Change
	for day, abs := range byDay {
		rand.Shuffle(len(abs), func(i, j int) { abs[i], abs[j] = abs[j], abs[i] })
		rec, err := ArchiveRecord(abs)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Write(ctx, testProject, ArchiveTable(), day, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		ch.Add = append(ch.Add, f)
	}
	if _, err := s.Commit(ctx, Live(testProject), 0, ch); err != nil {
		t.Fatal(err)
	}
	sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	var got []ArchivedBatch
	err = sn.Scan(ctx, ArchiveTableName, ScanOptions{Columns: []string{"seq", "record"}}, func(bt Batch) error {
		abs, err := ReadArchive(bt.Record)
		got = append(got, abs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(batches) {
		t.Fatalf("read %d batches, archived %d", len(got), len(batches))
	}
	for i, ab := range got {
		if ab.Seq != int64(100+i) {
			t.Fatalf("batch %d has position %d; want log order", i, ab.Seq)
		}
		enc, err := records.Encode(ab.Batch)
		if err != nil || !bytes.Equal(enc, want[ab.Seq]) {
			t.Fatalf("batch at %d reads back as a different record (%v)", ab.Seq, err)
		}
		gj, _ := json.Marshal(ab.Batch)
		wj, _ := json.Marshal(batches[i])
		if !bytes.Equal(gj, wj) {
			t.Fatalf("batch at %d reads back as\n%s\nwant\n%s", ab.Seq, gj, wj)
		}
	}
}
