/**
 * The library's public names (src/index.ts): `createGateway(config, env)` and the three ways to
 * serve it, `listen()`, `nodeHandler()` and `fastifyPlugin`, through real servers on 127.0.0.1;
 * `reload()`; and the deprecated names, which must still do what they did.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import t from 'tap';
import * as api from '../../src/index.js';
import { assertError } from '../helpers/assert.js';
import { bearer, ENGINES, policyText, request, testKey } from '../helpers/servers.js';

function gatewayWith(key: string, policy: Record<string, unknown> = {}): api.PetstoreGateway {
  const env = { env: { PETSTORE_API_KEYS: key } };
  const loaded = api.parsePolicy(policyText(policy), env);
  if (!loaded.ok) throw new Error(api.formatProblems('policy', loaded.problems));
  return api.createGateway(loaded.config, env);
}

function urlOf(server: Server): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

for (const engine of ENGINES) {
  t.test(`listen({ engine: '${engine}' }) serves the policy on a port of its own`, async (t) => {
    const key = testKey();
    const gateway = gatewayWith(key);
    const running = await gateway.listen({ engine, host: '127.0.0.1', port: 0 });
    t.teardown(() => {
      running.server.closeAllConnections();
      return running.close();
    });
    const url = urlOf(running.server);
    t.equal((await request(`${url}/v1/pets`, { headers: bearer(key) })).status, 200, 'a known key lists pets');
    assertError(t, await request(`${url}/v1/pets`), 401, 'missing_api_key');
  });
}

// parity: nodeHandler() runs the node front; this scenario covers both of its upstreams in turn.
t.test('nodeHandler() is a node:http handler, over undici or http-proxy-3', async (t) => {
  const backendServer = api.createBackendServer();
  await new Promise<void>((resolve) => backendServer.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => backendServer.close(() => resolve())));
  const key = testKey();
  const gateway = gatewayWith(key, { upstream: { url: `${urlOf(backendServer)}/v1` } });
  for (const upstream of ['undici', 'http-proxy-3'] as const) {
    const { handler, close } = gateway.nodeHandler({ upstream });
    const server = createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.teardown(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await close();
    });
    const res = await request(`${urlOf(server)}/v1/pets`, { headers: bearer(key) });
    t.equal(res.status, 200, `${upstream}: the backend's answer through the gateway`);
    t.equal(res.headers['content-type'], 'application/json; charset=utf-8', `${upstream}: as JSON`);
  }
});

// parity: the Fastify plugin is the fastify front only.
t.test('fastifyPlugin serves /v1 of a host application and leaves its other routes alone', async (t) => {
  const key = testKey();
  const gateway = gatewayWith(key);
  const app = Fastify();
  t.teardown(() => app.close());
  await app.register(gateway.fastifyPlugin, {});
  app.get('/healthz', async () => ({ ok: true }));
  // The guard of /v1 sees the host's routes: the plugin is not encapsulated.
  t.throws(() => app.get('/v1/mine', async () => 'x'), /under \/v1/, 'a host route under /v1 is refused');
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = urlOf(app.server);
  t.equal((await request(`${url}/v1/pets`, { headers: bearer(key) })).status, 200, 'the gateway answers /v1');
  assertError(t, await request(`${url}/v1/pets`), 401, 'missing_api_key');
  t.equal((await request(`${url}/healthz`)).status, 200, 'a host route is the host\'s');
});

// parity: reload() swaps the policy of the holder that every engine reads alike.
t.test('reload() puts a new policy in force for the servers already listening', async (t) => {
  const first = testKey();
  const gateway = gatewayWith(first);
  const running = await gateway.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => {
    running.server.closeAllConnections();
    return running.close();
  });
  const url = urlOf(running.server);
  const second = testKey();
  const env = { env: { PETSTORE_API_KEYS: second } };
  const next = api.parsePolicy(policyText(), env);
  if (!next.ok) throw new Error('invalid policy');
  t.same(gateway.reload(next.config, env), [], 'accepted');
  assertError(t, await request(`${url}/v1/pets`, { headers: bearer(first) }), 401, 'invalid_api_key');
  t.equal((await request(`${url}/v1/pets`, { headers: bearer(second) })).status, 200, 'the new key is in force');
  t.equal(gateway.config, next.config, 'and the gateway reads as the new one');
  const moved = api.parsePolicy(policyText({ upstream: { url: 'http://127.0.0.1:1/v1' } }), { env: { PETSTORE_API_KEYS: second } });
  if (!moved.ok) throw new Error('invalid policy');
  t.match(gateway.reload(moved.config, env), [{ path: '$.upstream' }], 'a new upstream needs a restart');
  t.equal(gateway.config, next.config, 'and nothing changed');
});

// parity: the deprecated names are aliases of the engines' functions, checked without a server
// each (the listen scenario above serves every engine).
t.test('the deprecated names still take the gateway createGateway returns', async (t) => {
  const key = testKey();
  const gateway = gatewayWith(key);
  t.type(gateway, api.GatewayHolder, 'the gateway is the holder its servers read');
  t.equal(gateway.chain, gateway.current.chain, 'and reads as the compiled gateway');
  const handler = api.createUndiciHandler(gateway);
  t.teardown(() => handler.close());
  const server = createServer(handler.handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  t.equal((await request(`${urlOf(server)}/v1/pets`, { headers: bearer(key) })).status, 200, 'createUndiciHandler(createGateway(...)) serves');
  const holder = new api.GatewayHolder(gateway);
  t.equal(holder.current.chain, gateway.chain, 'new GatewayHolder(createGateway(...)) holds it');
  for (const name of ['buildServer', 'buildProxyServer', 'buildUndiciServer', 'createPetstoreHandler', 'createUndiciHandler', 'petstoreGateway'] as const) {
    t.type(api[name], 'function', `${name} is still exported`);
  }
});
