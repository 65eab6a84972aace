/**
 * The operator console in a browser, for the tests that drive it: Debian's headless Chromium
 * through puppeteer-core (no browser is downloaded), a page that logs every request it makes
 * (and blocks any to another origin), its console errors, its CSP violations and the JSON the
 * console's API answered it; the console's tables read back as the page wrote them, and what they
 * must hold given a view's JSON (console/app.js: `table[data-table]`, `tr[data-key]`,
 * `td[data-field][data-value]`); axe-core's serious and critical violations.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import type { BurndownView, FleetView, KeysView, MigrationView, TrafficRow, TrafficView, ViolationsView } from '../../src/ops/console/types.js';
import type { TapTest } from './assert.js';
import { tempDir } from './servers.js';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const VIEWS = ['deprecations', 'traffic', 'violations', 'keys', 'fleet', 'migration'] as const;
export type ViewName = (typeof VIEWS)[number];
/** The longest a page is waited for (a render, a selector). */
export const WAIT_MS = 15_000;
const requireHere = createRequire(import.meta.url);

/** A value as the page's JSON carries it (what JSON.stringify then JSON.parse give). */
export const asJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

// ---------------------------------------------------------------------------------------------
// The tables

/** A table as the page holds it: per row its data-key and each cell's data-value, parsed. */
export type Rows = Array<{ key: string; cells: Record<string, unknown> }>;
export const pick = <T extends object>(o: T, fields: ReadonlyArray<keyof T>): Record<string, unknown> => Object.fromEntries(fields.map((f) => [f, o[f]]));
const trafficCells = (r: TrafficRow) => ({ requests: r.requests, p50Ms: r.p50Ms, p99Ms: r.p99Ms, client: r.errors.client, gateway: r.errors.gateway, upstream: r.errors.upstream, rateLimited: r.rateLimited });

/** The JSON of each view, as its endpoint answers it. */
export interface ViewJson {
  deprecations: BurndownView;
  traffic: TrafficView;
  violations: ViolationsView;
  keys: KeysView;
  fleet: FleetView;
  migration: MigrationView;
}

/**
 * What each table of `view` must hold given the endpoint's JSON: [data-key, {field: value}] per
 * row, by data-table name (the burn-down's of its first deprecated operation).
 */
export function viewTables<V extends ViewName>(view: V, json: ViewJson[V]): Record<string, Rows> {
  switch (view) {
    case 'deprecations': {
      const op = (json as BurndownView).operations[0];
      if (op === undefined) return {};
      return {
        'deprecation-days': op.days.map((day, i) => ({ key: day, cells: { day, total: op.total[i] } })),
        'deprecation-consumers': op.consumers.map((c) => ({ key: c.consumer, cells: pick(c, ['consumer', 'owner', 'contact', 'calls', 'firstSeen', 'lastSeen', 'stopped']) })),
      };
    }
    case 'traffic': {
      const traffic = json as TrafficView;
      return {
        'traffic-series': traffic.series.t.map((t, i) => ({
          key: String(t),
          cells: { t, ...Object.fromEntries(traffic.series.operations.flatMap((o) => [[`${o.operation}.requests`, o.requests[i]], [`${o.operation}.errors`, o.errors[i]]])) },
        })),
        'traffic-operations': traffic.operations.map((r) => ({ key: r.operation, cells: { operation: r.operation, ...trafficCells(r) } })),
        'traffic-consumers': traffic.consumers.map((r) => ({ key: r.consumer, cells: { consumer: r.consumer, ...trafficCells(r), owner: r.owner, contact: r.contact } })),
      };
    }
    case 'violations': {
      const v = json as ViolationsView;
      return {
        'violation-rules': v.rules.map((r) => ({ key: `${r.operation} ${r.field} ${r.kind}`, cells: pick(r, ['operation', 'field', 'kind', 'count', 'lastSeen']) })),
        'violation-samples': v.samples.map((s) => ({ key: s.requestId, cells: asJson(pick(s, ['at', 'operation', 'requestId', 'status', 'problems'])) as Record<string, unknown> })),
      };
    }
    case 'keys': {
      const keys = json as KeysView;
      return {
        keys: keys.keys.map((k) => ({
          key: k.id,
          cells: { ...pick(k, ['id', 'source', 'owner', 'contact', 'expires', 'overlapUntil', 'lastUsed']), flags: { expiringSoon: k.expiringSoon, expired: k.expired, unused: k.unused } },
        })),
        'keys-revoked': keys.revoked.map((r) => ({ key: r.id, cells: pick(r, ['id', 'owner', 'contact', 'revokedAt', 'by']) })),
      };
    }
    case 'fleet':
      return {
        fleet: (json as FleetView).instances.map((i) => ({
          key: i.id,
          cells: { ...pick(i, ['id', 'host', 'version', 'policyFingerprint', 'ready', 'lastReload', 'lastHeartbeat', 'workers']), flags: { policyDiffers: i.policyDiffers, stale: i.stale, self: i.self } },
        })),
      };
    case 'migration': {
      const m = json as MigrationView;
      return m.enabled ? { migration: m.operations.map((o) => ({ key: o.operation, cells: { ...o } })) } : {};
    }
    default:
      throw new Error(`no view ${String(view)}`);
  }
}

