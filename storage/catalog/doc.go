// Package catalog is the event-sourced catalog of what exists: organizations,
// users and their API keys, projects, sources and their keys, actions,
// funnels, segments, flags and providers.
//
// It reads and validates the provisioning file of the operations contract
// (Parse, State.Plan), turns an accepted file into change events on the
// log's catalog topic (Catalog.Apply), and folds those events into an
// immutable in-memory State that every process keeps current and swaps
// atomically on each change (Catalog.State). Runtime facts that must be
// durable and visible to every process, such as an exposed secret key
// (Catalog.MarkSecretKeyExposed), are events of the same topic.
//
// Secret keys and API key tokens are kept only as SHA-256 hashes. Flags are
// also kept compiled for flag documents (State.CompiledFlags), with segment
// ids replaced by opaque refs.
//
// The file format, the event encoding and the rules are in docs/catalog.md.
package catalog
