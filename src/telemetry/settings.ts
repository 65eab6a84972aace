/**
 * The trace settings in force: the policy file's `telemetry.traces` and the OpenTelemetry
 * environment variables resolved into one value, the file winning field by field, each field
 * absent from both taking `TRACE_DEFAULTS`. The variables are read as the OTel SDKs read them
 * (sdk-environment-variables.md; protocol/exporter.md): an empty variable is unset, an enum is
 * case-insensitive, a value that cannot be parsed or is out of range is ignored with a warning,
 * a `TRACES_` variable wins over its generic one. Pure: the environment is an argument, and the
 * warnings are returned (`problems`), never logged here. A warning never holds a header value,
 * nor an endpoint (either may carry a collector's credentials).
 */
import type { Problem } from '../core/policy.js';
import { KEEP_CLASSES, type KeepClass } from '../core/trace.js';
import { MAX_TIMEOUT_MS, TRACE_DEFAULTS, TRACE_PROTOCOLS, TRACES_SCHEMA, type TraceProtocol, type TracesSection } from './schema.js';

export interface TraceSampler {
  /** Follow a continued trace's sampled flag; only a new trace is decided by `ratio`. */
  readonly parentBased: boolean;
  /** The share of trace ids sampled, 0 to 1. */
  readonly ratio: number;
}

export interface TraceBatch {
  readonly maxQueueSpans: number;
  /** At most `maxQueueSpans`. */
  readonly maxBatchSpans: number;
  readonly delayMs: number;
  /** One batch's export, its retries included. */
  readonly timeoutMs: number;
}

export interface TraceRetry {
  readonly maxAttempts: number;
  /** At most `maxBackoffMs`. */
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
}

export interface TraceSettings {
  /** The URL each batch is POSTed to. */
  readonly endpoint: URL;
  readonly protocol: TraceProtocol;
  /** Sent with each export (lower-case names), from OTEL_EXPORTER_OTLP_(TRACES_)HEADERS only. */
  readonly headers: Readonly<Record<string, string>>;
  /** One export request. */
  readonly timeoutMs: number;
  readonly sampler: TraceSampler;
  readonly keep: readonly KeepClass[];
  /** Traces kept by `keep` alone, at most per second (a token bucket of that size). */
  readonly maxTailPerSecond: number;
  /** The resource attributes; `service.name` always set. */
  readonly resource: Readonly<Record<string, string>>;
  readonly batch: TraceBatch;
  readonly retry: TraceRetry;
}

export type Env = Readonly<Record<string, string | undefined>>;

/**
 * `telemetry.traces` as the loader gives it (`TracesSection`), or as code writes it: the fields the
 * schema defaults may be absent too.
 */
export type TracesInput = Omit<TracesSection, 'keep' | 'retry' | 'maxTailPerSecond'> & {
  readonly keep?: TracesSection['keep'];
  readonly maxTailPerSecond?: TracesSection['maxTailPerSecond'];
  readonly retry?: Partial<TracesSection['retry']>;
};

export interface TraceSettingsResult {
  /** undefined: tracing is off. */
  readonly settings: TraceSettings | undefined;
  /** Warnings for the operator, one line each. */
  readonly problems: string[];
}

const FILE = 'telemetry.traces';
const BATCH = TRACES_SCHEMA.properties.batch.properties;

/**
 * `section`: the policy file's `telemetry.traces` (validated by the loader); `env`: the process
 * environment. `serviceVersion`: the `service.version` resource attribute unless the file or the
 * environment sets one (the CLI passes the package's version).
 */
