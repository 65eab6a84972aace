/**
 * What an instance says of itself in the fleet's heartbeat (`InstanceBeat`): who it is, its
 * version, the policy in force by fingerprint, its readiness and its last reload. The fingerprint
 * is of the policy as data (YAML or JSON parsed, keys sorted): a comment, the indentation or the
 * order of keys changes nothing, a changed value does. An interface document the policy names by
 * path counts by its path.
 */
import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { parse } from 'yaml';
import type { InstanceBeat } from './types.js';

/** JSON with every object's keys sorted: one text per value. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** SHA-256 of the policy's canonical JSON, the first 16 hex digits; of the text itself when it does not parse. */
export function policyFingerprint(text: string): string {
  let data: string;
  try {
    data = canonical(parse(text) as unknown);
  } catch {
    data = text;
  }
  return createHash('sha256').update(data).digest('hex').slice(0, 16);
}

export interface BeatState {
  readonly version: string;
  readonly workers: number;
  /** The policy text in force now. */
  readonly policy: () => string;
  /** When the last reload that took was (epoch ms), or null. */
  readonly lastReloadMs: () => number | null;
  /** Readiness as last checked. */
  readonly readiness: () => { readonly ready: boolean; readonly reason?: string | undefined };
  readonly now?: () => number;
}

/** This instance's heartbeat, made now; the id is fixed for the process's life. */
export function selfBeat(state: BeatState): () => InstanceBeat {
  const host = hostname();
  const id = `${host}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const now = state.now ?? Date.now;
  const startedAtMs = now();
  let fingerprintOf: { text: string; fp: string } | undefined;
  return () => {
    const text = state.policy();
    if (fingerprintOf?.text !== text) fingerprintOf = { text, fp: policyFingerprint(text) };
    const r = state.readiness();
    return {
      id,
      host,
      pid: process.pid,
      version: state.version,
      policyFingerprint: fingerprintOf.fp,
      ready: r.ready,
      reason: r.ready ? null : (r.reason ?? null),
      startedAtMs,
      lastReloadMs: state.lastReloadMs(),
      workers: state.workers,
      atMs: now(),
    };
  };
}
