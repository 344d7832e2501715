// Unit tests of kubegate.js against a fake socket, with node:test's fake
// timers. No gateway needed: node --test test/client.test.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import {
  DEFAULT_BACKOFF, KubegateClient, LiveWindow, PROTOCOL, Subscription, backoffDelay, cellText, humanDuration, objectKey, tokenProtocol,
} from "../kubegate.js";

// FakeSocket stands in for a WebSocket: the test opens it, hands it
// frames and drops it. Every instance is kept in FakeSocket.all.
class FakeSocket {
  static all = [];
  constructor(url, protocols, options) {
    Object.assign(this, { url, protocols, options, readyState: 0, sent: [], closed: null });
    this.onopen = this.onmessage = this.onerror = this.onclose = null;
    FakeSocket.all.push(this);
  }
  send(data) {
    assert.equal(this.readyState, 1, "send on a socket that is not open");
    this.sent.push(JSON.parse(data));
  }
  close(code, reason) {
    this.closed = { code, reason };
    this.readyState = 3;
  }
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }
  receive(...frames) {
    const f = frames.length === 1 ? frames[0] : { type: "batch", events: frames };
    this.onmessage?.({ data: JSON.stringify(f) });
  }
  drop(code = 1006, reason = "") {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
  subscribes() {
    return this.sent.filter((f) => f.type === "subscribe");
  }
}

function enableTimers(t) {
  // Node 20.11+ takes an options object; older releases an array.
  try {
    t.mock.timers.enable({ apis: ["setTimeout"] });
  } catch {
    t.mock.timers.enable(["setTimeout"]);
  }
}

// setup returns a client on fake sockets with fake timers and no jitter
// (random() = 0, so every delay is its base).
function setup(t, options = {}) {
  FakeSocket.all = [];
  enableTimers(t);
  const client = new KubegateClient("ws://gw.example/ws", { WebSocket: FakeSocket, probe: false, random: () => 0, ...options });
  const statuses = [];
  client.on("status", (s) => statuses.push(s));
  t.after(() => client.close());
  return { client, statuses, last: () => FakeSocket.all.at(-1) };
}

// settle lets pending promise callbacks (the handshake probe) run. It
// waits for no time: setImmediate runs once the microtask queue is empty.
const settle = () => new Promise((resolve) => setImmediate(resolve));

const cm = (name, rv, data = {}) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "ns", resourceVersion: rv }, data });
const ack = (id) => ({ type: "ack", id, request: "subscribe", resource: { group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true } });
const ev = (type, id, obj) => ({ type, id, rv: obj.metadata.resourceVersion, object: obj });

// collect records a subscription's events as "type key rv" strings.
function collect(sub) {
  const out = [];
  for (const type of ["added", "modified", "deleted", "sync"]) sub.on(type, (e) => out.push(`${e.type} ${e.key} ${e.rv}${e.live ? "" : " snapshot"}`));
  sub.on("reset", (e) => out.push(`reset ${e.reason}`));
  sub.on("synced", (e) => out.push(`synced ${e.rv}`));
  sub.on("error", (e) => out.push(`error ${e.status.code}${e.final ? " final" : ""}`));
  sub.on("ended", (e) => out.push(`ended ${e.status ? e.status.code : "-"}`));
  return out;
}

test("backoffDelay grows by factor up to maxMs, and jitter only shortens it", () => {
  const b = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.5 };
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((a) => backoffDelay(a, b, () => 0)), [100, 200, 400, 800, 1000, 1000]);
  assert.equal(backoffDelay(Infinity, b, () => 0), 1000);
  assert.equal(backoffDelay(2, b, () => 0.999999), 200);
  for (let i = 0; i < 200; i++) {
    const d = backoffDelay(3, b);
    assert.ok(d >= 400 && d <= 800, `delay ${d} outside [400, 800]`);
  }
  assert.equal(backoffDelay(0, undefined, () => 0), DEFAULT_BACKOFF.initialMs);
  assert.throws(() => new KubegateClient("ws://x/ws", { WebSocket: FakeSocket, backoff: { jitter: 2 } }), RangeError);
});

test("reconnects with exponential backoff, and a healthy connection resets it", (t) => {
  const { client, statuses, last } = setup(t, { backoff: { initialMs: 100, maxMs: 1000, resetAfterMs: 5000 } });
  client.connect();
  assert.equal(client.state, "connecting");
  assert.deepEqual(last().protocols, [PROTOCOL]);
  // Handshakes that fail: 100, 200, 400, 800, 1000, 1000ms.
  for (const want of [100, 200, 400, 800, 1000, 1000]) {
    const n = FakeSocket.all.length;
    last().drop();
    assert.equal(client.state, "reconnecting");
    assert.equal(statuses.at(-1).delayMs, want);
    t.mock.timers.tick(want - 1);
    assert.equal(FakeSocket.all.length, n, `a new socket before ${want}ms`);
    t.mock.timers.tick(1);
    assert.equal(FakeSocket.all.length, n + 1, `no new socket after ${want}ms`);
  }
  // Open, but not for resetAfterMs: the delay keeps growing.
  last().open();
  t.mock.timers.tick(4999);
  last().drop(1001, "server shutting down");
  assert.deepEqual({ ...statuses.at(-1) }, { state: "reconnecting", code: 1001, reason: "server shutting down", delayMs: 1000 });
  t.mock.timers.tick(1000);
  // Open for resetAfterMs: back to the first delay.
  last().open();
  t.mock.timers.tick(5000);
  last().drop();
  assert.equal(statuses.at(-1).delayMs, 100);
  assert.equal(client.stats.reconnects, 8);
});

