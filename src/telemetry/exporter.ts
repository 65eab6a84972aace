/**
 * The span exporter: a bounded queue the request path only appends to, and one export at a time
 * to an OTLP/HTTP collector (https://opentelemetry.io/docs/specs/otlp/#otlphttp), in batches,
 * with retries. Nothing here ever waits on the request path or rejects a promise: a collector
 * that hangs, refuses or resets costs spans (dropped or failed, counted), never a request.
 *
 * - `enqueue` is O(1): one array push, or a count when the queue is full (the span is dropped).
 *   A full batch, or the schedule delay (an unref'd timer), starts an export on a later turn.
 * - One export in flight at most; while it runs, spans queue, and past `maxQueueSpans` they drop.
 * - Retries as the OTLP spec says (#failures-1): 429, 502, 503 and 504 and a failed connection or
 *   timeout are retried with exponential backoff and jitter, a `Retry-After` honoured within
 *   `maxBackoffMs`; any other status is not. A 200 with `partial_success` counts as exported.
 * - The headers (which may hold the collector's API key) are never logged; a log line carries a
 *   kind, a status or an error code, and counts, at most once a minute per kind.
 */
import { Pool } from 'undici';
import type { SpanData, SpanEncoder, SpanSource } from './span.js';

export interface ExporterLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface SpanExporterOptions {
  /** The collector's traces URL (`.../v1/traces`). */
  readonly endpoint: URL;
  readonly contentType: 'application/x-protobuf' | 'application/json';
  readonly encode: SpanEncoder;
  readonly source: SpanSource;
  /** Sent with every export (OTEL_EXPORTER_OTLP_HEADERS); never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** Spans waiting at most; past it a span is dropped and counted. Default 2048. */
  readonly maxQueueSpans?: number;
  /** Spans per export request at most. Default 512. */
  readonly maxBatchSpans?: number;
  /** How long a span waits for its batch to fill before it is exported anyway. Default 1000 ms. */
  readonly delayMs?: number;
  /** One export request's bound, connection to the end of the answer. Default 10 000 ms. */
  readonly timeoutMs?: number;
  /** Attempts per batch, the first included. Default 5. */
  readonly maxAttempts?: number;
  /** The first retry's delay (doubled per retry, with jitter). Default 500 ms. */
  readonly initialBackoffMs?: number;
  /** The longest delay between attempts, a `Retry-After` included. Default 5000 ms. */
  readonly maxBackoffMs?: number;
  /** One batch's whole export, its retries and waits included: no attempt starts past it. Default 30 000 ms. */
  readonly batchTimeoutMs?: number;
  readonly log?: ExporterLog;
}

export interface ExporterStats {
  /** Spans waiting in the queue (the batch in flight not included). */
  readonly queued: number;
  /** Spans the collector accepted (a partial success counts whole). */
  readonly exported: number;
  /** Spans dropped: the queue was full, the exporter was closed, or still queued when `close`'s grace ran out. */
  readonly dropped: number;
  /** Spans given up: retries exhausted, a status that is not retried, the encoder threw, or in flight when `close` aborted. */
  readonly failed: number;
  /** Export requests: batches accepted, attempts retried, batches given up. */
  readonly exports: { readonly ok: number; readonly retried: number; readonly failed: number };
}

/** What the collector's answer is read of at most; the rest is discarded with the connection. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** A log line of one kind at most this often; the lines in between are counted into the next. */
const LOG_EVERY_MS = 60_000;
/** OTLP/HTTP, "Failures": the statuses that may be retried; every other 4xx and 5xx must not be. */
const RETRYABLE = new Set([429, 502, 503, 504]);

type Outcome =
  | { readonly kind: 'status'; readonly status: number; readonly retryAfter: string | undefined; readonly body: Buffer }
  | { readonly kind: 'timeout' | 'network' | 'aborted'; readonly code: string | undefined };

