// The setpoint UI: hash routes, each view built from the Kubernetes API with the user's token.
//   #/                                        kinds (discovery, custom resources included)
//   #/r/GROUP/VERSION/RESOURCE?ns=&labels=&notready=1&limit=   a table of one kind (Table form)
//   #/o/GROUP/VERSION/RESOURCE/NAMESPACE/NAME  one object: health, owner tree, events, JSON
// GROUP is "core" for the core group, NAMESPACE "-" for cluster-scoped objects.
import { ApiError, DISCOVERY, TABLE, request, setToken, token, watchChanges, watchStream } from "./api.js";
import { h, json, replace, visible } from "./dom.js";
import { LABELS, health } from "./health.js";

const main = document.getElementById("main");
const errorBox = document.getElementById("error");
const who = document.getElementById("who");
const signOut = document.getElementById("signout");

// the sweep of an owner tree: how many kinds, and objects per kind, it reads
const TREE_MAX_KINDS = 60;
const TREE_LIST_LIMIT = 500;
const TREE_MAX_DEPTH = 8;
// watches a page opens for its owner tree (browsers allow ~6 connections per server)
const TREE_MAX_WATCHES = 2;
const EVENTS_LIMIT = 500;
// rows a table reads at most (narrow a larger kind by namespace or labels)
const TABLE_LIMIT = 10000;
const SKIP_IN_TREE = new Set(["events", "events.events.k8s.io"]);

let page = null; // the AbortController of the view on screen
let kinds = null; // discovery, once per sign-in

function showError(e) {
  if (!e) { errorBox.hidden = true; errorBox.textContent = ""; return; }
  const code = e instanceof ApiError ? `${e.code} ${e.reason || ""}: ` : "";
  errorBox.textContent = visible(`${code}${e.message || e}`);
  errorBox.hidden = false;
}

function badge(obj) {
  const { state, message } = health(obj);
  return h("span", { class: `health health-${state}`, title: message, "data-health": state },
           LABELS[state]);
}

function healthLine(obj) {
  const { state, message } = health(obj);
  return h("p", { id: "health" }, h("span", { class: `health health-${state}`, "data-health": state },
                                    LABELS[state]),
           h("span", { class: "message", id: "health-message" }, message));
}

// ---- discovery -------------------------------------------------------------------------

async function discover(signal) {
  if (kinds) return kinds;
  const found = [];
  for (const path of ["/api", "/apis"]) {
    const doc = await request(path, { accept: DISCOVERY, signal });
    for (const group of doc.items || []) {
      const name = (group.metadata && group.metadata.name) || "";
      const version = (group.versions || [])[0];
      if (!version) continue;
      for (const r of version.resources || []) {
        const verbs = r.verbs || [];
        if (!verbs.includes("list")) continue;
        found.push({ group: name, version: version.version, resource: r.resource,
                     kind: (r.responseKind && r.responseKind.kind) || r.resource,
                     namespaced: r.scope === "Namespaced", verbs,
                     status: (r.subresources || []).some((sub) => sub.subresource === "status") });
      }
    }
  }
  found.sort((a, b) => (a.kind + a.group).localeCompare(b.kind + b.group));
  kinds = found;
  return kinds;
}

function findResource(group, version, resource) {
  return kinds.find((k) => k.group === group && k.resource === resource
                    && (!version || k.version === version));
}

function byApiVersionKind(apiVersion, kind) {
  const slash = (apiVersion || "").indexOf("/");
  const group = slash >= 0 ? apiVersion.slice(0, slash) : "";
  return kinds.find((k) => k.group === group && k.kind === kind);
}

// A name or namespace as one segment of an API path. encodeURIComponent leaves "." alone, and
// a browser resolves "." and ".." segments before it sends a request: ".../configmaps/.."
// would ask for the namespace itself, and the page's Delete would delete it. No Kubernetes
// object is named "." or "..", so such a name (from a link or an ownerReference) is refused.
function segment(value, what = "name") {
  const text = String(value);
  if (text === "" || text === "." || text === "..") {
    throw new Error(`not a valid ${what}: ${JSON.stringify(text)}`);
  }
  return encodeURIComponent(text);
}

