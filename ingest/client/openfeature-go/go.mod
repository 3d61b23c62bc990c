module github.com/mfhq/mf/ingest/client/openfeature-go

go 1.26.8

require (
	github.com/mfhq/mf v0.0.0
	github.com/open-feature/go-sdk v1.20.0
)

require go.uber.org/mock v0.6.0 // indirect

// The provider is developed beside the client it wraps.
replace github.com/mfhq/mf => ../../..