export class SpanExporter {
  readonly #o: Required<Omit<SpanExporterOptions, 'log'>>;
  readonly #log: ExporterLog | undefined;
  readonly #pool: Pool;
  readonly #path: string;
  readonly #headers: Record<string, string>;
  #queue: SpanData[] = [];
  /** Spans accepted by `enqueue`, and of them those taken into a batch and those done with (any outcome). */
  #accepted = 0;
  #taken = 0;
  #settled = 0;
  /** The batch in flight, while there is one. */
  #inFlight = 0;
  #exported = 0;
  #dropped = 0;
  #failed = 0;
  #exportsOk = 0;
  #retried = 0;
  #exportsFailed = 0;
  /** Exports run until `#settled` reaches this (a `flush` asked for what was queued when it was called). */
  #flushTarget = 0;
  readonly #flushWaiters = new Set<{ readonly target: number; readonly resolve: () => void }>();
  #running = false;
  /** The schedule delay ran out: the next export may send less than a full batch. */
  #due = false;
  #timer: NodeJS.Timeout | undefined;
  #kick: NodeJS.Immediate | undefined;
  #closed = false;
  #aborted = false;
  #closing: Promise<void> | undefined;
  /** The attempt in flight, and the backoff being waited out, so that `close` can cut both short. */
  #attempt: AbortController | undefined;
  #wake: (() => void) | undefined;
  readonly #lastLog = new Map<string, { at: number; since: number }>();

