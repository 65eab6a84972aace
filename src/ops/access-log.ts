/**
 * The access log (issue 13, "Access log"): one JSON line per finished request, written once from
 * the ExchangeRecord after the response (Envoy's access log, Kong's log phase), through pino.
 *
 * What a line never holds: an API key, an Authorization header, a query value other than listPets'
 * `limit` and `status`. The record carries none of them (src/core/record.ts), and this module
 * copies fields one by one, never the record or a header map as a whole, so a field added to the
 * record later cannot leak into the log by accident.
 *
 * Writing is asynchronous (pino.destination({ sync: false }): lines are buffered and written by
 * sonic-boom without blocking the event loop per line); `close()` flushes what is buffered, and
 * pino's destination flushes itself synchronously on process exit (its own exit hook), so an
 * exit without close() loses no line either.
 */
import { pino, type DestinationStream, type Level, type Logger } from 'pino';
import type { ExchangeObserver, ExchangeRecord } from '../core/record.js';

/**
 * The process's log destination (stdout by default): asynchronous, so a slow reader of stdout
 * does not hold the event loop; `logger.flush(cb)` writes what is pending (at exit). Batching
 * lines (sonic-boom's minLength 4 KiB with a periodic flush) cut the CPU of logging but made RSS
 * grow by 30 MB in 6 s at 1,000 connections (bench/scaling.mjs), so each line is written as it
 * comes.
 */
export function logDestination(dest: number | string = 1): DestinationStream {
  return pino.destination({ dest, sync: false });
}

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

export interface LogConfig {
  readonly access: boolean;
  readonly level: Level | 'silent';
}

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
}

/** One access line's fields, in the order they are written. Undefined fields are left out by pino. */
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
  readonly consumer: string | undefined;
  readonly consumerExpires: string | undefined;
  readonly consumerScopes: readonly string[] | undefined;
  readonly limit: string | undefined;
  readonly statusFilter: string | undefined;
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
    consumer: r.consumer,
    consumerExpires: info?.expires,
    consumerScopes: info?.scopes,
    limit: r.limit,
    statusFilter: r.statusFilter,
  };
}

/**
 * The access log: an ExchangeObserver writing one line per request at level info with the message
 * `request` (and `"log":"access"`, so a pipeline can split access lines from operator messages).
 *
 * @example
 *   const access = new AccessLog({ logger: rootLogger });
 *   exchange.observers.push(access);
 *   // on shutdown, after the drain:
 *   await access.close();
 */
export class AccessLog implements ExchangeObserver {
  readonly logger: Logger;
  private readonly destination: (DestinationStream & { end?(): void; once?(e: string, f: () => void): void }) | undefined;
  private readonly consumerInfo: ((consumer: string) => ConsumerInfo | undefined) | undefined;

  constructor(options: AccessLogOptions = {}) {
    this.consumerInfo = options.consumerInfo;
    if (options.logger !== undefined) {
      this.logger = options.logger.child({ log: 'access' });
      this.destination = undefined;
    } else {
      const dest = pino.destination({ dest: options.destination ?? 1, sync: false });
      this.destination = dest;
      this.logger = pino({ level: 'info', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, dest).child({ log: 'access' });
    }
  }

  onEnd(record: ExchangeRecord): void {
    try {
      this.logger.info(accessLine(record, this.consumerInfo), 'request');
    } catch {
      // A log fault (a consumerInfo hook that throws) must not fail the request or the other observers.
    }
  }

  /**
   * Writes what is buffered and, for a destination of its own, closes it (stdout stays open).
   * With a logger passed in, the logger's owner flushes it.
   */
  close(): Promise<void> {
    const dest = this.destination;
    if (dest === undefined) return Promise.resolve();
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
