// The kubegate dashboard. One WebSocket (protocol kubegate.v1, through the
// client in kubegate.js) carries two subscriptions: the table's resource
// and the namespaces for the picker. Discovery, object detail and the
// status view use the gateway's REST API, /readyz and /metrics. No build
// step: this file is served as is.
import { KubegateClient, objectKey } from "./kubegate.js";
import { VirtualTable } from "./table.js";
import { toYAML } from "./yaml.js";

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

// api fetches a gateway path with the token, asking for one on 401. With
// text, the body is returned as text when the status is 2xx or one of
// textStatuses; any other failure throws the Status message.
async function api(path, { text = false, textStatuses = [] } = {}) {
  for (;;) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    const res = await fetch(path, { headers, credentials: "same-origin" });
    if (res.status === 401) { await needLogin(); continue; }
    if (text && (res.ok || textStatuses.includes(res.status))) return res.text();
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new Error((body && body.message) || `${res.status} ${res.statusText}`);
    return body;
  }
}

// ---- discovery --------------------------------------------------------------

// discover lists every watchable resource the gateway serves, CRDs included,
// as {value (the name subscribe accepts), label, group, version, name, namespaced}.
async function discover() {
  const out = [];
  const add = (group, version, list) => {
    for (const r of list.resources || []) {
      if (r.name.includes("/") || !(r.verbs || []).includes("watch")) continue;
      out.push({
        value: group ? `${r.name}.${version}.${group}` : r.name,
        label: group ? `${r.name}.${group}` : r.name,
        group, version, name: r.name, namespaced: r.namespaced,
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

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { resource: p.get("resource") || "pods", namespace: p.get("namespace") || "", labelSelector: p.get("labels") || "" };
}
function writeHash(q) {
  const p = new URLSearchParams();
  p.set("resource", q.resource);
  if (q.namespace) p.set("namespace", q.namespace);
  if (q.labelSelector) p.set("labels", q.labelSelector);
  history.replaceState(null, "", "#" + p.toString());
}

// ---- connection -------------------------------------------------------------

// The client reconnects (0.5s doubling to 5s) and resumes every
// subscription; a socket refused with 401 waits for a token.
const client = new KubegateClient("/ws", { token: () => token, backoff: { maxMs: 5000 } });
let resetTimer = 0;
// stats are the page's counters; max*Ms are its longest single tasks.
const stats = {
  get frames() { return client.stats.frames; },
  get resets() { return client.stats.resets; },
  get reconnects() { return client.stats.reconnects; },
  get maxMessageMs() { return client.stats.maxMessageMs; },
  get maxDrawMs() { return table.maxDrawMs; },
};

function setConn(state, text = state) {
  const el = $("conn");
  el.dataset.state = state;
  el.textContent = text;
}

client.on("status", (s) => {
  switch (s.state) {
    case "open": setConn("connected"); return;
    case "reconnecting": setConn("reconnecting", `reconnecting (${s.code || "dropped"})`); return;
    case "closed": setConn("reconnecting", "offline"); return;
    case "unauthorized": needLogin().then(() => client.connect()); return;
    case "failed": setConn("failed", `failed (${(s.status && s.status.message) || s.code || s.error})`); return;
  }
});
client.on("error", (e) => logEvent("ERROR", "", (e.status && e.status.message) || String(e.error)));

// serverReset shows a gateway's RESET of sub; a resubscribe without a
// resume point (no frame) also clears the subscription, quietly.
function serverReset(sub, e) {
  if (!e.frame) return;
  logEvent("RESET", sub.id, e.reason);
  setConn("reset", `reset (${e.reason || "?"})`);
  clearTimeout(resetTimer);
  resetTimer = setTimeout(() => { if (client.state === "open") setConn("connected"); }, 2000);
}

// ---- table ------------------------------------------------------------------

function age(ts) {
  if (!ts) return "";
  let s = Math.max(0, Math.floor((Date.now() - Date.parse(ts)) / 1000));
  if (s < 120) return s + "s";
  s = Math.floor(s / 60);
  if (s < 120) return s + "m";
  s = Math.floor(s / 60);
  if (s < 48) return s + "h";
  return Math.floor(s / 24) + "d";
}

// statusOf summarises an object for the Status column where the kind has an
// obvious summary, else "—".
function statusOf(o) {
  const st = o.status || {};
  const spec = o.spec || {};
  if (o.metadata.deletionTimestamp) return "Terminating";
  switch (o.kind) {
    case "Pod": return st.phase || "Pending";
    case "Deployment": case "StatefulSet": case "ReplicaSet":
      return `${st.readyReplicas || 0}/${spec.replicas ?? 1}`;
    case "DaemonSet": return `${st.numberReady || 0}/${st.desiredNumberScheduled || 0}`;
    case "Job": return st.succeeded ? "Complete" : st.failed ? "Failed" : "Running";
    case "Namespace": case "PersistentVolume": case "PersistentVolumeClaim": return st.phase || "—";
    case "Node": {
      const c = (st.conditions || []).find((c) => c.type === "Ready");
      return c ? (c.status === "True" ? "Ready" : "NotReady") : "—";
    }
  }
  return "—";
}

function span(cls, text, title) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  if (title) s.title = title;
  return s;
}

function renderRow(o) {
  const m = o.metadata;
  const row = document.createElement("div");
  row.className = "row";
  const status = statusOf(o);
  const labels = Object.entries(m.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  row.append(span("c-name", m.name, m.name), span("c-ns", m.namespace || ""),
    span("c-status status-" + status.replace(/[^A-Za-z]/g, ""), status),
    span("c-age", age(m.creationTimestamp)), span("c-labels", labels, labels));
  return row;
}

const table = new VirtualTable({
  viewport: $("viewport"), spacer: $("spacer"), rows: $("rows"), rowHeight: 26,
  render: renderRow, onClick: (o) => o && showObject(o),
});
// Ages move on: rewrite the Age cells of the visible rows in place.
setInterval(() => {
  for (const el of $("rows").children) {
    if (el._item) el.querySelector(".c-age").textContent = age(el._item.metadata.creationTimestamp);
  }
}, 1000);

let countFrame = 0;
function updateCount() {
  if (countFrame) return;
  countFrame = requestAnimationFrame(() => { countFrame = 0; $("count").textContent = table.size; });
}

let tableSeq = 0;
let tableSub = null;

function applyQuery(q) {
  writeHash(q);
  if (tableSub) tableSub.unsubscribe();
  table.clear();
  updateCount();
  $("sub-error").textContent = "";
  const req = { id: `table-${++tableSeq}`, resource: q.resource };
  if (q.namespace && isNamespaced(q.resource)) req.namespace = q.namespace;
  if (q.labelSelector) req.labelSelector = q.labelSelector;
  const sub = client.subscribe(req, {
    change(e) {
      if (e.type === "DELETED") table.delete(e.key);
      else table.set(e.key, e.object, e.live);
      updateCount();
      if (e.live) logEvent(e.type, q.resource, e.key);
    },
    reset(e) {
      table.clear();
      updateCount();
      document.body.dataset.synced = "";
      serverReset(sub, e);
    },
    synced() { document.body.dataset.synced = sub.id; },
    ack() { $("sub-error").textContent = ""; },
    error(e) {
      $("sub-error").textContent = "— " + e.status.message;
      logEvent("ERROR", sub.id, e.status.message || "error");
    },
  });
  tableSub = sub;
  document.body.dataset.synced = "";
}

// ---- namespaces picker --------------------------------------------------------

let nsSub = null; // the namespaces subscription: its objects are the picker's
let nsFrame = 0;
function drawNamespaces() {
  if (nsFrame) return;
  nsFrame = requestAnimationFrame(() => {
    nsFrame = 0;
    const sel = $("namespace");
    const cur = sel.value || readHash().namespace;
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

// ---- object detail ------------------------------------------------------------

let resources = [];
function isNamespaced(value) {
  const r = resources.find((r) => r.value === value);
  return r ? r.namespaced : true;
}

let shown = null;
let format = "yaml";
async function showObject(o) {
  const info = tableSub && tableSub.resource;
  if (!info) return;
  const base = info.group ? `/apis/${info.group}/${info.version}` : `/api/${info.version}`;
  const ns = o.metadata.namespace ? `/namespaces/${encodeURIComponent(o.metadata.namespace)}` : "";
  const path = `${base}${ns}/${info.resource}/${encodeURIComponent(o.metadata.name)}`;
  $("object-title").textContent = `${info.kind} ${objectKey(o)}`;
  $("object-body").textContent = "loading…";
  if (!$("object").open) $("object").showModal();
  try {
    shown = await api(path);
  } catch (e) {
    shown = null;
    $("object-body").textContent = String(e.message || e);
    return;
  }
  drawObject();
}
function drawObject() {
  if (!shown) return;
  $("object-body").textContent = format === "yaml" ? toYAML(shown) : JSON.stringify(shown, null, 2);
  $("fmt-yaml").setAttribute("aria-pressed", format === "yaml");
  $("fmt-json").setAttribute("aria-pressed", format === "json");
}
$("fmt-yaml").onclick = () => { format = "yaml"; drawObject(); };
$("fmt-json").onclick = () => { format = "json"; drawObject(); };
$("object-close").onclick = () => $("object").close();

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

async function main() {
  setConn("connecting");
  const q = readHash();
  $("selector").value = q.labelSelector;
  try {
    resources = await discover();
  } catch (e) {
    $("sub-error").textContent = "discovery failed: " + e.message;
  }
  const sel = $("resource");
  if (!resources.some((r) => r.value === q.resource)) {
    resources.unshift({ value: q.resource, label: q.resource, namespaced: true });
  }
  sel.replaceChildren(...resources.map((r) => new Option(r.label, r.value)));
  sel.value = q.resource;
  drawNamespaces();

  nsSub = client.subscribe({ id: "namespaces", resource: "namespaces" }, {
    change: drawNamespaces,
    reset(e) { drawNamespaces(); serverReset(nsSub, e); },
    error(e) { logEvent("ERROR", "namespaces", e.status.message || "error"); },
  });
  applyQuery(q);
  client.connect();

  $("query").addEventListener("submit", (e) => {
    e.preventDefault();
    applyQuery({ resource: sel.value, namespace: $("namespace").value, labelSelector: $("selector").value.trim() });
  });
}

// window.kubegate exposes the page's state for debugging and tests.
// disconnect() and connect() take the page offline and back, to watch a
// resume (or, when the gateway's history no longer covers it, a RESET);
// frame(f) handles f as if the gateway had sent it.
window.kubegate = {
  stats, client, subs: client.subscriptions, table, frame: (f) => client.dispatch(f),
  get connection() { return $("conn").dataset.state; },
  disconnect() { client.close(1000, "offline"); },
  connect() { client.connect(); },
};
main();
