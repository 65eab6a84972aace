/**
 * Shadow mode never hurts the primary (the migration lane, docs/migration.md): the client's answer
 * is legacy's, unchanged in content and timing, whatever `next` does. Real processes only: legacy
 * is `petstore-gateway backend`, next is test/fixtures/next-upstream.mjs (drift on demand), and two
 * gateways are CLI processes over the same legacy: one shadowing getPet and listPets to next
 * (`shadow.maxInFlight` 8, `timeoutMs` 2000), one with no migration section. For a next that
 * answers in 2 s, one that never answers and one that resets every connection:
 *   - the primary's p99, measured against the gateway without shadow loaded at the same time
 *     (co-scheduled: both gateways on one CPU, their clients in a process of their own,
 *     test/fixtures/paired-sampler.mjs, on the other; whatever the machine does at that moment
 *     it does to both), stays within 10% of it (plus 2 ms, below);
 *   - every answer is legacy's, byte for byte;
 *   - next never has more copies in flight than maxInFlight allows (plus what timing allows, below);
 *   - every shadowed request is accounted for once in /migration: compared, dropped (in_flight
 *     above all) or failed on next's side;
 *   - the gateway's RSS stays flat over a burst of 2,000 requests against a next that hangs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { cpus } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { TapTest } from '../helpers/assert.js';
import { adminUrl, childEnv, forEachEngine, killOnTeardown, nodeCommand, PROJECT_ROOT, request, spawnCliUntil, startBackendProcess, tempDir, testKey, type Engine } from '../helpers/servers.js';
import { seed, startNextUpstream, type NextUpstream } from '../helpers/migration.js';
import { until } from '../helpers/wait.js';
import type { MigrationReport, OperationReport } from '../../src/migration/report.js';

const MAX_IN_FLIGHT = 8;
const TIMEOUT_MS = 2000;
/**
 * Per measurement, each gateway: requests one at a time (both clients at once), then bursts. The
 * requests one at a time last a copy's deadline at least (`minMs`): copies are sent
 * only when a place is free, so the first maxInFlight requests of a phase carry one and the rest
 * are dropped until the deadline frees the places; measured across it, the requests that carry a
 * copy (two rounds of maxInFlight, at least) are more than 1% of those counted, and a copy that
 * held its request back would show in the p99.
 */
const SAMPLING = { sequential: 240, minMs: TIMEOUT_MS + 500, maxSequential: 960, bursts: 40, concurrency: 4 };
/**
 * A measurement the machine disturbed is taken again, at most this many times in all: on the
 * shared 2-core machine (load average 8 to 14 while this was written) one stall of some tens of
 * milliseconds lands on either side, and an A/A pair (two gateways without shadow) missed the
 * bound below in 1 to 2 measurements of 8. A primary held back for next (2 s, or forever) fails
 * every attempt. Checked by delaying, in the lane, each request that carries a copy by 20 ms: the
 * reset phase (every request carries one) failed all its attempts; in the sleep and hang phases,
 * where 1 to 3% of the requests carry one, a delay that small showed only while the machine's own
 * p99 was below it.
 */
const ATTEMPTS = 4;
/** The RSS burst against a next that hangs (requests, and how many at once). */
const RSS_REQUESTS = 2000;
const RSS_CONCURRENCY = 8;
const RSS_MAX_GROWTH_MB = 20;

/**
 * With two CPUs or more, the two gateways share the last one and every other process (the clients,
 * legacy, next, this runner) the rest, as bench/ab.mjs pairs its targets: whatever takes that CPU
 * from one gateway takes it from the other. Where taskset is missing nothing is pinned.
 */
const GATEWAYS_CPU = cpus().length >= 2 ? String(cpus().length - 1) : undefined;
const OTHERS = cpus().length >= 2 ? (cpus().length === 2 ? '0' : `0-${cpus().length - 2}`) : undefined;
function pin(pid: number | undefined, cpuList: string | undefined): void {
  if (pid !== undefined && cpuList !== undefined) spawnSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore', timeout: 5000 });
}

