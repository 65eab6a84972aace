#!/usr/bin/env node
/** The `petstore-gateway` executable: see commands.ts. */
import cluster from 'node:cluster';
import { main } from './commands.js';

const code = await main(process.argv.slice(2));
// A server command returns -1 and keeps the process alive until a signal stops it.
if (code >= 0) {
  process.exitCode = code;
  // A cluster worker that could not start must exit, not idle on its IPC channel (issue 11, item 3):
  // let the channel go, and exit anyway should something else hold the loop.
  if (cluster.isWorker) {
    process.disconnect?.();
    setTimeout(() => process.exit(code), 2000).unref();
  }
}
