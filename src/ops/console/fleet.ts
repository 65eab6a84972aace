/**
 * The console's counts of a fleet, in Redis: every instance adds what its recorder counted since
 * its last flush, every `flushMs` (2 s) and at close, never on the request path; the console then
 * reads the fleet's sum. Each instance also writes a heartbeat every `beatMs` (5 s).
 *
 * Keys (`<prefix>` is the deployment's, PETSTORE_REDIS_PREFIX; the hash tag puts them in one
 * Cluster slot, as the scripts touch several):
 * - `<prefix>{console}:m:<startMs>`  hash of one minute slot: field `<operation>\x1f<consumer>`,
 *   value the slot's numbers (types.ts SLOT_WIDTH) comma-separated, trailing zeros left out;
 *   expires 5 minutes after the window (MINUTES_KEPT) has passed it;
 * - `<prefix>{console}:h:<startMs>`  the same for an hour slot; expires an hour after HOURS_KEPT;
 * - `<prefix>{console}:d:<operation>:<dayMs>` hash of a deprecated operation's calls that UTC day,
 *   field the consumer; expires a day after DAYS_KEPT; `dops` is the set of such operations;
 * - `<prefix>{console}:seen`  hash consumer -> `<firstMs>,<lastMs>`;
 * - `<prefix>{console}:v`     hash `<operation>\x1f<field>\x1f<kind>` -> `<count>,<lastSeenMs>`,
 *   at most 64 rules per operation; `vs`, the newest 50 samples (a sorted set by time, JSON);
 * - `<prefix>{console}:fleet` hash the beat's id -> the beat (JSON); beats older than an
 *   hour are removed when the hash is read or written;
 * - `<prefix>{console}:meta` (`epoch`) and `members` (instance id -> the last batch it added).
 *
 * Redis away: the deltas are added into one pending sum, trimmed to the windows, so hours away
 * cost no more memory than the recorder's own; it is sent when Redis answers again, one warning
 * per 10 s with the count in between, nothing thrown. A batch whose answer was lost (a deadline)
 * is sent again with the same sequence number: Redis, which holds the last one added per
 * instance in `members`, does not add it twice.
 *
 * Redis back empty (restarted without persistence, FLUSHALL): the first flush finds no `epoch`
 * and makes a new one; every instance's next flush (or heartbeat) sees that its epoch is gone,
 * so Redis holds nothing it sent, and sends its recorder's whole snapshot instead of the delta:
 * the fleet's windows come back as the instances flush, nothing counted twice. Lost for good:
 * only what an instance that is gone (stopped, crashed) had counted, since no one holds it any
 * more; the others each hold their own windows. A big snapshot goes in batches of at most
 * BATCH_UNITS numbers so that no script holds Redis for long.
 */
import { randomBytes } from 'node:crypto';
import { acquireRedis, describeConnection, deploymentPrefix, runScript, type RedisConnectionConfig, type RedisScript, type SharedRedis } from '../../stores/connection.js';
import { withDeadline } from '../../stores/redis.js';
import { BEAT, FLUSH, READ, READ_HASH } from './fleet-scripts.js';
import { cleanProblem, SAMPLE_PROBLEMS } from './violations.js';
import { DAY_MS, HOUR_MS, keptFrom, MAX_RULES, MAX_SAMPLES, MINUTE_MS, SEP, SnapshotSum } from './merge.js';
import { DAYS_KEPT, HOURS_KEPT, MINUTES_KEPT, SLOT_WIDTH, type ConsoleSnapshot, type InstanceBeat, type SnapshotSource, type ViolationSample } from './types.js';

