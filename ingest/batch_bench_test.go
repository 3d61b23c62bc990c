package ingest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// benchBatchBody returns a batch of n events as a browser SDK sends them
// (about 300 bytes an event): page views with a URL, referrer and title,
// custom events with a dozen properties, autocapture clicks, identifies,
// searches and exposures; every event with an id, time and identifiers.
func benchBatchBody(n int) []byte {
	var b strings.Builder
	now := int64(batchCaseDefaultReceivedAt)
	fmt.Fprintf(&b, `{"v":1,"batch":"0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00","mode":"full","sentAt":%d,`+
		`"context":{"sdk":"mf-js/1.4.2","locale":"de-DE","timezone":"Europe/Berlin","screen":[1440,900]},"events":[`, now-20)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		id := fmt.Sprintf("%08x-4a8d-4f51-9a3e-%012x", i*2654435761%(1<<32), i)
		common := fmt.Sprintf(`"id":"%s","time":%d,"anonymousId":"b-%08x-7f3e"`, id, now-int64(n-i)*350, i%97*7919)
		switch i % 10 {
		case 0, 1, 2, 3:
			fmt.Fprintf(&b, `{"name":"$pageview",%s,"sessionId":"7c1e2f3a-4b5c-4d6e-8f70-8192a3b4%04x","page":{"url":"https://shop.example/products/item-%d?utm_source=newsletter&utm_medium=email&gclid=Cj0KCQjw%d","title":"Item %d – Shop example","referrer":"https://www.search.example/search?q=item+%d"},"properties":{"$boot":1}}`,
				common, i%13, i, i, i, i)
		case 4, 5, 6:
			fmt.Fprintf(&b, `{"name":"add_to_cart",%s,"userId":"user-%d","properties":{"sku":"SKU-%05d","price":%d.99,"currency":"EUR","quantity":%d,"category":"shoes/running","tags":["sale","new"],"variant":{"size":42,"color":"blue"},"in_stock":true}}`,
				common, i%50, i, i%200, i%3+1)
		case 7:
			fmt.Fprintf(&b, `{"name":"$autocapture",%s,"properties":{"$event_type":"click","$el_tag":"button","$el_selector":"main > div.cart > button#checkout","$el_text":"Zur Kasse","$el_classes":"btn btn-primary"}}`,
				common)
		case 8:
			fmt.Fprintf(&b, `{"name":"$identify",%s,"userId":"user-%d","properties":{"plan":"pro","company":"Example GmbH","seats":%d}}`,
				common, i%50, i%40)
		default:
			if i%20 == 9 {
				fmt.Fprintf(&b, `{"name":"$search",%s,"properties":{"query":"Running Shoes Size %d","results":%d}}`, common, i%12+36, i%30)
			} else {
				fmt.Fprintf(&b, `{"name":"$exposure",%s,"properties":{"$experiment":"checkout-flow","$variant":"b"}}`, common)
			}
		}
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func TestBenchBatchBodyIsValid(t *testing.T) {
	body := benchBatchBody(1000)
	b, p := DecodeBatch(body, time.UnixMilli(batchCaseDefaultReceivedAt), DecodeOptions{})
	if p != nil {
		t.Fatalf("the benchmark batch is refused: %+v", p)
	}
	rec := Normalize(b, NormalizeOptions{})
	if rec.Receipt.Accepted != 1000 || rec.Receipt.Dropped != 0 {
		t.Fatalf("receipt %+v, want all 1,000 events kept", rec.Receipt)
	}
	if err := checkStoredBatch(body, b, rec, false); err != nil {
		t.Fatal(err)
	}
	if len(body) < 250_000 || len(body) > 350_000 {
		t.Fatalf("benchmark body of %d bytes; it should stay near 300 KB", len(body))
	}
}

// reportCPU reports events per second of wall time, and the CPU time per
// operation with the events and megabytes per CPU second it allows (see
// processCPU).
func reportCPU(b *testing.B, start time.Duration, events, size int) {
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	used := processCPU() - start
	if used <= 0 {
		return
	}
	perOp := used.Seconds() / float64(b.N)
	b.ReportMetric(perOp*1e9, "cpu-ns/op")
	b.ReportMetric(float64(events)/perOp, "events/cpu-s")
	b.ReportMetric(float64(size)/perOp/1e6, "MB/cpu-s")
}

// BenchmarkBatchIntake measures what the handler does with a 1,000-event
// batch before publishing: decode and validate, normalize, encode the
// record.
func BenchmarkBatchIntake(b *testing.B) {
	body := benchBatchBody(1000)
	now := time.UnixMilli(batchCaseDefaultReceivedAt)
	var buf []byte
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		batch, p := DecodeBatch(body, now, DecodeOptions{})
		if p != nil {
			b.Fatal(p)
		}
		rec := Normalize(batch, NormalizeOptions{})
		rec.Project, rec.Source, rec.SourceKind = "p", "s", records.SourceWebsite
		var err error
		if buf, err = records.Append(buf[:0], rec); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu, 1000, len(body))
	b.ReportMetric(float64(len(buf)), "record-bytes")
}

// BenchmarkBatchNormalize measures Normalize alone.
func BenchmarkBatchNormalize(b *testing.B) {
	body := benchBatchBody(1000)
	batch, p := DecodeBatch(body, time.UnixMilli(batchCaseDefaultReceivedAt), DecodeOptions{})
	if p != nil {
		b.Fatal(p)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		Normalize(batch, NormalizeOptions{})
	}
	reportCPU(b, cpu, 1000, len(body))
}

// altBatch mirrors the batch for the general-purpose decoders compared in
// BenchmarkBatchDecoders. They only decode into it: no rule is checked, no
// lone surrogate refused, no properties compacted or measured.
type altBatch struct {
	V       *int64 `json:"v"`
	Batch   string `json:"batch"`
	Mode    string `json:"mode"`
	SentAt  *int64 `json:"sentAt"`
	Context *struct {
		SDK      *string `json:"sdk"`
		Locale   *string `json:"locale"`
		Timezone *string `json:"timezone"`
		Screen   []int64 `json:"screen"`
	} `json:"context"`
	Events []struct {
		Name string  `json:"name"`
		Time *int64  `json:"time"`
		ID   *string `json:"id"`
		Page *struct {
			URL      *string `json:"url"`
			Title    *string `json:"title"`
			Referrer *string `json:"referrer"`
		} `json:"page"`
		Properties  json.RawMessage `json:"properties"`
		AnonymousID *string         `json:"anonymousId"`
		UserID      *string         `json:"userId"`
		SessionID   *string         `json:"sessionId"`
	} `json:"events"`
}

// BenchmarkBatchDecoders compares the hand-written decoder (decoding and
// every rule) with general-purpose decoders doing only the decoding into
// altBatch, on the same 1,000-event body.
func BenchmarkBatchDecoders(b *testing.B) {
	body := benchBatchBody(1000)
	now := time.UnixMilli(batchCaseDefaultReceivedAt)
	run := func(name string, decode func() error) {
		b.Run(name, func(b *testing.B) {
			if err := decode(); err != nil {
				b.Fatalf("%s cannot decode the batch: %v", name, err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if err := decode(); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu, 1000, len(body))
		})
	}
	run("hand-written+rules", func() error {
		if _, p := DecodeBatch(body, now, DecodeOptions{}); p != nil {
			return p
		}
		return nil
	})
	for _, d := range altDecoders {
		run(d.name, func() error {
			var v altBatch
			return d.unmarshal(body, &v)
		})
	}
}
