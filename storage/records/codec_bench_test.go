package records

import (
	"encoding/json"
	"fmt"
	"testing"

	gojson "github.com/goccy/go-json"
)

// benchBatch returns a stored batch of n events shaped like what ingest
// keeps from a browser: page views with URL parts, custom events with
// properties and revenue, identifiers on every event.
func benchBatch(n int) *Batch {
	const receivedAt = 1767225600000
	b := &Batch{
		Project: "6f1c2d3e-4a5b-4c6d-8e7f-90a1b2c3d4e5", Source: "0a1b2c3d-4e5f-4a6b-9c7d-8e9fa0b1c2d3",
		SourceKind: SourceWebsite, Mode: ModeFull, ReceivedAt: receivedAt, SentAt: receivedAt - 20,
		Receipt: Receipt{Batch: "0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00", Accepted: n},
		Edge:    Edge{Country: "DE", Region: "DE-BE", Device: "desktop", Browser: "Firefox", OS: "Linux"},
		Context: Context{SDK: "mf-js/1.4.2", Locale: "de-DE", Timezone: "Europe/Berlin", HasScreen: true, ScreenWidth: 1440, ScreenHeight: 900},
		Events:  make([]Event, n),
	}
	b.ID, _ = ParseUUID(b.Receipt.Batch)
	for i := range b.Events {
		e := &b.Events[i]
		e.ID, _ = ParseUUID(fmt.Sprintf("%08x-4a8d-4f51-9a3e-%012x", i*2654435761%(1<<32), i))
		e.Time = receivedAt - int64(n-i)*350
		e.AnonymousID = fmt.Sprintf("b-%08x-7f3e", i%97*7919)
		if i%10 < 4 {
			e.Name = "$pageview"
			e.SessionID, _ = ParseUUID(fmt.Sprintf("7c1e2f3a-4b5c-4d6e-8f70-8192a3b4%04x", i%13))
			e.Page = Page{
				URL:      URL{Scheme: "https", Host: "shop.example", Path: fmt.Sprintf("/products/item-%d", i), Query: "utm_source=newsletter&utm_medium=email&gclid=Cj0KCQjw"},
				Title:    fmt.Sprintf("Item %d – Shop example", i),
				Referrer: URL{Scheme: "https", Host: "www.search.example", Path: "/search"},
			}
			e.Properties = json.RawMessage(`{"$boot":1}`)
		} else {
			e.Name = "add_to_cart"
			e.UserID = fmt.Sprintf("user-%d", i%50)
			e.Properties = json.RawMessage(fmt.Sprintf(`{"sku":"SKU-%05d","price":%d.99,"currency":"EUR","quantity":2,"category":"shoes/running","tags":["sale","new"],"variant":{"size":42,"color":"blue"},"in_stock":true}`, i, i%200))
			e.Revenue, e.Currency = fmt.Sprintf("%d.99", i%200), "EUR"
		}
	}
	return b
}

// recordCodecs are the encodings compared: the binary format of this
// package and JSON with two codecs.
var recordCodecs = []struct {
	name   string
	encode func(*Batch) ([]byte, error)
	decode func([]byte) (*Batch, error)
}{
	{"binary-v1", Encode, Decode},
	{"encoding-json", func(b *Batch) ([]byte, error) { return json.Marshal(b) },
		func(data []byte) (*Batch, error) { var b Batch; return &b, json.Unmarshal(data, &b) }},
	{"goccy-go-json", func(b *Batch) ([]byte, error) { return gojson.Marshal(b) },
		func(data []byte) (*Batch, error) { var b Batch; return &b, gojson.Unmarshal(data, &b) }},
}

func BenchmarkEncode(b *testing.B) {
	batch := benchBatch(1000)
	for _, c := range recordCodecs {
		b.Run(c.name, func(b *testing.B) {
			data, err := c.encode(batch)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.encode(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/record")
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	batch := benchBatch(1000)
	for _, c := range recordCodecs {
		b.Run(c.name, func(b *testing.B) {
			data, err := c.encode(batch)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/record")
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestCodecsAgree checks the benchmark batch survives every compared codec,
// so the benchmark compares like with like.
func TestCodecsAgree(t *testing.T) {
	batch := benchBatch(50)
	for _, c := range recordCodecs {
		data, err := c.encode(batch)
		if err != nil {
			t.Fatalf("%s: encode: %v", c.name, err)
		}
		back, err := c.decode(data)
		if err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		again, _ := Encode(back)
		want, _ := Encode(batch)
		if string(again) != string(want) {
			t.Fatalf("%s: the batch does not survive the codec", c.name)
		}
	}
}