/** A flush's call that takes longer is abandoned (and sent again with the next). */
const FLUSH_MS = 1000;
/** The console's read: for operators, a longer deadline, still bounded. */
const READ_MS = 3000;
/** close(): the last flush and heartbeat, at most this long. */
const CLOSE_MS = 1000;
/** A flush sends batches for at most this long; the rest waits for the next. */
const SEND_BUDGET_MS = 1000;
const WARN_EVERY_MS = 10_000;
/** Numbers (slot fields, daily counts, rules...) in one batch: a script that adds them holds Redis a few ms. */
export const BATCH_UNITS = 4000;
/** A heartbeat older than this is removed from the fleet's list. */
const BEAT_KEPT_MS = HOUR_MS;
/** An instance that has not flushed for this long leaves `members` (only its duplicate check goes). */
const MEMBER_KEPT_MS = DAY_MS;
/** How long past its window a key lives, by kind (`m`, `h`, `d`), and `members`. */
const KEEP = { m: String(MINUTES_KEPT * MINUTE_MS + 5 * MINUTE_MS), h: String((HOURS_KEPT + 1) * HOUR_MS), d: String((DAYS_KEPT + 1) * DAY_MS), members: String(MEMBER_KEPT_MS) };

export interface ConsoleFleetLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface ConsoleFleetOptions {
  readonly redis: RedisConnectionConfig;
  /** The deployment's key prefix; PETSTORE_REDIS_PREFIX (deploymentPrefix) by default. */
  readonly prefix?: string;
  /** The recorder: made with `trackDelta: true`. */
  readonly source: SnapshotSource;
  /** This instance's heartbeat (its `atMs` is set when written); absent: counts only (a `--workers` worker, whose primary beats for the group). */
  readonly beat?: (() => InstanceBeat) | undefined;
  readonly flushMs?: number;
  readonly beatMs?: number;
  readonly log?: ConsoleFleetLog | undefined;
  /** Milliseconds since the epoch; Date.now by default. */
  readonly now?: () => number;
  /** Where `passwordFromEnv` and PETSTORE_REDIS_PREFIX are read (process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** A batch of counts to add, as sent (the data as JSON), with its sequence number. */
interface Batch {
  readonly seq: number;
  /** The first batch of a whole snapshot (Redis held nothing of this instance). */
  readonly full: boolean;
  readonly data: string;
}

interface BatchData {
  /** [`m:<start>` or `h:<start>`, startMs, [field, values, ...]] */
  slots: Array<[string, number, string[]]>;
  /** [operation, day (text), dayMs, [consumer, count, ...]] */
  daily: Array<[string, string, number, string[]]>;
  /** consumer, firstMs, lastMs, ... */
  seen: string[];
  /** [operation, `<operation>\x1f<field>\x1f<kind>`, count, lastSeenMs] */
  rules: Array<[string, string, string, string]>;
  /** atMs, JSON, ... */
  samples: string[];
}

const emptyData = (): BatchData => ({ slots: [], daily: [], seen: [], rules: [], samples: [] });

/** Numbers comma-separated, trailing zeros left out (at least one kept). */
function csv(values: readonly number[]): string {
  let n = values.length;
  while (n > 1 && values[n - 1] === 0) n--;
  return values.slice(0, n).join(',');
}

/** The batches that add `sum`, each of at most BATCH_UNITS numbers (the first marked `full` when `sum` is a whole snapshot). */
export function batchesOf(sum: SnapshotSum, seq: () => number, full: boolean): Batch[] {
  const out: BatchData[] = [];
  let data = emptyData();
  let units = 0;
  /** Room for one more number: a new batch when this one is full (true then). */
  const room = (): boolean => {
    units++;
    if (units <= BATCH_UNITS) return false;
    out.push(data);
    data = emptyData();
    units = 1;
    return true;
  };
  for (const [key, r] of sum.rules) {
    room();
    data.rules.push([r.operation, key, String(r.count), String(r.lastSeenMs)]);
  }
  for (const s of sum.samples) {
    room();
    data.samples.push(String(s.atMs), JSON.stringify(s));
  }
  for (const [consumer, [first, last]] of sum.seen) {
    room();
    data.seen.push(consumer, String(first), String(last));
  }
  // One entry per key (slot, or operation and day), split where a batch is full.
  const slots = new Map<string, [number, string[]]>();
  for (const [field, c] of sum.cells) {
    for (const [kind, map] of [['m', c.minutes] as const, ['h', c.hours] as const]) {
      for (const [start, values] of map) {
        const key = `${kind}:${start}`;
        let entry = slots.get(key);
        if (entry === undefined) slots.set(key, (entry = [start, []]));
        entry[1].push(field, csv(values));
      }
    }
  }
  for (const [key, [start, fields]] of slots) {
    let entry: string[] | undefined;
    for (let i = 0; i < fields.length; i += 2) {
      if (room() || entry === undefined) data.slots.push([key, start, (entry = [])]);
      entry.push(fields[i] as string, fields[i + 1] as string);
    }
  }
  const days = new Map<string, [string, number, string[]]>();
  for (const d of sum.daily.values()) {
    for (const [day, n] of d.days) {
      const key = d.operation + SEP + day;
      let entry = days.get(key);
      if (entry === undefined) days.set(key, (entry = [d.operation, day, []]));
      entry[2].push(d.consumer, String(n));
    }
  }
  for (const [operation, day, counts] of days.values()) {
    let entry: string[] | undefined;
    for (let i = 0; i < counts.length; i += 2) {
      if (room() || entry === undefined) data.daily.push([operation, String(day), day, (entry = [])]);
      entry.push(counts[i] as string, counts[i + 1] as string);
    }
  }
  out.push(data);
  return out.map((d, i) => ({ seq: seq(), full: full && i === 0, data: JSON.stringify(d) }));
}

/** A hash as a reply gives it: a flat [field, value, ...] list (RESP2, a script's), or a map (RESP3). */
function pairs(reply: unknown): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) out.push([String(reply[i]), String(reply[i + 1])]);
  else if (reply instanceof Map) for (const [k, v] of reply) out.push([String(k), String(v)]);
  else if (reply !== null && typeof reply === 'object') for (const [k, v] of Object.entries(reply)) out.push([k, String(v)]);
  return out;
}

