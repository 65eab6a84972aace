/**
 * `telemetry.traces` and the OpenTelemetry environment resolved into one `TraceSettings`: the file
 * winning field by field, `TRACES_` variables over generic ones, the OTel rules for endpoints,
 * headers, samplers and numbers, the switches that turn tracing off, and warnings that never hold
 * a header value. The section's schema and cross-field rules go through the real loader.
 */
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import type { Problem } from '../../src/core/policy.js';
import { KEEP_CLASSES } from '../../src/core/trace.js';
import { MAX_TIMEOUT_MS, type TracesSection } from '../../src/telemetry/schema.js';
import { traceSettings, type Env, type TracesInput, type TraceSettings } from '../../src/telemetry/settings.js';

const ENDPOINT = 'http://collector:4318/v1/traces';

/** Settings that must be on; fails the test (and returns a stand-in) when they are off. */
function on(section: TracesInput | undefined, env: Env, serviceVersion?: string): { s: TraceSettings; problems: string[] } {
  const r = traceSettings(section, env, serviceVersion);
  if (r.settings === undefined) throw new Error(`tracing is off: ${r.problems.join('; ')}`);
  return { s: r.settings, problems: r.problems };
}

const FILE: TracesInput = { endpoint: ENDPOINT };

t.test('off: no endpoint anywhere', async (t) => {
  t.strictSame(traceSettings(undefined, {}), { settings: undefined, problems: [] }, 'no section, no environment: off, silently');
  t.strictSame(traceSettings(undefined, { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'bogus' }), { settings: undefined, problems: [] }, 'other variables alone do not turn it on, nor are they read');
  const r = traceSettings({ sampleRatio: 0.5 }, {});
  t.equal(r.settings, undefined, 'a section without an endpoint: off');
  t.match(r.problems, [/no endpoint is .*tracing is off/], 'and said');
  t.equal(traceSettings(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: '' }).settings, undefined, 'an empty variable is unset');
  t.equal(traceSettings(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: '   ' }).settings, undefined, 'so is one of blanks');
});

t.test('the defaults, with an endpoint only', async (t) => {
  const { s, problems } = on(FILE, {});
  t.strictSame(problems, []);
  t.equal(s.endpoint.href, ENDPOINT);
  t.strictSame(
    { ...s, endpoint: s.endpoint.href },
    {
      endpoint: ENDPOINT,
      protocol: 'http/protobuf',
      headers: {},
      timeoutMs: 10000,
      sampler: { parentBased: true, ratio: 1 },
      keep: [...KEEP_CLASSES],
      maxTailPerSecond: 100,
      resource: { 'service.name': 'petstore-gateway' },
      batch: { maxQueueSpans: 2048, maxBatchSpans: 512, delayMs: 1000, timeoutMs: 30000 },
      retry: { maxAttempts: 5, initialBackoffMs: 500, maxBackoffMs: 5000 },
    },
  );
  t.ok(Object.isFrozen(s) && Object.isFrozen(s.headers) && Object.isFrozen(s.batch) && Object.isFrozen(s.keep) && Object.isFrozen(s.resource), 'frozen');
  t.strictSame(on(FILE, {}, '1.2.3').s.resource, { 'service.name': 'petstore-gateway', 'service.version': '1.2.3' }, 'the version the caller passes');
});

