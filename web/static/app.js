// The kubegate dashboard. One WebSocket (protocol kubegate.v1, through the
// client in kubegate.js) carries the table's live window (a sorted,
// filtered page of the resource's rows that follows the scroll position),
// the event log's subscription (live changes only, as rows) and the
// namespaces for the picker. Discovery, object detail and the status view
// use the gateway's REST API, /readyz and /metrics; the object view's
// actions (delete, edit, scale, logs) are requests the gateway passes to
// kube-apiserver. No build step: this file is served as is.
import { KubegateClient, objectKey } from "./kubegate.js";
import { WindowTable } from "./table.js";
import { toEditableYAML, toYAML } from "./yaml.js";

const $ = (id) => document.getElementById(id);
const LOG_MAX = 200;

// ---- credentials ----------------------------------------------------------

let token = sessionStorage.getItem("kubegate.token") || "";

let loginWaiters = null;
// needLogin shows the token prompt once and resolves when a token is set.
function needLogin() {
  setConn("unauthorized");
  if (!loginWaiters) {
    loginWaiters = [];
    $("login").showModal();
  }
  return new Promise((resolve) => loginWaiters.push(resolve));
}
$("login-form").addEventListener("submit", () => {
  token = $("token").value.trim();
  sessionStorage.setItem("kubegate.token", token);
  $("token").value = "";
  const w = loginWaiters || [];
  loginWaiters = null;
  w.forEach((r) => r());
});

// API_RETRIES is how many times api retries a refused read, as
// client-go's REST client does (maxRetries).
const API_RETRIES = 10;

// api fetches (GET) a gateway path with the token, asking for one on
// 401. A 429 or 5xx that carries Retry-After (a user's request rate
// spent, a review queue full, the gateway not ready yet) is retried after
// the seconds it asks for, up to API_RETRIES times, as client-go retries
// them. With text, the body is returned as text when the status is 2xx
// or one of textStatuses; any other failure throws the Status message.
async function api(path, { text = false, textStatuses = [] } = {}) {
  for (let retries = 0; ; ) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    const res = await fetch(path, { headers, credentials: "same-origin" });
    if (res.status === 401) { await needLogin(); continue; }
    const after = retryAfter(res);
    if (after !== null && retries < API_RETRIES) {
      retries++;
      await res.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, after * 1000));
      continue;
    }
    if (text && (res.ok || textStatuses.includes(res.status))) return res.text();
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new Error((body && body.message) || `${res.status} ${res.statusText}`);
    return body;
  }
}

// retryAfter returns the seconds a refused response asks to wait before
// trying again: its Retry-After, in whole seconds as the gateway and
// kube-apiserver send it, on a 429 or 5xx; or null when it is not one to
// retry.
function retryAfter(res) {
  if (res.status !== 429 && res.status < 500) return null;
  const h = res.headers.get("Retry-After");
  if (h === null || !/^\d+$/.test(h.trim())) return null;
  return Number(h.trim());
}

// ---- discovery --------------------------------------------------------------

// discover lists every watchable resource the gateway serves, CRDs included,
// as {value (the name subscribe accepts), label, group, version, name,
// namespaced, verbs, subresources}. The verbs and subresources say which
// actions the object view offers: with pass-through the gateway lists
// kube-apiserver's (delete, update, scale, log...), without it only reads.
async function discover() {
  const out = [];
  const add = (group, version, list) => {
    const subs = new Map();
    for (const r of list.resources || []) {
      const [parent, sub] = r.name.split("/");
      if (sub) subs.set(parent, [...(subs.get(parent) || []), sub]);
    }
    for (const r of list.resources || []) {
      if (r.name.includes("/") || !(r.verbs || []).includes("watch")) continue;
      out.push({
        value: group ? `${r.name}.${version}.${group}` : r.name,
        label: group ? `${r.name}.${group}` : r.name,
        group, version, name: r.name, namespaced: r.namespaced,
        verbs: r.verbs || [], subresources: subs.get(r.name) || [],
      });
    }
  };
  const core = await api("/api");
  await Promise.all((core.versions || []).map(async (v) => add("", v, await api(`/api/${v}`))));
  const groups = await api("/apis");
  await Promise.all((groups.groups || []).map(async (g) => {
    const gv = (g.preferredVersion || g.versions[0]).groupVersion;
    try { add(g.name, gv.split("/")[1], await api(`/apis/${gv}`)); } catch (e) { console.warn(gv, e); }
  }));
  return out.sort((a, b) => (a.group ? 1 : 0) - (b.group ? 1 : 0) || a.label.localeCompare(b.label));
}