test("close codes: 4001 waits the longest delay, 1009 is final, close() stops", (t) => {
  const { client, statuses, last } = setup(t, { backoff: { initialMs: 100, maxMs: 1000 } });
  client.connect();
  last().open();
  last().drop(4001, "slow consumer");
  assert.equal(statuses.at(-1).delayMs, 1000);
  t.mock.timers.tick(1000);
  last().open();
  last().drop(1009, "message too big");
  assert.equal(client.state, "failed");
  const n = FakeSocket.all.length;
  t.mock.timers.tick(3_600_000);
  assert.equal(FakeSocket.all.length, n, "reconnected after a final close");
  client.connect(); // the caller may try again
  assert.equal(FakeSocket.all.length, n + 1);
  last().drop();
  client.close();
  assert.equal(client.state, "closed");
  t.mock.timers.tick(3_600_000);
  assert.equal(FakeSocket.all.length, n + 1, "reconnected after close()");
});

test("resumes from the last live event or END_OF_SNAPSHOT, never from a snapshot's ADDED or a SYNC", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "configmaps", namespace: "ns", labelSelector: "app=web" });
  const events = collect(sub);
  client.connect();
  last().open();
  assert.deepEqual(last().subscribes(), [{ type: "subscribe", id: sub.id, resource: "configmaps", namespace: "ns", labelSelector: "app=web" }]);
  last().receive(ack(sub.id), ev("ADDED", sub.id, cm("b", "9")), ev("ADDED", sub.id, cm("a", "7")), { type: "END_OF_SNAPSHOT", id: sub.id, rv: "10" });
  assert.equal(sub.state, "active");
  assert.equal(sub.resource.kind, "ConfigMap");
  assert.equal(sub.rv, "10");
  last().receive(ev("MODIFIED", sub.id, cm("a", "12", { v: "2" })));
  last().receive(ev("SYNC", sub.id, cm("b", "9")));
  last().receive(ev("ADDED", sub.id, cm("c", "13")), ev("DELETED", sub.id, cm("c", "14")));
  assert.equal(sub.rv, "14");
  assert.deepEqual(events, ["ADDED ns/b 9 snapshot", "ADDED ns/a 7 snapshot", "synced 10", "MODIFIED ns/a 12", "SYNC ns/b 9 snapshot",
    "ADDED ns/c 13", "DELETED ns/c 14"]);
  assert.deepEqual([...sub.objects.keys()].sort(), ["ns/a", "ns/b"]);
  assert.deepEqual(sub.objects.get("ns/a").data, { v: "2" });

  last().drop();
  t.mock.timers.tick(DEFAULT_BACKOFF.initialMs);
  last().open();
  assert.deepEqual(last().subscribes(), [{ type: "subscribe", id: sub.id, resource: "configmaps", namespace: "ns", labelSelector: "app=web", resourceVersion: "14" }]);
  assert.equal(sub.objects.size, 2, "a resume keeps the objects");
  last().receive(ack(sub.id), ev("MODIFIED", sub.id, cm("b", "15")));
  assert.equal(sub.rv, "15");
  assert.deepEqual(events.slice(7), ["MODIFIED ns/b 15"]);
});

test("cut off mid-snapshot: subscribes again without resourceVersion and drops the partial snapshot", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "configmaps", namespace: "ns" });
  const events = collect(sub);
  client.connect();
  last().open();
  last().receive(ack(sub.id), ev("ADDED", sub.id, cm("a", "20")), ev("ADDED", sub.id, cm("b", "5")));
  assert.equal(sub.rv, "");
  assert.equal(sub.synced, false);
  last().drop();
  t.mock.timers.tick(DEFAULT_BACKOFF.initialMs);
  last().open();
  assert.equal(last().subscribes()[0].resourceVersion, undefined);
  assert.equal(sub.objects.size, 0);
  assert.deepEqual(events, ["ADDED ns/a 20 snapshot", "ADDED ns/b 5 snapshot", "reset Resubscribe"]);
  last().receive(ack(sub.id), ev("ADDED", sub.id, cm("b", "5")), { type: "END_OF_SNAPSHOT", id: sub.id, rv: "30" });
  assert.deepEqual([...sub.objects.keys()], ["ns/b"]);
  assert.equal(sub.rv, "30");
});