function collectionPath(k, namespace) {
  const base = k.group ? `/apis/${k.group}/${k.version}` : `/api/${k.version}`;
  const ns = k.namespaced && namespace ? `/namespaces/${segment(namespace, "namespace")}` : "";
  return `${base}${ns}/${k.resource}`;
}

function objectPath(k, namespace, name) {
  return `${collectionPath(k, namespace)}/${segment(name)}`;
}

function objectHref(k, namespace, name) {
  return `#/o/${k.group || "core"}/${k.version}/${k.resource}/${encodeURIComponent(namespace || "-")}/${encodeURIComponent(name)}`;
}

function kindHref(k, query) {
  const q = new URLSearchParams(query || {}).toString();
  return `#/r/${k.group || "core"}/${k.version}/${k.resource}${q ? "?" + q : ""}`;
}

// ---- sign-in ---------------------------------------------------------------------------

// A bearer token is printable ASCII without spaces (ServiceAccount tokens are JWTs, static
// tokens are CSV fields): anything else cannot be sent in an Authorization header (fetch
// would refuse every request with a TypeError), so it is refused at the door.
const TOKEN_CHARS = /^[\x21-\x7e]{1,16384}$/;
const BAD_TOKEN = "That is not a bearer token: a token is printable ASCII without spaces.";

function isToken(value) { return TOKEN_CHARS.test(value); }

function signInView(message) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off",
                             size: 60, placeholder: "bearer token" });
  const form = h("form", { id: "signin", onsubmit: async (ev) => {
    ev.preventDefault();
    const value = input.value.trim();
    if (!isToken(value)) {
      signInView(value ? BAD_TOKEN : null);
      return;
    }
    setToken(value);
    kinds = null;
    await route();
  } }, h("p", {}, "Sign in with a bearer token: a ServiceAccount token (",
         h("code", {}, "kubectl create token NAME"), ") or one from --token-auth-file."),
  input, " ", h("button", { type: "submit" }, "Sign in"));
  replace(main, h("h1", {}, "Sign in"), message ? h("p", { class: "status" }, message) : null, form);
  input.focus();
}

