/**
 * The policy file's `telemetry:` section: where the gateway's spans go and how they are sampled
 * (`traces`). Its JSON Schema and the type derived from it. Only `keep` and `retry` carry schema
 * defaults: every other field has an OpenTelemetry environment variable, and a default filled in
 * by the loader would hide it, so settings.ts applies the file, then the environment, then
 * `TRACE_DEFAULTS`. No `headers` here: they hold a collector's API key, which belongs in
 * OTEL_EXPORTER_OTLP_HEADERS, not in a file that is read, copied and checked in.
 */
import type { SchemaType } from '../core/options.js';
import { KEEP_CLASSES } from '../core/trace.js';

export const TRACE_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type TraceProtocol = (typeof TRACE_PROTOCOLS)[number];

/**
 * What a field set neither in the file nor in the environment takes. The OTel SDK's defaults
 * (sdk-environment-variables.md, protocol/exporter.md) except `batch.delayMs`: the SDK's 5 s holds
 * spans longer than a gateway's operator waits for a trace to show.
 */
export const TRACE_DEFAULTS = {
  protocol: 'http/protobuf',
  timeoutMs: 10000,
  /** parentbased_always_on, OTEL_TRACES_SAMPLER's default. */
  sampler: { parentBased: true, ratio: 1 },
  serviceName: 'petstore-gateway',
  batch: { maxQueueSpans: 2048, maxBatchSpans: 512, delayMs: 1000, timeoutMs: 30000 },
  retry: { maxAttempts: 5, initialBackoffMs: 500, maxBackoffMs: 5000 },
} as const;

/** The longest timeout accepted; an OTel timeout of 0 ("indefinite") reads as this. */
export const MAX_TIMEOUT_MS = 300000;

const ENDPOINT_PATTERN = '^https?://[^\\s/?#@]+([/?][^\\s#]*)?$';

