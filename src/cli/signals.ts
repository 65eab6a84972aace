/**
 * Signals from the first instant of the process. Node's default action for SIGHUP ends the process
 * (exit 129), and for SIGTERM/SIGINT too (143/130, with no line), while `serve` needs a moment
 * (loading modules, the policy, the stores) before it can reload or drain: a signal in that window
 * (a process manager's reload or stop, the primary of `--workers` stopping a worker that is still
 * starting) must neither kill it silently nor leave it half started. main.ts installs these
 * handlers before it loads anything else:
 *
 * - SIGHUP, for every command: one that comes before `serve` takes the signal over is remembered,
 *   said on stderr, and handed to `serve`'s reload once it has one (the backend ignores it);
 * - SIGTERM/SIGINT, for `serve` only (`holdSignals(true)`): until the gateway serves, a stop ends the
 *   process at once, exit 0, with a line (on stderr, or through the logger once `serve` has one, see
 *   `onStopSignal`); once it serves, its graceful stop takes over (drain, then exit 0).
 *
 * What no program can catch: the first tens of milliseconds of a node process, before it runs any
 * JavaScript (node resets every signal to its default while it boots), keep the kernel's default.
 */
type StopSignal = 'SIGTERM' | 'SIGINT';

let reloadHandler: ((reason: string) => void) | undefined;
let deferred = false;
let stopHandler: ((signal: StopSignal) => void) | undefined;

function onSighup(): void {
  if (reloadHandler !== undefined) return reloadHandler('SIGHUP');
  if (!deferred) process.stderr.write('petstore-gateway: SIGHUP while starting: the policy is reloaded as soon as the gateway can\n');
  deferred = true;
}

function onStop(signal: StopSignal): void {
  if (stopHandler !== undefined) return stopHandler(signal);
  // Nothing serves yet and nothing is in flight: stop now, as a stop of a serving gateway ends.
  process.stderr.write(`petstore-gateway: ${signal} while starting: stopped before serving (exit 0)\n`);
  process.exit(0);
}
const onSigterm = () => onStop('SIGTERM');
const onSigint = () => onStop('SIGINT');

/** Installs the early handlers (once): SIGHUP always, SIGTERM and SIGINT when `stop` (serve). */
export function holdSignals(stop = false): void {
  if (!process.listeners('SIGHUP').includes(onSighup)) process.on('SIGHUP', onSighup);
  if (stop && !process.listeners('SIGTERM').includes(onSigterm)) {
    process.on('SIGTERM', onSigterm);
    process.on('SIGINT', onSigint);
  }
}

/**
 * From now on SIGHUP calls `reload`; a SIGHUP that came before runs it now, once, with the reason
 * `SIGHUP (deferred)`.
 */
export function onReloadSignal(reload: (reason: string) => void): void {
  reloadHandler = reload;
  holdSignals();
  if (deferred) {
    deferred = false;
    reload('SIGHUP (deferred)');
  }
}

/**
 * From now on SIGTERM and SIGINT call `stop` (it runs once per signal; making a second one harmless
 * is the caller's). `serve` sets a logging stop while it starts, then its graceful stop.
 */
export function onStopSignal(stop: (signal: StopSignal) => void): void {
  stopHandler = stop;
  holdSignals(true);
}
