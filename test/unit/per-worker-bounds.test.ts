/**
 * The start-up notice of `serve --workers N` about the per-client bounds each worker keeps on its
 * own (attack pass L3): what it names, and that one worker says nothing.
 */
import t from 'tap';
import { perClientBoundsNotice } from '../../src/config/security-notices.js';
import type { PolicyConfig } from '../../src/config/types.js';

function config(bruteForce: { maxFailures: number; windowSeconds: number } | null, maxInFlightPerConsumer: number | null): PolicyConfig {
  return { policies: { auth: { bruteForce } }, server: { maxInFlightPerConsumer } } as unknown as PolicyConfig;
}

t.test('one worker: no notice', async (t) => {
  t.equal(perClientBoundsNotice(config({ maxFailures: 100, windowSeconds: 60 }, 128), 1), undefined);
});

t.test('N workers: each per-client bound named with what it becomes', async (t) => {
  const notice = perClientBoundsNotice(config({ maxFailures: 100, windowSeconds: 60 }, 128), 4) ?? '';
  t.match(notice, /--workers 4/);
  t.match(notice, /auth\.bruteForce allows 4 x 100 failed guesses per 60 s from one address/);
  t.match(notice, /server\.maxConnectionsPerAddress is 4 x the share/);
  t.match(notice, /server\.maxInFlightPerConsumer is 4 x 128/);
  t.match(notice, /divide them by 4/);
});

t.test('bounds that are off are not named', async (t) => {
  const notice = perClientBoundsNotice(config(null, null), 2) ?? '';
  t.notMatch(notice, /bruteForce|maxInFlightPerConsumer/);
  t.match(notice, /maxConnectionsPerAddress/);
});
