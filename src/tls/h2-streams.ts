/**
 * What the streams of one HTTP/2 session may hold, and for how long (src/tls/server.ts installs
 * it on every session of the TLS listener).
 *
 * A client that stops reading (SETTINGS_INITIAL_WINDOW_SIZE 0, or WINDOW_UPDATEs of a byte now
 * and then), or that keeps its side of a stream open after a complete answer, makes every one of
 * its streams hold its state (node's stream, request and response objects, the exchange, the
 * answer not sent): about 10 KB each, for as long as the client likes, for a few bytes of HEADERS
 * it sent. Unlike HTTP/1.1, whose answers leave into the kernel's buffers, nothing of that leaves
 * the process. Three bounds:
 * - At most `MAX_WAITING_STREAMS` streams of a session wait on their client at once. A stream
 *   waits when the answer it has been given cannot leave: more of it than the client's initial
 *   window (the case of a client that grants none), or no byte of it taken for `MARK_MS`, or a
 *   complete answer while the client keeps its side open that long. A new stream of a session
 *   that already has that many is refused (RST_STREAM REFUSED_STREAM: not processed, the client
 *   may retry it) before any policy sees it, and one that starts waiting past the bound is reset
 *   (ENHANCE_YOUR_CALM); either way the session is told GOAWAY ENHANCE_YOUR_CALM: its other
 *   streams may finish, no new one starts.
 * - A request that has not arrived whole (its client's side still open, no answer yet) after
 *   `requestTimeoutMs` is reset (CANCEL), as node's HTTP/1.1 server answers 408 then.
 * - A stream whose client takes nothing of its answer for `stallTimeoutMs` (a byte now and then is
 *   nothing: progress is a write of the gateway's handed over whole) is reset (RST_STREAM CANCEL,
 *   or NO_ERROR after a complete answer, RFC 9113 section 8.1) and its session closed (GOAWAY):
 *   a client that keeps its window shut gets no new stream.
 * - Rapid reset (CVE-2023-44487): a session whose client resets more than MAX_RESETS streams
 *   before their answer within RESET_WINDOW_MS is ended (GOAWAY ENHANCE_YOUR_CALM), whatever the
 *   RST_STREAM's error code.
 *
 * No timer per stream: every stream is on one deadline list (src/core/deadlines.ts), looked at
 * every STEP_MS while it lives; a stream answered at once is unlinked before it is ever looked at.
 */
