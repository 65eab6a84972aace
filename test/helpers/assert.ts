/** Assertions shared by the end-to-end tests: the Error shape and the JSON content type. */
import type tap from 'tap';
import { CATALOGUE, type ErrorCode } from '../../src/core/errors.js';
import { JSON_TYPE, type Response } from './servers.js';

/** A tap test (the argument of a subtest callback). */
export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0];

export interface ErrorExpectation {
  /** The exact message, a pattern for it, or (by default) the catalogue's message for `code`. */
  readonly message?: string | RegExp | 'any';
  /** Response headers that must be present with exactly these values. */
  readonly headers?: Record<string, string>;
  /** Response headers that must be absent. */
  readonly absent?: readonly string[];
  /**
   * For a known bug: every assertion is marked todo with this reason, so it runs and reports but
   * does not fail the suite. (A todo subtest would not run at all.)
   */
  readonly todo?: string;
}

/**
 * Asserts an Error response: the HTTP status, `application/json; charset=utf-8`, and a body that is
 * exactly `{code, message, status}` with `status` equal to the HTTP status.
 */
export function assertError(t: TapTest, res: Response, status: number, code: string, expect: ErrorExpectation = {}): void {
  const x = expect.todo === undefined ? {} : { todo: expect.todo };
  t.equal(res.status, status, `HTTP status ${status}`, x);
  t.equal(res.headers['content-type'], JSON_TYPE, 'content-type of the Error', x);
  const body = res.json as Record<string, unknown> | undefined;
  t.type(body, 'object', `the body is JSON: ${res.body.slice(0, 200)}`, x);
  if (body === undefined || body === null) return;
  t.strictSame(Object.keys(body).sort(), ['code', 'message', 'status'], 'exactly code, message, status', x);
  t.equal(body.code, code, 'code', x);
  t.equal(body.status, status, 'status field equals the HTTP status', x);
  t.type(body.message, 'string', 'message is a string', x);
  const message = expect.message ?? (code in CATALOGUE ? CATALOGUE[code as ErrorCode].message : 'any');
  if (message instanceof RegExp) t.match(body.message, message, 'message', x);
  else if (message !== 'any') t.equal(body.message, message, 'message', x);
  else t.ok(typeof body.message === 'string' && body.message.length > 0, 'message is not empty', x);
  t.equal(res.headers['content-length'], String(res.raw.length), 'content-length matches the body', x);
  for (const [name, value] of Object.entries(expect.headers ?? {})) t.equal(res.headers[name], value, `header ${name}`, x);
  for (const name of expect.absent ?? []) t.notOk(name in res.headers, `no ${name} header`, x);
}

/** Asserts a successful JSON response with the exact status and content type; returns the body text. */
export function assertJson(t: TapTest, res: Response, status: number): string {
  t.equal(res.status, status, `HTTP status ${status}: ${res.body.slice(0, 200)}`);
  t.equal(res.headers['content-type'], JSON_TYPE, 'content-type');
  t.not(res.json, undefined, 'the body is JSON');
  return res.body;
}

/**
 * Text a test did not write (a generated counterexample, a body) made safe for a TAP message or
 * comment: every character outside printable ASCII becomes a `\uXXXX` escape. tap's parser ends a
 * line at U+2028 and U+2029 as well as at a newline, and JSON.stringify leaves both as they are:
 * a fast-check name of U+2028 once cut a comment in two and failed a passing subtest
 * ("test count(1) != plan(null)").
 */
export function tapText(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
