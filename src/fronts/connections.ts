/**
 * Connection accounting of the standalone server, the same for every
 * engine (Fastify's serverFactory uses createNodeServer too):
 * - at most `maxInFlightPerConnection` requests of one connection are served at once. node's parser
 *   hands every pipelined request of a read to the handler at once, and queues their answers in
 *   memory; a client pipelining megabytes of heads made the gateway hold thousands of exchanges
 *   per connection. Past the bound, the requests already parsed wait (no exchange, no policy, no
 *   upstream call) and the connection is not read any further: TCP back-pressure reaches the
 *   client, whose bytes stay unparsed in its own buffers.
 * - at most `maxPipelinedPerConnection` of those parsed requests waiting. node parses a whole read
 *   (64 KiB) at once, whatever the pause, so a read of small heads leaves hundreds of requests
 *   waiting, each a request and a response object; served a few per turn of the event loop, they
 *   live long enough to be promoted to V8's old generation, and the heap (hence RSS) grew by
 *   100-250 MB under a flood whose live data was 10 MB. Past the bound the connection is closed,
 *   unanswered, with a warning: no ordinary client pipelines that far ahead (browsers and node's
 *   own clients do not pipeline at all), and the requests not answered may be retried
 *   (RFC 9112 section 9.3.2). The address is then refused new connections for
 *   `pipelineOverflowRefuseMs`: each new connection costs the gateway a whole read parsed before it
 *   can be closed, and an attacker that reconnected at once kept the heap growing and the other
 *   clients waiting (hundreds of ms) as much as before. Its new connections are held unread
 *   meanwhile (`holdUnread`), so that it cannot reconnect at once either.
 * - at most `maxConnectionsPerAddress` connections from one client (an IPv4 address or an IPv6
 *   /64, `clientKey`), so one client (holding connections idle, or half-sent heads) cannot take
 *   all of `maxConnections` from the others.
 *   Trusted proxies (`trustedProxies`) are exempt: their connections carry many clients.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import proxyAddr from 'proxy-addr';
import { clientKey } from '../core/client-key.js';

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** What one connection has going: requests being served, and those parsed that wait their turn. */
interface Lane {
  inFlight: number;
  readonly waiting: Array<[IncomingMessage, ServerResponse]>;
  /** True while this lane keeps the socket paused (requests wait). */
  paused: boolean;
  /** A request of this lane closed ('close' listener, the same function for every request of the connection). */
  readonly finished: () => void;
}

const LANE = Symbol('petstore-gateway connection lane');
/** How many of a connection's requests wait for a place of their consumer (src/core/consumer-gate.ts). */
const HELD = Symbol('petstore-gateway held requests');
/** The server event `createNodeServer` emits, with the socket, when it closes a connection past `maxPipelinedPerConnection`. */
export const PIPELINE_OVERFLOW = 'petstore-gateway:pipeline-overflow';
type LaneSocket = Socket & { [LANE]?: Lane; [HELD]?: number };

/** True while a request of this connection waits for its consumer's place: the socket stays paused. */
function held(socket: LaneSocket): boolean {
  return (socket[HELD] ?? 0) > 0;
}

/**
 * A request of this HTTP/1.x connection waits for a place of its consumer: the connection is not
 * read until it no longer does, so the consumer's further requests stay unparsed (TCP
 * back-pressure), whatever else resumes the socket meanwhile. An HTTP/2 stream waits under its
 * own flow control: the session's socket, shared by other streams, is never paused.
 */
export function holdReading(req: IncomingMessage): void {
  if (req.httpVersionMajor === 2) return;
  const socket = req.socket as LaneSocket;
  if (socket[HELD] === undefined) {
    socket.on('resume', () => {
      if (held(socket)) socket.pause();
    });
  }
  socket[HELD] = (socket[HELD] ?? 0) + 1;
  socket.pause();
}

/** The request no longer waits: the connection is read again unless something else holds it. */
export function releaseReading(req: IncomingMessage): void {
  if (req.httpVersionMajor === 2) return;
  const socket = req.socket as LaneSocket;
  const n = (socket[HELD] ?? 0) - 1;
  socket[HELD] = Math.max(0, n);
  if (n > 0 || socket.destroyed) return;
  // The lane pauses the socket too while its own requests wait their turn.
  if (socket[LANE]?.paused === true) return;
  socket.resume();
}

/** What `stopParsing` uses of node's HTTP/1 parser of a server socket (`socket.parser`, not a documented API). */
interface ParserSocket {
  parser?: { onIncoming?: unknown } | null;
}

