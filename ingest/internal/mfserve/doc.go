// Package mfserve starts a real `mf serve` for the load tools of
// ingest/internal (bench:ingest's loadgen, bench:soak's soak): on a data
// directory of the caller's, with loopback listeners on free ports, waits
// until every listener is healthy, and reads the process's resident memory
// from /proc. It is a helper of those commands only.
package mfserve
