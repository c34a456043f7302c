// Every data request of the UI: the ordinary Kubernetes API, same origin, with the user's
// bearer token (sessionStorage: gone when the tab closes). No cookies are sent or used.

const TOKEN_KEY = "setpoint.token";
const JSON_TYPE = "application/json";
export const TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io";
export const DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(code, status) {
    const message = (status && typeof status.message === "string" && status.message)
      || `the server answered ${code}`;
    super(message);
    this.code = code;
    this.status = status;
    this.reason = status && status.reason;
  }
}

function headers(accept, hasBody) {
  const h = { Accept: accept };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  if (hasBody) h["Content-Type"] = JSON_TYPE;
  return h;
}

export async function request(path, { method = "GET", body, accept = JSON_TYPE, signal } = {}) {
  const response = await fetch(path, {
    method, signal, credentials: "omit", cache: "no-store", redirect: "error",
    headers: headers(accept, body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Calls onEvent(event) for each watch event of `path` from `resourceVersion` until the
// stream ends (returns) or fails (throws); `signal` stops it.
export async function watchStream(path, resourceVersion, onEvent, signal, accept = JSON_TYPE) {
  const sep = path.includes("?") ? "&" : "?";
  const url = `${path}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(resourceVersion)}`;
  const response = await fetch(url, {
    signal, credentials: "omit", cache: "no-store", redirect: "error",
    headers: headers(accept, false),
  });
  if (!response.ok) {
    let data = null;
    try { data = await response.json(); } catch { data = null; }
    throw new ApiError(response.status, data);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line) onEvent(JSON.parse(line));
    }
    if (buffer.length > 16 * 1024 * 1024) throw new Error("watch event too large");
  }
}

// Watches `path` (a collection) and calls onChange() after every change, debounced; re-lists
// when the watch expires (410) and retries with backoff on errors, until `signal` aborts.
// `since`: the resourceVersion of what the caller has drawn, so that a change made between
// its read and the start of the watch is not missed (without it, the watch starts from a
// fresh list of its own).
export function watchChanges(path, onChange, signal, { debounceMs = 150, since = null } = {}) {
  let timer = null;
  const changed = () => {
    if (timer !== null) return;
    timer = setTimeout(() => { timer = null; if (!signal.aborted) onChange(); }, debounceMs);
  };
  (async () => {
    let delay = 500;
    let rv = since || null;
    while (!signal.aborted) {
      try {
        if (rv === null) {
          const sep = path.includes("?") ? "&" : "?";
          const list = await request(`${path}${sep}limit=1`, { signal,
            accept: "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io" });
          rv = list.metadata.resourceVersion;
        }
        await watchStream(path, rv, (event) => {
          const obj = event.object || {};
          if (event.type === "ERROR") {
            if (obj.code === 410) rv = null;
            throw new ApiError(obj.code || 500, obj);
          }
          if (obj.metadata && obj.metadata.resourceVersion) rv = obj.metadata.resourceVersion;
          if (event.type !== "BOOKMARK") { delay = 500; changed(); }
        }, signal);
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ApiError && e.code === 410) { rv = null; changed(); continue; }
        if (e instanceof ApiError && (e.code === 401 || e.code === 403)) return;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 30000);
      }
    }
  })();
}
