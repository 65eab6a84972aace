/**
 * The three entry points of a compiled scanner (index.ts binds them to a shape): a whole answer
 * checked, a list page cut and checked in the same pass, and the verdict finished from a page's
 * findings.
 */
import { isUtf8 } from 'node:buffer';
import { growKept, joinKept, ScanError, skipSpace } from './json.js';
import { rareMembers } from './members.js';
import { scanElement, scanList } from './object.js';
import { NOT_JSON, SCAN, VALID, type ListFindings, type PageScan, type Scan, type ShapeScan, type UnknownFieldMode } from './scan.js';
import type { CompiledShape } from './shape.js';

const COMMA = 0x2c;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const NONE: readonly never[] = Object.freeze([]);

/**
 * Checks a whole answer body against the shape (`list` false) or a list of it (`list` true) and
 * finds the fields outside the shape, handled as `unknownFields` says. Never throws on any input.
 */
export function scanBody(c: CompiledShape, body: Buffer, list: boolean, unknownFields: UnknownFieldMode): ShapeScan {
  // RFC 8259 section 8.1: JSON between systems is UTF-8; checked natively, once, for the whole body.
  if (!isUtf8(body)) return NOT_JSON;
  const s = SCAN.begin(c, body, unknownFields, list);
  try {
    const start = skipSpace(body, 0);
    const end = list ? scanList(s, start) : scanElement(s, start, -1);
    if (skipSpace(body, end) !== body.length) return NOT_JSON;
    return s.result();
  } catch (err) {
    if (err instanceof ScanError) return NOT_JSON;
    throw err;
  } finally {
    s.end();
  }
}

/** The page's kept elements, [start, end) offsets (json.ts, growKept). */
let KEPT: Uint32Array = new Uint32Array(256);

/**
 * filterArray (the same cut after `limit` kept elements, unread beyond; the same filter; an object
 * with its filter field twice dropped; the same ScanError when the bytes read are not a JSON array)
 * that checks each kept element against the shape on the way, so that a list the contract will
 * check is read once.
 */
export function scanPage(c: CompiledShape, buf: Buffer, limit: number, filterValue: string | undefined): PageScan {
  let wanted = -1;
  if (filterValue !== undefined) {
    const filter = c.fields[c.filter];
    if (filter === undefined) throw new Error(`scanPage: ${c.shape.name} was compiled without a filter field`);
    // A value outside the enum (never, after the query check) matches no element: -3.
    const index = filter.values.indexOf(filterValue);
    wanted = index === -1 ? -3 : index;
  }
  const s = SCAN.begin(c, buf, undefined, true);
  try {
    return readPage(s, limit, wanted);
  } finally {
    s.end();
  }
}

function readPage(s: Scan, limit: number, wanted: number): PageScan {
  const buf = s.buf;
  let i = skipSpace(buf, 0);
  if (buf[i] !== LBRACKET) throw new ScanError('not a JSON array');
  i = skipSpace(buf, i + 1);
  let kept = KEPT;
  let k = 0;
  let removed = false;
  let cut = false;
  if (buf[i] === RBRACKET) i++;
  else {
    for (;;) {
      if (k === limit * 2) {
        // Another element follows the last one we may send: cut here, unread.
        removed = cut = true;
        break;
      }
      const start = i;
      const problems = s.problems.length;
      const rare = s.rare.length;
      const repeated = s.repeated;
      const end = scanElement(s, i, k / 2);
      if (wanted === -1 || (buf[start] === LBRACE && s.status === wanted)) {
        if (k === kept.length) kept = KEPT = growKept(kept);
        kept[k++] = start;
        kept[k++] = end;
      } else {
        // Dropped by the filter: what it held is not the answer's, nor are its problems.
        removed = true;
        s.problems.length = problems;
        s.rare.length = rare;
        s.repeated = repeated;
      }
      i = skipSpace(buf, end);
      if (buf[i] === RBRACKET) {
        i++;
        break;
      }
      if (buf[i] !== COMMA) throw new ScanError(i >= buf.length ? 'truncated' : "',' or ']' expected");
      i = skipSpace(buf, i + 1);
    }
  }
  if (!cut && skipSpace(buf, i) !== buf.length) throw new ScanError('trailing data');
  if (removed) return { body: joinKept(buf, kept, k), changed: true };
  // The common page: every item valid and plain. Else the findings are copied out of the shared
  // scan, as they live until the contract reads them.
  if (s.problems.length === 0 && s.rare.length === 0 && !s.repeated) return new CleanPage(buf);
  return new CheckedPage(buf, s.problems.slice(), s.repeated, s.rare.slice());
}

/**
 * An unchanged page whose every item was valid, with no name outside the shape or repeated. The
 * page is its own findings, and they are its methods: one object of one field per answer, smaller
 * than filterArray's result.
 */
class CleanPage implements PageScan, ListFindings {
  constructor(readonly body: Buffer) {}

  get changed(): false {
    return false;
  }

  get findings(): ListFindings {
    return this;
  }

  get problems(): readonly string[] {
    return NONE;
  }

  get repeated(): false {
    return false;
  }

  get rare(): readonly number[] {
    return NONE;
  }
}

/** An unchanged page with what its pass found (a problem, an object to read again). */
class CheckedPage implements PageScan, ListFindings {
  readonly changed = false;

  constructor(
    readonly body: Buffer,
    readonly problems: readonly string[],
    readonly repeated: boolean,
    readonly rare: readonly number[],
  ) {}

  get findings(): ListFindings {
    return this;
  }
}

/** The verdict on a list from a page's findings, as scanBody would give on `findings.body`. */
export function finish(c: CompiledShape, findings: ListFindings, unknownFields: UnknownFieldMode): ShapeScan {
  if (!isUtf8(findings.body)) return NOT_JSON;
  // The common list: every item valid, no name outside the shape, none repeated.
  if (findings.problems.length === 0 && findings.rare.length === 0 && !findings.repeated) return VALID;
  const s = SCAN.begin(c, findings.body, unknownFields, false);
  try {
    s.problems.push(...findings.problems);
    s.repeated = findings.repeated;
    for (let k = 0; k < findings.rare.length; k += 2) rareMembers(s, findings.rare[k]!, findings.rare[k + 1]!);
    return s.result();
  } finally {
    s.end();
  }
}
