/**
 * Console snapshots added together: a `--workers` primary adds its workers', the fleet's Redis
 * rollup keeps what was not sent yet (fleet.ts), and the fleet's read is built the same way, so
 * every path that sums snapshots gives the same answer.
 *
 * What adds, and how (types.ts): a cell is one (operation, consumer); its slots with the same start
 * are added number by number; a deprecated operation's daily counts are added; a consumer's first
 * request is the earliest of the two and its last the latest; a violation rule's counts are added
 * and its last time is the latest (at most MAX_RULES rules per operation, the most counted); the
 * samples are the newest MAX_SAMPLES of both. Whatever falls out of the windows kept at `nowMs`
 * (MINUTES_KEPT, HOURS_KEPT, DAYS_KEPT) is left out: a sum holds no more than one snapshot can.
 */
import { DAYS_KEPT, HOURS_KEPT, MINUTES_KEPT, SLOT_WIDTH, type CellSnapshot, type ConsoleSnapshot, type DailySnapshot, type Slot, type ViolationRule, type ViolationSample } from './types.js';

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
/** Violation rules kept per operation (the most counted). */
export const MAX_RULES = 64;
/** Samples kept (the newest). */
export const MAX_SAMPLES = 50;

/** Separates an operation from a consumer, or a rule's parts, in one key: no operationId or key id holds it. */
export const SEP = '\x1f';

/**
 * The first slot start of each window kept at `nowMs`: the current minute and the 59 before it,
 * the current hour and the 23 before, today (UTC) and the DAYS_KEPT - 1 days before. A slot that
 * starts later than now (another instance's clock a little ahead) is kept.
 */
export function keptFrom(nowMs: number): { readonly minute: number; readonly hour: number; readonly day: number } {
  const floor = (ms: number) => nowMs - (((nowMs % ms) + ms) % ms);
  return {
    minute: floor(MINUTE_MS) - (MINUTES_KEPT - 1) * MINUTE_MS,
    hour: floor(HOUR_MS) - (HOURS_KEPT - 1) * HOUR_MS,
    day: floor(DAY_MS) - (DAYS_KEPT - 1) * DAY_MS,
  };
}

interface CellSum {
  readonly operation: string;
  readonly consumer: string;
  readonly minutes: Map<number, number[]>;
  readonly hours: Map<number, number[]>;
}

interface DailySum {
  readonly operation: string;
  readonly consumer: string;
  readonly days: Map<number, number>;
}

interface RuleSum {
  readonly operation: string;
  readonly field: string;
  readonly kind: string;
  count: number;
  lastSeenMs: number;
}

const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Newest first; equal times by request id, then operation, so every sum orders them alike. */
function sampleOrder(a: ViolationSample, b: ViolationSample): number {
  return b.atMs - a.atMs || byText(a.requestId, b.requestId) || byText(a.operation, b.operation);
}

/** The most counted first, then the latest, then by field and kind. */
function ruleOrder(a: RuleSum, b: RuleSum): number {
  return b.count - a.count || b.lastSeenMs - a.lastSeenMs || byText(a.field, b.field) || byText(a.kind, b.kind);
}

function slotsOf(map: Map<number, number[]>, from: number, shared: boolean): Slot[] {
  const out: Slot[] = [];
  for (const [start, values] of map) if (start >= from) out.push([start, shared ? values : values.slice()]);
  return out.sort((a, b) => a[0] - b[0]);
}

/**
 * A running sum of snapshots, in maps (mutable, unlike a snapshot): add snapshots or single
 * numbers, `trim` it to the windows, take a snapshot of it.
 *
 * @example
 *   const sum = new SnapshotSum().add(a).add(b);
 *   const both = sum.snapshot(Date.now());
 */
