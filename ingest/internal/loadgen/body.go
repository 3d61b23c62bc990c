package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// placeholder stands for the batch id in a body template: 36 'x', the
// length of a UUID. stamp writes each batch's id over every one.
var placeholder = []byte(strings.Repeat("x", 36))

// Shapes of the batches (the -shape flag).
const (
	// shapeMix: a server SDK's mix of page views, custom events with
	// properties and identifies, about 300 bytes an event.
	shapeMix = "mix"
	// shapePeople: page views of one browser a batch, whose anonymousId
	// is the batch id, so that a reporting API counting people counts
	// accepted batches (each once, resends included).
	shapePeople = "people"
)

// body builds a batch of n events of the shape, with the batch id as a
// placeholder to be stamped per request.
func body(shape string, n int, now time.Time) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"v":1,"batch":"%s","mode":"full","sentAt":%d,"context":{"sdk":"mf-go/1.0.0"},"events":[`, placeholder, now.UnixMilli())
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		t := now.Add(-time.Duration(n-i) * time.Millisecond).UnixMilli()
		switch shape {
		case shapePeople:
			fmt.Fprintf(&b, `{"name":"$pageview","time":%d,"anonymousId":"%s","page":{"url":"https://shop.example/products/item-%d","title":"Item %d"}}`, t, placeholder, i%300, i%300)
		case shapeMix:
			mixEvent(&b, i, t)
		default:
			return nil, fmt.Errorf("unknown -shape %q: want %s or %s", shape, shapeMix, shapePeople)
		}
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// mixEvent writes event i of the mix.
func mixEvent(b *bytes.Buffer, i int, t int64) {
	switch i % 4 {
	case 0:
		fmt.Fprintf(b, `{"name":"$pageview","time":%d,"anonymousId":"anon-%06d","userId":"user-%05d","page":{"url":"https://shop.example/products/item-%d?utm_source=newsletter&utm_medium=email","title":"Item %d","referrer":"https://www.search.example/search?q=item"}}`, t, i*7919%100000, i%5000, i%300, i%300)
	case 1, 2:
		fmt.Fprintf(b, `{"name":"add_to_cart","time":%d,"anonymousId":"anon-%06d","userId":"user-%05d","properties":{"sku":"SKU-%05d","price":%d.99,"quantity":%d,"category":"shoes/running","tags":["sale","new","spring-collection"],"in_stock":true,"warehouse":"berlin-tempelhof-2","list":"search results page 2"}}`, t, i*7919%100000, i%5000, i, i%200, i%3+1)
	default:
		fmt.Fprintf(b, `{"name":"order_completed","time":%d,"userId":"user-%05d","properties":{"order":"o-%07d","revenue":%d.50,"currency":"EUR","items":%d,"coupon":null}}`, t, i%5000, i, i%500, i%5+1)
	}
}

// template is a body and where its placeholders are.
type template struct {
	body []byte
	at   []int
}

func newTemplate(body []byte) template {
	t := template{body: body}
	for off := 0; ; {
		i := bytes.Index(body[off:], placeholder)
		if i < 0 {
			return t
		}
		t.at = append(t.at, off+i)
		off += i + len(placeholder)
	}
}

// stamp writes a fresh batch id (a v4-shaped UUID from the worker and a
// counter) over every placeholder of a body copy.
func (t template) stamp(dst []byte, worker, seq uint64) []byte {
	dst = append(dst[:0], t.body...)
	id := fmt.Sprintf("%08x-%04x-4000-8000-%012x", worker, seq>>48&0xffff, seq&0xffffffffffff)
	for _, at := range t.at {
		copy(dst[at:], id)
	}
	return dst
}