async function whoAmI(signal) {
  try {
    const review = await request("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      method: "POST", signal,
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" } });
    return review.status.userInfo.username;
  } catch (e) {
    if (e instanceof ApiError && e.code === 401) throw e;
    return "";
  }
}

// ---- kinds -----------------------------------------------------------------------------

async function kindsView(signal) {
  const list = await discover(signal);
  const filter = h("input", { type: "search", id: "kind-filter", placeholder: "filter kinds" });
  const ul = h("ul", { class: "kinds", id: "kinds" });
  const render = () => {
    const f = filter.value.toLowerCase();
    replace(ul, list.filter((k) => !f || `${k.kind} ${k.resource} ${k.group}`.toLowerCase().includes(f))
      .map((k) => h("li", {}, h("a", { href: kindHref(k), "data-kind": k.kind }, k.kind), " ",
                    h("span", { class: "group" }, k.group || "core", "/", k.version))));
  };
  filter.addEventListener("input", render);
  render();
  replace(main, h("h1", {}, "Kinds"), h("div", { class: "toolbar" }, filter), ul);
}

// ---- a table of one kind ---------------------------------------------------------------

async function tableView(signal, group, version, resource, query) {
  await discover(signal);
  const k = findResource(group, version, resource);
  if (!k) throw new Error(`the server serves no ${resource} in ${group || "core"}/${version}`);
  const namespace = query.get("ns") || "";
  const labels = query.get("labels") || "";
  const notReady = query.get("notready") === "1";
  const limit = Math.min(Math.max(1, Number.parseInt(query.get("limit"), 10) || TABLE_LIMIT),
                         TABLE_LIMIT);
  const go = (changes) => {
    const q = { ns: namespace, labels, notready: notReady ? "1" : "", ...changes };
    for (const key of Object.keys(q)) if (!q[key]) delete q[key];
    location.hash = kindHref(k, q);
  };
  const toolbar = h("div", { class: "toolbar" });
  if (k.namespaced) {
    const nsInput = h("input", { id: "namespace", list: "namespaces", value: namespace,
                                 placeholder: "all namespaces",
                                 onchange: () => go({ ns: nsInput.value.trim() }) });
    const options = h("datalist", { id: "namespaces" });
    request("/api/v1/namespaces", { signal }).then((l) => replace(options,
      (l.items || []).map((n) => h("option", { value: n.metadata.name })))).catch(() => {});
    toolbar.append(h("label", {}, "Namespace ", nsInput), options);
  }
  const labelInput = h("input", { id: "labels", value: labels, placeholder: "app=web,tier!=db",
                                  onchange: () => go({ labels: labelInput.value.trim() }) });
  const notReadyBox = h("input", { type: "checkbox", id: "notready", checked: notReady,
                                   onchange: () => go({ notready: notReadyBox.checked ? "1" : "" }) });
  toolbar.append(h("label", {}, "Labels ", labelInput),
                 h("label", {}, notReadyBox, " not ready only"));
  const status = h("p", { class: "status", id: "table-status" });
  const holder = h("div", { id: "table" });
  replace(main, h("h1", {}, k.kind, " ", h("span", { class: "group" }, k.group || "core", "/", k.version)),
          toolbar, holder, status);
  const path = collectionPath(k, namespace);
  const params = new URLSearchParams({ includeObject: "Object" });
  if (labels) params.set("labelSelector", labels);
  const live = new LiveTable(holder, status, k, notReady, limit);
  let rv = null;
  let delay = 500;
  while (!signal.aborted) {
    try {
      if (rv === null) {
        const table = await request(`${path}?${params}&limit=${limit}`,
                                    { accept: TABLE, signal });
        rv = table.metadata.resourceVersion;
        live.reset(table, Boolean(table.metadata.continue));
        showError(null);
      }
      await watchStream(`${path}?${params}`, rv, (event) => {
        const obj = event.object || {};
        if (event.type === "ERROR") throw new ApiError(obj.code || 500, obj);
        if (obj.metadata && obj.metadata.resourceVersion) rv = obj.metadata.resourceVersion;
        if (event.type !== "BOOKMARK") live.apply(event.type, (obj.rows || [])[0]);
        delay = 500;
      }, signal, TABLE);
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.code === 410) { rv = null; continue; }
      showError(e);
      if (e instanceof ApiError && (e.code === 401 || e.code === 403)) return;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }
}

// A table kept current one watch event at a time: a row is replaced, inserted in
// namespace/name order, or removed; the rest of the table is left alone.
class LiveTable {
  constructor(holder, status, k, notReady, limit) {
    Object.assign(this, { holder, status, k, notReady, limit });
    this.columns = [];
    this.rows = new Map(); // uid -> <tr>
    this.truncated = false;
    this.end = null; // the key of the last row read, when the kind has more than were read
    this.tbody = null;
  }

  reset(table, truncated) {
    this.truncated = truncated;
    this.end = null;
    this.columns = (table.columnDefinitions || []).map((c, i) => ({ ...c, i }))
      .filter((c) => !c.priority);
    this.rows = new Map();
    this.tbody = h("tbody", {});
    for (const row of table.rows || []) {
      const tr = this.element(row);
      this.rows.set(tr.dataset.uid, tr);
      if (this.shown(row)) this.tbody.appendChild(tr);
      if (truncated) this.end = tr.dataset.key;
    }
    const head = h("tr", {}, this.columns.map((c) => h("th", { title: c.description || "" }, c.name)),
                   h("th", {}, "Health"));
    replace(this.holder, h("table", {}, h("thead", {}, head), this.tbody));
    this.count();
  }

  apply(type, row) {
    if (!row || !this.tbody) return;
    const uid = ((row.object && row.object.metadata) || {}).uid;
    const old = this.rows.get(uid);
    if (type === "DELETED") {
      if (old) old.remove();
      this.rows.delete(uid);
    } else {
      const tr = this.element(row);
      // a table that read only the first `limit` objects keeps to them and to objects
      // created among them (before the last one read): a change to an object after that
      // is left out, as the list left it out, so a kind larger than the limit does not
      // grow the table row by row, up to every object of the kind, as its objects change
      if (!old && this.end !== null && tr.dataset.key > this.end) return;
      this.rows.set(uid, tr);
      if (old) old.remove();
      if (this.shown(row)) {
        const after = [...this.tbody.children].find((x) => x.dataset.key > tr.dataset.key);
        this.tbody.insertBefore(tr, after || null);
      }
    }
    this.count();
  }

  shown(row) { return !this.notReady || health(row.object).state === "not-ready"; }

  count() {
    const n = this.tbody.children.length;
    this.status.textContent = `${n} object${n === 1 ? "" : "s"}, live` + (this.truncated
      ? ` (only the first ${this.limit} were read: narrow by namespace or labels)` : "");
  }

  element(row) {
    const meta = (row.object && row.object.metadata) || {};
    return h("tr", { "data-name": meta.name || "", "data-uid": meta.uid || "",
                     "data-key": `${meta.namespace || ""}/${meta.name || ""}` },
      this.columns.map((c) => {
        const cell = row.cells[c.i];
        const text = cell === null || cell === undefined ? ""
          : typeof cell === "object" ? JSON.stringify(cell) : String(cell);
        return h("td", {}, c.format === "name" && meta.name
          ? h("a", { href: objectHref(this.k, meta.namespace, meta.name) }, text) : text);
      }), h("td", {}, badge(row.object)));
  }
}

// ---- one object ------------------------------------------------------------------------

async function objectView(signal, group, version, resource, namespace, name) {
  await discover(signal);
  const k = findResource(group, version, resource);
  if (!k) throw new Error(`the server serves no ${resource} in ${group || "core"}/${version}`);
  const ns = k.namespaced && namespace !== "-" ? namespace : "";
  const path = objectPath(k, ns, name);
  const title = h("h1", {}, k.kind, " ", ns ? `${ns}/` : "", name);
  const summary = h("section", { id: "summary" });
  const tree = h("section", { id: "tree", class: "tree" }, h("h2", {}, "Owner tree"));
  const events = h("section", { id: "events" }, h("h2", {}, "Events and writes"));
  const body = h("section", { id: "object" });
  replace(main, h("p", {}, h("a", { href: kindHref(k, ns ? { ns } : {}) }, `all ${k.kind}`)),
          title, summary, tree, events, body);
  let editing = false;
  let current = null;
  let myEvents = [];
  let eventsNote = "";
  const timeline = () => { if (current) renderTimeline(events, current, myEvents, eventsNote); };
  const load = async () => {
    try {
      current = await request(path, { signal });
      showError(null);
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.code === 404) {
        replace(summary, h("p", { id: "health" }, h("span", { class: "health health-unknown" }, "deleted")));
        return;
      }
      showError(e);
      return;
    }
    replace(summary, healthLine(current), conditionsTable(current));
    timeline();
    if (!editing) renderObject(body, current, k, path, () => { editing = true; },
                               () => { editing = false; load(); });
  };
  await load();
  if (!current) return;
  const uid = current.metadata.uid;
  // the tree is drawn again when the object or a watched kind of the tree changes. Which
  // TREE_MAX_WATCHES kinds of the tree are watched is decided again at each draw (see
  // treeWatchOrder): a kind that loses its place stops being watched, one that gains it
  // (a Deployment's ReplicaSet, then its Pods) is watched from the list just drawn
  const watched = new Map(); // kind key -> the AbortController of its watch
  const drawTree = async (obj) => {
    const treeKinds = await ownerTree(tree, obj, k, ns, signal, uid, name);
    if (signal.aborted) return;
    const wanted = new Map();
    for (const entry of treeWatchOrder(treeKinds)) {
      if (wanted.size >= TREE_MAX_WATCHES) break;
      if (entry.k !== k) wanted.set(entry.key, entry);
    }
    for (const [key, stop] of watched) {
      if (!wanted.has(key)) { stop.abort(); watched.delete(key); }
    }
    for (const [key, entry] of wanted) {
      if (watched.has(key)) continue;
      const stop = new AbortController();
      signal.addEventListener("abort", () => stop.abort(), { once: true });
      watched.set(key, stop);
      watchChanges(collectionPath(entry.k, ns), () => drawTree(null), stop.signal,
                   { since: entry.rv });
    }
  };
  const fieldSelector = new URLSearchParams({ fieldSelector: `metadata.name=${name}` });
  watchChanges(`${collectionPath(k, ns)}?${fieldSelector}`, async () => {
    await load();
    if (current && !signal.aborted) await drawTree(current);
  }, signal, { since: current.metadata.resourceVersion });
  await drawTree(current);
  if (k.namespaced || k.resource === "namespaces" || k.resource === "nodes") {
    const evNs = ns || (k.resource === "namespaces" ? name : "");
    const evPath = evNs ? `/api/v1/namespaces/${segment(evNs, "namespace")}/events` : "/api/v1/events";
    const loadEvents = async () => {
      const found = await eventsOf(evPath, current, signal);
      if (signal.aborted) return null;
      if (typeof found === "string") eventsNote = found; else { myEvents = found.items; eventsNote = ""; }
      timeline();
      return typeof found === "string" ? null : found.rv;
    };
    const since = await loadEvents();
    watchChanges(evPath, loadEvents, signal, { since });
  }
}