  constructor(options: SpanExporterOptions) {
    this.#o = {
      maxQueueSpans: 2048,
      maxBatchSpans: 512,
      delayMs: 1000,
      timeoutMs: 10_000,
      maxAttempts: 5,
      batchTimeoutMs: 30_000,
      initialBackoffMs: 500,
      maxBackoffMs: 5000,
      ...definedOnly(options),
    } as Required<Omit<SpanExporterOptions, 'log'>>;
    this.#log = options.log;
    const { endpoint, timeoutMs } = this.#o;
    this.#path = endpoint.pathname + endpoint.search;
    // One connection: one export in flight at most. headersTimeout and bodyTimeout default to
    // 300 s in undici, so they are bounded here too, besides the attempt's own abort timer.
    this.#pool = new Pool(endpoint.origin, { connections: 1, connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    const headers: Record<string, string> = { 'user-agent': 'petstore-gateway OTLP exporter' };
    for (const [k, v] of Object.entries(options.headers)) headers[k.toLowerCase()] = v;
    headers['content-type'] = this.#o.contentType;
    this.#headers = headers;
  }

  /** Queues a finished span; false when it was dropped (queue full, or closed). Never throws, never waits. */
  enqueue(span: SpanData): boolean {
    if (this.#closed || this.#queue.length >= this.#o.maxQueueSpans) {
      this.#dropped++;
      this.#note('dropped', { dropped: this.#dropped }, 'spans dropped: the export queue is full or closed');
      return false;
    }
    this.#queue.push(span);
    this.#accepted++;
    if (!this.#running) {
      if (this.#queue.length >= this.#o.maxBatchSpans) this.#start();
      else if (this.#timer === undefined) this.#arm();
    }
    return true;
  }

  /**
   * Exports every span queued now; resolves when they are done with (exported or given up), or
   * after `deadlineMs` milliseconds (default: the request timeout), whichever comes first. Never
   * rejects; what is still in flight at the deadline goes on.
   */
  flush(deadlineMs: number = this.#o.timeoutMs): Promise<void> {
    const target = this.#accepted;
    if (this.#settled >= target) return Promise.resolve();
    if (target > this.#flushTarget) this.#flushTarget = target;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#flushWaiters.delete(waiter);
        resolve();
      };
      const waiter = { target, resolve: done };
      const timer = setTimeout(done, Math.max(0, deadlineMs));
      this.#flushWaiters.add(waiter);
      if (!this.#running) this.#start();
    });
  }

  /**
   * Stops the schedule, exports what is queued within `graceMs`, then aborts what is still in
   * flight and drops what is still queued (both counted). Later spans are dropped. Never rejects.
   */
  close(graceMs: number): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    this.#closed = true;
    this.#disarm();
    this.#closing = this.flush(graceMs).then(() => this.#abort());
    return this.#closing;
  }

  stats(): ExporterStats {
    return {
      queued: this.#queue.length,
      exported: this.#exported,
      dropped: this.#dropped,
      failed: this.#failed,
      exports: { ok: this.#exportsOk, retried: this.#retried, failed: this.#exportsFailed },
    };
  }

  #arm(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#due = true;
      if (!this.#running) this.#start();
    }, this.#o.delayMs);
    this.#timer.unref();
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Starts the export loop on a later turn (never inside `enqueue`'s caller), once. */
  #start(): void {
    if (this.#kick !== undefined || this.#running || this.#aborted) return;
    this.#disarm();
    this.#kick = setImmediate(() => {
      this.#kick = undefined;
      if (this.#running || this.#aborted) return;
      this.#running = true;
      this.#run().then(
        () => this.#after(),
        (err: unknown) => {
          // #run catches all it awaits; this is a bug's last barrier, not a path.
          this.#note('bug', { error: errorCode(err) }, 'span export loop failed');
          this.#after();
        },
      );
    });
  }

  #after(): void {
    this.#running = false;
    if (this.#aborted || this.#queue.length === 0) return;
    if (this.#queue.length >= this.#o.maxBatchSpans || this.#flushTarget > this.#taken) this.#start();
    else if (this.#timer === undefined) this.#arm();
  }

  /** Exports batches while one is full, a flush wants them, or the delay ran out (then one). */
  async #run(): Promise<void> {
    while (!this.#aborted && this.#queue.length > 0) {
      const wanted = this.#queue.length >= this.#o.maxBatchSpans || this.#flushTarget > this.#taken || this.#due;
      if (!wanted) return;
      this.#due = false;
      this.#disarm();
      const batch = this.#queue.length <= this.#o.maxBatchSpans ? this.#queue : this.#queue.slice(0, this.#o.maxBatchSpans);
      this.#queue = batch === this.#queue ? [] : this.#queue.slice(batch.length);
      this.#taken += batch.length;
      this.#inFlight = batch.length;
      await this.#exportBatch(batch);
    }
  }

  /** One batch: encode, then attempts until accepted, refused, out of attempts, or aborted. */
  async #exportBatch(batch: readonly SpanData[]): Promise<void> {
    let body: Uint8Array | string;
    try {
      body = this.#o.encode(this.#o.source, batch);
    } catch (err) {
      this.#giveUp(batch.length, { error: 'encode', code: errorCode(err) });
      return;
    }
    const started = performance.now();
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#send(body);
      if (this.#aborted) return; // `#abort` counted the batch
      if (outcome.kind === 'status' && outcome.status >= 200 && outcome.status < 300) {
        this.#accept(batch.length, outcome.body);
        return;
      }
      const retryable = outcome.kind === 'status' ? RETRYABLE.has(outcome.status) : true;
      const why = outcome.kind === 'status' ? { status: outcome.status } : { error: outcome.kind, code: outcome.code };
      const wait = this.#backoff(attempt, outcome.kind === 'status' ? outcome.retryAfter : undefined);
      if (!retryable || attempt >= this.#o.maxAttempts || performance.now() - started + wait >= this.#o.batchTimeoutMs) {
        this.#giveUp(batch.length, { ...why, attempts: attempt });
        return;
      }
      this.#retried++;
      await this.#sleep(wait);
      if (this.#aborted) return;
    }
  }

  /** One POST, bounded by `timeoutMs` from the connection to the end of the answer's (bounded) body. */
  async #send(body: Uint8Array | string): Promise<Outcome> {
    const ac = new AbortController();
    this.#attempt = ac;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, this.#o.timeoutMs);
    timer.unref();
    try {
      const res = await this.#pool.request({
        path: this.#path,
        method: 'POST',
        headers: this.#headers,
        body,
        signal: ac.signal,
        headersTimeout: this.#o.timeoutMs,
        bodyTimeout: this.#o.timeoutMs,
      });
      const retryAfter = res.headers['retry-after'];
      const answer = await readBounded(res.body, MAX_RESPONSE_BYTES);
      return { kind: 'status', status: res.statusCode, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, body: answer };
    } catch (err) {
      const code = errorCode(err);
      if (this.#aborted) return { kind: 'aborted', code };
      const timeout = timedOut || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
      return { kind: timeout ? 'timeout' : 'network', code };
    } finally {
      clearTimeout(timer);
      if (this.#attempt === ac) this.#attempt = undefined;
    }
  }

  /**
   * The wait before attempt `attempt + 1`: the collector's `Retry-After` (seconds or an HTTP
   * date) when it sent one, else `initialBackoffMs` doubled per retry with ±20 % jitter (as the
   * OTel SDKs do); never more than `maxBackoffMs`.
   */
  #backoff(attempt: number, retryAfter: string | undefined): number {
    const max = this.#o.maxBackoffMs;
    const asked = retryAfterMs(retryAfter);
    if (asked !== undefined) return Math.min(max, asked);
    const base = Math.min(max, this.#o.initialBackoffMs * 2 ** (attempt - 1));
    return Math.min(max, Math.round(base * (0.8 + Math.random() * 0.4)));
  }

  /** An unref'd wait that `close` ends early. */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        if (this.#wake === wake) this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      this.#wake = wake;
    });
  }

  #accept(spans: number, answer: Buffer): void {
    this.#exported += spans;
    this.#exportsOk++;
    this.#settle(spans);
    const rejected = rejectedSpans(answer, this.#o.contentType);
    if (rejected > 0) this.#note('partial', { rejected }, 'the collector accepted an export in part');
  }

  #giveUp(spans: number, why: Record<string, unknown>): void {
    this.#failed += spans;
    this.#exportsFailed++;
    this.#settle(spans);
    this.#note('failed', { ...why, spans, failed: this.#failed }, 'span export failed');
  }

  #settle(spans: number): void {
    this.#inFlight = 0;
    this.#settled += spans;
    for (const w of this.#flushWaiters) if (w.target <= this.#settled) w.resolve();
  }

  /** `close`'s end: aborts the attempt in flight or the backoff, drops what is queued, closes the pool. */
  #abort(): void {
    this.#aborted = true;
    this.#disarm();
    if (this.#kick !== undefined) clearImmediate(this.#kick);
    this.#kick = undefined;
    if (this.#inFlight > 0) this.#giveUp(this.#inFlight, { error: 'aborted' });
    const left = this.#queue.length;
    if (left > 0) {
      this.#queue = [];
      this.#dropped += left;
      this.#settle(left);
      this.#note('dropped', { dropped: this.#dropped }, 'spans dropped: still queued when the exporter closed');
    }
    this.#attempt?.abort();
    this.#wake?.();
    this.#pool.destroy().catch(() => undefined);
  }

  /** A warning of `kind`, at most once per `LOG_EVERY_MS`; `suppressed` counts those left out since the last. */
  #note(kind: string, fields: Record<string, unknown>, message: string): void {
    if (this.#log === undefined) return;
    const now = Date.now();
    const last = this.#lastLog.get(kind);
    if (last !== undefined && now - last.at < LOG_EVERY_MS) {
      last.since++;
      return;
    }
    this.#lastLog.set(kind, { at: now, since: 0 });
    try {
      this.#log.warn({ kind, ...fields, suppressed: last?.since ?? 0 }, message);
    } catch {
      // A logger that throws must not stop an export or a request.
    }
  }
}

