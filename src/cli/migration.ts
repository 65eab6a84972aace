/**
 * `petstore-gateway migration report|reset`: the migration lane's report from a running gateway's
 * admin listener (`GET /migration`, src/ops/admin.ts), printed as a table per operation with the
 * gate's verdict (src/migration/report.ts `verdict`), and the reset of its counts
 * (`DELETE /migration`, with an admin token from the environment). The exit code says the verdict,
 * so a deployment pipeline can wait on it: 0 ready, 3 not ready.
 */
import { parseArgs } from 'node:util';
import { percentText, verdict, type Gate, type MigrationReport, type OperationReport, type Verdict } from '../migration/report.js';
import { EXIT, HelpRequested, UsageError } from './usage.js';

export const MIGRATION_HELP = `Usage: petstore-gateway migration report [--admin URL] [--json] [--min-comparisons N]
                                        [--max-different-ratio R] [--max-violations N]
       petstore-gateway migration reset [--admin URL]

The migration lane (docs/migration.md) from a running gateway's admin listener.
  report    GET /migration: per operation its mode, comparisons, the share that differ and the
            paths that differ most, next's contract violations, failures and fallbacks, p50/p99
            latency of legacy beside next; then the verdict against the gate (migration.gate,
            overridden by the flags). With a migration.store, the whole fleet's counts.
  reset     DELETE /migration: the counts start again from zero (the fleet's, with a store).
            Needs an admin token: PETSTORE_ADMIN_TOKEN, else the first of PETSTORE_ADMIN_TOKENS.
  --admin URL              the admin listener (default http://127.0.0.1:9464)
  --json                   print {"report", "verdict"} as JSON instead of the table
  --min-comparisons N      comparisons needed per operation (default: the gate's, 10000)
  --max-different-ratio R  largest share that may differ, 0 to 1 (default: the gate's, 0.001)
  --max-violations N       most contract violations by next (default: the gate's, 0)
Exit codes: 0 ready (reset: done), 3 not ready, 1 the admin listener could not be read (or the
lane is off there), 2 bad usage.
`;

const DEFAULT_ADMIN = 'http://127.0.0.1:9464';
const TIMEOUT_MS = 10_000;

export interface CommandIo {
  readonly out: { write(text: string): unknown };
  readonly err: { write(text: string): unknown };
  readonly env: Readonly<Record<string, string | undefined>>;
}

function adminUrl(value: unknown): string {
  const text = typeof value === 'string' ? value : DEFAULT_ADMIN;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--admin must be the admin listener's http(s) URL, such as ${DEFAULT_ADMIN}, not '${text}'`, 'migration');
  }
  if (!/^https?:$/.test(url.protocol) || url.username !== '' || url.password !== '') {
    throw new UsageError(`--admin must be an http(s) URL without user or password, such as ${DEFAULT_ADMIN}`, 'migration');
  }
  return text.replace(/\/+$/, '');
}

function wholeFlag(flag: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (!/^\d{1,12}$/.test(text)) throw new UsageError(`${flag} must be a whole number, not '${text}'`, 'migration');
  return Number(text);
}

function ratioFlag(flag: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new UsageError(`${flag} must be a number from 0 to 1 (0.001 is 0.1%), not '${text}'`, 'migration');
  return n;
}

/** The admin token for the reset: PETSTORE_ADMIN_TOKEN, else the first of PETSTORE_ADMIN_TOKENS. */
function adminToken(env: CommandIo['env']): string | undefined {
  const one = env.PETSTORE_ADMIN_TOKEN?.trim();
  if (one !== undefined && one !== '') return one;
  const first = env.PETSTORE_ADMIN_TOKENS?.split(',')[0]?.trim();
  return first === undefined || first === '' ? undefined : first;
}

