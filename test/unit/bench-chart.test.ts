import t from 'tap';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../helpers/root.js';

interface Row {
  label: string;
  emphasis?: boolean;
  values: Array<Array<number | undefined>>;
}
interface ChartOptions {
  title: string;
  desc?: string;
  note?: string;
  series: Array<{ name: string }>;
  seriesWord?: string;
  panels: Array<{ title: string; axis: string; digits?: number }>;
  rows: Row[];
  id?: string;
}

// bench/ is plain JavaScript outside the compiled tree: imported by URL, its exports typed here.
const chart = (await import(pathToFileURL(join(PROJECT_ROOT, 'bench', 'chart.mjs')).href)) as {
  barChartSvg: (o: ChartOptions) => string;
  escapeXml: (s: string) => string;
  niceTicks: (max: number, steps?: number) => number[];
};

/**
 * Whether `svg` is well-formed as far as a chart needs: every element closed in order, attributes
 * quoted, no raw `<` or stray `&` in text. Returns the problems (empty when none) and the element
 * names in document order.
 */
function wellFormed(svg: string): { problems: string[]; elements: string[] } {
  const problems: string[] = [];
  const elements: string[] = [];
  const stack: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;
  let i = 0;
  while (i < svg.length) {
    const lt = svg.indexOf('<', i);
    const text = svg.slice(i, lt === -1 ? svg.length : lt);
    if (/&(?!(amp|lt|gt|quot|#\d+);)/.test(text)) problems.push(`a bare & in ${JSON.stringify(text.slice(0, 60))}`);
    if (lt === -1) break;
    tag.lastIndex = lt;
    const m = tag.exec(svg);
    if (m === null) {
      problems.push(`not a tag at ${lt}: ${JSON.stringify(svg.slice(lt, lt + 40))}`);
      break;
    }
    const [whole, closing, name, attrs, selfClosing] = m as unknown as [string, string, string, string, string];
    if (/&(?!(amp|lt|gt|quot|#\d+);)/.test(attrs)) problems.push(`a bare & in the attributes of <${name}>`);
    if (closing === '/') {
      const open = stack.pop();
      if (open !== name) problems.push(`</${name}> closes <${open}>`);
    } else {
      elements.push(name);
      if (selfClosing !== '/') stack.push(name);
    }
    i = lt + whole.length;
  }
  if (stack.length > 0) problems.push(`not closed: ${stack.join(', ')}`);
  return { problems, elements };
}

const SERIES = [{ name: 'autocannon' }, { name: 'wrk' }];
const PANELS = [
  { title: 'req/s (higher is better)', axis: 'requests per second', digits: 0 },
  { title: 'p99 latency (lower is better)', axis: 'milliseconds', digits: 1 },
];
const ROWS: Row[] = [
  { label: 'direct', values: [[20_000, 18_500], [2.25, 3]] },
  { label: 'Tom & Jerry <proxy>', values: [[12_345, 11_000], [4.5, 5.5]] },
  { label: 'floor', values: [[15_000, 14_000], [3.1, 3.3]] },
  { label: 'gateway, Node 24', emphasis: true, values: [[13_500, 12_750], [4, 4.4]] },
];

t.test('a well-formed SVG document with a title, a description and its figures', async (t) => {
  const svg = chart.barChartSvg({ title: 'GET /v1/pets & friends', desc: 'a test', note: 'measured <today>', series: SERIES, panels: PANELS, rows: ROWS, id: 'list' });
  const { problems, elements } = wellFormed(svg);
  t.strictSame(problems, [], 'every element closed, every & and < escaped');
  t.equal(elements[0], 'svg', 'the root is <svg>');
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" [^>]*role="img" aria-labelledby="list-title list-desc"/);
  t.equal(elements[1], 'title', 'the first child is <title>');
  t.match(svg, '<title id="list-title">GET /v1/pets &amp; friends</title>');
  t.match(svg, /<desc id="list-desc">a test\. req\/s \(higher is better\), autocannon: direct 20,000; Tom &amp; Jerry &lt;proxy&gt; 12,345;/, 'the description lists the figures');
  t.match(svg, 'measured &lt;today&gt;', 'the note is escaped');
});

t.test('one bar per target, series and panel, each with its figure and its series written on it', async (t) => {
  const svg = chart.barChartSvg({ title: 'x', series: SERIES, panels: PANELS, rows: ROWS });
  const bars = svg.match(/<rect [^>]*><title>[^<]*<\/title><\/rect>/g) ?? [];
  t.equal(bars.length, ROWS.length * SERIES.length * PANELS.length, 'rows × series × panels bars');
  for (const r of ROWS) {
    const label = chart.escapeXml(r.label);
    t.equal(bars.filter((b) => b.includes(`<title>${label}, `)).length, SERIES.length * PANELS.length, `${r.label}: a bar per series and panel`);
    t.ok(svg.includes(`>${label}</text>`), `${r.label}: its row label`);
  }
  for (const text of ['20,000 autocannon', '18,500 wrk', '12,345 autocannon', '2.3 autocannon', '3.0 wrk', '4.4 wrk']) t.ok(svg.includes(`>${text}</text>`), `the bar reads ${text}`);
  // The bars of one panel are as long as their figures, on one scale.
  const width = (who: string) => Number(/width="([\d.]+)"/.exec(bars.find((b) => b.includes(`<title>${who}: `))!)![1]);
  t.ok(Math.abs(width('direct, autocannon') / width('floor, autocannon') - 20_000 / 15_000) < 0.01, 'bar lengths in proportion to the figures');
  t.ok(width('direct, wrk') < width('direct, autocannon'), 'the smaller figure, the shorter bar');
});

t.test('names with & and < are escaped everywhere; the emphasised row is bold; a missing figure is n/a', async (t) => {
  const rows: Row[] = [
    { label: 'a <b> & "c"', values: [[10, undefined], [1, 2]] },
    { label: 'gateway', emphasis: true, values: [[20, 30], [1, 2]] },
  ];
  const svg = chart.barChartSvg({ title: '<script>alert(1)</script>', series: [{ name: 'x&y' }, { name: 'wrk' }], panels: PANELS, rows });
  t.strictSame(wellFormed(svg).problems, []);
  t.notOk(svg.includes('<script>'), 'no markup from the title');
  t.notOk(svg.includes('<b>'), 'no markup from a label');
  t.ok(svg.includes('a &lt;b&gt; &amp; &quot;c&quot;'), 'the label escaped');
  t.ok(svg.includes('10 x&amp;y'), "the series' name escaped on its bar");
  t.ok(svg.includes('>n/a wrk</text>'), 'a missing figure reads n/a');
  t.equal((svg.match(/<rect [^>]*><title>/g) ?? []).length, 7, 'no bar for the missing figure');
  t.match(svg, /font-weight="bold" fill="#111111">gateway<\/text>/, "the emphasised row's label is bold");
  t.notMatch(svg, /font-weight="bold" fill="#111111">a &lt;b/, 'the other is not');
  t.match(svg, /<pattern id="chart-peer-1"/, 'the second series is a pattern, not a colour only');
});

t.test('axis ticks start at 0 and stop within one step of the largest figure', async (t) => {
  t.strictSame(chart.niceTicks(12_281, 3), [0, 5000, 10_000]);
  t.strictSame(chart.niceTicks(402, 3), [0, 200, 400]);
  t.strictSame(chart.niceTicks(9, 5), [0, 2, 4, 6, 8]);
  t.strictSame(chart.niceTicks(0.9), [0, 0.2, 0.4, 0.6, 0.8]);
  t.strictSame(chart.niceTicks(0), [0]);
  for (const [max, steps] of [[1, 5], [7, 5], [99.5, 5], [123_456, 5], [0.031, 5], [56_816, 3], [17.9, 2]] as const) {
    const ticks = chart.niceTicks(max, steps);
    const step = ticks[1]! - ticks[0]!;
    const last = ticks[ticks.length - 1]!;
    t.ok(ticks[0] === 0 && last <= max && last + step > max && ticks.length - 1 <= steps, `${max} in at most ${steps} steps: ${ticks.join(', ')}`);
  }
});
