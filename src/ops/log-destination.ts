/**
 * The process's log destination and its logger: where the access lines and the operator
 * messages go (stdout by default, pino's NDJSON through sonic-boom), asynchronous and bounded.
 * A reader of stdout that is slow, stops reading or goes away costs dropped lines (counted,
 * `droppedLogLines`), never unbounded memory, a crash or a process that cannot exit.
 */
import fs from 'node:fs';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/**
 * Most bytes one write of the log destination carries. sonic-boom keeps one write in flight and
 * writes at most one queued chunk of `maxWrite` bytes (16 KiB by default) per completed write,
 * which comes back through the event loop: at 1,000 connections the gateway made more than that
 * per turn of the loop and the queue grew without end (RSS grew steadily, 16 KiB chunks held by
 * sonic-boom, seen in a heap snapshot; even with /dev/null as the file). With 1 MiB a write
 * takes what has queued since the last one, and RSS stays flat (bench/scaling.mjs).
 */
export const LOG_MAX_WRITE = 1024 * 1024;

/**
 * Most bytes the log destination holds unwritten. Past it (a reader of stdout that stopped
 * reading), lines are dropped rather than kept: memory stays bounded, and the drops are counted
 * (`droppedLogLines`, exported as petstore_gateway_log_dropped_lines_total).
 */
export const LOG_MAX_PENDING = 64 * 1024 * 1024;

let droppedLines = 0;

/** Lines the destinations of `logDestination` dropped so far (a full queue). */
export function droppedLogLines(): number {
  return droppedLines;
}

/** Counts the lines of a dropped write (an access batch holds many; an operator message one). */
function countDropped(data: unknown): void {
  const text = String(data);
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  droppedLines += Math.max(n, 1);
}

/**
 * The process's log destination (stdout by default): asynchronous, so a slow reader of stdout
 * does not hold the event loop; `logger.flush(cb)` writes what is pending (at exit). Access lines
 * arrive in batches (AccessLog); sonic-boom's own batching (minLength) is not used.
 */
export function logDestination(dest: number | string = 1): LineStream & DestinationStream {
  const guard = { flushing: false, giveUp: false, deadline: 0 };
  const stream = pino.destination({
    dest,
    sync: false,
    maxWrite: LOG_MAX_WRITE,
    maxLength: LOG_MAX_PENDING,
    // Asynchronous writes keep sonic-boom's retry of EAGAIN (a slow reader); a flushSync gives up.
    retryEAGAIN: () => !guard.flushing || (!guard.giveUp && Date.now() < guard.deadline),
  });
  stream.on('drop', countDropped);
  boundFlushSync(stream, guard);
  // A reader of the pipe that went away (EPIPE): pino has the destination drop every later write
  // (its write becomes a no-op); these are counted too. Any other error stays uncaught, as before.
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    stream.write = (data: string) => {
      countDropped(data);
      return true;
    };
  });
  return stream;
}

/**
 * sonic-boom (4.2) `flushSync` retries a failed write forever, 100 ms of Atomics.wait at a time,
 * unless the error is EAGAIN and `retryEAGAIN` says stop: an EPIPE (the reader of stdout went away
 * and the destination has not seen it yet) held a process at exit for ever, SIGTERM unheard
 * (pino's exit hook and `AccessLog.flush(true)` call it). While it runs, a write failing with any
 * other error is reported to it as EAGAIN and `retryEAGAIN` says stop; EAGAIN itself is retried
 * for 2 s at most. What could not be written is dropped (the process is exiting).
 */
function boundFlushSync(stream: LineStream, guard: { flushing: boolean; giveUp: boolean; deadline: number }): void {
  const original = stream.flushSync?.bind(stream);
  if (original === undefined) return;
  stream.flushSync = () => {
    const writeSync = fs.writeSync;
    guard.flushing = true;
    guard.giveUp = false;
    guard.deadline = Date.now() + 2000;
    fs.writeSync = function boundedWriteSync(this: unknown, ...args: unknown[]): number {
      try {
        return (writeSync as (...a: unknown[]) => number).apply(fs, args);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EAGAIN' || code === 'EBUSY') throw err;
        guard.giveUp = true;
        throw Object.assign(new Error(`log destination: ${code ?? String(err)}`), { code: 'EAGAIN' });
      }
    } as typeof fs.writeSync;
    try {
      original();
    } catch {
      droppedLines++; // at least one line; the destination cannot say how many it held
    } finally {
      fs.writeSync = writeSync;
      guard.flushing = false;
    }
  };
}

/**
 * Keeps the process serving when whoever reads its stdout or stderr goes away. Node emits a
 * failed write to process.stderr / process.stdout (EPIPE: the reader of the pipe exited) as an
 * 'error' event; with no listener it is an uncaught exception and the process exits, and hung
 * there: pino's exit hook calls sonic-boom's `flushSync`, which retries a write failing with
 * EPIPE forever (100 ms of Atomics.wait at a time), so SIGTERM went unheard. The banner and
 * notices on stderr are dropped instead (counted in `droppedLogLines`) and the gateway goes on
 * serving, as nginx does when the reader of its log goes. Installed once, by `processLogger`.
 */
let stdioGuarded = false;
export function guardStdio(): void {
  if (stdioGuarded) return;
  stdioGuarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE' || err.code === 'ECONNRESET') {
        droppedLines++;
        return;
      }
      throw err;
    });
  }
}

/** The destination of each logger `processLogger` made, which `exitWhenWritten` ends. */
const destinations = new WeakMap<Logger, LineStream>();

/** The process's logger on its own `logDestination` (stdout by default), known to `exitWhenWritten`. */
export function processLogger(options: LoggerOptions, dest: number | string = 1): Logger {
  guardStdio();
  const stream = logDestination(dest);
  const logger = pino(options, stream);
  destinations.set(logger, stream);
  return logger;
}

/**
 * Exits with `code` once the destination of a logger made by `processLogger` has written every
 * line it holds, in order.
 * sonic-boom's `flush(cb)` calls back at once when lines are not batched (pino.destination's
 * minLength 0), even while an asynchronous write is in flight; `process.exit` then runs pino's exit
 * hook, whose synchronous write can land the last lines ("stopped") on stdout BEFORE the write in
 * flight (seen: "stopped" before "shutting down" in 3 of 20 stops under load). Ending the
 * destination waits for the write in flight, writes the rest, then closes (stdout stays open).
 * Bounded: exits after 2 s whatever happens.
 */
export function exitWhenWritten(logger: Logger, code: number): void {
  const exit = (): never => process.exit(code);
  const timer = setTimeout(exit, 2000);
  timer.unref();
  const dest = destinations.get(logger);
  // A logger `processLogger` did not make: pino's flush is all there is.
  if (dest?.end === undefined || dest.once === undefined) return void logger.flush(() => exit());
  dest.once('close', exit);
  try {
    dest.end();
  } catch {
    exit(); // already ended or destroyed: nothing left to write
  }
}

/** The destination a line is handed to: a pino destination (sonic-boom) or any writable. */
export interface LineStream {
  write(data: string): unknown;
  flushSync?(): void;
  end?(): void;
  once?(event: string, listener: () => void): unknown;
}
