// The operator console's page (docs/console.md): six views over the admin listener's
// /console/api/* JSON, routed by the location's hash (#deprecations, #traffic, ...). Plain browser
// JavaScript, no framework, no build step; uPlot (loaded when a view with charts is first shown)
// draws the charts.
//
// - Every text that comes from the data (key ids, owners, contacts, operations, problems) goes
//   through `esc` before it reaches the page: the page never runs what an operator typed. The
//   Content-Security-Policy (no inline script or style) is the second wall.
// - Each chart has its numbers as a table; each table is `<table data-table="NAME">`, each row
//   `<tr data-key="...">`, each cell `<td data-field="FIELD" data-value='JSON'>`: FIELD is the
//   field's name in the endpoint's JSON and data-value the field's value as JSON text
//   (`JSON.parse(td.dataset.value)` gives it back), next to a readable text.
// - A view that has finished rendering sets `document.body.dataset.rendered` to its name and
//   marks `console-rendered:<name>` (performance.mark): tests and the first-render timing wait on it.
// - The admin token (when the listener asks for one) is kept in sessionStorage only: this tab,
//   until it closes. Nothing is requested from any other origin.

const VIEWS = ['deprecations', 'traffic', 'violations', 'keys', 'fleet', 'migration'];
const TITLES = {
  deprecations: 'Deprecation burn-down',
  traffic: 'Traffic and errors',
  violations: 'Contract violations',
  keys: 'Keys',
  fleet: 'Fleet',
  migration: 'Migration',
};
/** Views counted per instance or for the fleet: the scope selector applies to these. */
const SCOPED = new Set(['deprecations', 'traffic', 'violations']);
const TOKEN_KEY = 'petstore-gateway.console.adminToken';
const DAY_MS = 86_400_000;

const state = {
  view: null,
  window: 'hour',
  scope: '',
  keysQuery: { unusedDays: 30, expiringDays: 14 },
  /** uPlot instances of the view on show: { view, u, el }. */
  charts: [],
  /** The keys table's rows as searched by the filter: { text, flags }. */
  keyIndex: [],
  /** Increased by each load: an answer for an older load is dropped. */
  seq: 0,
  /** The burn-down's time axis: up to the sunset, or the days with calls only. */
  reach: 'sunset',
  /** The last answer of each view, drawn again without a request (the burn-down's reach). */
  last: {},
};

