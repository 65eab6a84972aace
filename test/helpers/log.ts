/** A PolicyLog that keeps what the policies report, for the unit tests to read. */
import type { PolicyLog } from '../../src/core/policy.js';

export interface Logged {
  fields: Record<string, unknown>;
  message: string;
}

export function fakeLog(): PolicyLog & { lines: Logged[] } {
  const lines: Logged[] = [];
  return { lines, warn: (fields, message) => void lines.push({ fields, message }) };
}
