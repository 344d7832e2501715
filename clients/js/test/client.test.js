// Unit tests of kubegate.js against a fake socket, with node:test's fake
// timers. No gateway needed: node --test test/client.test.js.
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  DEFAULT_BACKOFF, KubegateClient, PROTOCOL, Subscription, backoffDelay, objectKey, tokenProtocol,
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

test("helpers", () => {
  assert.equal(tokenProtocol("a+b/c?"), "base64url.bearer.authorization.k8s.io.YStiL2M_");
  assert.equal(objectKey({ metadata: { name: "n", namespace: "ns" } }), "ns/n");
  assert.equal(objectKey({ metadata: { name: "node-1" } }), "node-1");
  assert.equal(objectKey({ name: "n", namespace: "ns", cells: [] }), "ns/n");
  assert.throws(() => new Subscription(), TypeError);
  assert.throws(() => new KubegateClient("ftp://x/ws", { WebSocket: FakeSocket }), TypeError);
  assert.throws(() => new KubegateClient("ws://x/ws", { WebSocket: "none" }), /WebSocket/);
  assert.equal(new KubegateClient("https://gw.example/ws", { WebSocket: FakeSocket }).state, "idle");
});