// ---- query in the URL hash --------------------------------------------------

// The view is the URL's hash, so that a reload or a bookmark restores it:
// resource, namespace, labels, fields (selectors), sort, order, q (the
// search text) and wide.
function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return {
    resource: p.get("resource") || "pods", namespace: p.get("namespace") || "",
    labelSelector: p.get("labels") || "", fieldSelector: p.get("fields") || "",
    sort: p.get("sort") || "", order: p.get("order") === "desc" ? "desc" : "asc",
    filter: p.get("q") || "", wide: p.get("wide") === "1",
  };
}
function writeHash(q) {
  const p = new URLSearchParams();
  p.set("resource", q.resource);
  if (q.namespace) p.set("namespace", q.namespace);
  if (q.labelSelector) p.set("labels", q.labelSelector);
  if (q.fieldSelector) p.set("fields", q.fieldSelector);
  if (q.sort) p.set("sort", q.sort);
  if (q.sort && q.order === "desc") p.set("order", "desc");
  if (q.filter) p.set("q", q.filter);
  if (q.wide) p.set("wide", "1");
  history.replaceState(null, "", "#" + p.toString());
}

// ---- connection -------------------------------------------------------------

// The client reconnects (0.5s doubling to 5s), resumes the subscriptions
// and sends the window again where it was; a socket refused with 401
// waits for a token.
const client = new KubegateClient("/ws", { token: () => token, backoff: { maxMs: 5000 } });
let resetTimer = 0;
// stats are the page's counters; max*Ms are its longest single tasks.
const stats = {
  get frames() { return client.stats.frames; },
  get resets() { return client.stats.resets; },
  get reconnects() { return client.stats.reconnects; },
  get maxMessageMs() { return client.stats.maxMessageMs; },
  get maxDrawMs() { return table.maxDrawMs; },
  get slowMessages() { return client.stats.slowMessages; },
  get slowDraws() { return table.slowDraws; },
  get draws() { return table.draws; },
  get messages() { return client.stats.messages; },
  get moves() { return moves; },
};

function setConn(state, text = state) {
  const el = $("conn");
  el.dataset.state = state;
  el.textContent = text;
}

client.on("status", (s) => {
  switch (s.state) {
    case "open": setConn("connected"); return;
    case "reconnecting": setConn("reconnecting", `reconnecting (${s.code || "dropped"})`); keepLogPlace(); return;
    case "closed": setConn("reconnecting", "offline"); keepLogPlace(); return;
    case "unauthorized": needLogin().then(() => client.connect()); return;
    case "failed": setConn("failed", `failed (${(s.status && s.status.message) || s.code || s.error})`); return;
  }
});
client.on("error", (e) => logEvent("ERROR", "", (e.status && e.status.message) || String(e.error)));

// serverReset shows a reset the gateway sent for id (RESET, or a window's
// reset operation with a reason).
function serverReset(id, reason) {
  logEvent("RESET", id, reason);
  setConn("reset", `reset (${reason || "?"})`);
  clearTimeout(resetTimer);
  resetTimer = setTimeout(() => { if (client.state === "open") setConn("connected"); }, 2000);
}

// ---- table ------------------------------------------------------------------

let moves = 0; // window moves asked for
let moving = false; // a move was asked for and no WINDOW frame has come since

const table = new WindowTable({
  head: $("thead"), viewport: $("viewport"), spacer: $("spacer"), rows: $("rows"), rowHeight: 26,
  onRange(range) {
    if (!tableWin) return;
    moves++;
    moving = true;
    tableWin.move(range);
  },
  onSort(key) {
    const q = currentQuery();
    const same = tableWin && tableWin.sort && tableWin.sort.toLowerCase() === key.toLowerCase();
    q.order = same && tableWin.order !== "desc" ? "desc" : "asc";
    q.sort = key;
    applyQuery(q);
  },
  onClick: (row) => showObject(row),
  onDraw: firstRows,
});
// Relative cells (ages, restarts) move on: rewrite those in view.
setInterval(() => table.tick(), 1000);

