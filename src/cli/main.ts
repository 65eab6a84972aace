#!/usr/bin/env node
/** The `petstore-gateway` executable: see commands.ts. */
import { main } from './commands.js';

const code = await main(process.argv.slice(2));
// A server command returns -1 and keeps the process alive until a signal stops it.
if (code >= 0) process.exitCode = code;
