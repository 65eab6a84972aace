/**
 * Per-request facts that belong to the module that makes them, not to the core: a typed slot
 * (as Hono's `c.set/c.get` or Kong's `kong.ctx.plugin`). The module that owns a fact creates its
 * slot once, at load (`const KEY_ID = slot<string>('keyId')`), writes it with `ex.set(KEY_ID, v)`
 * and exports it for the modules that may read it. The core's exchange grows no field per fact.
 *
 * Storage is cheap on purpose, because it is per request: every slot gets a number when it is
 * created, and the first `INLINE` slots are plain fields of the exchange object (no allocation,
 * the same object shape for every request); more slots spill into one array, made on the first
 * write of such a slot. No Map per request.
 */

/** A typed per-request fact. `T` is only for the compiler: a slot holds any value at run time. */
export class Slot<T> {
  /** Where the value lives in a `Facts` object: assigned in creation order, never reused. */
  readonly index: number;
  /** Never set: makes `Slot<string>` and `Slot<number>` different types (a slot is covariant in `T`). */
  declare readonly type?: T;

  constructor(
    /** A name for people (debugging, docs); two slots may share one and stay distinct. */
    readonly name: string,
  ) {
    this.index = created++;
  }
}

let created = 0;

/** A new slot, e.g. `export const KEY_ID = slot<string>('keyId')` at the top of the owning module. */
export function slot<T>(name: string): Slot<T> {
  return new Slot<T>(name);
}

/** What an observer may do with the facts of a finished request: read them. */
export interface FactReader {
  /** The slot's value, or undefined when nothing set it for this request. */
  get<T>(slot: Slot<T>): T | undefined;
}

/** How many slots live in fields of their own, without an array. */
const INLINE = 6;

/**
 * The facts of one request. The exchange is one of these, so reading or writing a fact allocates
 * nothing while at most `INLINE` slots exist (the shipped modules use six: auth's two, the list
 * check, response-contract's violation, then list-pets' query parameters, made when a config loads).
 */
export class Facts implements FactReader {
  private f0: unknown = undefined;
  private f1: unknown = undefined;
  private f2: unknown = undefined;
  private f3: unknown = undefined;
  private f4: unknown = undefined;
  private f5: unknown = undefined;
  private more: unknown[] | undefined = undefined;

  get<T>(slot: Slot<T>): T | undefined {
    // Each case returns what `set` stored for this very slot, so the value is a T (or undefined).
    switch (slot.index) {
      case 0:
        return this.f0 as T | undefined;
      case 1:
        return this.f1 as T | undefined;
      case 2:
        return this.f2 as T | undefined;
      case 3:
        return this.f3 as T | undefined;
      case 4:
        return this.f4 as T | undefined;
      case 5:
        return this.f5 as T | undefined;
      default:
        return this.more?.[slot.index - INLINE] as T | undefined;
    }
  }

  /** Every fact of `from`, set here (a copy of its values: a later write to either is its own). */
  protected copyFacts(from: Facts): void {
    this.f0 = from.f0;
    this.f1 = from.f1;
    this.f2 = from.f2;
    this.f3 = from.f3;
    this.f4 = from.f4;
    this.f5 = from.f5;
    this.more = from.more?.slice();
  }

  set<T>(slot: Slot<T>, value: T | undefined): void {
    switch (slot.index) {
      case 0:
        this.f0 = value;
        return;
      case 1:
        this.f1 = value;
        return;
      case 2:
        this.f2 = value;
        return;
      case 3:
        this.f3 = value;
        return;
      case 4:
        this.f4 = value;
        return;
      case 5:
        this.f5 = value;
        return;
      default:
        (this.more ??= [])[slot.index - INLINE] = value;
    }
  }
}

/**
 * A fact a policy offers to the access log: the field `name`, and the slot it is read from. A
 * string is written as it is, a number as its decimal text (a JSON string either way); an unset
 * slot leaves the field out.
 */
export interface LogField {
  readonly name: string;
  readonly slot: Slot<string> | Slot<number>;
}

/**
 * What a policy declares for observers, beside its phases. The access log writes `logFields`
 * without knowing the policy; `consumer` names the slot holding who made the request (an API key
 * id): the access log's `consumer` field, the per-consumer label of the deprecation metric and the
 * deprecation report read it, and an answer to such a request is private to shared caches.
 */
export interface Declarations {
  readonly logFields?: readonly LogField[];
  readonly consumer?: Slot<string>;
}

/** The facts a finished request carries to observers: what was declared, and a way to read it. */
export interface RecordFacts extends FactReader {
  /** The declared access-log fields, in the order of the chain's policies. */
  readonly logFields: readonly LogField[];
}

/** The declared fields of `facts` that are set, as text, in their order (`{ limit: '20' }`). */
export function declaredValues(facts: RecordFacts): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of facts.logFields) {
    const v = facts.get<string | number>(f.slot);
    if (v !== undefined) out[f.name] = String(v);
  }
  return out;
}

/**
 * Facts with the access-log fields declared for them. Serialised (`JSON.stringify`, a logger,
 * `console.log`) it shows the declared fields only: the exchange is one of these, and an observer
 * that logs a whole record must not write the request's headers (its Authorization) with it.
 */
export class DeclaredFacts extends Facts implements RecordFacts {
  constructor(readonly logFields: readonly LogField[]) {
    super();
  }

  toJSON(): Record<string, string> {
    return declaredValues(this);
  }

  [Symbol.for('nodejs.util.inspect.custom')](): Record<string, string> {
    return declaredValues(this);
  }
}

/** No declared facts (a record made by hand, or a chain whose policies declare none). */
export const NO_FACTS: RecordFacts = new DeclaredFacts(Object.freeze([]));
