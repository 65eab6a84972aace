/**
 * The architecture's promises, end to end:
 *
 * - The error barrier: an exception from a policy (request phase, synchronous or a
 *   rejected promise; body phase; response phase) or from a transport becomes a 500 Error
 *   `internal_error` for that request, logged once with its stack in the operator log, and the
 *   server keeps serving: the next ordinary request is answered normally. On every engine.
 * - Engine libraries are loaded on demand: `serve --engine E` loads E's library and not
 *   the other engines' (an ESM resolve hook records what the CLI process resolves).
 *
 * The throwing policy is appended to a real gateway's chain and throws only when the request
 * carries `x-throw: <phase>`, so one server answers the crash and the ordinary request after it.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import type { OperatorLog } from '../../src/core/exchange.js';
import type { Exchange, Policy } from '../../src/core/policy.js';
import type { Upstream } from '../../src/core/upstream.js';
import { buildServer } from '../../src/engines/fastify.js';
import { buildProxyServer } from '../../src/engines/http-proxy-3.js';
import { nodeEngine, serveNodeEngine } from '../../src/engines/node.js';
import { buildUndiciServer } from '../../src/engines/undici.js';
import { petstoreGateway } from '../../src/fronts/fastify.js';
import { formatProblems, parsePolicy } from '../../src/config/load.js';
import { compileGateway, type Gateway } from '../../src/gateway.js';
import { assertError, assertJson, type TapTest } from '../helpers/assert.js';
import {
  bearer,
  forEachEngine,
  JSON_TYPE,
  policyText,
  request,
  sendJson,
  spawnCliUntil,
  startStubUpstream,
  tempDir,
  testKey,
  type Engine,
  type PolicyInput,
  type TeardownHost,
} from '../helpers/servers.js';

const JSON_BODY = { 'content-type': 'application/json' };
const NEW_PET = '{"name":"Rex","categoryId":1}';

// ---------------------------------------------------------------------------------------------
// Helpers

interface LogLine {
  readonly level: 'warn' | 'error';
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

function captureLog(): OperatorLog & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    warn: (fields, message) => void lines.push({ level: 'warn', fields, message }),
    error: (fields, message) => void lines.push({ level: 'error', fields, message }),
  };
}

type Phase = 'request' | 'request-async' | 'body' | 'response';

function throwIf(ex: Exchange, phase: Phase): void {
  if (ex.head.headers['x-throw'] === phase) throw new Error(`deliberate failure in the ${phase} phase`);
}

/** A policy with a bug: throws in the phase the request names in `x-throw`, else passes. */
const thrower: Policy = {
  name: 'thrower',
  onRequest(ex) {
    throwIf(ex, 'request');
    if (ex.head.headers['x-throw'] === 'request-async') return Promise.reject(new Error('deliberate failure in the request-async phase'));
    return undefined;
  },
  onBody(ex) {
    throwIf(ex, 'body');
    return undefined;
  },
  wantsResponseBody: (ex) => ex.head.headers['x-throw'] === 'response',
  onResponseBody(ex, res) {
    throwIf(ex, 'response');
    return res;
  },
};

function gatewayFrom(key: string, policy: PolicyInput): Gateway {
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText(policy), { env });
  if (!loaded.ok) throw new Error('invalid test policy:\n' + formatProblems('policy', loaded.problems));
  return compileGateway(loaded.config, { env });
}

/** `gw` with the throwing policy last in its chain (after auth, route and the operation's checks). */
function withThrower(gw: Gateway): Gateway {
  return { ...gw, chain: new Chain([...gw.chain.policies, thrower]) };
}

