/**
 * The admin listener for `serve --workers N`: the admin listener answers for the whole
 * process group. It runs in the primary, which serves no API traffic and so has no metrics,
 * readiness or ledger of its own worth reporting; it asks the workers over the cluster IPC channel:
 *
 * - metrics: prom-client's AggregatorRegistry (`clusterMetrics()`): each worker answers with its
 *   registry as JSON, histograms and counters are summed, gauges by their `aggregator`;
 * - readiness: every worker is asked and must answer ready within a deadline; the group is ready
 *   only when all N workers run and are ready (the first reason otherwise);
 * - deprecations: a shared ledger (Redis) is read once; memory ledgers (one per worker) are asked
 *   for and merged (counts added, earliest first sighting, latest last one);
 * - migration: each worker's tally snapshot is asked for (flushed to the fleet's Redis first when
 *   there is one) and the caller makes the report of them (summed, or the fleet's from Redis); a
 *   reset resets the fleet's Redis first (the caller), then each worker's tally.
 *
 * Messages (the primary's questions and the workers' answers), besides prom-client's own:
 *   worker -> primary  { type: 'petstore-gateway:hello' } once it answers questions (until then: starting)
 *   primary -> worker  { type: 'petstore-gateway:ask', id: number, what: Question, epoch?: string }
 *   worker -> primary  { type: 'petstore-gateway:answer', id: number, what, result?: Readiness | DeprecationUse[] | snapshot, error?: string }
 * Pull, not push: the answer is the worker's state when the probe comes, with no change events to
 * wire from the breaker or the store, and a worker that hangs is seen as not ready.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { DeprecationLedger, DeprecationUse } from '../stores/types.js';
import type { AdminOptions, MetricsText, Readiness } from './admin.js';
import { deprecationReport, mergeUses, type DeprecatedOperation, type DeprecationReport } from './deprecations.js';
import { groupDetail } from './readiness-detail.js';

export const HELLO = 'petstore-gateway:hello';
export const ASK = 'petstore-gateway:ask';
export const ANSWER = 'petstore-gateway:answer';

export type Question = 'readiness' | 'deprecations' | 'migration' | 'migration-reset' | 'console';

export interface AskMessage {
  readonly type: typeof ASK;
  readonly id: number;
  readonly what: Question;
  /** migration-reset: the fleet's new epoch (with a store). */
  readonly epoch?: string;
}

export interface AnswerMessage {
  readonly type: typeof ANSWER;
  readonly id: number;
  readonly what: Question;
  readonly result?: Readiness | DeprecationUse[] | unknown;
  readonly error?: string;
}

function isAnswer(m: unknown): m is AnswerMessage {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === ANSWER && typeof (m as { id?: unknown }).id === 'number';
}

function isAsk(m: unknown): m is AskMessage {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === ASK && typeof (m as { id?: unknown }).id === 'number';
}

export interface WorkerOpsOptions {
  /** The worker's metrics registry (GatewayMetrics.registry). */
  readonly registry: Registry;
  /** The worker's readiness, asked at each probe of the primary's /readyz. */
  readonly readiness: () => Readiness | Promise<Readiness>;
  /** The worker's ledger, asked when the primary merges memory ledgers. */
  readonly ledger?: DeprecationLedger;
  /** The worker's migration lane, when it is on: its tally's snapshot and its reset. */
  readonly migration?: WorkerMigration | undefined;
  /** The worker's console counts (src/ops/console/series.ts), when the console is on. */
  readonly console?: { snapshot(): unknown } | undefined;
}

/** What a worker's migration lane answers its primary (src/migration/view.ts). */
export interface WorkerMigration {
  snapshot(): Promise<unknown>;
  resetLocal(epoch?: string): Promise<void>;
}

/**
 * Call once in each worker: registers its registry for the primary's aggregation and answers the
 * primary's questions. Returns a function that stops answering (for a worker's shutdown).
 */
export function serveWorkerOps(options: WorkerOpsOptions): () => void {
  // prom-client's worker side listens only once an AggregatorRegistry exists in the process.
  AggregatorRegistry.setRegistries([options.registry]);
  new AggregatorRegistry();
  const onMessage = (message: unknown): void => {
    if (!isAsk(message)) return;
    void answer(options, message).then((reply) => {
      // The channel may be gone (primary exiting): nothing to tell then.
      if (process.connected) process.send?.(reply, undefined, undefined, () => {});
    });
  };
  process.on('message', onMessage);
  if (process.connected) process.send?.({ type: HELLO }, undefined, undefined, () => {});
  return () => {
    process.off('message', onMessage);
  };
}

