/**
 * What one call of a shape scanner finds, and the verdicts it gives. The types here are the API's
 * (index.ts re-exports them).
 */
import { wordView } from './flat.js';
import { CompiledShape } from './shape.js';

/** Fields outside the shape: removed from the answer, refused (a problem each), or let through. */
export type UnknownFieldMode = 'drop' | 'refuse' | 'pass';

export interface ShapeScan {
  /** Empty when the body is valid (and, with `refuse`, has no unknown field). */
  readonly problems: readonly string[];
  /** With `drop`, when unknown fields were found in a valid body: the body without them. */
  readonly body?: Buffer;
}

/**
 * What a page's pass over a list found when it also checked each item (the body it passes on is
 * then `body`, unchanged): the check finishes from here (`ShapeScanner.finish`, on the scanner
 * that made them) instead of reading the list a second time.
 */
export interface ListFindings {
  readonly body: Buffer;
  readonly problems: readonly string[];
  readonly repeated: boolean;
  /** Objects with a name outside the shape or a repeated one, as [start, end) pairs. */
  readonly rare: readonly number[];
}

export interface PageScan {
  /** The array to send: the original buffer when nothing was removed, else the kept elements. */
  readonly body: Buffer;
  /** Whether any element was removed or cut off. */
  readonly changed: boolean;
  /** When nothing was removed: each item checked on the way. */
  readonly findings?: ListFindings;
}

/** At most this many problems are reported per answer (the log line names them). */
const MAX_PROBLEMS = 5;

export const NOT_JSON: ShapeScan = Object.freeze({ problems: Object.freeze(['body is not valid JSON']) });
const REPEATED: ShapeScan = Object.freeze({ problems: Object.freeze(['body is not valid JSON: a member name repeated with another value']) });
export const VALID: ShapeScan = Object.freeze({ problems: Object.freeze([]) });
const EMPTY = Buffer.alloc(0);
const NO_SHAPE = new CompiledShape({ name: '', fields: [], required: [], forbidden: [] }, undefined);

/**
 * One call's findings. A single instance serves every call of every scanner (`SCAN`, reset by
 * `begin`): the scan never re-enters itself, and what outlives a call (problems, rare offsets) is
 * copied out of it, so a conforming answer is checked without an object made for it.
 */
export class Scan {
  shape: CompiledShape = NO_SHAPE;
  buf: Buffer = EMPTY;
  mode: UnknownFieldMode | undefined = undefined;
  readonly problems: string[] = [];
  /** A member name repeated in one object with another value: parsers disagree on such JSON. */
  repeated = false;
  /** With `refuse`: the names outside the shape, each once. */
  unknownNames: Set<string> | undefined = undefined;
  /** With `drop`: the output so far, and where in `buf` the copying stopped. */
  pieces: Buffer[] | undefined = undefined;
  cursor = 0;
  /** The same bytes, read four at a time where a token is compared (a list), else undefined. */
  view: DataView | undefined = undefined;
  /** Without a mode (a page's pass): the objects rareMembers must read, as [start, end) pairs. */
  readonly rare: number[] = [];
  /**
   * The last object's filter field: the index of its value in the enum, -1 none or invalid, -2
   * repeated.
   */
  status = -1;

  begin(shape: CompiledShape, buf: Buffer, mode: UnknownFieldMode | undefined, words: boolean): this {
    this.shape = shape;
    this.buf = buf;
    this.mode = mode;
    this.problems.length = 0;
    this.repeated = false;
    this.unknownNames = undefined;
    this.pieces = undefined;
    this.cursor = 0;
    this.view = words ? wordView(buf) : undefined;
    this.rare.length = 0;
    this.status = -1;
    return this;
  }

  /** Lets go of the call's body and what was made from it (the word view's scratch keeps its bytes until the next list). */
  end(): void {
    this.buf = EMPTY;
    this.view = undefined;
    this.pieces = undefined;
    this.unknownNames = undefined;
    this.problems.length = 0;
    this.rare.length = 0;
  }

  /** `index` -1: the body is the object; else its place in the list. Messages as Ajv words them. */
  problem(index: number, field: string | undefined, message: string): void {
    if (this.problems.length >= MAX_PROBLEMS) return;
    const path = (index === -1 ? '' : `/${index}`) + (field === undefined ? '' : `/${field}`);
    this.problems.push(`${path || '/'} ${message}`);
  }

  result(): ShapeScan {
    if (this.repeated) return REPEATED;
    if (this.problems.length > 0) return { problems: this.problems.slice() };
    // Field names only, never their values: they may be the upstream's internals.
    if (this.unknownNames !== undefined) return { problems: [...this.unknownNames].slice(0, MAX_PROBLEMS).map((f) => `unknown field '${f.slice(0, 64)}'`) };
    if (this.pieces === undefined) return VALID;
    this.pieces.push(this.buf.subarray(this.cursor));
    return { problems: [], body: Buffer.concat(this.pieces) };
  }
}

export const SCAN = new Scan();
