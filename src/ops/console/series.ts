/**
 * The operator console's recorder (docs/console.md): counts every finished request by operation
 * and consumer in minute slots (the last hour) and hour slots (the last day), the calls of
 * deprecated operations per consumer and UTC day, each consumer's first and last request, and the
 * upstream contract violations by rule (src/ops/console/violations.ts). In process memory,
 * bounded; `snapshot()` is what the console's views read, `takeDelta()` what the fleet's Redis
 * rollup adds.
 *
 * Cost per request: `onEnd` allocates nothing when the request falls in the minute and hour its
 * cell counted last (the common case): one Map lookup by consumer, one by operation (a small
 * Map, to an index into the consumer's cells), no key string made; the slots' numbers are rows of
 * typed arrays (src/ops/console/slots.ts) and times are slot numbers, never boxed.
 *
 * Memory, worst case, 1,000 consumers x 4 operations (4,000 cells, each counted in every one of
 * the last 60 minutes and 24 hours): a slot is SLOT_WIDTH (31) 32-bit numbers, 124 bytes; a cell
 * holds at most 60 + 24 of them (10,416 bytes), its rings' slot and row numbers (84 x 8 = 672
 * bytes) and a few small objects (about 1 KB): about 12 KB a cell, 49 MB for the 4,000 cells
 * (41.7 MB of it the rows, in chunks of 1,024 rows: at most one chunk, 127 KB, unused).
 * `trackDelta` adds the rows counted since the last `takeDelta`: at most as many again, two per
 * cell touched in between when the rollup takes them every few seconds. Each deprecated operation
 * adds at most DAYS_KEPT (400) days x 16 bytes per consumer (6.4 MB for 1,000 consumers).
 * Violations: at most 65 rules per operation and 50 samples. Slots older than the windows are
 * dropped when `snapshot` runs (their rows reused), and a slot's place in its ring is reused 60
 * minutes (24 hours) later whatever runs.
 */
import type { LogField } from '../../core/facts.js';
import type { ExchangeObserver, ExchangeRecord } from '../../core/record.js';
import { COUNTERS, DAYS_KEPT, HOURS_KEPT, MINUTES_KEPT, NOBODY, OTHER_CONSUMER, type CellSnapshot, type ConsoleSnapshot, type CounterName, type DailySnapshot, type SnapshotSource } from './types.js';
import { bucketOf, countDay, DAY_MS, HOUR_MS, MINUTE_MS, Ring, Rows } from './slots.js';
import { ViolationBook } from './violations.js';

/** The access-log field response-contract declares: why an answer broke the interface. */
export const VIOLATION_FIELD = 'contractViolation';

const CLIENT = 1;
const GATEWAY = 2;
const UPSTREAM = 3;
const RATE_LIMITED = 4;
const ABORTED = 5;

/** Catalogue codes of 5xx answers the upstream caused (src/core/errors.ts). */
const UPSTREAM_CODES: ReadonlySet<string> = new Set([
  'bad_gateway',
  'upstream_unavailable',
  'upstream_contract_violation',
  'upstream_error',
  'upstream_auth_failed',
  'upstream_tls_error',
  'upstream_timeout',
]);

/**
 * The counter a request counts in beside `requests` (an index of COUNTERS), -1 for none (a 1xx,
 * 2xx or 3xx answer). 5xx: the upstream's when its call failed, it answered 5xx, or the code is
 * one of UPSTREAM_CODES. A 503 `service_unavailable` no policy refused and no upstream answered
 * is the circuit breaker's (the only such answer the exchange makes): the upstream's too. A 503 a
 * policy refused (the rate-limit store down: `rejectedBy` set) is the gateway's, as a draining
 * 503 would be (it must carry its refuser or a code of its own); so is any other 5xx.
 */