// firstRows marks when the table first showed rows (or an empty window):
// the performance entry "kubegate:first-rows", taken in the animation frame
// after the draw, so after the rows were painted.
let firstMarked = false;
function firstRows(d) {
  if (firstMarked || !tableWin || !tableWin.synced || (d.rows === 0 && tableWin.count > 0)) return;
  firstMarked = true;
  requestAnimationFrame(() => performance.mark("kubegate:first-rows"));
}

function setCount(n) {
  const el = $("count");
  el.dataset.count = n;
  el.textContent = n.toLocaleString("en-US");
}

// columnsFor lists the table's columns for a window's ack: a Namespace
// column first when a namespaced resource is shown across namespaces (as
// kubectl get -A), then kubectl's columns (priority 0; all with wide).
function columnsFor(win, q) {
  const cols = [];
  if (win.resource && win.resource.namespaced && !q.namespace) {
    cols.push({ label: "Namespace", sortKey: "metadata.namespace", get: (r) => r.namespace || "" });
  }
  (win.columns || []).forEach((c, i) => {
    if (c.priority !== 0 && !q.wide) return;
    cols.push({ label: c.name, sortKey: c.name, title: c.description, name: c.format === "name", get: (r) => r.cells[i] });
  });
  return cols;
}

// showColumns shows the window's columns as the query asks (wide or not).
function showColumns() {
  const win = tableWin;
  if (!win || !win.columns) return;
  table.setColumns(columnsFor(win, query), win.sort, win.order);
  const by = win.sort === "metadata.namespace" ? "namespace, name" : win.sort;
  $("sort-info").textContent = `sorted by ${by} ${win.order === "desc" ? "↓" : "↑"}`;
}

let tableSeq = 0;
let tableWin = null;
let logSub = null;
let query = null;

function currentQuery() { return { ...query }; }

function applyQuery(q) {
  query = q;
  writeHash(q);
  if (tableWin) tableWin.close();
  if (logSub) logSub.unsubscribe();
  $("sub-error").textContent = "";
  document.body.dataset.synced = "";
  setCount(0);
  const seq = ++tableSeq;
  const base = { resource: q.resource };
  if (q.namespace && isNamespaced(q.resource)) base.namespace = q.namespace;
  if (q.labelSelector) base.labelSelector = q.labelSelector;
  if (q.fieldSelector) base.fieldSelector = q.fieldSelector;
  const range = table.rangeAt(0);
  const req = { id: `table-${seq}`, ...base, ...range };
  if (q.sort) { req.sort = q.sort; req.order = q.order; }
  if (q.filter) req.filter = q.filter;
  moving = false;
  const win = client.window(req, {
    ack() {
      $("sub-error").textContent = "";
      showColumns();
    },
    change(e) {
      // Highlight rows that changed: updates and moves always, inserts
      // unless they may answer a move (scrolling brings rows in). The
      // next frame after a move is taken as its answer: answers carry no
      // mark of their own.
      if (!e.first) {
        for (const op of e.ops) {
          if (op.op === "update" || op.op === "move" || (op.op === "insert" && !moving)) table.flash(objectKey(op.row));
        }
      }
      moving = false;
      setCount(win.count);
      document.body.dataset.synced = win.id;
      table.schedule();
    },
    reset(e) {
      if (e.reason && e.reason !== "Resubscribe") serverReset(win.id, e.reason);
    },
    error(e) {
      $("sub-error").textContent = "— " + e.status.message;
      logEvent("ERROR", win.id, e.status.message || "error");
      if (e.final) { setCount(0); table.show(null, null); }
    },
  });
  tableWin = win;
  table.show(win, range);
  subscribeLog(base, q.resource, seq);
}

// subscribeLog follows the live changes of what the table shows (its
// resource, namespace and selectors; not the search text) for the event
// log: rows, no snapshot, no objects kept. A RESET from the gateway (its
// history no longer covers the resume point) would be followed by a
// snapshot the log has no use for: the log starts afresh instead.
function subscribeLog(base, resource, seq, resourceVersion) {
  const req = { id: `log-${seq}`, ...base, as: "Table", sendInitialEvents: false };
  if (resourceVersion) req.resourceVersion = resourceVersion;
  const sub = client.subscribe(req, {
    change(e) { if (e.live) logEvent(e.type, resource, e.key); },
    reset(e) {
      if (!e.frame || logSub !== sub) return;
      serverReset(sub.id, e.reason);
      sub.unsubscribe();
      subscribeLog(base, resource, ++tableSeq);
    },
    error(e) { if (e.final) logEvent("ERROR", sub.id, e.status.message || "error"); },
  }, { keepObjects: false });
  logSub = sub;
  logArgs = [base, resource];
}
let logArgs = null;

