// How mf serves the dashboard: headers, caching, no inline script.
import { test } from "node:test";
import assert from "node:assert/strict";
import { env } from "./lib.mjs";

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " +
  "require-trusted-types-for 'script'; trusted-types 'none'";

test("every page URL answers the page with the CSP, revalidated on each load", async () => {
  for (const path of ["/", "/signin", "/projects", `/p/${env.shop}/overview?period=7d`, `/p/${env.shop}/people/x`]) {
    const res = await fetch(env.url + path);
    assert.equal(res.status, 200, path);
    assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8", path);
    assert.equal(res.headers.get("content-security-policy"), CSP, path);
    assert.equal(res.headers.get("cache-control"), "no-cache", path);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", path);
    assert.equal(res.headers.get("x-frame-options"), "DENY", path);
    const etag = res.headers.get("etag");
    assert.ok(etag, "an ETag");
    const again = await fetch(env.url + path, { headers: { "If-None-Match": etag } });
    assert.equal(again.status, 304, path + " revalidated");
  }
});

test("the page has no inline script or style and loads versioned assets that are cached immutably", async () => {
  const html = await (await fetch(env.url + "/")).text();
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  assert.ok(scripts.length > 0, "a script");
  for (const [, attrs, body] of scripts) {
    assert.match(attrs, /\bsrc="\/assets\/[0-9a-f]{16}\/[^"]+"/, "a script from a versioned asset");
    assert.equal(body.trim(), "", "no inline script");
  }
  assert.doesNotMatch(html, /<style|\sstyle=|\son[a-z]+=/i, "no inline style or event handler attribute");
  const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[0-9a-f]{16}\/[^"]+)"/g)].map((m) => m[1]);
  assert.ok(assets.some((a) => a.endsWith(".css")) && assets.some((a) => a.endsWith(".js")));
  for (const a of assets) {
    const res = await fetch(env.url + a, { headers: { "Accept-Encoding": "gzip" } });
    assert.equal(res.status, 200, a);
    assert.equal(res.headers.get("cache-control"), "public, max-age=31536000, immutable", a);
    assert.equal(res.headers.get("content-security-policy"), CSP, a);
    assert.equal(res.headers.get("vary"), "Accept-Encoding", a);
    await res.arrayBuffer();
  }
  const js = assets.find((a) => a.endsWith("app.js"));
  const gz = await fetch(env.url + js, { headers: { "Accept-Encoding": "gzip" }, decompress: false });
  assert.equal(gz.headers.get("content-encoding"), "gzip");
  const other = js.replace(/\/assets\/[0-9a-f]{16}\//, "/assets/0000000000000000/");
  assert.equal((await fetch(env.url + other)).status, 404, "another version is not served");
  assert.equal((await fetch(env.url + "/assets/" + js.split("/")[2] + "/nothing.js")).status, 404, "an unknown asset");
});

test("the API keeps its own headers and 404s beside the dashboard", async () => {
  const res = await fetch(env.url + "/api/v1/projects");
  assert.equal(res.status, 401);
  assert.equal(res.headers.get("content-security-policy"), "default-src 'none'; frame-ancestors 'none'");
  assert.equal((await fetch(env.url + "/api/v1/nothing", { headers: { Authorization: "Bearer " + env.checkKey } })).status, 404);
  const other = await fetch(env.url + "/elsewhere");
  assert.equal(other.status, 404);
  assert.equal(other.headers.get("content-type"), "application/vnd.api+json");
});
