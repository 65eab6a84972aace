/**
 * docs/operations.md's metrics table is what `/metrics` exports. Operators build their alerts from
 * that table, so a metric missing from it is a metric nobody watches, and a row naming a metric
 * that does not exist is an alert that never fires.
 *
 * One `serve` process with every feature that registers metrics of its own turned on: TLS with
 * HTTP/2 on the API listener, the key registry, the rate limit and the response cache on a real
 * redis-server, admin tokens, CORS and a circuit breaker, in front of a stub upstream. A few
 * requests make the labelled series appear (an HTTP/2 read, a guess, a getPet, a preflight, a
 * wrong admin token); then the scrape is compared with the table, both ways:
 *   - every family exported (`# TYPE` lines) has a row, or matches a row's `prefix_*`;
 *   - every row names a family exported, with the same type;
 *   - for `petstore_gateway_*` families, every label is named in its row, and every value of a
 *     label that is an enumeration (not a route, method, status, consumer, policy or code) too.
 * Each failure names the metric, so a new metric without a row says which row to add.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { h2Request, httpsRequest, makeTestPki } from '../helpers/certs.js';
import { parseExposition } from '../helpers/prom.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { PROJECT_ROOT, request, sendJson, spawnCliUntil, startStubUpstream, tempDir, testKey } from '../helpers/servers.js';

/** A row of the table: the names in its first cell (`prefix_*` for a family of names), its type, its text. */
interface Row {
  readonly names: readonly string[];
  readonly type: string;
  readonly text: string;
}

/** The rows of the table under "## Metrics" in docs/operations.md. */
function metricsTable(page: string): Row[] {
  const start = page.indexOf('\n## Metrics\n');
  if (start < 0) throw new Error('docs/operations.md has no "## Metrics" section');
  const next = page.indexOf('\n## ', start + 1);
  const section = page.slice(start, next < 0 ? undefined : next);
  const rows: Row[] = [];
  for (const line of section.split('\n')) {
    // Cells between unescaped pipes: `| a | b | c |` -> ['a', 'b', 'c'].
    const cells = line.split(/(?<!\\)\|/).slice(1, -1);
    if (!line.startsWith('| `') || cells.length < 3) continue;
    const names = [...cells[0]!.matchAll(/`([a-z_:][a-z0-9_:]*\*?)`/g)].map((m) => m[1]!);
    rows.push({ names, type: cells[1]!.trim(), text: line });
  }
  return rows;
}

/** Labels whose values are not a fixed list the table can name (routes, methods, statuses, configured ids and addresses, catalogue codes). */
const OPEN_LABELS = new Set(['consumer', 'policy', 'code', 'operation', 'error_type', 'le', 'redis']);
const isOpen = (label: string) => OPEN_LABELS.has(label) || label.startsWith('http_') || label.startsWith('network_');

interface Exported {
  readonly type: string;
  readonly labels: Map<string, Set<string>>;
}

/** Family name -> its TYPE and the values each label took, from an exposition. */
function exportedFamilies(text: string): Map<string, Exported> {
  const families = new Map<string, Exported>();
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m !== null) families.set(m[1]!, { type: m[2]!, labels: new Map() });
  }
  const scrape = parseExposition(text);
  for (const s of scrape.samples) {
    const family = families.get(s.name) ?? families.get(s.name.replace(/_(bucket|sum|count)$/, ''));
    if (family === undefined) continue;
    for (const [k, v] of Object.entries(s.labels)) {
      let values = family.labels.get(k);
      if (values === undefined) family.labels.set(k, (values = new Set()));
      values.add(v);
    }
  }
  return families;
}

