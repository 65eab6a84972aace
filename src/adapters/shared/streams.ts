/**
 * Node stream helpers the adapters share, so they read bodies and time out alike: the client's body
 * within the policy's limit, an upstream body within a cap and an idle timeout.
 */
import type { Readable } from 'node:stream';
import { GatewayError } from '../../core/errors.js';

const EMPTY = Buffer.alloc(0);

/**
 * Reads a request body as raw bytes within `limit` (413 past it, before reading it whole when the
 * Content-Length says so). The policies check these exact bytes and the upstream receives them.
 */
export function readBody(stream: Readable, declaredLength: string | undefined, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredLength !== undefined && Number(declaredLength) > limit) {
      reject(new GatewayError('payload_too_large'));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.off('data', onData);
        reject(new GatewayError('payload_too_large'));
        return;
      }
      chunks.push(chunk);
    };
    stream.on('data', onData);
    stream.on('end', () => resolve(size === 0 ? EMPTY : Buffer.concat(chunks, size)));
    stream.on('error', reject);
  });
}

/** A body that paused longer than the policy allows, as undici names it (mapped to 504). */
export function bodyTimeoutError(): Error {
  return Object.assign(new Error('upstream body paused too long'), { code: 'UND_ERR_BODY_TIMEOUT' });
}

/**
 * Fires `onIdle` once nothing happened for `idleMs`. Activity only stamps the time (`touch`, once
 * per body chunk): the one timer is re-armed when it fires early, not cleared and set on every
 * chunk. undici's own body timeout checks its clock every 500 ms; this one is a plain timer.
 */
export class IdleTimer {
  private last = performance.now();
  private timer: NodeJS.Timeout;

  constructor(
    private readonly idleMs: number,
    private readonly onIdle: () => void,
  ) {
    this.timer = setTimeout(this.check, idleMs);
  }

  touch(): void {
    this.last = performance.now();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private readonly check = (): void => {
    const left = this.last + this.idleMs - performance.now();
    if (left > 0) this.timer = setTimeout(this.check, Math.ceil(left));
    else this.onIdle();
  };
}

/** Reads a stream up to `cap` bytes, failing when it pauses longer than `idleMs`; past `cap` it stops. */
export function readCapped(stream: Readable, cap: number, idleMs: number): Promise<{ body: Buffer; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const idle = new IdleTimer(idleMs, () => {
      stream.destroy();
      reject(bodyTimeoutError());
    });
    stream.on('data', (chunk: Buffer) => {
      idle.touch();
      if (size + chunk.length > cap) {
        idle.stop();
        chunks.push(chunk.subarray(0, cap - size));
        stream.destroy();
        resolve({ body: Buffer.concat(chunks), truncated: true });
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    });
    stream.on('end', () => {
      idle.stop();
      resolve({ body: Buffer.concat(chunks, size), truncated: false });
    });
    stream.on('error', (err) => {
      idle.stop();
      reject(err);
    });
  });
}

/**
 * Destroys a streamed upstream body that pauses longer than `idleMs` (the status has been sent:
 * the client's connection is closed, the gateway logs it).
 */
export function guardIdle(stream: Readable, idleMs: number, onTimeout: () => void): void {
  const idle = new IdleTimer(idleMs, () => {
    onTimeout();
    stream.destroy(bodyTimeoutError());
  });
  stream.on('data', () => idle.touch());
  stream.once('close', () => idle.stop());
}
