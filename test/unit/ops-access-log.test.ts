/**
 * The access log (src/ops/access-log.ts): one JSON line per record with the fields of docs/operations.md,
 * through a logger passed in and through its own asynchronous destination (flushed by close());
 * never a key, an Authorization value or a query value other than limit and status.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import t from 'tap';
import { ACCESS_BATCH_CHARS, AccessLog, LOG_SCHEMA, accessLine } from '../../src/ops/access-log.js';
import { LOG_MAX_PENDING, droppedLogLines, logDestination } from '../../src/ops/log-destination.js';
import { record } from '../helpers/record.js';
import { PROJECT_ROOT, ensureBuilt } from '../helpers/servers.js';

/** A pino logger writing into an array of parsed lines. */
function capture(): { logger: pino.Logger; lines: Array<Record<string, unknown>>; raw: string[] } {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue;
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines, raw };
}

const KEY = 'pk_live_0123456789abcdefSECRETSECRET';

t.test('one line per request with the fields of the issue', async (t) => {
  const { logger, lines } = capture();
  const log = new AccessLog({ logger, consumerInfo: (id) => (id === 'team-a' ? { expires: '2027-01-01T00:00:00Z', scopes: ['pets:read'] } : undefined) });
  log.onEnd(record({ limit: '20', statusFilter: 'available', durationMs: 12.3456789 }));
  log.onEnd(
    record({
      requestId: 'abc',
      method: 'POST',
      route: '/v1/pets',
      operation: 'createPet',
      status: 401,
      errorCode: 'invalid_api_key',
      rejectedBy: 'auth',
      upstreamStatus: undefined,
      upstreamMs: undefined,
      consumer: undefined,
      bytesIn: 42,
      bytesOut: 90,
    }),
  );
  log.onEnd(record({ status: 504, errorCode: 'upstream_timeout', upstreamStatus: undefined, upstreamMs: 10000, upstreamFailure: 'headers_timeout', consumer: 'team-b' }));
  t.equal(lines.length, 0, 'nothing written before the batch is flushed');
  log.flush();
  t.equal(lines.length, 3);
  const [ok, denied, timeout] = lines as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
  t.match(ok, {
    level: 30,
    msg: 'request',
    log: 'access',
    reqId: 'req-1',
    method: 'GET',
    route: '/v1/pets',
    operation: 'listPets',
    status: 200,
    durationMs: 12.346,
    upstreamStatus: 200,
    upstreamMs: 7.25,
    bytesIn: 0,
    bytesOut: 321,
    client: '127.0.0.1',
    consumer: 'team-a',
    consumerExpires: '2027-01-01T00:00:00Z',
    consumerScopes: ['pets:read'],
    limit: '20',
    statusFilter: 'available',
  });
  t.type(ok.time, 'number', 'a time');
  t.notOk('errorCode' in ok, 'no error code on a success');
  t.match(denied, { reqId: 'abc', method: 'POST', status: 401, errorCode: 'invalid_api_key', rejectedBy: 'auth', bytesIn: 42, bytesOut: 90 });
  t.notOk('consumer' in denied, 'no consumer before auth');
  t.notOk('upstreamStatus' in denied, 'no upstream call');
  t.match(timeout, { status: 504, errorCode: 'upstream_timeout', upstreamFailure: 'headers_timeout', upstreamMs: 10000, consumer: 'team-b' });
  t.notOk('consumerExpires' in timeout, 'the hook knows nothing of team-b');
});

t.test('never a key, an Authorization value or another query value', async (t) => {
  const { logger, raw } = capture();
  const log = new AccessLog({ logger });
  // A record that a careless exchange might have decorated: the extra fields must not be copied.
  const leaky = {
    ...record({ limit: '5' }),
    authorization: `Bearer ${KEY}`,
    headers: { authorization: `Bearer ${KEY}` },
    query: `limit=5&token=${KEY}`,
    key: KEY,
  };
  log.onEnd(leaky);
  log.flush();
  t.equal(raw.length, 1);
  const line = raw[0] as string;
  t.notMatch(line, KEY, 'no key');
  t.notMatch(line, /authorization/i, 'no Authorization');
  t.notMatch(line, /token/, 'no other query value');
  t.notMatch(line, /Bearer/);
});

t.test('a throwing hook does not fail the request', async (t) => {
  const { logger, lines } = capture();
  const log = new AccessLog({
    logger,
    consumerInfo: () => {
      throw new Error('boom');
    },
  });
  t.doesNotThrow(() => log.onEnd(record()));
  log.flush();
  t.equal(lines.length, 0, 'the line is lost, the request is not');
});

