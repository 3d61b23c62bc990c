package ingest

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// altDecoders are the general-purpose JSON decoders BenchmarkBatchDecoders
// compares with the hand-written one.
var altDecoders = []struct {
	name      string
	unmarshal func([]byte, any) error
}{
	{"encoding-json", json.Unmarshal},
	{"goccy-go-json", gojson.Unmarshal},
}
