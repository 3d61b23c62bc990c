// The reporting API, read from the dashboard's own origin with the API key
// of the person signed in. The key lives in sessionStorage only (gone with
// the tab); a 401 signs out.

const KEY = "mf.apiKey";
export const API_BASE = document.querySelector('meta[name="mf-api"]')?.content || "/api/v1";
export const KEY_PATTERN = /^mf_pat_[a-z0-9]{8}_[A-Za-z0-9]{40}$/;

export function getKey() {
  return sessionStorage.getItem(KEY);
}

export function setKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

/** An answer other than 2xx, with the API's error object. */
export class ApiError extends Error {
  constructor(status, code, detail, parameter, retryAfter) {
    super(detail || `the API answered ${status}`);
    this.status = status;
    this.code = code || "";
    this.parameter = parameter || "";
    this.retryAfter = retryAfter;
  }
}

/**
 * get asks the API for path (under /api/v1) with the given query and
 * returns the JSON:API document. A 401 forgets the key and calls onSignedOut.
 */
export async function get(path, query, { signal, onSignedOut } = {}) {
  const key = getKey();
  if (!key) {
    onSignedOut?.(new ApiError(401, "unauthorized", "Sign in with an API key."));
    throw new ApiError(401, "unauthorized", "Sign in with an API key.");
  }
  const qs = query && String(query);
  const res = await fetch(API_BASE + path + (qs ? "?" + qs : ""), {
    headers: { Authorization: "Bearer " + key, Accept: "application/vnd.api+json" },
    credentials: "omit",
    cache: "no-store",
    signal,
  });
  if (res.ok) return res.json();
  let e = {};
  try {
    e = (await res.json()).errors?.[0] || {};
  } catch {
    // A body that is not JSON:API: the status says enough.
  }
  const retry = Number(res.headers.get("Retry-After")) || undefined;
  const err = new ApiError(res.status, e.code, e.detail, e.source?.parameter, retry);
  if (res.status === 401) {
    signOut();
    onSignedOut?.(err);
  }
  throw err;
}