import type { IncomingMessage } from 'node:http';
import { constants as h2constants, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { DeadlineList, type DeadlineOwner, type Deadlined } from '../core/deadlines.js';

/** Streams of one session that may wait on their client at once (of the 100 it may have open). */
export const MAX_WAITING_STREAMS = 8;
/** How long a session the gateway ended may take to write its last frames before its socket is destroyed. */
const SOCKET_LINGER_MS = 1000;
/** How long a session the gateway ends keeps its socket after its GOAWAY was queued, before it is destroyed. */
const GOAWAY_FLUSH_MS = 250;
/** How often a stream that lives is looked at (shorter when the stall timeout is). */
const STEP_MS = 250;
/** A stream whose answer has not moved for this long waits on its client (shorter when the stall timeout is). */
const MARK_MS = 1000;

/**
 * Streams a client may reset before their answer within RESET_WINDOW_MS before its session is
 * ended (GOAWAY ENHANCE_YOUR_CALM, RFC 9113 section 11.4; CVE-2023-44487). nghttp2 has a reset
 * rate limit of its own, but whether and when it ends the session differs between the nghttp2
 * versions node ships (node 20 ends a rapid-reset flood with GOAWAY; node 24 stops reading the
 * session's streams after about 1,000 resets without ending it): this bound is the gateway's, the
 * same on every node. A browser cancels a few streams when a page navigates away, far below it.
 */
export const MAX_RESETS = 500;
const RESET_WINDOW_MS = 10_000;

/** What the HTTP/2 bounds did so far (the overflow metric reads them, as `h2_*` events). */
export interface H2Counts {
  /** Streams reset after `streamStallTimeoutMs` without progress. */
  streamStalled: number;
  /** Sessions ended for holding more than MAX_WAITING_STREAMS answers their client does not read. */
  sessionNotReading: number;
  /** Sessions ended for resetting more than MAX_RESETS streams (rapid reset). */
  rapidReset: number;
}

const COUNTS = new WeakMap<object, H2Counts>();

/** A watched server's HTTP/2 counts; undefined for a server without HTTP/2. */
export function h2CountsOf(server: object): Readonly<H2Counts> | undefined {
  return COUNTS.get(server);
}

const WATCH = Symbol('petstore-gateway stream watch');
type WatchedStream = ServerHttp2Stream & { [WATCH]?: StreamWatch | undefined };

/** One session's accounting. */
class SessionWatch {
  readonly streams = new Set<StreamWatch>();
  /** Streams of `streams` marked as waiting on the client by the deadline list. */
  waiting = 0;
  resets = 0;
  resetWindowStart = 0;
  /** Told GOAWAY: destroyed once its last stream has closed. */
  ending = false;
  /** Its TLS socket (see watchSessions). */
  socket: Socket | undefined = undefined;
  /** Set once `destroySoon` has been asked. */
  destroyTimer: NodeJS.Timeout | undefined = undefined;
  constructor(
    readonly session: Http2Session,
    readonly counts: H2Counts,
  ) {}

  /**
   * Destroys the session, and its socket a moment later whatever the client does: node ends the
   * socket after the session's last frames (GOAWAY) are written, but a socket whose client
   * vanished meanwhile was seen never to close, holding its place in the connection counts and
   * the server's close. One timer per session the gateway ends, none per stream.
   */
  destroy(): void {
    if (!this.session.destroyed) this.session.destroy();
    const socket = this.socket;
    if (socket !== undefined && !socket.destroyed) setTimeout(() => socket.destroy(), SOCKET_LINGER_MS).unref();
  }

  /**
   * No new stream for the session (GOAWAY `code`); the streams it has may finish, then it is
   * destroyed, and its socket soon after: a session closed by node's `session.close()` alone
   * waits, once its streams are done, for its client to close the connection, and a client that
   * never does (or one that vanished: node does not always notice) kept the socket, and the
   * server's close, for ever.
   */
  end(code: number): void {
    if (this.ending || this.session.destroyed) return;
    this.ending = true;
    this.session.goaway(code);
    // node's close() sends it (a goaway() alone may wait for other output), refuses new streams,
    // and destroys the session once its streams are done; `destroy` sees to the socket then.
    this.session.close();
    if (this.streams.size === 0) this.destroySoon();
  }

  /**
   * Destroys the session a moment after its GOAWAY was queued, so that the frame is written first:
   * destroyed in the same turn (or the next, on a loaded process), the frame was seen to be dropped,
   * and a client flooding the session (rapid reset) learnt nothing and kept its connection. No new
   * stream starts meanwhile (the session is closed). One timer per session the gateway ends.
   */
  destroySoon(): void {
    if (this.destroyTimer !== undefined) return;
    this.destroyTimer = setTimeout(() => this.destroy(), GOAWAY_FLUSH_MS);
    this.destroyTimer.unref();
  }

  /** Ends the session now: GOAWAY ENHANCE_YOUR_CALM, every stream reset. */
  abort(): void {
    this.ending = true;
    for (const w of this.streams) w.ours = true;
    if (this.session.destroyed) return;
    this.session.goaway(h2constants.NGHTTP2_ENHANCE_YOUR_CALM);
    this.destroy();
  }

  /** No new stream for the session: GOAWAY ENHANCE_YOUR_CALM, its open streams may finish. */
  calm(): void {
    this.end(h2constants.NGHTTP2_ENHANCE_YOUR_CALM);
  }
}

/** One stream on the deadline list. */
class StreamWatch implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;
  /** What the answer looked like when last seen: bytes not handed over, -1 once complete. */
  token = 0;
  /** Since when `token` has not changed (the list's clock). */
  since: number;
  /** When the stream arrived (the list's clock). */
  readonly born: number;
  /** Counted in its session's `waiting`. */
  waiting = false;
  /** Reset by the gateway here: not the client's reset. */
  ours = false;
  constructor(
    readonly stream: WatchedStream,
    readonly owner: SessionWatch,
    now: number,
  ) {
    this.since = now;
    this.born = now;
  }

  /** Counts or uncounts this stream as waiting on its client. */
  setWaiting(waiting: boolean): void {
    if (this.waiting === waiting) return;
    this.waiting = waiting;
    this.owner.waiting += waiting ? 1 : -1;
  }

  reset(code: number): void {
    this.ours = true;
    if (!this.stream.destroyed) this.stream.close(code);
  }
}

