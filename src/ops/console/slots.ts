/**
 * Where the console's recorder keeps its numbers (src/ops/console/series.ts): rows of SLOT_WIDTH
 * counters in typed arrays that never move, rings of slots per series, and the per-day counts of
 * deprecated calls. Times are slot numbers (epoch ms / the slot's length: minutes, hours, days
 * since 1970), small integers, so the hot path boxes no number.
 */
import { COUNTERS, DAYS_KEPT, LATENCY_BOUNDS_MS, SLOT_WIDTH, type Slot } from './types.js';

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** Where the histogram starts in a slot. */
const HISTOGRAM = COUNTERS.length;

/** The histogram bucket of a duration: the first bound it does not exceed, or the last bucket. */
export function bucketOf(ms: number): number {
  const bounds = LATENCY_BOUNDS_MS;
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ms <= bounds[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Rows per chunk of the arena: a chunk is 1024 x 124 bytes, made when the rows in use need it. */
const CHUNK_BITS = 10;
const CHUNK_ROWS = 1 << CHUNK_BITS;
const CHUNK_MASK = CHUNK_ROWS - 1;

/** Rows of SLOT_WIDTH counters, in chunks that never move; released rows are reused first. */
export class Rows {
  readonly chunks: Uint32Array[] = [];
  private next = 0;
  private readonly free: number[] = [];

  get inUse(): number {
    return this.next - this.free.length;
  }

  alloc(): number {
    const row = this.free.length > 0 ? this.free.pop()! : this.next++;
    const chunk = row >>> CHUNK_BITS;
    if (chunk === this.chunks.length) this.chunks.push(new Uint32Array(CHUNK_ROWS * SLOT_WIDTH));
    else this.zero(row);
    return row;
  }

  zero(row: number): void {
    const base = (row & CHUNK_MASK) * SLOT_WIDTH;
    this.chunks[row >>> CHUNK_BITS]!.fill(0, base, base + SLOT_WIDTH);
  }

  release(row: number): void {
    this.free.push(row);
  }

  /** Counts one request: `requests`, its counter (when one) and its latency bucket. */
  count(row: number, counter: number, bucket: number): void {
    const c = this.chunks[row >>> CHUNK_BITS]!;
    const base = (row & CHUNK_MASK) * SLOT_WIDTH;
    c[base] = c[base]! + 1;
    if (counter > 0) c[base + counter] = c[base + counter]! + 1;
    const b = base + HISTOGRAM + bucket;
    c[b] = c[b]! + 1;
  }

  values(row: number): number[] {
    const base = (row & CHUNK_MASK) * SLOT_WIDTH;
    return Array.from(this.chunks[row >>> CHUNK_BITS]!.subarray(base, base + SLOT_WIDTH));
  }
}

/**
 * One series of a cell: `kept` slots, each numbered (epoch ms / step: a small integer, so no
 * number is boxed on the way) and at the place number % kept of the ring, so a slot's place is
 * reused `kept` steps later and the ring never holds more.
 */
export class Ring {
  private readonly numbers: Int32Array;
  private readonly rows: Int32Array;
  /** The newest slot counted, and its row: the common case finds it here. */
  private current = -1;
  private currentRow = -1;

  constructor(
    private readonly step: number,
    private readonly kept: number,
  ) {
    this.numbers = new Int32Array(kept);
    this.rows = new Int32Array(kept).fill(-1);
  }

  /**
   * The row counting slot `n`, made when needed; -1 when a newer slot holds its place. `newest`
   * is the slot of now (the request's end): a place holding a slot past it was counted while the
   * wall clock ran ahead, and is taken back once the clock is put right (else the ring would
   * count nothing until the clock caught up with it again).
   */
  rowFor(n: number, arena: Rows, newest: number): number {
    if (n === this.current && n <= newest) return this.currentRow;
    const at = n % this.kept;
    let row = this.rows[at]!;
    if (row < 0) {
      row = arena.alloc();
      this.rows[at] = row;
    } else if (this.numbers[at] !== n) {
      // The place holds a slot a whole ring older (reuse its row) or newer (this one is out of the window).
      if (this.numbers[at]! > n && this.numbers[at]! <= newest) return -1;
      arena.zero(row);
    }
    this.numbers[at] = n;
    if (n > this.current || this.current > newest) {
      this.current = n;
      this.currentRow = row;
    }
    return row;
  }

  /** Releases the rows of slots numbered below `from`; true when a slot is left. */
  drop(from: number, arena: Rows): boolean {
    let left = false;
    for (let at = 0; at < this.kept; at++) {
      const row = this.rows[at]!;
      if (row < 0) continue;
      if (this.numbers[at]! >= from) {
        left = true;
        continue;
      }
      arena.release(row);
      this.rows[at] = -1;
      if (row === this.currentRow) {
        this.current = -1;
        this.currentRow = -1;
      }
    }
    return left;
  }

  /** The slots numbered `from` to `to`, oldest first, their starts in epoch ms, values as plain numbers. */
  slots(from: number, to: number, arena: Rows): Slot[] {
    const out: Slot[] = [];
    for (let at = 0; at < this.kept; at++) {
      const row = this.rows[at]!;
      const n = this.numbers[at]!;
      if (row >= 0 && n >= from && n <= to) out.push([n * this.step, arena.values(row)]);
    }
    return out.sort((a, b) => a[0] - b[0]);
  }

  /** Every slot, then releases them all (a delta taken). */
  take(arena: Rows): Slot[] {
    const out = this.slots(0, 0x7fffffff, arena);
    this.drop(0x7fffffff, arena);
    return out;
  }
}

/**
 * Counts one call on day number `day` in the lists (days ascending, counts aligned), keeping
 * DAYS_KEPT days: the newest day's count is the common case.
 */
export function countDay(days: number[], counts: number[], day: number): void {
  // Days more than one past this call's were counted while the wall clock ran ahead: dropped, else
  // a clock put back by more than DAYS_KEPT days would leave no room for the calls of today.
  let end = days.length;
  while (end > 0 && days[end - 1]! > day + 1) end--;
  if (end < days.length) {
    days.length = end;
    counts.length = end;
  }
  const last = days.length - 1;
  if (last >= 0 && days[last] === day) {
    counts[last] = counts[last]! + 1;
    return;
  }
  if (last < 0 || days[last]! < day) {
    days.push(day);
    counts.push(1);
    let old = 0;
    while (days[old]! <= day - DAYS_KEPT) old++;
    if (old > 0) {
      days.splice(0, old);
      counts.splice(0, old);
    }
    return;
  }
  // A request that started before the newest day counted (it ran across midnight).
  let i = last;
  while (i >= 0 && days[i]! > day) i--;
  if (i >= 0 && days[i] === day) counts[i] = counts[i]! + 1;
  else if (day > days[last]! - DAYS_KEPT) {
    days.splice(i + 1, 0, day);
    counts.splice(i + 1, 0, 1);
  }
}
