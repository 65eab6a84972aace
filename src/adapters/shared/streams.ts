/**
 * Node stream helpers both adapters use, so they read bodies and time out alike: the client's body
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

/** Reads a stream up to `cap` bytes, failing when it pauses longer than `idleMs`; past `cap` it stops. */
export function readCapped(stream: Readable, cap: number, idleMs: number): Promise<{ body: Buffer; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let timer = setTimeout(onIdle, idleMs);
    function onIdle() {
      stream.destroy();
      reject(Object.assign(new Error('upstream body paused too long'), { code: 'UND_ERR_BODY_TIMEOUT' }));
    }
    stream.on('data', (chunk: Buffer) => {
      clearTimeout(timer);
      if (size + chunk.length > cap) {
        chunks.push(chunk.subarray(0, cap - size));
        stream.destroy();
        resolve({ body: Buffer.concat(chunks), truncated: true });
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
      timer = setTimeout(onIdle, idleMs);
    });
    stream.on('end', () => {
      clearTimeout(timer);
      resolve({ body: Buffer.concat(chunks), truncated: false });
    });
    stream.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/**
 * Destroys a streamed upstream body that pauses longer than `idleMs` (the status has been sent:
 * the client's connection is closed, the gateway logs it). undici's own body timeout checks its
 * clock every 500 ms; this one is a plain timer.
 */
export function guardIdle(stream: Readable, idleMs: number, onTimeout: () => void): void {
  let timer = setTimeout(fire, idleMs);
  function fire() {
    onTimeout();
    stream.destroy(Object.assign(new Error('upstream body paused too long'), { code: 'UND_ERR_BODY_TIMEOUT' }));
  }
  stream.on('data', () => {
    clearTimeout(timer);
    timer = setTimeout(fire, idleMs);
  });
  stream.once('close', () => clearTimeout(timer));
}