/**
 * Whether a closed stream ended with the client's RST_STREAM before its answer was delivered: any
 * error code, or NO_ERROR (RFC 9113 section 8.1 allows it only after a complete answer) while the
 * answer was not all sent. A stream that ended normally has sent its answer whole.
 */
function resetByClient(stream: ServerHttp2Stream): boolean {
  const code = stream.rstCode;
  // `aborted`: node destroyed the stream before its answer was ended; `writableFinished` false:
  // ended, not all sent.
  return code !== undefined && (code !== h2constants.NGHTTP2_NO_ERROR || stream.aborted || !stream.writableFinished);
}

/** A stream closed: off the list and its session's set; a client's reset counted. */
function closed(this: WatchedStream): void {
  const watch = this[WATCH];
  if (watch === undefined) return;
  this[WATCH] = undefined;
  watch.deadlineList?.remove(watch);
  const s = watch.owner;
  s.streams.delete(watch);
  watch.setWaiting(false);
  if (s.ending && s.streams.size === 0) s.destroySoon();
  if (watch.ours || !resetByClient(this)) return;
  const now = performance.now();
  if (now - s.resetWindowStart > RESET_WINDOW_MS) {
    s.resetWindowStart = now;
    s.resets = 0;
  }
  // GOAWAY first, so the client learns why; the streams still open may finish, no new one starts.
  if (++s.resets === MAX_RESETS + 1) {
    s.counts.rapidReset++;
    s.calm();
  }
}

/** What a stream's answer looks like now: bytes handed to it and not yet sent, -1 once it is complete. */
function tokenOf(stream: ServerHttp2Stream): number {
  return stream.writableFinished ? -1 : stream.writableLength;
}

/** What `watchSessions` uses of node's http2 server (the shutdown methods are node:http's names). */
export interface SessionServer {
  on(event: 'session', listener: (session: Http2Session) => void): unknown;
  on(event: 'secureConnection', listener: (socket: Socket) => void): unknown;
  closeIdleConnections(): void;
  closeAllConnections(): void;
}

/**
 * Installs the bounds on a server's sessions. `stallTimeoutMs`: how long a stream's answer may
 * wait on its client without progress before it is reset; `requestTimeoutMs`: how long its
 * request may take to arrive whole.
 *
 * node:http2's server also lacks two connection methods the gateway's shutdown uses: here
 * `closeIdleConnections` also tells every HTTP/2 session to finish its streams and close (GOAWAY,
 * RFC 9113 section 6.8), and `closeAllConnections` destroys them.
 */
