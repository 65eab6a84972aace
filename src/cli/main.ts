#!/usr/bin/env node
/** The `petstore-gateway` executable: see commands.ts. */
import { holdSignals } from './signals.js';

// Before the command's modules load: a signal while `serve` starts must neither end the process
// silently nor leave it half started (signals.ts). SIGTERM/SIGINT are held for `serve` only: every
// other command keeps their default (Ctrl-C ends it).
holdSignals(process.argv[2] === 'serve');
const cluster = (await import('node:cluster')).default;
const { main } = await import('./commands.js');
const code = await main(process.argv.slice(2));
// A server command returns -1 and keeps the process alive until a signal stops it.
if (code >= 0) {
  process.exitCode = code;
  // A cluster worker that could not start must exit, not idle on its IPC channel,
  // and with its code (letting the channel go would make node's cluster exit it with 0). Its stderr
  // (a pipe or a terminal) is written synchronously, so its message is out.
  if (cluster.isWorker) process.exit(code);
  // A command that has finished must end even if a handle it opened is still referenced (a store's
  // reconnecting client, a listener a failed start could not close): a process that idles after
  // failing to start is never restarted by a process manager. Unreferenced, this timer does not
  // delay an ordinary exit.
  setTimeout(() => process.exit(code), 1000).unref();
}