/**
 * llhttp's "pause the parser" answer to a head (HPE_PAUSED; llhttp.h, on_headers_complete), which
 * node's parser binding hands back to llhttp as is.
 */
const HPE_PAUSED = 21;

/**
 * Stops node's parser on a connection just destroyed, at the next request head. destroy() does not
 * stop the parse of the read in progress: node would make a request and a response object for
 * every head left in it (hundreds in 64 KiB), hand each to the handler, and abort each with an
 * error when the socket closes, all in one turn of the event loop. A head answered HPE_PAUSED ends
 * that parse: node reports it as a parse error of a destroyed socket ('clientError'), which
 * `clientErrorResponse` ignores. Where node has no such parser (HTTP/2, another node), nothing changes.
 */
function stopParsing(socket: Socket): void {
  const parser = (socket as Socket & ParserSocket).parser;
  if (typeof parser?.onIncoming === 'function') parser.onIncoming = () => HPE_PAUSED;
}

/**
 * Wraps `handler` so that at most `limit` requests per connection are served at once; the rest of
 * a pipelined burst waits, and the socket is not read meanwhile. Answers still leave in order
 * (node keeps them in request order), so a waiting request never answers before an earlier one.
 * A connection with more than `maxWaiting` requests waiting is destroyed, and `onOverflow` told.
 *
 * Per request this costs a counter and one listener: the lane and its two functions are made
 * once per connection, as a keep-alive connection carries many requests.
 */
export function boundInFlight(
  limit: number,
  handler: RequestHandler,
  maxWaiting = Infinity,
  onOverflow: (socket: Socket) => void = () => undefined,
): RequestHandler {
  const run = (lane: Lane, req: IncomingMessage, res: ServerResponse) => {
    lane.inFlight++;
    // 'close' comes after 'finish' for an answer sent whole, and alone for one that never
    // finishes (the client left): either way the place is freed. `on`, not `once`: a response
    // closes once, and `once` would wrap the listener in a new function per request.
    res.on('close', lane.finished);
    handler(req, res);
  };
  const open = (socket: Socket): Lane => {
    const next = () => {
      if (lane.inFlight >= limit) return;
      const waiting = lane.waiting.shift();
      if (lane.waiting.length === 0 && lane.paused) {
        // Nothing more waits: read the connection again, before the last one starts, as it may
        // have a body still to read (node keeps the socket paused itself while it must).
        lane.paused = false;
        if (!socket.destroyed && !held(socket)) socket.resume();
      }
      if (waiting !== undefined) run(lane, waiting[0], waiting[1]);
    };
    const lane: Lane = {
      inFlight: 0,
      waiting: [],
      paused: false,
      finished: () => {
        lane.inFlight--;
        // The common case, one request at a time: nothing waits, nothing to resume.
        if (!lane.paused) return;
        // On the next turn of the event loop, not now: an answer that finishes at once (a fast
        // upstream, a denial) would otherwise start the next waiting request in the same chain of
        // callbacks, and one connection's pipeline would hold the loop until it is empty, while
        // other clients' requests sit unread. So each connection starts at most `limit` requests per
        // turn, and other connections and the admin listener get theirs.
        setImmediate(next);
      },
    };
    // A read started by someone else (a body being read, node's own resume on drain) must not
    // parse more of this connection while requests wait: pause again at once. node does the
    // same for its own write back-pressure (onSocketResume in node's _http_server).
    socket.on('resume', () => {
      if (lane.paused) socket.pause();
    });
    return lane;
  };
  return (req, res) => {
    const socket = req.socket as LaneSocket;
    const lane = (socket[LANE] ??= open(socket));
    // The rest of a read parsed after the connection was closed below: nothing will be answered.
    if (socket.destroyed) return;
    if (lane.inFlight < limit) return run(lane, req, res);
    if (lane.waiting.length >= maxWaiting) {
      // Dropping what waits lets it be collected now, while still young (see the top of the file).
      lane.waiting.length = 0;
      socket.destroy();
      stopParsing(socket);
      onOverflow(socket);
      return;
    }
    lane.waiting.push([req, res]);
    lane.paused = true;
    socket.pause();
  };
}

/** What `shareConnections` uses of an accepted socket. */
export interface AcceptedSocket {
  readonly remoteAddress?: string | undefined;
  destroy(): unknown;
  once(event: 'close', listener: () => void): unknown;
}

/** What `shareConnections` uses of a server (node's net, http, https and http2 servers). */
export interface ConnectionSource {
  on(event: 'connection', listener: (socket: AcceptedSocket) => void): unknown;
  on(event: 'listening' | 'close', listener: () => void): unknown;
}