export function counterIndex(r: ExchangeRecord): number {
  const status = r.status;
  if (status === 0) return ABORTED;
  if (status === 429) return RATE_LIMITED;
  if (status < 400) return -1;
  if (status < 500) return CLIENT;
  if (r.upstreamFailure !== undefined || (r.upstreamStatus !== undefined && r.upstreamStatus >= 500)) return UPSTREAM;
  const code = r.errorCode;
  if (code === undefined) return GATEWAY;
  if (UPSTREAM_CODES.has(code)) return UPSTREAM;
  if (code === 'service_unavailable' && r.rejectedBy === undefined && r.upstreamStatus === undefined) return UPSTREAM;
  return GATEWAY;
}

/** The counter's name beside `requests` (tests, docs): undefined when only `requests` counts it. */
export function classify(r: ExchangeRecord): CounterName | undefined {
  const i = counterIndex(r);
  return i < 0 ? undefined : COUNTERS[i];
}

/** One operation and consumer: its series, and what changed since the last delta. */
class Cell {
  readonly minutes = new Ring(MINUTE_MS, MINUTES_KEPT);
  readonly hours = new Ring(HOUR_MS, HOURS_KEPT);
  deltaMinutes: Ring | undefined = undefined;
  deltaHours: Ring | undefined = undefined;
  touched = false;

  constructor(
    readonly operation: string,
    readonly consumer: string,
  ) {}
}

/** A consumer's calls of one deprecated operation per UTC day (day numbers), oldest first. */
class Days {
  readonly days: number[] = [];
  readonly counts: number[] = [];
  readonly deltaDays: number[] = [];
  readonly deltaCounts: number[] = [];
  touched = false;

  constructor(
    readonly operation: string,
    readonly consumer: string,
  ) {}
}

/** A consumer as counted: its first and last request, and its cells and days by operation index. */
class Consumer {
  first = Infinity;
  last = -Infinity;
  touched = false;
  readonly cells: Array<Cell | undefined> = [];
  readonly days: Array<Days | undefined> = [];

  constructor(readonly id: string) {}
}

export interface ConsoleRecorderOptions {
  /** The operations deprecated now (the deprecation policy's; may change on a reload). */
  readonly deprecatedOperations: () => ReadonlySet<string>;
  /** Distinct consumers counted under their own id; the rest under `_OTHER`. Default 10,000. */
  readonly maxConsumers?: number;
  /** Keep what changed since the last `takeDelta` (the fleet's Redis rollup). */
  readonly trackDelta?: boolean;
  /** Epoch ms (tests move it); default Date.now. */
  readonly now?: () => number;
}

export class ConsoleRecorder implements ExchangeObserver, SnapshotSource {
  /** Consumers by key id (`_OTHER` included); requests no key authenticated count in `nobody`. */
  private readonly consumers = new Map<string, Consumer>();
  private readonly nobody = new Consumer(NOBODY);
  private distinct = 0;
  /** Operations by index (the consumers' cells and days are arrays by it). */
  private readonly operations = new Map<string, number>();
  private readonly rows = new Rows();
  private readonly deltaRows = new Rows();
  private readonly maxConsumers: number;
  private readonly trackDelta: boolean;
  private readonly now: () => number;
  private readonly deprecated: () => ReadonlySet<string>;
  private readonly touchedCells: Cell[] = [];
  private readonly touchedDays: Days[] = [];
  private readonly touchedConsumers: Consumer[] = [];
  private readonly violations: ViolationBook;
  /** The logFields array last seen, and the slot of the violation field in it. */
  private fields: readonly LogField[] | undefined = undefined;
  private violationSlot: LogField['slot'] | undefined = undefined;

  constructor(options: ConsoleRecorderOptions) {
    this.deprecated = options.deprecatedOperations;
    this.maxConsumers = options.maxConsumers ?? 10_000;
    this.trackDelta = options.trackDelta === true;
    this.now = options.now ?? Date.now;
    this.violations = new ViolationBook(this.trackDelta);
  }