test("RESET clears the subscription; the snapshot after it refills it", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "configmaps" });
  const other = client.subscribe({ resource: "secrets" });
  const events = collect(sub);
  client.connect();
  last().open();
  last().receive(ack(sub.id), ack(other.id), ev("ADDED", sub.id, cm("a", "1")), ev("ADDED", other.id, cm("s", "2")),
    { type: "END_OF_SNAPSHOT", id: sub.id, rv: "3" }, { type: "END_OF_SNAPSHOT", id: other.id, rv: "3" });
  last().receive({ type: "RESET", id: sub.id, reason: "Overflow" });
  assert.equal(sub.objects.size, 0);
  assert.equal(sub.rv, "");
  assert.equal(sub.synced, false);
  assert.equal(other.objects.size, 1, "a RESET touches only its subscription");
  assert.equal(other.rv, "3");
  // A snapshot's ADDED after the RESET is not a resume point either.
  last().receive(ev("ADDED", sub.id, cm("b", "9")));
  assert.equal(sub.rv, "");
  last().receive({ type: "END_OF_SNAPSHOT", id: sub.id, rv: "9" });
  assert.deepEqual(events, ["ADDED ns/a 1 snapshot", "synced 3", "reset Overflow", "ADDED ns/b 9 snapshot", "synced 9"]);
  assert.deepEqual([...sub.objects.keys()], ["ns/b"]);
  assert.equal(client.stats.resets, 1);
});

test("error frames: final ones end the subscription, 429 retries it, frame errors reach the client", (t) => {
  const { client, last } = setup(t, { backoff: { initialMs: 100 } });
  const bad = client.subscribe({ resource: "configmaps", labelSelector: "app in (x" });
  const busy = client.subscribe({ resource: "pods" });
  const badEvents = collect(bad);
  const busyEvents = collect(busy);
  const clientErrors = [];
  client.on("error", (e) => clientErrors.push(e));
  client.connect();
  last().open();
  const status = (code, reason) => ({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: reason, reason, code });
  last().receive({ type: "error", id: bad.id, request: "subscribe", status: status(400, "BadRequest") });
  assert.deepEqual(badEvents, ["error 400 final", "ended 400"]);
  assert.equal(bad.state, "ended");
  assert.equal(client.subscriptions.has(bad.id), false);

  last().receive({ type: "error", id: busy.id, request: "subscribe", status: status(429, "TooManyRequests") });
  assert.deepEqual(busyEvents, ["error 429"]);
  assert.equal(busy.state, "retrying");
  assert.equal(last().subscribes().length, 2);
  t.mock.timers.tick(99);
  assert.equal(last().subscribes().length, 2);
  t.mock.timers.tick(1);
  assert.equal(last().subscribes().length, 3);
  assert.equal(last().subscribes()[2].id, busy.id);

  last().receive({ type: "error", status: status(400, "BadRequest") });
  assert.equal(clientErrors.length, 1);
  assert.equal(clientErrors[0].status.code, 400);
  last().onmessage({ data: "not json" });
  last().onmessage({ data: "null" });
  last().receive({ type: "batch", events: [7, null] });
  assert.equal(clientErrors.length, 3);
  assert.equal(clientErrors[1].status, null);
  assert.match(clientErrors[2].error.message, /not a JSON object/);
  // Ended for good (403) versus ended for now (503).
  last().receive(ack(busy.id), { type: "END_OF_SNAPSHOT", id: busy.id, rv: "4" });
  last().receive({ type: "error", id: busy.id, ended: true, status: status(503, "ServiceUnavailable") });
  assert.equal(busy.state, "retrying");
  t.mock.timers.tick(100);
  assert.equal(last().subscribes().at(-1).resourceVersion, "4");
  last().receive(ack(busy.id), { type: "error", id: busy.id, ended: true, status: status(403, "Forbidden") });
  assert.equal(busy.state, "ended");
  assert.deepEqual(busyEvents.slice(1), ["synced 4", "error 503", "error 403 final", "ended 403"]);
});