t.test('off switches win over the file', async (t) => {
  for (const v of ['true', 'TRUE', 'True', ' true ']) {
    t.strictSame(traceSettings(FILE, { OTEL_SDK_DISABLED: v }), { settings: undefined, problems: [] }, `OTEL_SDK_DISABLED=${JSON.stringify(v)}`);
  }
  t.strictSame(on(FILE, { OTEL_SDK_DISABLED: 'false' }).problems, [], 'false: on');
  t.strictSame(on(FILE, { OTEL_SDK_DISABLED: '' }).problems, [], 'empty: on');
  t.match(on(FILE, { OTEL_SDK_DISABLED: '1' }).problems, [/^OTEL_SDK_DISABLED="1" is neither true nor false: read as false$/], 'only "true" is true (the spec)');
  t.strictSame(traceSettings(FILE, { OTEL_TRACES_EXPORTER: 'none' }), { settings: undefined, problems: [] }, 'OTEL_TRACES_EXPORTER=none');
  t.strictSame(traceSettings(undefined, { OTEL_TRACES_EXPORTER: 'NONE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).settings, undefined, 'any case, env endpoint too');
  const mixed = traceSettings(FILE, { OTEL_TRACES_EXPORTER: 'otlp, none' });
  t.equal(mixed.settings, undefined, 'none beside otlp: off');
  t.match(mixed.problems, [/none beside other exporters/]);
  t.strictSame(on(FILE, { OTEL_TRACES_EXPORTER: 'otlp' }).problems, [], 'otlp: on');
  t.match(on(FILE, { OTEL_TRACES_EXPORTER: 'zipkin,console' }).problems, [/"zipkin", "console" not supported \(otlp only\): ignored/], 'other exporters: ignored, said');
});

t.test('endpoint: the file as written; TRACES_ as is; the generic one with v1/traces', async (t) => {
  const cases: Array<[Env, string]> = [
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }, 'http://c:4318/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c.example/custom/path?tenant=a' }, 'https://c.example/custom/path?tenant=a'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'http://c:4318/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }, 'http://c:4318/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/otlp' }, 'http://c:4318/otlp/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/otlp/' }, 'http://c:4318/otlp/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c:4318/v1/traces' }, 'https://c:4318/v1/traces/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://own:4318/t' }, 'http://own:4318/t'],
  ];
  for (const [env, href] of cases) {
    const { s, problems } = on(undefined, env);
    t.equal(s.endpoint.href, href, JSON.stringify(env));
    t.strictSame(problems, [], 'no warning');
  }
  const root = on(undefined, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318' });
  t.equal(root.s.endpoint.href, 'http://c:4318/', 'a per-signal URL without a path gets / (the spec), not v1/traces');
  t.match(root.problems, [/has no path: spans are sent to \//], 'and a warning');
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://env:1/x', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:2' }).s.endpoint.href, ENDPOINT, 'the file wins');
});

t.test('endpoint: an unusable variable is ignored, and never shown', async (t) => {
  const creds = on(undefined, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://alice:s3cr3t@c:4318/v1/traces', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318' });
  t.equal(creds.s.endpoint.href, 'http://base:4318/v1/traces', 'user:password@: falls through to the generic one');
  t.match(creds.problems, [/^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT holds a user:password@ part: ignored/]);
  t.notMatch(creds.problems.join('\n'), /s3cr3t|alice/, 'the credentials are not repeated');
  const bad: Array<[string, RegExp]> = [
    ['not a url', /is not a valid URL: ignored/],
    ['collector:4318', /is not an http: or https: URL \(OTLP\/HTTP only; grpc is not supported\)/],
    ['grpc://c:4317', /is not an http: or https: URL/],
  ];
  for (const [value, message] of bad) {
    const r = traceSettings(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: value });
    t.equal(r.settings, undefined, `${value}: off`);
    t.match(r.problems, [message]);
    t.notOk(r.problems.join('\n').includes(value), 'the value is not shown');
  }
});

t.test('protocol: file, TRACES_, generic, default; grpc is named and ignored', async (t) => {
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).s.protocol, 'http/json');
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_PROTOCOL: 'HTTP/JSON' }).s.protocol, 'http/json', 'an enum is case-insensitive');
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).s.protocol, 'http/protobuf', 'TRACES_ wins');
  const file = on({ ...FILE, protocol: 'http/json' }, { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' });
  t.equal(file.s.protocol, 'http/json', 'the file wins');
  t.strictSame(file.problems, [], 'and a variable it hides is not read');
  const grpc = on(FILE, { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
  t.equal(grpc.s.protocol, 'http/json', 'an unsupported TRACES_ value is ignored: the generic one applies');
  t.strictSame(grpc.problems, ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc is not supported (OTLP/HTTP only: http/protobuf or http/json): ignored']);
  const other = on(FILE, { OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' });
  t.equal(other.s.protocol, 'http/protobuf', 'else the default');
  t.match(other.problems, [/OTEL_EXPORTER_OTLP_PROTOCOL="thrift" is not http\/protobuf or http\/json: ignored/]);
});

t.test('headers: pairs, percent-decoded, trimmed, TRACES_ over generic by name', async (t) => {
  const { s, problems } = on(FILE, {
    OTEL_EXPORTER_OTLP_HEADERS: ' Api-Key = abc123 , x-tenant=team%20a%2Cb,authorization=Basic dXNlcjpwYXNz==, x-scope=all',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-scope=traces,x-extra=%3D%25',
  });
  t.strictSame(problems, []);
  t.strictSame(s.headers, { 'api-key': 'abc123', 'x-tenant': 'team a,b', authorization: 'Basic dXNlcjpwYXNz==', 'x-scope': 'traces', 'x-extra': '=%' });
  t.strictSame(on(FILE, { OTEL_EXPORTER_OTLP_HEADERS: 'a=1,,b=2,' }).s.headers, { a: '1', b: '2' }, 'empty members are skipped silently');
  t.strictSame(on(FILE, { OTEL_EXPORTER_OTLP_HEADERS: '__proto__=x' }).s.headers, JSON.parse('{"__proto__":"x"}'), '__proto__ is a name like another');
});

t.test('headers: a malformed pair is skipped, and its value is never in the warning', async (t) => {
  const secrets = ['s3cretNoEquals', 's3cretBadName', 's3cret%E0%A4%A', 's3cret%0Aline', 's3cret-ct', 'caf%C3%A9s3cret'];
  const env = {
    OTEL_EXPORTER_OTLP_HEADERS: `good=yes,${secrets[0]},bad name=${secrets[1]},x-enc=${secrets[2]},x-ctl=${secrets[3]},content-type=${secrets[4]},x-utf=${secrets[5]}`,
  };
  const { s, problems } = on(FILE, env);
  t.strictSame(s.headers, { good: 'yes' }, 'the good pair stays');
  t.strictSame(problems, [
    'OTEL_EXPORTER_OTLP_HEADERS: pair 2 has no "=" (name=value): ignored',
    'OTEL_EXPORTER_OTLP_HEADERS: pair 3: its name is not a valid header name: ignored',
    'OTEL_EXPORTER_OTLP_HEADERS: pair 4 (x-enc): its value is not valid percent-encoding: ignored',
    'OTEL_EXPORTER_OTLP_HEADERS: pair 5 (x-ctl): its value holds a control or non-ASCII character: ignored',
    "OTEL_EXPORTER_OTLP_HEADERS: pair 6: content-type is the exporter's to set: ignored",
    'OTEL_EXPORTER_OTLP_HEADERS: pair 7 (x-utf): its value holds a control or non-ASCII character: ignored',
  ]);
  const all = problems.join('\n');
  for (const secret of secrets) t.notOk(all.includes('s3cret') || all.includes(secret), `${secret} is not shown`);
  const r = traceSettings(undefined, { OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'onlyAS3cretToken' });
  t.equal(r.settings, undefined, 'headers alone do not turn tracing on');
  t.strictSame(r.problems, [], 'nor are they read then');
});

t.test('timeouts: file, TRACES_, generic; 0 is the longest; a bad value is ignored', async (t) => {
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_TIMEOUT: '2500' }).s.timeoutMs, 2500);
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_TIMEOUT: '2500', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '700' }).s.timeoutMs, 700, 'TRACES_ wins');
  t.equal(on({ ...FILE, timeoutMs: 42 }, { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '700' }).s.timeoutMs, 42, 'the file wins');
  t.equal(on(FILE, { OTEL_EXPORTER_OTLP_TIMEOUT: '0' }).s.timeoutMs, MAX_TIMEOUT_MS, '0 ("indefinite") is the longest accepted');
  for (const v of ['-1', '1.5', 'ten', '1e3']) {
    const r = on(FILE, { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: v, OTEL_EXPORTER_OTLP_TIMEOUT: '900' });
    t.equal(r.s.timeoutMs, 900, `${v}: ignored, the generic one applies`);
    t.strictSame(r.problems, [`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=${JSON.stringify(v)} is not a non-negative whole number: ignored`]);
  }
  const big = on(FILE, { OTEL_EXPORTER_OTLP_TIMEOUT: String(MAX_TIMEOUT_MS + 1) });
  t.equal(big.s.timeoutMs, 10000, 'out of range: the default');
  t.strictSame(big.problems, [`OTEL_EXPORTER_OTLP_TIMEOUT=${MAX_TIMEOUT_MS + 1} is outside 1..${MAX_TIMEOUT_MS}: ignored`]);
});

