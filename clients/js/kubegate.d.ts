// Declarations for kubegate.js, the client of kubegate's WebSocket
// protocol kubegate.v1. Written by hand: keep them in step with the code
// (test/types.test.js checks that every name declared here exists in the
// module, and the other way round).

/** The WebSocket subprotocol the client offers. */
export declare const PROTOCOL: "kubegate.v1";

/** The prefix of the subprotocol that carries a bearer token. */
export declare const TOKEN_PROTOCOL_PREFIX: "base64url.bearer.authorization.k8s.io.";

/** Reconnect timing. */
export interface Backoff {
  /** The first delay, before jitter. Default 500. */
  initialMs: number;
  /** No delay is longer. Default 30000. */
  maxMs: number;
  /** Each failed attempt multiplies the delay by this. Default 2. */
  factor: number;
  /** A delay is shortened by up to this fraction (0 to 1), at random. Default 0.5. */
  jitter: number;
  /** A connection that stays open this long resets the delay to initialMs. Default 10000. */
  resetAfterMs: number;
}

export declare const DEFAULT_BACKOFF: Readonly<Backoff>;

/**
 * The delay before reconnect attempt number attempt (0 for the first):
 * initialMs * factor^attempt, at most maxMs, shortened by a random
 * fraction of up to jitter. attempt Infinity gives the longest delay.
 */
export declare function backoffDelay(attempt: number, backoff?: Partial<Backoff>, random?: () => number): number;

/** The subprotocol carrying token: the prefix and the token in unpadded base64url. */
export declare function tokenProtocol(token: string): string;

/** "namespace/name", or "name" for a cluster-scoped object (or row). */
export declare function objectKey(object: KubeObject | Row): string;

/**
 * A duration in milliseconds as kubectl writes it (apimachinery's
 * duration.HumanDuration): 45s, 3m12s, 5h, 2d3h, 40d, 3y12d.
 */
export declare function humanDuration(ms: number): string;

/**
 * A cell as kubectl shows it at now (milliseconds since the epoch,
 * default Date.now()): a RelativeCell as prefix + humanDuration(now -
 * since) + suffix, null as "", anything else as text.
 */
export declare function cellText(cell: Cell | undefined, now?: number): string;

/** The most rows a window may hold. */
export declare const MAX_WINDOW_LIMIT: 1000;

/** An object as the apiserver serves it (metadata.managedFields stripped). */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

/**
 * A row, what a subscription with "as": "Table" receives in place of each
 * object (docs/protocol.md, "Rows").
 */
export interface Row {
  name: string;
  /** Absent for cluster-scoped resources. */
  namespace?: string;
  resourceVersion: string;
  uid: string;
  /** One per column of the ack, in order. */
  cells: Cell[];
  /** The Table row conditions, such as Completed for a finished pod. */
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
}

/** A cell: shown as it is, or a RelativeCell. */
export type Cell = string | number | boolean | null | RelativeCell;

/** A cell shown as prefix + the time from since to now as kubectl writes it + suffix. */
export interface RelativeCell {
  /** An RFC 3339 time. */
  since: string;
  prefix?: string;
  suffix?: string;
}

/** A column of a subscription with rows, from its ack. */
export interface Column {
  name: string;
  type: string;
  format: string;
  description: string;
  /** 1 for the columns kubectl -o wide adds. */
  priority: number;
  /** The column's cells may be RelativeCells. */
  relative?: boolean;
}

/** A Kubernetes metav1.Status, as in error frames and refused handshakes. */
export interface Status {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, unknown>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: Record<string, unknown>;
  code: number;
}

/** The resource a subscription was acknowledged for. */
export interface ResourceInfo {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
}

/** One operation of a WINDOW frame, applied to the window's rows like splice. */
export type WindowOp =
  | { op: "insert"; pos: number; row: Row }
  | { op: "remove"; pos: number }
  | { op: "move"; pos: number; to: number; row: Row }
  | { op: "update"; pos: number; row: Row }
  | { op: "count"; count: number; offset: number }
  | { op: "reset"; reason?: "Overflow" | "Reauthorized" };

/** A frame from the gateway (docs/protocol.md, "Server → client"). */
export interface Frame {
  type: string;
  id?: string;
  rv?: string;
  object?: KubeObject;
  row?: Row;
  /** WINDOW frames. */
  ops?: WindowOp[];
  cursor?: string;
  /** A window's ack: its sort key and order as the gateway understood them. */
  sort?: string;
  order?: "asc" | "desc";
  request?: "subscribe" | "unsubscribe" | "window";
  resource?: ResourceInfo;
  namespaces?: string[];
  columns?: Column[];
  status?: Status;
  ended?: boolean;
  reason?: string;
  events?: Frame[];
  [field: string]: unknown;
}