/** What the connection accounting refused or closed so far (the overflow metric reads them). */
export interface ConnectionCounts {
  /** Connections closed past `maxPipelinedPerConnection`. */
  pipelineClosed: number;
  /** Connections refused at the socket while their client was refused after such a close. */
  overflowRefused: number;
  /** Connections refused at the socket past `maxConnectionsPerAddress`. */
  shareRefused: number;
}

const COUNTS = new WeakMap<ConnectionSource, ConnectionCounts>();

/** The counts of the server `shareConnections` accounts for, if it does. */
export function connectionCountsOf(server: object): Readonly<ConnectionCounts> | undefined {
  return COUNTS.get(server as ConnectionSource);
}

/** Most addresses refused at once after an overflow; past it the oldest refusal is lifted early. */
const MAX_REFUSED = 10_000;

/** Why a connection is refused at the socket, if it is. */
type Refusal = 'overflow' | 'share' | undefined;

/**
 * Refuses, at the socket, a connection from a client that already holds `perAddress` of them
 * (the way node refuses one past `maxConnections`: closed without an answer, since nothing of the
 * request has been read), or that `refuse` was told about less than `refuseMs` ago. A client is
 * its IPv4 address or its IPv6 /64 (`clientKey`), as for the brute-force lock: a host that owns a
 * /64 would otherwise take a share, or evade a refusal, per address it connects from.
 *
 * On a node server the refusal happens as the connection is accepted (`refuseAtAccept`), before
 * node makes a socket object for it; a source without node's listening handle gets it in its
 * 'connection' event instead.
 */
export function shareConnections(
  server: ConnectionSource,
  perAddress: number,
  trustedProxies: readonly string[],
  refuseMs = 0,
  now: () => number = () => performance.now(),
): { refuse(address: string | undefined): void; readonly counts: Readonly<ConnectionCounts> } {
  const counts: ConnectionCounts = { pipelineClosed: 0, overflowRefused: 0, shareRefused: 0 };
  COUNTS.set(server, counts);
  const trusted = trustedProxies.length === 0 ? () => false : proxyAddr.compile([...trustedProxies]);
  // Client key (clientKey) -> connections open from it.
  const open = new Map<string, number>();
  // How many clients hold their whole share: with none, and no refusal, no address needs a look.
  let full = 0;
  // Client key (clientKey) -> until when its connections are refused (in insertion order, oldest first).
  const refused = new Map<string, number>();
  const isRefused = (key: string): boolean => {
    if (refused.size === 0) return false;
    const until = refused.get(key);
    if (until === undefined) return false;
    if (until > now()) return true;
    refused.delete(key);
    return false;
  };
  /** Whether a connection from `address` is refused, counted as such. */
  const refusal = (address: string): Refusal => {
    if (trusted(address, 0)) return undefined;
    const key = clientKey(address);
    if (isRefused(key)) {
      counts.overflowRefused++;
      return 'overflow';
    }
    if ((open.get(key) ?? 0) < perAddress) return undefined;
    counts.shareRefused++;
    return 'share';
  };
  /**
   * Whether any refusal is in force, dropping the expired ones first. `refuse` re-inserts a key
   * with one fixed `refuseMs`, so insertion order is expiry order and only the front can be
   * expired: without this, one overflow long ago would keep every accept looking up its peer.
   */
  const refusing = (): boolean => {
    if (refused.size === 0) return false;
    const t = now();
    for (const [key, until] of refused) {
      if (until > t) return true;
      refused.delete(key);
    }
    return false;
  };
  const pit = holdUnread(server);
  refuseAtAccept(server, () => refusing() || full > 0, (address, client) => {
    const why = refusal(address);
    if (why === undefined) return false;
    // A client refused after an overflow: held, so that it cannot reconnect at once.
    const key = clientKey(address);
    if (why === 'share' || !pit.hold(key, client, (refused.get(key) ?? 0) - now())) client.close();
    return true;
  });
  server.on('connection', (socket: AcceptedSocket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return;
    if (refusal(address) !== undefined) {
      socket.destroy();
      return;
    }
    if (trusted(address, 0)) return;
    // Counted per client, as the refusal is: a host owning an IPv6 /64 would otherwise take a
    // share per address it rotates through.
    const key = clientKey(address);
    const n = (open.get(key) ?? 0) + 1;
    open.set(key, n);
    if (n === perAddress) full++;
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left === perAddress - 1) full--;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    });
  });
  return {
    counts,
    /** A connection from `address` was closed past maxPipelinedPerConnection: refuse its client for refuseMs. */
    refuse(address) {
      counts.pipelineClosed++;
      if (address === undefined || refuseMs === 0 || trusted(address, 0)) return;
      const key = clientKey(address);
      refused.delete(key);
      if (refused.size >= MAX_REFUSED) refused.delete(refused.keys().next().value as string);
      refused.set(key, now() + refuseMs);
    },
  };
}