// keepLogPlace gives the log a resume point when the socket drops before
// the log saw its first change: a subscription without a snapshot has
// none until then (the gateway sends no END_OF_SNAPSHOT for it), so it
// would come back without the changes made while offline. The window's
// rv, the version of the resource it reflects, of the same resource and
// selectors, is one: the log is subscribed again from it.
function keepLogPlace() {
  if (!logSub || logSub.rv || !tableWin || !tableWin.rv || logSub.state === "ended") return;
  logSub.unsubscribe();
  subscribeLog(...logArgs, ++tableSeq, tableWin.rv);
}

// ---- namespaces picker --------------------------------------------------------

let nsSub = null; // the namespaces subscription: its objects are the picker's
let nsFrame = 0;
function drawNamespaces() {
  if (nsFrame) return;
  nsFrame = requestAnimationFrame(() => {
    nsFrame = 0;
    const sel = $("namespace");
    const cur = query ? query.namespace : sel.value;
    const opts = [new Option("(all)", "")];
    const names = new Set(nsSub ? [...nsSub.objects.values()].map((o) => o.metadata.name) : []);
    if (cur) names.add(cur);
    for (const n of [...names].sort()) opts.push(new Option(n, n));
    sel.replaceChildren(...opts);
    sel.value = cur;
  });
}

// ---- event log ----------------------------------------------------------------

const logEntries = [];
let logFrame = 0;
function logEvent(type, what, name) {
  logEntries.push({ t: new Date(), type, what, name });
  if (logEntries.length > LOG_MAX) logEntries.splice(0, logEntries.length - LOG_MAX);
  if (logFrame) return;
  logFrame = requestAnimationFrame(() => {
    logFrame = 0;
    const items = logEntries.slice().reverse().map((e) => {
      const li = document.createElement("li");
      li.className = e.type;
      li.append(span("t", e.t.toTimeString().slice(0, 8) + " "), span("type", e.type.padEnd(8) + " "), document.createTextNode(`${e.what} ${e.name}`));
      return li;
    });
    $("log").replaceChildren(...items);
  });
}
$("log-max").textContent = LOG_MAX;

function span(cls, text) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
}

// ---- object detail ------------------------------------------------------------

let resources = [];
function isNamespaced(value) {
  const r = resources.find((r) => r.value === value);
  return r ? r.namespaced : true;
}

let shown = null; // the object in the view
let shownPath = ""; // its REST path
let shownInfo = null; // its resource, as the window's ack names it
let format = "yaml";
// showObject shows the object of a row ({name, namespace}), read with a
// REST get from the path the window's ack names, and the actions its
// resource allows.
async function showObject(row) {
  const info = tableWin && tableWin.resource;
  if (!info) return;
  const base = info.group ? `/apis/${info.group}/${info.version}` : `/api/${info.version}`;
  const ns = row.namespace ? `/namespaces/${encodeURIComponent(row.namespace)}` : "";
  shownPath = `${base}${ns}/${info.resource}/${encodeURIComponent(row.name)}`;
  shownInfo = info;
  $("object-title").textContent = `${info.kind} ${objectKey(row)}`;
  setMode("view");
  $("object-body").textContent = "loading…";
  if (!$("object").open) $("object").showModal();
  try {
    shown = await api(shownPath);
  } catch (e) {
    shown = null;
    $("object-body").textContent = String(e.message || e);
    showActions();
    return;
  }
  drawObject();
  showActions();
}
function drawObject() {
  if (!shown) return;
  $("object-body").textContent = format === "yaml" ? toYAML(shown) : JSON.stringify(shown, null, 2);
  $("fmt-yaml").setAttribute("aria-pressed", mode === "view" && format === "yaml");
  $("fmt-json").setAttribute("aria-pressed", mode === "view" && format === "json");
}
$("fmt-yaml").onclick = () => { format = "yaml"; setMode("view"); drawObject(); };
$("fmt-json").onclick = () => { format = "json"; setMode("view"); drawObject(); };
$("object-close").onclick = () => $("object").close();
$("object").addEventListener("close", () => setMode("view"));