const isCount = (n: number) => Number.isSafeInteger(n) && n >= 0;

/** An epoch ms a Date can hold (JSON reads 1e300 or 1e400 as numbers; toISOString would throw on them). */
const isTime = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= 8.64e15;
const isSmall = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
/** The longest text of a beat or a sample kept from Redis (what the instances write is far shorter). */
const MAX_TEXT = 200;
const text200 = (s: string) => s.slice(0, MAX_TEXT);

function parseSample(text: unknown): ViolationSample | undefined {
  try {
    const s = JSON.parse(String(text)) as Partial<ViolationSample>;
    if (isTime(s.atMs) && typeof s.operation === 'string' && typeof s.requestId === 'string' && (typeof s.status === 'number' || s.status === null) && Array.isArray(s.problems)) {
      // As the recorder keeps them: at most 5 problems, each cleaned and cut (violations.ts).
      return { atMs: s.atMs, operation: text200(s.operation), requestId: text200(s.requestId), status: s.status, problems: s.problems.slice(0, SAMPLE_PROBLEMS).map((p) => cleanProblem(String(p))) };
    }
  } catch {
    // A value someone else wrote: not a sample.
  }
  return undefined;
}

function parseBeat(text: unknown): InstanceBeat | undefined {
  try {
    const b = JSON.parse(String(text)) as Partial<InstanceBeat>;
    if (typeof b.id === 'string' && typeof b.host === 'string' && isSmall(b.pid) && typeof b.version === 'string' && typeof b.policyFingerprint === 'string' && typeof b.ready === 'boolean' && isTime(b.startedAtMs) && isSmall(b.workers) && isTime(b.atMs)) {
      const reason = typeof b.reason === 'string' ? text200(b.reason) : null;
      return { id: text200(b.id), host: text200(b.host), pid: b.pid, version: text200(b.version), policyFingerprint: text200(b.policyFingerprint), ready: b.ready, reason, startedAtMs: b.startedAtMs, lastReloadMs: isTime(b.lastReloadMs) ? b.lastReloadMs : null, workers: b.workers, atMs: b.atMs };
    }
  } catch {
    // Not a heartbeat.
  }
  return undefined;
}

/**
 * The comma-separated counts of `text` from `from` to `to` into `out`: how many, or 0 when they
 * are not counts (more than SLOT_WIDTH, not digits). A loop over the characters: a fleet's read
 * parses millions of them, and split + Number allocate for each.
 */