pin(process.pid, OTHERS);

const KEY = testKey();
const dir = tempDir(t, 'migration-isolation');
const legacy = await startBackendProcess(t);
pin(legacy.handle.child.pid, OTHERS);
await seed(legacy.url);
const PATHS = ['/pets/1', '/pets?limit=10', '/pets/2', '/pets?limit=3', '/pets/3', '/pets/4'];
/** Legacy's own answer to each path, asked directly: what every client must get. */
const LEGACY = new Map<string, string>();
for (const p of PATHS) LEGACY.set(p, (await request(`${legacy.url}${p}`)).body);

const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"msg":"admin listening)/;

interface Gw {
  readonly url: string;
  readonly admin: string;
  readonly pid: number;
}

async function serve(t: TapTest, engine: Engine, name: string, migration: Record<string, unknown> | undefined): Promise<Gw> {
  const file = join(dir, `${engine}-${name}.json`);
  const policy = { version: 1, upstream: { url: legacy.url }, log: { access: false }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } }, ...(migration === undefined ? {} : { migration }) };
  writeFileSync(file, JSON.stringify(policy));
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', '--engine', engine], READY, {
    env: { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' },
    timeoutMs: 30_000,
  });
  pin(handle.child.pid, GATEWAYS_CPU);
  return { url: match[1]!, admin: adminUrl(handle), pid: handle.child.pid! };
}

interface Side {
  /** The counted requests' latencies, ms. */
  readonly ms: number[];
  /** Answers that were not legacy's own. */
  readonly wrong: string[];
  /** Every request sent, warm-up included. */
  readonly perOp: { getPet: number; listPets: number };
}

/**
 * One measurement of `a` and `b` loaded together by test/fixtures/paired-sampler.mjs (its own
 * process, bounded: a fixed count, 5 s per request, 60 s in all).
 */
async function sample(t: TapTest, a: Gw, b: Gw, warmup = 0): Promise<{ a: Side; b: Side }> {
  const config = { a: a.url, b: b.url, key: KEY, legacy: legacy.url, paths: PATHS, warmup, ...SAMPLING };
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'paired-sampler.mjs')]), { env: { ...childEnv(), SAMPLER: JSON.stringify(config) }, stdio: ['ignore', 'pipe', 'inherit'] });
  killOnTeardown(t, child);
  pin(child.pid, OTHERS);
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code = await new Promise((r) => child.once('exit', r));
  clearTimeout(timer);
  const line = /^sampled (\{.*\})$/m.exec(out)?.[1];
  if (code !== 0 || line === undefined) throw new Error(`the sampler failed (${String(code)}): ${out.slice(-500)}`);
  return JSON.parse(line) as { a: Side; b: Side };
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
}

async function report(gw: Gw): Promise<Record<'getPet' | 'listPets', OperationReport>> {
  const res = await request(`${gw.admin}/migration`);
  if (res.status !== 200) throw new Error(`GET /migration: ${res.status} ${res.body}`);
  const ops = (res.json as MigrationReport).operations;
  const of = (id: string) => {
    const o = ops.find((x) => x.operation === id);
    if (o === undefined) throw new Error(`no ${id} in /migration: ${res.body}`);
    return o;
  };
  return { getPet: of('getPet'), listPets: of('listPets') };
}

const sum = (r: Readonly<Record<string, number>>) => Object.values(r).reduce((x, y) => x + y, 0);

/** The gateway's resident set, MB (/proc/PID/status VmRSS). */
function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m === null) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) / 1024;
}

/**
 * Until every shadowed request so far is accounted for (compared, dropped, or failed on next's
 * side: every pair done, the last given up at its deadline) and next holds none: at most
 * TIMEOUT_MS and 2 s more.
 */