/** Why a request to the admin listener got no answer, in a few words. */
function noAnswer(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  return e.name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS} ms` : (e.cause?.code ?? e.cause?.message ?? e.message);
}

/** The Error shape's message of an admin answer, or its status. */
async function refusal(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { message?: unknown };
    if (typeof body.message === 'string') return `${res.status}: ${body.message}`;
  } catch {
    // Not the Error shape: the status says enough.
  }
  return String(res.status);
}

function isReport(v: unknown): v is MigrationReport {
  const r = v as Partial<MigrationReport> | null;
  return typeof r === 'object' && r !== null && Array.isArray(r.operations) && typeof r.gate === 'object' && r.gate !== null;
}

function ms(v: number | null): string {
  return v === null ? '-' : `${Number(v.toPrecision(3))}`;
}

function counts(record: Readonly<Record<string, number>>): string {
  const list = Object.entries(record).filter(([, n]) => n > 0);
  return list.length === 0 ? '0' : list.map(([k, n]) => `${k} ${n}`).join(', ');
}

function modeText(o: OperationReport): string {
  return o.mode === 'split' ? `split ${o.percent}%` : o.mode;
}

/** A table: columns padded to their widest cell. */
function table(rows: readonly (readonly string[])[]): string {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  ').trimEnd()).join('\n') + '\n';
}

/** The report and its verdict as a person reads them. */
export function formatReport(report: MigrationReport, v: Verdict, gate: Gate): string {
  const head = `${report.scope === 'fleet' ? 'fleet (every instance, from Redis)' : 'this instance'}, counted since ${report.since}\n`;
  const store = report.storeError === undefined ? '' : `warning: ${report.storeError}\n`;
  const gateLine = `gate: at least ${gate.minComparisons} comparisons (shadow) or answers from next (split, next), at most ${percentText(gate.maxDifferentRatio)} different, at most ${gate.maxViolations} contract violations\n`;
  const judged = new Map(v.operations.map((o) => [o.operation, o]));
  const rows = [['OPERATION', 'MODE', 'ON LEGACY', 'ON NEXT', 'COMPARED', 'DIFFERENT', 'VIOLATIONS', 'NEXT ERRORS', 'FALLBACKS', 'LEGACY p50/p99 ms', 'NEXT p50/p99 ms', 'VERDICT']];
  for (const o of report.operations) {
    const j = judged.get(o.operation);
    rows.push([
      o.operation,
      modeText(o),
      String(o.routed.legacy),
      String(o.routed.next),
      String(o.compared),
      o.differentRatio === null ? '-' : `${o.different} (${percentText(o.differentRatio)})`,
      String(o.violations.reduce((n, x) => n + x.count, 0)),
      String(Object.values(o.nextErrors).reduce((n, x) => n + x, 0)),
      String(Object.values(o.fallbacks).reduce((n, x) => n + x, 0)),
      `${ms(o.latency.legacy.p50Ms)}/${ms(o.latency.legacy.p99Ms)}`,
      `${ms(o.latency.next.p50Ms)}/${ms(o.latency.next.p99Ms)}`,
      j === undefined ? '-' : j.ready ? 'ready' : 'not ready',
    ]);
  }
  let details = '';
  for (const o of report.operations) {
    const j = judged.get(o.operation);
    const lines: string[] = [];
    if (j !== undefined && !j.ready) lines.push(...j.reasons.map((r) => `  not ready: ${r}`));
    if (o.paths.length > 0) lines.push(`  differing paths: ${o.paths.slice(0, 5).map((p) => `${p.path} (${p.count})`).join(', ')}`);
    if (o.violations.length > 0) lines.push(`  violations: ${o.violations.slice(0, 5).map((x) => `${x.rule} (${x.count})`).join(', ')}`);
    if (Object.keys(o.nextErrors).length > 0) lines.push(`  next errors: ${counts(o.nextErrors)}`);
    if (Object.keys(o.fallbacks).length > 0) lines.push(`  fallbacks: ${counts(o.fallbacks)}`);
    if (Object.keys(o.dropped).length > 0) lines.push(`  shadow copies dropped: ${counts(o.dropped)}`);
    const s = o.samples[0];
    if (s !== undefined) lines.push(`  newest difference: ${s.path}: legacy ${s.legacy}, next ${s.next} (${s.time})`);
    if (lines.length > 0) details += `\n${o.operation}\n${lines.join('\n')}\n`;
  }
  const ready = v.operations.filter((o) => o.ready).length;
  const end = v.ready
    ? `\nverdict: READY (${ready} of ${v.operations.length} operations)\n`
    : `\nverdict: NOT READY${v.operations.length === 0 ? `: ${v.reasons.join('; ')}` : ` (${ready} of ${v.operations.length} operations ready)`}\n`;
  return head + store + gateLine + '\n' + table(rows) + details + end;
}

async function report(base: string, gateFlags: Partial<Gate>, json: boolean, io: CommandIo): Promise<number> {
  let res: Response;
  try {
    res = await fetch(`${base}/migration`, { redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    io.err.write(`petstore-gateway migration: GET ${base}/migration got no answer (${noAnswer(err)})\n`);
    return EXIT.runtime;
  }
  if (res.status === 404) {
    await res.body?.cancel().catch(() => undefined);
    io.err.write(`petstore-gateway migration: ${base}/migration is not there (404): the gateway has no migration: section, or this is not its admin listener\n`);
    return EXIT.runtime;
  }
  if (!res.ok) {
    io.err.write(`petstore-gateway migration: GET ${base}/migration answered ${await refusal(res)}\n`);
    return EXIT.runtime;
  }
  const body: unknown = await res.json().catch(() => undefined);
  if (!isReport(body)) {
    io.err.write(`petstore-gateway migration: GET ${base}/migration did not answer a migration report\n`);
    return EXIT.runtime;
  }
  const gate: Gate = { ...body.gate, ...gateFlags };
  const v = verdict(body, gate);
  io.out.write(json ? JSON.stringify({ report: body, verdict: { ...v, gate } }, null, 2) + '\n' : formatReport(body, v, gate));
  return v.ready ? EXIT.ok : EXIT.notReady;
}

async function reset(base: string, io: CommandIo): Promise<number> {
  const token = adminToken(io.env);
  if (token === undefined) throw new UsageError('migration reset needs an admin token: set PETSTORE_ADMIN_TOKEN (or PETSTORE_ADMIN_TOKENS)', 'migration');
  let res: Response;
  try {
    res = await fetch(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` }, redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    io.err.write(`petstore-gateway migration: DELETE ${base}/migration got no answer (${noAnswer(err)})\n`);
    return EXIT.runtime;
  }
  if (res.status !== 204) {
    const why = res.status === 404 ? '404: the gateway has no migration: section, or no admin token is set there' : await refusal(res);
    io.err.write(`petstore-gateway migration: DELETE ${base}/migration answered ${why}\n`);
    return EXIT.runtime;
  }
  io.err.write(`petstore-gateway migration: the counts start again from zero (${base})\n`);
  return EXIT.ok;
}

