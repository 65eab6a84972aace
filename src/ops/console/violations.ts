/**
 * An upstream contract violation's problem, as response-contract words it (its access-log field
 * `contractViolation`), turned into the rule the console counts: the field and the kind. A field
 * is a JSON pointer with array indexes as `*` (`/0/id` and `/7/id` are one rule), so the rules of
 * an operation are bounded by its answer's schema, not by how long the upstream's lists are.
 * `ViolationBook` counts them: at most MAX_RULES rules per operation (the rest under one
 * `_OTHER` rule) and the MAX_SAMPLES newest samples.
 */
import { looksLikeSecret } from '../../core/key-owner.js';
import { OTHER_CONSUMER, type ViolationRule, type ViolationSample } from './types.js';

/** The problems of a `contractViolation` field's text (response-contract joins them with `; `). */
export const PROBLEM_SEPARATOR = '; ';

/** A rule's field and kind. */
export interface RuleKey {
  readonly field: string;
  readonly kind: string;
}

/** Problems whose field is a part of the answer rather than a place in its body, by their first word. */
const PARTS: ReadonlyArray<readonly [prefix: string, field: string]> = [
  ['status ', '(status)'],
  ['content-type ', '(content-type)'],
  ['content-encoding ', '(content-encoding)'],
  ['body ', '(body)'],
];

/** The longest kind kept (response-contract cuts a problem at 200 characters already). */
const MAX_KIND = 200;

/** A JSON pointer with each array index (a segment of digits) as `*`. */
function wildcardIndexes(pointer: string): string {
  if (pointer === '/') return pointer;
  let out = '';
  for (const segment of pointer.slice(1).split('/')) out += /^\d+$/.test(segment) ? '/*' : `/${segment}`;
  return out;
}

/**
 * The rule of one problem:
 * - `/0/id must be an integer within int64` -> `/*\/id`, `must be an integer within int64`;
 *   `/ must be array` -> `/`, `must be array`;
 * - `status 500 where the interface says 200` -> `(status)`, the problem as written (the numbers
 *   kept: each pair is its own rule); likewise `content-type is not application/json` ->
 *   `(content-type)`, `content-encoding gzip` -> `(content-encoding)`, `body larger than the
 *   gateway buffers` and `body is not valid JSON` -> `(body)`;
 * - anything else (`unknown field 'internalNote'` under `unknownFields: refuse`) -> `(other)`,
 *   the problem as written.
 */
export function ruleOf(problem: string): RuleKey {
  const text = problem.trim().slice(0, MAX_KIND);
  if (text.startsWith('/')) {
    const space = text.indexOf(' ');
    if (space > 0) return { field: wildcardIndexes(text.slice(0, space)), kind: text.slice(space + 1) };
  }
  for (const [prefix, field] of PARTS) if (text.startsWith(prefix)) return { field, kind: text };
  return { field: '(other)', kind: text };
}

/**
 * Control characters, and the invisible ones that make a text read as another (bidi overrides,
 * zero widths, separators): an unknown field's name is the upstream's text, JSON escapes decoded.
 */
