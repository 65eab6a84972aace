/**
 * Reads a client's request body as raw bytes within a limit (413 past it, before reading it whole
 * when the Content-Length says so). The policies check these exact bytes and the upstream
 * receives them. Both fronts use it.
 */
import type { Readable } from 'node:stream';
import { GatewayError } from '../core/errors.js';

const EMPTY = Buffer.alloc(0);

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
