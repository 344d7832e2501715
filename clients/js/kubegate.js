// kubegate.js: a client for kubegate's WebSocket protocol kubegate.v1
// (docs/protocol.md in the kubegate repository).
//
// One KubegateClient holds one socket, which carries any number of
// subscriptions. Each Subscription keeps the current objects in a Map
// keyed namespace/name and the resourceVersion it last processed; after a
// dropped connection the client reconnects with a jittered exponential
// backoff and resumes every subscription from that point, so only the
// missed changes arrive. A RESET clears the subscription and the snapshot
// that follows refills it. A LiveWindow is a window subscription: a
// sorted, filtered page of rows that the gateway keeps live with splice
// operations; the client applies them to an array, moves the page when
// asked, and after a reconnect subscribes it again where it was.
//
// No dependencies and no build step: the file runs as is in browsers
// (global WebSocket) and in Node 18+, where the caller passes a WebSocket
// implementation such as the ws package. Its declarations are in
// kubegate.d.ts.
//
// Everything runs on the caller's event loop: a socket's messages are
// handled one at a time, and listeners are called synchronously while a
// frame is handled. The client schedules three kinds of timer, all with
// setTimeout: the reconnect delay, the timer that declares an open
// connection healthy (and resets the backoff), and a subscription's retry
// after a subscribe the gateway refused for the moment (429, 503). close()
// clears all of them.

/** The WebSocket subprotocol the client offers. */
export const PROTOCOL = "kubegate.v1";

/** The prefix of the subprotocol that carries a bearer token (docs/auth.md). */
export const TOKEN_PROTOCOL_PREFIX = "base64url.bearer.authorization.k8s.io.";

/** Reconnect timing; each field can be overridden through the backoff option. */
export const DEFAULT_BACKOFF = Object.freeze({
  initialMs: 500, // the first delay, before jitter
  maxMs: 30000, // no delay is longer
  factor: 2, // each failed attempt multiplies the delay by this
  jitter: 0.5, // a delay is shortened by up to this fraction, at random
  resetAfterMs: 10000, // a connection open this long resets the delay to initialMs
});

// Close codes after which reconnecting cannot help: the client itself sent
// something the gateway refuses (1009: a frame over maxMessageBytes), or the
// two ends do not speak the same protocol.
const FINAL_CLOSE_CODES = new Set([1002, 1003, 1007, 1009, 1010]);
// Close codes that ask the client to come back later, not at once: too many
// sockets for this client (1008) or on the gateway (1013), and a slow
// consumer (4001). The next attempt waits the longest delay.
const THROTTLE_CLOSE_CODES = new Set([1008, 1013, 4001]);
// Status codes of a refused subscribe that are worth retrying on the same
// socket: rate limits and limits on subscriptions (429), a cache that did
// not fill in time or a gateway shutting down (503), and unexpected errors.
const RETRY_SUBSCRIBE_CODES = new Set([429, 500, 503, 504]);
// Status codes of an ended subscription that are worth subscribing again
// for: re-authorization could not be made for too long (503).
const RETRY_ENDED_CODES = new Set([500, 503]);

/**
 * backoffDelay returns the delay before reconnect attempt number attempt
 * (0 for the first): initialMs * factor^attempt, at most maxMs, shortened
 * by a random fraction of up to jitter, so that clients cut off together
 * do not come back together. attempt Infinity gives the longest delay.
 */
export function backoffDelay(attempt, backoff = DEFAULT_BACKOFF, random = Math.random) {
  const { initialMs, maxMs, factor, jitter } = { ...DEFAULT_BACKOFF, ...backoff };
  const base = Math.min(maxMs, initialMs * Math.pow(factor, attempt));
  return Math.round(base * (1 - jitter * random()));
}

/**
 * tokenProtocol returns the subprotocol that carries a bearer token: the
 * prefix and the token in unpadded base64url, as kube-apiserver accepts it.
 */
