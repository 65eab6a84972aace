/**
 * The start probe (src/cli/probe.ts) against a real upstream on 127.0.0.1: what each answer to the
 * bare `GET <upstream>/pets?limit=1` is judged, and the advice the line gives. The probe is the
 * CLI's own fetch, run in this process (cli.test.ts runs it through `serve`).
 */
import t from 'tap';
import type { Logger } from 'pino';
import { probeUpstream } from '../../src/cli/probe.js';
import { parsePolicy } from '../../src/config/load.js';
import type { PolicyConfig } from '../../src/config/types.js';
import { sendJson, startStubUpstream } from '../helpers/servers.js';

interface Line {
  readonly level: string;
  readonly fields: Record<string, unknown>;
  readonly msg: string;
}

function captureLog(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) => void lines.push({ level, fields, msg });
  return { log: { info: at('info'), warn: at('warn'), error: at('error') } as unknown as Logger, lines };
}

function configFor(url: string, auth: Record<string, unknown> = {}): PolicyConfig {
  const r = parsePolicy(JSON.stringify({ version: 1, upstream: { url }, policies: { auth } }), { env: {} });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

// parity: the start probe is the CLI's fetch, the same whatever engine serves.
t.test('the start probe: each answer judged, with advice that fits the URL', async (t) => {
  // The stub answers what the path asks for: /s<status>/... answers <status>; /v1/pets 200; else 404.
  const stub = await startStubUpstream(t, (req, res) => {
    const m = /^\/s(\d{3})\//.exec(req.url);
    if (m !== null) return sendJson(res, Number(m[1]), m[1] === '400' ? '<html>400 No required SSL certificate was sent</html>' : { code: 'x', message: 'x', status: Number(m[1]) });
    if (req.url.startsWith('/v1/pets')) return sendJson(res, 200, []);
    return sendJson(res, 404, { code: 'not_found', message: 'no such path', status: 404 });
  });
  const probe = async (url: string, auth: Record<string, unknown> = {}) => {
    const { log, lines } = captureLog();
    const result = await probeUpstream(configFor(url, auth), log, 5000);
    t.equal(lines.length, 1, `${url}: one line`);
    return { result, line: lines[0]! };
  };

  for (const status of [400, 421, 495, 496]) {
    const { result, line } = await probe(`${stub.origin}/s${status}/v1`);
    t.match(result, { verdict: 'refuses-gateway', status, level: 'warn' }, `${status}: the upstream refuses the gateway, a warning`);
    t.equal(line.level, 'warn');
    t.match(line.msg, /a valid request, answered \d{3}: the upstream likely refuses the gateway itself \(a client certificate it requires: upstream\.tls\.certFile/);
  }
  const unauthorized = await probe(`${stub.origin}/s401/v1`, { upstreamAuthorization: 'forward' });
  t.match(unauthorized.result, { verdict: 'needs-credentials', level: 'info' }, "401 without credentials, clients' keys forwarded: info");
  const dropped = await probe(`${stub.origin}/s403/v1`, { upstreamAuthorization: 'drop' });
  t.match(dropped.result, { verdict: 'needs-credentials', level: 'warn' }, '403 with upstreamAuthorization drop: a warning');
  t.match((await probe(`${stub.origin}/s429/v1`)).result, { verdict: 'reachable', level: 'info' }, 'another 4xx: reachable');

  const v2 = await probe(`${stub.origin}/v2`);
  t.match(v2.result, { verdict: 'wrong-base-path', level: 'warn', status: 404 });
  t.match(v2.line.msg, /its base path ends with \/v2, which serves no GET \/pets there/);
  t.notMatch(v2.line.msg, /\/v2\/v1/, 'never /v2/v1');
  const bare = await probe(stub.origin);
  t.match(bare.line.msg, `try --upstream ${stub.origin}/v1`, 'no version: add /v1');
  const slash = await probe(`${stub.origin}/v1/`);
  t.match(slash.result, { verdict: 'ok', status: 200 });
  t.equal(slash.line.msg, `upstream probe: GET ${stub.origin}/v1/pets?limit=1 answered 200`, 'a trailing slash: no // in the line');
  const slashes = await probe(`${stub.origin}/`);
  t.match(slashes.line.msg, `GET ${stub.origin}/pets?limit=1 answered 404`);
  t.match(slashes.line.msg, `try --upstream ${stub.origin}/v1`, 'nor in the advice');
});
