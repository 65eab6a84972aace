// The trace of one request as an APM draws it, from a real run: the reference backend and the
// gateway (dist/, built first) as their own processes, the gateway exporting OTLP/JSON to a
// collector in this process, and one getPet call through it. Prints the spans as a waterfall
// with their attributes and events: the figure in docs/operations.md ("Traces").
//
//   npm run build && node scripts/trace-figure.mjs
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const children = [];

/** Starts the CLI with `args` until a line of its output matches `re`; 15 s at most. */
function start(args, re, env = {}) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`no ${re} within 15 s:\n${text}`)), 15_000);
    const read = (chunk) => {
      text += chunk;
      const m = re.exec(text);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => reject(new Error(`exited ${code}:\n${text}`)));
  });
}

/** A collector: every span of every OTLP/JSON request, with its resource. */
async function collector() {
  const spans = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push(s);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/v1/traces`, spans, close: () => new Promise((r) => server.close(r)) };
}

function call(url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: body === undefined ? 'GET' : 'POST', headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const value = (v) => v.stringValue ?? (v.intValue === undefined ? undefined : Number(v.intValue)) ?? v.doubleValue ?? v.boolValue;
const attrs = (list) => Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));
const nanos = (s) => BigInt(s);

function waterfall(spans) {
  const server = spans.find((s) => s.kind === 2);
  const t0 = nanos(server.startTimeUnixNano);
  const total = Number(nanos(server.endTimeUnixNano) - t0) / 1e6;
  const WIDTH = 40;
  const bar = (s) => {
    const a = Number(nanos(s.startTimeUnixNano) - t0) / 1e6;
    const b = Number(nanos(s.endTimeUnixNano) - t0) / 1e6;
    const from = Math.round((a / total) * WIDTH);
    const to = Math.max(from + 1, Math.round((b / total) * WIDTH));
    return { text: ' '.repeat(from) + '█'.repeat(to - from) + ' '.repeat(WIDTH - to), ms: b - a, at: a };
  };
  const lines = [`trace ${server.traceId}   ${total.toFixed(2)} ms`, ''];
  const ordered = [server, ...spans.filter((s) => s.kind === 3).sort((x, y) => (nanos(x.startTimeUnixNano) < nanos(y.startTimeUnixNano) ? -1 : 1))];
  for (const s of ordered) {
    const b = bar(s);
    const label = `${s.kind === 2 ? '' : '  '}${s.name}`.padEnd(26);
    lines.push(`${label}${s.kind === 2 ? 'SERVER' : 'CLIENT'}  |${b.text}| ${b.ms.toFixed(2)} ms`);
  }
  for (const s of ordered) {
    lines.push('', `${s.kind === 2 ? 'SERVER' : 'CLIENT'} ${s.name}  span ${s.spanId}${s.parentSpanId ? `  parent ${s.parentSpanId}` : ''}  status ${['unset', 'ok', 'error'][s.status?.code ?? 0]}`);
    for (const [k, v] of Object.entries(attrs(s.attributes))) lines.push(`    ${k} = ${JSON.stringify(v)}`);
    for (const e of s.events ?? []) {
      const at = Number(nanos(e.timeUnixNano) - t0) / 1e6;
      const ea = Object.entries(attrs(e.attributes)).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(' ');
      lines.push(`    event +${at.toFixed(2)} ms  ${e.name}${ea === '' ? '' : '  ' + ea}`);
    }
  }
  return lines.join('\n');
}

const dir = mkdtempSync(join(tmpdir(), 'trace-figure-'));
const col = await collector();
try {
  const [, backend] = await start(['backend', '--host', '127.0.0.1', '--port', '0'], /backend listening on (http:\/\/127\.0\.0\.1:\d+\/v1)\n/);
  const key = randomBytes(24).toString('base64url');
  const policy = join(dir, 'policy.yaml');
  writeFileSync(
    policy,
    [
      'version: 1',
      `upstream: { url: "${backend}" }`,
      'server: { admin: null }',
      'policies: { auth: { keys: [], keysFromEnv: PETSTORE_API_KEYS } }',
      `telemetry: { traces: { endpoint: "${col.url}", protocol: http/json, batch: { delayMs: 50 } } }`,
      '',
    ].join('\n'),
  );
  const [, url] = await start(['serve', '--policy', policy, '--host', '127.0.0.1', '--port', '0'], /"url":"(http:\/\/127\.0\.0\.1:\d+)"/, { PETSTORE_API_KEYS: key });
  // A pet is made first, and read once to warm the connections (their traces are not drawn); then
  // the call drawn: the deprecated getPet, continuing a client's trace.
  const auth = { authorization: `Bearer ${key}` };
  const made = await call(`${url}/v1/pets`, { ...auth, 'content-type': 'application/json' }, '{"name":"Rex","categoryId":9007199254740993,"status":"available"}');
  const id = /"id":(\d+)/.exec(made.body)?.[1];
  if (id === undefined) throw new Error(`createPet answered ${made.status}: ${made.body}`);
  await call(`${url}/v1/pets/${id}`, auth);
  const { status } = await call(`${url}/v1/pets/${id}`, { ...auth, 'x-request-id': 'figure-1', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
  const drawn = () => col.spans.filter((s) => s.traceId === '4bf92f3577b34da6a3ce929d0e0e4736');
  for (let i = 0; i < 100 && drawn().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
  process.stdout.write(`GET /v1/pets/${id} -> ${status}\n\n${waterfall(drawn())}\n`);
} finally {
  for (const c of children) c.kill('SIGTERM');
  await col.close();
  rmSync(dir, { recursive: true, force: true });
}