export function tokenProtocol(token) {
  let bin = "";
  for (const b of new TextEncoder().encode(token)) bin += String.fromCharCode(b);
  return TOKEN_PROTOCOL_PREFIX + btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * objectKey is the key of an object in Subscription.objects:
 * "namespace/name", or "name" for a cluster-scoped object, as client-go's
 * MetaNamespaceKeyFunc. A row (a subscription with "as": "Table") carries
 * its name and namespace at the top and has the key of its object.
 */
export function objectKey(object) {
  const m = object.metadata || object;
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

/**
 * humanDuration writes a duration in milliseconds as kubectl does
 * (k8s.io/apimachinery/pkg/util/duration.HumanDuration): 45s, 3m12s, 5h,
 * 2d3h, 40d, 3y12d. Up to a second and a half in the future counts as
 * now ("0s"), to tolerate clocks that disagree a little; further is
 * "<invalid>".
 */
export function humanDuration(ms) {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.trunc(ms / 60000);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.trunc(ms / 3600000);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  const days = Math.trunc(hours / 24);
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${days}d` : `${days}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${days}d`;
  if (hours < 24 * 365 * 8) {
    const d = days % 365;
    return d === 0 ? `${Math.trunc(days / 365)}y` : `${Math.trunc(days / 365)}y${d}d`;
  }
  return `${Math.trunc(days / 365)}y`;
}

/**
 * cellText is a row's cell as kubectl shows it at time now (milliseconds
 * since the epoch): a relative cell ({since, prefix, suffix}) as prefix,
 * the time since since (humanDuration), suffix; null as ""; anything
 * else as text.
 */
export function cellText(cell, now = Date.now()) {
  if (cell === null || cell === undefined) return "";
  if (typeof cell === "object") {
    const since = Date.parse(cell.since);
    const d = Number.isNaN(since) ? "<invalid>" : humanDuration(now - since);
    return (cell.prefix || "") + d + (cell.suffix || "");
  }
  return String(cell);
}

const LISTENERS = Symbol("listeners");
const INTERNAL = Symbol("internal"); // a Subscription's bookkeeping, and the constructor's guard
const UNSUBSCRIBE = Symbol("unsubscribe");
const MOVE = Symbol("move");

// cancelTimer clears a timer if one is set: timer fields hold 0 when none
// is, and a clearTimeout of 0 is not a no-op everywhere (Node 18's mock
// timers drop the next timer due).
function cancelTimer(timer) {
  if (timer) clearTimeout(timer);
}

const now = () => (globalThis.performance ? globalThis.performance.now() : Date.now());

// SLOW_MESSAGE_MS: a message whose handling takes longer is counted in
// stats.slowMessages (a long task: the page did nothing else meanwhile).
const SLOW_MESSAGE_MS = 500;

// Emitter is the event half of the client and of a subscription: on(type,
// fn) adds a listener and returns a function that removes it.
class Emitter {
  constructor() {
    this[LISTENERS] = new Map();
  }

  on(type, fn) {
    let set = this[LISTENERS].get(type);
    if (!set) this[LISTENERS].set(type, (set = new Set()));
    set.add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this[LISTENERS].get(type)?.delete(fn);
  }
}

// emit calls target's listeners for type. A listener that throws does not
// stop the others or the frame loop: its exception is rethrown in a
// microtask, where the runtime reports it as uncaught.
function emit(target, type, detail) {
  const set = target[LISTENERS].get(type);
  if (!set) return;
  for (const fn of [...set]) {
    try {
      fn(detail);
    } catch (err) {
      queueMicrotask(() => {
        throw err;
      });
    }
  }
}

/**
 * Subscription is one subscription of a KubegateClient: one resource with
 * an optional namespace and selectors. Create it with client.subscribe.
 * Its fields are the client's: read them, do not change them (the objects
 * in objects included).
 */
export class Subscription extends Emitter {
  constructor(guard, client, id, request) {
    if (guard !== INTERNAL) throw new TypeError("use KubegateClient.subscribe to create a Subscription");
    super();
    /** The subscription's id on the socket. */
    this.id = id;
    /** The subscribe request's fields, without id and resourceVersion. */
    this.request = request;
    /** The current objects (rows for "as": "Table") by objectKey. */
    this.objects = new Map();
    /** The resume point: the rv of the last END_OF_SNAPSHOT or live event processed; "" when none. */
    this.rv = "";
    /** Whether the snapshot is complete, so the events that follow are live changes. */
    this.synced = false;
    /** "pending", "subscribing", "active", "retrying" or "ended". */
    this.state = "pending";
    /** The ack's resource ({group, version, resource, kind, namespaced}), once acknowledged. */
    this.resource = null;
    /** The namespaces a cluster-wide subscription was narrowed to (from the ack), or null. */
    this.namespaces = null;
    /** The columns of a subscription with rows ("as": "Table"), from the ack; null for objects. */
    this.columns = null;
    this[INTERNAL] = {
      client,
      sentOn: null, // the socket the subscribe went out on; frames from others are not this subscription's
      started: false, // a subscribe was acknowledged at least once
      attempt: 0, // refused subscribes in a row, for the retry delay
      timer: 0, // the retry after a refused subscribe
    };
  }

  /** unsubscribe ends the subscription; no event follows but "ended". */
  unsubscribe() {
    this[INTERNAL].client[UNSUBSCRIBE](this);
  }
}

/** The most rows a window may hold (docs/protocol.md, "Windows"). */
export const MAX_WINDOW_LIMIT = 1000;

// checkRange throws unless range is a window range: offset (a
// non-negative integer) or cursor (a non-empty string), not both, and
// optionally limit (an integer from 1 to MAX_WINDOW_LIMIT).
function checkRange({ offset, cursor, limit }) {
  if (offset !== undefined && !(Number.isInteger(offset) && offset >= 0)) {
    throw new RangeError(`kubegate: a window's offset is an integer >= 0, not ${offset}`);
  }
  if (cursor !== undefined && (typeof cursor !== "string" || cursor === "")) {
    throw new TypeError("kubegate: a window's cursor is a non-empty string (from a WINDOW frame)");
  }
  if (offset !== undefined && cursor !== undefined) throw new TypeError("kubegate: a window takes an offset or a cursor, not both");
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= MAX_WINDOW_LIMIT)) {
    throw new RangeError(`kubegate: a window's limit is an integer from 1 to ${MAX_WINDOW_LIMIT}, not ${limit}`);
  }
}