/** Every disagreement between the scrape and the table, one line each naming the metric. */
function tableProblems(rows: readonly Row[], families: ReadonlyMap<string, Exported>): string[] {
  const problems: string[] = [];
  const rowOf = (name: string) => rows.find((r) => r.names.includes(name)) ?? rows.find((r) => r.names.some((n) => n.endsWith('*') && name.startsWith(n.slice(0, -1))));
  for (const [name, family] of families) {
    const row = rowOf(name);
    if (row === undefined) {
      problems.push(`${name} (${family.type}) is exported but has no row in docs/operations.md's metrics table`);
      continue;
    }
    if (!row.names.includes(name)) continue; // a `prefix_*` row: prom-client's defaults, described as a group
    if (row.type !== family.type) problems.push(`${name}: the table says type '${row.type}', /metrics says '${family.type}'`);
    if (!name.startsWith('petstore_gateway_')) continue;
    for (const [label, values] of family.labels) {
      if (!row.text.includes(`\`${label}\``)) problems.push(`${name}: label '${label}' is not named in its row`);
      if (isOpen(label)) continue;
      for (const v of values) if (!row.text.includes(`\`${v}\``)) problems.push(`${name}: ${label}="${v}" is exported but not named in its row`);
    }
  }
  for (const row of rows) {
    for (const n of row.names) {
      const exported = n.endsWith('*') ? [...families.keys()].some((f) => f.startsWith(n.slice(0, -1))) : families.has(n);
      if (!exported) problems.push(`${n} has a row in docs/operations.md but the gateway does not export it`);
    }
  }
  return problems;
}

t.test('the comparison finds what differs', async (t) => {
  const rows = metricsTable('x\n## Metrics\n\n| metric | type | labels |\n|---|---|---|\n| `a_total` | counter | `kind`: `x` |\n| `gone_total` | counter | |\n| `process_*` | | defaults |\n')
  t.strictSame(rows.map((r) => r.names), [['a_total'], ['gone_total'], ['process_*']], 'the rows are read');
  const text = [
    '# TYPE a_total counter',
    'a_total{kind="x"} 1',
    'a_total{kind="y"} 0',
    '# TYPE new_seconds histogram',
    'new_seconds_bucket{le="+Inf"} 0',
    'new_seconds_sum 0',
    'new_seconds_count 0',
    '# TYPE process_cpu_seconds_total counter',
    'process_cpu_seconds_total 1',
    '',
  ].join('\n');
  const problems = tableProblems(rows, exportedFamilies(text));
  t.strictSame(
    problems.sort(),
    [
      'gone_total has a row in docs/operations.md but the gateway does not export it',
      'new_seconds (histogram) is exported but has no row in docs/operations.md\'s metrics table',
    ].sort(),
    'a metric without a row and a row without a metric (only petstore_gateway_ labels are checked)',
  );
  const own = tableProblems(metricsTable('\n## Metrics\n| `petstore_gateway_a_total` | gauge | `kind`: `x` |\n'), exportedFamilies(text.replaceAll('a_total', 'petstore_gateway_a_total')));
  t.ok(own.includes("petstore_gateway_a_total: the table says type 'gauge', /metrics says 'counter'"), 'a wrong type');
  t.ok(own.includes('petstore_gateway_a_total: kind="y" is exported but not named in its row'), 'a label value left out');
});