function definedOnly(o: SpanExporterOptions): Partial<SpanExporterOptions> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  const name = (err as { name?: unknown }).name;
  return typeof name === 'string' ? name : undefined;
}

/** Reads at most `limit` bytes of an answer and discards the rest (destroying the stream). */
async function readBounded(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size + chunk.length > limit) {
      body.destroy();
      break;
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks, size);
}

/** `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as milliseconds from now. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * `ExportTraceServiceResponse.partial_success.rejected_spans` of a 200's body, 0 when absent or
 * unreadable: OTLP/JSON (`partialSuccess.rejectedSpans`, a number or a decimal string) or
 * protobuf (field 1, a message; its field 1, a varint).
 */
export function rejectedSpans(body: Uint8Array, contentType: string): number {
  if (body.length === 0) return 0;
  try {
    if (contentType === 'application/json') {
      const parsed = JSON.parse(Buffer.from(body).toString('utf8')) as { partialSuccess?: { rejectedSpans?: unknown } };
      const n = Number(parsed.partialSuccess?.rejectedSpans ?? 0);
      return Number.isFinite(n) && n > 0 ? n : 0;
    }
    const partial = protoField(body, 1, 2);
    const n = partial instanceof Uint8Array ? protoField(partial, 1, 0) : undefined;
    return typeof n === 'number' && n > 0 ? n : 0;
  } catch {
    return 0;
  }
}

/** The last occurrence of field `field` with wire type `wire` (0 varint, 2 bytes) in a message; throws on a malformed one. */
function protoField(buf: Uint8Array, field: number, wire: 0 | 2): number | Uint8Array | undefined {
  let pos = 0;
  let found: number | Uint8Array | undefined;
  const varint = (): number => {
    let v = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      if (pos >= buf.length) throw new Error('truncated');
      const b = buf[pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
    throw new Error('varint too long');
  };
  while (pos < buf.length) {
    const key = varint();
    const f = Math.floor(key / 8);
    const w = key & 7;
    if (w === 0) {
      const v = varint();
      if (f === field && wire === 0) found = v;
    } else if (w === 2) {
      const len = varint();
      if (pos + len > buf.length) throw new Error('truncated');
      if (f === field && wire === 2) found = buf.subarray(pos, pos + len);
      pos += len;
    } else if (w === 1) pos += 8;
    else if (w === 5) pos += 4;
    else throw new Error('unsupported wire type');
  }
  return found;
}