// applyOp applies one WINDOW operation to rows as docs/protocol.md says,
// and returns why it does not fit them, or "" when it was applied. Count
// and reset are the caller's to record; an operation of a type this
// client does not know is skipped.
function applyOp(rows, op) {
  if (!op || typeof op !== "object") return "an operation that is not an object";
  const at = (pos, max) => Number.isInteger(pos) && pos >= 0 && pos <= max;
  const isRow = (r) => r !== null && typeof r === "object" && !Array.isArray(r);
  switch (op.op) {
    case "insert":
      if (!at(op.pos, rows.length) || !isRow(op.row)) break;
      rows.splice(op.pos, 0, op.row);
      return "";
    case "remove":
      if (!at(op.pos, rows.length - 1)) break;
      rows.splice(op.pos, 1);
      return "";
    case "move":
      if (!at(op.pos, rows.length - 1) || !at(op.to, rows.length - 1) || !isRow(op.row)) break;
      rows.splice(op.pos, 1);
      rows.splice(op.to, 0, op.row);
      return "";
    case "update":
      if (!at(op.pos, rows.length - 1) || !isRow(op.row)) break;
      rows[op.pos] = op.row;
      return "";
    case "count":
      if (!at(op.count, Infinity) || !at(op.offset, Infinity)) break;
      return "";
    case "reset":
      rows.length = 0;
      return "";
    default:
      return "";
  }
  return `operation ${JSON.stringify({ ...op, row: op.row ? "…" : undefined })} does not fit ${rows.length} rows`;
}

/**
 * LiveWindow is a window subscription of a KubegateClient: a page of the
 * rows of one resource's matching objects, in a sort order, that the
 * gateway keeps equal to "filter, sort, take limit rows from offset" as
 * objects change (docs/protocol.md, "Windows"). Create it with
 * client.window. Its fields are the client's: read them, do not change
 * them (the rows included).
 */
export class LiveWindow extends Emitter {
  constructor(guard, client, id, request, range) {
    if (guard !== INTERNAL) throw new TypeError("use KubegateClient.window to create a LiveWindow");
    super();
    /** The window's id on the socket. */
    this.id = id;
    /** The subscribe request's fields (resource, selectors, sort, order, filter), without id and range. */
    this.request = request;
    /** The window's rows, in order: rows[0] is the offset-th matching row. */
    this.rows = [];
    /** How many rows match the window's filter in all, from the last count operation. */
    this.count = 0;
    /** The rank of rows[0] among the matching rows, from the last count operation. */
    this.offset = 0;
    /** The most rows the window holds, as last asked for. */
    this.limit = range.limit;
    /** The cursor token of the window's first row, from the last WINDOW frame that carried one; "" before. */
    this.cursor = "";
    /** The resourceVersion the window reflects, from the last WINDOW frame; "" before. */
    this.rv = "";
    /** Whether the first WINDOW frame since the window was last (re)subscribed was applied: rows are the window, not what it was before a reconnect. */
    this.synced = false;
    /** "pending", "subscribing", "active", "retrying" or "ended". */
    this.state = "pending";
    /** The ack's resource ({group, version, resource, kind, namespaced}), once acknowledged. */
    this.resource = null;
    /** The namespaces a cluster-wide window was narrowed to (from the ack), or null. */
    this.namespaces = null;
    /** The rows' columns, from the ack. */
    this.columns = null;
    /** The sort key and order as the gateway understood them, from the ack. */
    this.sort = "";
    this.order = "";
    this[INTERNAL] = {
      client,
      sentOn: null,
      started: false,
      attempt: 0,
      timer: 0,
      // Where to place the window when it is (re)subscribed: {offset} or
      // {cursor}, as the caller last asked. A window placed by cursor is
      // reopened at the last cursor received, one placed by offset at
      // the same offset (docs/protocol.md, "Resuming and falling behind").
      place: range.cursor !== undefined ? { cursor: range.cursor } : { offset: range.offset ?? 0 },
      moveAfterAck: false, // move() was called after the subscribe went out, before its ack
      fresh: false, // acknowledged, its first WINDOW frame not applied yet
      applied: false, // a WINDOW frame was applied at least once
    };
  }