// ---------------------------------------------------------------------------------------------
// Text

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text made safe for HTML content and double-quoted attribute values. */
export function esc(value) {
  return String(value).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** Text made safe for a single-quoted attribute value: JSON's double quotes stay as they are (shorter). */
function escSingle(value) {
  return String(value).replace(/[&<>']/g, (c) => ESCAPES[c]);
}

const numberFormat = new Intl.NumberFormat('en');
const NONE = '<span class="none">none</span>';

function num(n) {
  return n === null || n === undefined ? NONE : esc(numberFormat.format(n));
}

/** A latency quantile: the upper bound of its histogram bucket. */
function latency(ms) {
  if (ms === null) return NONE;
  return ms >= 10000 ? '10 s or more' : `&le; ${esc(numberFormat.format(ms))} ms`;
}

function percent(x) {
  if (x === null) return NONE;
  return esc(`${(x * 100).toFixed(x > 0 && x < 0.001 ? 3 : 2)} %`);
}

function ago(ms) {
  const d = Date.now() - ms;
  const abs = Math.abs(d);
  const [n, unit] = abs < 90_000 ? [Math.round(abs / 1000), 's'] : abs < 5_400_000 ? [Math.round(abs / 60_000), 'min'] : abs < 2 * DAY_MS ? [Math.round(abs / 3_600_000), 'h'] : [Math.round(abs / DAY_MS), 'd'];
  return d >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}

/** An ISO 8601 instant as `YYYY-MM-DD HH:MM UTC (3 h ago)`. */
function when(isoText) {
  if (isoText === null || isoText === undefined) return NONE;
  const ms = Date.parse(isoText);
  if (Number.isNaN(ms)) return esc(isoText);
  const text = new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
  return `<time datetime="${esc(isoText)}">${esc(text)} UTC</time> <span class="rel">(${esc(ago(ms))})</span>`;
}

/**
 * An instant as plain text for the large tables (no element: a thousand rows lay out faster):
 * `2026-12-22 (in 23 d)`, or with the time of day `2026-12-22 11:22 (in 3 h)`.
 */
function whenText(isoText, withTime = false) {
  const ms = Date.parse(isoText);
  if (Number.isNaN(ms)) return esc(isoText);
  return esc(`${new Date(ms).toISOString().slice(0, withTime ? 16 : 10).replace('T', ' ')} (${ago(ms)})`);
}

/** A date cell of a large table: its text, or `none` in italics. */
function dateCell(field, value, withTime = false, none = NONE) {
  return cell(field, value, value === null ? none : whenText(value, withTime));
}

/** A flag as a symbol and words: readable without colour. */
function flag(kind, words) {
  const symbols = { warn: '⚠', bad: '✖', good: '✔', info: '⇄', idle: '∅' };
  return `<span class="flag flag-${kind}"><span aria-hidden="true">${symbols[kind]}</span> ${esc(words)}</span>`;
}

// ---------------------------------------------------------------------------------------------
// Tables

/** A cell: the field's JSON value in data-value, `html` (already escaped) as its text. */
function cell(field, value, html, extra = '') {
  return `<td data-field="${esc(field)}" data-value='${escSingle(JSON.stringify(value))}'${extra}>${html}</td>`;
}

/**
 * A table: `columns` are [label, numeric?]; `rows` HTML strings of <tr>. The wrapper scrolls
 * sideways on a narrow screen, and can be focused to do so with the keyboard.
 */
function table(name, caption, columns, rows, empty, attrs = '') {
  const head = columns.map(([label, numeric]) => `<th scope="col"${numeric ? ' class="n"' : ''}>${esc(label)}</th>`).join('');
  const body = rows.length > 0 ? rows.join('') : `<tr class="empty"><td colspan="${columns.length}">${esc(empty)}</td></tr>`;
  return `<div class="table-wrap" tabindex="0" role="region" aria-label="${esc(caption)}"><table data-table="${esc(name)}"${attrs}><caption>${esc(caption)}</caption><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}

function tr(key, cells, cls = '') {
  return `<tr data-key="${esc(key)}"${cls ? ` class="${cls}"` : ''}>${cells.join('')}</tr>`;
}

const N = ' class="n"';

// ---------------------------------------------------------------------------------------------
// Charts (uPlot), readable without colour: each series has its dash pattern and point shape too.

const DASHES = [[], [10, 5], [3, 4], [12, 4, 3, 4], [6, 6], [2, 8]];
const SHAPES = ['circle', 'square', 'triangle', 'diamond', 'cross', 'ex'];
const PALETTE = {
  light: ['#0b5cad', '#b3261e', '#1b7a3a', '#7a3fb0', '#8a5a00', '#00707a', '#c2185b', '#4a4a4a'],
  dark: ['#7db8ff', '#ff8f85', '#7fdc93', '#d2a8ff', '#f2c15c', '#5fd3dc', '#ff85b0', '#cfcfcf'],
};

function theme() {
  const dark = window.matchMedia('(prefers-color-scheme: dark)').matches;
  return dark
    ? { colors: PALETTE.dark, text: '#e6e6e6', grid: 'rgba(255,255,255,0.14)', mark: '#ffb3b3' }
    : { colors: PALETTE.light, text: '#1d1d1f', grid: 'rgba(0,0,0,0.10)', mark: '#9b1c1c' };
}

function style(i) {
  const t = theme();
  return { color: t.colors[i % t.colors.length], dash: DASHES[i % DASHES.length], shape: SHAPES[i % SHAPES.length] };
}

function shapePath(ctx, shape, x, y, r) {
  ctx.beginPath();
  switch (shape) {
    case 'square':
      ctx.rect(x - r, y - r, 2 * r, 2 * r);
      break;
    case 'triangle':
      ctx.moveTo(x, y - r * 1.2);
      ctx.lineTo(x + r * 1.1, y + r);
      ctx.lineTo(x - r * 1.1, y + r);
      ctx.closePath();
      break;
    case 'diamond':
      ctx.moveTo(x, y - r * 1.3);
      ctx.lineTo(x + r * 1.3, y);
      ctx.lineTo(x, y + r * 1.3);
      ctx.lineTo(x - r * 1.3, y);
      ctx.closePath();
      break;
    case 'cross':
      ctx.moveTo(x - r, y);
      ctx.lineTo(x + r, y);
      ctx.moveTo(x, y - r);
      ctx.lineTo(x, y + r);
      break;
    case 'ex':
      ctx.moveTo(x - r, y - r);
      ctx.lineTo(x + r, y + r);
      ctx.moveTo(x + r, y - r);
      ctx.lineTo(x - r, y + r);
      break;
    default:
      ctx.arc(x, y, r, 0, 2 * Math.PI);
  }
}

/** uPlot draw hook: each series' point shapes, a few per series (at most one per 16 px). */
function drawShapes(u) {
  const ctx = u.ctx;
  const ratio = window.devicePixelRatio || 1;
  const xs = u.data[0];
  const every = Math.max(1, Math.ceil((xs.length * 16 * ratio) / Math.max(1, u.bbox.width)));
  ctx.save();
  for (let s = 1; s < u.series.length; s++) {
    if (!u.series[s].show) continue;
    const { color, shape } = style(s - 1);
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 1.5 * ratio;
    ctx.setLineDash([]);
    for (let i = (s - 1) % every; i < xs.length; i += every) {
      const v = u.data[s][i];
      if (v === null || v === undefined) continue;
      shapePath(ctx, shape, u.valToPos(xs[i], 'x', true), u.valToPos(v, 'y', true), 3.5 * ratio);
      if (shape === 'cross' || shape === 'ex') ctx.stroke();
      else ctx.fill();
    }
  }
  ctx.restore();
}

/** uPlot draw hook: labelled vertical lines (the sunset) on the time axis. */
function drawMarks(u, marks) {
  const ctx = u.ctx;
  const ratio = window.devicePixelRatio || 1;
  const { left, top, width, height } = u.bbox;
  ctx.save();
  for (const m of marks) {
    const x = Math.round(u.valToPos(m.at, 'x', true));
    if (x < left - 1 || x > left + width + 1) continue;
    ctx.strokeStyle = theme().mark;
    ctx.fillStyle = theme().mark;
    ctx.lineWidth = 2 * ratio;
    ctx.setLineDash([6 * ratio, 4 * ratio]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    ctx.font = `bold ${12 * ratio}px system-ui, sans-serif`;
    const w = ctx.measureText(m.label).width;
    const tx = x - w - 6 * ratio > left ? x - w - 6 * ratio : x + 6 * ratio;
    ctx.fillText(m.label, tx, top + 14 * ratio);
  }
  ctx.restore();
}

function legend(labels) {
  const items = labels.map((label, i) => {
    const { color, dash, shape } = style(i);
    return `<li><svg width="46" height="14" viewBox="0 0 46 14" aria-hidden="true" focusable="false"><line x1="2" y1="7" x2="44" y2="7" stroke="${esc(color)}" stroke-width="2" stroke-dasharray="${esc(dash.join(' ') || 'none')}"/>${shapeSvg(shape, 23, 7, color)}</svg>${esc(label)}</li>`;
  });
  return `<ul class="legend" aria-label="Legend">${items.join('')}</ul>`;
}

function shapeSvg(shape, x, y, color) {
  const c = esc(color);
  switch (shape) {
    case 'square':
      return `<rect x="${x - 4}" y="${y - 4}" width="8" height="8" fill="${c}"/>`;
    case 'triangle':
      return `<polygon points="${x},${y - 5} ${x + 5},${y + 4} ${x - 5},${y + 4}" fill="${c}"/>`;
    case 'diamond':
      return `<polygon points="${x},${y - 5} ${x + 5},${y} ${x},${y + 5} ${x - 5},${y}" fill="${c}"/>`;
    case 'cross':
      return `<path d="M${x - 4} ${y}H${x + 4}M${x} ${y - 4}V${y + 4}" stroke="${c}" stroke-width="2"/>`;
    case 'ex':
      return `<path d="M${x - 4} ${y - 4}L${x + 4} ${y + 4}M${x + 4} ${y - 4}L${x - 4} ${y + 4}" stroke="${c}" stroke-width="2"/>`;
    default:
      return `<circle cx="${x}" cy="${y}" r="4" fill="${c}"/>`;
  }
}

/**
 * A chart's place: a figure with its caption, the plot, its legend. `chartAt` fills the plot once
 * the HTML is in the page.
 */
function figure(id, caption, labels) {
  return `<figure class="chart"><figcaption>${esc(caption)}</figcaption><div class="plot" data-chart="${esc(id)}" role="img" aria-label="${esc(`${caption}: the numbers are in the table below`)}"></div>${legend(labels)}</figure>`;
}

const DAY_LABEL = new Intl.DateTimeFormat('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });
const MONTH_LABEL = new Intl.DateTimeFormat('en', { month: 'short', year: 'numeric', timeZone: 'UTC' });

/** The time axis' labels, in UTC: hours and minutes within two days, days within a year, else months. */
function timeLabels(u, splits) {
  const span = u.scales.x.max - u.scales.x.min;
  return splits.map((s) => {
    if (span <= 2 * 86400) return new Date(s * 1000).toISOString().slice(11, 16);
    return (span <= 300 * 86400 ? DAY_LABEL : MONTH_LABEL).format(new Date(s * 1000));
  });
}

function chartAt(view, root, id, { x, series, xRange, marks = [], yLabel }) {
  const el = root.querySelector(`[data-chart="${CSS.escape(id)}"]`);
  if (el === null || typeof window.uPlot !== 'function') return;
  const t = theme();
  const axis = { stroke: t.text, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1 } };
  const opts = {
    width: Math.max(280, el.clientWidth || 640),
    height: 260,
    legend: { show: false },
    tzDate: (ts) => window.uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: {
      x: { time: true, ...(xRange ? { range: () => xRange } : {}) },
      y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [{ ...axis, values: timeLabels, space: 70 }, { ...axis, label: yLabel, size: 60 }],
    series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: style(i).color, width: 2, dash: style(i).dash, points: { show: false } }))],
    hooks: { draw: [drawShapes, (u) => drawMarks(u, marks)] },
  };
  const u = new window.uPlot(opts, [x, ...series.map((s) => s.values)], el);
  state.charts.push({ view, u, el });
}

/** Views with charts: uPlot is loaded (once) for these only, beside their data. */
const CHARTED = new Set(['deprecations', 'traffic']);
let uplotLoading;

/** Loads uPlot (console/uplot.js, this origin); resolves either way: a view without it keeps its tables. */
function uplotReady() {
  if (typeof window.uPlot === 'function') return Promise.resolve();
  uplotLoading ??= new Promise((resolve) => {
    const script = document.createElement('script');
    script.src = 'uplot.js';
    script.addEventListener('load', resolve);
    script.addEventListener('error', resolve);
    document.head.append(script);
  });
  return uplotLoading;
}

function dropCharts(view) {
  state.charts = state.charts.filter((c) => {
    if (c.view !== view) return true;
    c.u.destroy();
    return false;
  });
}

// ---------------------------------------------------------------------------------------------
// The views

function scopeLine(v) {
  const scope = v.scope === 'fleet' ? 'the fleet (every instance sharing Redis)' : 'this instance';
  const degraded = v.degraded ? ` ${flag('warn', `not the fleet's: ${v.degraded}`)}` : '';
  return `<p class="meta">Counted by ${esc(scope)} · generated ${when(v.generatedAt)}${degraded}</p>`;
}

const dayStart = (day) => Date.parse(`${day}T00:00:00Z`) / 1000;

function reachButtons() {
  const b = (reach, label) => `<button type="button" data-reach="${reach}" aria-pressed="${state.reach === reach}">${label}</button>`;
  return `<div class="controls" role="group" aria-label="Time axis">${b('sunset', 'Up to the sunset')}${b('seen', 'Days with calls only')}</div>`;
}

function renderDeprecations(v, root) {
  const parts = [scopeLine(v)];
  if (v.operations.length === 0) parts.push('<p>No operation of the interface is deprecated.</p>');
  const plans = [];
  v.operations.forEach((op, k) => {
    const stopped = op.consumers.filter((c) => c.stopped);
    const calling = op.consumers.length - stopped.length;
    const sunsetMs = op.sunset === null ? null : Date.parse(op.sunset);
    const sunset = sunsetMs === null ? 'no sunset date' : `sunset ${when(op.sunset)}`;
    parts.push(`<article class="op" aria-labelledby="op-${k}"><h3 id="op-${k}">${esc(op.operation)}</h3>`);
    parts.push(`<p>${sunset}. ${esc(numberFormat.format(calling))} consumer${calling === 1 ? '' : 's'} still calling; ${esc(numberFormat.format(stopped.length))} stopped (no call for ${esc(v.stoppedAfterDays)} days).</p>`);
    if (op.days.length === 0) {
      parts.push('<p>No call seen.</p>');
    } else {
      const top = op.consumers.filter((c) => !c.stopped).slice(0, 5);
      const labels = ['All consumers', ...top.map((c) => c.consumer)];
      if (sunsetMs !== null) parts.push(reachButtons());
      const drawn = sunsetMs !== null && state.reach === 'sunset';
      parts.push(figure(`burn-${k}`, `Calls of ${op.operation} per day (UTC): all consumers and the top ${top.length}${drawn ? '; the dashed vertical line is the sunset' : ''}`, labels));
      const x = op.days.map(dayStart);
      const end = Math.max(x[x.length - 1] + 86400, sunsetMs === null || state.reach !== 'sunset' ? 0 : sunsetMs / 1000 + 14 * 86400);
      plans.push({
        id: `burn-${k}`,
        x,
        xRange: [x[0] - 86400, end],
        yLabel: 'calls per day',
        series: [{ label: labels[0], values: op.total }, ...top.map((c) => ({ label: c.consumer, values: c.daily }))],
        marks: sunsetMs === null ? [] : [{ at: sunsetMs / 1000, label: `Sunset ${op.sunset.slice(0, 10)}` }],
      });
      const dayRows = op.days.map((day, i) => tr(day, [cell('day', day, esc(day)), cell('total', op.total[i], num(op.total[i]), N)]));
      parts.push(`<details><summary>Calls per day as a table (${esc(numberFormat.format(op.days.length))} days)</summary>${table('deprecation-days', `Calls of ${op.operation} per day, all consumers`, [['Day (UTC)'], ['Calls', true]], dayRows, 'No call.', ` data-operation="${esc(op.operation)}"`)}</details>`);
    }
    const rows = op.consumers.map((c) =>
      tr(c.consumer, [
        cell('consumer', c.consumer, esc(c.consumer)),
        cell('owner', c.owner, c.owner === null ? NONE : esc(c.owner)),
        cell('contact', c.contact, c.contact === null ? NONE : esc(c.contact)),
        cell('calls', c.calls, num(c.calls), N),
        cell('firstSeen', c.firstSeen, when(c.firstSeen)),
        cell('lastSeen', c.lastSeen, when(c.lastSeen)),
        cell('stopped', c.stopped, c.stopped ? flag('good', 'stopped') : flag('warn', 'still calling')),
      ], c.stopped ? 'stopped' : ''),
    );
    const columns = [['Consumer'], ['Owner'], ['Contact'], ['Calls', true], ['First seen'], ['Last seen'], ['Stopped']];
    parts.push(table('deprecation-consumers', `Consumers of ${op.operation}, most calls first: who to tell`, columns, rows, 'No consumer has called it.', ` data-operation="${esc(op.operation)}"`));
    parts.push('</article>');
  });
  root.innerHTML = parts.join('');
  for (const p of plans) chartAt('deprecations', root, p.id, p);
}

function trafficCells(r, name, value) {
  return [
    cell(name, value, value === '-' ? `<span class="none">${esc(name === 'operation' ? 'outside the interface' : 'no key')}</span>` : esc(value)),
    cell('requests', r.requests, num(r.requests), N),
    cell('p50Ms', r.p50Ms, latency(r.p50Ms), N),
    cell('p99Ms', r.p99Ms, latency(r.p99Ms), N),
    cell('client', r.errors.client, num(r.errors.client), N),
    cell('gateway', r.errors.gateway, num(r.errors.gateway), N),
    cell('upstream', r.errors.upstream, num(r.errors.upstream), N),
    cell('rateLimited', r.rateLimited, num(r.rateLimited), N),
  ];
}

const TRAFFIC_COLUMNS = [['Requests', true], ['p50', true], ['p99', true], ['Client errors (4xx)', true], ['Gateway errors (5xx)', true], ['Upstream errors (5xx)', true], ['Rate limited (429)', true]];

function renderTraffic(v, root) {
  const span = v.window === 'hour' ? 'last hour, per minute' : 'last day, per hour';
  const ops = v.series.operations;
  const labels = ops.map((o) => (o.operation === '-' ? 'outside the interface' : o.operation));
  const parts = [scopeLine(v), `<p class="meta">From ${when(v.from)} to ${when(v.to)}.</p>`];
  parts.push('<div class="charts">');
  parts.push(figure('requests', `Requests per operation, ${span}`, labels));
  parts.push(figure('errors', `Errors per operation (client, gateway and upstream), ${span}`, labels));
  parts.push('</div>');
  const seriesRows = v.series.t.map((t, i) =>
    tr(String(t), [
      cell('t', t, when(new Date(t * 1000).toISOString())),
      ...ops.flatMap((o) => [cell('requests', o.requests[i], num(o.requests[i]), `${N} data-operation="${esc(o.operation)}"`), cell('errors', o.errors[i], num(o.errors[i]), `${N} data-operation="${esc(o.operation)}"`)]),
    ]),
  );
  const seriesColumns = [['Start (UTC)'], ...labels.flatMap((l) => [[`${l}: requests`, true], [`${l}: errors`, true]])];
  parts.push(`<details><summary>The charts' numbers as a table (${esc(v.series.t.length)} points)</summary>${table('traffic-series', `Requests and errors per operation, ${span}`, seriesColumns, seriesRows, 'No request.')}</details>`);
  parts.push(table('traffic-operations', `Per operation, ${span.split(',')[0]}`, [['Operation'], ...TRAFFIC_COLUMNS], v.operations.map((r) => tr(r.operation, trafficCells(r, 'operation', r.operation))), 'No request.'));
  const consumerRows = v.consumers.map((r) =>
    tr(r.consumer, [...trafficCells(r, 'consumer', r.consumer), cell('owner', r.owner, r.owner === null ? NONE : esc(r.owner)), cell('contact', r.contact, r.contact === null ? NONE : esc(r.contact))]),
  );
  parts.push(table('traffic-consumers', `Per consumer, ${span.split(',')[0]}`, [['Consumer'], ...TRAFFIC_COLUMNS, ['Owner'], ['Contact']], consumerRows, 'No request.'));
  root.innerHTML = parts.join('');
  const x = v.series.t;
  chartAt('traffic', root, 'requests', { x, yLabel: 'requests', series: ops.map((o, i) => ({ label: labels[i], values: o.requests })) });
  chartAt('traffic', root, 'errors', { x, yLabel: 'errors', series: ops.map((o, i) => ({ label: labels[i], values: o.errors })) });
}

function renderViolations(v, root) {
  const parts = [scopeLine(v), `<p class="summary">${esc(numberFormat.format(v.total))} violation${v.total === 1 ? '' : 's'} counted.</p>`];
  const rules = v.rules.map((r) =>
    tr(`${r.operation} ${r.field} ${r.kind}`, [cell('operation', r.operation, esc(r.operation)), cell('field', r.field, `<code>${esc(r.field)}</code>`), cell('kind', r.kind, esc(r.kind)), cell('count', r.count, num(r.count), N), cell('lastSeen', r.lastSeen, when(r.lastSeen))]),
  );
  parts.push(table('violation-rules', 'Violations by operation and rule, most first', [['Operation'], ['Field'], ['Kind'], ['Count', true], ['Last seen']], rules, 'The upstream has kept to the interface.'));
  const samples = v.samples.map((s) =>
    tr(s.requestId, [
      cell('at', s.at, when(s.at)),
      cell('operation', s.operation, esc(s.operation)),
      cell('requestId', s.requestId, `<code>${esc(s.requestId)}</code>`),
      cell('status', s.status, s.status === null ? NONE : esc(s.status), N),
      cell('problems', s.problems, `<ul class="problems">${s.problems.map((p) => `<li>${esc(p)}</li>`).join('')}</ul>`),
    ]),
  );
  parts.push(table('violation-samples', 'Latest samples, newest first (redacted: paths and rules only)', [['At'], ['Operation'], ['Request id'], ['Upstream status', true], ['Problems']], samples, 'No sample.'));
  root.innerHTML = parts.join('');
}

function keyFlags(k, now) {
  const out = [];
  if (k.expired) out.push(['bad', 'expired']);
  if (k.expiringSoon) out.push(['warn', 'expiring soon']);
  if (k.overlapUntil !== null && Date.parse(k.overlapUntil) > now) out.push(['info', 'in overlap']);
  if (k.unused) out.push(['idle', 'unused']);
  return out;
}

function renderKeys(v, root) {
  const now = Date.now();
  const index = [];
  const count = { expiring: 0, expired: 0, overlap: 0, unused: 0 };
  const rows = v.keys.map((k) => {
    const flags = keyFlags(k, now);
    const names = flags.map(([, w]) => (w === 'expiring soon' ? 'expiring' : w === 'in overlap' ? 'overlap' : w));
    for (const n of names) count[n]++;
    index.push({ text: [k.id, k.source, k.owner ?? '', k.contact ?? '', ...flags.map(([, w]) => w)].join('\n').toLowerCase(), flags: names });
    return tr(k.id, [
      cell('id', k.id, `<code>${esc(k.id)}</code>`),
      cell('source', k.source, esc(k.source)),
      cell('owner', k.owner, k.owner === null ? NONE : esc(k.owner)),
      cell('contact', k.contact, k.contact === null ? NONE : esc(k.contact)),
      dateCell('expires', k.expires, false, '<span class="none">never</span>'),
      dateCell('overlapUntil', k.overlapUntil, true),
      dateCell('lastUsed', k.lastUsed, false, '<span class="none">never seen</span>'),
      cell('flags', { expiringSoon: k.expiringSoon, expired: k.expired, unused: k.unused }, flags.map(([kind, w]) => flag(kind, w)).join(' ') || '<span class="none">ok</span>'),
    ]);
  });
  state.keyIndex = index;
  const summary =
    `${esc(numberFormat.format(v.keys.length))} keys: ${esc(count.expiring)} expiring within ${esc(v.expiringDays)} days, ${esc(count.expired)} expired, ` +
    `${esc(count.overlap)} in a rotation overlap, ${esc(count.unused)} unused for ${esc(v.unusedDays)} days; ${esc(v.revoked.length)} revoked lately.`;
  const columns = [['Id'], ['Source'], ['Owner'], ['Contact'], ['Expires'], ['Previous secret valid until'], ['Last used'], ['Flags']];
  const revoked = v.revoked.map((r) =>
    tr(r.id, [cell('id', r.id, `<code>${esc(r.id)}</code>`), cell('owner', r.owner, r.owner === null ? NONE : esc(r.owner)), cell('contact', r.contact, r.contact === null ? NONE : esc(r.contact)), cell('revokedAt', r.revokedAt, when(r.revokedAt)), cell('by', r.by, r.by === null ? NONE : esc(r.by))]),
  );
  root.innerHTML = [
    scopeLine(v),
    `<p class="summary">${summary}</p>`,
    table('keys', 'Keys in force, by id', columns, rows, 'No key is configured.'),
    table('keys-revoked', 'Keys revoked lately, newest first', [['Id'], ['Owner'], ['Contact'], ['Revoked'], ['By']], revoked, 'No key was revoked.'),
  ].join('');
  filterKeys();
}

/** Shows the keys rows the filter box and the flag selector keep (one pass, no per-row listener). */
function filterKeys() {
  const body = document.querySelector('table[data-table="keys"] tbody');
  if (body === null) return;
  const q = document.getElementById('keys-filter').value.trim().toLowerCase();
  const show = document.getElementById('keys-show').value;
  let shown = 0;
  const rows = body.rows;
  for (let i = 0; i < state.keyIndex.length && i < rows.length; i++) {
    const k = state.keyIndex[i];
    const keep = (q === '' || k.text.includes(q)) && (show === '' || k.flags.includes(show));
    if (keep) shown++;
    if (rows[i].hidden === keep) rows[i].hidden = !keep;
  }
  document.getElementById('keys-count').textContent = `Showing ${numberFormat.format(shown)} of ${numberFormat.format(state.keyIndex.length)} keys`;
}

function renderFleet(v, root) {
  const differs = v.instances.filter((i) => i.policyDiffers);
  const parts = [scopeLine(v), `<p class="summary">${esc(v.instances.length)} instance${v.instances.length === 1 ? '' : 's'}; the policy most run: <code>${v.majorityFingerprint === null ? 'none' : esc(v.majorityFingerprint)}</code>.</p>`];
  if (differs.length > 0) parts.push(`<p class="alert">${flag('warn', `${differs.length} instance${differs.length === 1 ? ' runs' : 's run'} another policy: ${differs.map((i) => i.id).join(', ')}`)}</p>`);
  const rows = v.instances.map((i) =>
    tr(
      i.id,
      [
        cell('id', i.id, `<code>${esc(i.id)}</code>`),
        cell('host', i.host, esc(i.host)),
        cell('version', i.version, esc(i.version)),
        cell('policyFingerprint', i.policyFingerprint, `<code>${esc(i.policyFingerprint)}</code>`),
        cell('ready', i.ready, i.ready ? flag('good', 'ready') : flag('bad', `not ready${i.reason === null ? '' : `: ${i.reason}`}`)),
        cell('lastReload', i.lastReload, i.lastReload === null ? '<span class="none">none since start</span>' : when(i.lastReload)),
        cell('lastHeartbeat', i.lastHeartbeat, when(i.lastHeartbeat)),
        cell('workers', i.workers, num(i.workers), N),
        cell('flags', { policyDiffers: i.policyDiffers, stale: i.stale, self: i.self }, [i.policyDiffers ? flag('warn', 'policy differs') : '', i.stale ? flag('bad', 'stale') : '', i.self ? '<span class="tag">this instance</span>' : ''].filter(Boolean).join(' ') || '<span class="none">ok</span>'),
      ],
      [i.policyDiffers ? 'differs' : '', i.stale ? 'stale' : ''].filter(Boolean).join(' '),
    ),
  );
  const columns = [['Instance'], ['Host'], ['Version'], ['Policy fingerprint'], ['Ready'], ['Last reload'], ['Last heartbeat'], ['Workers', true], ['Flags']];
  parts.push(table('fleet', 'Instances sharing the store', columns, rows, 'No instance has sent a heartbeat (is Redis configured?).'));
  root.innerHTML = parts.join('');
}

function renderMigration(v, root) {
  const parts = [scopeLine(v)];
  if (!v.enabled) {
    parts.push('<p>The migration lane is off: no <code>migration</code> section in the policy.</p>');
  } else {
    const rows = v.operations.map((o) =>
      tr(o.operation, [
        cell('operation', o.operation, esc(o.operation)),
        cell('compared', o.compared, num(o.compared), N),
        cell('equal', o.equal, num(o.equal), N),
        cell('different', o.different, num(o.different), N),
        cell('divergence', o.divergence, percent(o.divergence), N),
        cell('fallbacks', o.fallbacks, num(o.fallbacks), N),
        cell('nextViolations', o.nextViolations, num(o.nextViolations), N),
      ], o.different > 0 ? 'differs' : ''),
    );
    const columns = [['Operation'], ['Compared', true], ['Equal', true], ['Different', true], ['Divergence', true], ['Fallbacks', true], ['Contract violations of next', true]];
    parts.push(table('migration', 'Divergence per operation', columns, rows, 'Nothing compared yet.'));
  }
  root.innerHTML = parts.join('');
}

const RENDER = { deprecations: renderDeprecations, traffic: renderTraffic, violations: renderViolations, keys: renderKeys, fleet: renderFleet, migration: renderMigration };

// ---------------------------------------------------------------------------------------------
// The API and the token

class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

function storedToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function storeToken(token) {
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // No storage (a locked-down browser): the token lives as long as the page.
  }
  memoryToken = token;
  document.getElementById('forget').hidden = token === null;
}
let memoryToken = null;

function queryOf(view) {
  const q = {};
  if (view === 'traffic') q.window = state.window;
  if (SCOPED.has(view) && state.scope !== '') q.scope = state.scope;
  if (view === 'keys') Object.assign(q, state.keysQuery);
  return q;
}

async function api(view) {
  const url = new URL(`api/${view}`, window.location.href);
  for (const [k, v] of Object.entries(queryOf(view))) url.searchParams.set(k, String(v));
  const token = storedToken() ?? memoryToken;
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, cache: 'no-store', credentials: 'same-origin' });
  if (res.ok) return res.json();
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  throw new ApiError(res.status, body && typeof body.message === 'string' ? body.message : res.statusText, res.headers.get('retry-after'));
}

