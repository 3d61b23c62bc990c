// Charts drawn as SVG by this small module: a line chart of a trend (with
// the comparison period dashed beside it) and a bar chart of a funnel.
// Colours come from the stylesheet, so both colour schemes read well.
import { h, s } from "./dom.js";
import * as f from "./format.js";

const H = 260, L = 48, R = 24, T = 16, B = 32;

/** widthOf is the drawing width for a container: its pixels, within bounds, so text keeps its size. */
export function widthOf(el) {
  return Math.round(Math.max(300, Math.min(1100, (el && el.clientWidth) || 800)));
}

/** niceStep rounds v up to 1, 2, 2.5 or 5 times a power of ten. */
export function niceStep(v, integer) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (integer && m * p < 1) continue;
    if (v <= m * p && !(integer && !Number.isInteger(m * p))) return m * p;
  }
  return 10 * p;
}

function path(points, x, y) {
  let d = "", pen = false;
  points.forEach((p, i) => {
    if (p.v === null || p.v === undefined) { pen = false; return; }
    d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(p.v).toFixed(1);
    pen = true;
  });
  return d;
}

/**
 * trendChart draws a trend object of the API: its series as lines, the
 * comparison dashed, with a table of the same numbers for screen readers.
 */
export function trendChart(trend, { zone, title, width }) {
  const W = width || 800;
  const series = trend.series || [];
  const comparison = trend.comparison || [];
  const n = Math.max(1, ...series.map((x) => x.points.length));
  const all = [...series, ...comparison].flatMap((x) => x.points.map((p) => p.v)).filter((v) => v !== null && v !== undefined);
  const integer = trend.format === "number" && all.every(Number.isInteger);
  const max = 4 * niceStep(Math.max(0, ...all) / 4, integer);
  const x = (i) => L + (n === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const fmt = (v) => f.value(v, trend.format, trend.currency);
  const grid = [];
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    grid.push(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
      s("text", { class: "tick", x: L - 6, y: y(v) + 4, "text-anchor": "end" }, trend.format === "percent" ? f.shortPercent(v) : f.short(v)));
  }
  const ticks = [];
  const first = series[0]?.points || [];
  const every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor(W / 120))));
  first.forEach((p, i) => {
    if (i % every !== 0) return;
    const anchor = n > 1 && i === n - 1 ? "end" : i === 0 && n > 1 ? "start" : "middle";
    ticks.push(s("text", { class: "tick", x: x(i), y: H - 10, "text-anchor": anchor }, f.bucket(p.t, trend.interval, zone)));
  });
  const lines = [];
  comparison.forEach((c, k) => lines.push(s("path", { class: `line cmp c${k}`, d: path(c.points, x, y) })));
  series.forEach((c, k) => {
    lines.push(s("path", { class: `line c${k}`, d: path(c.points, x, y) }));
    if (n <= 62) c.points.forEach((p, i) => {
      if (p.v !== null && p.v !== undefined) lines.push(s("circle", { class: `dot c${k}`, cx: x(i), cy: y(p.v), r: 3 },
        s("title", {}, `${f.label(c.key)}, ${f.bucket(p.t, trend.interval, zone, true)}: ${fmt(p.v)}`)));
    });
  });
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title, "data-points": n }, grid, ticks, lines);
  const legend = h("ul", { class: "legend" },
    series.map((c, k) => h("li", { class: `c${k}` }, f.label(c.key))),
    comparison.length ? h("li", { class: "cmp" }, "Previous period (dashed)") : null);
  const head = [h("th", { scope: "col" }, "Period start")];
  series.forEach((c, k) => {
    head.push(h("th", { scope: "col" }, f.label(c.key)));
    if (comparison[k]) head.push(h("th", { scope: "col" }, f.label(c.key) + ", previous"));
  });
  const rows = first.map((p, i) => {
    const cells = [h("th", { scope: "row" }, f.bucket(p.t, trend.interval, zone, true))];
    series.forEach((c, k) => {
      cells.push(h("td", { "data-series": c.key }, fmt(c.points[i]?.v)));
      if (comparison[k]) cells.push(h("td", { "data-series": c.key + ":previous" }, fmt(comparison[k].points[i]?.v)));
    });
    return h("tr", {}, cells);
  });
  const table = h("table", { class: "trend-data sr-only" }, h("caption", {}, title), h("thead", {}, h("tr", {}, head)), h("tbody", {}, rows));
  return h("figure", { class: "trend" }, svg, legend, table);
}

/** funnelChart draws a funnel report's steps as bars with conversion and drop-off. */
export function funnelChart(steps, title, width) {
  const W = width || 800;
  const n = steps.length;
  const max = Math.max(1, ...steps.map((st) => st.count));
  const slot = (W - L - R) / n;
  const bw = Math.min(120, slot * 0.6);
  const y = (v) => T + 20 + (H - T - B - 40) * (1 - v / max);
  const parts = [];
  steps.forEach((st, i) => {
    const cx = L + slot * i + slot / 2;
    parts.push(s("rect", { class: "bar", x: cx - bw / 2, y: y(st.count), width: bw, height: Math.max(0, y(0) - y(st.count)) },
      s("title", {}, `${st.name}: ${f.number(st.count)} (${f.percent(st.conversion)})`)));
    parts.push(s("text", { class: "bar-label", x: cx, y: y(st.count) - 6, "text-anchor": "middle" }, `${f.number(st.count)} · ${f.percent(st.conversion)}`));
    parts.push(s("text", { class: "tick", x: cx, y: H - 10, "text-anchor": "middle" }, st.name.length > 18 ? st.name.slice(0, 17) + "…" : st.name));
    if (i > 0 && st.dropoff !== null) parts.push(s("text", { class: "drop", x: cx - slot / 2, y: y(0) - 8, "text-anchor": "middle" }, "−" + f.percent(st.dropoff)));
  });
  parts.push(s("line", { class: "grid", x1: L, x2: W - R, y1: y(0), y2: y(0) }));
  return s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title }, parts);
}

/** bar is a cell's inline bar: share of the largest value in its column. */
export function bar(v, max) {
  const w = max > 0 ? Math.round((1000 * v) / max) / 10 : 0;
  return h("span", { class: "bar-track", "aria-hidden": "true" }, h("span", { class: "bar-fill", style: { width: w + "%" } }));
}