  /**
   * move places the window at offset or at cursor (neither: offset 0),
   * with a new limit if given. The gateway answers with the operations
   * that take rows to the new range; moves sent faster than it writes
   * are merged, so only the last one counts.
   */
  move(range = {}) {
    checkRange(range);
    const internal = this[INTERNAL];
    if (this.state === "ended") return;
    internal.place = range.cursor !== undefined ? { cursor: range.cursor } : { offset: range.offset ?? 0 };
    if (range.limit !== undefined) this.limit = range.limit;
    internal.client[MOVE](this);
  }

  /** close ends the window; no event follows but "ended". */
  close() {
    this[INTERNAL].client[UNSUBSCRIBE](this);
  }
}

/**
 * KubegateClient is a connection to a gateway's /ws endpoint that carries
 * any number of subscriptions, reconnects and resumes them.
 */
export class KubegateClient extends Emitter {
  #url; // ws: or wss: URL of the endpoint
  #probeURL; // the same as http: or https:
  #WebSocket;
  #webSocketOptions;
  #token; // string, function or undefined
  #backoff;
  #random;
  #probe;
  #fetch;
  #sock = null; // the current socket, or null
  #state = "idle";
  #attempt = 0; // failed connection attempts since the last healthy connection
  #reconnectTimer = 0;
  #healthyTimer = 0;
  #gen = 0; // bumped by every new attempt and by close(): a probe answer for an older attempt is dropped
  #subs = new Map(); // id → Subscription, every subscription not ended
  #closing = new Set(); // ids unsubscribed on the current socket whose answer has not come yet
  #nextId = 0;

  /**
   * @param url the gateway's /ws endpoint: ws:, wss:, http: or https:, or
   *   a path resolved against the page's location in a browser.
   */
  constructor(url, options = {}) {
    super();
    const u = new URL(url, globalThis.location?.href);
    if (u.protocol === "http:" || u.protocol === "https:") u.protocol = u.protocol === "http:" ? "ws:" : "wss:";
    if (u.protocol !== "ws:" && u.protocol !== "wss:") throw new TypeError(`kubegate: ${url}: not a ws:, wss:, http: or https: URL`);
    this.#url = u.href;
    const p = new URL(u.href);
    p.protocol = u.protocol === "ws:" ? "http:" : "https:";
    this.#probeURL = p.href;
    this.#WebSocket = options.WebSocket ?? globalThis.WebSocket;
    if (typeof this.#WebSocket !== "function") {
      throw new TypeError("kubegate: no WebSocket implementation: pass one as the WebSocket option (in Node, the ws package's WebSocket)");
    }
    this.#webSocketOptions = options.webSocketOptions;
    this.#token = options.token;
    this.#backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    const b = this.#backoff;
    if (!(b.initialMs > 0 && b.maxMs >= b.initialMs && b.factor >= 1 && b.jitter >= 0 && b.jitter <= 1 && b.resetAfterMs >= 0)) {
      throw new RangeError("kubegate: backoff needs initialMs > 0, maxMs >= initialMs, factor >= 1, 0 <= jitter <= 1, resetAfterMs >= 0");
    }
    this.#random = options.random ?? Math.random;
    this.#fetch = options.fetch ?? globalThis.fetch?.bind(globalThis);
    this.#probe = options.probe ?? true;
    /** Counters: messages and frames received, RESETs, reconnects, and the longest time one message took to handle. */
    this.stats = { messages: 0, frames: 0, resets: 0, reconnects: 0, maxMessageMs: 0, slowMessages: 0 };
  }

  /** The connection's state: idle, connecting, open, reconnecting, unauthorized, failed or closed. */
  get state() {
    return this.#state;
  }

  /** The subscriptions that have not ended, by id. Do not change the Map. */
  get subscriptions() {
    return this.#subs;
  }