test("a 401 error frame reconnects; a handshake answered 401 stops until the token changes", async (t) => {
  const probes = [];
  let answer = 401;
  const fetch = async (url, init) => {
    probes.push({ url, auth: init.headers.Authorization });
    return { status: answer, statusText: "x", json: async () => ({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", reason: "Unauthorized", code: answer }) };
  };
  const { client, statuses, last } = setup(t, { token: "old", probe: true, fetch, backoff: { initialMs: 100 } });
  const sub = client.subscribe({ resource: "configmaps" });
  const events = collect(sub);
  client.connect();
  assert.deepEqual(last().protocols, [PROTOCOL, tokenProtocol("old")]);
  last().open();
  last().receive(ack(sub.id), { type: "END_OF_SNAPSHOT", id: sub.id, rv: "8" });
  last().receive({ type: "error", id: sub.id, ended: true, status: { kind: "Status", code: 401, reason: "Unauthorized" } });
  assert.deepEqual(last().closed, { code: 1000, reason: "token no longer valid" });
  assert.equal(client.state, "reconnecting");
  assert.equal(sub.state, "pending", "a 401 keeps the subscription");
  assert.equal(sub.rv, "8");
  t.mock.timers.tick(100);
  const n = FakeSocket.all.length;
  last().drop(); // the handshake is refused
  await settle();
  assert.equal(client.state, "unauthorized");
  assert.equal(statuses.at(-1).status.code, 401);
  assert.deepEqual(probes, [{ url: "http://gw.example/ws", auth: "Bearer old" }]);
  t.mock.timers.tick(3_600_000);
  assert.equal(FakeSocket.all.length, n, "retried after 401");

  client.setToken("new");
  assert.deepEqual(last().protocols, [PROTOCOL, tokenProtocol("new")]);
  last().open();
  assert.equal(last().subscribes()[0].resourceVersion, "8");
  assert.deepEqual(events, ["synced 8", "error 401"]);

  // A refused handshake whose probe says the credentials are fine is retried.
  answer = 400;
  last().drop(1001);
  t.mock.timers.tick(100);
  last().drop();
  await settle();
  assert.equal(client.state, "reconnecting");
});

test("a probe that gets no answer gives up after 10s and the client retries", async (t) => {
  // fetch that answers only by failing when its signal aborts.
  const fetch = (url, init) => new Promise((resolve, reject) => init.signal.addEventListener("abort", () => reject(init.signal.reason)));
  const { client, last } = setup(t, { probe: true, fetch, backoff: { initialMs: 100 } });
  client.connect();
  last().drop();
  await settle();
  t.mock.timers.tick(9999);
  await settle();
  assert.equal(client.state, "connecting");
  t.mock.timers.tick(1);
  await settle();
  assert.equal(client.state, "reconnecting");
});

test("unsubscribe sends it once; the same id waits for its answer", (t) => {
  const { client, last } = setup(t);
  const a = client.subscribe({ id: "x", resource: "configmaps" });
  const ended = collect(a);
  client.connect();
  last().open();
  last().receive(ack("x"));
  a.unsubscribe();
  a.unsubscribe();
  assert.deepEqual(ended, ["ended -"]);
  assert.deepEqual(last().sent.at(-1), { type: "unsubscribe", id: "x" });
  const b = client.subscribe({ id: "x", resource: "secrets" });
  assert.equal(last().subscribes().length, 1, "subscribed again before the unsubscribe's answer");
  // A frame of the old subscription in flight is dropped.
  last().receive(ev("ADDED", "x", cm("old", "1")));
  assert.equal(b.objects.size, 0);
  last().receive({ type: "ack", id: "x", request: "unsubscribe" });
  assert.deepEqual(last().subscribes().at(-1), { type: "subscribe", id: "x", resource: "secrets" });
  assert.throws(() => client.subscribe({ id: "x", resource: "pods" }), /in use/);
  assert.throws(() => client.subscribe({ namespace: "ns" }), TypeError);
});

test("sendInitialEvents false: live from the ack; resourceVersion given: resumes from it", (t) => {
  const { client, last } = setup(t);
  const live = client.subscribe({ resource: "configmaps", sendInitialEvents: false });
  const resumed = client.subscribe({ resource: "configmaps", resourceVersion: "77" });
  client.connect();
  last().open();
  assert.equal(last().subscribes()[0].sendInitialEvents, false);
  assert.equal(last().subscribes()[1].resourceVersion, "77");
  last().receive(ack(live.id), ev("ADDED", live.id, cm("a", "80")));
  assert.equal(live.rv, "80");
  last().receive(ack(resumed.id), ev("MODIFIED", resumed.id, cm("a", "81")));
  assert.equal(resumed.rv, "81");
});

test("rows: a subscription with as Table keeps rows by key, with the ack's columns, and resumes from them", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "pods", namespace: "ns", as: "Table" });
  const nodes = client.subscribe({ resource: "nodes", as: "Table", sendInitialEvents: false });
  const events = collect(sub);
  client.connect();
  last().open();
  assert.deepEqual(last().subscribes()[0], { type: "subscribe", id: sub.id, resource: "pods", namespace: "ns", as: "Table" });
  const columns = [{ name: "Name", type: "string", format: "name", description: "", priority: 0 },
    { name: "Age", type: "string", format: "", description: "", priority: 0, relative: true }];
  const row = (name, rv, ns = "ns") => ({ name, ...(ns ? { namespace: ns } : {}), resourceVersion: rv, uid: `uid-${name}`,
    cells: [name, { since: "2026-01-02T03:04:05Z" }] });
  const rowEv = (type, id, r) => ({ type, id, rv: r.resourceVersion, row: r });
  last().receive({ ...ack(sub.id), columns }, rowEv("ADDED", sub.id, row("a", "7")), rowEv("ADDED", sub.id, row("b", "9")),
    { type: "END_OF_SNAPSHOT", id: sub.id, rv: "10" });
  assert.deepEqual(sub.columns, columns);
  assert.deepEqual([...sub.objects.keys()].sort(), ["ns/a", "ns/b"]);
  last().receive(rowEv("MODIFIED", sub.id, row("a", "12")), rowEv("DELETED", sub.id, row("b", "13")));
  assert.deepEqual(events, ["ADDED ns/a 7 snapshot", "ADDED ns/b 9 snapshot", "synced 10", "MODIFIED ns/a 12", "DELETED ns/b 13"]);
  assert.deepEqual(sub.objects.get("ns/a"), row("a", "12"));
  assert.equal(sub.rv, "13");
  // Cluster-scoped rows have no namespace.
  last().receive({ ...ack(nodes.id), columns }, rowEv("ADDED", nodes.id, row("node-1", "20", "")));
  assert.deepEqual([...nodes.objects.keys()], ["node-1"]);
  assert.equal(nodes.rv, "20");

  last().drop();
  t.mock.timers.tick(DEFAULT_BACKOFF.initialMs);
  last().open();
  assert.deepEqual(last().subscribes()[0], { type: "subscribe", id: sub.id, resource: "pods", namespace: "ns", as: "Table", resourceVersion: "13" });
});

