// Raw events: the last hour, day or week, newest first, with filters and
// paging; the first page refreshes while it is open.
import { h, add, replace } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { table, pick, pager } from "../widgets.js";

export const controls = { period: "events", filters: st.EVENT_FIELDS };

const REFRESH_MS = 10000;

export async function render(ctx) {
  const p = ctx.project;
  document.title = `Raw events · ${p.attributes.name} · mf`;
  const params = ctx.params;
  const q = st.pick(params, ["period", "filters", "cursor"]);
  if (!["1h", "24h", "7d"].includes(q.get("period"))) q.set("period", "24h");
  const holder = h("div", { id: "events-list" });
  const stamp = h("p", { class: "help", id: "refreshed", "aria-live": "polite" });
  add(ctx.el, h("h1", {}, "Raw events"), stamp, holder);
  const draw = (doc) => {
    replace(holder, list(ctx, doc), pager(ctx, doc.meta.nextCursor));
    stamp.textContent = (params.get("cursor") ? "" : "Refreshes every 10 s. ") + "Updated " + new Date().toLocaleTimeString() + ".";
  };
  draw(await ctx.get("/events", q));
  if (params.get("cursor")) return;
  const tick = async () => {
    if (ctx.signal.aborted) return;
    if (document.visibilityState === "visible") {
      try {
        draw(await ctx.get("/events", q));
      } catch (err) {
        if (ctx.signal.aborted) return;
        stamp.textContent = "Not refreshed: " + err.message;
      }
    }
    setTimeout(tick, err429(stamp) ? REFRESH_MS * 3 : REFRESH_MS);
  };
  setTimeout(tick, REFRESH_MS);
}

function err429(stamp) {
  return stamp.textContent.startsWith("Not refreshed");
}

function list(ctx, doc) {
  const zone = ctx.project.attributes.timezone;
  if (doc.data.length === 0) return h("p", { class: "state empty", "data-state": "no-events" }, "No event in this period.");
  const profile = st.pick(ctx.params, []);
  const rows = doc.data.map((e) => {
    const a = e.attributes;
    return { attrs: { "data-id": e.id }, cells: [
      h("time", { datetime: a.occurredAt }, f.moment(a.occurredAt, zone)),
      pick(ctx, "event_name", a.name), a.kind, pick(ctx, "page_path", a.path), pick(ctx, "referrer_host", a.referrer),
      pick(ctx, "country", a.country), pick(ctx, "device_type", a.device), pick(ctx, "browser", a.browser),
      a.person ? h("a", { href: ctx.link("people", profile, a.person.ref) }, a.person.name ?? "visitor") : (a.consented ? f.DASH : "no consent"),
      a.revenue ? f.money(a.revenue.amount, a.revenue.currency) : f.DASH] };
  });
  const cols = [["Time", "occurredAt"], ["Event", "name"], ["Kind", "kind"], ["Page", "path"], ["Referrer", "referrer"], ["Country", "country"],
    ["Device", "device"], ["Browser", "browser"], ["Person", "person"], ["Revenue", "revenue", true]].map(([title, key, num]) => ({ title, key, num }));
  return table("events", cols, rows, "Raw events, newest first");
}
