/**
 * A body deadline that costs nothing per chunk: activity only stamps the time (`touch`), and the
 * one timer is re-armed when it fires early, not cleared and set on every chunk. While `paused`
 * (the client is not reading, so the upstream is held back on purpose) it never fires: a slow
 * client must not count against the upstream (issue 12, item 7).
 */
export class IdleTimer {
  private last = performance.now();
  private timer: NodeJS.Timeout;
  private held = false;

  constructor(
    private readonly idleMs: number,
    private readonly onIdle: () => void,
  ) {
    this.timer = setTimeout(this.check, idleMs);
  }

  touch(): void {
    this.last = performance.now();
  }

  /** The gateway itself holds the stream back: no deadline until `resume`. */
  pause(): void {
    this.held = true;
  }

  resume(): void {
    this.held = false;
    this.last = performance.now();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private readonly check = (): void => {
    const left = this.held ? this.idleMs : this.last + this.idleMs - performance.now();
    if (left > 0) this.timer = setTimeout(this.check, Math.ceil(left));
    else this.onIdle();
  };
}