  /** Rows of slots in use (kept and, with trackDelta, not yet taken): for tests of the bounds. */
  get rowsInUse(): number {
    return this.rows.inUse + this.deltaRows.inUse;
  }

  onEnd(r: ExchangeRecord): void {
    const consumer = r.consumer === undefined ? this.nobody : this.sighted(r);
    const operation = r.operation ?? NOBODY;
    let op = this.operations.get(operation);
    if (op === undefined) this.operations.set(operation, (op = this.operations.size));
    const cell = consumer.cells[op] ?? this.newCell(consumer, op, operation);
    const counter = counterIndex(r);
    const bucket = bucketOf(r.durationMs);
    // Slot numbers: minutes and hours since 1970, small integers.
    const minute = Math.floor(r.startedAt / MINUTE_MS);
    const hour = Math.floor(r.startedAt / HOUR_MS);
    // The slots of now (the request's end): a slot past them was counted while the clock ran ahead.
    const end = r.startedAt + r.durationMs;
    const minuteNow = Math.floor(end / MINUTE_MS);
    const hourNow = Math.floor(end / HOUR_MS);
    const rows = this.rows;
    let row = cell.minutes.rowFor(minute, rows, minuteNow);
    if (row >= 0) rows.count(row, counter, bucket);
    row = cell.hours.rowFor(hour, rows, hourNow);
    if (row >= 0) rows.count(row, counter, bucket);
    if (this.trackDelta) {
      const delta = this.deltaRows;
      row = (cell.deltaMinutes ??= new Ring(MINUTE_MS, MINUTES_KEPT)).rowFor(minute, delta, minuteNow);
      if (row >= 0) delta.count(row, counter, bucket);
      row = (cell.deltaHours ??= new Ring(HOUR_MS, HOURS_KEPT)).rowFor(hour, delta, hourNow);
      if (row >= 0) delta.count(row, counter, bucket);
      if (!cell.touched) {
        cell.touched = true;
        this.touchedCells.push(cell);
      }
    }
    if (consumer !== this.nobody && this.deprecated().has(operation)) this.countDeprecated(consumer, op, operation, Math.floor(r.startedAt / DAY_MS));
    this.readViolation(r, operation);
  }

  /** The request's consumer as counted (`_OTHER` past maxConsumers), its first and last request noted. */
  private sighted(r: ExchangeRecord): Consumer {
    let consumer = this.consumers.get(r.consumer!);
    if (consumer === undefined) {
      let id = r.consumer!;
      if (this.distinct >= this.maxConsumers) id = OTHER_CONSUMER;
      else this.distinct++;
      consumer = this.consumers.get(id);
      if (consumer === undefined) this.consumers.set(id, (consumer = new Consumer(id)));
    }
    if (r.startedAt < consumer.first) consumer.first = r.startedAt;
    if (r.startedAt > consumer.last) consumer.last = r.startedAt;
    if (this.trackDelta && !consumer.touched) {
      consumer.touched = true;
      this.touchedConsumers.push(consumer);
    }
    return consumer;
  }

  private newCell(consumer: Consumer, op: number, operation: string): Cell {
    const cell = new Cell(operation, consumer.id);
    consumer.cells[op] = cell;
    return cell;
  }

  private countDeprecated(consumer: Consumer, op: number, operation: string, day: number): void {
    let days = consumer.days[op];
    if (days === undefined) consumer.days[op] = days = new Days(operation, consumer.id);
    countDay(days.days, days.counts, day);
    if (this.trackDelta) {
      countDay(days.deltaDays, days.deltaCounts, day);
      if (!days.touched) {
        days.touched = true;
        this.touchedDays.push(days);
      }
    }
  }

