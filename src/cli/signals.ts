/**
 * SIGHUP from the first instant of the process. Node's default action for SIGHUP ends the process
 * (exit 129), and `serve` needs a moment (loading modules, the policy, the stores) before it can
 * reload: a SIGHUP in that window (a process manager's reload, or the primary of `--workers`
 * passing one on to a worker that is still starting) must not kill it. main.ts installs this
 * handler before it loads anything else; a SIGHUP that comes before `serve` takes the signal over
 * is remembered, said on stderr, and handed to `serve`'s reload once it has one.
 */
let handler: ((reason: string) => void) | undefined;
let deferred = false;

function onSighup(): void {
  if (handler !== undefined) return handler('SIGHUP');
  if (!deferred) process.stderr.write('petstore-gateway: SIGHUP while starting: the policy is reloaded as soon as the gateway can\n');
  deferred = true;
}

/** Installs the early handler (once). */
export function holdSighup(): void {
  if (!process.listeners('SIGHUP').includes(onSighup)) process.on('SIGHUP', onSighup);
}

/**
 * From now on SIGHUP calls `reload`; a SIGHUP that came before runs it now, once, with the reason
 * `SIGHUP (deferred)`.
 */
export function onReloadSignal(reload: (reason: string) => void): void {
  handler = reload;
  holdSighup();
  if (deferred) {
    deferred = false;
    reload('SIGHUP (deferred)');
  }
}