function parseCounts(text: string, from: number, to: number, out: number[]): number {
  let i = 0;
  let n = 0;
  let digits = 0;
  for (let p = from; p <= to; p++) {
    const ch = p === to ? 44 : text.charCodeAt(p);
    if (ch === 44) {
      if (digits === 0 || digits > 15 || i >= SLOT_WIDTH) return 0;
      out[i++] = n;
      n = 0;
      digits = 0;
    } else if (ch >= 48 && ch <= 57) {
      n = n * 10 + (ch - 48);
      digits++;
    } else return 0;
  }
  return i;
}

/** Slot starts from `from` to the one holding `nowMs`, as text. */
function startsOf(from: number, step: number, nowMs: number): string[] {
  const out: string[] = [];
  for (let s = from; s <= nowMs; s += step) out.push(String(s));
  return out;
}

/**
 * One instance's share of the fleet's console counts: flushes its recorder's deltas and its
 * heartbeat, and reads the fleet's snapshot and instances.
 *
 * @example
 *   const fleet = new ConsoleFleet({ redis: { url: 'redis://127.0.0.1:6379' }, source: recorder, beat: () => me(), log });
 *   fleet.start();
 *   const whole = await fleet.read().catch(() => undefined); // undefined: Redis away, use recorder.snapshot()
 *   await fleet.close();
 */
export class ConsoleFleet {
  /** Calls that failed (Redis away or slow). */
  errors = 0;
  private readonly shared: SharedRedis;
  private readonly prefix: string;
  private readonly meta: string;
  private readonly where: string;
  private readonly id = randomBytes(12).toString('base64url');
  private readonly now: () => number;
  private readonly source: SnapshotSource;
  private readonly beatOf: (() => InstanceBeat) | undefined;
  private readonly log: ConsoleFleetLog | undefined;
  private readonly flushMs: number;
  private readonly beatMs: number;
  private timers: NodeJS.Timeout[] = [];
  /** The epoch Redis's counts of this instance belong to ('' before the first flush). */
  private known = '';
  private seq = 0;
  /** Counted, not yet in a batch. */
  private pending = new SnapshotSum();
  /** Batches to send, in order; the first may have been added already (its answer lost). */
  private outbox: Batch[] = [];
  /** Whether the next flush checks that Redis still holds this instance's counts, with nothing new. */
  private checkDue = true;
  private queue: Promise<unknown> = Promise.resolve();
  private lastWarn = -Infinity;
  private suppressed = 0;
  private closed = false;

  constructor(options: ConsoleFleetOptions) {
    const env = options.env ?? process.env;
    this.prefix = `${options.prefix ?? deploymentPrefix(env)}{console}:`;
    this.meta = `${this.prefix}meta`;
    this.where = describeConnection(options.redis);
    this.now = options.now ?? Date.now;
    this.source = options.source;
    this.beatOf = options.beat;
    this.log = options.log;
    this.flushMs = options.flushMs ?? 2000;
    this.beatMs = options.beatMs ?? 5000;
    this.shared = acquireRedis(options.redis, env);
    this.shared.conn.on('error', () => undefined);
    // A reconnection may be to a Redis that came back empty: the next flush checks.
    this.shared.conn.on('ready', () => void (this.checkDue = true));
  }

  /** Flushes every flushMs and beats every beatMs from now on (a first beat and flush at once). */
  start(): void {
    if (this.closed || this.timers.length > 0) return;
    this.timers = [setInterval(() => void this.flush(), this.flushMs)];
    if (this.beatOf !== undefined) this.timers.push(setInterval(() => void this.beat(), this.beatMs));
    for (const t of this.timers) t.unref();
    void this.beat();
    void this.flush();
  }

  /** What waits to be sent: cells in the pending sum and batches built. */
  backlog(): { readonly cells: number; readonly slots: number; readonly batches: number } {
    let slots = 0;
    for (const c of this.pending.cells.values()) slots += c.minutes.size + c.hours.size;
    return { cells: this.pending.cells.size, slots, batches: this.outbox.length };
  }

  private run(script: RedisScript, args: readonly string[], ms: number): Promise<unknown> {
    const send = () => runScript(this.shared.conn, script, [this.meta], args);
    return withDeadline(this.shared.connectedOnce ? send() : this.shared.connected.then(send), ms);
  }