test("close() from a status listener stops the client, whatever the state it is told of", async (t) => {
  for (const state of ["connecting", "open", "reconnecting"]) await t.test(state, (t) => {
    const { client, last } = setup(t);
    client.on("status", (s) => {
      if (s.state === state) client.close();
    });
    client.connect();
    last().open();
    last().drop();
    const n = FakeSocket.all.length;
    t.mock.timers.tick(DEFAULT_BACKOFF.resetAfterMs + DEFAULT_BACKOFF.maxMs);
    assert.equal(client.state, "closed", `close() on ${state}`);
    assert.equal(FakeSocket.all.length, n, `a new socket after close() on ${state}`);
  });
});

test("a listener that throws does not stop the others, and its exception is reported", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "configmaps" });
  const seen = [];
  sub.on("change", () => {
    throw new Error("listener bug");
  });
  sub.on("change", (e) => seen.push(e.key));
  const reported = [];
  t.mock.method(globalThis, "queueMicrotask", (fn) => reported.push(fn));
  client.connect();
  last().open();
  last().receive(ack(sub.id), ev("ADDED", sub.id, cm("a", "1")), ev("ADDED", sub.id, cm("b", "2")));
  assert.deepEqual(seen, ["ns/a", "ns/b"]);
  assert.equal(reported.length, 2);
  assert.throws(reported[0], /listener bug/);
});

test("stats: a message whose handling takes over 500 ms is counted slow", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "configmaps" });
  let clock = 0;
  t.mock.method(globalThis.performance, "now", () => clock);
  sub.on("change", (e) => {
    clock += e.key === "ns/slow" ? 501 : 500;
  });
  client.connect();
  last().open();
  last().receive(ack(sub.id));
  last().receive(ev("ADDED", sub.id, cm("a", "1")));
  last().receive(ev("ADDED", sub.id, cm("slow", "2")));
  last().receive(ev("ADDED", sub.id, cm("b", "3")));
  assert.equal(client.stats.messages, 4);
  assert.equal(client.stats.slowMessages, 1);
  assert.equal(client.stats.maxMessageMs, 501);
});

test("helpers", () => {
  assert.equal(tokenProtocol("a+b/c?"), "base64url.bearer.authorization.k8s.io.YStiL2M_");
  assert.equal(objectKey({ metadata: { name: "n", namespace: "ns" } }), "ns/n");
  assert.equal(objectKey({ metadata: { name: "node-1" } }), "node-1");
  assert.equal(objectKey({ name: "n", namespace: "ns", cells: [] }), "ns/n");
  assert.throws(() => new Subscription(), TypeError);
  assert.throws(() => new LiveWindow(), TypeError);
  assert.throws(() => new KubegateClient("ftp://x/ws", { WebSocket: FakeSocket }), TypeError);
  assert.throws(() => new KubegateClient("ws://x/ws", { WebSocket: "none" }), /WebSocket/);
  assert.equal(new KubegateClient("https://gw.example/ws", { WebSocket: FakeSocket }).state, "idle");
});

// ---- windows ------------------------------------------------------------------

const wrow = (name, rv = "1", ns = "ns") => ({ name, namespace: ns, resourceVersion: rv, uid: `uid-${name}`, cells: [name, { since: "2026-01-02T03:04:05Z" }] });
const winAck = (id, extra = {}) => ({ ...ack(id), columns: [{ name: "Name", type: "string", format: "name", description: "", priority: 0 },
  { name: "Age", type: "string", format: "", description: "", priority: 0, relative: true }], sort: "metadata.namespace", order: "asc", ...extra });
const winFrame = (id, rv, ops, cursor) => ({ type: "WINDOW", id, rv, ...(cursor ? { cursor } : {}), ops });
const names = (win) => win.rows.map((r) => r.name);

// collectWindow records a window's events as strings.
function collectWindow(win) {
  const out = [];
  win.on("change", (e) => out.push(`change ${e.ops.map((o) => o.op).join(",")}${e.first ? " first" : ""}`));
  win.on("reset", (e) => out.push(`reset ${e.reason}`));
  win.on("error", (e) => out.push(`error ${e.status.code}${e.final ? " final" : ""}`));
  win.on("ended", (e) => out.push(`ended ${e.status ? e.status.code : "-"}`));
  return out;
}

