// The operator console's page and routes on a real admin listener, over a fake ConsoleData
// (test/helpers/console-fixture.ts), driven through Debian's headless Chromium by puppeteer-core
// (no browser is downloaded): each view renders and its tables hold exactly the JSON's values,
// with no console error, no CSP violation and no request leaving the admin origin; axe-core finds
// no serious or critical violation, in the light and the dark scheme; the nav works from the
// keyboard; the admin token is asked for, kept in sessionStorage and sent; the first render with
// 1,000 keys takes under a second. The routes' HTTP behaviour (headers, validation, tokens) is
// checked without a browser. The browser scenarios are skipped when chromium is missing, unless
// CI=true (then they fail).
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import tap from 'tap';
import { READY, startAdmin } from '../../src/ops/admin.js';
import { AdminAuthGuard } from '../../src/ops/admin-guard.js';
import { AdminTokens } from '../../src/ops/admin-tokens.js';
import { CONSOLE_CSP, consoleRoutes, type ConsoleRoutesOptions } from '../../src/ops/console/routes.js';
import type { BurndownView, FleetView, KeysView, MigrationView, TrafficView, ViolationsView } from '../../src/ops/console/types.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { asJson, axeProblems, CHROMIUM, launch, open, readTables, rendered, sameOrigin, viewTables, VIEWS, WAIT_MS, watchedPage, type Rows, type ViewName } from '../helpers/browser.js';
import { consoleFixture, type ConsoleFixture } from '../helpers/console-fixture.js';
import { PROJECT_ROOT, request } from '../helpers/servers.js';

const TOKEN = 'Zq8v3LrT0xWmN5kYp2HcJd7FsB4gAe9U6tRiOlKw';
const requireHere = createRequire(import.meta.url);

/** An admin listener on 127.0.0.1:0 with the console's routes; its origin. */
async function listen(t: TapTest, options: ConsoleRoutesOptions): Promise<string> {
  const admin = await startAdmin({
    host: '127.0.0.1',
    port: 0,
    readiness: () => READY,
    metrics: async () => ({ body: '', contentType: 'text/plain; version=0.0.4; charset=utf-8' }),
    deprecations: async () => ({ generatedAt: '', operations: [] }),
    routes: consoleRoutes(options),
  });
  t.teardown(() => admin.close());
  return `http://127.0.0.1:${admin.address().port}`;
}

const SECURITY = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'x-frame-options': 'DENY',
};

function securityHeaders(t: TapTest, headers: Record<string, unknown>, what: string): void {
  for (const [name, value] of Object.entries(SECURITY)) t.equal(headers[name], value, `${what}: ${name}`);
}

/** What each table must hold, from the fixture's views: the traffic and keys views as given (another window, another query). */
function expected(view: ViewName, fx: ConsoleFixture['views'], traffic: TrafficView = fx.traffic.hour, keys: KeysView = fx.keys): Record<string, Rows> {
  switch (view) {
    case 'traffic':
      return viewTables('traffic', traffic);
    case 'keys':
      return viewTables('keys', keys);
    case 'deprecations':
      return viewTables('deprecations', fx.deprecations as BurndownView);
    case 'violations':
      return viewTables('violations', fx.violations as ViolationsView);
    case 'fleet':
      return viewTables('fleet', fx.fleet as FleetView);
    case 'migration':
      return viewTables('migration', fx.migration as MigrationView);
  }
}

// ---------------------------------------------------------------------------------------------
// Without a browser: the routes

