// Building the DOM node by node: the dashboard never parses HTML, so its
// Content-Security-Policy can close every HTML sink (Trusted Types 'none').

const SVG = "http://www.w3.org/2000/svg";

function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") el.textContent = String(v);
    else if (k === "class") el.setAttribute("class", v);
    else if (k === "style") for (const [p, pv] of Object.entries(v)) el.style.setProperty(p, pv);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked" || k === "selected") el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, kids);
  return el;
}

function append(el, kids) {
  for (const kid of kids) {
    if (kid === null || kid === undefined || kid === false) continue;
    if (Array.isArray(kid)) append(el, kid);
    else el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
}

/** h("a", {href: "/x", class: "y"}, "text", child…) creates an HTML element. */
export function h(tag, attrs, ...kids) {
  return build(document.createElement(tag), attrs, kids);
}

/** s("path", {d: "M0 0"}) creates an SVG element. */
export function s(tag, attrs, ...kids) {
  return build(document.createElementNS(SVG, tag), attrs, kids);
}

/** add appends kids to el, skipping null, undefined and false. */
export function add(el, ...kids) {
  append(el, kids);
  return el;
}

/** replace empties el and appends kids. */
export function replace(el, ...kids) {
  el.replaceChildren();
  append(el, kids);
  return el;
}
