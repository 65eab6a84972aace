/**
 * A real OTLP/HTTP trace receiver for tests (node:http on 127.0.0.1, port 0): it keeps every POST
 * to /v1/traces (headers, raw body, the body decoded with the OpenTelemetry protobuf definitions or
 * JSON.parse), flattens the accepted spans with their resource and scope, and misbehaves on
 * demand, switchable while it runs: hang, 503, 429 with Retry-After, 400, reset, slow.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { decodeTraceRequest, exportTraceServiceRequest } from './otlp-proto.js';

/**
 * - `ok`: 200, an empty ExportTraceServiceResponse in the request's encoding.
 * - `partial`: 200 with `partial_success.rejected_spans` = `rejectSpans`.
 * - `hang`: reads the request, never answers.
 * - `status503`, `status400`: that status, no Retry-After.
 * - `status429`: 429 with `Retry-After: retryAfter` (when set).
 * - `reset`: reads the request, then destroys the socket.
 * - `slow`: 200 after `slowMs`; with `drip`, the head at once and then the body a byte every `slowMs`.
 */
export type ReceiverMode = 'ok' | 'partial' | 'hang' | 'status503' | 'status429' | 'status400' | 'reset' | 'slow';

export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly raw: Buffer;
  /** The decoded ExportTraceServiceRequest, or undefined when the body did not decode. */
  readonly decoded: OtlpRequest | undefined;
  /** How it was answered. */
  readonly mode: ReceiverMode;
  /** Date.now() when its body had arrived. */
  readonly at: number;
}

export interface OtlpKeyValue {
  key: string;
  value: Record<string, unknown>;
}
export interface OtlpSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  name?: string;
  kind?: number;
  attributes?: OtlpKeyValue[];
  [k: string]: unknown;
}
export interface OtlpRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: Array<{ scope?: { name?: string; version?: string }; spans?: OtlpSpan[] }>;
  }>;
}

/** One accepted span with who made it. */
export interface ReceivedSpan {
  readonly resource: Record<string, unknown>;
  readonly scope: { readonly name: string | undefined; readonly version: string | undefined };
  readonly span: OtlpSpan;
  /** The span's attributes as key -> plain value. */
  readonly attributes: Record<string, unknown>;
}

export interface ReceiverOptions {
  mode?: ReceiverMode;
  /** `Retry-After` of `status429`, as sent (seconds or a date); none when undefined. */
  retryAfter?: string;
  /** `slow`: the delay before the answer, or between the body's bytes with `drip`. */
  slowMs?: number;
  drip?: boolean;
  /**
   * `ok`, `partial`, `slow`: bytes added to the answer (JSON: leading spaces, any length; protobuf:
   * an unknown field, at most 129 bytes). Default 0, or 16 with `drip`.
   */
  padBytes?: number;
  /** `partial`: the rejected count the answer carries. */
  rejectSpans?: number;
}

export interface OtlpReceiver {
  /** http://127.0.0.1:<port>/v1/traces */
  readonly url: URL;
  readonly requests: ReceivedRequest[];
  /** Changes how later requests are answered (queued modes first). */
  mode: ReceiverMode;
  options: ReceiverOptions;
  /** The next requests' modes, one each, before `mode` applies again. */
  script(modes: readonly ReceiverMode[]): void;
  /** Spans of the requests answered with a 2xx, in order. */
  spans(): ReceivedSpan[];
  /** Resolves with `spans()` once there are at least `n`; rejects after `ms`. */
  waitForSpans(n: number, ms: number): Promise<ReceivedSpan[]>;
  /** Resolves once `n` requests have arrived (whole bodies); rejects after `ms`. */
  waitForRequests(n: number, ms: number): Promise<ReceivedRequest[]>;
  /** Destroys every socket and closes the server. */
  close(): Promise<void>;
}

const ACCEPTED: ReadonlySet<ReceiverMode> = new Set(['ok', 'partial', 'slow']);

export function plainValue(v: Record<string, unknown> | undefined): unknown {
  if (v === undefined) return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  return v;
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = plainValue(kv.value);
  return out;
}

function decode(headers: IncomingHttpHeaders, raw: Buffer): OtlpRequest | undefined {
  try {
    const type = headers['content-type'] ?? '';
    if (type.startsWith('application/json')) return JSON.parse(raw.toString('utf8')) as OtlpRequest;
    if (type.startsWith('application/x-protobuf')) return decodeTraceRequest(raw) as OtlpRequest;
  } catch {
    // kept raw; `decoded` stays undefined
  }
  return undefined;
}

/**
 * The answer of a 200, in the request's encoding, with `partial_success` when `rejected` > 0, and
 * `pad` bytes more (JSON: leading spaces; protobuf: an unknown field 15, which decoders skip).
 */