/** The fields of a subscribe request (docs/protocol.md, "subscribe"). */
export interface SubscribeRequest {
  /** As kubectl accepts it: pods, po, deployments.apps, CRD plurals. */
  resource: string;
  /** Default: generated (sub-1, sub-2, …). */
  id?: string;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** A Go duration such as "30s": re-send every object as SYNC this often. */
  resyncPeriod?: string;
  /** Resume from this point; the caller holds the state that goes with it. */
  resourceVersion?: string;
  /** Default true. false: live changes only, no snapshot. */
  sendInitialEvents?: boolean;
  /** "Table": rows instead of objects (Subscription.objects holds Rows). */
  as?: "Table";
  /** Other fields are sent as they are. */
  [field: string]: unknown;
}

/** A window's range: offset or cursor (neither: offset 0), and limit. */
export interface WindowRange {
  /** The rank (0-based) of the window's first row among the matching rows. */
  offset?: number;
  /** Instead of offset: a cursor token, from LiveWindow.cursor or a REST sorted list's continue. */
  cursor?: string;
  /** Rows in the window, 1 to 1000. */
  limit?: number;
}

/** The fields of a window subscription (docs/protocol.md, "Windows"). */
export interface WindowRequest extends WindowRange {
  resource: string;
  /** Default: generated (win-1, win-2, …). */
  id?: string;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** A column name (any case), metadata.name, metadata.namespace, metadata.creationTimestamp or a selectable field. Default: metadata.namespace. */
  sort?: string;
  order?: "asc" | "desc";
  /** Text a row's name or one of its cells must contain, ignoring case. */
  filter?: string;
  /** Default 50. */
  limit?: number;
  /** Other fields are sent as they are. */
  [field: string]: unknown;
}

export type ConnectionState = "idle" | "connecting" | "open" | "reconnecting" | "unauthorized" | "failed" | "closed";

export interface ConnectionStatus {
  state: ConnectionState;
  /** The close code of the socket that ended (1006 when it was dropped or refused). */
  code?: number;
  reason?: string;
  /** Why a handshake was refused (unauthorized: 401, failed: 403). */
  status?: Status;
  /** When reconnecting: the delay before the next attempt. */
  delayMs?: number;
  /** When failed because the WebSocket could not be constructed. */
  error?: unknown;
}

/** T is Row for a subscription with "as": "Table". */
export interface ObjectEvent<T extends KubeObject | Row = KubeObject> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "SYNC";
  key: string;
  /** The frame's object, or its row. */
  object: T;
  /** What objects held under key before. */
  previous: T | undefined;
  rv: string;
  /** A change after the snapshot (false for the snapshot's ADDED frames and for SYNC). */
  live: boolean;
}

export interface WindowChangeEvent {
  /** The frame's operations, as applied to rows. */
  ops: WindowOp[];
  frame: Frame;
  /** The window's first frame since it was (re)subscribed: rows are now the whole window. */
  first: boolean;
}

export interface ResetEvent {
  /** Overflow, Expired, Reauthorized (from the gateway), or Resubscribe (a subscribe without resume point). */
  reason: string;
  /** The RESET frame; null for Resubscribe. */
  frame: Frame | null;
}

export interface SubscriptionErrorEvent {
  status: Status;
  frame: Frame;
  /** The subscription ended (refused or ended for good). */
  final: boolean;
  /** When the subscribe is retried: the delay before it. */
  retryInMs?: number;
}

export interface ClientErrorEvent {
  /** null when the message was not JSON. */
  status: Status | null;
  frame: Frame | null;
  error?: unknown;
}

export interface SubscriptionEvents<T extends KubeObject | Row = KubeObject> {
  ack: Frame;
  added: ObjectEvent<T>;
  modified: ObjectEvent<T>;
  deleted: ObjectEvent<T>;
  sync: ObjectEvent<T>;
  /** Every ADDED, MODIFIED, DELETED and SYNC. */
  change: ObjectEvent<T>;
  reset: ResetEvent;
  synced: { rv: string };
  error: SubscriptionErrorEvent;
  /** status is null after unsubscribe(). */
  ended: { status: Status | null };
}

export interface WindowEvents {
  ack: Frame;
  /** A WINDOW frame was applied. */
  change: WindowChangeEvent;
  /**
   * Before change, when the frame dropped the rows held: Overflow or
   * Reauthorized (the gateway's reset operation), "" (a move that kept
   * no row), or Resubscribe (the window's first frame after it was
   * subscribed again, which replaces what it held).
   */
  reset: ResetEvent;
  /** An error frame for the window; final false for a refused move, which leaves the window as it was. */
  error: SubscriptionErrorEvent;
  /** status is null after close(). */
  ended: { status: Status | null };
}

export type WindowHandlers = { [E in keyof WindowEvents]?: (ev: WindowEvents[E]) => void };

export interface ClientEvents {
  status: ConnectionStatus;
  /** Error frames that belong to no subscription, messages that are not JSON, and WINDOW frames whose operations do not fit the rows held (the window is then subscribed again). */
  error: ClientErrorEvent;
  /** Every frame received (batches unpacked), before it is handled. */
  frame: Frame;
}

export type SubscriptionState = "pending" | "subscribing" | "active" | "retrying" | "ended";

