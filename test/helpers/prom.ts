/**
 * Prometheus text exposition parsed with a library (parse-prometheus-text-format), flattened to one
 * sample per line for the tests to look up by name and labels.
 *
 * That parser folds every series of a histogram into one (its histogram grouping ignores labels
 * other than `le`), so the `# TYPE ... histogram` lines are dropped before parsing: the histogram's
 * `_bucket`, `_sum` and `_count` lines are then read as untyped samples, each with its own labels,
 * by the same library code. No sample line is touched.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
type Family = { name: string; type: string; metrics: Array<{ labels?: Record<string, string>; value?: string }> };
const parsePrometheusTextFormat = require('parse-prometheus-text-format') as (text: string) => Family[];

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Scrape {
  readonly samples: readonly Sample[];
  /** The TYPE of every family that declared one (lower case), histograms included. */
  readonly types: ReadonlyMap<string, string>;
}

export function parseExposition(text: string): Scrape {
  const types = new Map<string, string>();
  const kept: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ');
      if (name !== undefined && type !== undefined) types.set(name, type);
      if (type === 'histogram') continue;
    }
    kept.push(line);
  }
  const samples: Sample[] = [];
  for (const family of parsePrometheusTextFormat(kept.join('\n'))) {
    for (const m of family.metrics) {
      if (m.value === undefined) throw new Error(`${family.name}: a sample without value`);
      samples.push({ name: family.name, labels: m.labels ?? {}, value: Number(m.value) });
    }
  }
  return { samples, types };
}

/** The samples of `name` whose labels include `labels`. */
export function find(scrape: Scrape, name: string, labels: Record<string, string> = {}): Sample[] {
  return scrape.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The value of the one sample of `name` with exactly these labels (besides none), or undefined. */
export function value(scrape: Scrape, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.keys(labels).length;
  const hits = find(scrape, name, labels).filter((s) => Object.keys(s.labels).length === want);
  if (hits.length > 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${hits.length} samples`);
  return hits[0]?.value;
}
