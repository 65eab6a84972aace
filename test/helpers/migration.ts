/**
 * The migration lane's test parts: the legacy backend (`petstore-gateway backend`, its own process)
 * and `next` (test/fixtures/next-upstream.mjs, the reference backend with drift injected on demand),
 * both seeded with the same animals; a gateway whose holder the test keeps, to read the lane's report.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { MigrationReport, OperationReport } from '../../src/migration/report.js';
import type { GatewayHolder } from '../../src/gateway.js';
import { ensureBuilt, killOnTeardown, listenEngine, nodeCommand, policyText, PROJECT_ROOT, request, startBackendProcess, testKey, type Engine, type PolicyInput, type TeardownHost } from './servers.js';

export interface NextUpstream {
  /** Base URL, ending with /v1. */
  readonly url: string;
  readonly pid: number;
  drift(kind: string, ms?: number): Promise<void>;
  stats(): Promise<{ requests: number; inFlight: number; maxInFlight: number; byMethod: Record<string, number> }>;
}

export async function startNextUpstream(t: TeardownHost): Promise<NextUpstream> {
  ensureBuilt();
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'next-upstream.mjs')]), { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'inherit'] });
  killOnTeardown(t, child);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`next-upstream did not start: ${out}`)), 10_000);
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
  });
  const origin = new URL(url).origin;
  return {
    url,
    pid: child.pid!,
    drift: async (kind, ms = 0) => {
      const res = await request(`${origin}/__drift`, { method: 'POST', body: JSON.stringify({ kind, ms }) });
      if (res.status !== 200) throw new Error(`drift ${kind}: ${res.status}`);
    },
    stats: async () => (await request(`${origin}/__stats`)).json as Awaited<ReturnType<NextUpstream['stats']>>,
  };
}

/** The animals both backends hold, created in the same order (so with the same ids). */
export const SEED = [
  '{"name":"Rex","categoryId":1,"status":"available"}',
  '{"name":"Tom","categoryId":9007199254740993,"status":"pending"}',
  '{"name":"Kit","categoryId":2,"status":"sold"}',
  '{"name":"Bo","categoryId":3,"status":"available"}',
];

export async function seed(baseUrl: string): Promise<void> {
  for (const body of SEED) {
    const res = await request(`${baseUrl}/pets`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    if (res.status !== 201) throw new Error(`seeding ${baseUrl}: ${res.status} ${res.body}`);
  }
}

export interface Backends {
  readonly legacy: string;
  readonly next: NextUpstream;
}

/** Legacy and next, each its own process, seeded alike. */
export async function startBackends(t: TeardownHost): Promise<Backends> {
  const [legacy, next] = await Promise.all([startBackendProcess(t), startNextUpstream(t)]);
  await Promise.all([seed(legacy.url), seed(next.url)]);
  return { legacy: legacy.url, next };
}

export interface LaneGateway {
  readonly url: string;
  readonly key: string;
  readonly holder: GatewayHolder;
  report(): Promise<MigrationReport>;
  op(id: string): Promise<OperationReport | undefined>;
  /** Reloads the gateway with `policy`: the problems that prevented it (none: in force). */
  reload(policy: PolicyInput): Promise<string[]>;
}

/** A gateway in this process over `backends` with `migration`, on `engine`; its holder kept. */
export async function startLaneGateway(t: TeardownHost, engine: Engine, backends: Backends, migration: Record<string, unknown>, more: Record<string, unknown> = {}, keys: string = testKey()): Promise<LaneGateway> {
  const env = { PETSTORE_API_KEYS: keys };
  const [{ formatProblems, parsePolicy }, { compileGateway, GatewayHolder }] = await Promise.all([import('../../src/config/load.js'), import('../../src/gateway.js')]);
  const compile = (policy: PolicyInput) => {
    const loaded = parsePolicy(policyText(policy), { env });
    if (!loaded.ok) throw new Error('invalid test policy:\n' + formatProblems('policy', loaded.problems));
    return compileGateway(loaded.config, { env });
  };
  const policy = (m: Record<string, unknown>) => ({ upstream: { url: backends.legacy }, migration: { next: { url: backends.next.url }, ...m }, ...more });
  const holder = new GatewayHolder(compile(policy(migration)));
  const { url } = await listenEngine(t, engine, holder);
  const report = () => holder.migration!.report();
  return {
    url,
    key: keys.split(',')[0]!,
    holder,
    report,
    op: async (id) => (await report()).operations.find((o) => o.operation === id),
    reload: async (m) => holder.replace(compile(policy(m as Record<string, unknown>))).map((p) => `${p.path}: ${p.message}`),
  };
}