// parity: the console is served by the admin listener, which no engine is part of
tap.test('the console files and endpoints: headers, validation, errors', async (t) => {
  const fx = consoleFixture();
  const failures: string[] = [];
  const data = { ...fx.data, fleet: () => Promise.reject(new Error('store away')) };
  const origin = await listen(t, { data, onError: (_e, path) => failures.push(path) });

  const moved = await request(`${origin}/console`);
  t.equal(moved.status, 308, '/console moves to /console/');
  t.equal(moved.headers.location, '/console/');
  securityHeaders(t, moved.headers, '308');

  const files: Array<[string, RegExp, string | undefined]> = [
    ['/console/', /^text\/html; charset=utf-8$/, join(PROJECT_ROOT, 'console', 'index.html')],
    ['/console/app.js', /^text\/javascript; charset=utf-8$/, join(PROJECT_ROOT, 'console', 'app.js')],
    ['/console/app.css', /^text\/css; charset=utf-8$/, join(PROJECT_ROOT, 'console', 'app.css')],
    ['/console/uplot.js', /^text\/javascript; charset=utf-8$/, requireHere.resolve('uplot/dist/uPlot.iife.min.js')],
    ['/console/uplot.css', /^text\/css; charset=utf-8$/, requireHere.resolve('uplot/dist/uPlot.min.css')],
  ];
  for (const [path, type, file] of files) {
    const res = await request(origin + path);
    t.equal(res.status, 200, `${path}: 200`);
    t.match(res.headers['content-type'], type, `${path}: its type`);
    t.equal(res.headers['cache-control'], 'no-cache', `${path}: revalidated`);
    t.match(res.headers.etag, /^"[A-Za-z0-9_-]{20,}"$/, `${path}: a strong ETag`);
    if (file !== undefined) t.ok(res.raw.equals(readFileSync(file)), `${path}: the file's bytes`);
    securityHeaders(t, res.headers, path);
    const again = await request(origin + path, { headers: { 'if-none-match': String(res.headers.etag) } });
    t.equal(again.status, 304, `${path}: 304 when unchanged`);
    t.equal(again.body, '', `${path}: no body with 304`);
    const head = await request(origin + path, { method: 'HEAD' });
    t.equal(head.status, 200, `${path}: HEAD`);
    t.equal(head.headers['content-length'], String(res.raw.length), `${path}: HEAD gives the length`);
    t.equal(head.body, '', `${path}: HEAD has no body`);
  }

  for (const method of ['POST', 'PUT', 'DELETE']) {
    const res = await request(`${origin}/console/api/keys`, { method });
    assertError(t, res, 405, 'method_not_allowed', { headers: { allow: 'GET, HEAD' } });
    securityHeaders(t, res.headers, `${method} 405`);
  }
  const missing = await request(`${origin}/console/nothing.js`);
  assertError(t, missing, 404, 'not_found', { message: /console/ });
  securityHeaders(t, missing.headers, '404');
  assertError(t, await request(`${origin}/console/api/secrets`), 404, 'not_found', { message: /console/ });

  const answers: Array<[string, unknown]> = [
    ['/console/api/traffic', fx.views.traffic.hour],
    ['/console/api/traffic?window=day', fx.views.traffic.day],
    ['/console/api/traffic?window=hour&scope=instance', { ...fx.views.traffic.hour, scope: 'instance' }],
    ['/console/api/deprecations', fx.views.deprecations],
    ['/console/api/deprecations?scope=instance', { ...fx.views.deprecations, scope: 'instance' }],
    ['/console/api/violations', fx.views.violations],
    ['/console/api/keys', fx.views.keys],
    ['/console/api/keys?unusedDays=7&expiringDays=60&other=ignored', fx.keysFor({ unusedDays: 7, expiringDays: 60 })],
    ['/console/api/migration', fx.views.migration],
  ];
  for (const [path, view] of answers) {
    const res = await request(origin + path);
    t.equal(res.status, 200, `${path}: 200`);
    t.equal(res.headers['content-type'], 'application/json; charset=utf-8', `${path}: JSON`);
    t.equal(res.headers['cache-control'], 'no-store', `${path}: never cached`);
    securityHeaders(t, res.headers, path);
    t.strictSame(res.json, asJson(view), `${path}: the view's JSON`);
  }
  const head = await request(`${origin}/console/api/keys`, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD on the API');
  t.equal(head.body, '', 'without a body');
  t.strictSame(
    fx.calls.filter((c) => c.view === 'traffic').map((c) => c.args),
    [['hour', undefined], ['day', undefined], ['hour', 'instance']],
    'the window and the scope reach ConsoleData',
  );

  for (const query of ['traffic?window=week', 'traffic?window=hour&window=day', 'traffic?scope=fleet', 'violations?scope=', 'keys?unusedDays=0', 'keys?unusedDays=abc', 'keys?expiringDays=3651', 'keys?expiringDays=1.5']) {
    const res = await request(`${origin}/console/api/${query}`);
    assertError(t, res, 400, 'invalid_query', { message: /window|scope|unusedDays|expiringDays/ });
    securityHeaders(t, res.headers, query);
  }

  const failed = await request(`${origin}/console/api/fleet`);
  assertError(t, failed, 500, 'internal_error');
  t.strictSame(failures, ['/console/api/fleet'], 'the failure is told to onError');

  const other = await request(`${origin}/healthz`);
  t.equal(other.status, 200, 'the listener still answers its own paths');
  t.notOk('content-security-policy' in other.headers, 'and the console headers stay on /console');
});

// parity: the console is served by the admin listener, which no engine is part of
tap.test('with admin tokens: the API needs one, the page does not; guesses are locked', async (t) => {
  const fx = consoleFixture();
  let tokens: AdminTokens | undefined = new AdminTokens([{ name: 'PETSTORE_ADMIN_TOKENS#1', token: TOKEN }]);
  const guard = new AdminAuthGuard({ maxFailures: 3, windowSeconds: 60 });
  const origin = await listen(t, { data: fx.data, tokens: () => tokens, guard });

  for (const path of ['/console/', '/console/app.js', '/console/uplot.js']) t.equal((await request(origin + path)).status, 200, `${path} loads without a token`);
  const none = await request(`${origin}/console/api/keys`);
  assertError(t, none, 401, 'missing_api_key', { message: /admin token/, headers: { 'www-authenticate': 'Bearer realm="petstore-gateway-admin"' } });
  securityHeaders(t, none.headers, '401');
  const ok = await request(`${origin}/console/api/keys`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.equal(ok.status, 200, 'the admin token opens it');
  t.strictSame(ok.json, asJson(fx.views.keys), 'the keys view');
  assertError(t, await request(`${origin}/console/api/fleet`, { headers: { authorization: 'Bearer not-the-token' } }), 401, 'invalid_api_key', { message: 'The admin token is not valid.' });
  assertError(t, await request(`${origin}/console/api/fleet`, { headers: { authorization: `Basic ${TOKEN}` } }), 401, 'invalid_api_key', { message: 'The admin token is not valid.' });
  const bad = await request(`${origin}/console/api/traffic?window=week`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assertError(t, bad, 400, 'invalid_query', { message: /window/ });

  // The third wrong token locks the address: the right one is refused too, until the window drains.
  assertError(t, await request(`${origin}/console/api/fleet`, { headers: { authorization: 'Bearer still-not-it' } }), 401, 'invalid_api_key', { message: 'The admin token is not valid.' });
  const locked = await request(`${origin}/console/api/fleet`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assertError(t, locked, 429, 'too_many_auth_failures');
  t.match(locked.headers['retry-after'], /^[1-9][0-9]*$/, 'Retry-After says when');
  const metrics = await guard.metrics();
  t.match(metrics, /reason="missing"} 1/, 'the missing token is counted');
  t.match(metrics, /reason="invalid"} 3/, 'the wrong ones too');
  t.match(metrics, /reason="locked"} 1/, 'and the refusal while locked');

  tokens = new AdminTokens([]);
  t.equal((await request(`${origin}/console/api/fleet`)).status, 200, 'no token in force: open, as /deprecations is');
  tokens = undefined;
  t.equal((await request(`${origin}/console/api/migration`)).status, 200, 'no token set at all: open');
});

// ---------------------------------------------------------------------------------------------
// With a browser

if (!existsSync(CHROMIUM)) {
  if (process.env.CI === 'true') tap.fail(`chromium is missing at ${CHROMIUM}: CI must install it (.ci/run)`);
  else tap.comment(`chromium is missing at ${CHROMIUM}: the console's browser scenarios are skipped`);
} else {
  // parity: the page is served by the admin listener, which no engine is part of
  tap.test('the page in a browser', async (t) => {
    const browser = await launch(t);
    const fx = consoleFixture();
    const origin = await listen(t, { data: fx.data });

    t.test('each view renders its tables with the JSON values, no error, nothing elsewhere, no serious axe violation', async (t) => {
      const w = await watchedPage(t, browser, origin);
      for (const view of VIEWS) {
        await open(w.page, origin, view);
        const shown = await w.page.evaluate(() => [...document.querySelectorAll('main section:not([hidden])')].map((s) => s.id));
        t.strictSame(shown, [`view-${view}`], `${view}: only its section is shown`);
        t.match(await w.page.evaluate((v: string) => document.querySelector(`#view-${v} h2`)?.textContent, view), /\w/, `${view}: its heading`);
        t.strictSame(await readTables(w.page), asJson(expected(view, fx.views)), `${view}: every table cell holds the JSON's value`);
        t.strictSame(await axeProblems(w.page), [], `${view}: axe finds no serious or critical violation (light)`);
      }
      // The charts are drawn (a canvas each) with their legends.
      await open(w.page, origin, 'traffic');
      t.equal(await w.page.$$eval('#view-traffic .plot canvas', (c) => c.length), 2, 'traffic: two charts');
      t.equal(await w.page.$$eval('#view-traffic .legend li svg line[stroke-dasharray]', (l) => new Set(l.map((x) => x.getAttribute('stroke-dasharray'))).size), 4, 'each series has its dash pattern in the legend');

      // The burn-down's time axis: up to the sunset (the default) or the days with calls only.
      await open(w.page, origin, 'deprecations');
      t.equal(await w.page.$eval('button[data-reach="sunset"]', (b) => b.getAttribute('aria-pressed')), 'true', 'the burn-down reaches the sunset by default');
      await w.page.click('button[data-reach="seen"]');
      await w.page.waitForFunction(() => document.body.dataset.rendered === 'deprecations' && document.querySelector('button[data-reach="seen"]')?.getAttribute('aria-pressed') === 'true', { timeout: WAIT_MS });
      t.equal(await w.page.$$eval('#view-deprecations .plot canvas', (c) => c.length), 1, 'drawn again, once');
      t.strictSame(await readTables(w.page), asJson(expected('deprecations', fx.views)), 'the same numbers');

      await w.page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
      for (const view of VIEWS) {
        await open(w.page, origin, view);
        t.strictSame(await axeProblems(w.page), [], `${view}: axe finds no serious or critical violation (dark)`);
      }
      t.strictSame(w.errors, [], 'no console error');
      t.strictSame(await w.csp(), [], 'no CSP violation');
      sameOrigin(t, w, origin);
    });

    t.test("operators' text is shown, never run", async (t) => {
      const w = await watchedPage(t, browser, origin);
      for (const view of ['deprecations', 'keys', 'traffic'] as const) {
        await open(w.page, origin, view);
        const seen = await w.page.evaluate(() => ({
          pwned: (window as unknown as { __pwned?: number }).__pwned,
          injected: document.querySelectorAll('main img, main script, main b').length,
          owner: document.querySelector('tr[data-key="partner-globex"] td[data-field="owner"]')?.textContent,
          contact: document.querySelector('tr[data-key="partner-globex"] td[data-field="contact"]')?.textContent,
        }));
        t.equal(seen.pwned, undefined, `${view}: nothing ran`);
        t.equal(seen.injected, 0, `${view}: no element came from the data`);
        t.equal(seen.owner, '<img src=x onerror="window.__pwned=1">', `${view}: the owner as text`);
        t.equal(seen.contact, '"><script>window.__pwned=2</script>', `${view}: the contact as text`);
      }
      t.strictSame(w.errors, [], 'no console error');
      t.strictSame(await w.csp(), [], 'no CSP violation');
    });

    t.test('the keyboard reaches the nav and every control; Enter switches views', async (t) => {
      const w = await watchedPage(t, browser, origin);
      await w.page.goto(`${origin}/console/`, { waitUntil: 'load' });
      await rendered(w.page, 'deprecations');
      const focused = () => w.page.evaluate(() => {
        const a = document.activeElement as HTMLElement | null;
        return { tag: a?.tagName ?? '', text: a?.textContent?.trim() ?? '', href: a?.getAttribute('href') ?? null, outline: a === null ? 'none' : getComputedStyle(a).outlineStyle };
      });
      await w.page.keyboard.press('Tab');
      t.match(await focused(), { tag: 'A', href: '#main' }, 'the first Tab reaches the skip link');
      t.not((await focused()).outline, 'none', 'its focus is visible');
      let at = await focused();
      for (let i = 0; i < 10 && at.href !== '#traffic'; i++) {
        await w.page.keyboard.press('Tab');
        at = await focused();
      }
      t.equal(at.href, '#traffic', 'Tab reaches the nav link to Traffic');
      t.not(at.outline, 'none', 'with a visible focus');
      await w.page.keyboard.press('Enter');
      await rendered(w.page, 'traffic');
      t.equal(await w.page.evaluate(() => location.hash), '#traffic', 'Enter follows it');
      t.equal(await w.page.evaluate(() => document.activeElement?.id), 'h-traffic', "focus moves to the view's heading");
      t.equal(await w.page.$eval('nav a[aria-current="page"]', (a) => a.getAttribute('href')), '#traffic', 'the nav says where we are');

      // On to "Last day" from the heading, and Enter.
      for (let i = 0; i < 10 && (await focused()).text !== 'Last day'; i++) await w.page.keyboard.press('Tab');
      t.equal((await focused()).text, 'Last day', 'Tab reaches the window toggle');
      await w.page.keyboard.press('Enter');
      await rendered(w.page, 'traffic');
      await w.page.waitForFunction(() => document.querySelector('button[data-window="day"]')?.getAttribute('aria-pressed') === 'true', { timeout: WAIT_MS });
      t.strictSame(await readTables(w.page), asJson(expected('traffic', fx.views, fx.views.traffic.day)), 'the last day, by the keyboard');

      // Every control of every view can take the focus.
      for (const view of VIEWS) {
        await open(w.page, origin, view);
        const unreachable = await w.page.evaluate(() =>
          [...document.querySelectorAll<HTMLElement>('a[href], button, input, select, summary')]
            .filter((e) => e.offsetParent !== null && !(e as HTMLButtonElement).disabled)
            .filter((e) => e.tabIndex < 0)
            .map((e) => e.outerHTML.slice(0, 80)),
        );
        t.strictSame(unreachable, [], `${view}: every visible control is in the tab order`);
      }
      t.strictSame(w.errors, [], 'no console error');
    });

    t.test('the keys filter and the query form', async (t) => {
      const w = await watchedPage(t, browser, origin);
      await open(w.page, origin, 'keys');
      await w.page.type('#keys-filter', 'PARTNER');
      await w.page.waitForFunction(() => document.getElementById('keys-count')?.textContent?.startsWith('Showing 2 of'), { timeout: WAIT_MS });
      t.strictSame(await w.page.$$eval('table[data-table="keys"] tbody tr:not([hidden])', (r) => r.map((x) => x.getAttribute('data-key'))), ['partner-acme', 'partner-globex'], 'the filter keeps the matching keys');
      await w.page.select('#keys-show', 'unused');
      const unused = fx.views.keys.keys.filter((k) => k.unused && /partner/.test(k.id)).map((k) => k.id);
      await w.page.waitForFunction((n: number) => document.getElementById('keys-count')?.textContent?.startsWith(`Showing ${n} of`), { timeout: WAIT_MS }, unused.length);
      t.strictSame(await w.page.$$eval('table[data-table="keys"] tbody tr:not([hidden])', (r) => r.map((x) => x.getAttribute('data-key'))), unused, 'and the flag selector narrows it');

      // The scope selector: this instance's counts for the views that have both.
      await open(w.page, origin, 'violations');
      await w.page.select('#scope', 'instance');
      await w.page.waitForFunction(() => document.body.dataset.rendered === 'violations' && /Counted by this instance/.test(document.querySelector('#view-violations .meta')?.textContent ?? ''), { timeout: WAIT_MS });
      t.strictSame(fx.calls.at(-1), { view: 'violations', args: ['instance'] }, 'the scope reaches the endpoint');
      await open(w.page, origin, 'keys');

      await w.page.$eval('#unused-days', (e) => ((e as HTMLInputElement).value = '3'));
      await w.page.$eval('#expiring-days', (e) => ((e as HTMLInputElement).value = '90'));
      await w.page.click('#keys-query button[type="submit"]');
      await w.page.waitForFunction(() => document.querySelector('table[data-table="keys"]') !== null && document.body.dataset.rendered === 'keys' && /within 90 days/.test(document.querySelector('#view-keys .summary')?.textContent ?? ''), { timeout: WAIT_MS });
      t.strictSame(await readTables(w.page), asJson(expected('keys', fx.views, undefined, fx.keysFor({ unusedDays: 3, expiringDays: 90 }))), 'the query reaches the endpoint and the table follows');
      t.strictSame(w.errors, [], 'no console error');
    });

    t.test('admin tokens: the page asks for one, keeps it in this tab, sends it', async (t) => {
      const secured = await listen(t, { data: fx.data, tokens: () => new AdminTokens([{ name: 'PETSTORE_ADMIN_TOKENS#1', token: TOKEN }]) });
      const direct = await request(`${secured}/console/api/fleet`);
      assertError(t, direct, 401, 'missing_api_key', { message: /admin token/ });
      t.equal((await request(`${secured}/console/api/fleet`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200, 'with the token: 200');

      const w = await watchedPage(t, browser, secured);
      await w.page.goto(`${secured}/console/#fleet`, { waitUntil: 'load' });
      await w.page.waitForFunction(() => document.body.dataset.problem === '401' && !(document.getElementById('token-form') as HTMLFormElement).hidden, { timeout: WAIT_MS });
      t.match(await w.page.$eval('#status', (e) => e.textContent), /needs an admin token/, 'the page says it needs a token');
      t.equal(await w.page.evaluate(() => document.activeElement?.id), 'token', 'and puts the focus in the token box');

      await w.page.type('#token', 'A-wrong-token-that-is-long-enough-0123456789');
      await w.page.keyboard.press('Enter');
      await w.page.waitForFunction(() => document.body.dataset.problem === '401' && /refused/.test(document.getElementById('status')?.textContent ?? ''), { timeout: WAIT_MS });
      t.pass('a wrong token is refused, clearly');
      t.equal(await w.page.evaluate(() => sessionStorage.length), 0, 'and not kept');

      await w.page.type('#token', TOKEN);
      await w.page.keyboard.press('Enter');
      await rendered(w.page, 'fleet');
      t.strictSame(await readTables(w.page), asJson(expected('fleet', fx.views)), 'the right token shows the view');
      t.ok(await w.page.evaluate(() => (document.getElementById('token-form') as HTMLFormElement).hidden), 'the form goes away');
      t.strictSame(await w.page.evaluate(() => [sessionStorage.length, localStorage.length, document.cookie]), [1, 0, ''], 'the token is in sessionStorage only');

      await w.page.reload({ waitUntil: 'load' });
      await rendered(w.page, 'fleet');
      t.pass('a reload in the same tab needs no new entry');
      t.strictSame(w.authorizations, [undefined, 'Bearer A-wrong-token-that-is-long-enough-0123456789', `Bearer ${TOKEN}`, `Bearer ${TOKEN}`], 'each API request carried the token in force');

      await w.page.click('#forget');
      await w.page.waitForFunction(() => document.body.dataset.problem === '401', { timeout: WAIT_MS });
      t.equal(await w.page.evaluate(() => sessionStorage.length), 0, 'Forget removes it');
      // Guessing locks the address: the page says so, and when to try again.
      const locking = await listen(t, { data: fx.data, tokens: () => new AdminTokens([{ name: 'PETSTORE_ADMIN_TOKENS#1', token: TOKEN }]), guard: new AdminAuthGuard({ maxFailures: 1, windowSeconds: 60 }) });
      const l = await watchedPage(t, browser, locking);
      await l.page.goto(`${locking}/console/#keys`, { waitUntil: 'load' });
      await l.page.waitForFunction(() => document.body.dataset.problem === '401', { timeout: WAIT_MS });
      for (const guess of ['A-wrong-token-that-is-long-enough-0123456789', TOKEN]) {
        await l.page.waitForFunction(() => !(document.getElementById('token-form') as HTMLFormElement).hidden, { timeout: WAIT_MS });
        await l.page.type('#token', guess);
        await l.page.keyboard.press('Enter');
        await l.page.waitForFunction(() => document.body.dataset.problem !== undefined, { timeout: WAIT_MS });
      }
      await l.page.waitForFunction(() => document.body.dataset.problem === '429', { timeout: WAIT_MS });
      t.match(await l.page.$eval('#status', (e) => e.textContent), /Too many failed admin authentications from this address\. Try again in [1-9][0-9]* s\./, 'a locked address is told so, and when to retry');
      t.strictSame(l.errors.filter((e) => !/status of 40[1]|status of 429/.test(e)), [], 'no console error but the refusals');

      // The wrong token and the missing ones were console errors of the browser (failed loads); nothing else.
      t.strictSame(w.errors.filter((e) => !/status of 401/.test(e)), [], 'no other console error');
      t.strictSame(await w.csp(), [], 'no CSP violation');
      sameOrigin(t, w, secured);
    });

    t.test('first render with 1,000 keys under a second', async (t) => {
      const big = consoleFixture({ keys: 1000 });
      const bigOrigin = await listen(t, { data: big.data });
      const w = await watchedPage(t, browser, bigOrigin);
      await w.page.setCacheEnabled(false);
      // Five loads, each a new document with nothing cached; the median is judged (one load can
      // meet a busy moment of a shared machine), every figure is printed.
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        await open(w.page, bigOrigin, 'keys');
        times.push(await w.page.evaluate(() => performance.getEntriesByName('console-rendered:keys')[0]?.startTime ?? Infinity));
      }
      const median = [...times].sort((a, b) => a - b)[2]!;
      t.comment(`first render (navigation start to the keys table laid out), 1,000 keys, no cache: ${times.map((x) => `${x.toFixed(0)} ms`).join(', ')}; median ${median.toFixed(0)} ms; load average ${loadavg()[0]!.toFixed(1)}`);
      t.ok(median < 1000, `first render in ${median.toFixed(0)} ms (median) < 1000 ms`);
      const tables = await readTables(w.page);
      t.equal(tables.keys?.length, 1000, '1,000 rows');
      t.strictSame(tables, asJson(expected('keys', big.views)), 'each holding its JSON values');
      await w.page.type('#keys-filter', 'svc-09');
      const want = big.views.keys.keys.filter((k) => k.id.includes('svc-09')).length;
      await w.page.waitForFunction((n: number) => document.getElementById('keys-count')?.textContent?.startsWith(`Showing ${n} of 1,000`), { timeout: WAIT_MS }, want);
      t.equal(await w.page.$$eval('table[data-table="keys"] tbody tr:not([hidden])', (r) => r.length), want, `the filter keeps ${want} keys`);
      t.strictSame(w.errors, [], 'no console error');
      sameOrigin(t, w, bigOrigin);
    });
  });
}
