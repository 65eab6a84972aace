/**
 * Opens tracing once per process (the gateway holder calls it; it outlives reloads): the settings
 * from the policy's `telemetry.traces` and the OpenTelemetry environment variables, the exporter
 * and its encoder, and the tracer the exchange is handed.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newRequestId } from '../core/request-id.js';
import { SpanExporter, type ExporterStats } from './exporter.js';
import { encodeJson } from './otlp-json.js';
import { encodeProtobuf } from './otlp-proto.js';
import { traceSettings, type TraceSettings, type TracesInput } from './settings.js';
import type { SpanSource } from './span.js';
import { Tracer, type Sampler } from './tracer.js';

/** What the metrics read: the exporter's counts, and the spans the tail budget did not keep. */
export type TraceStats = ExporterStats & { readonly tailLimited: number };

export interface OpenedTracing {
  readonly tracer: Tracer;
  readonly settings: TraceSettings;
  /** The exporter's counts and the tracer's (`tailLimited`), for the metrics. */
  stats(): TraceStats;
  /** A reload: the ratio and the keep classes of the new section (the rest is checked restart-only). */
  reconfigure(section: TracesInput | undefined): void;
  /** Exports what is queued within `graceMs`, then stops; never rejects. */
  close(graceMs: number): Promise<void>;
}

export interface TracingContext {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly trustedProxies: readonly string[];
  /** The upstream's origin (CLIENT spans' server address); none for the built-in backend (no hop). */
  readonly upstreamOrigin: string | undefined;
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void } | undefined;
}

let packageVersion: string | undefined;

/** This package's version, for `service.version` (read once). */
function version(): string {
  if (packageVersion !== undefined) return packageVersion;
  try {
    const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
    packageVersion = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    packageVersion = 'unknown';
  }
  return packageVersion;
}

/** The sampler and keep classes a reload may change, from the resolved settings. */
function samplerOf(settings: TraceSettings): Sampler {
  return { parentBased: settings.sampler.parentBased, ratio: settings.sampler.ratio };
}

/**
 * Tracing for a process, or undefined when it is off (no endpoint in the policy or the
 * environment, OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none). Problems with the settings are
 * warned once, never with a header's value.
 */
export function openTracing(section: TracesInput | undefined, ctx: TracingContext): OpenedTracing | undefined {
  const { settings, problems } = traceSettings(section, ctx.env, version());
  // One line for all: the operator log throttles warn lines by message, and would keep one.
  if (problems.length > 0) ctx.log?.warn({ problems }, 'telemetry.traces: settings ignored');
  if (settings === undefined) return undefined;
  const resource: Record<string, string> = { 'service.version': version(), 'service.instance.id': `${hostname()}/${process.pid}/${newRequestId().slice(0, 8)}`, ...settings.resource };
  const source: SpanSource = {
    resource: { ...resource, 'telemetry.sdk.name': 'petstore-gateway', 'telemetry.sdk.language': 'nodejs', 'telemetry.sdk.version': version() },
    scope: { name: 'petstore-gateway', version: version() },
  };
  const json = settings.protocol === 'http/json';
  const exporter = new SpanExporter({
    endpoint: settings.endpoint,
    contentType: json ? 'application/json' : 'application/x-protobuf',
    encode: json ? encodeJson : encodeProtobuf,
    source,
    headers: settings.headers,
    maxQueueSpans: settings.batch.maxQueueSpans,
    maxBatchSpans: settings.batch.maxBatchSpans,
    delayMs: settings.batch.delayMs,
    timeoutMs: settings.timeoutMs,
    maxAttempts: settings.retry.maxAttempts,
    initialBackoffMs: settings.retry.initialBackoffMs,
    maxBackoffMs: settings.retry.maxBackoffMs,
    batchTimeoutMs: settings.batch.timeoutMs,
    log: ctx.log,
  });
  const tracer = new Tracer({ sampler: samplerOf(settings), keep: settings.keep, maxTailPerSecond: settings.maxTailPerSecond, trustedProxies: ctx.trustedProxies, upstreamOrigin: ctx.upstreamOrigin, sink: (span) => exporter.enqueue(span) });
  return {
    tracer,
    settings,
    stats: () => ({ ...exporter.stats(), tailLimited: tracer.tailLimited }),
    reconfigure(next) {
      const again = traceSettings(next, ctx.env, version()).settings;
      if (again !== undefined) tracer.configure(samplerOf(again), again.keep, again.maxTailPerSecond);
    },
    close: (graceMs) => exporter.close(graceMs),
  };
}