  /**
   * connect opens the socket, or reconnects at once after close(), a final
   * failure or while waiting to reconnect. Subscriptions made before are
   * sent when it opens.
   */
  connect() {
    if (this.#state === "connecting" || this.#state === "open") return;
    cancelTimer(this.#reconnectTimer);
    this.#reconnectTimer = 0;
    if (this.#state !== "reconnecting") this.#attempt = 0;
    this.#open();
  }

  /**
   * close closes the socket and stops reconnecting. Subscriptions and their
   * state are kept: connect() resumes them.
   */
  close(code = 1000, reason = "client closed") {
    this.#gen++;
    cancelTimer(this.#reconnectTimer);
    this.#reconnectTimer = 0;
    this.#abandon(code, reason);
    this.#setState("closed", {});
  }

  /**
   * setToken changes the bearer token (a string, or a function called at
   * every connection attempt). A connected client reconnects with it at
   * once and resumes its subscriptions; one that stopped on 401 connects.
   */
  setToken(token) {
    this.#token = token;
    if (this.#state === "idle" || this.#state === "closed") return;
    cancelTimer(this.#reconnectTimer);
    this.#reconnectTimer = 0;
    this.#abandon(1000, "new token");
    this.#attempt = 0;
    this.#open();
  }

  /**
   * subscribe adds a subscription and sends it when the socket is open.
   * request holds the protocol's subscribe fields; id defaults to a
   * generated one, and resourceVersion, if given, resumes from it. handlers
   * maps event names to listeners, as sub.on would add them. With options
   * {keepObjects: false} the subscription keeps no objects (objects stays
   * empty; events still carry each object): for a caller that only
   * follows changes, so that memory does not grow with what changed.
   */
  subscribe(request, handlers = {}, options = {}) {
    if (!request || typeof request.resource !== "string" || request.resource === "") {
      throw new TypeError("kubegate: subscribe needs a resource");
    }
    const { id: wanted, resourceVersion, type: _type, ...fields } = request;
    if (fields.limit !== undefined) throw new TypeError("kubegate: a request with a limit is a window: use client.window");
    const id = this.#newId(wanted, "sub");
    const sub = new Subscription(INTERNAL, this, id, Object.freeze(fields));
    sub[INTERNAL].keepObjects = options.keepObjects !== false;
    if (resourceVersion && resourceVersion !== "0") {
      // The caller kept the state that goes with this point.
      sub.rv = String(resourceVersion);
      sub.synced = true;
    }
    for (const [type, fn] of Object.entries(handlers)) sub.on(type, fn);
    this.#subs.set(id, sub);
    this.#sendSubscribe(sub);
    return sub;
  }

  /**
   * window adds a window subscription (docs/protocol.md, "Windows") and
   * sends it when the socket is open. request holds the subscribe fields
   * (resource, namespace, labelSelector, fieldSelector, sort, order,
   * filter) and the window's range: limit (default 50), and offset or
   * cursor; id defaults to a generated one. handlers maps event names to
   * listeners, as win.on would add them.
   */
  window(request, handlers = {}) {
    if (!request || typeof request.resource !== "string" || request.resource === "") {
      throw new TypeError("kubegate: window needs a resource");
    }
    const { id: wanted, type: _type, limit = 50, offset, cursor, ...fields } = request;
    for (const f of ["resourceVersion", "resyncPeriod", "sendInitialEvents"]) {
      if (fields[f] !== undefined) throw new TypeError(`kubegate: ${f} does not apply to a window`);
    }
    checkRange({ limit, offset, cursor });
    const id = this.#newId(wanted, "win");
    const win = new LiveWindow(INTERNAL, this, id, Object.freeze(fields), { limit, offset, cursor });
    for (const [type, fn] of Object.entries(handlers)) win.on(type, fn);
    this.#subs.set(id, win);
    this.#sendSubscribe(win);
    return win;
  }

  // newId returns wanted, checked, or a free id with prefix.
  #newId(wanted, prefix) {
    if (wanted === undefined) {
      let id;
      do id = `${prefix}-${++this.#nextId}`;
      while (this.#subs.has(id) || this.#closing.has(id));
      return id;
    }
    if (typeof wanted !== "string" || wanted === "") throw new TypeError("kubegate: a subscription id is a non-empty string");
    if (this.#subs.has(wanted)) throw new Error(`kubegate: subscription id ${JSON.stringify(wanted)} is in use`);
    return wanted;
  }

  /**
   * dispatch handles a server frame (a batch included) as if it had
   * arrived on the socket: for replaying recorded frames and for tests.
   */
  dispatch(frame) {
    for (const f of frame.type === "batch" ? frame.events || [] : [frame]) {
      if (f && typeof f === "object") this.#frame(f);
    }
  }

  // MOVE sends a window's move, or leaves it for when it can be sent: a
  // window not yet sent carries its place in its subscribe, and one whose
  // subscribe is not yet acknowledged sends the move after the ack.
  [MOVE](win) {
    const internal = win[INTERNAL];
    if (!internal.sentOn || internal.sentOn !== this.#sock) return;
    if (win.state !== "active") {
      internal.moveAfterAck = true;
      return;
    }
    this.#send({ type: "window", id: win.id, ...internal.place, limit: win.limit });
  }

  [UNSUBSCRIBE](sub) {
    if (this.#subs.get(sub.id) !== sub) return;
    this.#subs.delete(sub.id);
    const internal = sub[INTERNAL];
    cancelTimer(internal.timer);
    internal.timer = 0;
    if (internal.sentOn && internal.sentOn === this.#sock && this.#send({ type: "unsubscribe", id: sub.id })) {
      this.#closing.add(sub.id);
    }
    internal.sentOn = null;
    sub.state = "ended";
    emit(sub, "ended", { status: null });
  }

  // ---- connection ----------------------------------------------------------

  #setState(state, detail) {
    this.#state = state;
    emit(this, "status", { state, ...detail });
  }

  #currentToken() {
    return typeof this.#token === "function" ? this.#token() : this.#token;
  }

  #open() {
    const gen = ++this.#gen;
    const token = this.#currentToken() || "";
    const protocols = [PROTOCOL];
    if (token) protocols.push(tokenProtocol(token));
    let sock;
    try {
      sock = this.#webSocketOptions === undefined
        ? new this.#WebSocket(this.#url, protocols)
        : new this.#WebSocket(this.#url, protocols, this.#webSocketOptions);
    } catch (error) {
      this.#setState("failed", { error });
      return;
    }
    this.#sock = sock;
    let opened = false;
    this.#setState("connecting", {});
    sock.onopen = () => {
      if (this.#sock !== sock) return;
      opened = true;
      // Timers are set before the status event: a listener that calls
      // close() or setToken() clears them.
      this.#healthyTimer = setTimeout(() => {
        this.#healthyTimer = 0;
        this.#attempt = 0;
      }, this.#backoff.resetAfterMs);
      this.#setState("open", {});
      for (const sub of this.#subs.values()) this.#sendSubscribe(sub);
    };
    sock.onmessage = (m) => {
      if (this.#sock === sock) this.#receive(m.data);
    };
    // An error is followed by a close event, which decides what to do.
    // (ws throws an "error" event that has no listener.)
    sock.onerror = () => {};
    sock.onclose = (ev) => {
      if (this.#sock !== sock) return;
      this.#dropSocket();
      const detail = { code: ev.code, reason: ev.reason || "" };
      if (opened || !this.#probe || !this.#fetch) {
        this.#afterClose(detail);
        return;
      }
      // A browser does not show a refused handshake's HTTP status, so ask
      // for it: 401 and 403 are final, anything else is retried.
      this.#probeHandshake(token).then((answer) => {
        if (gen !== this.#gen) return; // close(), setToken() or connect() since
        if (answer && answer.code === 401) this.#setState("unauthorized", { ...detail, status: answer.status });
        else if (answer && answer.code === 403) this.#setState("failed", { ...detail, status: answer.status });
        else this.#afterClose(detail);
      });
    };
  }

  // afterClose decides, from the close code, whether and when to reconnect.
  #afterClose(detail) {
    if (FINAL_CLOSE_CODES.has(detail.code)) {
      this.#setState("failed", detail);
      return;
    }
    this.#retry(detail, THROTTLE_CLOSE_CODES.has(detail.code));
  }

  #retry(detail, throttled) {
    const delayMs = backoffDelay(throttled ? Infinity : this.#attempt, this.#backoff, this.#random);
    this.#attempt++;
    this.stats.reconnects++;
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = 0;
      this.#open();
    }, delayMs);
    this.#setState("reconnecting", { ...detail, delayMs });
  }

  // probeHandshake asks the endpoint over plain HTTP(S), with the same
  // credentials, for the status a refused handshake got. It resolves to
  // {code, status} or, when the gateway cannot be reached, null.
  async #probeHandshake(token) {
    const headers = { ...(this.#webSocketOptions?.headers || {}) };
    if (token) headers.Authorization = "Bearer " + token;
    // A gateway that accepts the connection but never answers must not
    // hold the client up: after 10s it counts as unreachable.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 10000);
    try {
      const res = await this.#fetch(this.#probeURL, { headers, credentials: "same-origin", signal: abort.signal });
      let status = null;
      try {
        status = await res.json();
      } catch {
        // not a Status body
      }
      if (!status || status.kind !== "Status") {
        status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: `${res.status} ${res.statusText}`, code: res.status };
      }
      return { code: res.status, status };
    } catch {
      return null;
    } finally {
      cancelTimer(timer);
    }
  }

  // abandon closes the current socket without waiting for its close event.
  #abandon(code, reason) {
    const sock = this.#sock;
    if (!sock) return;
    this.#dropSocket();
    sock.onopen = sock.onmessage = sock.onclose = null;
    try {
      sock.close(code, reason);
    } catch {
      // already closing
    }
  }

  // dropSocket forgets the current socket: the gateway forgets its
  // subscriptions with it, so each waits to be sent on the next one.
  #dropSocket() {
    this.#sock = null;
    cancelTimer(this.#healthyTimer);
    this.#healthyTimer = 0;
    this.#closing.clear();
    for (const sub of this.#subs.values()) {
      const internal = sub[INTERNAL];
      cancelTimer(internal.timer);
      internal.timer = 0;
      internal.sentOn = null;
      sub.state = "pending";
    }
  }

  #send(frame) {
    const sock = this.#sock;
    if (!sock || sock.readyState !== 1) return false;
    sock.send(JSON.stringify(frame));
    return true;
  }

  // sendSubscribe sends sub's subscribe, resuming from its rv when it has
  // one and starting over (a fresh snapshot) when it has none.
  #sendSubscribe(sub) {
    const internal = sub[INTERNAL];
    if (!this.#sock || this.#sock.readyState !== 1 || internal.sentOn === this.#sock) return;
    // The id is still the unsubscribed one's until its answer: wait for it.
    if (this.#closing.has(sub.id)) return;
    const req = { type: "subscribe", id: sub.id, ...sub.request };
    if (sub instanceof LiveWindow) {
      // A window does not resume: it is sent whole again, where it was.
      req.limit = sub.limit;
      const { place } = internal;
      if (place.cursor !== undefined) req.cursor = place.cursor;
      else if (place.offset > 0) req.offset = place.offset;
      internal.moveAfterAck = false;
      sub.synced = false;
    } else if (sub.rv) {
      req.resourceVersion = sub.rv;
    } else if (internal.started) {
      // Cut off before its snapshot ended (or after a RESET): what it
      // holds has no resume point, and the snapshot replaces it.
      sub.objects.clear();
      sub.synced = false;
      emit(sub, "reset", { reason: "Resubscribe", frame: null });
    }
    internal.sentOn = this.#sock;
    sub.state = "subscribing";
    this.#send(req);
  }

  // ---- frames --------------------------------------------------------------

  #receive(data) {
    const start = now();
    this.stats.messages++;
    let frame;
    try {
      frame = JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data));
    } catch (error) {
      emit(this, "error", { status: null, frame: null, error });
      return;
    }
    if (!frame || typeof frame !== "object") {
      emit(this, "error", { status: null, frame: null, error: new TypeError("kubegate: a message that is not a JSON object") });
      return;
    }
    this.dispatch(frame);
    const ms = now() - start;
    this.stats.maxMessageMs = Math.max(this.stats.maxMessageMs, ms);
    if (ms > SLOW_MESSAGE_MS) this.stats.slowMessages++;
  }

  // current returns the subscription a frame with id belongs to: one whose
  // subscribe went out on the current socket.
  #current(id) {
    const sub = id === undefined ? undefined : this.#subs.get(id);
    return sub && sub[INTERNAL].sentOn && sub[INTERNAL].sentOn === this.#sock ? sub : null;
  }

