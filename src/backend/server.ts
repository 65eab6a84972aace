/**
 * The reference backend on its own port (`petstore-gateway backend`), for trying the gateway with
 * `--upstream` and for tests that need a separate upstream process. Plain node:http: it routes with
 * the same matcher as the gateway and answers every error in the Error shape. It does not check API
 * keys: it is meant to sit behind the gateway, which does.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isJsonMediaType } from '../core/contract.js';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';
import { shippedApi } from '../api/index.js';
import { splitTarget } from '../core/operations.js';
import { ReferenceBackend } from './service.js';

export interface BackendServerOptions {
  readonly backend?: ReferenceBackend;
  /** Largest request body in bytes (413 past it). */
  readonly maxBodyBytes?: number;
}

function send(res: ServerResponse, status: number, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'content-type': ERROR_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: ServerResponse, err: GatewayError): void {
  send(res, err.status, renderError(err), { ...err.headers });
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        // Stop keeping the body, let the rest drain, answer 413 and close the connection.
        req.removeAllListeners('data');
        req.resume();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function createBackendServer(options: BackendServerOptions = {}): Server {
  const backend = options.backend ?? new ReferenceBackend();
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  // An exception after the body was read would be an unhandled rejection: it ends this response
  // instead of the process.
  return createServer((req, res) => {
    serve(req, res).catch(() => res.destroy());
  });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { path, query } = splitTarget(req.url ?? '/');
    const route = shippedApi().router.match(req.method ?? 'GET', path);
    if (route.kind === 'not_found') return sendError(res, new GatewayError('not_found'));
    if (route.kind === 'method_not_allowed') {
      return sendError(res, new GatewayError('method_not_allowed', { headers: { allow: route.allow } }));
    }
    let body: Buffer | undefined;
    if (route.operation.hasBody) {
      if (!isJsonMediaType(req.headers['content-type'])) {
        return sendError(res, new GatewayError('unsupported_media_type'));
      }
      try {
        body = await readBody(req, maxBodyBytes);
      } catch {
        return; // the client went away
      }
      if (body === undefined) {
        res.setHeader('connection', 'close');
        return sendError(res, new GatewayError('payload_too_large'));
      }
    }
    const out = backend.handle({ operation: route.operation.id, petId: route.param, query, body });
    send(res, out.status, out.body);
  }
}
