/**
 * `serve --workers N`: the primary forks N workers (node:cluster), which either share the primary's
 * listening socket (cluster's round robin) or, where the platform has SO_REUSEPORT
 * (`reusePortSupported`), each listen on the port themselves so that the kernel balances the
 * connections and no primary is in their path;
 * hands each the environment of the moment (an ephemeral key, the policy in force), reports once
 * when all listen, passes messages on to every worker (a reload: serve.ts), passes a stop on
 * (`stop`: the caller's SIGTERM/SIGINT, signals.ts; each worker stops gracefully), and exits 0 once
 * all have. SIGHUP is the caller's too: the primary validates a reload before any worker sees it.
 *
 * Failures: a worker of the first set that exits before listening (a bad policy,
 * the port in use) stops the whole gateway with that worker's exit code: nothing would serve, and
 * retrying cannot fix a config or a taken port (one killed by a signal meanwhile is replaced, as
 * below). A worker that dies later is replaced after a
 * back-off (100 ms doubling to 10 s); a replacement that cannot start, or dies within 10 s of
 * listening, is a quick crash, and after 5 quick crashes in a row the supervisor gives up and stops
 * (exit 1) rather than fork forever. Log lines name the worker as `workerPid`: pino already adds the
 * primary's own `pid`.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { exitWhenWritten } from '../ops/log-destination.js';

export interface SupervisorLimits {
  /** First restart delay; doubles with each quick crash in a row. */
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  /** A worker that dies within this time of listening (or before) crashed quickly. */
  readonly quickCrashMs: number;
  /** Quick crashes in a row after which the supervisor stops. */
  readonly maxQuickCrashes: number;
  /** How long stopping workers may take before the primary exits anyway. */
  readonly stopTimeoutMs: number;
}

export const DEFAULT_LIMITS: SupervisorLimits = {
  initialDelayMs: 100,
  maxDelayMs: 10_000,
  quickCrashMs: 10_000,
  maxQuickCrashes: 5,
  stopTimeoutMs: 15_000,
};

export interface SuperviseOptions {
  readonly workers: number;
  /** The environment of a worker, asked at each fork: a replacement gets what is in force then. */
  readonly env: (listenPort: number | undefined) => Record<string, string | undefined>;
  /**
   * Fork one worker first and the others once it listens, each told the port it got (`env`'s
   * argument): workers that listen themselves on port 0 would otherwise each get a port of their own.
   */
  readonly staggered?: boolean;
  readonly log: Logger;
  /** Called once, when every worker of the first set listens, with a worker's banner. */
  readonly onListening: (banner: string) => void;
  /**
   * Called each time a worker listens, with the environment it was forked with: what was in force
   * then may have changed while it started (a message sent meanwhile found no listener).
   */
  readonly onWorkerListening?: (worker: Worker, forkedWith: Readonly<Record<string, string>>) => void;
  readonly limits?: SupervisorLimits;
}

interface WorkerState {
  listeningAt: number | undefined;
  readonly initial: boolean;
}

/**
 * Whether `server.listen` takes `reusePort` here: Node 22.12 or 23.1 and later, on Linux (the
 * kernel hashes each new connection to one of the sockets bound with SO_REUSEPORT; other platforms'
 * SO_REUSEPORT does not balance, or Node refuses the option).
 */
export function reusePortSupported(version: string = process.versions.node, platform: string = process.platform): boolean {
  if (platform !== 'linux') return false;
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/** The back-off before the restart that follows `streak` quick crashes in a row (1, 2, ...). */
export function restartDelay(streak: number, limits: SupervisorLimits = DEFAULT_LIMITS): number {
  return Math.min(limits.maxDelayMs, limits.initialDelayMs * 2 ** Math.max(0, streak - 1));
}

/** What to do when a worker exits outside a stop: stop the group, or start another after a delay. */
type ExitDecision =
  | { readonly stop: 'could not start' | 'keeps crashing'; readonly code: number; readonly streak: number }
  | { readonly stop?: undefined; readonly delayMs: number; readonly streak: number };

/**
 * The rule of the module comment: a worker of the first set that never listened stops the group
 * (nothing would serve); otherwise it is replaced, after a back-off that grows with quick crashes
 * in a row, until there are more of those than `maxQuickCrashes`.
 */
function decideOnExit(state: WorkerState | undefined, started: boolean, streak: number, code: number | null, limits: SupervisorLimits): ExitDecision {
  // Ended by a signal (`code` null), it did not fail to start: a signal that reached it before node
  // ran any JavaScript (a SIGHUP to the whole process group) kills it, and another one is started.
  if (state?.initial === true && state.listeningAt === undefined && !started && code !== null) return { stop: 'could not start', code: code === 78 ? 78 : 1, streak };
  const quick = state?.listeningAt === undefined || Date.now() - state.listeningAt < limits.quickCrashMs;
  const next = quick ? streak + 1 : 0;
  if (next > limits.maxQuickCrashes) return { stop: 'keeps crashing', code: 1, streak: next };
  return { delayMs: quick ? restartDelay(next, limits) : limits.initialDelayMs, streak: next };
}

/** The log line and the stderr line of a group that stops because of its workers. */
function reportStop(
  log: Logger,
  decision: Extract<ExitDecision, { stop: string }>,
  exit: { workerPid: number | undefined; code: number | null; signal: string | null },
  limits: SupervisorLimits,
): void {
  const { workerPid, code, signal } = exit;
  if (decision.stop === 'could not start') {
    log.error({ workerPid, code, signal }, 'a worker could not start; stopping');
    process.stderr.write(`petstore-gateway: a worker (pid ${workerPid}) could not start (exit code ${code ?? signal}); see its message above. Stopping.\n`);
  } else {
    log.error({ workerPid, code, signal, quickCrashes: decision.streak }, 'workers keep crashing; giving up');
    process.stderr.write(`petstore-gateway: workers crashed ${decision.streak} times in a row, each within ${limits.quickCrashMs} ms of starting; stopping.\n`);
  }
}

/** Whether all `n` workers of the first set have been forked and listen. */
function firstSetListening(states: ReadonlyMap<Worker, WorkerState>, n: number): boolean {
  const all = [...states.values()].filter((s) => s.initial);
  return all.length === n && all.every((s) => s.listeningAt !== undefined);
}

/**
 * The workers not yet dead. node's cluster removes a worker from `cluster.workers` once it has both
 * exited and disconnected, in either order: at its 'exit' it may still be listed, so a dead one is
 * left out here, or the group's last exit would not be seen as the last.
 */
const alive = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());

