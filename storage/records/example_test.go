package records_test

import (
	"fmt"

	"github.com/mfhq/mf/storage/records"
)

func ExampleEncode() {
	id, _ := records.ParseUUID("0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00")
	batch := &records.Batch{
		Project: "p1", Source: "s1", SourceKind: records.SourceWebsite, Mode: records.ModeConsentless,
		ID: id, ReceivedAt: 1767225600000, SentAt: -1,
		Receipt: records.Receipt{Batch: id.String(), Accepted: 1},
		Edge:    records.Edge{Country: "DE", Device: "mobile", VisitorHash: []byte{1, 2, 3, 4}},
		Events: []records.Event{{ID: id, Name: "$pageview", Time: 1767225599000,
			Page: records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: "/"}}}},
	}
	data, err := records.Encode(batch)
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := records.Decode(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(data[0], len(data), back.Mode, back.Events[0].Name, back.Events[0].Page.URL.String())
	// Output: 1 142 consentless $pageview https://shop.example/
}