/** The `migration` command: `args` are its own (the action first). */
export async function migrationCommand(args: readonly string[], io: CommandIo = { out: process.stdout, err: process.stderr, env: process.env }): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      options: {
        admin: { type: 'string' },
        json: { type: 'boolean' },
        'min-comparisons': { type: 'string' },
        'max-different-ratio': { type: 'string' },
        'max-violations': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError((err as Error).message, 'migration');
  }
  const { values, positionals } = parsed;
  if (values.help === true) throw new HelpRequested('migration');
  const [action, extra] = positionals;
  if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`, 'migration');
  const base = adminUrl(values.admin);
  if (action === 'reset') {
    for (const flag of ['json', 'min-comparisons', 'max-different-ratio', 'max-violations'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} is an option of migration report`, 'migration');
    }
    return reset(base, io);
  }
  if (action !== 'report') throw new UsageError(action === undefined ? 'an action is required: report or reset' : `unknown action '${action}': report or reset`, 'migration');
  const min = wholeFlag('--min-comparisons', values['min-comparisons']);
  const ratio = ratioFlag('--max-different-ratio', values['max-different-ratio']);
  const violations = wholeFlag('--max-violations', values['max-violations']);
  const gate: Partial<Gate> = {
    ...(min === undefined ? {} : { minComparisons: min }),
    ...(ratio === undefined ? {} : { maxDifferentRatio: ratio }),
    ...(violations === undefined ? {} : { maxViolations: violations }),
  };
  return report(base, gate, values.json === true, io);
}