test("window: subscribes with its range, applies the splice operations in order, keeps count, offset, cursor and rv", (t) => {
  const { client, last } = setup(t);
  const win = client.window({ resource: "pods", namespace: "ns", sort: "Restarts", order: "desc", filter: "web", limit: 3, offset: 10 });
  const events = collectWindow(win);
  assert.equal(win.id, "win-1");
  client.connect();
  last().open();
  assert.deepEqual(last().subscribes(), [{ type: "subscribe", id: "win-1", resource: "pods", namespace: "ns", sort: "Restarts", order: "desc", filter: "web", limit: 3, offset: 10 }]);
  last().receive(winAck(win.id, { sort: "Restarts", order: "desc" }),
    winFrame(win.id, "100", [{ op: "insert", pos: 0, row: wrow("a") }, { op: "insert", pos: 1, row: wrow("c") }, { op: "insert", pos: 1, row: wrow("b") },
      { op: "count", count: 40, offset: 10 }], "cur-a"));
  assert.equal(win.state, "active");
  assert.equal(win.synced, true);
  assert.deepEqual([win.sort, win.order, win.columns.length, win.resource.kind], ["Restarts", "desc", 2, "ConfigMap"]);
  assert.deepEqual(names(win), ["a", "b", "c"]);
  assert.deepEqual([win.count, win.offset, win.cursor, win.rv], [40, 10, "cur-a", "100"]);

  // move takes the row out, then puts its new state at a position of the array without it.
  last().receive(winFrame(win.id, "101", [{ op: "move", pos: 0, to: 2, row: wrow("a", "101") }]));
  assert.deepEqual(names(win), ["b", "c", "a"]);
  assert.equal(win.rows[2].resourceVersion, "101");
  assert.equal(win.cursor, "cur-a", "a frame without a cursor keeps the last one");
  last().receive(winFrame(win.id, "102", [{ op: "update", pos: 1, row: wrow("c", "102") }, { op: "remove", pos: 0 },
    { op: "insert", pos: 2, row: wrow("d", "102") }, { op: "count", count: 41, offset: 11 }], "cur-c"));
  assert.deepEqual(names(win), ["c", "a", "d"]);
  assert.equal(win.rows[0].resourceVersion, "102");
  assert.deepEqual([win.count, win.offset, win.cursor, win.rv], [41, 11, "cur-c", "102"]);
  assert.deepEqual(events, ["change insert,insert,insert,count first", "change move", "change update,remove,insert,count"]);
  // Frames of other kinds for a window's id are not its own.
  last().receive(ev("ADDED", win.id, cm("x", "103")), { type: "RESET", id: win.id, reason: "Overflow" }, { type: "END_OF_SNAPSHOT", id: win.id, rv: "104" });
  assert.deepEqual(names(win), ["c", "a", "d"]);
  assert.equal(events.length, 3);
});

test("window: a reset operation drops the rows held; reset comes before change", (t) => {
  const { client, last } = setup(t);
  const win = client.window({ resource: "pods", limit: 2 });
  const events = collectWindow(win);
  client.connect();
  last().open();
  assert.deepEqual(last().subscribes()[0], { type: "subscribe", id: win.id, resource: "pods", limit: 2 });
  last().receive(winAck(win.id), winFrame(win.id, "5", [{ op: "insert", pos: 0, row: wrow("a") }, { op: "count", count: 1, offset: 0 }]));
  let seen = null;
  win.on("reset", () => (seen = names(win)));
  last().receive(winFrame(win.id, "9", [{ op: "reset", reason: "Overflow" }, { op: "insert", pos: 0, row: wrow("b") },
    { op: "insert", pos: 1, row: wrow("c") }, { op: "count", count: 7, offset: 0 }]));
  assert.deepEqual(seen, ["b", "c"], "reset is told once the whole frame is applied");
  assert.deepEqual(names(win), ["b", "c"]);
  assert.equal(client.stats.resets, 1);
  // A move that keeps no row resets without a reason; that is no RESET of the gateway's.
  last().receive(winFrame(win.id, "9", [{ op: "reset" }, { op: "insert", pos: 0, row: wrow("x") }, { op: "count", count: 7, offset: 5 }]));
  assert.equal(client.stats.resets, 1);
  assert.deepEqual(events, ["change insert,count first", "reset Overflow", "change reset,insert,insert,count", "reset ", "change reset,insert,count"]);
});