t.test('samplers: every OTEL_TRACES_SAMPLER, its argument, and the file', async (t) => {
  const cases: Array<[Env, { parentBased: boolean; ratio: number }]> = [
    [{}, { parentBased: true, ratio: 1 }],
    [{ OTEL_TRACES_SAMPLER: 'always_on' }, { parentBased: false, ratio: 1 }],
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, { parentBased: false, ratio: 0 }],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }, { parentBased: false, ratio: 0.25 }],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio' }, { parentBased: false, ratio: 1 }],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_on' }, { parentBased: true, ratio: 1 }],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, { parentBased: true, ratio: 0 }],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '.5' }, { parentBased: true, ratio: 0.5 }],
    [{ OTEL_TRACES_SAMPLER: 'PARENTBASED_TRACEIDRATIO', OTEL_TRACES_SAMPLER_ARG: '0' }, { parentBased: true, ratio: 0 }],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '1e-2' }, { parentBased: true, ratio: 0.01 }],
    [{ OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: 'whatever' }, { parentBased: false, ratio: 1 }],
    [{ OTEL_TRACES_SAMPLER_ARG: '0.1' }, { parentBased: true, ratio: 1 }],
  ];
  for (const [env, sampler] of cases) {
    const { s, problems } = on(FILE, env);
    t.strictSame(s.sampler, sampler, JSON.stringify(env));
    t.strictSame(problems, [], 'no warning');
  }
  for (const arg of ['1.5', '-0.1', 'half', '0x1', 'NaN', 'Infinity']) {
    const r = on(FILE, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg });
    t.strictSame(r.s.sampler, { parentBased: false, ratio: 1 }, `ARG ${arg}: the spec's default, 1.0`);
    t.strictSame(r.problems, [`OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(arg)} is not a ratio from 0 to 1: read as 1.0`]);
  }
  for (const name of ['jaeger_remote', 'parentbased_jaeger_remote', 'xray', 'sometimes']) {
    const r = on(FILE, { OTEL_TRACES_SAMPLER: name });
    t.strictSame(r.s.sampler, { parentBased: true, ratio: 1 }, `${name}: parentbased_always_on`);
    t.match(r.problems, [new RegExp(`^OTEL_TRACES_SAMPLER="${name}" is not supported .*: read as parentbased_always_on$`)]);
  }
  const file = on({ ...FILE, sampleRatio: 0.1 }, { OTEL_TRACES_SAMPLER: 'always_off', OTEL_TRACES_SAMPLER_ARG: 'bad' });
  t.strictSame(file.s.sampler, { parentBased: true, ratio: 0.1 }, 'sampleRatio is parentbased_traceidratio, and wins');
  t.strictSame(file.problems, [], 'the variables it hides are not read');
  t.strictSame(on({ ...FILE, sampleRatio: 0 }, {}).s.sampler, { parentBased: true, ratio: 0 }, 'a ratio of 0 is a value, not an absence');
});

