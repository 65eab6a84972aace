/**
 * What `response-contract` learns of an answer, in a slot of its own (src/core/facts.ts), offered
 * to the access log as `contractViolation`: why an answer broke the interface (the 502
 * upstream_contract_violation under `enforce`, or the answer passed on under `monitor`). The
 * operator console reads the declared field by that name to count violations by rule.
 */
import { slot, type Declarations, type LogField } from '../../core/facts.js';

/**
 * The problems of a violating answer, as the scanner words them (paths and rules, never a value
 * of the body): at most `MAX_LOGGED_PROBLEMS`, each at most `MAX_PROBLEM_CHARS` characters,
 * joined with `PROBLEM_SEPARATOR`. Unset for a conforming answer and for a copy run aside.
 */
export const CONTRACT_VIOLATION = slot<string>('contractViolation');

export const MAX_LOGGED_PROBLEMS = 5;
export const MAX_PROBLEM_CHARS = 200;
export const PROBLEM_SEPARATOR = '; ';

/** The access-log field of the violation. */
export const VIOLATION_FIELD: LogField = Object.freeze({ name: 'contractViolation', slot: CONTRACT_VIOLATION });

export const DECLARES: Declarations = Object.freeze({ logFields: Object.freeze([VIOLATION_FIELD]) });

/**
 * The fact's text for `problems`: the first five, each cut at 200 characters, a separator inside
 * one (an unknown field's name is the upstream's text) turned into `, ` so the list splits back
 * into the same problems.
 */
export function violationText(problems: readonly string[]): string {
  let text = '';
  const n = Math.min(problems.length, MAX_LOGGED_PROBLEMS);
  for (let i = 0; i < n; i++) {
    const p = problems[i]!.slice(0, MAX_PROBLEM_CHARS).replaceAll(PROBLEM_SEPARATOR, ', ');
    text += i === 0 ? p : PROBLEM_SEPARATOR + p;
  }
  return text;
}