export function traceSettings(section: TracesInput | undefined, env: Env, serviceVersion?: string): TraceSettingsResult {
  const problems: string[] = [];
  if (sdkDisabled(env, problems) || exporterNone(env, problems)) return { settings: undefined, problems };

  const endpoint = section?.endpoint !== undefined ? httpUrl(`${FILE}.endpoint`, section.endpoint, problems) ?? envEndpoint(env, problems) : envEndpoint(env, problems);
  if (endpoint === undefined) {
    if (section !== undefined) problems.push(`${FILE} is set but no endpoint is (${FILE}.endpoint, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT): tracing is off`);
    return { settings: undefined, problems };
  }
  if (endpoint.pathname === '/') problems.push(`the traces endpoint has no path: spans are sent to / (an OpenTelemetry collector takes them at /v1/traces)`);

  const protocol = section?.protocol ?? envProtocol(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', problems) ?? envProtocol(env, 'OTEL_EXPORTER_OTLP_PROTOCOL', problems) ?? TRACE_DEFAULTS.protocol;
  const timeoutMs =
    section?.timeoutMs ??
    envInteger(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', TRACES_SCHEMA.properties.timeoutMs, 'timeout', problems) ??
    envInteger(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', TRACES_SCHEMA.properties.timeoutMs, 'timeout', problems) ??
    TRACE_DEFAULTS.timeoutMs;
  const headers = new Map<string, string>();
  // Key by key: a TRACES_ header replaces the generic one of its name, the others stay.
  envHeaders(env, 'OTEL_EXPORTER_OTLP_HEADERS', headers, problems);
  envHeaders(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', headers, problems);

  const sampler = section?.sampleRatio !== undefined ? { parentBased: true, ratio: section.sampleRatio } : envSampler(env, problems);
  const settings: TraceSettings = {
    endpoint,
    protocol,
    headers: Object.freeze(Object.fromEntries(headers)),
    timeoutMs,
    sampler: Object.freeze(sampler),
    keep: Object.freeze([...(section?.keep ?? KEEP_CLASSES)]),
    maxTailPerSecond: section?.maxTailPerSecond ?? 100,
    resource: Object.freeze(resourceOf(section, env, serviceVersion, problems)),
    batch: Object.freeze(batchOf(section, env, problems)),
    retry: Object.freeze(retryOf(section, problems)),
  };
  return { settings: Object.freeze(settings), problems };
}

/**
 * The cross-field rules of `telemetry.traces` the schema cannot say, for the loader (src/config/load.ts):
 * `check` and a reload refuse a file that breaks them. What depends on the environment as well
 * (a batch bigger than the queue the environment sets) is `traceSettings`'s warning instead.
 */
export function tracesSectionProblems(section: TracesInput, path = `$.${FILE}`): Problem[] {
  // Read defensively: the loader runs this beside the schema's errors, on what the file holds.
  const num = (o: unknown, key: string): number | undefined => {
    const v = o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[key] : undefined;
    return typeof v === 'number' ? v : undefined;
  };
  const problems: Problem[] = [];
  if (typeof section.endpoint === 'string' && !URL.canParse(section.endpoint)) problems.push({ path: `${path}.endpoint`, message: 'is not a valid URL' });
  const [batch, queue] = [num(section.batch, 'maxBatchSpans'), num(section.batch, 'maxQueueSpans')];
  if (batch !== undefined && queue !== undefined && batch > queue) {
    problems.push({ path: `${path}.batch.maxBatchSpans`, message: `must be at most batch.maxQueueSpans (${queue}): a batch is taken from the queue` });
  }
  const [initial, max] = [num(section.retry, 'initialBackoffMs'), num(section.retry, 'maxBackoffMs')];
  if (initial !== undefined && max !== undefined && initial > max) problems.push({ path: `${path}.retry.initialBackoffMs`, message: `must be at most retry.maxBackoffMs (${max})` });
  return problems;
}

/** An environment variable's value, trimmed; undefined when unset or empty (the spec reads empty as unset). */
function read(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** A value quoted for a warning, cut short: only for variables that hold no secret. */
function shown(v: string): string {
  return JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}...` : v);
}

/** OTEL_SDK_DISABLED, a Boolean of the spec: only "true" (any case) is true. */
function sdkDisabled(env: Env, problems: string[]): boolean {
  const v = read(env, 'OTEL_SDK_DISABLED');
  if (v === undefined) return false;
  if (v.toLowerCase() === 'true') return true;
  if (v.toLowerCase() !== 'false') problems.push(`OTEL_SDK_DISABLED=${shown(v)} is neither true nor false: read as false`);
  return false;
}

/** OTEL_TRACES_EXPORTER: `none` turns tracing off; `otlp` is the one exporter the gateway has. */
function exporterNone(env: Env, problems: string[]): boolean {
  const v = read(env, 'OTEL_TRACES_EXPORTER');
  if (v === undefined) return false;
  const names = v.split(',').map((n) => n.trim().toLowerCase()).filter((n) => n !== '');
  if (names.includes('none')) {
    if (names.length > 1) problems.push('OTEL_TRACES_EXPORTER names none beside other exporters: tracing is off');
    return true;
  }
  const others = names.filter((n) => n !== 'otlp');
  if (others.length > 0) problems.push(`OTEL_TRACES_EXPORTER: ${others.map(shown).join(', ')} not supported (otlp only): ignored`);
  return false;
}

/** An http(s) URL without credentials, or undefined with the reason (never the URL itself). */
function httpUrl(source: string, text: string, problems: string[]): URL | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    problems.push(`${source} is not a valid URL: ignored`);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`${source} is not an http: or https: URL (OTLP/HTTP only; grpc is not supported): ignored`);
    return undefined;
  }
  if (url.username !== '' || url.password !== '') {
    problems.push(`${source} holds a user:password@ part: ignored (a collector's credentials go in OTEL_EXPORTER_OTLP_HEADERS)`);
    return undefined;
  }
  return url;
}

/**
 * The endpoint from the environment (exporter.md, "Endpoint URLs for OTLP/HTTP"): the per-signal
 * variable as it is (the URL parser gives a URL without a path the root path `/`), else the
 * generic one as a base URL with `v1/traces` relative to it: one slash between, whether or not
 * the base ends with one.
 */
function envEndpoint(env: Env, problems: string[]): URL | undefined {
  const signal = read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const own = signal === undefined ? undefined : httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', signal, problems);
  if (own !== undefined) return own;
  const base = read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const url = base === undefined ? undefined : httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', base, problems);
  if (url === undefined) return undefined;
  url.pathname = (url.pathname.endsWith('/') ? url.pathname : url.pathname + '/') + 'v1/traces';
  return url;
}

function envProtocol(env: Env, name: string, problems: string[]): TraceProtocol | undefined {
  const v = read(env, name);
  if (v === undefined) return undefined;
  const lower = v.toLowerCase();
  const known = TRACE_PROTOCOLS.find((p) => p === lower);
  if (known !== undefined) return known;
  problems.push(
    lower === 'grpc'
      ? `${name}=grpc is not supported (OTLP/HTTP only: http/protobuf or http/json): ignored`
      : `${name}=${shown(v)} is not http/protobuf or http/json: ignored`,
  );
  return undefined;
}

/**
 * An integer variable within the schema's bounds of its field, else undefined (with a warning
 * when set). `timeout`: 0 is the spec's "indefinite", read as the longest accepted.
 */
function envInteger(env: Env, name: string, bounds: { readonly minimum: number; readonly maximum: number }, kind: 'count' | 'timeout', problems: string[]): number | undefined {
  const v = read(env, name);
  if (v === undefined) return undefined;
  if (!/^[0-9]+$/.test(v)) {
    problems.push(`${name}=${shown(v)} is not a non-negative whole number: ignored`);
    return undefined;
  }
  const n = Number(v);
  if (kind === 'timeout' && n === 0) return MAX_TIMEOUT_MS;
  if (n < bounds.minimum || n > bounds.maximum) {
    problems.push(`${name}=${v} is outside ${bounds.minimum}..${bounds.maximum}: ignored`);
    return undefined;
  }
  return n;
}

/** RFC 9110 token: a header name. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a header value may hold (visible ASCII, space and tab), once decoded. */
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;
/** Headers the exporter's HTTP request sets itself (framing, connection, encoding). */
const EXPORTER_HEADERS = new Set(['host', 'content-length', 'content-type', 'content-encoding', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect']);

/**
 * OTEL_EXPORTER_OTLP_(TRACES_)HEADERS (exporter.md, "Specifying headers via environment
 * variables"): `name=value` pairs separated by commas, each value percent-decoded and trimmed.
 * A malformed pair is skipped with a warning that names its place and, when it is a valid one,
 * its name: never its value, which is often an API key.
 */
function envHeaders(env: Env, name: string, into: Map<string, string>, problems: string[]): void {
  const v = read(env, name);
  if (v === undefined) return;
  for (const [i, pair] of v.split(',').entries()) {
    if (pair.trim() === '') continue;
    const where = `${name}: pair ${i + 1}`;
    const eq = pair.indexOf('=');
    const key = pair.slice(0, eq).trim().toLowerCase();
    if (eq < 0) {
      problems.push(`${where} has no "=" (name=value): ignored`);
      continue;
    }
    if (!TOKEN.test(key)) {
      problems.push(`${where}: its name is not a valid header name: ignored`);
      continue;
    }
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(eq + 1).trim()).trim();
    } catch {
      problems.push(`${where} (${key}): its value is not valid percent-encoding: ignored`);
      continue;
    }
    if (!FIELD_VALUE.test(value)) problems.push(`${where} (${key}): its value holds a control or non-ASCII character: ignored`);
    else if (EXPORTER_HEADERS.has(key)) problems.push(`${where}: ${key} is the exporter's to set: ignored`);
    else into.set(key, value);
  }
}

const ATTRIBUTE_LIMITS = {
  count: TRACES_SCHEMA.properties.resourceAttributes.maxProperties,
  key: TRACES_SCHEMA.properties.resourceAttributes.propertyNames.maxLength,
  value: TRACES_SCHEMA.properties.resourceAttributes.additionalProperties.maxLength,
};

/**
 * OTEL_RESOURCE_ATTRIBUTES (resource/sdk.md): `key=value` pairs, both percent-decoded. On any
 * error the whole variable is discarded, as the spec says, with a warning naming the pair.
 */
function envResource(env: Env, problems: string[]): Map<string, string> {
  const out = new Map<string, string>();
  const v = read(env, 'OTEL_RESOURCE_ATTRIBUTES');
  if (v === undefined) return out;
  const pairs = v.split(',');
  for (const [i, pair] of pairs.entries()) {
    if (pair.trim() === '') continue;
    const eq = pair.indexOf('=');
    let key = '';
    let value = '';
    try {
      key = decodeURIComponent(pair.slice(0, eq < 0 ? 0 : eq).trim());
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      key = '';
    }
    if (eq < 0 || key === '' || key.length > ATTRIBUTE_LIMITS.key || value.length > ATTRIBUTE_LIMITS.value) {
      problems.push(`OTEL_RESOURCE_ATTRIBUTES: pair ${i + 1} is not a percent-encoded key=value (key 1..${ATTRIBUTE_LIMITS.key}, value at most ${ATTRIBUTE_LIMITS.value} characters): the variable is ignored`);
      return new Map();
    }
    out.set(key, value);
  }
  if (out.size > ATTRIBUTE_LIMITS.count) {
    problems.push(`OTEL_RESOURCE_ATTRIBUTES holds more than ${ATTRIBUTE_LIMITS.count} attributes: the variable is ignored`);
    return new Map();
  }
  return out;
}

/**
 * The resource: OTEL_RESOURCE_ATTRIBUTES, the file's resourceAttributes over it key by key, and
 * service.name from the file's serviceName, its resourceAttributes, OTEL_SERVICE_NAME (which wins
 * over OTEL_RESOURCE_ATTRIBUTES, as the spec says), OTEL_RESOURCE_ATTRIBUTES, else the default.
 */
function resourceOf(section: TracesInput | undefined, env: Env, serviceVersion: string | undefined, problems: string[]): Record<string, string> {
  const attrs = envResource(env, problems);
  const fromEnv = attrs.get('service.name');
  for (const [k, v] of Object.entries(section?.resourceAttributes ?? {})) attrs.set(k, v);
  const fromFile = section?.serviceName ?? section?.resourceAttributes?.['service.name'];
  let otelName = read(env, 'OTEL_SERVICE_NAME');
  if (fromFile === undefined && otelName !== undefined && otelName.length > ATTRIBUTE_LIMITS.key) {
    problems.push(`OTEL_SERVICE_NAME is longer than ${ATTRIBUTE_LIMITS.key} characters: ignored`);
    otelName = undefined;
  }
  attrs.set('service.name', fromFile ?? otelName ?? fromEnv ?? TRACE_DEFAULTS.serviceName);
  if (serviceVersion !== undefined && !attrs.has('service.version')) attrs.set('service.version', serviceVersion);
  return Object.fromEntries(attrs);
}

type Sourced = { readonly value: number; readonly from: string };

/** A batch field: the file's, else its variable's, else the default; with where it came from, for a warning. */
function batchField(fromFile: number | undefined, field: keyof typeof BATCH, env: Env, name: string, kind: 'count' | 'timeout', problems: string[]): Sourced | undefined {
  if (fromFile !== undefined) return { value: fromFile, from: `${FILE}.batch.${field}` };
  const v = envInteger(env, name, BATCH[field], kind, problems);
  return v === undefined ? undefined : { value: v, from: name };
}

function batchOf(section: TracesInput | undefined, env: Env, problems: string[]): TraceBatch {
  const b = section?.batch;
  const D = TRACE_DEFAULTS.batch;
  const queue = batchField(b?.maxQueueSpans, 'maxQueueSpans', env, 'OTEL_BSP_MAX_QUEUE_SIZE', 'count', problems)?.value ?? D.maxQueueSpans;
  const batch = batchField(b?.maxBatchSpans, 'maxBatchSpans', env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 'count', problems);
  let maxBatchSpans = batch?.value ?? Math.min(D.maxBatchSpans, queue);
  if (maxBatchSpans > queue) {
    // The spec: the batch size must be at most the queue size. Set apart, each was valid.
    problems.push(`the batch size ${maxBatchSpans} (${batch?.from ?? 'default'}) is more than the queue, ${queue} spans: batches of ${queue}`);
    maxBatchSpans = queue;
  }
  return {
    maxQueueSpans: queue,
    maxBatchSpans,
    delayMs: batchField(b?.delayMs, 'delayMs', env, 'OTEL_BSP_SCHEDULE_DELAY', 'count', problems)?.value ?? D.delayMs,
    timeoutMs: batchField(b?.timeoutMs, 'timeoutMs', env, 'OTEL_BSP_EXPORT_TIMEOUT', 'timeout', problems)?.value ?? D.timeoutMs,
  };
}

function retryOf(section: TracesInput | undefined, problems: string[]): TraceRetry {
  const r = section?.retry;
  const D = TRACE_DEFAULTS.retry;
  const maxBackoffMs = r?.maxBackoffMs ?? D.maxBackoffMs;
  let initialBackoffMs = r?.initialBackoffMs ?? D.initialBackoffMs;
  if (initialBackoffMs > maxBackoffMs) {
    problems.push(`${FILE}.retry.initialBackoffMs ${initialBackoffMs} is more than retry.maxBackoffMs: ${maxBackoffMs}`);
    initialBackoffMs = maxBackoffMs;
  }
  return { maxAttempts: r?.maxAttempts ?? D.maxAttempts, initialBackoffMs, maxBackoffMs };
}

/**
 * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (sdk-environment-variables.md, "General SDK
 * Configuration"); unset: parentbased_always_on. A sampler the gateway has not (jaeger_remote,
 * xray) is ignored with a warning, as an unknown enum value is.
 */
function envSampler(env: Env, problems: string[]): TraceSampler {
  const v = read(env, 'OTEL_TRACES_SAMPLER');
  if (v === undefined) return TRACE_DEFAULTS.sampler;
  switch (v.toLowerCase()) {
    case 'always_on':
      return { parentBased: false, ratio: 1 };
    case 'always_off':
      return { parentBased: false, ratio: 0 };
    case 'traceidratio':
      return { parentBased: false, ratio: samplerRatio(env, problems) };
    case 'parentbased_always_on':
      return { parentBased: true, ratio: 1 };
    case 'parentbased_always_off':
      return { parentBased: true, ratio: 0 };
    case 'parentbased_traceidratio':
      return { parentBased: true, ratio: samplerRatio(env, problems) };
    default:
      problems.push(
        `OTEL_TRACES_SAMPLER=${shown(v)} is not supported (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio): read as parentbased_always_on`,
      );
      return TRACE_DEFAULTS.sampler;
  }
}

/** OTEL_TRACES_SAMPLER_ARG for the ratio samplers: a decimal in [0, 1]; unset or invalid, 1.0 (the spec's default). */
function samplerRatio(env: Env, problems: string[]): number {
  const v = read(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (v === undefined) return 1;
  const n = /^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$/.test(v) ? Number(v) : NaN;
  if (n >= 0 && n <= 1) return n;
  problems.push(`OTEL_TRACES_SAMPLER_ARG=${shown(v)} is not a ratio from 0 to 1: read as 1.0`);
  return 1;
}
