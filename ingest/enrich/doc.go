// Package enrich derives, at the edge, what mf keeps about the client of an
// ingest request instead of the request itself: the client network for rate
// limiting, device type, browser family and operating system from the
// User-Agent, whether that User-Agent belongs to a bot, country and region
// from the address, and for consentless traffic the daily visitor hash.
//
// One Enricher does it all through Enrich; HTTP handlers hand it the plain
// request facts (peer address, X-Forwarded-For, User-Agent) so that Fiber
// types stay in the handlers.
//
// Privacy: the client address enters this package in RequestFacts and never
// leaves it. What comes out is derived: country and region, the visitor
// hash (a salted hash that changes every UTC day), and the NetKey used by
// the in-memory rate limiter (an IPv4 address or an IPv6 /64). A NetKey
// prints as a placeholder in logs and fmt verbs, and is never to be written
// to the log or storage; errors of this package never quote an address.
//
// The formats (visitor hash, salt objects, region codes, User-Agent
// families) are written down in docs/enrichment.md.
package enrich