test("window: move sends a window frame, waits for the ack, and a refused move leaves the window as it was", (t) => {
  const { client, last } = setup(t);
  const win = client.window({ resource: "pods", limit: 2 });
  const events = collectWindow(win);
  win.move({ offset: 4 }); // not sent yet: the subscribe carries it
  client.connect();
  last().open();
  assert.deepEqual(last().sent, [{ type: "subscribe", id: win.id, resource: "pods", limit: 2, offset: 4 }]);
  win.move({ offset: 6, limit: 3 }); // sent, not acknowledged: after the ack
  assert.equal(last().sent.length, 1);
  last().receive(winAck(win.id));
  assert.deepEqual(last().sent.at(-1), { type: "window", id: win.id, offset: 6, limit: 3 });
  last().receive(winFrame(win.id, "5", [{ op: "insert", pos: 0, row: wrow("e") }, { op: "insert", pos: 1, row: wrow("f") }, { op: "count", count: 9, offset: 4 }]),
    winFrame(win.id, "5", [{ op: "remove", pos: 0 }, { op: "remove", pos: 0 }, { op: "insert", pos: 0, row: wrow("g") }, { op: "count", count: 9, offset: 6 }]));
  assert.deepEqual([names(win), win.offset, win.limit], [["g"], 6, 3]);
  win.move({ cursor: "cur-x" });
  win.move();
  assert.deepEqual(last().sent.slice(-2), [{ type: "window", id: win.id, cursor: "cur-x", limit: 3 }, { type: "window", id: win.id, offset: 0, limit: 3 }]);
  const status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "bad cursor", reason: "BadRequest", code: 400 };
  last().receive({ type: "error", id: win.id, request: "window", status });
  assert.equal(win.state, "active");
  assert.deepEqual(names(win), ["g"]);
  assert.deepEqual(events.slice(-1), ["error 400"]);
  assert.throws(() => win.move({ offset: 1, cursor: "c" }), TypeError);
  assert.throws(() => win.move({ offset: -1 }), RangeError);
  assert.throws(() => win.move({ limit: 1001 }), RangeError);
});

test("window: a reconnect subscribes it again where it was, and its first frame replaces what it held", (t) => {
  const { client, last } = setup(t);
  const byOffset = client.window({ id: "o", resource: "pods", limit: 2, offset: 3 });
  const byCursor = client.window({ id: "c", resource: "pods", limit: 2, cursor: "cur-0" });
  const events = collectWindow(byOffset);
  client.connect();
  last().open();
  assert.deepEqual(last().subscribes().map((f) => [f.id, f.offset, f.cursor]), [["o", 3, undefined], ["c", undefined, "cur-0"]]);
  last().receive(winAck("o"), winAck("c"),
    winFrame("o", "5", [{ op: "insert", pos: 0, row: wrow("d") }, { op: "insert", pos: 1, row: wrow("e") }, { op: "count", count: 9, offset: 3 }], "cur-d"),
    winFrame("c", "5", [{ op: "insert", pos: 0, row: wrow("k") }, { op: "count", count: 9, offset: 7 }], "cur-k"));
  byOffset.move({ offset: 5 });
  // The move's answer is lost with the socket.
  last().drop();
  assert.equal(byOffset.state, "pending");
  assert.deepEqual(names(byOffset), ["d", "e"], "the rows stay until the window is sent again");
  t.mock.timers.tick(DEFAULT_BACKOFF.initialMs);
  last().open();
  assert.deepEqual(last().subscribes(), [
    { type: "subscribe", id: "o", resource: "pods", limit: 2, offset: 5 },
    { type: "subscribe", id: "c", resource: "pods", limit: 2, cursor: "cur-k" },
  ]);
  assert.equal(byOffset.synced, false);
  last().receive(winAck("o"));
  assert.deepEqual(names(byOffset), ["d", "e"]);
  last().receive(winFrame("o", "8", [{ op: "insert", pos: 0, row: wrow("f") }, { op: "count", count: 6, offset: 5 }]));
  assert.deepEqual([names(byOffset), byOffset.count, byOffset.synced], [["f"], 6, true]);
  assert.deepEqual(events, ["change insert,insert,count first", "reset Resubscribe", "change insert,count first"]);
});

test("window: operations that do not fit are reported and the window is subscribed again", (t) => {
  const { client, last } = setup(t);
  const win = client.window({ id: "w", resource: "pods", limit: 2 });
  const errors = [];
  client.on("error", (e) => errors.push(e.error.message));
  client.connect();
  last().open();
  last().receive(winAck("w"), winFrame("w", "5", [{ op: "insert", pos: 0, row: wrow("a") }, { op: "count", count: 1, offset: 0 }]));
  last().receive(winFrame("w", "6", [{ op: "remove", pos: 1 }]));
  assert.equal(errors.length, 1);
  assert.match(errors[0], /window w: operation .*"remove".* does not fit 1 rows/);
  assert.deepEqual(last().sent.at(-1), { type: "unsubscribe", id: "w" });
  assert.equal(last().subscribes().length, 1, "subscribed again before the unsubscribe's answer");
  last().receive(winFrame("w", "7", [{ op: "insert", pos: 0, row: wrow("late") }])); // in flight: not the window's any more
  last().receive({ type: "ack", id: "w", request: "unsubscribe" });
  assert.deepEqual(last().subscribes().at(-1), { type: "subscribe", id: "w", resource: "pods", limit: 2 });
  last().receive(winAck("w"), winFrame("w", "8", [{ op: "insert", pos: 0, row: wrow("b") }, { op: "count", count: 1, offset: 0 }]));
  assert.deepEqual(names(win), ["b"]);
  for (const bad of [{ op: "insert", pos: 3, row: wrow("x") }, { op: "insert", pos: 0 }, { op: "move", pos: 0, to: 1, row: wrow("x") },
    { op: "update", pos: -1, row: wrow("x") }, { op: "count", count: -1, offset: 0 }, null]) {
    const n = errors.length;
    last().receive({ type: "ack", id: "w", request: "unsubscribe" }); // free the id if it is waiting
    last().receive(winAck("w"), winFrame("w", "9", [bad]));
    assert.equal(errors.length, n + 1, `accepted ${JSON.stringify(bad)}`);
  }
});