t.test('every metric /metrics exports, with every feature on, is in docs/operations.md, and the other way round', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const pki = makeTestPki(t);
  const upstream = await startStubUpstream(t, (req, res) => {
    if (req.url.startsWith('/v1/pets/')) return sendJson(res, 200, { id: 1, name: 'Rex', categoryId: 1, status: 'available' });
    sendJson(res, 200, [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }]);
  });
  const dir = tempDir(t, 'metrics-docs');
  const policy = join(dir, 'policy.json');
  const redisSection = { url: redis.url };
  writeFileSync(
    policy,
    JSON.stringify({
      upstream: { url: `${upstream.origin}/v1`, circuitBreaker: { failures: 5, coolDownMs: 1000 } },
      server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key } },
      policies: {
        cors: { origins: ['https://app.example'] },
        auth: { registry: { redis: redisSection } },
        'rate-limit': { limit: 1000, windowSeconds: 60, store: { redis: redisSection } },
        cache: { ttlSeconds: { listPets: 5, getPet: 5 }, store: { redis: redisSection } },
      },
      migration: { next: { url: `${upstream.origin}/next/v1` }, operations: { listPets: { mode: 'shadow' } }, store: redisSection },
    }),
  );
  const key = testKey();
  const adminToken = randomBytes(32).toString('base64url');
  const { handle, match } = await spawnCliUntil(
    t,
    ['serve', '--policy', policy, '--port', '0', '--admin-port', '0'],
    /^(?=[\s\S]*petstore-gateway listening on https:\/\/127\.0\.0\.1:(\d+) )(?=[\s\S]*"msg":"admin listening)/,
    { env: { PETSTORE_API_KEYS: key, PETSTORE_ADMIN_TOKENS: adminToken, PETSTORE_REDIS_PREFIX: 'metrics-docs:', LOG_LEVEL: 'info' }, timeoutMs: 30_000 },
  );
  const origin = `https://127.0.0.1:${match[1]}`;
  const adminLine = handle
    .output()
    .stdout.split('\n')
    .find((l) => l.includes('"msg":"admin listening'));
  const admin = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(adminLine ?? '')?.[1];
  if (admin === undefined) return t.fail(`no admin URL in ${adminLine}`);

  const ca = pki.read(pki.ca);
  const auth = { authorization: `Bearer ${key}` };
  t.equal((await h2Request(origin, '/v1/pets?limit=1', { ca, headers: auth })).status, 200, 'listPets over HTTP/2');
  t.equal((await httpsRequest(`${origin}/v1/pets/1`, { ca, headers: auth })).status, 200, 'getPet over HTTP/1.1');
  t.equal((await httpsRequest(`${origin}/v1/pets`, { ca, headers: { authorization: `Bearer ${'x'.repeat(40)}` } })).status, 401, 'a guess');
  const preflight = { origin: 'https://app.example', 'access-control-request-method': 'GET' };
  t.equal((await httpsRequest(`${origin}/v1/pets`, { ca, method: 'OPTIONS', headers: preflight })).status, 204, 'a preflight');
  t.not((await request(`${admin}/keys`, { headers: { authorization: `Bearer ${'y'.repeat(43)}` } })).status, 200, 'a wrong admin token');

  const scrape = await request(`${admin}/metrics`);
  t.equal(scrape.status, 200, '/metrics answers');
  const families = exportedFamilies(scrape.body);
  for (const name of ['petstore_gateway_tls_certificate_expiry_seconds', 'petstore_gateway_cache_requests_total', 'http_server_request_duration_seconds', 'petstore_gateway_migration_requests_total']) {
    t.ok(families.has(name), `the features are on: ${name} is exported`);
  }
  const rows = metricsTable(readFileSync(join(PROJECT_ROOT, 'docs', 'operations.md'), 'utf8'));
  const problems = tableProblems(rows, families);
  t.strictSame(problems, [], problems.length === 0 ? 'the table and /metrics agree' : `docs/operations.md's metrics table and /metrics disagree:\n  ${problems.join('\n  ')}`);

  // Every gateway metric any page names exists (a page may name one outside the table: an alert, an example).
  const pages = ['README.md', ...readdirSync(join(PROJECT_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const named: string[] = [];
  for (const page of pages) {
    for (const m of readFileSync(join(PROJECT_ROOT, page), 'utf8').matchAll(/\bpetstore_gateway_[a-z0-9_]*[a-z0-9]/g)) {
      const name = m[0].replace(/_(bucket|sum|count)$/, '');
      if (!families.has(name)) named.push(`${page}: ${m[0]}`);
    }
  }
  t.strictSame(named, [], 'every petstore_gateway_* metric a page names is exported');

  // The alert rules of docs/production.md use metrics that exist.
  const production = readFileSync(join(PROJECT_ROOT, 'docs', 'production.md'), 'utf8');
  const rules = /## Alerts[\s\S]*?```yaml\n([\s\S]*?)```/.exec(production)?.[1] ?? '';
  const used = new Set([...rules.matchAll(/\b((?:petstore_gateway|http_server|http_client)_[a-z0-9_]+)/g)].map((m) => m[1]!));
  const parsed = parse(rules) as { groups?: Array<{ rules?: Array<{ alert?: string; expr?: string }> }> };
  const alerts = parsed.groups?.flatMap((g) => g.rules ?? []) ?? [];
  t.ok(alerts.length >= 5 && alerts.every((r) => typeof r.alert === 'string' && typeof r.expr === 'string'), 'the rules are Prometheus rule YAML (alert, expr)');
  t.ok(used.size >= 5, `production.md's alert rules name metrics (${[...used].join(', ')})`);
  for (const name of used) t.ok(families.has(name) || families.has(name.replace(/_(bucket|sum|count)$/, '')), `production.md's alerts: ${name} is exported`);
});
