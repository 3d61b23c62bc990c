// Package browser holds the mf browser client, mf.mjs: one plain ES module
// (no dependencies, TypeScript declarations in mf.d.ts) that websites load
// from mf's ingest listener (/v1/sdk/mf.mjs) or install as the npm package
// described by package.json. It collects page analytics and answers
// feature flags by the client rules of the ingest specification, loading
// the WebAssembly flag evaluator (package wasm) only when a flag is
// evaluated. The Go side embeds the module for the ingest service; its
// tests run the module's Node tests. Guide: docs/browser.md.
package browser