/** The standalone server of `engine` for `gateway` on 127.0.0.1:0, its operator log going to `log`. */
async function listen(t: TeardownHost, engine: Engine, gateway: Gateway, log: OperatorLog): Promise<string> {
  if (engine === 'fastify') {
    const app = await buildServer(gateway, { log });
    t.teardown(() => app.close());
    return app.listen({ host: '127.0.0.1', port: 0 });
  }
  const handle = engine === 'undici' ? buildUndiciServer(gateway, { log }) : buildProxyServer(gateway, { log });
  t.teardown(() => {
    handle.server.closeAllConnections();
    return handle.close();
  });
  await new Promise<void>((r) => handle.server.listen(0, '127.0.0.1', r));
  const address = handle.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

/** Exactly one error line, naming where it was caught and carrying the stack of `message`. */
function assertOneCrashLine(t: TapTest, log: { lines: LogLine[] }, message: string): void {
  const errors = log.lines.filter((l) => l.level === 'error');
  t.equal(errors.length, 1, 'one error line', { lines: log.lines });
  const stack = errors[0]?.fields.stack;
  t.type(stack, 'string', 'the line carries the stack');
  t.match(String(stack), message, 'the stack names the exception');
  t.match(String(stack), /\n\s+at /, 'with its frames');
  t.type(errors[0]?.fields.where, 'string', 'and where the barrier caught it');
  t.notOk(
    log.lines.some((l) => l.level === 'warn' && JSON.stringify(l.fields).includes(message)),
    'not logged a second time as a warning',
  );
}

// ---------------------------------------------------------------------------------------------
// The error barrier, on every engine

forEachEngine(t, async (t, engine) => {
  const key = testKey();

  t.test('a policy that throws in its request or body phase: 500 internal_error, one error line, still serving', async (t) => {
    const log = captureLog();
    const url = await listen(t, engine, withThrower(gatewayFrom(key, {})), log);
    const cases: Array<{ phase: Phase; send: (headers: Record<string, string>) => ReturnType<typeof request> }> = [
      { phase: 'request', send: (h) => request(`${url}/v1/pets`, { headers: bearer(key, h) }) },
      { phase: 'request-async', send: (h) => request(`${url}/v1/pets?limit=1`, { headers: bearer(key, h) }) },
      { phase: 'body', send: (h) => request(`${url}/v1/pets`, { method: 'POST', headers: bearer(key, { ...JSON_BODY, ...h }), body: NEW_PET }) },
    ];
    for (const c of cases) {
      log.lines.length = 0;
      const crashed = await c.send({ 'x-throw': c.phase });
      assertError(t, crashed, 500, 'internal_error');
      t.notMatch(crashed.body, /deliberate|at /, `${c.phase}: nothing of the exception reaches the client`);
      assertOneCrashLine(t, log, `deliberate failure in the ${c.phase} phase`);
      const after = await c.send({});
      t.ok(after.status === 200 || after.status === 201, `${c.phase}: the next request is served (${after.status} ${after.body.slice(0, 120)})`);
    }
  });

  t.test('a policy that throws in its response phase: 500 internal_error, one error line, still serving', async (t) => {
    const upstream = await startStubUpstream(t, (_req, res) => sendJson(res, 200, '[]'));
    const log = captureLog();
    const url = await listen(t, engine, withThrower(gatewayFrom(key, { upstream: { url: `${upstream.origin}/v1` } })), log);
    const crashed = await request(`${url}/v1/pets`, { headers: bearer(key, { 'x-throw': 'response' }) });
    assertError(t, crashed, 500, 'internal_error');
    assertOneCrashLine(t, log, 'deliberate failure in the response phase');
    t.equal(upstream.requests.length, 1, 'the upstream was asked once (a crash is not retried)');
    const after = await request(`${url}/v1/pets`, { headers: bearer(key) });
    assertJson(t, after, 200);
    t.equal(after.body, '[]', 'the next request is relayed as usual');
  });
});

// ---------------------------------------------------------------------------------------------
// A transport that throws

// parity: the transport is injected through nodeEngine, which the undici and http-proxy-3 engines share (both run here); the Fastify plugin's transport (reply-from) is not injectable
t.test('a transport that throws in send: 500 internal_error, one error line, still serving', async (t) => {
  const key = testKey();
  let sends = 0;
  /** Throws on its first call; answers an empty list after. */
  const flaky: Upstream = {
    name: 'flaky',
    conforms: false,
    send(_request, handler) {
      if (++sends === 1) throw new Error('deliberate failure in the transport');
      handler.onStart({ pause() {}, resume() {}, abort() {} });
      handler.onHead(200, { 'content-type': JSON_TYPE });
      handler.onData(Buffer.from('[]'));
      handler.onEnd();
    },
    close: async () => {},
  };
  // A URL upstream (never dialled: the fake transport answers), so the transport is the injected one.
  const log = captureLog();
  const engine = nodeEngine(gatewayFrom(key, { upstream: { url: 'http://127.0.0.1:9/v1' } }), () => flaky, { log });
  const handle = serveNodeEngine(engine);
  t.teardown(() => {
    handle.server.closeAllConnections();
    return handle.close();
  });
  await new Promise<void>((r) => handle.server.listen(0, '127.0.0.1', r));
  const address = handle.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const url = `http://127.0.0.1:${address.port}`;

  const crashed = await request(`${url}/v1/pets`, { headers: bearer(key) });
  assertError(t, crashed, 500, 'internal_error');
  assertOneCrashLine(t, log, 'deliberate failure in the transport');
  const after = await request(`${url}/v1/pets`, { headers: bearer(key) });
  assertJson(t, after, 200);
  t.equal(sends, 2, 'the crash was not retried; the next request was sent');
});

// ---------------------------------------------------------------------------------------------
// Engine libraries loaded on demand

/** The packages of each engine (undici, a general HTTP client, may be shared: it is not listed). */
const LIBRARIES: Readonly<Record<Engine, readonly string[]>> = {
  undici: ['undici'],
  fastify: ['fastify', 'fastify-plugin', '@fastify/http-proxy'],
  'http-proxy-3': ['http-proxy-3'],
};
/** What a run of another engine must not load: the frameworks and proxies only one engine uses. */
const ENGINE_ONLY = new Set(['fastify', 'fastify-plugin', '@fastify/http-proxy', 'http-proxy-3']);

/** The package a resolved file URL belongs to (`@scope/name` or `name`), if under node_modules. */
function packageOf(url: string): string | undefined {
  const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  return m?.[1];
}

/**
 * An ESM loader registered with `node --import`: its resolve hook appends every URL the process
 * resolves to a file. It sees the `import` statements of the gateway's ESM code, which is how
 * each engine module names its library, so a library the CLI imports shows up here.
 */
const RECORDER = `
import { register } from 'node:module';
const hooks = \`
import { appendFileSync } from 'node:fs';
let file;
export function initialize(data) { file = data.file; }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(file, r.url + '\\\\n');
  return r;
}\`;
register('data:text/javascript,' + encodeURIComponent(hooks), import.meta.url, { data: { file: process.env.PETSTORE_TEST_RESOLVED } });
`;

forEachEngine(t, async (t, engine) => {
  t.test(`serve --engine ${engine} loads its own library and no other engine's`, async (t) => {
    const dir = tempDir(t, 'resolved');
    const recorder = join(dir, 'recorder.mjs');
    const resolved = join(dir, 'resolved.txt');
    appendFileSync(recorder, RECORDER);
    appendFileSync(resolved, '');
    // Each engine module imports its library statically: the built-in backend is enough to see it.
    const { handle } = await spawnCliUntil(
      t,
      ['serve', '--engine', engine, '--host', '127.0.0.1', '--port', '0', '--ephemeral-key', '--upstream', 'builtin'],
      /petstore-gateway listening on http:\/\/127\.0\.0\.1:\d+/,
      { env: { NODE_OPTIONS: `--import=${pathToFileURL(recorder).href}`, PETSTORE_TEST_RESOLVED: resolved }, timeoutMs: 30_000, stream: 'stderr' },
    );
    const loaded = new Set(readFileSync(resolved, 'utf8').split('\n').flatMap((u) => packageOf(u) ?? []));
    t.ok(loaded.has('pino'), `the recorder saw the CLI's imports (${[...loaded].join(', ')})`);
    for (const lib of LIBRARIES[engine]) t.ok(loaded.has(lib), `${lib} is loaded by engine ${engine}`);
    for (const lib of ENGINE_ONLY) {
      if (!LIBRARIES[engine].includes(lib)) t.notOk(loaded.has(lib), `${lib} is not loaded by engine ${engine}`);
    }
    handle.child.kill('SIGTERM');
    await handle.exited;
  });
});


// ---------------------------------------------------------------------------------------------
// The Fastify plugin in a host application

/** A host Fastify app (the application that embeds the gateway), closed at teardown. */
function hostApp(t: TeardownHost): FastifyInstance {
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  return app;
}

/** The error a registration step raises, whether Fastify throws it at once or at `ready()`. */
async function registrationError(app: FastifyInstance, step: () => unknown): Promise<unknown> {
  try {
    await step();
    await app.ready();
  } catch (err) {
    return err;
  }
  return undefined;
}

// parity: the Fastify plugin's registration API exists only on the fastify engine
t.test('the Fastify plugin in a host application', async (t) => {
  const key = testKey();
  const gateway = () => gatewayFrom(key, {});

  t.test('fastify-plugin metadata: name and supported Fastify', async (t) => {
    const meta = (petstoreGateway as unknown as Record<symbol, unknown>)[Symbol.for('plugin-meta')] as Record<string, unknown> | undefined;
    t.equal(meta?.name, 'petstore-gateway');
    t.equal(meta?.fastify, '5.x');
    t.equal((petstoreGateway as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')], true, 'not encapsulated: the host sees its /v1 guard');
  });

  t.test('registered without options: a TypeError that says what to pass', async (t) => {
    const app = hostApp(t);
    const err = await registrationError(app, () => app.register(petstoreGateway as never));
    t.type(err, TypeError);
    t.match((err as Error).message, /petstore-gateway: options\.gateway is required/);
  });

  t.test('registered with options that are not a gateway: the same TypeError', async (t) => {
    const app = hostApp(t);
    const err = await registrationError(app, () => app.register(petstoreGateway, { gateway: {} as Gateway }));
    t.type(err, TypeError);
    t.match((err as Error).message, /options\.gateway is required/);
  });

  t.test('registered with a prefix: refused with a clear error', async (t) => {
    const app = hostApp(t);
    const err = await registrationError(app, () => app.register(petstoreGateway, { gateway: gateway(), prefix: '/api' }));
    t.type(err, Error);
    t.match((err as Error).message, /petstore-gateway: a prefix \('\/api'\) is not supported/);
  });

  t.test('registered twice: refused with a clear error', async (t) => {
    const app = hostApp(t);
    const err = await registrationError(app, async () => {
      await app.register(petstoreGateway, { gateway: gateway() });
      await app.register(petstoreGateway, { gateway: gateway() });
    });
    t.type(err, Error);
    t.match((err as Error).message, /petstore-gateway: the plugin is registered twice/);
  });

  t.test('a host route under /v1 registered after the plugin: refused with a clear error', async (t) => {
    const app = hostApp(t);
    const err = await registrationError(app, async () => {
      await app.register(petstoreGateway, { gateway: gateway() });
      app.get('/v1/status', async () => ({ ok: true }));
    });
    t.type(err, Error);
    t.match((err as Error).message, /petstore-gateway: the route GET \/v1\/status is under \/v1/);
  });

  t.test('a host route under /v1 registered before the plugin: never run, the gateway answers its path', async (t) => {
    const app = hostApp(t);
    const log = captureLog();
    let ran = 0;
    app.get('/v1/status', async () => {
      ran++;
      return { open: true };
    });
    await app.register(petstoreGateway, { gateway: gateway(), log });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    assertError(t, await request(`${url}/v1/status`), 401, 'missing_api_key', { message: 'any' });
    assertError(t, await request(`${url}/v1/status`, { headers: bearer(key) }), 404, 'not_found');
    t.equal(ran, 0, "the host's handler never ran");
    const warnings = log.lines.filter((l) => l.level === 'warn' && /registered before the plugin/.test(l.message));
    t.equal(warnings.length, 1, 'the operator is told once', { lines: log.lines });
    assertJson(t, await request(`${url}/v1/pets`, { headers: bearer(key) }), 200);
  });

  t.test("the host's other routes are the host's: no authentication, its own JSON parser", async (t) => {
    const app = hostApp(t);
    const log = captureLog();
    await app.register(petstoreGateway, { gateway: gateway(), log });
    app.get('/healthz', async () => ({ ok: true }));
    app.post('/echo', async (request) => ({ got: request.body }));
    const url = await app.listen({ host: '127.0.0.1', port: 0 });

    const health = await request(`${url}/healthz`);
    t.equal(health.status, 200, 'a host route outside /v1 is served without a key');
    t.strictSame(health.json, { ok: true });
    const echo = await request(`${url}/echo`, { method: 'POST', headers: JSON_BODY, body: '{"a":[1,2]}' });
    t.equal(echo.status, 200, "the host's JSON route parses its body with the host's parser");
    t.strictSame(echo.json, { got: { a: [1, 2] } }, 'parsed JSON, not the raw bytes the gateway reads');
    const bad = await request(`${url}/echo`, { method: 'POST', headers: JSON_BODY, body: '{' });
    t.equal(bad.status, 400, "a malformed body on a host route is the host's 400");
    t.not((bad.json as { code?: unknown } | undefined)?.code, 'malformed_json', 'not answered by the gateway');

    // The gateway's own paths are still the gateway's.
    assertError(t, await request(`${url}/v1/pets`), 401, 'missing_api_key', { message: 'any' });
    assertJson(t, await request(`${url}/v1/pets`, { headers: bearer(key) }), 200);
    const created = await request(`${url}/v1/pets`, { method: 'POST', headers: bearer(key, JSON_BODY), body: NEW_PET });
    t.equal(created.status, 201, `createPet through the plugin (${created.body.slice(0, 120)})`);
    assertError(t, await request(`${url}/v1/nowhere`, { headers: bearer(key) }), 404, 'not_found');
    t.strictSame(log.lines, [], 'nothing for the operator');
  });
});