export const TRACES_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  description:
    'OpenTelemetry traces (docs/operations.md, "Traces"): a SERVER span per client request and a CLIENT span per upstream attempt, exported over OTLP/HTTP off the request path. Each field absent here is read from its OTEL_* environment variable, then its default; headers only from OTEL_EXPORTER_OTLP_HEADERS / OTEL_EXPORTER_OTLP_TRACES_HEADERS. Tracing is on when an endpoint is set here or in the environment, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. sampleRatio, keep and maxTailPerSecond take effect on a reload; the rest on a restart.',
  properties: {
    endpoint: {
      type: 'string',
      maxLength: 2048,
      pattern: ENDPOINT_PATTERN,
      description:
        'The collector\'s OTLP/HTTP traces URL, used as written (with its path, usually /v1/traces), e.g. http://collector:4318/v1/traces. No user:password@ part. Absent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT with v1/traces appended; none of the three: tracing off.',
    },
    protocol: {
      type: 'string',
      enum: TRACE_PROTOCOLS,
      description: `The OTLP encoding: http/protobuf or http/json (grpc is not supported). Absent: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else ${TRACE_DEFAULTS.protocol}.`,
    },
    timeoutMs: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_TIMEOUT_MS,
      description: `How long one export request may take before it is abandoned (and retried). Absent: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT, else ${TRACE_DEFAULTS.timeoutMs}.`,
    },
    sampleRatio: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      description:
        'The head sampling ratio, parent-based (parentbased_traceidratio): a request continuing a trace from a trusted proxy (server.trustedProxies) follows its parent\'s sampled flag; a new trace is sampled when its trace id falls under the ratio, and a trace continued from anyone else on a fresh draw (a client cannot pick a trace id that is always sampled). The `keep` classes are kept whatever it says. Absent: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else 1.0 (parentbased_always_on).',
    },
    keep: {
      type: 'array',
      items: { type: 'string', enum: KEEP_CLASSES },
      uniqueItems: true,
      default: KEEP_CLASSES,
      description:
        'The outcomes whose traces are kept even when the head decision said not sampled, decided when the answer is done: error (a 5xx answer, or an upstream attempt that failed, even one a retry mended), contract_violation (an answer that broke the interface), deprecated (a deprecated operation called), rate_limited. [] keeps only what the ratio samples.',
    },
    maxTailPerSecond: {
      type: 'integer',
      minimum: 0,
      maximum: 100000,
      default: 100,
      description:
        'The most traces per second, per process, kept by `keep` alone (the head said not sampled): a client whose every request is a keep class (a flood of refused requests) cannot fill the export queue and crowd out the rest. Past it, they are counted (petstore_gateway_trace_spans_total{outcome="tail_limited"}) and not exported. 0 keeps none that way.',
    },
    serviceName: {
      type: 'string',
      minLength: 1,
      maxLength: 256,
      description: `The service.name resource attribute, as the APM names the gateway. Absent: service.name in resourceAttributes, then OTEL_SERVICE_NAME, then service.name in OTEL_RESOURCE_ATTRIBUTES, else ${TRACE_DEFAULTS.serviceName}.`,
    },
    resourceAttributes: {
      type: 'object',
      maxProperties: 64,
      propertyNames: { type: 'string', minLength: 1, maxLength: 256 },
      additionalProperties: { type: 'string', maxLength: 4096 },
      description:
        'More resource attributes (string values), e.g. deployment.environment.name: prod. Merged over OTEL_RESOURCE_ATTRIBUTES key by key, this file winning.',
    },
    batch: {
      type: 'object',
      additionalProperties: false,
      description: 'The batch span processor: finished spans wait in a bounded queue and are exported in batches; a span that finds the queue full is dropped and counted, never waited for.',
      properties: {
        maxQueueSpans: {
          type: 'integer',
          minimum: 1,
          maximum: 1000000,
          description: `Most spans waiting for export. Absent: OTEL_BSP_MAX_QUEUE_SIZE, else ${TRACE_DEFAULTS.batch.maxQueueSpans}.`,
        },
        maxBatchSpans: {
          type: 'integer',
          minimum: 1,
          maximum: 100000,
          description: `Most spans in one export request; at most maxQueueSpans. Absent: OTEL_BSP_MAX_EXPORT_BATCH_SIZE, else ${TRACE_DEFAULTS.batch.maxBatchSpans} (or maxQueueSpans when smaller).`,
        },
        delayMs: {
          type: 'integer',
          minimum: 1,
          maximum: 600000,
          description: `The longest a span waits before its batch is sent (a full batch goes at once). Absent: OTEL_BSP_SCHEDULE_DELAY, else ${TRACE_DEFAULTS.batch.delayMs}.`,
        },
        timeoutMs: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_TIMEOUT_MS,
          description: `How long the export of one batch may take, its retries included, before the batch is dropped and counted. Absent: OTEL_BSP_EXPORT_TIMEOUT, else ${TRACE_DEFAULTS.batch.timeoutMs}.`,
        },
      },
    },
    retry: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Retries of a batch the collector did not take for a transient reason (a retryable status, or no answer): exponential backoff with jitter, all within batch.timeoutMs.',
      properties: {
        maxAttempts: { type: 'integer', minimum: 1, maximum: 10, default: TRACE_DEFAULTS.retry.maxAttempts, description: 'Attempts per batch, the first included; 1: no retry.' },
        initialBackoffMs: { type: 'integer', minimum: 1, maximum: 60000, default: TRACE_DEFAULTS.retry.initialBackoffMs, description: 'The wait before the first retry; doubled for each next one. At most maxBackoffMs.' },
        maxBackoffMs: { type: 'integer', minimum: 1, maximum: MAX_TIMEOUT_MS, default: TRACE_DEFAULTS.retry.maxBackoffMs, description: 'The longest wait between two attempts.' },
      },
    },
  },
} as const;

export const TELEMETRY_SECTION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  description: 'What the gateway tells an OpenTelemetry collector. Absent: nothing, unless the OTEL_* environment names an endpoint (docs/operations.md, "Traces").',
  properties: {
    traces: TRACES_SCHEMA,
  },
} as const;

export type TelemetrySection = SchemaType<typeof TELEMETRY_SECTION_SCHEMA>;
export type TracesSection = SchemaType<typeof TRACES_SCHEMA>;