/** The tables of the view on show, as the page writes them: data-key, and each cell's data-value parsed. */
export function readTables(page: Page): Promise<Record<string, Rows>> {
  return page.evaluate(() => {
    const out: Record<string, Array<{ key: string; cells: Record<string, unknown> }>> = {};
    for (const table of document.querySelectorAll<HTMLTableElement>('main section:not([hidden]) table[data-table]')) {
      const rows = [...table.querySelectorAll<HTMLTableRowElement>('tbody tr[data-key]')].map((tr) => ({
        key: tr.dataset.key ?? '',
        cells: Object.fromEntries(
          [...tr.querySelectorAll<HTMLTableCellElement>('td[data-field]')].map((td) => [td.dataset.operation === undefined ? td.dataset.field : `${td.dataset.operation}.${td.dataset.field}`, JSON.parse(td.dataset.value ?? 'null') as unknown]),
        ),
      }));
      out[table.dataset.table ?? ''] = rows;
    }
    return out;
  });
}

// ---------------------------------------------------------------------------------------------
// The browser

/** Headless Chromium, closed at teardown. */
export async function launch(t: TapTest): Promise<Browser> {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: tempDir(t, 'chromium'),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 30_000,
  });
  t.teardown(() => browser.close());
  return browser;
}

export interface Watched {
  readonly page: Page;
  /** Every URL the page requested. */
  readonly requests: string[];
  /** Authorization headers sent to /console/api/*. */
  readonly authorizations: Array<string | undefined>;
  /** The console API's answers to the page (200s) in the order they were read: path and query, and the JSON. */
  readonly answers: Array<{ readonly at: string; readonly body: unknown }>;
  /** Console errors and page errors. */
  readonly errors: string[];
  /** CSP violations the page reported (securitypolicyviolation). */
  csp(): Promise<string[]>;
}

/** A page that logs every request (and blocks any to another origin), console errors, CSP violations and the API's answers. */
export async function watchedPage(t: TapTest, browser: Browser, origin: string): Promise<Watched> {
  const page = await browser.newPage();
  t.teardown(() => page.close().catch(() => undefined));
  page.setDefaultTimeout(WAIT_MS);
  await page.setViewport({ width: 1280, height: 900 });
  const requests: string[] = [];
  const authorizations: Array<string | undefined> = [];
  const answers: Array<{ at: string; body: unknown }> = [];
  const errors: string[] = [];
  const api = `${origin}/console/api/`;
  await page.setRequestInterception(true);
  page.on('request', (r) => {
    requests.push(r.url());
    if (r.url().startsWith(api)) authorizations.push(r.headers().authorization);
    if (r.url().startsWith(`${origin}/`) || r.url().startsWith('data:')) void r.continue();
    else void r.abort();
  });
  page.on('response', (r) => {
    if (!r.url().startsWith(api) || r.status() !== 200) return;
    const at = r.url().slice(origin.length);
    r.json().then(
      (body: unknown) => answers.push({ at, body }),
      () => undefined,
    );
  });
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.evaluateOnNewDocument(() => {
    const w = window as unknown as { __csp: string[] };
    w.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => w.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  return { page, requests, authorizations, answers, errors, csp: () => page.evaluate(() => (window as unknown as { __csp: string[] }).__csp) };
}

/**
 * The JSON the page was answered at `path` (with its query, e.g. `/console/api/traffic?window=day`)
 * after its `since`-th answer (`w.answers.length` before the load), waited for: its body is read
 * a moment after the page gets it.
 */
export async function answered(w: Watched, path: string, since: number): Promise<unknown> {
  // Bounded: at most WAIT_MS / 20 polls.
  for (let i = 0; i < WAIT_MS / 20; i++) {
    for (let k = w.answers.length - 1; k >= since; k--) if (w.answers[k]!.at === path) return w.answers[k]!.body;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`the page was not answered at ${path}: ${w.answers.slice(since).map((a) => a.at).join(', ')}`);
}

/** Waits until the page says it drew `view` (body.dataset.rendered). */
export function rendered(page: Page, view: string): Promise<unknown> {
  return page.waitForFunction((v: string) => document.body.dataset.rendered === v, { timeout: WAIT_MS }, view);
}

let loads = 0;
/** Loads the page anew (another query string: a hash alone would not reload it) on `view`, and waits until it is drawn. */
export async function open(page: Page, origin: string, view: string): Promise<void> {
  await page.goto(`${origin}/console/?load=${++loads}#${view}`, { waitUntil: 'load' });
  await rendered(page, view);
}

const AXE = readFileSync(requireHere.resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's serious and critical violations on the page as shown (its source evaluated through DevTools: the page's CSP stays in force). */
export async function axeProblems(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, o: object): Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }> }> } }).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')})`);
  });
}

/** Every request the page made went to `origin` (or was a data: URL). */
export function sameOrigin(t: TapTest, w: Watched, origin: string): void {
  const elsewhere = w.requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
  t.strictSame(elsewhere, [], `every request went to the admin origin (${w.requests.length} requests)`);
}