export interface WorkerGroup {
  /** Sends `message` to every running worker (one that is starting gets the state through `env`). */
  send(message: object): void;
  /** Passes `signal` on to every worker (each drains), then exits 0 once all have stopped. */
  stop(signal: NodeJS.Signals): void;
}

/** Starts the workers and supervises them until a signal stops them. */
export function superviseWorkers(o: SuperviseOptions): WorkerGroup {
  const limits = o.limits ?? DEFAULT_LIMITS;
  const { log } = o;
  const states = new Map<Worker, WorkerState>();
  let started = false;
  let stopping = false;
  let exitCode = 0;
  let streak = 0;
  const pending = new Set<NodeJS.Timeout>();
  let listenPort: number | undefined;

  const fork = (initial: boolean) => {
    const env = Object.fromEntries(Object.entries(o.env(listenPort)).filter((e): e is [string, string] => e[1] !== undefined));
    const worker = cluster.fork(env);
    states.set(worker, { listeningAt: undefined, initial });
    worker.on('message', (msg: { type?: string; banner?: string; port?: number }) => {
      if (msg.type !== 'listening') return;
      const state = states.get(worker);
      if (state !== undefined) state.listeningAt = Date.now();
      o.onWorkerListening?.(worker, env);
      if (listenPort === undefined && typeof msg.port === 'number') {
        listenPort = msg.port;
        // Staggered: the others are forked now, told the port the first one got.
        if (o.staggered === true && !stopping) for (let i = 1; i < o.workers; i++) fork(true);
      }
      if (!started && firstSetListening(states, o.workers)) {
        started = true;
        o.onListening(msg.banner ?? 'petstore-gateway listening');
      }
    });
  };

  const finish = () => void (log.info({ exitCode }, 'stopped'), exitWhenWritten(log, exitCode));

  /** Stops every worker (each drains gracefully) and exits with `code` once they are gone. */
  const stopAll = (signal: NodeJS.Signals, code: number) => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    for (const t of pending) clearTimeout(t);
    pending.clear();
    const workers = alive();
    if (workers.length === 0) return finish();
    for (const w of workers) w.process.kill(signal);
    setTimeout(() => {
      log.error({ workers: alive().length }, 'workers still running after the stop timeout; exiting');
      finish();
    }, limits.stopTimeoutMs).unref();
  };

  cluster.on('exit', (worker, code, signal) => {
    const state = states.get(worker);
    states.delete(worker);
    const workerPid = worker.process.pid;
    if (stopping) {
      if (alive().length === 0) finish();
      return;
    }
    const decision = decideOnExit(state, started, streak, code, limits);
    streak = decision.streak;
    if (decision.stop !== undefined) {
      reportStop(log, decision, { workerPid, code, signal }, limits);
      return stopAll('SIGTERM', decision.code);
    }
    log.error({ workerPid, code, signal, restartInMs: decision.delayMs }, 'worker exited; starting another');
    // Before the first set all listen, a replacement takes its place in that set (the banner waits for it).
    const initial = state?.initial === true;
    const timer = setTimeout(() => void (pending.delete(timer), stopping || fork(initial && !started)), decision.delayMs);
    pending.add(timer);
  });

  for (let i = 0; i < (o.staggered === true ? 1 : o.workers); i++) fork(true);
  return {
    send(message) {
      // A worker whose channel is closing is replaced, and the replacement reads `env`.
      for (const w of alive()) if (w.isConnected()) w.send(message, undefined, () => {});
    },
    stop: (signal) => stopAll(signal, 0),
  };
}