t.test('lines are written in batches: after flushMs, or at once past 16 KiB', async (t) => {
  const writes: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      writes.push(chunk.toString('utf8'));
      done();
    },
  });
  const log = new AccessLog({ logger: pino({ level: 'info' }, stream), flushMs: 30 });
  for (let i = 0; i < 50; i++) log.onEnd(record({ requestId: `a${i}` }));
  await new Promise((r) => setImmediate(r));
  t.equal(writes.length, 0, 'nothing written at the end of the turn: the batch waits for flushMs');
  await new Promise((r) => setTimeout(r, 80));
  t.equal(writes.length, 1, 'one write for the 50 lines after flushMs');
  t.equal(writes[0]?.split('\n').filter(Boolean).length, 50);
  // Past ACCESS_BATCH_CHARS the batch goes at once, without waiting: memory stays bounded.
  const id = (i: number) => `b${String(i).padStart(6, '0')}`;
  const lineChars = log.format(record({ requestId: id(0) })).length;
  const n = Math.ceil(ACCESS_BATCH_CHARS / lineChars);
  for (let i = 0; i < n; i++) log.onEnd(record({ requestId: id(i) }));
  t.equal(writes.length, 2, `a full batch (${n} lines) written at once`);
  const batch = writes[1]?.split('\n').filter(Boolean) ?? [];
  t.equal(batch.length, n);
  t.equal((JSON.parse(batch[n - 1] ?? '') as { reqId: string }).reqId, id(n - 1), 'in order');
  log.onEnd(record({ requestId: 'c0' }));
  await log.close();
  t.equal(writes.length, 3, 'close() writes what is pending');
});

t.test('the line has pino\'s shape and escapes whatever a client sent', async (t) => {
  const { logger, raw, lines } = capture();
  const log = new AccessLog({ logger: logger.child({ worker: 2 }) });
  const hostile = 'x"},"status":1,"y":"\\\u0000\u2028é';
  log.onEnd(record({ limit: hostile, statusFilter: '"', method: 'G"ET', consumer: 'équipe' }));
  log.flush();
  t.equal(raw.length, 1);
  const line = lines[0] as Record<string, unknown>;
  t.equal(line.limit, hostile, 'the value round-trips, it does not break out of its field');
  t.equal(line.statusFilter, '"');
  t.equal(line.method, 'G"ET');
  t.equal(line.consumer, 'équipe');
  t.equal(line.status, 200, 'the real status, not the injected one');
  t.same(Object.keys(line).slice(0, 5), ['level', 'time', 'pid', 'hostname', 'worker'], 'level, time, then the logger\'s bindings');
  t.equal(line.log, 'access');
  t.equal(Object.keys(line).at(-1), 'msg');
  // pino itself, given the same fields, writes the same object (order and values; time aside).
  const rec = record({ limit: hostile, statusFilter: '"', method: 'G"ET', consumer: 'équipe' });
  logger.child({ worker: 2 }).child({ log: 'access' }).info(accessLine(rec), 'request');
  const viaPino = { ...(lines[1] as Record<string, unknown>), time: line.time };
  t.same(Object.entries(line), Object.entries(viaPino));
});

t.test('a logger above info writes no access line', async (t) => {
  const { logger, lines } = capture();
  logger.level = 'warn';
  const log = new AccessLog({ logger });
  log.onEnd(record());
  log.flush();
  t.equal(lines.length, 0);
});

t.test('its own asynchronous destination, flushed on close', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'access-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'access.log');
  const log = new AccessLog({ destination: file });
  for (let i = 0; i < 500; i++) log.onEnd(record({ requestId: `r${i}` }));
  await log.close();
  const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.equal(lines.length, 500, 'every line written by close()');
  t.equal(lines[499]?.reqId, 'r499');
  t.match(lines[0], { log: 'access', msg: 'request', pid: process.pid });
  t.match(String(lines[0]?.time), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'ISO time');
  t.notOk('hostname' in (lines[0] ?? {}), 'no hostname: pid is enough to tell workers apart');
});

