/**
 * The memory store of the response cache: one lru-cache bounded in bytes (`maxSize` with a
 * `sizeCalculation`), so a million distinct keys cost at most `maxBytes`, the least recently
 * used entries dropped first. An entry lives until its stale-if-error window ends.
 */
import { LRUCache } from 'lru-cache';
import type { CacheEntry, CacheStore } from './types.js';

/**
 * What one entry costs V8 beyond the bytes counted below: the entry object, its header map, the
 * Buffer object, the key's and values' string headers, lru-cache's slots. Set so that the real
 * heap (and array buffers) a full store holds stays under maxBytes: test/unit/cache.test.ts
 * measures it after GC with 50,000 keys, bench/cache.mjs with 1,000,000.
 */
const ENTRY_OVERHEAD = 400;

/**
 * Bytes an entry holds: the body (twice when it is kept as a string too: one byte a character), the
 * key, every header name and value (UTF-16 strings: 2 bytes a unit) and the flat list of the same
 * fields, or the hit's plan that holds them (its own header and one slot an item; the strings are
 * the headers' own or the exchange's).
 */
export function entrySize(key: string, entry: CacheEntry): number {
  let n = ENTRY_OVERHEAD + entry.body.length + (entry.text?.length ?? 0) + 2 * key.length + (entry.fields === undefined ? 0 : 48 + 8 * entry.fields.length);
  const plan = entry.plan;
  // A hit's plan: three lists (a header and one slot an item each) and the plan object.
  if (plan !== undefined) n += 3 * 48 + 32 + 8 * (plan.fields.length + plan.names.length + plan.at.length);
  for (const name in entry.headers) {
    const v = entry.headers[name];
    n += 2 * name.length + 2 * (Array.isArray(v) ? v.join('').length : (v ?? '').length);
  }
  return n;
}

export class MemoryCacheStore implements CacheStore {
  private readonly entries: LRUCache<string, CacheEntry>;
  generation = 0;

  constructor(
    maxBytes: number,
    private readonly now: () => number = Date.now,
  ) {
    this.entries = new LRUCache<string, CacheEntry>({ maxSize: maxBytes, maxEntrySize: maxBytes, sizeCalculation: (entry, key) => entrySize(key, entry) });
  }

  get(key: string, now: number = this.now()): CacheEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || now < entry.staleUntil) return entry;
    this.entries.delete(key);
    return undefined;
  }

  set(key: string, entry: CacheEntry): void {
    this.entries.set(key, entry);
  }

  dropLists(): void {
    this.generation++;
  }

  /** Bytes held now (for tests and the memory bound). */
  get size(): number {
    return this.entries.calculatedSize;
  }

  get count(): number {
    return this.entries.size;
  }

  close(): Promise<void> {
    this.entries.clear();
    return Promise.resolve();
  }
}