async function settled(gw: Gw, next: NextUpstream): Promise<void> {
  const done = (o: OperationReport) => o.compared + sum(o.dropped) + sum(o.nextErrors) === o.routed.legacy;
  await until('every copy accounted for', async () => {
    const r = await report(gw);
    return done(r.getPet) && done(r.listPets) && (await next.stats()).inFlight === 0;
  }, TIMEOUT_MS + 2000);
}

/** `n` GETs through `gw`, `concurrency` at once on keep-alive connections; the answers that were not legacy's. */
async function burst(gw: Gw, n: number, concurrency: number): Promise<string[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const wrong: string[] = [];
  const get = (path: string) =>
    new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/v1${path}`, { agent, headers: { authorization: `Bearer ${KEY}` } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200 || body !== LEGACY.get(path)) wrong.push(`${path}: ${res.statusCode} ${body.slice(0, 120)}`);
          resolve();
        });
      });
      req.setTimeout(5000, () => req.destroy(new Error(`${path}: no answer within 5 s`)));
      req.on('error', reject);
      req.end();
    });
  try {
    for (let i = 0; i < n / concurrency; i++) await Promise.all(Array.from({ length: concurrency }, (_, k) => get(PATHS[(i + k) % PATHS.length]!)));
  } finally {
    agent.destroy();
  }
  return wrong;
}

forEachEngine(t, async (t, engine) => {
  await t.test(`shadow mode never hurts the primary (${engine})`, async (t) => {
    // A next of its own per engine: its /__stats maxInFlight is then this engine's gateway's alone.
    const next: NextUpstream = await startNextUpstream(t);
    pin(next.pid, OTHERS);
    await seed(next.url);
    const migration = {
      next: { url: next.url },
      operations: { getPet: { mode: 'shadow' }, listPets: { mode: 'shadow' } },
      shadow: { maxInFlight: MAX_IN_FLIGHT, timeoutMs: TIMEOUT_MS },
    };
    const [shadowed, plain] = await Promise.all([serve(t, engine, 'shadow', migration), serve(t, engine, 'plain', undefined)]);
    // Both warmed (JIT, connection pools), not counted; next answers as legacy does meanwhile.
    await next.drift('none');
    await sample(t, shadowed, plain, 20);
    await settled(shadowed, next);

    const phases = [
      { kind: 'sleep', ms: TIMEOUT_MS, what: 'next answers in 2 s' },
      { kind: 'hang', ms: 0, what: 'next never answers' },
      { kind: 'reset', ms: 0, what: 'next resets every connection' },
    ] as const;
    for (const phase of phases) {
      await next.drift(phase.kind, phase.ms);
      const before = await report(shadowed);
      const copiesBefore = (await next.stats()).requests;
      const sent = { getPet: 0, listPets: 0 };
      const tried: string[] = [];
      let met = false;
      for (let attempt = 1; attempt <= ATTEMPTS && !met; attempt++) {
        const { a: s, b: p } = await sample(t, shadowed, plain);
        t.same(s.wrong, [], `${phase.what}: every answer of the shadowing gateway is legacy's`);
        t.same(p.wrong, [], `${phase.what}: every answer of the plain gateway is legacy's`);
        for (const op of ['getPet', 'listPets'] as const) sent[op] += s.perOp[op];
        const [sp50, sp99, pp50, pp99] = [quantile(s.ms, 0.5), quantile(s.ms, 0.99), quantile(p.ms, 0.5), quantile(p.ms, 0.99)];
        tried.push(`shadow p50 ${sp50.toFixed(2)} p99 ${sp99.toFixed(2)} ms, no shadow p50 ${pp50.toFixed(2)} p99 ${pp99.toFixed(2)} ms (${s.ms.length} requests each)`);
        t.comment(`${engine}, ${phase.what}, attempt ${attempt}: ${tried[tried.length - 1]}`);
        // Within 10%, plus 2 ms: on a quiet machine these figures are about a millisecond, where 10%
        // is 100 µs, less than one descheduling of either process moves a request; a next that held
        // the primary back would move it by its own delay (2 s, or forever), far past both.
        met = sp99 <= pp99 * 1.1 + 2;
      }
      t.ok(met, `${phase.what}: the primary's p99 within 10% (+2 ms) of no shadow: ${tried.join('; ')}`);

      await settled(shadowed, next);
      const after = await report(shadowed);
      const stats = await next.stats();
      let copies = 0;
      for (const op of ['getPet', 'listPets'] as const) {
        const d = (f: (o: OperationReport) => number) => f(after[op]) - f(before[op]);
        const routed = d((o) => o.routed.legacy);
        const dropped = d((o) => sum(o.dropped));
        const inFlight = d((o) => o.dropped.in_flight ?? 0);
        const failed = d((o) => sum(o.nextErrors));
        const compared = d((o) => o.compared);
        copies += routed - dropped;
        t.equal(routed, sent[op], `${phase.what}, ${op}: every request counted as legacy's`);
        t.equal(compared + dropped + failed, routed, `${phase.what}, ${op}: each accounted for once: ${compared} compared, ${dropped} dropped (${inFlight} in_flight), ${failed} failed on next`);
        // A copy lives until next answers, fails, or 2 s pass: a next that answers in 2 s or never
        // holds maxInFlight copies at once, and the rest are dropped and counted.
        if (phase.kind === 'reset') t.ok(failed > 0, `${phase.what}, ${op}: the copies next reset counted as its failures (${failed})`);
        else t.ok(inFlight > 0, `${phase.what}, ${op}: copies past maxInFlight dropped and counted (${inFlight})`);
      }
      t.equal(stats.requests - copiesBefore, copies, `${phase.what}: next got exactly the copies not dropped (${copies})`);
      // The lane holds at most MAX_IN_FLIGHT copies whose pair is not done (checked and counted in
      // one turn of the event loop). next may count a few more for a moment: a copy given up at its
      // deadline is aborted at once (its socket destroyed), but next counts it until it reads the
      // close, and meanwhile the lane, its place free, may send the copy of the next client request.
      // Those are at most the client requests open at once (a new copy needs a new request, and
      // next reads the close within the round trip that request makes to legacy): the sampler's
      // concurrency. Copies next answers (sleep) leave next's count before the lane's: none more.
      const bound = MAX_IN_FLIGHT + SAMPLING.concurrency;
      t.ok(stats.maxInFlight <= bound, `${phase.what}: next's copies in flight at most ${MAX_IN_FLIGHT} + ${SAMPLING.concurrency}: ${stats.maxInFlight}`);
      if (phase.kind === 'sleep') t.ok(stats.maxInFlight >= MAX_IN_FLIGHT, `the bound is what held the copies back: ${stats.maxInFlight} in flight at most`);

      if (phase.kind === 'hang') {
        // Flat memory: the copies of a next that never answers are dropped past the bound and
        // given up at their deadline, never kept.
        const rss0 = rssMb(shadowed.pid);
        const r0 = await report(shadowed);
        const n0 = (await next.stats()).requests;
        t.same(await burst(shadowed, RSS_REQUESTS, RSS_CONCURRENCY), [], "the burst: every answer legacy's");
        const rss1 = rssMb(shadowed.pid);
        await settled(shadowed, next);
        const r1 = await report(shadowed);
        const dropped = sum(r1.getPet.dropped) + sum(r1.listPets.dropped) - sum(r0.getPet.dropped) - sum(r0.listPets.dropped);
        const sentToNext = (await next.stats()).requests - n0;
        t.ok(rss1 - rss0 < RSS_MAX_GROWTH_MB, `RSS ${rss0.toFixed(1)} -> ${rss1.toFixed(1)} MB over ${RSS_REQUESTS} requests against a next that hangs`);
        t.equal(dropped + sentToNext, RSS_REQUESTS, `each copy of the burst dropped (${dropped}) or sent (${sentToNext})`);
        t.ok((await next.stats()).maxInFlight <= bound, `the burst: next's copies in flight still at most ${bound}`);
      }
    }
  });
});
