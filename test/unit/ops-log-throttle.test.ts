/**
 * Repeated operator warnings throttled with a count: a real pino logger writing
 * to a stream. The period is 1.5 s of real time (the summary is a real timer), with bounded waits.
 */
import { Writable } from 'node:stream';
import t from 'tap';
import { pino } from 'pino';
import { throttledLogMethod } from '../../src/ops/log-throttle.js';
import { waitFor } from '../helpers/wait.js';

function logger(everyMs: number) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const log = pino({ level: 'info', hooks: { logMethod: throttledLogMethod({ everyMs }) } }, sink);
  return { log, lines };
}

t.test('one line per message and code per period, then a summary with the count', async (t) => {
  const { log, lines } = logger(1500);
  const start = Date.now();
  for (let i = 0; i < 10_000; i++) log.warn({ code: 'upstream_timeout', requestId: `r${i}` }, 'gateway error');
  for (let i = 0; i < 3; i++) log.warn({ code: 'store_full' }, 'gateway error');
  log.error({ where: 'x' }, 'unexpected error');
  log.error({ where: 'y' }, 'unexpected error');
  for (let i = 0; i < 5; i++) log.info({ i }, 'policy reloaded');
  const burstMs = Date.now() - start;
  await new Promise((r) => setImmediate(r));
  // The burst must fit in one period for the counts below to be exact; it takes milliseconds.
  t.ok(burstMs < 1500, `burst within one period (${burstMs} ms)`);
  t.equal(lines.filter((l) => l.msg === 'gateway error').length, 2, 'the first line of each code');
  t.equal(lines.filter((l) => l.msg === 'unexpected error').length, 2, 'error lines are never throttled (a refused reload, a crash)');
  t.equal(lines.filter((l) => l.msg === 'policy reloaded').length, 5, 'info is never throttled');
  await waitFor('two summaries', () => lines.filter((l) => typeof l.suppressed === 'number').length === 2, 5000);
  const summaries = lines.filter((l) => typeof l.suppressed === 'number');
  t.ok(Date.now() - start >= 1400, 'not before the period ends');
  t.strictSame(
    summaries.map((l) => `${String(l.code)} ${String(l.suppressed)} ${String(l.level)}`).sort(),
    ['store_full 2 40', 'upstream_timeout 9999 40'],
    'each summary counts exactly the lines it replaced',
  );
  t.match(summaries.find((l) => l.code === 'upstream_timeout')?.msg, /^gateway error \(repeated 9999 times in 1500 ms\)$/);
  t.equal(lines.length, 2 + 2 + 5 + 2, 'ten thousand warnings became four lines');
});

t.test('after a quiet period the next warning is written at once, with no summary', async (t) => {
  let now = 0;
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info', hooks: { logMethod: throttledLogMethod({ everyMs: 1000, now: () => now }) } }, new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      cb();
    },
  }));
  log.warn({ code: 'a' }, 'm');
  now = 5000;
  log.warn({ code: 'a' }, 'm');
  await new Promise((r) => setImmediate(r));
  t.equal(lines.length, 2);
  t.equal(lines[1]?.suppressed, undefined);
});
