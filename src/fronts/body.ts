/**
 * Reading a client's request body (both fronts): raw bytes within a limit (413 past it, before
 * reading it whole when the Content-Length says so). The policies check these exact bytes and the
 * upstream receives them. And the other side of it: a body the gateway will not read (the request
 * was refused, or is over the limit) is not drained whole, and `100 Continue` goes out only once
 * the request phase passed.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { GatewayError } from '../core/errors.js';

/** RST_STREAM's NO_ERROR (RFC 9113 section 7). */
const NGHTTP2_NO_ERROR = 0;

const EMPTY = Buffer.alloc(0);

/**
 * Most bytes of a refused body the gateway reads. A declared body this small is read and dropped,
 * so the connection stays usable; a larger (or chunked) one is not: the answer says
 * `Connection: close`, and the connection is closed once this many more bytes came, or after
 * `REFUSED_LINGER_MS`. Reading a little before closing lets the client receive the answer: a close
 * with unread bytes would make the kernel reset the connection, which may discard the answer at
 * the client before it read it (the lingering close of RFC 9112 section 9.6).
 */
export const REFUSED_BODY_BYTES = 64 * 1024;
/** How long a refused body may keep the connection open after the answer went out. */
export const REFUSED_LINGER_MS = 1000;

/**
 * Requests whose client asked `Expect: 100-continue` and has not been told to send its body yet.
 * The standalone server (node-server.ts) adds them: node's own automatic 100 would invite the body
 * before authentication.
 */
const awaitingContinue = new WeakSet<IncomingMessage>();

export function markAwaitingContinue(req: IncomingMessage): void {
  awaitingContinue.add(req);
}

/**
 * The request phase passed and the body will be read: `100 Continue` now, if the client is waiting
 * for it (RFC 9110 section 10.1.1: a server that will read the body sends it; one that answers
 * before reading it need not).
 */
export function sendContinue(req: IncomingMessage, res: ServerResponse): void {
  if (!awaitingContinue.delete(req)) return;
  if (!res.headersSent && !res.destroyed) res.writeContinue();
}

/** Whether the request's head announces a body (RFC 9112 section 6.3). */
function announcesBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * A body the gateway will not read: a small declared one is drained (the connection stays
 * usable), anything else gets `Connection: close` and at most `REFUSED_BODY_BYTES` more are read
 * after the answer, for at most `REFUSED_LINGER_MS`. Call it before the answer is written.
 */
export function refuseBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.httpVersionMajor === 2) return refuseStreamBody(req);
  if (req.complete || !announcesBody(req)) {
    req.resume();
    return;
  }
  const waiting = awaitingContinue.delete(req);
  const declared = Number(req.headers['content-length']);
  if (!waiting && req.headers['transfer-encoding'] === undefined && declared <= REFUSED_BODY_BYTES) {
    req.resume();
    return;
  }
  closeAfterAnswer(req, res);
}

/**
 * HTTP/2: a stream, not the connection, carries the body. What comes is dropped, and once the
 * answer is sent whole a stream whose client has not ended its side is reset with NO_ERROR
 * (RFC 9113 section 8.1: the client keeps the answer and stops sending). Without it, a client
 * that never ends its side (HEADERS without END_STREAM, no body) kept every such stream, and
 * what it holds, open after its answer.
 */
function refuseStreamBody(req: IncomingMessage): void {
  awaitingContinue.delete(req);
  req.resume();
  const stream = (req as IncomingMessage & { stream?: H2Stream }).stream;
  if (req.complete || stream === undefined) return;
  // The stream's 'finish' (its answer sent whole): the compatibility response emits its own only
  // when the stream closes.
  stream.once('finish', () => {
    if (!req.complete && !stream.destroyed) stream.close(NGHTTP2_NO_ERROR);
  });
}

/** What `refuseStreamBody` uses of node's Http2Stream. */
interface H2Stream {
  readonly destroyed: boolean;
  once(event: 'finish', listener: () => void): unknown;
  close(code: number): void;
}

/** Tells the client the connection closes with the answer, then closes it, reading little of what still comes. */
function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
  res.shouldKeepAlive = false;
  const socket = req.socket;
  let read = 0;
  let answered = res.writableFinished;
  const close = () => {
    if (!socket.destroyed) socket.destroy();
  };
  req.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (answered && read > REFUSED_BODY_BYTES) close();
  });
  req.resume();
  const linger = () => {
    answered = true;
    if (req.complete) return;
    if (read > REFUSED_BODY_BYTES) return close();
    const timer = setTimeout(close, REFUSED_LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
  if (answered) linger();
  else res.once('finish', linger);
  // An answer that never completes (the client left) needs no lingering close.
  res.once('close', () => {
    if (!answered) close();
  });
}

export function readBody(stream: Readable, declaredLength: string | undefined, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredLength !== undefined && Number(declaredLength) > limit) {
      reject(new GatewayError('payload_too_large'));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.off('data', onData);
        reject(new GatewayError('payload_too_large'));
        return;
      }
      chunks.push(chunk);
    };
    stream.on('data', onData);
    stream.on('end', () => {
      // HTTP/1.1's parser waits for every byte a Content-Length announces; an HTTP/2 stream can
      // end early (END_STREAM). Such a request is malformed (RFC 9113 section 8.1.1): nghttp2
      // resets the stream, and the body read so far must never reach the upstream.
      if (declaredLength !== undefined && size !== Number(declaredLength)) {
        reject(new GatewayError('invalid_request', { message: 'The request body is shorter than its Content-Length.' }));
        return;
      }
      resolve(size === 0 ? EMPTY : Buffer.concat(chunks, size));
    });
    stream.on('error', reject);
  });
}

/**
 * A body over the limit (413): the rest of it is not read whole. The exchange's answer says
 * `Connection: close`; this closes the connection after at most `REFUSED_BODY_BYTES` more.
 */
export function refuseRestOfBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete) return;
  awaitingContinue.delete(req);
  closeAfterAnswer(req, res);
}