// ---- actions: kube-apiserver's, through the gateway's pass-through -------------

// The object view's actions are requests the cache does not serve: the
// gateway passes them to kube-apiserver with the caller's own token (or
// login cookie), and kube-apiserver decides. Each shows its answer, or
// kube-apiserver's error, in the view. They are offered as discovery
// says the resource allows them; a gateway that passes nothing through
// lists only reads, and offers none.

// send makes a request with the token, asking for one on 401.
async function send(path, { method = "GET", body, contentType, accept = "application/json", signal } = {}) {
  for (;;) {
    const headers = { Accept: accept };
    if (token) headers.Authorization = "Bearer " + token;
    if (contentType) headers["Content-Type"] = contentType;
    const res = await fetch(path, { method, headers, body, credentials: "same-origin", signal });
    if (res.status === 401) { await needLogin(); continue; }
    return res;
  }
}

// failure is an unsuccessful answer's message: its Status's, else its
// text, else its status line.
async function failure(res) {
  const text = await res.text().catch(() => "");
  try {
    const st = JSON.parse(text);
    if (st && st.message) return st.message;
  } catch { /* not a Status */ }
  return text.trim() || `${res.status} ${res.statusText}`;
}

function setStatus(text, kind = "") {
  const el = $("object-status");
  el.textContent = text;
  el.className = kind;
}

let mode = "view"; // view, edit, logs, scale or delete
let logAbort = null; // ends the log request in flight
function setMode(m) {
  mode = m;
  if (logAbort) { logAbort.abort(); logAbort = null; }
  $("object-body").hidden = m === "edit";
  $("object-edit").hidden = m !== "edit";
  $("edit-tools").hidden = m !== "edit";
  $("log-tools").hidden = m !== "logs";
  $("scale-form").hidden = m !== "scale";
  $("delete-confirm").hidden = m !== "delete";
  for (const [id, on] of [["act-edit", "edit"], ["act-logs", "logs"], ["act-scale", "scale"], ["act-delete", "delete"]]) {
    $(id).setAttribute("aria-pressed", m === on);
  }
  $("fmt-yaml").setAttribute("aria-pressed", m === "view" && format === "yaml");
  $("fmt-json").setAttribute("aria-pressed", m === "view" && format === "json");
  setStatus("");
}

// showActions shows the actions discovery allows on the object's
// resource (again once discovery has answered).
function showActions() {
  const r = shownInfo && resources.find((d) => d.group === (shownInfo.group || "") && d.name === shownInfo.resource);
  const can = (verb) => !!(r && r.verbs.includes(verb));
  const has = (sub) => !!(r && r.subresources.includes(sub));
  $("act-delete").hidden = !can("delete");
  $("act-edit").hidden = !can("update") || !shown;
  $("act-scale").hidden = !has("scale") || !shown;
  $("act-logs").hidden = !has("log") || !shown;
}

// Delete: asked once more, then DELETE; the row leaves the table when the
// gateway's cache sees the object go.
$("act-delete").onclick = () => {
  setMode("delete");
  $("delete-name").textContent = $("object-title").textContent;
};
$("delete-no").onclick = () => { setMode("view"); drawObject(); };
$("delete-yes").onclick = async () => {
  setStatus("deleting…");
  const res = await send(shownPath, { method: "DELETE" });
  if (!res.ok) { setStatus(await failure(res), "bad"); return; }
  $("delete-confirm").hidden = true;
  setStatus("deleted", "good");
};

// Edit: the object as YAML in a text box; Save sends it back with PUT as
// application/yaml, which kube-apiserver reads itself. The resourceVersion
// in it makes a change made meanwhile a conflict (409), shown as
// kube-apiserver words it.
$("act-edit").onclick = () => {
  setMode("edit");
  $("object-edit").value = toEditableYAML(shown) + "\n";
  $("object-edit").focus();
};
$("edit-cancel").onclick = () => { setMode("view"); drawObject(); };
$("edit-save").onclick = async () => {
  setStatus("saving…");
  const res = await send(shownPath, { method: "PUT", body: $("object-edit").value, contentType: "application/yaml" });
  if (!res.ok) { setStatus(await failure(res), "bad"); return; }
  shown = await res.json();
  setMode("view");
  drawObject();
  setStatus(`saved (resourceVersion ${shown.metadata.resourceVersion})`, "good");
};

