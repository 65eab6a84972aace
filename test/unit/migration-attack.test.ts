/**
 * The migration lane's small parts attacked: every reason and failure kind the lane records is a
 * label of its own in the metrics (never "other"), and `check` knows the legacy upstream however
 * its URL is spelled.
 */
import t from 'tap';
import { MigrationTally } from '../../src/migration/tally.js';
import { migrationProblems } from '../../src/migration/rules.js';
import { shippedApi } from '../../src/api/index.js';
import { FAILURE_KINDS } from '../../src/core/upstream.js';
import type { DropReason, FallbackReason } from '../../src/migration/types.js';
import type { MigrationConfig } from '../../src/migration/schema.js';

t.test('every fallback reason, drop reason and next failure the lane records has its own metric label', async (t) => {
  const tally = new MigrationTally({ maxPaths: 5, maxSamples: 5 });
  const fallbacks: FallbackReason[] = ['refused', 'reset', 'timeout', 'invalid_response', 'tls', 'contract', 'server_error', 'open_circuit'];
  const drops: DropReason[] = ['in_flight', 'body', 'method', 'sampled_out', 'answer_too_large', 'legacy_failed', 'compare_failed'];
  // What routed.ts and shadow.ts pass to nextFailed: the transport's kinds, `timeout`, `open_circuit`.
  const kinds = [...FAILURE_KINDS, 'timeout', 'open_circuit'];
  for (const r of fallbacks) tally.fallback('getPet', r);
  for (const r of drops) tally.dropped('getPet', r);
  for (const k of kinds) tally.nextFailed('getPet', k);
  const [m] = tally.metricCounts();
  for (const r of fallbacks) t.equal(m?.fallbacks[r], 1, `fallback ${r}`);
  for (const r of drops) t.equal(m?.dropped[r], 1, `dropped ${r}`);
  for (const k of kinds) t.equal(m?.nextErrors[k], 1, `next error ${k}`);
  t.notOk((m?.fallbacks.other ?? 0) + (m?.dropped.other ?? 0) + (m?.nextErrors.other ?? 0), 'nothing counted as other');
});

t.test('check: next is the legacy upstream itself, however the URL is spelled', async (t) => {
  const api = shippedApi();
  const problem = (legacy: string, next: string) => migrationProblems({ next: { url: next }, operations: {} } as unknown as MigrationConfig, api, legacy).some((p) => p.path === '$.migration.next.url');
  t.ok(problem('http://127.0.0.1:8080/v1', 'http://127.0.0.1:8080/v1/'), 'a trailing slash');
  t.ok(problem('http://localhost/v1', 'http://localhost:80/v1'), 'the default port written out');
  t.ok(problem('https://legacy.internal/v1', 'https://LEGACY.internal:443/v1'), 'the host in capitals, the default port');
  t.notOk(problem('http://127.0.0.1:8080/v1', 'http://127.0.0.1:8081/v1'), 'another port is another backend');
  t.notOk(problem('http://127.0.0.1:8080/v1', 'http://127.0.0.1:8080/v2'), 'another path may be another backend');
});
