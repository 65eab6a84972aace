/**
 * /readyz's detail for a group of workers (src/ops/readiness-detail.ts): the worst of each field,
 * as the primary's metrics aggregate them.
 */
import t from 'tap';
import { groupDetail } from '../../src/ops/readiness-detail.js';

const worker = (over: { up?: Record<string, unknown>; reg?: Record<string, unknown> | null } = {}) => ({
  upstream: { reachable: true, circuitBreaker: 'closed', decidesReadiness: false, ...over.up },
  ...(over.reg === null ? {} : { keyRegistry: { connected: true, confirmedAgeSeconds: 1, fresh: true, keys: 2, dataLoss: false, ...over.reg } }),
});

t.test('the worst of each field', async (t) => {
  t.strictSame(groupDetail([worker(), worker()]), worker(), 'all well: the same detail');
  t.strictSame(
    groupDetail([worker({ up: { reachable: false } }), worker({ up: { circuitBreaker: 'open' }, reg: { connected: false, confirmedAgeSeconds: 7, dataLoss: true, keys: 3 } })]),
    { upstream: { reachable: false, circuitBreaker: 'open', decidesReadiness: false }, keyRegistry: { connected: false, confirmedAgeSeconds: 7, fresh: true, keys: 3, dataLoss: true } },
  );
  t.match(groupDetail([worker({ reg: { confirmedAgeSeconds: null, fresh: false } }), worker()]), { keyRegistry: { confirmedAgeSeconds: null, fresh: false } }, 'a worker that never read: unknown age');
  t.notOk('keyRegistry' in (groupDetail([worker({ reg: null })]) ?? {}), 'no registry, no registry detail');
  t.equal(groupDetail([undefined, undefined]), undefined, 'no detail from any worker');
});