function say(text, problem = false) {
  const status = document.getElementById('status');
  status.textContent = text;
  status.classList.toggle('problem', problem);
}

function askToken(message) {
  const form = document.getElementById('token-form');
  document.getElementById('token-message').textContent = message;
  form.hidden = false;
  document.getElementById('token').focus();
}

function problem(view, err) {
  const root = document.querySelector(`[data-body="${view}"]`);
  document.body.dataset.problem = String(err.status ?? 'network');
  if (err.status === 401) {
    const sent = (storedToken() ?? memoryToken) !== null;
    if (sent) storeToken(null);
    const why = sent ? `The admin token was refused (${err.message}). Enter a valid admin token.` : 'This console needs an admin token: the admin listener has tokens configured. It is kept in this tab only (session storage).';
    say(why, true);
    askToken(why);
    root.innerHTML = '<p class="problem">Needs an admin token: enter it in the form above.</p>';
    return;
  }
  if (err.status === 429) {
    const wait = err.retryAfter ? ` Try again in ${err.retryAfter} s.` : '';
    say(`Too many failed admin authentications from this address.${wait}`, true);
    root.innerHTML = `<p class="problem">${esc(`Refused for now: too many failed admin authentications.${wait}`)}</p>`;
    return;
  }
  const what = err.status ? `${err.status}: ${err.message}` : `the admin listener did not answer (${err.message})`;
  say(`Could not load ${TITLES[view]}: ${what}`, true);
  root.innerHTML = `<p class="problem">${esc(`Could not load this view: ${what}`)}</p>`;
}