const HIDDEN = /[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;
/** The longest problem kept (response-contract cuts them there already; the field is read by name, whoever set it). */
const MAX_PROBLEM = 200;

/** What stands for a problem's text that looks like a secret. */
const REDACTED = '(redacted: looks like a secret)';
const UNKNOWN_FIELD = /^unknown field '/;

/**
 * A problem as the console keeps it: hidden characters written as `\uXXXX`, at most MAX_PROBLEM
 * characters, and redacted when it looks like a secret (an unknown field's name is the upstream's
 * text: a legacy upstream keying a map by tokens would show them).
 */
export function cleanProblem(problem: string): string {
  const text = problem.replace(HIDDEN, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).slice(0, MAX_PROBLEM);
  if (!looksLikeSecret(text)) return text;
  return UNKNOWN_FIELD.test(text) ? `unknown field '${REDACTED}'` : REDACTED;
}

/** The problems of a `contractViolation` text, empty ones left out, each cleaned (`cleanProblem`). */
export function problemsOf(text: string): string[] {
  return text
    .split(PROBLEM_SEPARATOR)
    .filter((p) => p.length > 0)
    .map(cleanProblem);
}

/** Distinct rules kept per operation; the rest are counted under one `_OTHER` rule. */
export const MAX_RULES = 64;
/** Violation samples kept, newest first. */
export const MAX_SAMPLES = 50;
/** Problems kept in a sample (response-contract logs no more). */
export const SAMPLE_PROBLEMS = 5;

interface Rule {
  readonly operation: string;
  readonly field: string;
  readonly kind: string;
  count: number;
  lastSeenMs: number;
  /** Counted since the last delta. */
  delta: number;
}

/** An operation's rules by field, then kind; past MAX_RULES, one `_OTHER` rule. */
interface OperationRules {
  readonly byField: Map<string, Map<string, Rule>>;
  size: number;
  other: Rule | undefined;
}

function ruleView(r: Rule, count: number): ViolationRule {
  return { operation: r.operation, field: r.field, kind: r.kind, count, lastSeenMs: r.lastSeenMs };
}

/** The violations counted by operation and rule since the process started, and the newest samples. */
export class ViolationBook {
  private readonly rules = new Map<string, OperationRules>();
  private readonly touched: Rule[] = [];
  /** A ring of MAX_SAMPLES: `next` is where the next one goes. */
  private readonly samples: ViolationSample[] = [];
  private next = 0;
  private newSamples = 0;

  constructor(private readonly trackDelta: boolean) {}

  /** Counts each problem of `text` (a `contractViolation` field) by its rule, and keeps a sample. */
  add(text: string, operation: string, atMs: number, requestId: string, status: number | null): void {
    const problems = problemsOf(text);
    for (const problem of problems) {
      const { field, kind } = ruleOf(problem);
      this.count(operation, field, kind, atMs);
    }
    this.samples[this.next] = Object.freeze({ atMs, operation, requestId, status, problems: Object.freeze(problems.slice(0, SAMPLE_PROBLEMS)) });
    this.next = (this.next + 1) % MAX_SAMPLES;
    if (this.newSamples < MAX_SAMPLES) this.newSamples++;
  }

  private count(operation: string, field: string, kind: string, at: number): void {
    let ops = this.rules.get(operation);
    if (ops === undefined) this.rules.set(operation, (ops = { byField: new Map(), size: 0, other: undefined }));
    let kinds = ops.byField.get(field);
    let rule = kinds?.get(kind);
    if (rule === undefined) {
      if (ops.size >= MAX_RULES) {
        rule = ops.other ??= { operation, field: OTHER_CONSUMER, kind: OTHER_CONSUMER, count: 0, lastSeenMs: at, delta: 0 };
      } else {
        if (kinds === undefined) ops.byField.set(field, (kinds = new Map()));
        kinds.set(kind, (rule = { operation, field, kind, count: 0, lastSeenMs: at, delta: 0 }));
        ops.size++;
      }
    }
    rule.count++;
    if (at > rule.lastSeenMs) rule.lastSeenMs = at;
    if (this.trackDelta) {
      if (rule.delta === 0) this.touched.push(rule);
      rule.delta++;
    }
  }

  /** Every rule with its count. */
  rulesNow(): ViolationRule[] {
    const out: ViolationRule[] = [];
    for (const ops of this.rules.values()) {
      for (const kinds of ops.byField.values()) for (const r of kinds.values()) out.push(ruleView(r, r.count));
      if (ops.other !== undefined) out.push(ruleView(ops.other, ops.other.count));
    }
    return out;
  }

  /** The `n` newest samples (all: MAX_SAMPLES), newest first. */
  newest(n: number = MAX_SAMPLES): ViolationSample[] {
    const out: ViolationSample[] = [];
    const held = Math.min(n, this.samples.length);
    for (let i = 1; i <= held; i++) out.push(this.samples[(this.next - i + MAX_SAMPLES) % MAX_SAMPLES]!);
    return out;
  }

  get changed(): boolean {
    return this.touched.length > 0 || this.newSamples > 0;
  }

  /** The rules counted since the last call (counts are increments) and the new samples. */
  takeDelta(): { violations: ViolationRule[]; samples: ViolationSample[] } {
    const violations = this.touched.map((r) => {
      const v = ruleView(r, r.delta);
      r.delta = 0;
      return v;
    });
    this.touched.length = 0;
    const samples = this.newest(this.newSamples);
    this.newSamples = 0;
    return { violations, samples };
  }
}
