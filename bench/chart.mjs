// A grouped horizontal bar chart as an SVG document, with no dependency: one row per target, one
// bar per series (load generator) in each row, and one panel per measure side by side (req/s,
// p99), the rows shared. Readable without colour: the series differ by pattern (solid, hatched,
// dotted, cross-hatched) and every bar carries its value and its series' name; an emphasised row
// (the gateway) has a band behind it, a bold label and darker bars. The <title> and <desc> give
// the chart's text to a screen reader, the <desc> with every figure.
//
//   import { barChartSvg } from './chart.mjs';
//   writeFileSync('x.svg', barChartSvg({ title, desc, series, panels, rows }));

const PEER_FILL = '#7f8fa6';
const EMPHASIS_FILL = '#1d4f91';
const FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"';

/** Text for an SVG document: element content or an attribute value. */
export function escapeXml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

/** A number as the tables write it: grouped thousands, `digits` decimals; n/a when there is none. */
function formatValue(x, digits) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return 'n/a';
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/**
 * Axis ticks from 0 up to `max` (not past it: the longest bar takes the panel's width), in steps
 * of 1, 2, 2.5 or 5 times a power of ten, at most `steps` of them.
 */
export function niceTicks(max, steps = 5) {
  if (!(max > 0) || !Number.isFinite(max)) return [0];
  const pow = 10 ** Math.floor(Math.log10(max / steps));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((x) => Math.floor(max / x + 1e-9) <= steps);
  const n = Math.floor(max / step + 1e-9);
  return Array.from({ length: n + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

/** The fill of a bar: series 0 solid, the others a pattern in the row's colour. */
function patternDefs(prefix, seriesCount) {
  const shapes = [
    undefined,
    (c) => `<path d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke="${c}" stroke-width="1.6"/>`,
    (c) => `<circle cx="3" cy="3" r="1.4" fill="${c}"/>`,
    (c) => `<path d="M0,0 L6,6 M6,0 L0,6" stroke="${c}" stroke-width="1.1"/>`,
  ];
  const out = [];
  for (let i = 1; i < seriesCount; i++) {
    const shape = shapes[((i - 1) % (shapes.length - 1)) + 1];
    for (const [kind, colour] of [['peer', PEER_FILL], ['em', EMPHASIS_FILL]]) {
      out.push(`<pattern id="${prefix}-${kind}-${i}" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#ffffff"/>${shape(colour)}</pattern>`);
    }
  }
  return out;
}

function fillOf(prefix, seriesIndex, emphasis) {
  const colour = emphasis ? EMPHASIS_FILL : PEER_FILL;
  return seriesIndex === 0 ? colour : `url(#${prefix}-${emphasis ? 'em' : 'peer'}-${seriesIndex})`;
}

/**
 * The chart as one SVG document.
 * - `title`: the heading (and <title>); `desc`: a sentence for <desc>, before the figures.
 * - `series`: [{ name }] (e.g. the load generators), one bar each per row and panel; `seriesWord`
 *   what a series is, for the legend ("load generator").
 * - `panels`: [{ title, axis, digits }]: the heading of the panel (say which way is better), the
 *   axis label (the unit), the decimals written on the bars.
 * - `rows`: [{ label, emphasis, values }] where values[panel][series] is a number (or undefined:
 *   no bar, written "n/a").
 * - `note`: a line under the chart (how and when it was measured).
 * - `id`: a prefix for the document's ids (patterns), so several charts can share a page.
 */
export function barChartSvg({ title, desc = '', note = '', series, seriesWord = 'series', panels, rows, id = 'chart', width = 1000 }) {
  const prefix = String(id).replace(/[^A-Za-z0-9_-]/g, '-');
  const labelW = 250;
  const barH = 15;
  const barGap = 2;
  const rowGap = 12;
  const rowH = series.length * (barH + barGap) - barGap + rowGap;
  const panelGap = 36;
  const right = 16;
  const panelW = (width - labelW - right - panelGap * (panels.length - 1)) / panels.length;
  const valueRoom = 128; // the text after the longest bar: "123,456 autocannon"
  const top = 112;
  const plotH = rows.length * rowH;
  // The note wrapped at about 6.2 px a character (11 px sans-serif).
  const noteLines = wrap(note, Math.floor((width - 24) / 6.2));
  const height = top + plotH + 50 + noteLines.length * 15 + (noteLines.length > 0 ? 8 : 0);

  const out = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="${prefix}-title ${prefix}-desc">`,
    `<title id="${prefix}-title">${escapeXml(title)}</title>`,
    `<desc id="${prefix}-desc">${escapeXml(describe({ desc, series, panels, rows }))}</desc>`,
    `<defs>${patternDefs(prefix, series.length).join('')}</defs>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="12" y="28" ${FONT} font-size="18" font-weight="bold" fill="#111111">${escapeXml(title)}</text>`,
  );

  // Legend: a swatch per series (peer colour), then what the band means.
  let lx = 12;
  const ly = 52;
  for (const [i, s] of series.entries()) {
    out.push(`<rect x="${lx}" y="${ly - 11}" width="28" height="13" fill="${fillOf(prefix, i, false)}" stroke="${PEER_FILL}"/>`);
    out.push(`<text x="${lx + 34}" y="${ly}" ${FONT} font-size="13" fill="#111111">${escapeXml(s.name)}</text>`);
    lx += 34 + 8 * String(s.name).length + 28;
  }
  if (rows.some((r) => r.emphasis)) {
    out.push(`<rect x="${lx}" y="${ly - 13}" width="28" height="17" fill="#fff3c4" stroke="#c9a227"/>`);
    out.push(`<rect x="${lx + 4}" y="${ly - 9}" width="20" height="9" fill="${EMPHASIS_FILL}"/>`);
    out.push(`<text x="${lx + 34}" y="${ly}" ${FONT} font-size="13" fill="#111111"><tspan font-weight="bold">the gateway</tspan>: band, bold label, dark bars</text>`);
  }
  out.push(`<text x="12" y="${ly + 22}" ${FONT} font-size="12" fill="#444444">${escapeXml(`One bar per ${seriesWord} in each row, in the legend's order, ending with its figure and the ${seriesWord}'s name.`)}</text>`);

  // Emphasis bands behind the rows, across labels and panels.
  for (const [ri, r] of rows.entries()) {
    if (!r.emphasis) continue;
    out.push(`<rect x="4" y="${top + ri * rowH - rowGap / 2}" width="${width - 8}" height="${rowH}" fill="#fff3c4" stroke="#c9a227" stroke-width="1"/>`);
  }

  // Row labels, right-aligned against the first panel.
  for (const [ri, r] of rows.entries()) {
    const cy = top + ri * rowH + (rowH - rowGap) / 2 + 4;
    out.push(`<text x="${labelW - 10}" y="${cy}" text-anchor="end" ${FONT} font-size="13"${r.emphasis ? ' font-weight="bold"' : ''} fill="#111111">${escapeXml(r.label)}</text>`);
  }

  for (const [pi, p] of panels.entries()) {
    const x0 = labelW + pi * (panelW + panelGap);
    const barMax = panelW - valueRoom;
    const values = rows.flatMap((r) => (r.values[pi] ?? []).filter((v) => typeof v === 'number' && Number.isFinite(v)));
    // About one tick per 70 px, so that "12,500" and its neighbours do not touch.
    const largest = Math.max(0, ...values);
    const ticks = niceTicks(largest, Math.min(5, Math.max(2, Math.floor(barMax / 70))));
    const scale = largest > 0 ? barMax / largest : 0;
    const digits = p.digits ?? 0;
    out.push(`<text x="${x0}" y="${top - 18}" ${FONT} font-size="14" font-weight="bold" fill="#111111">${escapeXml(p.title)}</text>`);
    // Grid and ticks.
    for (const t of ticks) {
      const x = x0 + t * scale;
      out.push(`<line x1="${x}" y1="${top - 8}" x2="${x}" y2="${top + plotH - rowGap / 2}" stroke="#d0d0d0" stroke-width="1"/>`);
      out.push(`<text x="${x}" y="${top + plotH + 8}" text-anchor="middle" ${FONT} font-size="11" fill="#444444">${escapeXml(formatValue(t, Math.min(4, (String(t).split('.')[1] ?? '').length)))}</text>`);
    }
    out.push(`<line x1="${x0}" y1="${top - 8}" x2="${x0}" y2="${top + plotH - rowGap / 2}" stroke="#333333" stroke-width="1"/>`);
    out.push(`<text x="${x0 + barMax / 2}" y="${top + plotH + 30}" text-anchor="middle" ${FONT} font-size="12" fill="#111111">${escapeXml(p.axis)}</text>`);
    // Bars.
    for (const [ri, r] of rows.entries()) {
      for (const [si, s] of series.entries()) {
        const v = r.values[pi]?.[si];
        const y = top + ri * rowH + si * (barH + barGap);
        const has = typeof v === 'number' && Number.isFinite(v);
        const w = has ? Math.max(v * scale, 1) : 0;
        const text = `${formatValue(v, digits)} ${s.name}`;
        if (has) {
          out.push(
            `<rect x="${x0}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${fillOf(prefix, si, r.emphasis)}" stroke="${r.emphasis ? EMPHASIS_FILL : PEER_FILL}" stroke-width="1"><title>${escapeXml(`${r.label}, ${s.name}: ${formatValue(v, digits)} ${p.axis}`)}</title></rect>`,
          );
        }
        out.push(`<text x="${(x0 + w + 5).toFixed(1)}" y="${y + barH - 3}" ${FONT} font-size="11"${r.emphasis ? ' font-weight="bold"' : ''} fill="#111111">${escapeXml(text)}</text>`);
      }
    }
  }
  for (const [i, line] of noteLines.entries()) out.push(`<text x="12" y="${top + plotH + 58 + i * 15}" ${FONT} font-size="11" fill="#444444">${escapeXml(line)}</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/** `text` in lines of at most `max` characters, broken at spaces (a longer word stays whole). */
function wrap(text, max) {
  const lines = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== '' && line.length + 1 + word.length > max) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines;
}

/** Every figure as text: "req/s, autocannon: direct 12,345; nginx 10,000. ..." */
function describe({ desc, series, panels, rows }) {
  const parts = desc === '' ? [] : [desc.trim().replace(/\.?$/, '.')];
  for (const [pi, p] of panels.entries()) {
    for (const [si, s] of series.entries()) {
      parts.push(`${p.title}, ${s.name}: ${rows.map((r) => `${r.label} ${formatValue(r.values[pi]?.[si], p.digits ?? 0)}`).join('; ')}.`);
    }
  }
  return parts.join(' ');
}
