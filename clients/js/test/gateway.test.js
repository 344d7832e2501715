// Tests of kubegate.js against a real gateway and kube-apiserver. The Go
// test in ../client_test.go starts both and runs this file with:
//
//   KUBEGATE_TEST_GATEWAY     the gateway's base URL (http://127.0.0.1:port)
//   KUBEGATE_TEST_TOKEN       a token the gateway accepts (TokenReview)
//   KUBEGATE_TEST_APISERVER   kube-apiserver's URL
//   KUBEGATE_TEST_ADMIN_TOKEN an admin token for it
//   KUBEGATE_TEST_HISTORY     the gateway's history length (events per resource)
//   NODE_EXTRA_CA_CERTS       the apiserver's CA
//   NODE_PATH                 where the ws package is (Debian: /usr/share/nodejs)
//
// Without KUBEGATE_TEST_GATEWAY the tests are skipped (the Go test fails
// on a skip). The tests run one after the other: they share the
// gateway's configmaps history.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import net from "node:net";

import { KubegateClient } from "../kubegate.js";

const env = process.env;
const GATEWAY = env.KUBEGATE_TEST_GATEWAY;
const skip = GATEWAY ? false : "KUBEGATE_TEST_GATEWAY is not set: run through go test ./clients/js/";
// it is test with a bound, so that a client that never gets there fails.
const it = (name, fn) => test(name, { skip, timeout: 60_000 }, fn);
// Node 18 and 20 have no global WebSocket: use the ws package.
const WebSocket = GATEWAY ? createRequire(import.meta.url)("ws") : null;

// ---- the apiserver ----------------------------------------------------------

async function kube(method, path, body, contentType = "application/json") {
  const res = await fetch(env.KUBEGATE_TEST_APISERVER + path, {
    method,
    headers: { Authorization: "Bearer " + env.KUBEGATE_TEST_ADMIN_TOKEN, "Content-Type": contentType, Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${out.message}`);
  return out;
}

// namespace creates a namespace for the test and deletes it afterwards.
async function namespace(t) {
  const ns = await kube("POST", "/api/v1/namespaces", { metadata: { generateName: "js-", labels: { "kubegate.io/test": "true" } } });
  t.after(() => kube("DELETE", `/api/v1/namespaces/${ns.metadata.name}`));
  return ns.metadata.name;
}

const cms = (ns) => `/api/v1/namespaces/${ns}/configmaps`;
const createCM = (ns, name, data = {}, labels = {}) => kube("POST", cms(ns), { metadata: { name, labels }, data });
const patchCM = (ns, name, data) => kube("PATCH", `${cms(ns)}/${name}`, { data }, "application/merge-patch+json");
const deleteCM = (ns, name) => kube("DELETE", `${cms(ns)}/${name}`);

// listState is the apiserver's state as "key@resourceVersion", sorted.
async function listState(ns) {
  const list = await kube("GET", cms(ns));
  return list.items.map((o) => `${ns}/${o.metadata.name}@${o.metadata.resourceVersion}`).sort();
}
const subState = (sub) => [...sub.objects.values()].map((o) => `${o.metadata.namespace}/${o.metadata.name}@${o.metadata.resourceVersion}`).sort();

// ---- sockets ------------------------------------------------------------------

// A TCP server that accepts connections and drops them at once: while
// the gate is closed, the client's attempts go there and fail for real.
let refuser;
let gateClosed = false;
const sockets = [];

// TestSocket wraps a real ws socket: it records what the client sends and
// can cut the connection at any moment. cut() ends the TCP connection and
// drops whatever arrives after it, as a network failure would: frames in
// flight are lost.
class TestSocket {
  #ws;
  #cut = false;
  constructor(url, protocols, options) {
    const target = gateClosed ? `ws://127.0.0.1:${refuser.address().port}/ws` : url;
    this.#ws = new WebSocket(target, protocols, options);
    this.url = url;
    this.protocols = protocols;
    this.sent = [];
    this.onopen = this.onmessage = this.onerror = this.onclose = null;
    this.#ws.onopen = (e) => !this.#cut && this.onopen?.(e);
    this.#ws.onmessage = (e) => !this.#cut && this.onmessage?.(e);
    this.#ws.onerror = (e) => this.onerror?.(e);
    this.#ws.onclose = (e) => this.onclose?.(this.#cut ? { code: 1006, reason: "" } : e);
    sockets.push(this);
  }
  get readyState() {
    return this.#cut ? 3 : this.#ws.readyState;
  }
  send(data) {
    this.sent.push(JSON.parse(data));
    this.#ws.send(data);
  }
  close(code, reason) {
    this.#ws.close(code, reason);
  }
  cut() {
    this.#cut = true;
    this.#ws.terminate();
  }
}

function newClient(t, options = {}) {
  const client = new KubegateClient(GATEWAY + "/ws", {
    WebSocket: TestSocket, token: env.KUBEGATE_TEST_TOKEN, backoff: { initialMs: 50, maxMs: 200 }, ...options,
  });
  t.after(() => client.close());
  return client;
}

// until resolves once pred() holds, checking after every message and
// status change, and fails after timeoutMs with what, the client's state
// and detail().
function until(client, what, pred, detail = () => "", timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const offs = [];
    const done = () => {
      clearTimeout(timer);
      offs.forEach((off) => off());
    };
    const check = () => {
      if (pred()) {
        done();
        resolve();
      }
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`not within ${timeoutMs}ms: ${what} (client ${client.state}) ${detail()}`));
    }, timeoutMs);
    offs.push(client.on("frame", () => queueMicrotask(check)), client.on("status", check));
    check();
  });
}

