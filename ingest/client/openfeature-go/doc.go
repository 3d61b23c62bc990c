// Package openfeature is an OpenFeature provider for mf
// (github.com/open-feature/go-sdk) over the Go client of the /v1 service
// (github.com/mfhq/mf/ingest/client): flags are evaluated locally from the
// server flag document, as the client evaluates them. It is a module of
// its own, so that its users depend on the client and the SDK only.
//
// Evaluation context: the attribute "anonymousId" is the browser or device
// id (the unit of flags with u "b"), "userId" the signed-in person's id
// (the unit of flags with u "p"; the targeting key stands for it when
// absent); every other attribute is a property of the facts.
package openfeature