// Scale: the scale subresource, patched.
$("act-scale").onclick = () => {
  setMode("scale");
  $("scale-replicas").value = (shown.spec && shown.spec.replicas) ?? 0;
  $("scale-replicas").focus();
};
$("scale-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const replicas = Number($("scale-replicas").value);
  setStatus("scaling…");
  const res = await send(shownPath + "/scale", { method: "PATCH", body: JSON.stringify({ spec: { replicas } }), contentType: "application/merge-patch+json" });
  if (!res.ok) { setStatus(await failure(res), "bad"); return; }
  const scale = await res.json();
  setStatus(`scaled to ${scale.spec.replicas}`, "good");
});

// Logs: a container's last 1000 lines, or followed as they come. Whatever
// kube-apiserver answers is shown: the lines, or its error.
const LOG_CHARS = 1 << 20;
$("act-logs").onclick = () => {
  setMode("logs");
  const spec = shown.spec || {};
  const names = [...(spec.containers || []), ...(spec.initContainers || [])].map((c) => c.name);
  $("log-container").replaceChildren(...names.map((n) => new Option(n, n)));
  readLogs();
};
$("log-container").onchange = () => readLogs();
$("log-follow").onchange = () => readLogs();
async function readLogs() {
  if (logAbort) logAbort.abort();
  const abort = new AbortController();
  logAbort = abort;
  const params = new URLSearchParams({ tailLines: "1000" });
  if ($("log-container").value) params.set("container", $("log-container").value);
  if ($("log-follow").checked) params.set("follow", "true");
  const body = $("object-body");
  body.textContent = "";
  setStatus("reading…");
  try {
    const res = await send(`${shownPath}/log?${params}`, { accept: "text/plain, */*", signal: abort.signal });
    if (!res.ok) {
      const msg = await failure(res);
      if (logAbort === abort) setStatus(msg, "bad");
      return;
    }
    setStatus($("log-follow").checked ? "following" : "");
    let text = "";
    const reader = res.body ? res.body.getReader() : null; // none for 204
    const dec = new TextDecoder();
    while (reader) {
      const { done, value } = await reader.read();
      if (done) break;
      text = (text + dec.decode(value, { stream: true })).slice(-LOG_CHARS);
      body.textContent = text;
      body.scrollTop = body.scrollHeight;
    }
    if (logAbort !== abort) return;
    setStatus(text === "" ? "no log lines" : `${text.split("\n").length - 1} lines`, "good");
  } catch (e) {
    if (e.name !== "AbortError") setStatus(String(e.message || e), "bad");
  }
}

// ---- status view --------------------------------------------------------------

function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}
const sum = (ms, name) => ms.filter((m) => m.name === name).reduce((a, m) => a + m.value, 0);

let lastSample = null;
async function pollStatus() {
  if ($("status").hidden) return;
  try {
    // /metrics needs get on the path /metrics in the caller's RBAC; a
    // reader without it still sees readiness and the informers.
    let metricsError = null;
    const [ready, metrics] = await Promise.all([api("/readyz?verbose", { text: true, textStatuses: [503] }),
      api("/metrics", { text: true }).catch((e) => { metricsError = String(e.message || e); return ""; })]);
    const ms = parseMetrics(metrics);
    const now = performance.now();
    const events = sum(ms, "kubegate_cache_events_total");
    const frames = sum(ms, "kubegate_ws_frames_sent_total");
    let rate = "…", frate = "…";
    if (lastSample) {
      const dt = (now - lastSample.t) / 1000;
      rate = ((events - lastSample.events) / dt).toFixed(1) + "/s";
      frate = ((frames - lastSample.frames) / dt).toFixed(1) + "/s";
    }
    lastSample = metricsError ? null : { t: now, events, frames };
    const dl = [["Ready", /ok\n?$/.test(ready) ? "yes" : "no"],
      ...(metricsError ? [["Metrics", metricsError]] : [["Sockets", sum(ms, "kubegate_ws_sockets")],
        ["Subscriptions", sum(ms, "kubegate_ws_subscriptions")], ["Event rate (cache)", rate], ["Frames sent", frate]]),
      ["This page", `${stats.frames} frames, ${stats.resets} resets, ${stats.reconnects} reconnects`]];
    $("status-summary").replaceChildren(...dl.flatMap(([k, v]) => [Object.assign(document.createElement("dt"), { textContent: k }),
      Object.assign(document.createElement("dd"), { textContent: v })]));
    const listeners = new Map(ms.filter((m) => m.name === "kubegate_listener_active")
      .map((m) => [m.labels.group ? `${m.labels.resource}.${m.labels.group}` : m.labels.resource, m.value]));
    const rows = [];
    for (const line of ready.split("\n")) {
      const m = /^\[([+-])\]informer (\S+) (.*)$/.exec(line);
      if (!m) continue;
      const n = /\((\d+) objects\)/.exec(m[3]);
      const tr = document.createElement("tr");
      tr.append(...[m[2], n ? n[1] : m[3], listeners.has(m[2]) ? `${listeners.get(m[2])} listeners` : ""].map((t) =>
        Object.assign(document.createElement("td"), { textContent: t })));
      rows.push(tr);
    }
    $("informers").tBodies[0].replaceChildren(...rows);
  } catch (e) {
    $("status-summary").textContent = String(e.message || e);
  }
}
$("status-toggle").onclick = () => { $("status").hidden = !$("status").hidden; lastSample = null; pollStatus(); };
setInterval(pollStatus, 3000);