t.test('keep: the file, else every class', async (t) => {
  t.strictSame(on({ ...FILE, keep: ['error'] }, {}).s.keep, ['error']);
  t.strictSame(on({ ...FILE, keep: [] }, {}).s.keep, [], '[] keeps none');
  t.strictSame(on(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).s.keep, [...KEEP_CLASSES]);
});

t.test('resource: service.name precedence, attributes merged by key, percent-decoded', async (t) => {
  const envAttrs = 'service.name=from-attrs,deployment.environment.name=staging,team=a%2Cb%3Dc,k%20sp=v';
  t.strictSame(on(FILE, { OTEL_RESOURCE_ATTRIBUTES: envAttrs }).s.resource, {
    'service.name': 'from-attrs',
    'deployment.environment.name': 'staging',
    team: 'a,b=c',
    'k sp': 'v',
  });
  t.equal(on(FILE, { OTEL_RESOURCE_ATTRIBUTES: envAttrs, OTEL_SERVICE_NAME: 'from-env' }).s.resource['service.name'], 'from-env', 'OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES');
  const file = on({ ...FILE, resourceAttributes: { 'service.name': 'file-attr', 'deployment.environment.name': 'prod' } }, { OTEL_RESOURCE_ATTRIBUTES: envAttrs, OTEL_SERVICE_NAME: 'from-env' }, '9.9.9');
  t.strictSame(
    file.s.resource,
    { 'service.name': 'file-attr', 'deployment.environment.name': 'prod', team: 'a,b=c', 'k sp': 'v', 'service.version': '9.9.9' },
    "the file's attributes over the environment's, key by key; its service.name over OTEL_SERVICE_NAME",
  );
  t.equal(on({ ...FILE, serviceName: 'named', resourceAttributes: { 'service.name': 'file-attr' } }, { OTEL_SERVICE_NAME: 'from-env' }).s.resource['service.name'], 'named', 'serviceName first');
  t.equal(on(FILE, { OTEL_RESOURCE_ATTRIBUTES: 'service.version=2.0.0' }, '1.0.0').s.resource['service.version'], '2.0.0', 'a service.version set wins over the caller\'s');
  for (const bad of ['a=1,novalue', 'a=1,=x', 'a=%E0%A4%A', `a=${'v'.repeat(4097)}`, Array.from({ length: 65 }, (_, i) => `k${i}=v`).join(',')]) {
    const r = on(FILE, { OTEL_RESOURCE_ATTRIBUTES: bad });
    t.strictSame(r.s.resource, { 'service.name': 'petstore-gateway' }, `${bad.slice(0, 30)}: the whole variable is discarded (the spec)`);
    t.match(r.problems, [/^OTEL_RESOURCE_ATTRIBUTES.*the variable is ignored$/]);
  }
});