// record lists a subscription's events as "TYPE key" (with " snapshot"
// for a snapshot's), resets and snapshot ends.
function record(sub) {
  const out = [];
  sub.on("change", (e) => out.push(`${e.type} ${e.key}${e.live ? "" : " snapshot"}`));
  sub.on("reset", (e) => out.push(`reset ${e.reason}`));
  sub.on("synced", () => out.push("synced"));
  return out;
}

// drop cuts the client's socket with the gate closed and waits until the
// client noticed.
async function drop(client) {
  gateClosed = true;
  sockets.at(-1).cut();
  await until(client, "reconnecting", () => client.state === "reconnecting");
}

async function reopen(client) {
  gateClosed = false;
  await until(client, "reconnected", () => client.state === "open");
}

before(async () => {
  refuser = net.createServer((c) => c.destroy());
  await new Promise((resolve) => refuser.listen(0, "127.0.0.1", resolve));
});
after(() => new Promise((resolve) => refuser.close(resolve)));

// ---- tests ----------------------------------------------------------------------

it("snapshot, then live events, for several subscriptions on one socket", async (t) => {
  const ns = await namespace(t);
  await createCM(ns, "a", {}, { app: "web" });
  await createCM(ns, "b", {}, { app: "db" });
  const client = newClient(t);
  const n = sockets.length;
  const web = client.subscribe({ resource: "configmaps", namespace: ns, labelSelector: "app=web" });
  const all = client.subscribe({ resource: "cm", namespace: ns });
  const webEvents = record(web);
  const allEvents = record(all);
  client.connect();
  await until(client, "both snapshots", () => web.synced && all.synced);
  assert.equal(sockets.length, n + 1, "one socket for both subscriptions");
  assert.deepEqual([...web.objects.keys()], [`${ns}/a`]);
  assert.deepEqual([...all.objects.keys()].sort(), [`${ns}/a`, `${ns}/b`]);
  assert.deepEqual(all.resource, { group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true });
  assert.deepEqual(subState(all), await listState(ns));

  const c = await createCM(ns, "c", {}, { app: "web" });
  const a = await patchCM(ns, "a", { v: "1" });
  await deleteCM(ns, "b");
  await until(client, "live changes", () => all.objects.size === 2 && all.objects.get(`${ns}/a`)?.data?.v === "1" && web.objects.size === 2,
    () => JSON.stringify(allEvents));
  assert.deepEqual(webEvents, [`ADDED ${ns}/a snapshot`, "synced", `ADDED ${ns}/c`, `MODIFIED ${ns}/a`]);
  assert.deepEqual(allEvents.slice(-3), [`ADDED ${ns}/c`, `MODIFIED ${ns}/a`, `DELETED ${ns}/b`]);
  assert.equal(web.rv, a.metadata.resourceVersion);
  assert.equal(web.objects.get(`${ns}/c`).metadata.resourceVersion, c.metadata.resourceVersion);
  assert.deepEqual(subState(all), await listState(ns));
});