export class SnapshotSum {
  readonly cells = new Map<string, CellSum>();
  readonly daily = new Map<string, DailySum>();
  /** consumer -> [firstMs, lastMs] */
  readonly seen = new Map<string, [number, number]>();
  readonly rules = new Map<string, RuleSum>();
  /** Newest first, at most MAX_SAMPLES once `add` or `trim` returns. */
  samples: ViolationSample[] = [];

  /** Nothing counted. */
  get empty(): boolean {
    return this.cells.size === 0 && this.daily.size === 0 && this.seen.size === 0 && this.rules.size === 0 && this.samples.length === 0;
  }

  /** The cell of `key` (`<operation>\x1f<consumer>`), made when new. */
  private cell(key: string): CellSum {
    let c = this.cells.get(key);
    if (c === undefined) {
      const sep = key.indexOf(SEP);
      this.cells.set(key, (c = { operation: key.slice(0, sep), consumer: key.slice(sep + 1), minutes: new Map(), hours: new Map() }));
    }
    return c;
  }

  /** Adds one slot's numbers to a cell's minute (`m`) or hour (`h`) slot. */
  addSlot(kind: 'm' | 'h', operation: string, consumer: string, startMs: number, values: readonly number[]): void {
    this.addSlotOf(kind, operation + SEP + consumer, startMs, values);
  }

  /**
   * The same, the cell named by its key `<operation>\x1f<consumer>` (an operation never holds
   * \x1f), and only the first `length` numbers of `values` (a reused buffer; the rest count 0).
   */
  addSlotOf(kind: 'm' | 'h', key: string, startMs: number, values: readonly number[], length = values.length): void {
    const c = this.cell(key);
    const map = kind === 'm' ? c.minutes : c.hours;
    const into = map.get(startMs);
    const n = Math.min(length, SLOT_WIDTH);
    if (into === undefined) {
      const made = new Array<number>(SLOT_WIDTH);
      for (let i = 0; i < SLOT_WIDTH; i++) made[i] = i < n ? (values[i] as number) : 0;
      map.set(startMs, made);
    } else for (let i = 0; i < n; i++) into[i] = (into[i] as number) + (values[i] as number);
  }

  addDay(operation: string, consumer: string, dayMs: number, count: number): void {
    const key = operation + SEP + consumer;
    let d = this.daily.get(key);
    if (d === undefined) this.daily.set(key, (d = { operation, consumer, days: new Map() }));
    d.days.set(dayMs, (d.days.get(dayMs) ?? 0) + count);
  }

  addSeen(consumer: string, firstMs: number, lastMs: number): void {
    const s = this.seen.get(consumer);
    if (s === undefined) this.seen.set(consumer, [firstMs, lastMs]);
    else this.seen.set(consumer, [Math.min(s[0], firstMs), Math.max(s[1], lastMs)]);
  }

  addRule(rule: ViolationRule): void {
    const key = rule.operation + SEP + rule.field + SEP + rule.kind;
    const r = this.rules.get(key);
    if (r === undefined) this.rules.set(key, { operation: rule.operation, field: rule.field, kind: rule.kind, count: rule.count, lastSeenMs: rule.lastSeenMs });
    else {
      r.count += rule.count;
      r.lastSeenMs = Math.max(r.lastSeenMs, rule.lastSeenMs);
    }
  }

  /** Adds samples (any order); keeps the newest MAX_SAMPLES. */
  addSamples(samples: readonly ViolationSample[]): void {
    if (samples.length === 0) return;
    this.samples = [...this.samples, ...samples].sort(sampleOrder).slice(0, MAX_SAMPLES);
  }

  /** Adds a whole snapshot (or a delta: its numbers are increments). */
  add(s: ConsoleSnapshot): this {
    for (const c of s.cells) {
      for (const [start, values] of c.minutes) this.addSlot('m', c.operation, c.consumer, start, values);
      for (const [start, values] of c.hours) this.addSlot('h', c.operation, c.consumer, start, values);
    }
    for (const d of s.daily) for (const [day, n] of d.days) this.addDay(d.operation, d.consumer, day, n);
    for (const [consumer, first, last] of s.seen) this.addSeen(consumer, first, last);
    for (const r of s.violations) this.addRule(r);
    this.addSamples(s.samples);
    return this;
  }