/** What `refuseAtAccept` uses of an accepted connection's handle in node (a TCP wrap, not a documented API). */
interface ClientHandle {
  getpeername?: (out: { address?: string }) => number;
  unref?: () => void;
  close(): void;
}

/** What `refuseAtAccept` uses of a listening server (`server._handle`, not a documented API). */
interface ListeningServer {
  _handle?: { onconnection?: (this: unknown, err: number, client?: ClientHandle) => unknown } | null;
}

/**
 * Closes or holds a refused connection as it is accepted, before node makes anything of it. In
 * the 'connection' event it is already a net.Socket with node's HTTP parser, timers and listeners
 * attached, and destroying it runs all of that down again: a client refused after a pipelining
 * overflow that reconnects at once (thousands of times a second on loopback) made the gateway spend
 * a good part of a core on sockets it would never read, the CPU the other clients' requests wait
 * for. Here each costs the kernel's accept and one getpeername, then a close, as node's own
 * `maxConnections` refusal does (net.js onconnection closes the handle the same way), or a hold
 * (`holdUnread`). `refuse(address, handle)` true: it took the handle. `active()` false (no refusal
 * in force, no client at its share): not even the getpeername. Where the handle is missing (not a
 * node server, another runtime), nothing changes: the 'connection' listener refuses as before.
 */
function refuseAtAccept(server: ConnectionSource, active: () => boolean, refuse: (address: string, client: ClientHandle) => boolean): void {
  const source = server as ConnectionSource & ListeningServer;
  source.on('listening', () => {
    const handle = source._handle;
    const accept = handle?.onconnection;
    if (handle == null || typeof accept !== 'function') return;
    handle.onconnection = function (this: unknown, err: number, client?: ClientHandle) {
      if (err === 0 && client !== undefined && active() && typeof client.getpeername === 'function') {
        const peer: { address?: string } = {};
        if (client.getpeername(peer) === 0 && peer.address !== undefined && refuse(peer.address, client)) return;
      }
      return accept.call(this, err, client);
    };
  });
}

/** Most connections of one client held unread at once (`holdUnread`), and of all clients together. */
const HOLD_PER_CLIENT = 8;
const HOLD_TOTAL = 1000;
/** Longest a connection is held before it is closed (shorter when the client's refusal ends first). */
const HOLD_MAX_MS = 10_000;

/**
 * Holds a refused client's new connection open and unread, instead of closing it at once: a
 * client that floods and reconnects at once can then not turn each refusal into another
 * connection. Closed at once, each refused connection was followed by the next within a
 * millisecond; the client wrote up to a socket buffer into each before the close (gigabytes in a
 * few seconds on loopback) and the kernel spent, on the gateway's host, more CPU on that churn than
 * the gateway spent on all its clients. Held, the connection's window fills and the client's
 * writes stop: nothing is read, parsed or answered, and the gateway's process holds no object for
 * it, only the kernel's socket buffer. At most `HOLD_PER_CLIENT` per client and `HOLD_TOTAL` in
 * all (past either, closed at once as before), each closed after `ms` (the rest of the client's
 * refusal) or `HOLD_MAX_MS`, whichever is shorter, and all when the server closes. The handles are
 * unreferenced: a held connection never keeps the process alive.
 */
function holdUnread(server: ConnectionSource): { hold(key: string, client: ClientHandle, ms: number): boolean } {
  const perClient = new Map<string, number>();
  const held = new Set<ClientHandle>();
  const release = (key: string, client: ClientHandle) => {
    if (!held.delete(client)) return;
    client.close();
    const left = (perClient.get(key) ?? 1) - 1;
    if (left <= 0) perClient.delete(key);
    else perClient.set(key, left);
  };
  server.on('close', () => {
    for (const client of held) client.close();
    held.clear();
    perClient.clear();
  });
  return {
    hold(key, client, ms) {
      const n = perClient.get(key) ?? 0;
      if (!(ms > 0) || n >= HOLD_PER_CLIENT || held.size >= HOLD_TOTAL) return false;
      perClient.set(key, n + 1);
      held.add(client);
      client.unref?.();
      setTimeout(() => release(key, client), Math.min(ms, HOLD_MAX_MS)).unref();
      return true;
    },
  };
}