async function answer(options: WorkerOpsOptions, ask: AskMessage): Promise<AnswerMessage> {
  try {
    if (ask.what === 'readiness') return { type: ANSWER, id: ask.id, what: ask.what, result: await options.readiness() };
    if (ask.what === 'console') return { type: ANSWER, id: ask.id, what: ask.what, result: options.console?.snapshot() ?? null };
    if (ask.what === 'migration') return { type: ANSWER, id: ask.id, what: ask.what, result: (await options.migration?.snapshot()) ?? null };
    if (ask.what === 'migration-reset') {
      await options.migration?.resetLocal(ask.epoch);
      return { type: ANSWER, id: ask.id, what: ask.what, result: true };
    }
    return { type: ANSWER, id: ask.id, what: ask.what, result: options.ledger === undefined ? [] : await options.ledger.report() };
  } catch (err) {
    return { type: ANSWER, id: ask.id, what: ask.what, error: err instanceof Error ? err.message : String(err) };
  }
}

export interface PrimaryOpsOptions {
  /** How many workers the group should have: fewer running means not ready (starting or restarting). */
  readonly workers: number;
  /** The primary's own state: 'starting' until the workers are forked, 'draining' once SIGTERM came. */
  readonly readiness: () => Readiness;
  readonly deprecated: ReadonlyArray<DeprecatedOperation>;
  /** A ledger every worker shares (Redis): read once here. Absent: each worker's is asked and merged. */
  readonly sharedLedger?: DeprecationLedger;
  /** How long a worker has to answer a question; default 800 ms (a Kubernetes probe waits 1 s by default). */
  readonly answerTimeoutMs?: number;
  /** The migration lane, when it is on (src/migration/view.ts `migrationGroup`). */
  readonly migration?: PrimaryMigration | undefined;
}

/** The primary's side of the migration report: the report of the workers' snapshots, the store's reset. */
export interface PrimaryMigration {
  report(snapshots: readonly unknown[]): Promise<object>;
  /** Resets the fleet's store (when there is one) before the workers: the epoch to hand them. */
  reset(): Promise<string | undefined>;
}

type Callbacks = Pick<AdminOptions, 'readiness' | 'metrics' | 'deprecations' | 'migration'>;

interface Pending {
  readonly answers: AnswerMessage[];
  waiting: number;
  readonly done: (answers: AnswerMessage[] | Error) => void;
}

/**
 * A worker's 'error' that is only a message it could not be sent: the worker died and the primary
 * has not yet read the end of its channel (it is still in `cluster.workers`, connected), so the
 * write fails (EPIPE, ECONNRESET). node emits that as the worker's 'error' when the send has no
 * callback, as prom-client's `clusterMetrics` sends, and an 'error' with no listener ends the
 * primary, the whole group with it. The worker's exit is seen as such ('exit'). Any other error
 * is thrown as before.
 */
function onWorkerError(err: NodeJS.ErrnoException): void {
  if (err.code === 'EPIPE' || err.code === 'ECONNRESET' || err.code === 'ERR_IPC_CHANNEL_CLOSED') return;
  throw err;
}

/** The primary's side of the question protocol: which workers can answer, and one question to them. */
class WorkerQuestions {
  // Workers that said hello: only they can answer; the others are still starting.
  private readonly registered = new Set<number>();
  private readonly pending = new Map<number, Pending>();
  private readonly timeoutMs: number;
  private nextId = 0;

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
    cluster.on('message', this.onMessage);
    cluster.on('exit', this.onExit);
    cluster.on('fork', this.onFork);
    for (const w of Object.values(cluster.workers ?? {})) if (w !== undefined) this.onFork(w);
  }

  private readonly onExit = (worker: Worker): void => {
    this.registered.delete(worker.id);
  };

  private readonly onFork = (worker: Worker): void => {
    worker.on('error', onWorkerError);
  };

  private readonly onMessage = (worker: Worker, message: unknown): void => {
    if (typeof message === 'object' && message !== null && (message as { type?: unknown }).type === HELLO) {
      this.registered.add(worker.id);
      return;
    }
    if (!isAnswer(message)) return;
    const p = this.pending.get(message.id);
    if (p === undefined) return; // late: its question timed out
    p.answers.push(message);
    if (--p.waiting === 0) {
      this.pending.delete(message.id);
      p.done(p.answers);
    }
  };

  /** Workers alive and answering questions. */
  running(): Worker[] {
    return Object.values(cluster.workers ?? {}).filter((w): w is Worker => w?.isConnected() === true && this.registered.has(w.id));
  }

  ask(what: Question, workers: Worker[], epoch?: string): Promise<AnswerMessage[]> {
    const id = this.nextId++;
    const timeoutMs = this.timeoutMs;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${p.waiting} of ${workers.length} workers did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      const p: Pending = {
        answers: [],
        waiting: workers.length,
        done: (answers) => {
          clearTimeout(timer);
          if (answers instanceof Error) reject(answers);
          else resolve(answers);
        },
      };
      this.pending.set(id, p);
      const message: AskMessage = epoch === undefined ? { type: ASK, id, what } : { type: ASK, id, what, epoch };
      // A worker that died since running() looked cannot be asked: the question fails at once.
      const unsent = (err: Error | null): void => {
        if (err === null || this.pending.get(id) !== p) return;
        this.pending.delete(id);
        p.done(new Error(`a worker could not be asked: ${err.message}`));
      };
      for (const w of workers) w.send(message, undefined, unsent);
    });
  }

  close(): void {
    cluster.off('message', this.onMessage);
    cluster.off('exit', this.onExit);
    cluster.off('fork', this.onFork);
    for (const p of this.pending.values()) p.done(new Error('closed'));
    this.pending.clear();
  }
}

