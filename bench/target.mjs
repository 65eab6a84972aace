// One benchmark target in its own process: prints "ready http://127.0.0.1:PORT" and serves until
// killed. Usage: node bench/target.mjs upstream | bare-proxy URL | gateway URL|builtin
import Fastify from 'fastify';
import httpProxy from '@fastify/http-proxy';
import { createBackendServer, ReferenceBackend, buildServer, createGateway, parsePolicy } from '../dist/index.js';

const KEY = 'bench_' + 'k'.repeat(32);
const [kind, url] = process.argv.slice(2);

function seeded() {
  const backend = new ReferenceBackend();
  for (let i = 0; i < 120; i++) {
    backend.handle({ operation: 'createPet', query: '', body: Buffer.from(`{"name":"pet ${i}","categoryId":${i},"status":"available"}`) });
  }
  return backend;
}

async function main() {
  if (kind === 'upstream') {
    const server = createBackendServer({ backend: seeded() });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${server.address().port}`;
  }
  if (kind === 'bare-proxy') {
    const app = Fastify({ logger: false });
    await app.register(httpProxy, { upstream: url });
    await app.listen({ host: '127.0.0.1', port: 0 });
    return `http://127.0.0.1:${app.server.address().port}`;
  }
  const env = { env: { PETSTORE_API_KEYS: KEY } };
  const loaded = parsePolicy(`upstream: { url: ${url === 'builtin' ? 'builtin' : url + '/v1'} }`, env);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  const gateway = createGateway(loaded.config, env, url === 'builtin' ? seeded() : undefined);
  const app = await buildServer(gateway);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${app.server.address().port}`;
}

main().then((u) => process.stdout.write(`ready ${u}\n`), (err) => {
  console.error(err);
  process.exit(1);
});
