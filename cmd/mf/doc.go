// Command mf is the analytics-ingest and feature-flag service: one binary for
// every role (see ../../README.md and the operations contract).
//
// It owns the wiring only: flags and configuration files, the construction
// of each role's parts (storage, ingest, processor, rollups, api), running
// them, signals and the ordered shutdown, and the commands that talk to a
// running mf over its admin API (provision, import, replay, erase). It may
// import every package of mf; nothing imports it. main.go holds main and
// run(ctx, args, stdin, stdout, stderr), which the tests drive.
package main
