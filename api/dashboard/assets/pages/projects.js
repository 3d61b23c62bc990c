// Projects: every project the key's owner can see, with plan and retention.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";

export const controls = {};

export async function render(ctx) {
  document.title = "Projects · mf";
  const q = st.pick(ctx.params, ["cursor"]);
  const doc = await ctx.get("/projects", q);
  const rows = doc.data.map((p) => {
    const a = p.attributes;
    return h("tr", { "data-id": p.id },
      h("th", { scope: "row" }, h("a", { href: st.projectPath(p.id, "overview") }, a.name), a.archived ? h("span", { class: "badge" }, "archived") : null),
      h("td", {}, a.organization?.name || ""),
      h("td", { "data-col": "plan" }, a.plan),
      h("td", { "data-col": "retentionDays", class: "num" }, f.number(a.retentionDays)),
      h("td", {}, a.timezone),
      h("td", {}, a.reportingCurrency));
  });
  const next = doc.links?.next ? new URL(doc.links.next, location.href).searchParams.get("cursor") : null;
  add(ctx.el, 
    h("h1", {}, "Projects"),
    doc.data.length === 0 ? h("p", { class: "state empty" }, "You are in no organization with a project yet.") :
      h("div", { class: "scroll" }, h("table", { class: "list", id: "projects" },
        h("thead", {}, h("tr", {}, ["Project", "Organization", "Plan", "Retention (days)", "Time zone", "Currency"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows))),
    h("nav", { class: "pager", "aria-label": "Pages" },
      q.get("cursor") ? h("a", { href: "/projects" }, "First page") : null,
      next ? h("a", { href: st.href("/projects", new URLSearchParams({ cursor: next })), rel: "next" }, "Next page") : null));
}
