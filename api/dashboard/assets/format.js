// Numbers in the browser's locale, money per currency as the API gives it
// (never added across currencies), moments in the project's time zone.

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const pf = new Intl.NumberFormat(undefined, { style: "percent", minimumFractionDigits: 1, maximumFractionDigits: 1 });
const pf0 = new Intl.NumberFormat(undefined, { style: "percent", maximumFractionDigits: 0 });
const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

export const DASH = "–";

export function number(v) {
  return v === null || v === undefined ? DASH : nf.format(v);
}

export function percent(v) {
  return v === null || v === undefined ? DASH : pf.format(v);
}

/** shortPercent is an axis label: a ratio as a whole percentage. */
export function shortPercent(v) {
  return pf0.format(v);
}

export function short(v) {
  return compact.format(v);
}

export function money(amount, currency) {
  if (amount === null || amount === undefined) return DASH;
  if (!currency) return nf.format(amount);
  return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(amount);
}

/** moneyList writes [{currency, amount}, …] one currency after the other. */
export function moneyList(list) {
  if (!list || list.length === 0) return DASH;
  return list.map((m) => money(m.amount, m.currency)).join(" · ");
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return DASH;
  const s = Math.round(seconds);
  const m = Math.floor(s / 60);
  return m ? `${m} min ${s % 60} s` : `${s} s`;
}

/** value writes v by a trend's or key number's format. */
export function value(v, format, currency) {
  switch (format) {
    case "percent": return percent(v);
    case "currency": return money(v, currency);
    case "duration": return duration(v);
    default: return number(v);
  }
}

/** change is the relative change from previous to v, or null. */
export function change(v, previous) {
  if (v === null || v === undefined || previous === null || previous === undefined || previous === 0) return null;
  return (v - previous) / Math.abs(previous);
}

const dtf = new Map();
function dateFormat(zone, opts) {
  const k = zone + JSON.stringify(opts);
  if (!dtf.has(k)) dtf.set(k, new Intl.DateTimeFormat(undefined, { ...opts, timeZone: zone || undefined }));
  return dtf.get(k);
}

/** moment writes an ISO moment of the API in the project's zone. */
export function moment(iso, zone) {
  if (!iso) return DASH;
  return dateFormat(zone, { dateStyle: "medium", timeStyle: "short" }).format(new Date(iso));
}

export function day(iso, zone) {
  if (!iso) return DASH;
  return dateFormat(zone, { dateStyle: "medium" }).format(new Date(iso));
}

/** bucket writes a trend bucket start for its interval. */
export function bucket(iso, interval, zone, long) {
  const d = new Date(iso);
  switch (interval) {
    case "minute":
    case "hour":
      return dateFormat(zone, long ? { dateStyle: "medium", timeStyle: "short" } : { hour: "2-digit", minute: "2-digit" }).format(d);
    case "month":
      return dateFormat(zone, { month: "short", year: "numeric" }).format(d);
    default:
      return dateFormat(zone, long ? { dateStyle: "medium" } : { month: "short", day: "numeric" }).format(d);
  }
}

/** label turns an API key (newPeople, paid_search) into words. */
export function label(key) {
  const words = { newPeople: "New people", conversionRate: "Conversion rate", ai_assistant: "AI assistant" };
  if (words[key]) return words[key];
  const s = key.replace(/_/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();
  return s.charAt(0).toUpperCase() + s.slice(1);
}