  // Frames are routed by id to the subscription that owns it. A new kind of
  // stream would add its own request and frame types here.
  #frame(f) {
    this.stats.frames++;
    emit(this, "frame", f);
    switch (f.type) {
      case "ack":
        if (f.request === "unsubscribe") this.#unsubscribed(f.id);
        else this.#ack(f);
        return;
      case "error":
        this.#error(f);
        return;
      case "ADDED":
      case "MODIFIED":
      case "DELETED":
      case "SYNC":
        this.#objectEvent(f);
        return;
      case "WINDOW": {
        const win = this.#current(f.id);
        if (win instanceof LiveWindow) this.#windowFrame(win, f);
        return;
      }
      case "END_OF_SNAPSHOT": {
        const sub = this.#current(f.id);
        if (!(sub instanceof Subscription)) return;
        sub.rv = f.rv;
        sub.synced = true;
        emit(sub, "synced", { rv: f.rv });
        return;
      }
      case "RESET": {
        const sub = this.#current(f.id);
        if (!(sub instanceof Subscription)) return;
        // Drop everything: a fresh snapshot follows.
        sub.objects.clear();
        sub.rv = "";
        sub.synced = false;
        this.stats.resets++;
        emit(sub, "reset", { reason: f.reason || "", frame: f });
        return;
      }
    }
    // Frame types this client does not know are only seen by "frame" listeners.
  }

  #ack(f) {
    const sub = this.#current(f.id);
    if (!sub) return;
    sub.state = "active";
    sub[INTERNAL].started = true;
    sub.resource = f.resource || null;
    sub.namespaces = f.namespaces || null;
    sub.columns = f.columns || null;
    sub[INTERNAL].attempt = 0;
    if (sub instanceof LiveWindow) {
      sub.sort = f.sort || "";
      sub.order = f.order || "";
      // The first WINDOW frame holds the whole window: it replaces the
      // rows held from before a reconnect.
      sub[INTERNAL].fresh = true;
      emit(sub, "ack", f);
      if (sub[INTERNAL].moveAfterAck) {
        sub[INTERNAL].moveAfterAck = false;
        this[MOVE](sub);
      }
      return;
    }
    // Without a snapshot, what follows the ack is live.
    if (sub.request.sendInitialEvents === false) sub.synced = true;
    emit(sub, "ack", f);
  }

  // windowFrame applies a WINDOW frame's operations to win's rows, in
  // order, as splices, then tells the listeners: "reset" (when the frame
  // dropped the rows held) before "change". A frame whose operations do
  // not fit the rows held is a gateway fault: the client reports it and
  // subscribes the window again, which sends it whole.
  #windowFrame(win, f) {
    const internal = win[INTERNAL];
    const ops = Array.isArray(f.ops) ? f.ops : [];
    const first = internal.fresh;
    let reset = null;
    if (first) {
      internal.fresh = false;
      if (internal.applied) reset = "Resubscribe";
      win.rows = [];
    }
    const rows = win.rows;
    for (const op of ops) {
      const bad = applyOp(rows, op);
      if (bad) {
        emit(this, "error", { status: null, frame: f, error: new TypeError(`kubegate: window ${win.id}: ${bad}`) });
        this.#resubscribe(win);
        return;
      }
      switch (op.op) {
        case "count":
          win.count = op.count;
          win.offset = op.offset;
          break;
        case "reset":
          reset = op.reason || "";
          if (op.reason) this.stats.resets++;
          break;
      }
    }
    if (f.rv !== undefined) win.rv = String(f.rv);
    if (f.cursor) {
      win.cursor = f.cursor;
      // A window placed by cursor reopens at its latest first row. (A
      // frame of changes written before a move(cursor) reached the
      // gateway still names the first row before the move: a reconnect
      // right then reopens the window there.)
      if (internal.place.cursor !== undefined) internal.place = { cursor: f.cursor };
    }
    internal.applied = true;
    win.synced = true;
    if (reset !== null) emit(win, "reset", { reason: reset, frame: f });
    emit(win, "change", { ops, frame: f, first });
  }

  // resubscribe subscribes sub again on the current socket: unsubscribe,
  // and subscribe once the gateway has answered that (see #unsubscribed).
  #resubscribe(sub) {
    const internal = sub[INTERNAL];
    if (internal.sentOn && internal.sentOn === this.#sock && this.#send({ type: "unsubscribe", id: sub.id })) {
      this.#closing.add(sub.id);
    }
    internal.sentOn = null;
    sub.state = "pending";
    this.#sendSubscribe(sub);
  }

  // objectEvent applies an event to the subscription's objects: the
  // frame's object, or its row for a subscription with rows.
  #objectEvent(f) {
    const sub = this.#current(f.id);
    const object = f.object ?? f.row;
    if (!(sub instanceof Subscription) || !object || typeof object !== "object") return;
    const key = objectKey(object);
    const previous = sub.objects.get(key);
    if (f.type === "DELETED") sub.objects.delete(key);
    else if (sub[INTERNAL].keepObjects) sub.objects.set(key, object);
    // A snapshot's ADDED frames come in no resourceVersion order and SYNC
    // is not a change: neither is a resume point (docs/protocol.md).
    const live = sub.synced && f.type !== "SYNC";
    if (live) sub.rv = f.rv;
    const ev = { type: f.type, key, object, previous, rv: f.rv, live };
    emit(sub, f.type.toLowerCase(), ev);
    emit(sub, "change", ev);
  }

  // unsubscribed takes the answer to an unsubscribe: the id is free, and a
  // subscription waiting for it goes out.
  #unsubscribed(id) {
    if (!this.#closing.delete(id)) return;
    const sub = this.#subs.get(id);
    if (sub) this.#sendSubscribe(sub);
  }

  #error(f) {
    const status = f.status || {};
    if (f.request === "unsubscribe") {
      this.#unsubscribed(f.id);
      emit(this, "error", { status, frame: f });
      return;
    }
    const sub = f.request === "subscribe" || f.request === "window" || f.ended ? this.#current(f.id) : null;
    if (!sub) {
      emit(this, "error", { status, frame: f });
      return;
    }
    if (f.request === "window") {
      // A refused move: the window stays as it was.
      emit(sub, "error", { status, frame: f, final: false });
      return;
    }
    const internal = sub[INTERNAL];
    if (status.code === 401) {
      // The socket's token is no longer valid: keep the subscription and
      // its resume point, and reconnect, which authenticates again.
      emit(sub, "error", { status, frame: f, final: false });
      this.#reauthenticate();
      return;
    }
    const retry = f.request === "subscribe" ? RETRY_SUBSCRIBE_CODES.has(status.code) : RETRY_ENDED_CODES.has(status.code);
    if (retry) {
      const retryInMs = backoffDelay(internal.attempt++, this.#backoff, this.#random);
      internal.sentOn = null;
      sub.state = "retrying";
      internal.timer = setTimeout(() => {
        internal.timer = 0;
        this.#sendSubscribe(sub);
      }, retryInMs);
      emit(sub, "error", { status, frame: f, final: false, retryInMs });
      return;
    }
    // Refused for good, or ended for good: the objects stay as they were.
    this.#subs.delete(sub.id);
    internal.sentOn = null;
    sub.state = "ended";
    emit(sub, "error", { status, frame: f, final: true });
    emit(sub, "ended", { status });
  }

  #reauthenticate() {
    if (!this.#sock) return;
    this.#gen++;
    this.#abandon(1000, "token no longer valid");
    this.#retry({ code: 1000, reason: "token no longer valid" }, false);
  }
}