t.test('batch: file, variables, default; the batch never larger than the queue', async (t) => {
  const env = { OTEL_BSP_MAX_QUEUE_SIZE: '4096', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '1024', OTEL_BSP_SCHEDULE_DELAY: '250', OTEL_BSP_EXPORT_TIMEOUT: '15000' };
  t.strictSame(on(FILE, env).s.batch, { maxQueueSpans: 4096, maxBatchSpans: 1024, delayMs: 250, timeoutMs: 15000 });
  t.strictSame(on({ ...FILE, batch: { maxQueueSpans: 100, delayMs: 5 } }, env).s.batch, { maxQueueSpans: 100, maxBatchSpans: 100, delayMs: 5, timeoutMs: 15000 }, 'field by field');
  const clamp = on({ ...FILE, batch: { maxQueueSpans: 100 } }, { OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '1024' });
  t.equal(clamp.s.batch.maxBatchSpans, 100, 'a batch larger than the queue is cut to it');
  t.strictSame(clamp.problems, ['the batch size 1024 (OTEL_BSP_MAX_EXPORT_BATCH_SIZE) is more than the queue, 100 spans: batches of 100']);
  const quiet = on({ ...FILE, batch: { maxQueueSpans: 100 } }, {});
  t.equal(quiet.s.batch.maxBatchSpans, 100, 'the default batch follows a smaller queue');
  t.strictSame(quiet.problems, [], 'silently');
  t.equal(on(FILE, { OTEL_BSP_EXPORT_TIMEOUT: '0' }).s.batch.timeoutMs, MAX_TIMEOUT_MS, 'a timeout of 0 is the longest');
  const zero = on(FILE, { OTEL_BSP_MAX_QUEUE_SIZE: '0', OTEL_BSP_SCHEDULE_DELAY: '0' });
  t.strictSame(zero.s.batch, { maxQueueSpans: 2048, maxBatchSpans: 512, delayMs: 1000, timeoutMs: 30000 }, 'a queue or delay of 0 is out of range: the defaults');
  t.strictSame(zero.problems, ['OTEL_BSP_MAX_QUEUE_SIZE=0 is outside 1..1000000: ignored', 'OTEL_BSP_SCHEDULE_DELAY=0 is outside 1..600000: ignored']);
});

t.test('retry: the file, else the defaults; a first backoff above the longest is cut', async (t) => {
  t.strictSame(on({ ...FILE, retry: { maxAttempts: 1, initialBackoffMs: 10, maxBackoffMs: 20 } }, {}).s.retry, { maxAttempts: 1, initialBackoffMs: 10, maxBackoffMs: 20 });
  const cut = on({ ...FILE, retry: { maxAttempts: 3, initialBackoffMs: 9000, maxBackoffMs: 5000 } }, {});
  t.equal(cut.s.retry.initialBackoffMs, 5000);
  t.match(cut.problems, [/retry\.initialBackoffMs 9000 is more than retry\.maxBackoffMs: 5000/]);
});