export function watchSessions(server: SessionServer, stallTimeoutMs: number, requestTimeoutMs: number): void {
  const counts: H2Counts = { streamStalled: 0, sessionNotReading: 0, rapidReset: 0 };
  COUNTS.set(server, counts);
  const step = Math.max(1, Math.min(STEP_MS, Math.floor(stallTimeoutMs / 4)));
  const mark = Math.min(MARK_MS, stallTimeoutMs);
  const due = (w: StreamWatch, now: number): number | undefined => {
    const stream = w.stream;
    if (stream.destroyed) return undefined;
    const token = tokenOf(stream);
    // No answer yet and the client's side still open after requestTimeoutMs: the request never
    // arrived whole (HEADERS without END_STREAM, a body that never ends), what node's HTTP/1.1
    // server answers 408. Reset (CANCEL): the exchange sees its client leave.
    if (token === 0 && now - w.born >= requestTimeoutMs && stream.state.remoteClose === 0) {
      w.reset(h2constants.NGHTTP2_CANCEL);
      return undefined;
    }
    if (token === 0 || token !== w.token) {
      // Nothing to send yet (the answer is being made), or some of it left since the last look.
      w.token = token;
      w.since = now;
      w.setWaiting(false);
      return now + step;
    }
    const idle = now - w.since;
    if (idle >= stallTimeoutMs) {
      counts.streamStalled++;
      w.reset(token === -1 ? h2constants.NGHTTP2_NO_ERROR : h2constants.NGHTTP2_CANCEL);
      // A client that keeps its window shut gets no new stream (GOAWAY NO_ERROR); the session
      // ends when its streams have, each under this same deadline.
      w.owner.end(h2constants.NGHTTP2_NO_ERROR);
      return undefined;
    }
    if (idle >= mark && !w.waiting) {
      w.setWaiting(true);
      if (w.owner.waiting > MAX_WAITING_STREAMS) {
        counts.sessionNotReading++;
        w.reset(h2constants.NGHTTP2_ENHANCE_YOUR_CALM);
        w.owner.calm();
        return undefined;
      }
    }
    return Math.min(now + step, w.since + stallTimeoutMs);
  };
  const list = new DeadlineList<StreamWatch>(step, due);
  const sessions = new Set<SessionWatch>();
  // node's own 'secureConnection' listener makes the session of an h2 connection and emits
  // 'session' at once; this server's listener runs after it, with the socket of that session.
  let latest: SessionWatch | undefined;
  server.on('secureConnection', (socket: Socket) => {
    if (latest !== undefined) latest.socket = socket;
    latest = undefined;
  });
  server.on('session', (session: Http2Session) => {
    const s = new SessionWatch(session, counts);
    latest = s;
    sessions.add(s);
    session.once('close', () => sessions.delete(s));
    // Before node's own listener, which hands the stream to the request handler: the stream is
    // known here when `admitStream` looks.
    session.prependListener('stream', (stream: WatchedStream) => {
      const watch = new StreamWatch(stream, s, list.clock.now());
      stream[WATCH] = watch;
      s.streams.add(watch);
      stream.on('close', closed);
      list.add(watch);
    });
  });
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    closeIdle();
    for (const s of sessions) s.end(h2constants.NGHTTP2_NO_ERROR);
  };
  const closeAll = server.closeAllConnections.bind(server);
  server.closeAllConnections = () => {
    closeAll();
    for (const s of sessions) {
      sessions.delete(s);
      s.session.destroy();
      s.socket?.destroy();
    }
  };
}

/**
 * Whether an HTTP/2 request may be served: false when its session already has
 * MAX_WAITING_STREAMS streams waiting on the client; the stream is then refused (RST_STREAM
 * REFUSED_STREAM, nothing of it processed) and the session told GOAWAY. Cheap for a session with
 * few streams open; a look at each open stream otherwise.
 */
export function admitStream(req: IncomingMessage): boolean {
  const stream = (req as IncomingMessage & { stream?: WatchedStream }).stream;
  const watch = stream?.[WATCH];
  if (watch === undefined) return true;
  const s = watch.owner;
  if (s.streams.size <= MAX_WAITING_STREAMS) return true;
  // More of an answer than the client's initial window cannot leave until the client grants more:
  // a client that grants nothing is caught here, in the read that brought its streams.
  const window = s.session.remoteSettings.initialWindowSize ?? 65_535;
  let waiting = 0;
  for (const other of s.streams) {
    if (other === watch || !(other.waiting || other.stream.writableLength > window)) continue;
    if (++waiting < MAX_WAITING_STREAMS) continue;
    // A client that opens streams while this many of its answers wait on it is not reading them:
    // its session is ended now (GOAWAY ENHANCE_YOUR_CALM, every stream reset), rather than told
    // GOAWAY and left to finish, so that the rest of a burst already read (up to 100 streams) is
    // not made into streams, requests and responses only to be refused one by one.
    watch.ours = true;
    s.counts.sessionNotReading++;
    s.abort();
    return false;
  }
  return true;
}