// ---------------------------------------------------------------------------------------------
// Routing and loading

/** Draws a view from its last answer, then says it is drawn. */
function draw(view) {
  dropCharts(view);
  const root = document.querySelector(`[data-body="${view}"]`);
  RENDER[view](state.last[view], root);
  // Style and layout now, so that the mark counts them (the paint follows within the frame).
  void root.offsetHeight;
  performance.mark(`console-rendered:${view}`);
  document.body.dataset.rendered = view;
}

async function load(view) {
  const seq = ++state.seq;
  const section = document.getElementById(`view-${view}`);
  delete document.body.dataset.rendered;
  delete document.body.dataset.problem;
  section.setAttribute('aria-busy', 'true');
  try {
    const [data] = await Promise.all([api(view), CHARTED.has(view) ? uplotReady() : undefined]);
    if (seq !== state.seq) return;
    state.last[view] = data;
    draw(view);
    document.getElementById('token-form').hidden = true;
    say(`${TITLES[view]}: updated.`);
  } catch (err) {
    if (seq === state.seq) problem(view, err);
  } finally {
    if (seq === state.seq) section.removeAttribute('aria-busy');
  }
}

function viewOfHash() {
  const h = window.location.hash.slice(1);
  return VIEWS.includes(h) ? h : null;
}

