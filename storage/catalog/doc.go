// Package catalog is the event-sourced catalog of what exists: organizations,
// users and their API keys, projects, sources and their keys, actions,
// funnels, segments, flags and providers. It reads and validates the
// provisioning file of the operations contract, turns an accepted file into
// change events on the log, and folds those events into an in-memory state
// that every process keeps current.
package catalog
