package ingest_test

import (
	"fmt"
	"time"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/storage/records"
)

func ExampleDecodeBatch() {
	body := []byte(`{"v":1,"batch":"0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00","mode":"full","events":[
		{"name":"$pageview","anonymousId":"b-1","page":{"url":"https://Shop.example/pricing?utm_source=news&gclid=abc&x=1"}},
		{"name":"$search","anonymousId":"b-1","properties":{"query":"Invoice 12345678 for ada@example.com"}},
		{"name":"$install_check"}]}`)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	batch, problem := ingest.DecodeBatch(body, now, ingest.DecodeOptions{SourceMode: records.ModeFull})
	if problem != nil {
		fmt.Println(problem.Status, problem.Code, problem.Errors)
		return
	}
	rec := ingest.Normalize(batch, ingest.NormalizeOptions{Downgrade: ingest.PrivacySignal("1", "")})
	fmt.Printf("receipt: %+v\n", rec.Receipt)
	fmt.Println("stored as:", rec.Mode)
	for _, e := range rec.Events {
		fmt.Println(e.Name, e.Page.URL.String(), e.AnonymousID == "")
	}

	_, problem = ingest.DecodeBatch([]byte(`{"v":1,"batch":"x","mode":"full","events":[{"name":" a"}]}`), now, ingest.DecodeOptions{})
	fmt.Println(problem.Status, problem.Code)
	for _, e := range problem.Errors {
		fmt.Println(e.Path+":", e.Message)
	}
	// Output:
	// receipt: {Batch:0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00 Accepted:1 Dropped:2 Reason:}
	// stored as: consentless
	// $pageview https://shop.example/pricing?utm_source=news&gclid= true
	// 400 validation_failed
	// batch: must be a UUID (8-4-4-4-12 hexadecimal digits)
	// events.0.name: must not start or end with whitespace
}