t.test('an exit without close() loses no buffered line (pino flushes its destination at exit)', async (t) => {
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'access-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'access.log');
  // A process that logs, then exits at once, with lines still in the asynchronous buffer.
  const script = `
    const { AccessLog } = await import(${JSON.stringify(join(PROJECT_ROOT, 'dist', 'ops', 'access-log.js'))});
    const { NO_FACTS } = await import(${JSON.stringify(join(PROJECT_ROOT, 'dist', 'core', 'facts.js'))});
    const { openSync } = await import('node:fs');
    // A descriptor, not a path: sonic-boom opens a path asynchronously, a descriptor is ready at once.
    const log = new AccessLog({ destination: openSync(process.argv[1], 'w') });
    const r = JSON.parse(process.argv[2]);
    // JSON carries the record's declared facts as their values only: give it the reader back.
    for (let i = 0; i < 300; i++) log.onEnd({ ...r, facts: NO_FACTS, requestId: 'x' + i });
    process.exit(0);
  `;
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', script, file, JSON.stringify(record())], { encoding: 'utf8', timeout: 20_000 });
  t.equal(res.status, 0, res.stderr);
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  t.equal(lines.length, 300, 'every line');
  t.equal((JSON.parse(lines[299] as string) as { reqId: string }).reqId, 'x299');
});

t.test('the log config schema', async (t) => {
  t.equal(LOG_SCHEMA.properties.access.default, true, 'on by default');
  t.equal(LOG_SCHEMA.properties.level.default, 'info');
  t.equal(LOG_SCHEMA.additionalProperties, false);
});

t.test('fields reused from line to line follow their values: method, route, operation, a consumer whose facts change', async (t) => {
  const { logger, lines } = capture();
  let facts: { expires?: string; scopes?: string[] } | undefined = { expires: '2027-01-01T00:00:00Z', scopes: ['pets:read'] };
  const log = new AccessLog({ logger, consumerInfo: (id) => (id === 'team-a' ? facts : undefined) });
  const combos: Array<[string, '/v1/pets' | '/v1/pets/{petId}' | 'unknown', 'listPets' | 'createPet' | 'getPet' | undefined]> = [
    ['GET', '/v1/pets', 'listPets'],
    ['POST', '/v1/pets', 'createPet'],
    ['GET', '/v1/pets/{petId}', 'getPet'],
    ['DELETE', '/v1/pets/{petId}', undefined],
    ['GET', 'unknown', undefined],
    ['GET', '/v1/pets', 'listPets'],
  ];
  for (const [method, route, operation] of combos) log.onEnd(record({ method, route, operation, consumer: 'team-a' }));
  // The policy file is reloaded: the same key id, other facts (a new object), then none.
  facts = { expires: '2028-06-30T00:00:00Z' };
  log.onEnd(record({ consumer: 'team-a' }));
  facts = undefined;
  log.onEnd(record({ consumer: 'team-a' }));
  log.onEnd(record({ consumer: 'team-b' }));
  log.flush();
  t.equal(lines.length, combos.length + 3);
  combos.forEach(([method, route, operation], i) => {
    const l = lines[i]!;
    t.same([l.method, l.route, l.operation], [method, route, operation], `line ${i + 1}: ${method} ${route}`);
    t.equal(l.consumerExpires, '2027-01-01T00:00:00Z');
    t.same(l.consumerScopes, ['pets:read']);
  });
  const [reloaded, none, other] = lines.slice(combos.length);
  t.equal(reloaded!.consumerExpires, '2028-06-30T00:00:00Z', 'the new expiry after a reload');
  t.notOk('consumerScopes' in reloaded!, 'scopes gone with the new facts');
  t.notOk('consumerExpires' in none! || 'consumerScopes' in none!, 'no facts: no fields');
  t.equal(none!.consumer, 'team-a');
  t.equal(other!.consumer, 'team-b');
});

t.test('the log destination holds at most LOG_MAX_PENDING unwritten bytes: past it writes are dropped, their lines counted', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'out.log');
  const dest = logDestination(file) as unknown as NodeJS.EventEmitter & { write(s: string): boolean; end(): void };
  await once(dest, 'ready');
  const line = 'x'.repeat(1023) + '\n';
  const chunk = line.repeat(64); // 64 KiB, 64 lines
  // One and a half times the bound, in one turn of the event loop: no write can complete meanwhile.
  const chunks = Math.ceil((LOG_MAX_PENDING * 1.5) / chunk.length);
  const before = droppedLogLines();
  for (let i = 0; i < chunks; i++) dest.write(chunk);
  const dropped = droppedLogLines() - before;
  t.ok(dropped >= (chunks * 64) / 4, `about a third of the lines dropped (${dropped} of ${chunks * 64})`);
  t.equal(dropped % 64, 0, 'whole writes dropped, counted by their lines');
  dest.end();
  await once(dest, 'close');
  const written = statSync(file).size;
  t.equal(written, chunks * chunk.length - dropped * line.length, 'every write that was not dropped was written whole');
  t.ok(written <= LOG_MAX_PENDING + chunk.length, 'no more than the bound was held');
});