  private failed(err: unknown, what: string): void {
    this.errors++;
    const t = this.now();
    if (t - this.lastWarn < WARN_EVERY_MS) {
      this.suppressed++;
      return;
    }
    this.lastWarn = t;
    this.log?.warn({ store: 'redis', url: this.where, cause: err instanceof Error ? err.message : String(err), errors: this.errors, suppressed: this.suppressed }, what);
    this.suppressed = 0;
  }

  private serial<T>(task: () => Promise<T>): Promise<T> {
    const next = this.queue.then(task, task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private nextSeq = () => ++this.seq;

  /** Adds what the recorder counted since the last flush to Redis; never throws (kept and sent again). */
  flush(): Promise<void> {
    return this.serial(() => this.flushOnce()).catch((err: unknown) => this.failed(err, 'console counts not written to Redis; kept in this process and retried'));
  }

  /** Everything the recorder holds, in batches, in place of anything not sent yet. */
  private sendWhole(nowMs: number): void {
    // One synchronous step: what the snapshot holds is no longer in a later delta.
    this.source.takeDelta(nowMs);
    const whole = new SnapshotSum().add(this.source.snapshot(nowMs)).trim(nowMs);
    this.pending = new SnapshotSum();
    this.outbox = batchesOf(whole, this.nextSeq, true);
  }

  private async flushOnce(): Promise<void> {
    const now = this.now();
    const delta = this.source.takeDelta(now);
    if (delta !== undefined) this.pending.add(delta);
    this.pending.trim(now);
    if (this.outbox.length === 0 && !this.pending.empty) {
      this.outbox = batchesOf(this.pending, this.nextSeq, false);
      this.pending = new SnapshotSum();
    }
    // Nothing new: no call, unless Redis may have lost what this instance sent (the script then asks for all).
    if (this.outbox.length === 0 && this.checkDue) this.outbox = batchesOf(new SnapshotSum(), this.nextSeq, false);
    const started = performance.now();
    let wholeSent = false;
    while (this.outbox.length > 0 && performance.now() - started < SEND_BUDGET_MS) {
      const batch = this.outbox[0] as Batch;
      const payload = `{"id":${JSON.stringify(this.id)},"seq":"${batch.seq}","known":${JSON.stringify(this.known)},"proposed":"${randomBytes(12).toString('base64url')}","full":${batch.full},"now":"${this.now()}","keep":${JSON.stringify(KEEP)},"maxRules":${MAX_RULES},"maxSamples":${MAX_SAMPLES},"data":${batch.data}}`;
      const reply = (await this.run(FLUSH, [this.prefix, payload], FLUSH_MS)) as unknown[];
      const [status, epoch] = reply.map(String);
      this.known = epoch ?? '';
      this.checkDue = false;
      if (status === 'full') {
        // Redis does not hold what this instance sent (it came back empty): all it holds, again.
        if (wholeSent) return;
        wholeSent = true;
        this.sendWhole(this.now());
        continue;
      }
      this.outbox.shift();
    }
  }

  /** Writes this instance's heartbeat; never throws. */
  beat(): Promise<void> {
    if (this.beatOf === undefined) return Promise.resolve();
    const beat = { ...this.beatOf(), atMs: this.now() };
    return this.fleetCall(beat.id, JSON.stringify(beat)).then(
      () => undefined,
      (err: unknown) => this.failed(err, 'console heartbeat not written to Redis; retried'),
    );
  }

  private async fleetCall(id: string, beat: string): Promise<InstanceBeat[]> {
    const reply = (await this.run(BEAT, [this.prefix, id, beat, String(this.now()), String(BEAT_KEPT_MS), String(MEMBER_KEPT_MS)], FLUSH_MS)) as [unknown, unknown];
    const epoch = String(reply[0]);
    // Redis lost its counts (no epoch, or a new one): the next flush sends everything again.
    if (this.known !== '' && epoch !== this.known) this.checkDue = true;
    const list = Array.isArray(reply[1]) ? reply[1].map(parseBeat).filter((b): b is InstanceBeat => b !== undefined) : [];
    return list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** The heartbeats of the fleet's instances (of the last hour), by id. Rejects when Redis cannot be read. */
  instances(): Promise<InstanceBeat[]> {
    return this.fleetCall('', '').catch((err: unknown) => {
      this.failed(err, 'console fleet not read from Redis');
      throw err;
    });
  }

  /**
   * The fleet's snapshot (this instance's counts flushed first): the minute slots of the last
   * MINUTES_KEPT minutes, the hour slots of the last HOURS_KEPT hours, the daily counts, first and
   * last seen, violation rules and samples. Rejects when Redis cannot be read within 3 s.
   */
  read(): Promise<ConsoleSnapshot> {
    const task = async () => {
      await this.flush();
      const now = this.now();
      const from = keptFrom(now);
      const keys = [...startsOf(from.minute, MINUTE_MS, now).map((s) => `m:${s}`), ...startsOf(from.hour, HOUR_MS, now).map((s) => `h:${s}`)];
      const [rest, ...hashes] = await Promise.all([
        runScript(this.shared.conn, READ, [this.meta], [this.prefix, startsOf(from.day, DAY_MS, now).join(','), String(MAX_SAMPLES)]),
        // One call per slot hash (pipelined): none holds Redis long, each answers one string.
        ...keys.map((k) => runScript(this.shared.conn, READ_HASH, [this.prefix + k], [])),
      ]);
      return this.parse(now, keys, hashes, rest as unknown[]);
    };
    return withDeadline(this.shared.connectedOnce ? task() : this.shared.connected.then(task), READ_MS).catch((err: unknown) => {
      this.failed(err, 'console counts not read from Redis');
      throw err;
    });
  }

  private parse(now: number, keys: readonly string[], hashes: readonly unknown[], rest: readonly unknown[]): ConsoleSnapshot {
    const sum = new SnapshotSum();
    const scratch = new Array<number>(SLOT_WIDTH);
    keys.forEach((key, i) => {
      const kind = key[0] === 'm' ? 'm' : 'h';
      const start = Number(key.slice(2));
      const text = String(hashes[i] ?? '');
      // field \x1e values \x1e field \x1e values ...
      for (let at = 0; at < text.length; ) {
        const eq = text.indexOf('\x1e', at);
        if (eq < 0) break;
        let end = text.indexOf('\x1e', eq + 1);
        if (end < 0) end = text.length;
        const n = parseCounts(text, eq + 1, end, scratch);
        const cell = text.slice(at, eq);
        if (n > 0 && cell.includes(SEP)) sum.addSlotOf(kind, cell, start, scratch, n);
        at = end + 1;
      }
    });
    const [seen, rules, samples, daily] = rest;
    for (const [consumer, text] of pairs(seen)) {
      const [first, last] = text.split(',').map(Number);
      if (isCount(first ?? NaN) && isCount(last ?? NaN)) sum.addSeen(consumer, first as number, last as number);
    }
    for (const [key, text] of pairs(rules)) {
      const [operation, field, kind] = key.split(SEP);
      const [count, lastSeenMs] = text.split(',').map(Number);
      if (operation !== undefined && field !== undefined && kind !== undefined && isCount(count ?? NaN) && isCount(lastSeenMs ?? NaN)) sum.addRule({ operation, field, kind, count: count as number, lastSeenMs: lastSeenMs as number });
    }
    if (Array.isArray(samples)) sum.addSamples(samples.map(parseSample).filter((s): s is ViolationSample => s !== undefined));
    if (Array.isArray(daily)) {
      for (const entry of daily) {
        if (!Array.isArray(entry)) continue;
        const [operation, day, hash] = entry as [unknown, unknown, unknown];
        for (const [consumer, n] of pairs(hash)) if (isCount(Number(n))) sum.addDay(String(operation), consumer, Number(day), Number(n));
      }
    }
    return sum.snapshot(now, true);
  }

  /** The last flush and heartbeat (bounded: about a second), then the connection goes back. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await withDeadline(Promise.all([this.flush(), this.beat()]), CLOSE_MS).catch(() => undefined);
    await this.shared.release();
  }
}