it("a dropped socket resumes with exactly the changes it missed", async (t) => {
  const ns = await namespace(t);
  for (const name of ["a", "b", "c"]) await createCM(ns, name);
  const client = newClient(t);
  const sub = client.subscribe({ resource: "configmaps", namespace: ns });
  const events = record(sub);
  client.connect();
  await until(client, "snapshot", () => sub.synced);
  await patchCM(ns, "a", { v: "live" }); // a live change before the drop
  await until(client, "live change", () => sub.objects.get(`${ns}/a`)?.data?.v === "live");
  const before = events.length;
  const rv = sub.rv;

  await drop(client);
  await createCM(ns, "d");
  await patchCM(ns, "a", { v: "1" });
  await patchCM(ns, "a", { v: "2" });
  await deleteCM(ns, "b");
  const want = await listState(ns);
  await reopen(client);
  // A change after the reconnect marks the end: frames of one
  // subscription arrive in order, so anything duplicated or late would
  // come before it.
  await createCM(ns, "zz");
  await until(client, "the marker", () => sub.objects.has(`${ns}/zz`), () => JSON.stringify(events.slice(before)));

  const resumed = sockets.at(-1).sent.filter((f) => f.type === "subscribe");
  assert.deepEqual(resumed, [{ type: "subscribe", id: sub.id, resource: "configmaps", namespace: ns, resourceVersion: rv }]);
  assert.deepEqual(events.slice(before), [`ADDED ${ns}/d`, `MODIFIED ${ns}/a`, `MODIFIED ${ns}/a`, `DELETED ${ns}/b`, `ADDED ${ns}/zz`]);
  assert.deepEqual(subState(sub).filter((k) => !k.startsWith(`${ns}/zz@`)), want);
  assert.equal(client.stats.resets, 0);
});

it("a socket cut off mid-snapshot starts over instead of resuming", async (t) => {
  const ns = await namespace(t);
  // 60 objects of 8 KiB: more than one 256 KiB batch, so the snapshot
  // spans several messages. Updating the first half afterwards puts
  // their versions after the others'.
  const big = "x".repeat(8192);
  for (let i = 0; i < 60; i++) await createCM(ns, `cm-${String(i).padStart(2, "0")}`, { big });
  for (let i = 0; i < 30; i++) await patchCM(ns, `cm-${String(i).padStart(2, "0")}`, { v: "1" });
  const client = newClient(t);
  const sub = client.subscribe({ resource: "configmaps", namespace: ns });
  const events = record(sub);
  let cutAt = -1;
  sub.on("added", () => {
    if (cutAt >= 0) return;
    cutAt = events.length;
    sockets.at(-1).cut(); // the rest of this message is handled; nothing after it arrives
  });
  client.connect();
  await until(client, "the cut", () => client.state === "reconnecting");
  assert.equal(sub.synced, false, "the snapshot ended before the cut");
  assert.ok(sub.objects.size < 60, `${sub.objects.size} objects before the cut`);
  assert.equal(sub.rv, "", "a snapshot's ADDED frame became a resume point");
  await until(client, "a fresh snapshot", () => sub.synced, () => `${sub.objects.size} objects, events ${events.slice(-3)}`);
  assert.deepEqual(subState(sub), await listState(ns));
  assert.equal(events.filter((e) => e === "synced").length, 1);
  assert.ok(events.includes("reset Resubscribe"), "the partial snapshot was not dropped");
});