t.test('pure: the environment object is only read', async (t) => {
  const env = Object.freeze({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'a=b' });
  const a = on(undefined, env);
  const b = on(undefined, env);
  t.not(a.s.endpoint, b.s.endpoint, 'a URL of its own each time');
  t.equal(a.s.endpoint.href, b.s.endpoint.href);
});

// ---------------------------------------------------------------------------------------------
// Through the loader: the schema and the cross-field rules of `telemetry.traces`
// ---------------------------------------------------------------------------------------------

function load(traces: string): { ok: true; traces: TracesSection | undefined } | { ok: false; problems: readonly Problem[] } {
  const r = parsePolicy(`telemetry:\n  traces: ${traces}\n`, { env: {} });
  return r.ok ? { ok: true, traces: r.config.telemetry?.traces } : r;
}

t.test('loader: a full section is accepted and resolves as written', async (t) => {
  const text = `{ endpoint: "${ENDPOINT}", protocol: http/json, timeoutMs: 2000, sampleRatio: 0.25, keep: [error, rate_limited], serviceName: gw, resourceAttributes: { deployment.environment.name: prod }, batch: { maxQueueSpans: 1000, maxBatchSpans: 100, delayMs: 200, timeoutMs: 9000 }, retry: { maxAttempts: 2, initialBackoffMs: 100, maxBackoffMs: 1000 } }`;
  const r = load(text);
  if (!r.ok) return void t.fail('rejected', { problems: r.problems });
  t.ok(Object.isFrozen(r.traces), 'frozen with the config');
  const { s, problems } = on(r.traces, { OTEL_SERVICE_NAME: 'env', OTEL_TRACES_SAMPLER: 'always_off', OTEL_BSP_MAX_QUEUE_SIZE: '5' });
  t.strictSame(problems, []);
  t.strictSame(
    { ...s, endpoint: s.endpoint.href },
    {
      endpoint: ENDPOINT,
      protocol: 'http/json',
      headers: {},
      timeoutMs: 2000,
      sampler: { parentBased: true, ratio: 0.25 },
      keep: ['error', 'rate_limited'],
      maxTailPerSecond: 100,
      resource: { 'deployment.environment.name': 'prod', 'service.name': 'gw' },
      batch: { maxQueueSpans: 1000, maxBatchSpans: 100, delayMs: 200, timeoutMs: 9000 },
      retry: { maxAttempts: 2, initialBackoffMs: 100, maxBackoffMs: 1000 },
    },
  );
});

t.test('loader: defaults filled only where no variable could say otherwise', async (t) => {
  const r = load(`{ endpoint: "${ENDPOINT}" }`);
  t.strictSame(r, { ok: true, traces: { endpoint: ENDPOINT, keep: [...KEEP_CLASSES], maxTailPerSecond: 100, retry: { maxAttempts: 5, initialBackoffMs: 500, maxBackoffMs: 5000 } } });
  t.strictSame(load('{}'), { ok: true, traces: { keep: [...KEEP_CLASSES], maxTailPerSecond: 100, retry: { maxAttempts: 5, initialBackoffMs: 500, maxBackoffMs: 5000 } } }, 'an empty section is valid');
  const none = parsePolicy('{}', { env: {} });
  t.equal(none.ok && 'telemetry' in none.config, false, 'no section: none in the config');
  t.strictSame(parsePolicy('telemetry: {}\n', { env: {} }).ok, true, 'telemetry without traces');
});