function show(view, focus) {
  state.view = view;
  for (const v of VIEWS) document.getElementById(`view-${v}`).hidden = v !== view;
  for (const a of document.querySelectorAll('nav a')) {
    if (a.getAttribute('href') === `#${view}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${TITLES[view]} · petstore-gateway console`;
  if (focus) document.getElementById(`h-${view}`).focus();
  void load(view);
}

function resizeCharts() {
  for (const c of state.charts) {
    const width = Math.max(280, c.el.clientWidth);
    if (width !== c.u.width) c.u.setSize({ width, height: c.u.height });
  }
}

function start() {
  document.getElementById('forget').hidden = storedToken() === null;
  window.addEventListener('hashchange', () => {
    const v = viewOfHash();
    if (v !== null) show(v, true);
  });
  let resizeTimer;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(resizeCharts, 150);
  });
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => state.view && load(state.view));
  document.getElementById('refresh').addEventListener('click', () => state.view && load(state.view));
  document.getElementById('forget').addEventListener('click', () => {
    storeToken(null);
    if (state.view) void load(state.view);
  });
  document.getElementById('scope').addEventListener('change', (e) => {
    state.scope = e.target.value;
    if (state.view && SCOPED.has(state.view)) void load(state.view);
  });
  document.getElementById('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = document.getElementById('token');
    const token = input.value.trim();
    if (token === '') return;
    input.value = '';
    storeToken(token);
    say('Token set; loading…');
    if (state.view) void load(state.view);
  });
  document.querySelector('#view-traffic .controls').addEventListener('click', (e) => {
    const button = e.target.closest('button[data-window]');
    if (button === null) return;
    state.window = button.dataset.window;
    for (const b of document.querySelectorAll('button[data-window]')) b.setAttribute('aria-pressed', String(b === button));
    void load('traffic');
  });
  document.getElementById('keys-query').addEventListener('submit', (e) => {
    e.preventDefault();
    const unusedDays = Number(document.getElementById('unused-days').value);
    const expiringDays = Number(document.getElementById('expiring-days').value);
    state.keysQuery = { unusedDays, expiringDays };
    void load('keys');
  });
  document.querySelector('[data-body="deprecations"]').addEventListener('click', (e) => {
    const button = e.target.closest('button[data-reach]');
    if (button === null || state.last.deprecations === undefined) return;
    state.reach = button.dataset.reach;
    delete document.body.dataset.rendered;
    draw('deprecations');
    document.querySelector(`button[data-reach="${state.reach}"]`)?.focus();
  });
  let filterTimer;
  document.getElementById('keys-filter').addEventListener('input', () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(filterKeys, 80);
  });
  document.getElementById('keys-show').addEventListener('change', filterKeys);
  show(viewOfHash() ?? 'deprecations', false);
}

start();