it("a resume older than the gateway's history gets RESET and a fresh snapshot", async (t) => {
  const history = Number(env.KUBEGATE_TEST_HISTORY);
  assert.ok(history > 0, "KUBEGATE_TEST_HISTORY is not set");
  const ns = await namespace(t);
  await createCM(ns, "a");
  await createCM(ns, "gone");
  const client = newClient(t);
  const sub = client.subscribe({ resource: "configmaps", namespace: ns });
  const events = record(sub);
  client.connect();
  await until(client, "snapshot", () => sub.synced);
  const before = events.length;

  await drop(client);
  await deleteCM(ns, "gone");
  for (let i = 0; i <= history; i++) await patchCM(ns, "a", { v: String(i) });
  await createCM(ns, "new");
  const want = await listState(ns);
  await reopen(client);
  await until(client, "RESET and a fresh snapshot", () => sub.synced && events.includes("reset Expired"), () => JSON.stringify(events.slice(before)));
  const after = events.slice(before);
  // The snapshot's ADDED frames come in no particular order.
  assert.deepEqual([after[0], ...after.slice(1, -1).sort(), after.at(-1)], ["reset Expired", `ADDED ${ns}/a snapshot`, `ADDED ${ns}/new snapshot`, "synced"]);
  assert.deepEqual(subState(sub), want);
  assert.equal(client.stats.resets, 1);
});

it("a good token connects; a bad one stops at 401 instead of retrying", async (t) => {
  const bad = newClient(t, { token: "not-a-token" });
  const statuses = [];
  bad.on("status", (s) => statuses.push(s));
  const n = sockets.length;
  bad.connect();
  await until(bad, "401", () => bad.state === "unauthorized" || bad.state === "failed");
  const last = statuses.at(-1);
  assert.equal(last.state, "unauthorized");
  assert.equal(last.status.code, 401);
  assert.equal(last.status.reason, "Unauthorized");
  assert.equal(sockets.length, n + 1, "more than one attempt");
  assert.equal(bad.stats.reconnects, 0);

  // The same client with a good token.
  const ns = await namespace(t);
  await createCM(ns, "a");
  const sub = bad.subscribe({ resource: "configmaps", namespace: ns });
  bad.setToken(env.KUBEGATE_TEST_TOKEN);
  await until(bad, "snapshot with the good token", () => sub.synced);
  assert.deepEqual([...sub.objects.keys()], [`${ns}/a`]);
  assert.equal(sockets.at(-1).protocols.length, 2);
});

it("refused subscribes are error events; the socket keeps working", async (t) => {
  const ns = await namespace(t);
  await createCM(ns, "a");
  const client = newClient(t);
  const errors = [];
  const refused = (sub) => new Promise((resolve) => sub.on("ended", resolve));
  const badSelector = client.subscribe({ resource: "configmaps", namespace: ns, labelSelector: "app in (x" });
  const unknown = client.subscribe({ resource: "podz" });
  const misspelt = client.subscribe({ resource: "configmaps", labelselector: "app=web" });
  for (const sub of [badSelector, unknown, misspelt]) sub.on("error", (e) => errors.push(e));
  const good = client.subscribe({ resource: "configmaps", namespace: ns });
  client.connect();
  const ended = await Promise.all([badSelector, unknown, misspelt].map(refused));
  await until(client, "the good subscription", () => good.synced);
  assert.deepEqual(ended.map((e) => [e.status.code, e.status.reason]), [[400, "BadRequest"], [404, "NotFound"], [400, "BadRequest"]]);
  assert.match(ended[0].status.message, /labelSelector/);
  assert.match(ended[2].status.message, /labelselector/);
  for (const e of errors) {
    assert.equal(e.final, true);
    assert.equal(e.frame.request, "subscribe");
    assert.equal(e.status.kind, "Status");
  }
  assert.equal(client.subscriptions.size, 1);
  assert.deepEqual([...good.objects.keys()], [`${ns}/a`]);
  assert.equal(client.state, "open");
});