function answerBody(json: boolean, rejected: number, pad = 0): Buffer {
  const errorMessage = 'some spans were refused';
  if (json) {
    const message = rejected > 0 ? { partialSuccess: { rejectedSpans: String(rejected), errorMessage } } : {};
    return Buffer.from(' '.repeat(pad) + JSON.stringify(message));
  }
  const type = exportTraceServiceRequest().root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse');
  const body = Buffer.from(type.encode(type.fromObject(rejected > 0 ? { partialSuccess: { rejectedSpans: rejected, errorMessage } } : {})).finish());
  if (pad < 2) return body;
  const n = Math.min(pad - 2, 127);
  return Buffer.concat([body, Buffer.from([(15 << 3) | 2, n]), Buffer.alloc(n)]);
}

export async function startOtlpReceiver(initial: ReceiverOptions = {}): Promise<OtlpReceiver> {
  const requests: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const waiters = new Set<() => void>();
  let queued: ReceiverMode[] = [];
  const later = (fn: () => void, ms: number): void => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  function answer(req: IncomingMessage, res: ServerResponse, mode: ReceiverMode): void {
    const json = (req.headers['content-type'] ?? '').startsWith('application/json');
    const ctype = json ? 'application/json' : 'application/x-protobuf';
    const o = receiver.options;
    switch (mode) {
      case 'hang':
        return;
      case 'reset':
        req.socket.destroy();
        return;
      case 'status503':
      case 'status400':
        res.writeHead(mode === 'status503' ? 503 : 400, { 'content-type': 'text/plain' }).end('refused');
        return;
      case 'status429':
        res.writeHead(429, { 'content-type': 'text/plain', ...(o.retryAfter !== undefined ? { 'retry-after': o.retryAfter } : {}) }).end('slow down');
        return;
      case 'ok':
      case 'partial': {
        res.writeHead(200, { 'content-type': ctype }).end(answerBody(json, mode === 'partial' ? (o.rejectSpans ?? 1) : 0, o.padBytes));
        return;
      }
      case 'slow': {
        const ms = o.slowMs ?? 200;
        const body = answerBody(json, 0, o.padBytes ?? (o.drip === true ? 16 : 0));
        if (o.drip !== true || body.length === 0) {
          later(() => res.writeHead(200, { 'content-type': ctype }).end(body), ms);
          return;
        }
        res.writeHead(200, { 'content-type': ctype, 'content-length': String(body.length) });
        res.flushHeaders();
        const drip = (i: number): void => {
          if (res.destroyed) return;
          if (i >= body.length) return void res.end();
          res.write(body.subarray(i, i + 1));
          later(() => drip(i + 1), ms);
        };
        later(() => drip(0), ms);
        return;
      }
    }
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    req.on('end', () => {
      const path = req.url ?? '';
      if (req.method !== 'POST' || path !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const mode = queued.shift() ?? receiver.mode;
      const raw = Buffer.concat(chunks);
      requests.push({ method: req.method, path, headers: req.headers, raw, decoded: decode(req.headers, raw), mode, at: Date.now() });
      for (const w of [...waiters]) w();
      answer(req, res, mode);
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the receiver has no port');

  function spans(): ReceivedSpan[] {
    const out: ReceivedSpan[] = [];
    for (const r of requests) {
      if (!ACCEPTED.has(r.mode) || r.decoded === undefined) continue;
      for (const rs of r.decoded.resourceSpans ?? []) {
        const resource = attributesOf(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          const scope = { name: ss.scope?.name, version: ss.scope?.version };
          for (const span of ss.spans ?? []) out.push({ resource, scope, span, attributes: attributesOf(span.attributes) });
        }
      }
    }
    return out;
  }

  function waitUntil<T>(what: string, ms: number, check: () => T | undefined): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const now = check();
      if (now !== undefined) return resolve(now);
      const waiter = (): void => {
        const v = check();
        if (v === undefined) return;
        finish();
        resolve(v);
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`the OTLP receiver: ${what} not within ${ms} ms (${requests.length} requests, ${spans().length} spans)`));
      }, ms);
      const finish = (): void => {
        clearTimeout(timer);
        waiters.delete(waiter);
      };
      waiters.add(waiter);
    });
  }

  const receiver: OtlpReceiver = {
    url: new URL(`http://127.0.0.1:${address.port}/v1/traces`),
    requests,
    mode: initial.mode ?? 'ok',
    options: { ...initial },
    script(modes) {
      queued = [...modes];
    },
    spans,
    waitForSpans(n, ms) {
      return waitUntil(`${n} spans`, ms, () => {
        const s = spans();
        return s.length >= n ? s : undefined;
      });
    },
    waitForRequests(n, ms) {
      return waitUntil(`${n} requests`, ms, () => (requests.length >= n ? requests : undefined));
    },
    close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