test("window: ended for now subscribes it again at its place; ended for good, refused or closed ends it", (t) => {
  const { client, last } = setup(t, { backoff: { initialMs: 100 } });
  const win = client.window({ resource: "pods", limit: 2, offset: 2 });
  const gone = client.window({ resource: "gizmos", limit: 2 });
  const bad = client.window({ resource: "pods", sort: "nope", limit: 2 });
  const events = collectWindow(win);
  const goneEvents = collectWindow(gone);
  const badEvents = collectWindow(bad);
  client.connect();
  last().open();
  const status = (code, reason) => ({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: reason, reason, code });
  last().receive({ type: "error", id: bad.id, request: "subscribe", status: status(400, "BadRequest") });
  assert.deepEqual(badEvents, ["error 400 final", "ended 400"]);
  last().receive(winAck(win.id), winAck(gone.id), winFrame(win.id, "5", [{ op: "count", count: 0, offset: 2 }]));
  last().receive({ type: "error", id: win.id, ended: true, status: status(503, "ServiceUnavailable") });
  assert.equal(win.state, "retrying");
  t.mock.timers.tick(100);
  assert.deepEqual(last().subscribes().at(-1), { type: "subscribe", id: win.id, resource: "pods", limit: 2, offset: 2 });
  last().receive({ type: "error", id: gone.id, ended: true, status: status(404, "NotFound") });
  assert.deepEqual(goneEvents, ["error 404 final", "ended 404"]);
  assert.equal(client.subscriptions.has(gone.id), false);
  win.close();
  assert.deepEqual(last().sent.at(-1), { type: "unsubscribe", id: win.id });
  assert.equal(win.state, "ended");
  win.move({ offset: 1 }); // no effect once ended
  assert.deepEqual(last().sent.at(-1), { type: "unsubscribe", id: win.id });
  assert.deepEqual(events, ["change count first", "error 503", "ended -"]);
});

test("window: requests that are no window are refused before they are sent", (t) => {
  const { client } = setup(t);
  assert.throws(() => client.window({ resource: "pods", limit: 0 }), RangeError);
  assert.throws(() => client.window({ resource: "pods", limit: 2.5 }), RangeError);
  assert.throws(() => client.window({ resource: "pods", offset: 1, cursor: "c" }), TypeError);
  assert.throws(() => client.window({ resource: "pods", resourceVersion: "5" }), /does not apply/);
  assert.throws(() => client.window({ resource: "pods", sendInitialEvents: false }), /does not apply/);
  assert.throws(() => client.window({ limit: 5 }), TypeError);
  assert.throws(() => client.subscribe({ resource: "pods", limit: 5 }), /client\.window/);
  assert.equal(client.window({ resource: "pods" }).limit, 50);
});

test("keepObjects false: events carry the objects, objects stays empty, resuming works", (t) => {
  const { client, last } = setup(t);
  const sub = client.subscribe({ resource: "configmaps", sendInitialEvents: false }, {}, { keepObjects: false });
  const events = collect(sub);
  client.connect();
  last().open();
  last().receive(ack(sub.id), ev("ADDED", sub.id, cm("a", "5")), ev("MODIFIED", sub.id, cm("a", "6")));
  assert.equal(sub.objects.size, 0);
  assert.equal(sub.rv, "6");
  assert.deepEqual(events, ["ADDED ns/a 5", "MODIFIED ns/a 6"]);
});

test("humanDuration writes durations as apimachinery's duration.HumanDuration does", () => {
  // test/testdata/human-duration.json is written by Go from the real
  // function (TestHumanDurationFixture in ../client_test.go).
  const cases = JSON.parse(readFileSync(new URL("./testdata/human-duration.json", import.meta.url), "utf8"));
  assert.ok(cases.length > 20);
  for (const { ms, text } of cases) assert.equal(humanDuration(ms), text, `humanDuration(${ms})`);
});

test("cellText shows relative cells against the clock it is given", () => {
  const now = Date.parse("2026-01-02T03:14:05Z");
  assert.equal(cellText({ since: "2026-01-02T03:04:05Z" }, now), "10m");
  assert.equal(cellText({ prefix: "3 (", since: "2026-01-02T03:13:00.5Z", suffix: " ago)" }, now), "3 (64s ago)");
  assert.equal(cellText({ since: "not a time" }, now), "<invalid>");
  assert.deepEqual(["x", 0, 2.5, true, null, undefined].map((c) => cellText(c, now)), ["x", "0", "2.5", "true", "", ""]);
});
