/**
 * Repeated operator warnings, throttled: a Redis outage or an upstream that
 * fails every request made one warn line per request, which buries every other line and costs the
 * event loop more than the requests. Each message (level, text and the `code` field) is
 * written at most once per `everyMs`; the lines dropped meanwhile are counted, and when the period
 * ends a line with the same message and `suppressed: N` says how many there were.
 *
 * It is a pino `hooks.logMethod`, so it wraps the operator log where it is built (every child
 * logger, the exchange's, the policies' and the stores' lines included) and nothing per call site.
 * Access lines do not go through it (they are written to the destination directly). Only warn
 * lines are throttled: info and debug are the operator's own choice of verbosity, and an error
 * line is one the operator must read each time (a refused reload, a crash with its stack).
 */
import type { LogFn, Logger } from 'pino';

/** pino's numeric level of `warn`, the one level throttled. */
const WARN = 40;
/** Most distinct messages tracked; past it a new message is written unthrottled (messages are constants). */
const MAX_KEYS = 1000;

interface Slot {
  /** When the current period started. */
  since: number;
  suppressed: number;
  /** The first suppressed line's fields, for the summary line. */
  fields: Record<string, unknown> | undefined;
  timer: NodeJS.Timeout | undefined;
}

export interface ThrottleOptions {
  /** The period in milliseconds; default 5,000. */
  readonly everyMs?: number;
  readonly now?: () => number;
}

/**
 * A pino `logMethod` hook that throttles repeated warn lines per message.
 *
 * @example
 *   const log = pino({ level: 'info', hooks: { logMethod: throttledLogMethod() } }, destination);
 */
export function throttledLogMethod(options: ThrottleOptions = {}): (this: Logger, args: Parameters<LogFn>, method: LogFn, level: number) => void {
  const everyMs = options.everyMs ?? 5000;
  const now = options.now ?? Date.now;
  const slots = new Map<string, Slot>();
  return function logMethod(this: Logger, args, method, level) {
    if (level !== WARN) return method.apply(this, args);
    const [first, second] = args as unknown[];
    const msg = typeof first === 'string' ? first : typeof second === 'string' ? second : '';
    const fields = first !== null && typeof first === 'object' && !(first instanceof Error) ? (first as Record<string, unknown>) : undefined;
    // One period per message and catalogue code: "gateway error" for upstream_timeout does not hide
    // the first "gateway error" for store_full.
    const code = fields?.code;
    const key = typeof code === 'string' ? `${level}:${msg}:${code.slice(0, 64)}` : `${level}:${msg}`;
    const t = now();
    const slot = slots.get(key);
    if (slot === undefined || t - slot.since >= everyMs) {
      if (slot?.timer !== undefined) clearTimeout(slot.timer);
      const pending = slot?.suppressed ?? 0;
      if (slot === undefined && slots.size >= MAX_KEYS) return method.apply(this, args);
      slots.set(key, { since: t, suppressed: 0, fields: undefined, timer: undefined });
      // A period that ended with lines suppressed and no summary yet: its count rides on this line.
      if (pending > 0) return method.call(this, { ...(fields ?? {}), suppressed: pending }, msg);
      return method.apply(this, args);
    }
    slot.suppressed++;
    slot.fields ??= fields;
    if (slot.timer === undefined) {
      slot.timer = setTimeout(() => {
        slot.timer = undefined;
        if (slot.suppressed === 0) return;
        const n = slot.suppressed;
        slot.suppressed = 0;
        slot.since = now();
        method.call(this, { ...(slot.fields ?? {}), suppressed: n }, `${msg} (repeated ${n} times in ${everyMs} ms)`);
        slot.fields = undefined;
      }, Math.max(1, everyMs - (t - slot.since)));
      // A summary never keeps the process alive.
      slot.timer.unref();
    }
  };
}