  /** Drops what falls out of the windows kept at `nowMs`, and the rules past MAX_RULES per operation. */
  trim(nowMs: number): this {
    const from = keptFrom(nowMs);
    for (const [key, c] of this.cells) {
      for (const start of c.minutes.keys()) if (start < from.minute) c.minutes.delete(start);
      for (const start of c.hours.keys()) if (start < from.hour) c.hours.delete(start);
      if (c.minutes.size === 0 && c.hours.size === 0) this.cells.delete(key);
    }
    for (const [key, d] of this.daily) {
      for (const day of d.days.keys()) if (day < from.day) d.days.delete(day);
      if (d.days.size === 0) this.daily.delete(key);
    }
    const perOperation = new Map<string, Array<[string, RuleSum]>>();
    for (const entry of this.rules) {
      const list = perOperation.get(entry[1].operation) ?? [];
      list.push(entry);
      perOperation.set(entry[1].operation, list);
    }
    for (const list of perOperation.values()) {
      if (list.length <= MAX_RULES) continue;
      list.sort((a, b) => ruleOrder(a[1], b[1]));
      for (const [key] of list.slice(MAX_RULES)) this.rules.delete(key);
    }
    return this;
  }

  /**
   * The sum as a snapshot taken at `nowMs` (trimmed to its windows first), in a stable order.
   * `shared`: the slots' numbers are the sum's own arrays, not copies (faster, for a sum that is
   * not added to afterwards).
   */
  snapshot(nowMs: number, shared = false): ConsoleSnapshot {
    this.trim(nowMs);
    const from = keptFrom(nowMs);
    const cells: CellSnapshot[] = [...this.cells.values()]
      .map((c) => ({ operation: c.operation, consumer: c.consumer, minutes: slotsOf(c.minutes, from.minute, shared), hours: slotsOf(c.hours, from.hour, shared) }))
      .sort((a, b) => byText(a.operation, b.operation) || byText(a.consumer, b.consumer));
    const daily: DailySnapshot[] = [...this.daily.values()]
      .map((d) => ({ operation: d.operation, consumer: d.consumer, days: [...d.days].sort((a, b) => a[0] - b[0]) }))
      .sort((a, b) => byText(a.operation, b.operation) || byText(a.consumer, b.consumer));
    const seen = [...this.seen].map(([consumer, [first, last]]) => [consumer, first, last] as const).sort((a, b) => byText(a[0], b[0]));
    const violations: ViolationRule[] = [...this.rules.values()]
      .sort((a, b) => byText(a.operation, b.operation) || ruleOrder(a, b))
      .map((r) => ({ operation: r.operation, field: r.field, kind: r.kind, count: r.count, lastSeenMs: r.lastSeenMs }));
    return { atMs: nowMs, cells, daily, seen, violations, samples: this.samples.slice() };
  }
}

/**
 * The sum of `list` as one snapshot taken at `nowMs`: what the instances (or workers) counted
 * together, within the windows kept at `nowMs`.
 *
 * @example
 *   const fleet = mergeSnapshots([primary.snapshot(), ...fromWorkers], Date.now());
 */
export function mergeSnapshots(list: readonly ConsoleSnapshot[], nowMs: number): ConsoleSnapshot {
  const sum = new SnapshotSum();
  for (const s of list) sum.add(s);
  return sum.snapshot(nowMs, true);
}

/** Adds `delta` into `target` (a pending sum), trimmed to the windows kept at `nowMs`. */
export function addInto(target: SnapshotSum, delta: ConsoleSnapshot, nowMs: number): SnapshotSum {
  return target.add(delta).trim(nowMs);
}
