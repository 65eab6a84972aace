/**
 * The access log: one JSON line per finished request, written once from
 * the ExchangeRecord after the response (Envoy's access log, Kong's log phase), in pino's NDJSON
 * format on the process's pino destination.
 *
 * What a line never holds: an API key, an Authorization header, a query value other than listPets'
 * `limit` and `status`. The record carries none of them (src/core/record.ts), and this module
 * copies fields one by one, never the record or a header map as a whole, so a field added to the
 * record later cannot leak into the log by accident.
 *
 * Cost: the line is built here from its known fields (every string JSON-escaped:
 * printable ASCII without `"` or `\\` as it is, anything else through JSON.stringify, so nothing
 * a client sends can break out of its field) rather than by pino's
 * generic serialiser, and lines are handed to the destination in batches, as nginx's
 * `access_log ... buffer= flush=` does: when 16 KiB are pending, or `flushMs` (20 ms) after the
 * first pending line, whichever comes first. A loaded gateway then makes one write system call
 * per batch instead of one per request (each write is thread-pool and kernel work the process
 * pays). Memory stays bounded: by the batch here, and in the destination by LOG_MAX_PENDING (lines
 * past it are dropped and counted; log-destination.ts). `flush()` hands over what is pending at once
 * (close() and the process's exit do it), so an exit loses no line.
 */
import { pino, type Logger } from 'pino';
import type { ExchangeObserver, ExchangeRecord } from '../core/record.js';
import { declaredValues, type RecordFacts } from '../core/facts.js';
import type { SchemaType } from '../core/options.js';
import { logDestination, type LineStream } from './log-destination.js';

/** The `log` section of the policy file, for src/config/schema.ts to compose. */
export const LOG_SCHEMA = {
  type: 'object',
  description: 'What the gateway writes to stdout (NDJSON, one object per line).',
  additionalProperties: false,
  default: {},
  properties: {
    access: { type: 'boolean', default: true, description: 'One JSON line per request (time, request id, method, route, status, durations, bytes, client, consumer key id); false turns it off.' },
    level: {
      type: 'string',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
      description: 'The least severe operator message written (the LOG_LEVEL environment variable wins). Access lines are written at info.',
    },
  },
} as const;

/** The `log` section, defaults filled: `level` is one of pino's levels or `silent`. */
export type LogConfig = SchemaType<typeof LOG_SCHEMA>;

/** What the operator configured about a consumer, for the line: never the key or its hash. */
export interface ConsumerInfo {
  /** When the key stops being accepted, ISO 8601. */
  readonly expires?: string;
  readonly scopes?: readonly string[];
}

export interface AccessLogOptions {
  /**
   * The logger to write through, e.g. the process's root logger so operator messages and access
   * lines share one destination (two writers on one pipe could interleave large writes). Absent:
   * a logger of its own on stdout, asynchronous.
   */
  readonly logger?: Logger;
  /** Where the own logger writes when no logger is given: a file descriptor or a path. Default 1 (stdout). */
  readonly destination?: number | string;
  /** Extra facts about a consumer (key id) for the line; called per line, so it should be a map lookup. */
  readonly consumerInfo?: (consumer: string) => ConsumerInfo | undefined;
  /** Longest a line waits for its batch to be written, ms (default 20). */
  readonly flushMs?: number;
}

/**
 * Pending bytes (as UTF-16 code units) past which the batch is written at once. A larger batch
 * cuts a line's share of the writes a little, but RSS then grows under many connections, the
 * reader of the pipe being busy; at this size it stays flat (bench/scaling.mjs).
 */
export const ACCESS_BATCH_CHARS = 16 * 1024;

/** One access line's fields, in the order they are written. Undefined fields are left out. */
export interface AccessLine {
  readonly reqId: string;
  readonly method: string;
  readonly route: string;
  readonly operation: string | undefined;
  readonly status: number;
  readonly errorCode: string | undefined;
  readonly rejectedBy: string | undefined;
  /** Milliseconds, to the microsecond. */
  readonly durationMs: number;
  readonly upstreamStatus: number | undefined;
  readonly upstreamMs: number | undefined;
  readonly upstreamFailure: string | undefined;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly client: string | undefined;
  readonly protocol: string | undefined;
  readonly consumer: string | undefined;
  readonly consumerExpires: string | undefined;
  readonly consumerScopes: readonly string[] | undefined;
  /** Then the fields the policies declared (`record.facts.logFields`, e.g. list-pets' `limit`), as text. */
  readonly [declared: string]: string | number | readonly string[] | undefined;
}

