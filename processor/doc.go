// Package processor holds the Watermill handlers that turn accepted batches
// into facts: visits, identities and people, channels, goals and revenue,
// segment membership; their checkpoints; and replay.
package processor