function conditionsTable(obj) {
  const conds = (obj.status && Array.isArray(obj.status.conditions)) ? obj.status.conditions : [];
  if (!conds.length) return null;
  return h("table", { id: "conditions" }, h("thead", {}, h("tr", {}, ["Type", "Status", "Reason", "Message", "Last transition"].map((t) => h("th", {}, t)))),
           h("tbody", {}, conds.map((c) => h("tr", {}, [c.type, c.status, c.reason, c.message, c.lastTransitionTime].map((v) => h("td", {}, v === undefined ? "" : String(v)))))));
}

function withoutManagedFields(obj) {
  const copy = JSON.parse(JSON.stringify(obj));
  if (copy.metadata) delete copy.metadata.managedFields;
  return copy;
}

function renderObject(holder, obj, k, path, startEditing, stopEditing) {
  const managed = (obj.metadata && obj.metadata.managedFields) || [];
  const folded = h("details", { id: "managed-fields" },
    h("summary", {}, `managedFields: ${managed.length} entries (${managed.map((m) => `${m.manager} ${m.operation}${m.subresource ? " " + m.subresource : ""}`).join(", ")})`),
    h("pre", {}, json(managed)));
  const text = h("pre", { id: "object-json" }, json(withoutManagedFields(obj)));
  const canWrite = (k.verbs || []).includes("update");
  const edit = h("button", { type: "button", id: "edit", hidden: !canWrite, onclick: () => {
    startEditing();
    const area = h("textarea", { id: "editor", spellcheck: "false" },
                   json(withoutManagedFields(obj)));
    const save = h("button", { type: "button", id: "save", onclick: async () => {
      let body;
      try { body = JSON.parse(area.value); } catch (e) { showError(new Error(`not JSON: ${e.message}`)); return; }
      try {
        await request(path, { method: "PUT", body });
        showError(null);
        stopEditing();
      } catch (e) { showError(e); }
    } }, "Save");
    const cancel = h("button", { type: "button", onclick: () => { showError(null); stopEditing(); } }, "Cancel");
    replace(holder, h("h2", {}, "Edit"), h("div", { class: "toolbar" }, save, cancel), area);
  } }, "Edit");
  let armed = false;
  const del = h("button", { type: "button", id: "delete", hidden: !(k.verbs || []).includes("delete"),
    onclick: async () => {
      if (!armed) { armed = true; del.textContent = "Really delete?"; return; }
      try { await request(path, { method: "DELETE" }); showError(null); } catch (e) { showError(e); }
    } }, "Delete");
  replace(holder, h("h2", {}, "Object"), h("div", { class: "toolbar" }, edit, del), folded, text);
}

