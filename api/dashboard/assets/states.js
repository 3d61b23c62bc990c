// Empty and error states shared by the pages.
import { h } from "./dom.js";

/** errorState explains a refused or failed request; 429 counts down its Retry-After. */
export function errorState(err, retry) {
  if (err.status === 429) {
    let left = err.retryAfter || 1;
    const btn = h("button", { type: "button", disabled: true, onclick: retry }, "Try again");
    const note = h("p", { class: "countdown" }, `You can try again in ${left} s.`);
    const timer = setInterval(() => {
      left -= 1;
      if (!note.isConnected) return clearInterval(timer);
      if (left <= 0) {
        clearInterval(timer);
        note.textContent = "You can try again now.";
        btn.disabled = false;
        return;
      }
      note.textContent = `You can try again in ${left} s.`;
    }, 1000);
    return h("section", { class: "state error", role: "alert", "data-status": 429 },
      h("h1", {}, "Too many requests"),
      h("p", {}, "The API allows a person 120 requests a minute, shared by all their keys."), note, btn);
  }
  const titles = { 400: "This report cannot be answered", 404: "Not found", 422: "This report cannot be answered" };
  return h("section", { class: "state error", role: "alert", "data-status": err.status || 0 },
    h("h1", {}, titles[err.status] || "Something went wrong"),
    h("p", { class: "detail" }, err.message),
    err.parameter ? h("p", {}, "Parameter: ", h("code", {}, err.parameter)) : null,
    err.status === 404 ? h("p", {}, h("a", { href: "/projects" }, "All projects")) : h("button", { type: "button", onclick: retry }, "Try again"));
}

/** noData is shown when a project has nothing in the period, with the snippet to install. */
export function noData(project) {
  const snippet = `<script type="module">
  import { init } from "https://YOUR-MF-HOST/v1/sdk/mf.mjs";
  init({ key: "YOUR-WEBSITE-KEY" });
</script>`;
  return h("section", { class: "state empty", "data-state": "no-data" },
    h("h2", {}, "No data yet"),
    h("p", {}, `Nothing was collected for ${project.attributes.name} in this period. Add the browser module to your site's pages:`),
    h("pre", {}, h("code", {}, snippet)),
    h("p", {}, "Servers send events to /v1/batch with their secret key. Events show up here about a second after they arrive."));
}

/** notes are the period's remarks: clamped to retention. */
export function periodNotes(meta, project) {
  const p = meta?.period;
  if (!p?.clampedToRetention) return null;
  return h("p", { class: "note", "data-state": "clamped" },
    `The period started before the ${project.attributes.retentionDays} days your plan keeps: it starts at the first day kept.`);
}
