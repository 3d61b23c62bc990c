// Command soak is the soak benchmark of issue 14 (`go tool task
// bench:soak`): it starts the real all-in-one `mf serve` on embedded
// defaults with the demo project (docs/demo-provision.json, plus a goal
// per event name so that the reporting API can count every event), sends
// a steady rate of browser-sized batches from a pool of simulated
// browsers for a long time (default 20,000 events/s for 30 minutes), and
// prints a line per sample interval: events accepted, mf's RSS and peak,
// ingest latency p50/p99, the processor's lag and committed events, and
// the Go heap, from mf's /metrics. When the load ends it waits for the
// processor to catch up, asks the reporting API how many events it counts
// over the run's days, and exits non-zero unless every accepted event is
// counted. The summary compares RSS at the end of the warm-up with RSS at
// the end (growth per minute), and gives the peak RSS, ingest p99 and the
// largest lag. See docs/processor.md, "Soak".
package main