  /** Counts the problems of the record's declared `contractViolation` field by rule, and keeps a sample. */
  private readViolation(r: ExchangeRecord, operation: string): void {
    const facts = r.facts;
    if (facts.logFields !== this.fields) {
      this.fields = facts.logFields;
      this.violationSlot = facts.logFields.find((f) => f.name === VIOLATION_FIELD)?.slot;
    }
    if (this.violationSlot === undefined) return;
    const text = facts.get<string | number>(this.violationSlot);
    if (typeof text === 'string' && text.length > 0) this.violations.add(text, operation, r.startedAt, r.requestId, r.upstreamStatus ?? null);
  }

  snapshot(nowMs: number = this.now()): ConsoleSnapshot {
    const minute = Math.floor(nowMs / MINUTE_MS);
    const hour = Math.floor(nowMs / HOUR_MS);
    const today = Math.floor(nowMs / DAY_MS);
    const minutesFrom = minute - MINUTES_KEPT + 1;
    const hoursFrom = hour - HOURS_KEPT + 1;
    const daysFrom = today - DAYS_KEPT + 1;
    const cells: CellSnapshot[] = [];
    const daily: DailySnapshot[] = [];
    const seen: Array<readonly [string, number, number]> = [];
    for (const consumer of [this.nobody, ...this.consumers.values()]) {
      if (consumer !== this.nobody) seen.push([consumer.id, consumer.first, consumer.last]);
      const own = consumer.cells;
      for (let op = 0; op < own.length; op++) {
        const cell = own[op];
        if (cell === undefined) continue;
        // Lazily: slots out of the windows leave now, and a cell with none left (unless a delta holds it).
        const minutesLeft = cell.minutes.drop(minutesFrom, this.rows);
        const hoursLeft = cell.hours.drop(hoursFrom, this.rows);
        if (!minutesLeft && !hoursLeft) {
          if (!cell.touched) own[op] = undefined;
          continue;
        }
        cells.push({ operation: cell.operation, consumer: cell.consumer, minutes: cell.minutes.slots(minutesFrom, minute, this.rows), hours: cell.hours.slots(hoursFrom, hour, this.rows) });
      }
      for (const d of consumer.days) {
        if (d === undefined) continue;
        const days: Array<readonly [number, number]> = [];
        for (let i = 0; i < d.days.length; i++) if (d.days[i]! >= daysFrom && d.days[i]! <= today) days.push([d.days[i]! * DAY_MS, d.counts[i]!]);
        if (days.length > 0) daily.push({ operation: d.operation, consumer: d.consumer, days });
      }
    }
    return { atMs: nowMs, cells, daily, seen, violations: this.violations.rulesNow(), samples: this.violations.newest() };
  }

  takeDelta(nowMs: number = this.now()): ConsoleSnapshot | undefined {
    if (!this.trackDelta) return undefined;
    if (this.touchedCells.length === 0 && this.touchedDays.length === 0 && this.touchedConsumers.length === 0 && !this.violations.changed) return undefined;
    const cells: CellSnapshot[] = this.touchedCells.map((c) => {
      c.touched = false;
      return { operation: c.operation, consumer: c.consumer, minutes: c.deltaMinutes?.take(this.deltaRows) ?? [], hours: c.deltaHours?.take(this.deltaRows) ?? [] };
    });
    const daily: DailySnapshot[] = this.touchedDays.map((d) => {
      d.touched = false;
      const days = d.deltaDays.map((day, i): readonly [number, number] => [day * DAY_MS, d.deltaCounts[i]!]);
      d.deltaDays.length = 0;
      d.deltaCounts.length = 0;
      return { operation: d.operation, consumer: d.consumer, days };
    });
    const seen = this.touchedConsumers.map((c): readonly [string, number, number] => {
      c.touched = false;
      return [c.id, c.first, c.last];
    });
    this.touchedCells.length = 0;
    this.touchedDays.length = 0;
    this.touchedConsumers.length = 0;
    const { violations, samples } = this.violations.takeDelta();
    return { atMs: nowMs, cells, daily, seen, violations, samples };
  }
}
