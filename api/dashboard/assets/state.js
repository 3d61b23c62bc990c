// The page's state is its URL: /p/{project}/{page}[/{item}] and a query of
// the reporting API's own parameters (period, from, to, compare,
// filters[i][field|op|value], touch, view, sort, …), so a shared URL shows
// the same numbers and each page asks the API exactly what its URL says.

export const PAGES = ["overview", "acquisition", "goals", "funnel", "people", "events"];

/** route reads a location into {page, project, item, params}. */
export function route(loc) {
  const params = new URLSearchParams(loc.search);
  const parts = loc.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { page: "home", params };
  if (parts[0] === "signin") return { page: "signin", params };
  if (parts[0] === "projects") return { page: "projects", params };
  if (parts[0] === "p" && parts[1]) {
    const page = parts[2] || "overview";
    if (!PAGES.includes(page)) return { page: "notfound", params };
    let item = parts[3] || "";
    if (page === "goals" && item) return { page: "goal", project: parts[1], item, params };
    if (page === "people" && item) return { page: "person", project: parts[1], item, params };
    return { page, project: parts[1], item, params };
  }
  return { page: "notfound", params };
}

/** projectPath is the URL path of a project's page. */
export function projectPath(project, page, item) {
  let p = "/p/" + encodeURIComponent(project) + "/" + page;
  if (item) p += "/" + encodeURIComponent(item);
  return p;
}

/** href joins a path and a query. */
export function href(path, params) {
  const q = params ? String(params) : "";
  return q ? path + "?" + q : path;
}

const FILTER = /^filters\[(\d+)\]\[(field|op|value)\]$/;

/** filters reads filters[i][…] in the order of i. */
export function filters(params) {
  const by = new Map();
  for (const [k, v] of params) {
    const m = FILTER.exec(k);
    if (!m) continue;
    const i = Number(m[1]);
    if (!by.has(i)) by.set(i, { field: "", op: "", value: "" });
    by.get(i)[m[2]] = v;
  }
  return [...by.keys()].sort((a, b) => a - b).map((i) => by.get(i));
}

/** withFilters returns params with its filters replaced by list. */
export function withFilters(params, list) {
  const out = new URLSearchParams();
  for (const [k, v] of params) if (!FILTER.test(k)) out.append(k, v);
  list.forEach((f, i) => {
    out.append(`filters[${i}][field]`, f.field);
    out.append(`filters[${i}][op]`, f.op);
    if (f.value !== undefined && f.value !== "" && f.op !== "set" && f.op !== "not_set") out.append(`filters[${i}][value]`, f.value);
  });
  return out;
}

/** pick keeps the named parameters (and the filters when "filters" is named). */
export function pick(params, names) {
  const out = new URLSearchParams();
  for (const [k, v] of params) {
    if (names.includes(k) || (names.includes("filters") && FILTER.test(k))) out.append(k, v);
  }
  return out;
}

/** set returns a copy of params with name set to value (removed when empty). */
export function set(params, name, value) {
  const out = new URLSearchParams(params);
  if (value === undefined || value === null || value === "") out.delete(name);
  else out.set(name, value);
  return out;
}

// The fields and operators of the specification's filters.
const TEXT = ["is", "is_not", "contains", "not_contains", "starts_with", "matches", "set", "not_set"];
const CLOSED = ["is", "is_not", "set", "not_set"];
const IS = ["is", "is_not"];
export const ALL_OPS = [...TEXT, "gt", "lt"];

export const EVENT_FIELDS = {
  event_name: TEXT, page_path: TEXT, page_host: TEXT, referrer_host: TEXT, region: TEXT,
  utm_source: TEXT, utm_medium: TEXT, utm_campaign: TEXT, utm_term: TEXT, utm_content: TEXT,
  channel: IS, country: CLOSED, click_source: CLOSED, device_type: CLOSED, browser: CLOSED,
  os: CLOSED, locale: CLOSED, source_type: CLOSED, collection_mode: CLOSED,
};

export const PERSON_FIELDS = {
  stage: IS, purchase: ["set", "not_set"], goal: IS, action: IS, segment: IS,
  funnel: ["is"], experiment: ["is"], first_channel: IS, last_channel: IS,
  first_campaign: ["is", "is_not", "contains", "set", "not_set"],
  last_campaign: ["is", "is_not", "contains", "set", "not_set"],
  first_landing: ["is", "is_not", "starts_with", "contains"],
  last_landing: ["is", "is_not", "starts_with", "contains"],
  first_ad_platform: IS, last_ad_platform: IS, country: IS, device: IS,
};

/** opsOf lists the operators of field (properties.<key> takes them all). */
export function opsOf(fields, field) {
  if (fields === EVENT_FIELDS && field.startsWith("properties.")) return ALL_OPS;
  return fields[field] || [];
}

export const CHANNELS = ["paid_search", "paid_social", "email", "ai_assistant", "organic_search",
  "organic_social", "campaign", "referral", "direct", "none"];
