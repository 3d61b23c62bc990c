// A person's profile: traits, first touch, client and counts.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { dl } from "../widgets.js";

export const controls = {};

export async function render(ctx) {
  const p = ctx.project;
  const doc = await ctx.get("/people/" + encodeURIComponent(ctx.r.item));
  const a = doc.data.attributes;
  const zone = p.attributes.timezone;
  const name = a.name || a.userId || "Anonymous visitor";
  document.title = `${name} · People · ${p.attributes.name} · mf`;
  const t = a.firstTouch;
  add(ctx.el,
    h("p", {}, h("a", { href: ctx.link("people", st.pick(ctx.params, ["period", "from", "to"])) }, "← People")),
    h("h1", { "data-id": doc.data.id }, name, " ", h("span", { class: "badge" }, f.label(a.stage))),
    a.sharedBrowser ? h("p", { class: "note" }, "Someone else signed in on one of this person's browsers.") : null,
    h("div", { class: "cards" },
      h("section", { class: "card", id: "identity" }, h("h2", {}, "Who"), dl([
        ["Name", a.name ?? f.DASH, "name"], ["Email", a.email ?? f.DASH, "email"], ["User id", a.userId ?? f.DASH, "userId"],
        ["Known", a.known ? "yes" : "no", "known"], ["First seen", f.moment(a.firstSeen, zone), "firstSeen"], ["Last seen", f.moment(a.lastSeen, zone), "lastSeen"],
        ["Browsers", f.number(a.browsers), "browsers"]])),
      h("section", { class: "card", id: "counts" }, h("h2", {}, "Activity"), dl([
        ["Visits", f.number(a.visits), "visits"], ["Active days", f.number(a.activeDays), "activeDays"], ["Events", f.number(a.events), "events"],
        ["Pageviews", f.number(a.pageviews), "pageviews"], ["Orders", f.number(a.orders), "orders"], ["Revenue", f.moneyList(a.revenue), "revenue"]])),
      h("section", { class: "card", id: "touch" }, h("h2", {}, "First touch"), t ? dl([
        ["Channel", f.label(t.channel), "channel"], ["Source", t.source || f.DASH, "source"], ["Campaign", t.campaign || f.DASH, "campaign"],
        ["Landing page", t.landing || f.DASH, "landing"]]) : h("p", {}, "No visit: only a server has seen this person.")),
      h("section", { class: "card", id: "client" }, h("h2", {}, "Client"), dl([
        ["Country", a.client.country || f.DASH, "country"], ["Region", a.client.region || f.DASH, "region"], ["Device", a.client.device || f.DASH, "device"],
        ["Browser", a.client.browser || f.DASH, "browser"], ["OS", a.client.os || f.DASH, "os"], ["Locale", a.client.locale || f.DASH, "locale"]])),
      h("section", { class: "card", id: "traits" }, h("h2", {}, "Traits"), a.traits.length
        ? dl(a.traits.map((x) => [x.key, typeof x.value === "string" ? x.value : JSON.stringify(x.value), "trait:" + x.key]))
        : h("p", {}, "No traits: this person was never identified with any."))));
}
