// The dashboard: a router over the URL, the sign-in, the page frame
// (navigation, period, comparison, filters) and the error states. Each page
// is a module of pages/ that asks the reporting API and draws the answer.
import { h, replace } from "./dom.js";
import * as api from "./api.js";
import * as st from "./state.js";
import { controls } from "./controls.js";
import { errorState } from "./states.js";

const pages = {
  projects: () => import("./pages/projects.js"),
  overview: () => import("./pages/overview.js"),
  acquisition: () => import("./pages/acquisition.js"),
  goals: () => import("./pages/goals.js"),
  goal: () => import("./pages/goal.js"),
  funnel: () => import("./pages/funnel.js"),
  people: () => import("./pages/people.js"),
  person: () => import("./pages/person.js"),
  events: () => import("./pages/events.js"),
};

const NAV = [["overview", "Overview"], ["acquisition", "Acquisition"], ["goals", "Goals"],
  ["funnel", "Funnels"], ["people", "People"], ["events", "Raw events"]];

const top = document.getElementById("top");
const main = document.getElementById("main");
const projects = new Map(); // id → project resource, read once per tab
let current = null; // AbortController of the page being drawn
let signedOutBecause = "";

/** go navigates to url inside the dashboard (a new history entry). */
export function go(url, { replaceEntry = false } = {}) {
  if (replaceEntry) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render();
}

function onSignedOut(err) {
  signedOutBecause = err?.message || "";
  projects.clear();
  const next = location.pathname + location.search;
  go(st.href("/signin", next.startsWith("/signin") ? null : new URLSearchParams({ next })), { replaceEntry: true });
}

function get(path, query, signal) {
  return api.get(path, query, { signal, onSignedOut });
}

async function project(id, signal) {
  if (!projects.has(id)) projects.set(id, (await get("/projects/" + encodeURIComponent(id), null, signal)).data);
  return projects.get(id);
}

function header(r, proj) {
  const nav = proj
    ? h("nav", { "aria-label": "Reports" }, h("ul", {}, NAV.map(([page, name]) => {
      const here = r.page === page || (r.page === "goal" && page === "goals") || (r.page === "person" && page === "people");
      return h("li", {}, h("a", { href: st.href(st.projectPath(proj.id, page), carry(r.params, page)), "aria-current": here ? "page" : null }, name));
    })))
    : null;
  replace(top,
    h("a", { class: "brand", href: "/projects", "aria-label": "mf, all projects" }, "mf"),
    proj ? h("span", { class: "project-name" }, h("a", { href: "/projects" }, "Projects"), " / ", h("strong", { "data-project": proj.id }, proj.attributes.name)) : null,
    h("span", { class: "spacer" }),
    api.getKey() ? h("button", { type: "button", class: "link", onclick: () => { api.signOut(); signedOutBecause = ""; projects.clear(); go("/signin"); } }, "Sign out") : null,
    nav);
}

/** carry keeps what the next page understands of the current URL. */
function carry(params, page) {
  const period = ["period", "from", "to"];
  switch (page) {
    case "overview": return st.pick(params, [...period, "compare", "filters"]);
    case "acquisition": return st.pick(params, [...period, "filters"]);
    case "events": {
      const p = st.pick(params, ["period", "filters"]);
      return ["1h", "24h", "7d"].includes(p.get("period")) ? p : st.set(p, "period", "");
    }
    default: return st.pick(params, period);
  }
}

async function render() {
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  const signal = ctl.signal;
  const r = st.route(location);
  document.title = "mf";
  delete main.dataset.ready;
  if (r.page === "home") return go(api.getKey() ? "/projects" : "/signin", { replaceEntry: true });
  if (r.page === "signin") return signIn(r);
  if (!api.getKey()) return onSignedOut(null);
  if (r.page === "notfound") {
    header(r, null);
    return replace(main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "/projects" }, "All projects")));
  }
  try {
    // The project and the page's module load side by side.
    const [proj, mod] = await Promise.all([r.project ? project(r.project, signal) : null, pages[r.page]()]);
    if (signal.aborted) return;
    header(r, proj);
    const body = h("div", { class: "page", "aria-busy": "true" });
    const bar = controls(r, mod.controls || {}, proj, (params) => go(st.href(location.pathname, params)));
    replace(main, bar, body);
    const ctx = {
      r, project: proj, params: r.params, el: body, signal,
      get: (path, query) => get((proj ? "/projects/" + encodeURIComponent(proj.id) : "") + path, query, signal),
      link: (page, params, item) => st.href(st.projectPath(proj.id, page, item), params),
      go: (params) => go(st.href(location.pathname, params)),
      addFilter: (field, value) => {
        const list = st.filters(r.params).filter((x) => !(x.field === field && x.op === "is"));
        go(st.href(location.pathname, st.set(st.withFilters(r.params, [...list, { field, op: "is", value }]), "cursor", "")));
      },
    };
    await mod.render(ctx);
    if (signal.aborted) return;
    body.setAttribute("aria-busy", "false");
    main.dataset.ready = location.pathname + location.search;
  } catch (err) {
    if (signal.aborted || err.name === "AbortError") return;
    if (err.status === 401) return;
    header(r, projects.get(r.project) || null);
    replace(main, errorState(err, () => render()));
    main.dataset.ready = location.pathname + location.search;
  }
}

function signIn(r) {
  header(r, null);
  document.title = "Sign in · mf";
  const input = h("input", { id: "key", name: "key", type: "password", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "key-help" });
  const msg = h("p", { class: "error", role: "alert", id: "signin-error" }, signedOutBecause ? "Signed out: " + signedOutBecause : "");
  const form = h("form", { class: "signin", onsubmit: async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!api.KEY_PATTERN.test(key)) {
      msg.textContent = "An API key looks like mf_pat_ followed by 8 lower-case letters or digits, _ and 40 letters or digits.";
      return;
    }
    api.setKey(key);
    try {
      await api.get("/projects", null, {});
      signedOutBecause = "";
      const next = r.params.get("next");
      go(next && next.startsWith("/") && !next.startsWith("//") ? next : "/projects", { replaceEntry: true });
    } catch (err) {
      api.signOut();
      msg.textContent = err.status === 401 ? "This key was refused: " + err.message : err.message;
    }
  } },
  h("h1", {}, "Sign in"),
  h("label", { for: "key" }, "API key"),
  input,
  h("p", { id: "key-help", class: "help" }, "Your key (mf_pat_…) stays in this tab only and is forgotten when you close it."),
  h("button", { type: "submit" }, "Sign in"),
  msg);
  replace(main, form);
  main.dataset.ready = location.pathname + location.search;
  input.focus();
}

// Links inside the dashboard navigate without reloading the page.
document.addEventListener("click", (e) => {
  const a = e.target.closest?.("a[href]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/")) return;
  if (url.hash && url.pathname === location.pathname && url.search === location.search) return; // the skip link
  e.preventDefault();
  go(url.pathname + url.search);
});
window.addEventListener("popstate", () => render());
render();
