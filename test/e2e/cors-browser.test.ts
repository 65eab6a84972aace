// CORS through a real browser: Debian's headless Chromium, driven by puppeteer-core (no browser is
// downloaded), loads a page from one loopback origin that calls the gateway on another with
// Authorization: Bearer. The call succeeds (through the browser's own preflight), a 401 body is
// readable by the page, and a page from an origin the gateway does not list is blocked by the
// browser. Skipped when chromium is missing, unless CI=true (then it fails).
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import tap from 'tap';
import type { Browser } from 'puppeteer-core';
import { forEachEngine, startGateway } from '../helpers/servers.js';
import type { TapTest } from '../helpers/assert.js';
import { CHROMIUM, launch } from '../helpers/browser.js';

/** A page server on 127.0.0.1:0: its origin is the page's origin. */
async function pageServer(t: TapTest): Promise<string> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>app</title><p>app</p>');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Outcome {
  readonly status?: number;
  readonly body?: string;
  readonly requestId?: string | null;
  readonly blocked?: string;
}

/** What a page on `pageOrigin` gets when it fetches `url` with `Authorization: Bearer key`. */
async function fetchFromPage(t: TapTest, browser: Browser, pageOrigin: string, url: string, key: string): Promise<Outcome> {
  const page = await browser.newPage();
  t.teardown(() => page.close().catch(() => undefined));
  await page.goto(pageOrigin + '/', { waitUntil: 'load', timeout: 15_000 });
  return page.evaluate(
    async (u: string, k: string) => {
      try {
        const r = await fetch(u, { headers: { Authorization: `Bearer ${k}` } });
        return { status: r.status, body: await r.text(), requestId: r.headers.get('x-request-id') };
      } catch (err) {
        return { blocked: String(err) };
      }
    },
    url,
    key,
  );
}

if (!existsSync(CHROMIUM)) {
  if (process.env.CI === 'true') tap.fail(`chromium is missing at ${CHROMIUM}: CI must install it (.ci/run)`);
  else tap.plan(0, `chromium is missing at ${CHROMIUM}: the browser CORS test is skipped`);
} else {
  forEachEngine(tap, async (t, engine) => {
    t.test('a page on an allowed origin calls the gateway; another origin is blocked', async (t) => {
      const app = await pageServer(t);
      const other = await pageServer(t);
      const gw = await startGateway(t, { policies: { cors: { origins: [app] } } }, { engine });
      const browser = await launch(t);

      const ok = await fetchFromPage(t, browser, app, `${gw.url}/v1/pets?limit=2`, gw.key);
      t.equal(ok.status, 200, `the call succeeds through the preflight: ${ok.blocked ?? ''}`);
      t.match(ok.body, /^\[/, 'the page reads the list');
      t.match(ok.requestId, /\S/, 'an exposed field is readable');

      const denied = await fetchFromPage(t, browser, app, `${gw.url}/v1/pets`, 'not-a-valid-key');
      t.equal(denied.status, 401, 'the 401 reaches the page');
      t.match(JSON.parse(denied.body ?? '{}'), { status: 401, code: 'invalid_api_key' }, 'its Error body is readable');

      const blocked = await fetchFromPage(t, browser, other, `${gw.url}/v1/pets`, gw.key);
      t.equal(blocked.status, undefined, 'no answer reaches a page on another origin');
      t.match(blocked.blocked, /TypeError/, 'the browser blocks it (Failed to fetch)');
    });
  });
}