export type SubscriptionHandlers<T extends KubeObject | Row = KubeObject> = {
  [E in keyof SubscriptionEvents<T>]?: (ev: SubscriptionEvents<T>[E]) => void;
};

/** T is Row for a subscription with "as": "Table". */
export declare class Subscription<T extends KubeObject | Row = KubeObject> {
  private constructor();
  readonly id: string;
  readonly request: Readonly<Omit<SubscribeRequest, "id" | "resourceVersion">>;
  /** The current objects (rows for "as": "Table") by objectKey. */
  readonly objects: ReadonlyMap<string, T>;
  /** The resume point; "" when none. */
  readonly rv: string;
  readonly synced: boolean;
  readonly state: SubscriptionState;
  readonly resource: ResourceInfo | null;
  readonly namespaces: string[] | null;
  /** The columns of a subscription with rows, from the ack; null for objects. */
  readonly columns: Column[] | null;
  on<E extends keyof SubscriptionEvents<T>>(type: E, fn: (ev: SubscriptionEvents<T>[E]) => void): () => void;
  off<E extends keyof SubscriptionEvents<T>>(type: E, fn: (ev: SubscriptionEvents<T>[E]) => void): void;
  unsubscribe(): void;
}

/**
 * A window subscription: a sorted, filtered page of rows that the
 * gateway keeps live. Create it with client.window.
 */
export declare class LiveWindow {
  private constructor();
  readonly id: string;
  readonly request: Readonly<Omit<WindowRequest, "id" | "limit" | "offset" | "cursor">>;
  /** The window's rows in order: rows[0] is the offset-th matching row. */
  readonly rows: readonly Row[];
  /** How many rows match in all. */
  readonly count: number;
  /** The rank of rows[0] among the matching rows. */
  readonly offset: number;
  readonly limit: number;
  /** The cursor token of the first row, from the last WINDOW frame that carried one; "" before. */
  readonly cursor: string;
  /** The resourceVersion the window reflects; "" before its first frame. */
  readonly rv: string;
  /** The first WINDOW frame since the window was last (re)subscribed was applied. */
  readonly synced: boolean;
  readonly state: SubscriptionState;
  readonly resource: ResourceInfo | null;
  readonly namespaces: string[] | null;
  readonly columns: Column[] | null;
  /** The sort key and order from the ack. */
  readonly sort: string;
  readonly order: "asc" | "desc" | "";
  /** Place the window at offset or cursor (neither: offset 0), with a new limit if given. */
  move(range?: WindowRange): void;
  close(): void;
  on<E extends keyof WindowEvents>(type: E, fn: (ev: WindowEvents[E]) => void): () => void;
  off<E extends keyof WindowEvents>(type: E, fn: (ev: WindowEvents[E]) => void): void;
}

export interface SubscribeOptions {
  /** Default true. false: objects stays empty (events still carry each object). */
  keepObjects?: boolean;
}

export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export interface ClientOptions {
  /** A bearer token, or a function called at every connection attempt. Default: none (cookie or anonymous). */
  token?: string | (() => string | null | undefined);
  /** The WebSocket constructor. Default: globalThis.WebSocket. */
  WebSocket?: new (url: string, protocols: string[], options?: any) => WebSocketLike;
  /** A third constructor argument, e.g. the ws package's {headers: {Cookie: …}}. Its headers are also sent by the handshake probe. */
  webSocketOptions?: any;
  backoff?: Partial<Backoff>;
  /** Ask the endpoint over HTTP why a handshake failed (401 and 403 are then final). Default true. */
  probe?: boolean;
  /** For the probe. Default: globalThis.fetch. */
  fetch?: typeof fetch;
  /** The jitter's random source. Default: Math.random. */
  random?: () => number;
}

export interface ClientStats {
  messages: number;
  frames: number;
  resets: number;
  reconnects: number;
  /** The longest handling of one message, in ms. */
  maxMessageMs: number;
  /** Messages whose handling took over 500 ms. */
  slowMessages: number;
}

export declare class KubegateClient {
  constructor(url: string | URL, options?: ClientOptions);
  readonly stats: ClientStats;
  readonly state: ConnectionState;
  /** Subscriptions and windows not ended, by id. */
  readonly subscriptions: ReadonlyMap<string, Subscription | LiveWindow>;
  connect(): void;
  close(code?: number, reason?: string): void;
  setToken(token: ClientOptions["token"]): void;
  subscribe(request: SubscribeRequest & { as: "Table" }, handlers?: SubscriptionHandlers<Row>, options?: SubscribeOptions): Subscription<Row>;
  subscribe(request: SubscribeRequest, handlers?: SubscriptionHandlers, options?: SubscribeOptions): Subscription;
  window(request: WindowRequest, handlers?: WindowHandlers): LiveWindow;
  dispatch(frame: Frame): void;
  on<E extends keyof ClientEvents>(type: E, fn: (ev: ClientEvents[E]) => void): () => void;
  off<E extends keyof ClientEvents>(type: E, fn: (ev: ClientEvents[E]) => void): void;
}