// ---- the owner tree --------------------------------------------------------------------

// The kinds below the top of a tree in the order their watches are given out: first the kinds
// with a status subresource (what a tree is looked at for is its objects' health: a
// BitcoinNetwork's StatefulSet and Pods before the ConfigMap beside them), then the kinds
// with more objects in the tree that report health now, then more objects, then tree order.
function treeWatchOrder(treeKinds) {
  const rank = (e) => [e.k.status ? 1 : 0, e.reporting, e.objects];
  return [...treeKinds].sort((a, b) => {
    const ra = rank(a);
    const rb = rank(b);
    for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return rb[i] - ra[i];
    return 0;
  });
}

// Builds the tree of `obj` (or of the object `uid`/`name` when obj is null: a refresh):
// up through ownerReferences to the top owner, then down to every object in the namespace
// that names a node as owner. Returns, for each kind that appears below the top, in tree
// order: {key ("resource.group"), k, rv (of its list), objects (in the tree), reporting
// (objects whose health is known)}.
async function ownerTree(holder, obj, k, ns, signal, uid, name) {
  try {
    if (!obj) obj = await request(objectPath(k, ns, name), { signal });
  } catch (e) {
    if (signal.aborted) return [];
    replace(holder, h("h2", {}, "Owner tree"), h("p", { class: "status" }, `cannot read the object: ${e.message}`));
    return [];
  }
  const self = obj.metadata.uid;
  // up
  let top = { obj, k };
  const seen = new Set([self]);
  for (let depth = 0; depth < TREE_MAX_DEPTH; depth++) {
    const refs = top.obj.metadata.ownerReferences || [];
    const ref = refs.find((r) => r.controller) || refs[0];
    if (!ref || seen.has(ref.uid)) break;
    const rk = byApiVersionKind(ref.apiVersion, ref.kind);
    if (!rk) break;
    try {
      const owner = await request(objectPath(rk, rk.namespaced ? ns : "", ref.name), { signal });
      seen.add(owner.metadata.uid);
      top = { obj: owner, k: rk };
    } catch (e) {
      if (signal.aborted) return [];
      top = { obj: { metadata: { name: ref.name, uid: ref.uid }, missing: e.message }, k: rk };
      break;
    }
  }
  // down: one sweep of the namespace (or of the cluster-scoped kinds), indexed by owner uid
  const candidates = kinds.filter((x) => (ns ? x.namespaced : !x.namespaced)
    && !SKIP_IN_TREE.has(`${x.resource}${x.group ? "." + x.group : ""}`)).slice(0, TREE_MAX_KINDS);
  const children = new Map();
  const listedAt = new Map();
  const queue = [...candidates];
  const worker = async () => {
    while (queue.length) {
      const ck = queue.shift();
      let list;
      try {
        list = await request(`${collectionPath(ck, ns)}?limit=${TREE_LIST_LIMIT}`, { signal });
      } catch { continue; }
      listedAt.set(`${ck.resource}.${ck.group}`, (list.metadata && list.metadata.resourceVersion) || null);
      for (const item of list.items || []) {
        for (const ref of (item.metadata && item.metadata.ownerReferences) || []) {
          if (!children.has(ref.uid)) children.set(ref.uid, []);
          children.get(ref.uid).push({ obj: item, k: ck });
        }
      }
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  if (signal.aborted) return [];
  const kindsBelow = new Map();
  const visited = new Set();
  const node = ({ obj: o, k: ok }, depth) => {
    const meta = o.metadata;
    visited.add(meta.uid);
    const label = h("a", { href: objectHref(ok, meta.namespace, meta.name) }, `${ok.kind} ${meta.name}`);
    const kids = depth < TREE_MAX_DEPTH ? (children.get(meta.uid) || []).filter((c) => !visited.has(c.obj.metadata.uid)) : [];
    const { state, message } = o.missing ? { state: "unknown", message: `cannot read: ${o.missing}` } : health(o);
    if (depth > 0) {
      const key = `${ok.resource}.${ok.group}`;
      if (!kindsBelow.has(key)) {
        kindsBelow.set(key, { key, k: ok, rv: listedAt.get(key) || null, objects: 0, reporting: 0 });
      }
      const entry = kindsBelow.get(key);
      entry.objects += 1;
      if (state !== "unknown") entry.reporting += 1;
    }
    return h("li", { class: meta.uid === self ? "self" : "", "data-name": meta.name, "data-kind": ok.kind },
             label, " ", o.missing ? null : badge(o), h("span", { class: "message" }, message),
             kids.length ? h("ul", {}, kids.map((c) => node(c, depth + 1))) : null);
  };
  replace(holder, h("h2", {}, "Owner tree"), h("ul", {}, node(top, 0)));
  return [...kindsBelow.values()];
}

// ---- events ----------------------------------------------------------------------------

// The object's Events and the list's resourceVersion ({items, rv}), or a string saying why
// they cannot be read.
async function eventsOf(path, obj, signal) {
  let list;
  try {
    list = await request(`${path}?limit=${EVENTS_LIMIT}`, { signal });
  } catch (e) {
    return `cannot list events: ${e.message}`;
  }
  const meta = obj.metadata;
  const items = (list.items || []).filter((ev) => {
    const inv = ev.involvedObject || ev.regarding || {};
    return inv.uid ? inv.uid === meta.uid : inv.kind === obj.kind && inv.name === meta.name;
  });
  return { items, rv: (list.metadata && list.metadata.resourceVersion) || null };
}

// "spec.size", "status.conditions", "metadata.labels.app": the fields a managedFields entry
// owns, to a depth of three, at most eight of them
function ownedFields(fieldsV1) {
  const found = [];
  const walk = (node, prefix, depth) => {
    for (const key of Object.keys(node || {})) {
      if (found.length >= 8) return;
      if (key === ".") continue;
      const name = key.startsWith("f:") ? key.slice(2) : key.startsWith("k:") ? "[…]" : key.slice(2);
      const path = prefix ? `${prefix}.${name}` : name;
      const child = node[key];
      const leaf = !child || typeof child !== "object" || Object.keys(child).filter((x) => x !== ".").length === 0;
      if (leaf || depth >= 2) found.push(path); else walk(child, path, depth + 1);
    }
  };
  walk(fieldsV1, "", 0);
  return found;
}

// Events and the last write of each field manager (managedFields) on one timeline, newest
// first: who did what to the object, and what the controllers said about it. Events with
// action "Reconcile" (published by operators on setpoint.runtime) are reconcile rows: the
// controller, the result, and the note's duration and triggers.
function renderTimeline(holder, obj, events, note) {
  const entries = [];
  for (const ev of events) {
    const series = ev.series && typeof ev.series === "object" ? ev.series : null;
    const count = series && series.count > 1 ? series.count : ev.count > 1 ? ev.count : 0;
    const time = (series && series.lastObservedTime) || ev.lastTimestamp || ev.eventTime || ev.firstTimestamp || (ev.metadata && ev.metadata.creationTimestamp) || "";
    const who = (ev.source && ev.source.component) || ev.reportingComponent || ev.reportingController || "";
    const message = String(ev.message || ev.note || "");
    const times = count ? ` (×${count})` : "";
    if (ev.action === "Reconcile") {
      const failed = ev.reason === "ReconcileFailed";
      entries.push({ time: String(time), kind: "reconcile", failed, who,
                     what: `reconcile ${failed ? "failed" : message.split(" ")[0] || "done"}`,
                     detail: `${message}${times}` });
      continue;
    }
    entries.push({ time: String(time), kind: "event", failed: ev.type === "Warning", who,
                   what: `event ${ev.type || ""}`.trim(),
                   detail: `${ev.reason || ""}: ${message}${times}` });
  }
  for (const m of (obj.metadata && obj.metadata.managedFields) || []) {
    entries.push({ time: String(m.time || ""), kind: "write", failed: false,
                   what: `write ${m.operation || ""}${m.subresource ? " " + m.subresource : ""}`,
                   who: m.manager || "", detail: ownedFields(m.fieldsV1).join(", ") });
  }
  const at = (t) => { const ms = Date.parse(t); return Number.isNaN(ms) ? 0 : ms; };
  entries.sort((a, b) => at(b.time) - at(a.time) || b.time.localeCompare(a.time));
  const rows = entries.map((e) => h("tr", { "data-what": e.kind, class: `tl-${e.kind}${e.failed ? " tl-failed" : ""}` },
    [e.time, e.what, e.who, e.detail].map((v) => h("td", {}, v))));
  replace(holder, h("h2", {}, "Events and writes"), note ? h("p", { class: "status" }, note) : null,
    entries.length
      ? h("table", { id: "timeline" }, h("thead", {}, h("tr", {}, ["Time", "What", "Who", "Details"].map((t) => h("th", {}, t)))), h("tbody", {}, rows))
      : h("p", { class: "status" }, "no events or writes"));
}

// ---- routing ---------------------------------------------------------------------------

async function route() {
  if (page) page.abort();
  page = new AbortController();
  const signal = page.signal;
  showError(null);
  const fromLink = takeTokenFromFragment();
  if (fromLink) { kinds = null; who.textContent = ""; }
  if (fromLink === false) {
    setToken(null);
    kinds = null;
    who.textContent = "";
    signOut.hidden = true;
    signInView(`The sign-in link holds no usable token. ${BAD_TOKEN}`);
    return;
  }
  if (!token()) { who.textContent = ""; signOut.hidden = true; signInView(); return; }
  signOut.hidden = false;
  const hash = location.hash.replace(/^#/, "") || "/";
  const [pathPart, queryPart] = hash.split("?");
  const query = new URLSearchParams(queryPart || "");
  const group = (g) => (g === "core" ? "" : g);
  try {
    // a malformed escape ("%E0%A4%A") is the link's fault: say so instead of keeping the old view
    const parts = pathPart.split("/").filter(Boolean).map(decodePart);
    if (!who.textContent) who.textContent = visible(await whoAmI(signal));
    if (parts[0] === "r" && parts.length === 4) {
      await tableView(signal, group(parts[1]), parts[2], parts[3], query);
    } else if (parts[0] === "o" && parts.length === 6) {
      await objectView(signal, group(parts[1]), parts[2], parts[3], parts[4], parts[5]);
    } else {
      await kindsView(signal);
    }
  } catch (e) {
    if (signal.aborted) return;
    if (e instanceof ApiError && e.code === 401) {
      setToken(null);
      kinds = null;
      who.textContent = "";
      signInView("The server refused that token (401 Unauthorized).");
      return;
    }
    // a view that could not start (a bad link, a kind not served) leaves nothing of the
    // previous view on screen, which would seem to be what the link shows
    if (!(e instanceof ApiError)) replace(main);
    showError(e);
  }
}

function decodePart(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new Error(`a malformed escape in the link: ${part}`);
  }
}

// a login URL: /ui/#token=... (the fragment never reaches the server); the fragment is taken
// out of the address bar and the history whether or not it holds a usable token. Returns
// null (no login URL), true (signed in with its token) or false (it holds no token)
function takeTokenFromFragment() {
  if (!location.hash.startsWith("#token=")) return null;
  let value = "";
  try { value = decodeURIComponent(location.hash.slice("#token=".length)); } catch { value = ""; }
  history.replaceState(null, "", `${location.pathname}#/`);
  if (!isToken(value)) return false;
  setToken(value);
  return true;
}

signOut.addEventListener("click", () => {
  setToken(null);
  kinds = null;
  who.textContent = "";
  location.hash = "#/";
  route();
});
window.addEventListener("hashchange", route);
// leaving the page ends its watches at once: a page kept in the back-forward cache would
// otherwise hold its connections (browsers allow about six per server) while hidden
window.addEventListener("pagehide", () => { if (page) page.abort(); });
window.addEventListener("pageshow", (ev) => { if (ev.persisted) route(); });
route();
