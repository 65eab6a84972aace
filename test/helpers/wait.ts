/** Waiting in tests: a plain delay, and polling for a condition with a deadline. */

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `pred` every 20 ms until it gives a value (not undefined or false); rejects after `timeoutMs`. */
export async function waitFor<T>(what: string, pred: () => T | undefined | false, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = pred();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Polls an async condition every 50 ms until it holds; throws after `ms` (bounded: at most ms / 50 + 1 tries). */
export async function until(what: string, pred: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  for (let i = 0; i <= ms / 50; i++) {
    if (await pred()) return;
    if (Date.now() > end) break;
    await sleep(50);
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

/**
 * `promise`'s value, or `fallback` once `ms` have passed, whichever comes first. The timer is
 * cleared as soon as the race is decided: a pending timer keeps the test process alive until it
 * fires, so a bound left armed after the last test held the file's place in the run (one of two)
 * for up to its whole length.
 */
export async function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<F>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