/**
 * Call once in the primary: the admin listener's callbacks for the whole group.
 *
 * @example
 *   const ops = primaryOps({ workers: n, readiness: () => (draining ? { ready: false, reason: 'draining' } : READY), deprecated });
 *   const admin = await startAdmin({ host, port, ...ops.callbacks });
 *   // on shutdown: await admin.close(); ops.close();
 */
export function primaryOps(options: PrimaryOpsOptions): { callbacks: Callbacks; migrationReset?: () => Promise<void>; consoleSnapshots(): Promise<unknown[]>; close(): void } {
  const aggregator = new AggregatorRegistry();
  const questions = new WorkerQuestions(options.answerTimeoutMs ?? 800);
  // Fewer workers than asked for is "starting" until the group has been ready once, then "worker down".
  let wasReady = false;

  const callbacks: Callbacks = {
    async readiness(): Promise<Readiness> {
      const own = options.readiness();
      if (!own.ready) return own;
      const workers = questions.running();
      if (workers.length < options.workers) return { ready: false, reason: wasReady ? 'worker down' : 'starting' };
      let answers: AnswerMessage[];
      try {
        answers = await questions.ask('readiness', workers);
      } catch {
        return { ready: false, reason: 'a worker does not answer' };
      }
      for (const a of answers) {
        if (a.error !== undefined) return { ready: false, reason: 'readiness check failed' };
        const r = a.result as Readiness | undefined;
        if (r === undefined || !r.ready) return r ?? { ready: false, reason: 'readiness check failed' };
      }
      wasReady = true;
      // The workers' details (the upstream, the key registry), the worst of each field.
      const detail = groupDetail(answers.map((a) => (a.result as Readiness | undefined)?.detail));
      return detail === undefined ? { ready: true } : { ready: true, detail };
    },
    async metrics(): Promise<MetricsText> {
      return { body: await aggregator.clusterMetrics(), contentType: aggregator.contentType };
    },
    async deprecations(): Promise<DeprecationReport> {
      if (options.sharedLedger !== undefined) return deprecationReport(await options.sharedLedger.report(), options.deprecated);
      const workers = questions.running();
      const answers = workers.length === 0 ? [] : await questions.ask('deprecations', workers);
      const failed = answers.find((a) => a.error !== undefined);
      if (failed !== undefined) throw new Error(`a worker's ledger failed: ${failed.error}`);
      return deprecationReport(
        mergeUses(answers.map((a) => (a.result as DeprecationUse[] | undefined) ?? [])),
        options.deprecated,
      );
    },
  };

  const migration = options.migration;
  /** Every running worker's answer to `what`; a worker's error fails the whole. */
  const askAll = async (what: Question, epoch?: string): Promise<unknown[]> => {
    const workers = questions.running();
    const answers = workers.length === 0 ? [] : await questions.ask(what, workers, epoch);
    const failed = answers.find((a) => a.error !== undefined);
    if (failed !== undefined) throw new Error(`a worker failed to answer ${what}: ${failed.error}`);
    return answers.map((a) => a.result);
  };
  return {
    callbacks: migration === undefined ? callbacks : { ...callbacks, migration: async () => migration.report(await askAll('migration')) },
    ...(migration === undefined
      ? {}
      : {
          migrationReset: async () => {
            const epoch = await migration.reset();
            await askAll('migration-reset', epoch);
          },
        }),
    // Each worker's console counts (a worker without them answers null, left out).
    consoleSnapshots: async () => (await askAll('console')).filter((r) => r !== null && r !== undefined),
    close() {
      questions.close();
    },
  };
}