// ---- start --------------------------------------------------------------------

// fillResources fills the picker from discovery; until it answers, it
// holds the URL's resource alone.
function fillResources(current) {
  const sel = $("resource");
  const list = resources.some((r) => r.value === current) ? resources : [{ value: current, label: current, namespaced: true }, ...resources];
  sel.replaceChildren(...list.map((r) => new Option(r.label, r.value)));
  sel.value = current;
}

// formQuery is the view the form describes; the sort and order stay
// unless the resource changes (its columns do).
function formQuery() {
  const q = currentQuery();
  const resource = $("resource").value;
  if (resource !== q.resource) { q.sort = ""; q.order = "asc"; }
  q.resource = resource;
  q.namespace = isNamespaced(resource) ? $("namespace").value : "";
  q.labelSelector = $("selector").value.trim();
  q.fieldSelector = $("fields").value.trim();
  q.filter = $("search").value;
  q.wide = $("wide").checked;
  return q;
}

function main() {
  setConn("connecting");
  const q = readHash();
  $("selector").value = q.labelSelector;
  $("fields").value = q.fieldSelector;
  $("search").value = q.filter;
  $("wide").checked = q.wide;
  fillResources(q.resource);
  // The window goes out at once; discovery only fills the picker.
  nsSub = client.subscribe({ id: "namespaces", resource: "namespaces" }, {
    change: drawNamespaces,
    reset(e) { drawNamespaces(); if (e.frame) serverReset(nsSub.id, e.reason); },
    error(e) { logEvent("ERROR", "namespaces", e.status.message || "error"); },
  });
  applyQuery(q);
  drawNamespaces();
  client.connect();
  discover().then((list) => {
    resources = list;
    fillResources($("resource").value);
    if ($("object").open) showActions();
  }, (e) => { $("sub-error").textContent = "discovery failed: " + e.message; });

  $("query").addEventListener("submit", (e) => {
    e.preventDefault();
    clearTimeout(searchTimer);
    applyQuery(formQuery());
  });
  for (const id of ["resource", "namespace"]) $(id).addEventListener("change", () => applyQuery(formQuery()));
  // The rows carry every column: wide only shows more of them.
  $("wide").addEventListener("change", () => {
    query.wide = $("wide").checked;
    writeHash(query);
    showColumns();
  });
  // The search applies as the user types, once typing pauses.
  let searchTimer = 0;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { if ($("search").value !== query.filter) applyQuery(formQuery()); }, 300);
  });
}

// window.kubegate exposes the page's state for debugging and tests.
// disconnect() and connect() take the page offline and back, to watch
// the window come back where it was (and the event log resume, or, when
// the gateway's history no longer covers it, start afresh); frame(f)
// handles f as if the gateway had sent it.
window.kubegate = {
  stats, client, subs: client.subscriptions, table, frame: (f) => client.dispatch(f),
  get resources() { return resources; },
  get window() { return tableWin; },
  get connection() { return $("conn").dataset.state; },
  disconnect() { client.close(1000, "offline"); },
  connect() { client.connect(); },
};
main();