function ms(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/** The fields of the line for one record (exported for tests and for a logger of the lead's own). */
export function accessLine(r: ExchangeRecord, consumerInfo?: (consumer: string) => ConsumerInfo | undefined): AccessLine {
  const info = r.consumer !== undefined && consumerInfo !== undefined ? consumerInfo(r.consumer) : undefined;
  return {
    reqId: r.requestId,
    method: r.method,
    route: r.route,
    operation: r.operation,
    status: r.status,
    errorCode: r.errorCode,
    rejectedBy: r.rejectedBy,
    durationMs: ms(r.durationMs),
    upstreamStatus: r.upstreamStatus,
    upstreamMs: r.upstreamMs === undefined ? undefined : ms(r.upstreamMs),
    upstreamFailure: r.upstreamFailure,
    bytesIn: r.bytesIn,
    bytesOut: r.bytesOut,
    client: r.clientAddress,
    protocol: r.protocol,
    consumer: r.consumer,
    consumerExpires: info?.expires,
    consumerScopes: info?.scopes,
    ...declaredValues(r.facts),
  };
}

/** The declared facts of a record as the line's text (`,"limit":"20"`), written as `str` writes. */
function declaredPart(facts: RecordFacts): string {
  let text = '';
  for (const f of facts.logFields) {
    const v = facts.get<string | number>(f.slot);
    if (v !== undefined) text += str(f.name, typeof v === 'string' ? v : String(v));
  }
  return text;
}

/** Access logs holding lines not yet handed over, flushed synchronously if the process exits. */
const withPending = new Set<AccessLog>();
let exitHook = false;
function flushAtExit(): void {
  for (const log of withPending) log.flush(true);
}

/**
 * Where the fields of a route and operation are kept: 3 routes (the two templates and `unknown`)
 * times 4 operations (the three and none). A record's route and operation are always in these sets
 * (src/core/record.ts); anything else (-1) is written afresh each time, never kept.
 */
function routeSlot(route: string, operation: string | undefined): number {
  const r = route === '/v1/pets' ? 0 : route === '/v1/pets/{petId}' ? 1 : route === 'unknown' ? 2 : -1;
  const o = operation === undefined ? 0 : operation === 'listPets' ? 1 : operation === 'createPet' ? 2 : operation === 'getPet' ? 3 : -1;
  return r < 0 || o < 0 ? -1 : r * 4 + o;
}

/** Most methods and consumers whose field texts are kept for reuse (each a few dozen bytes). */
const MAX_CACHED = 4096;

/** Printable ASCII without `"` and `\\`: such a string is its own JSON text between quotes. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A string field, escaped as JSON; an absent one is left out (as pino leaves out undefined). */
function str(name: string, value: string | undefined): string {
  if (value === undefined) return '';
  // JSON.stringify only when needed: ids, routes and addresses are plain (a much cheaper line).
  return PLAIN.test(value) ? `,"${name}":"${value}"` : `,"${name}":${JSON.stringify(value)}`;
}

/** A number field (never NaN or Infinity in a record; JSON's null should one ever come). */
function num(name: string, value: number | undefined): string {
  return value === undefined ? '' : `,"${name}":${Number.isFinite(value) ? String(value) : 'null'}`;
}

/**
 * A duration field in milliseconds to the microsecond, as `ms()` rounds it, written from integers
 * ("12.346", "7.250"): a double's shortest decimal form costs more than the rest of the line.
 */
function millis(name: string, value: number | undefined): string {
  if (value === undefined) return '';
  if (!Number.isFinite(value) || value < 0) return num(name, ms(value));
  const us = Math.round(value * 1000);
  const whole = Math.floor(us / 1000);
  const frac = us - whole * 1000;
  return `,"${name}":${whole}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}`;
}

/**
 * The access log: an ExchangeObserver writing one line per request at level info with the message
 * `request` (and `"log":"access"`, so a pipeline can split access lines from operator messages).
 * The line has pino's shape for the logger it is given (level, time as the logger writes it, the
 * logger's bindings such as pid, the fields, msg); the logger's own serialisers and hooks are not
 * applied (the fields are plain values).
 *
 * @example
 *   const access = new AccessLog({ logger: rootLogger });
 *   exchange.observers.push(access);
 *   // on shutdown, after the drain:
 *   await access.close();
 */
export class AccessLog implements ExchangeObserver {
  readonly logger: Logger;
  private readonly stream: LineStream;
  /** The logger's time field writer (`,"time":...`) and bindings (`,"pid":1,"log":"access"`). */
  private readonly time: () => string;
  private readonly bindings: string;
  private readonly ownDestination: boolean;
  private readonly consumerInfo: ((consumer: string) => ConsumerInfo | undefined) | undefined;
  private pending = '';
  private readonly flushMs: number;
  private timer: NodeJS.Timeout | undefined = undefined;
  /** The time field of the current millisecond (pino's time functions write milliseconds). */
  private timeMs = -1;
  private timeText = '';
  private readonly flushSoon = (): void => {
    this.timer = undefined;
    this.flush();
  };
  /** The method, route and operation fields, written once per combination: per method, by `routeSlot`. */
  private readonly routeFields = new Map<string, Array<string | undefined>>();
  /** The consumer fields per key id, written again only when its facts change (a reload). */
  private readonly consumerFields = new Map<string, { readonly info: ConsumerInfo | undefined; readonly text: string }>();

  constructor(options: AccessLogOptions = {}) {
    this.consumerInfo = options.consumerInfo;
    this.flushMs = options.flushMs ?? 20;
    const own = options.logger === undefined ? logDestination(options.destination ?? 1) : undefined;
    const parent = options.logger ?? pino({ level: 'info', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, own);
    this.ownDestination = own !== undefined;
    this.logger = parent.child({ log: 'access' });
    // pino.symbols (exposed for integrations), not logger.info(): that costs over 3% of a route's req/s (docs/choices.md, "Libraries").
    // Where the logger writes, how it writes time, its bindings; the "pino's shape" test fails if pino changes them.
    const internals = this.logger as unknown as Record<symbol, unknown>;
    this.stream = own ?? (internals[pino.symbols.streamSym] as LineStream);
    this.time = internals[pino.symbols.timeSym] as () => string;
    this.bindings = internals[pino.symbols.chindingsSym] as string;
    if (!exitHook) {
      exitHook = true;
      process.on('exit', flushAtExit);
    }
  }

  onEnd(record: ExchangeRecord): void {
    if (!this.logger.isLevelEnabled('info')) return;
    let line: string;
    try {
      line = this.format(record);
    } catch {
      // A log fault (a consumerInfo hook that throws) must not fail the request or the other observers.
      return;
    }
    if (this.pending === '') {
      withPending.add(this);
      this.timer = setTimeout(this.flushSoon, this.flushMs);
      // A pending batch never keeps the process alive (exit and close() write it).
      this.timer.unref();
    }
    this.pending += line;
    if (this.pending.length >= ACCESS_BATCH_CHARS) this.flush();
  }

  /**
   * One line, newline included: the fields of `accessLine` in its order, read from the record one
   * by one. The method/route/operation and consumer fields repeat from request to request, so they
   * are written once per value and reused (a third of a line's cost).
   */
  format(record: ExchangeRecord): string {
    const consumer = record.consumer;
    return (
      `{"level":30${this.timeField()}${this.bindings}` +
      str('reqId', record.requestId) +
      this.routePart(record.method, record.route, record.operation) +
      num('status', record.status) +
      str('errorCode', record.errorCode) +
      str('rejectedBy', record.rejectedBy) +
      millis('durationMs', record.durationMs) +
      num('upstreamStatus', record.upstreamStatus) +
      millis('upstreamMs', record.upstreamMs) +
      str('upstreamFailure', record.upstreamFailure) +
      num('bytesIn', record.bytesIn) +
      num('bytesOut', record.bytesOut) +
      str('client', record.clientAddress) +
      str('protocol', record.protocol) +
      (consumer === undefined ? '' : this.consumerPart(consumer)) +
      declaredPart(record.facts) +
      ',"msg":"request"}\n'
    );
  }

  private routePart(method: string, route: string, operation: string | undefined): string {
    let slots = this.routeFields.get(method);
    if (slots === undefined) {
      slots = [];
      // Node's parser accepts a few dozen methods: bounded anyway.
      if (this.routeFields.size < MAX_CACHED) this.routeFields.set(method, slots);
    }
    const slot = routeSlot(route, operation);
    let text = slot < 0 ? undefined : slots[slot];
    if (text === undefined) {
      text = str('method', method) + str('route', route) + str('operation', operation);
      if (slot >= 0) slots[slot] = text;
    }
    return text;
  }

  private consumerPart(consumer: string): string {
    const info = this.consumerInfo?.(consumer);
    const cached = this.consumerFields.get(consumer);
    if (cached !== undefined && cached.info === info) return cached.text;
    const text =
      str('consumer', consumer) + str('consumerExpires', info?.expires) + (info?.scopes === undefined ? '' : `,"consumerScopes":${JSON.stringify(info.scopes)}`);
    // Key ids come from the policy file (only an accepted key has one): bounded by the config.
    if (this.consumerFields.size >= MAX_CACHED) this.consumerFields.clear();
    this.consumerFields.set(consumer, { info, text });
    return text;
  }

  /** The logger's time field, formatted once per millisecond (toISOString is most of a line's cost). */
  private timeField(): string {
    const now = Date.now();
    if (now !== this.timeMs) {
      this.timeMs = now;
      this.timeText = this.time();
    }
    return this.timeText;
  }

  /**
   * Hands the pending lines to the destination now (one write). With `sync`, also has the
   * destination write everything it holds before returning (at process exit).
   */
  flush(sync = false): void {
    const data = this.pending;
    if (data !== '') {
      this.pending = '';
      withPending.delete(this);
      if (this.timer !== undefined) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
      try {
        this.stream.write(data);
      } catch {
        // A destroyed destination (after close): the lines cannot be written anywhere.
      }
    }
    if (sync) {
      try {
        this.stream.flushSync?.();
      } catch {
        // Not open yet or already closed: nothing more can be done at exit.
      }
    }
  }

  /**
   * Writes what is pending and, for a destination of its own, closes it (stdout stays open).
   * With a logger passed in, the logger's owner flushes the destination.
   */
  close(): Promise<void> {
    this.flush();
    if (!this.ownDestination) return Promise.resolve();
    const dest = this.stream;
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, 5000); // bounded: a stuck pipe must not hold shutdown forever
      timer.unref();
      dest.once?.('close', () => {
        clearTimeout(timer);
        resolve();
      });
      dest.end?.();
    });
  }
}