t.test('loader: what the schema refuses, each with its path', async (t) => {
  const URL_MESSAGE = "must be an http(s) URL without user:password@ or fragment, such as http://collector:4318/v1/traces (a collector's API key goes in OTEL_EXPORTER_OTLP_HEADERS)";
  const P = '$.telemetry.traces';
  const cases: Array<[string, Problem[]]> = [
    ['{ endpoint: "http://user:pass@c:4318/v1/traces" }', [{ path: `${P}.endpoint`, message: URL_MESSAGE }]],
    ['{ endpoint: "ftp://c/v1/traces" }', [{ path: `${P}.endpoint`, message: URL_MESSAGE }]],
    ['{ endpoint: "http://c:4318/v1/traces#frag" }', [{ path: `${P}.endpoint`, message: URL_MESSAGE }]],
    ['{ endpoint: "c:4318" }', [{ path: `${P}.endpoint`, message: URL_MESSAGE }]],
    ['{ endpoint: "http://[::1/v1/traces" }', [{ path: `${P}.endpoint`, message: 'is not a valid URL' }]],
    ['{ protocol: grpc }', [{ path: `${P}.protocol`, message: 'must be one of: http/protobuf, http/json' }]],
    ['{ sampleRatio: 1.5 }', [{ path: `${P}.sampleRatio`, message: 'must be <= 1' }]],
    ['{ sampleRatio: -0.1 }', [{ path: `${P}.sampleRatio`, message: 'must be >= 0' }]],
    ['{ keep: [errors] }', [{ path: `${P}.keep[0]`, message: 'must be one of: error, contract_violation, deprecated, rate_limited' }]],
    ['{ keep: [error, error] }', [{ path: `${P}.keep`, message: 'must NOT have duplicate items (items ## 1 and 0 are identical)' }]],
    ['{ headers: { api-key: x } }', [{ path: `${P}.headers`, message: "unknown property 'headers'" }]],
    ['{ serviceName: "" }', [{ path: `${P}.serviceName`, message: 'must not be empty' }]],
    ['{ resourceAttributes: { n: 1 } }', [{ path: `${P}.resourceAttributes.n`, message: 'must be string' }]],
    ['{ timeoutMs: 0 }', [{ path: `${P}.timeoutMs`, message: 'must be >= 1' }]],
    ['{ batch: { maxQueueSpans: 0 } }', [{ path: `${P}.batch.maxQueueSpans`, message: 'must be >= 1' }]],
    ['{ batch: { maxBatchSpans: 1.5 } }', [{ path: `${P}.batch.maxBatchSpans`, message: 'must be integer' }]],
    ['{ batch: { size: 1 } }', [{ path: `${P}.batch.size`, message: "unknown property 'size'" }]],
    ['{ retry: { maxAttempts: 11 } }', [{ path: `${P}.retry.maxAttempts`, message: 'must be <= 10' }]],
    ['5', [{ path: P, message: 'must be object' }]],
  ];
  for (const [text, problems] of cases) t.strictSame(load(text), { ok: false, problems }, text);
  t.strictSame(parsePolicy('telemetry: { logs: {} }\n', { env: {} }), { ok: false, problems: [{ path: '$.telemetry.logs', message: "unknown property 'logs'" }] });
});

t.test('loader: the cross-field rules, beside a schema error too', async (t) => {
  const P = '$.telemetry.traces';
  t.strictSame(load('{ batch: { maxQueueSpans: 100, maxBatchSpans: 101 } }'), {
    ok: false,
    problems: [{ path: `${P}.batch.maxBatchSpans`, message: 'must be at most batch.maxQueueSpans (100): a batch is taken from the queue' }],
  });
  t.equal(load('{ batch: { maxQueueSpans: 100, maxBatchSpans: 100 } }').ok, true, 'equal is fine');
  t.strictSame(load('{ retry: { initialBackoffMs: 6000 } }'), { ok: false, problems: [{ path: `${P}.retry.initialBackoffMs`, message: 'must be at most retry.maxBackoffMs (5000)' }] }, 'against the default');
  t.strictSame(
    load('{ sampleRatio: 2, batch: { maxQueueSpans: 10, maxBatchSpans: 20 }, retry: null }'),
    {
      ok: false,
      problems: [
        { path: `${P}.sampleRatio`, message: 'must be <= 1' },
        { path: `${P}.retry`, message: 'must be object' },
        { path: `${P}.batch.maxBatchSpans`, message: 'must be at most batch.maxQueueSpans (10): a batch is taken from the queue' },
      ],
    },
    'every problem at once; a null where an object goes does not throw',
  );
  t.strictSame(load('{ batch: { maxQueueSpans: 10, maxBatchSpans: 0 } }'), { ok: false, problems: [{ path: `${P}.batch.maxBatchSpans`, message: 'must be >= 1' }] }, 'not blamed twice');
});
