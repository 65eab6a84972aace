/**
 * The in-memory store of the reference backend. A Pet never changes once created (the interface
 * defines no update), so each is kept as its JSON text, made once (and its bytes once it is read):
 * listing joins texts, getPet answers the bytes (no encoding per answer), and a categoryId of
 * 9223372036854775807 goes out exactly as it came in. A list, once encoded, is kept until the next
 * createPet (at most one per limit and status: 400).
 */
/** PetStatus (docs/interface.md): the values openapi/pet-store.yaml lists. */
export type PetStatus = 'available' | 'pending' | 'sold';

export interface NewPetInput {
  readonly name: string;
  /** The categoryId as its JSON source text, an int64 literal. */
  readonly categoryIdText: string;
  readonly status?: PetStatus;
}

export class PetStore {
  /** Pet texts in creation order, all and per status, so a list costs O(limit). Ids are 1, 2, 3, ... so pet n is all[n - 1]. */
  private readonly all: string[] = [];
  /**
   * The bytes (UTF-8) of each pet read at least once, made on its first getPet and answered as
   * they are from then on (read-only: shared), which makes getPet faster on the built-in backend
   * (co-scheduled, bench/ab.mjs). Made lazily and sparse (createPet touches nothing here): a Buffer
   * kept for every created pet outlives the young generation and slows createPet, and even an
   * `undefined` pushed per create cost it (bench/ab.mjs).
   */
  private readonly bodies: (Buffer | undefined)[] = [];
  private readonly byStatus = new Map<PetStatus, string[]>();
  /** Encoded lists by limit and status, dropped on every create. Shared: never to be written to. */
  private readonly lists = new Map<string, Buffer>();

  constructor(readonly maxPets: number) {}

  get size(): number {
    return this.all.length;
  }

  /** Adds a pet and returns it as JSON bytes, or undefined when the store is full. */
  create(input: NewPetInput): Buffer | undefined {
    if (this.all.length >= this.maxPets) return undefined;
    // Map#clear makes a new table even when the map is empty (as it is between lists).
    if (this.lists.size > 0) this.lists.clear();
    const id = String(this.all.length + 1);
    let text = `{"id":${id},"name":${JSON.stringify(input.name)},"categoryId":${input.categoryIdText}`;
    if (input.status !== undefined) text += `,"status":"${input.status}"`;
    text += '}';
    this.all.push(text);
    if (input.status !== undefined) {
      let list = this.byStatus.get(input.status);
      if (list === undefined) this.byStatus.set(input.status, (list = []));
      list.push(text);
    }
    return Buffer.from(text);
  }

  /**
   * The pet with this id (an int64 literal), as JSON bytes (read-only: shared). `Number` reads the
   * literal exactly below 2^53 and rounds a larger one to 2^53 or more, past any id the store can
   * hold (`maxPets`), so no BigInt is needed to compare it.
   */
  get(idText: string): Buffer | undefined {
    const id = Number(idText);
    if (!(id >= 1 && id <= this.all.length)) return undefined;
    const text = this.all[id - 1];
    return text === undefined ? undefined : (this.bodies[id - 1] ??= Buffer.from(text));
  }

  /** The first `limit` pets, of one status if given, as JSON array bytes (read-only: shared). */
  list(limit: number, status: PetStatus | undefined): Buffer {
    const key = status === undefined ? String(limit) : `${limit} ${status}`;
    let body = this.lists.get(key);
    if (body === undefined) {
      const source = status === undefined ? this.all : (this.byStatus.get(status) ?? []);
      body = Buffer.from('[' + source.slice(0, limit).join(',') + ']');
      this.lists.set(key, body);
    }
    return body;
  }
}