it("rows: a subscription with as Table keeps the rows, keyed as objects, and follows changes", async (t) => {
  const ns = await namespace(t);
  await createCM(ns, "a", { k: "v" });
  const client = newClient(t);
  const sub = client.subscribe({ resource: "configmaps", namespace: ns, as: "Table" });
  const events = record(sub);
  client.connect();
  await until(client, "snapshot", () => sub.synced);
  assert.deepEqual(sub.columns.map((c) => c.name), ["Name", "Data", "Age"]);
  assert.deepEqual([...sub.objects.keys()], [`${ns}/a`]);
  const a = sub.objects.get(`${ns}/a`);
  assert.deepEqual(a.cells.slice(0, 2), ["a", 1]);
  assert.ok(a.cells[2].since, "Age is not a relative cell");

  const b = await createCM(ns, "b");
  await until(client, "the new row", () => sub.objects.has(`${ns}/b`), () => JSON.stringify(events));
  assert.equal(sub.rv, b.metadata.resourceVersion);
  assert.deepEqual(events, [`ADDED ${ns}/a snapshot`, "synced", `ADDED ${ns}/b`]);
  assert.deepEqual([...sub.objects.values()].map((r) => `${r.namespace}/${r.name}@${r.resourceVersion}`).sort(), await listState(ns));
});

// ---- windows --------------------------------------------------------------------

// windowWant is the page the gateway must show: the namespace's
// configmaps whose name contains filter, by their Data column (the number
// of keys) in order, ties by name, limit from offset.
async function windowWant(ns, { order = "asc", filter = "", offset = 0, limit }) {
  const list = await kube("GET", cms(ns));
  const rows = list.items.filter((o) => o.metadata.name.includes(filter))
    .map((o) => ({ name: o.metadata.name, keys: Object.keys(o.data || {}).length }));
  rows.sort((a, b) => (order === "desc" ? b.keys - a.keys : a.keys - b.keys) || a.name.localeCompare(b.name));
  return { count: rows.length, names: rows.slice(offset, offset + limit).map((r) => r.name) };
}
const windowGot = (win) => ({ count: win.count, names: win.rows.map((r) => r.name) });
const keys = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"]));

it("window: a sorted, filtered page that follows changes and moves", async (t) => {
  const ns = await namespace(t);
  for (let i = 0; i < 8; i++) await createCM(ns, `cm-${i}`, keys(i % 4));
  await createCM(ns, "other", keys(9));
  const client = newClient(t);
  const changes = [];
  const win = client.window({ resource: "configmaps", namespace: ns, sort: "data", order: "desc", filter: "CM-", limit: 3 }, {
    change: (e) => changes.push(e),
  });
  client.connect();
  let want = await windowWant(ns, { order: "desc", filter: "cm-", limit: 3 });
  await until(client, "the first page", () => win.synced, () => JSON.stringify(windowGot(win)));
  assert.deepEqual(windowGot(win), want);
  assert.deepEqual([win.sort, win.order, win.offset], ["Data", "desc", 0]);
  assert.deepEqual(win.columns.map((c) => c.name), ["Name", "Data", "Age"]);
  assert.ok(win.rows[0].cells[2].since, "Age is not a relative cell");
  assert.equal(changes[0].first, true);
  assert.ok(win.cursor, "no cursor in the first frame");

  // A change that moves a row into the page, and one that moves a row out of it.
  await patchCM(ns, "cm-4", keys(6));
  await patchCM(ns, "cm-3", { k0: null, k1: null, k2: null });
  want = await windowWant(ns, { order: "desc", filter: "cm-", limit: 3 });
  await until(client, "the changes", () => JSON.stringify(windowGot(win)) === JSON.stringify(want), () => JSON.stringify(windowGot(win)));
  assert.equal(win.rows[0].name, "cm-4");
  assert.equal(win.rows[0].cells[1], 6);

  // Scrolling: the page moves, and only the window's rows travel.
  win.move({ offset: 4, limit: 4 });
  want = await windowWant(ns, { order: "desc", filter: "cm-", offset: 4, limit: 4 });
  await until(client, "the moved page", () => win.offset === 4 && JSON.stringify(windowGot(win)) === JSON.stringify(want), () => JSON.stringify(windowGot(win)));
  assert.equal(win.limit, 4);
  assert.equal(client.stats.resets, 0);
});

it("window: a reconnect sends it again at its offset, or at its last cursor, with what changed meanwhile", async (t) => {
  const ns = await namespace(t);
  for (let i = 0; i < 6; i++) await createCM(ns, `cm-${i}`, keys(i));
  const client = newClient(t);
  const byOffset = client.window({ resource: "configmaps", namespace: ns, sort: "Data", limit: 2, offset: 2 });
  const byCursor = client.window({ resource: "configmaps", namespace: ns, sort: "Data", limit: 2 });
  const resets = [];
  byOffset.on("reset", (e) => resets.push(e.reason));
  client.connect();
  await until(client, "both windows", () => byOffset.synced && byCursor.synced);
  assert.deepEqual(windowGot(byOffset).names, ["cm-2", "cm-3"]);
  // Place the second window by the cursor of its row cm-3.
  const cursorOf3 = await new Promise((resolve) => {
    const probe = client.window({ resource: "configmaps", namespace: ns, sort: "Data", limit: 1, offset: 3 }, {
      change: () => {
        if (probe.synced && probe.cursor) {
          probe.close();
          resolve(probe.cursor);
        }
      },
    });
  });
  byCursor.move({ cursor: cursorOf3 });
  await until(client, "the cursor window", () => byCursor.rows[0]?.name === "cm-3");
  assert.equal(byCursor.offset, 3);
  const cursor = byCursor.cursor;

  await drop(client);
  await createCM(ns, "cm-a", {}); // sorts first: shifts the offset window, not the cursor one
  await patchCM(ns, "cm-2", keys(10));
  await reopen(client);
  await until(client, "both windows again", () => byOffset.synced && byCursor.synced && byCursor.count === 7,
    () => JSON.stringify([windowGot(byOffset), windowGot(byCursor)]));
  const subscribes = sockets.at(-1).sent.filter((f) => f.type === "subscribe");
  assert.deepEqual(subscribes.map((f) => [f.offset, f.cursor, f.resourceVersion]), [[2, undefined, undefined], [undefined, cursor, undefined]]);
  assert.deepEqual(windowGot(byOffset), await windowWant(ns, { offset: 2, limit: 2 }));
  assert.deepEqual(windowGot(byCursor).names, ["cm-3", "cm-4"]);
  assert.equal(byCursor.offset, 3, "cm-a above and cm-2 moved below: cm-3 keeps its rank");
  assert.deepEqual(resets, ["Resubscribe"]);
});

it("window: a bad sort is refused with a Status, and a move out of range is an error that keeps the window", async (t) => {
  const ns = await namespace(t);
  await createCM(ns, "a");
  const client = newClient(t);
  const bad = client.window({ resource: "configmaps", namespace: ns, sort: "nope", limit: 5 });
  const ended = new Promise((resolve) => bad.on("ended", resolve));
  const win = client.window({ resource: "configmaps", namespace: ns, limit: 5 });
  const errors = [];
  win.on("error", (e) => errors.push(e));
  client.connect();
  const e = await ended;
  assert.deepEqual([e.status.kind, e.status.code, e.status.reason], ["Status", 400, "BadRequest"]);
  assert.match(e.status.message, /nope/);
  await until(client, "the window", () => win.synced);
  win.move({ cursor: "not-a-cursor" });
  await until(client, "the refused move", () => errors.length === 1);
  assert.equal(errors[0].final, false);
  assert.equal(errors[0].frame.request, "window");
  assert.equal(errors[0].status.code, 400);
  assert.equal(win.state, "active");
  assert.deepEqual(windowGot(win), { count: 1, names: ["a"] });
});
