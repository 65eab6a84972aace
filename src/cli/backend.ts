/** `petstore-gateway backend`: the reference backend on its own. */
import type { AddressInfo } from 'node:net';
import { createBackendServer } from '../backend/server.js';
import { onReloadSignal } from './signals.js';
import { EXIT, hostFlag, parse, portFlag } from './usage.js';

export const BACKEND_HELP = `Usage: petstore-gateway backend [--host H] [--port N]

Run the reference backend on its own (listPets, createPet, getPet, in memory); its base URL,
ending with /v1, is printed on stdout. Default 127.0.0.1:8081.
`;

export async function backend(args: string[]): Promise<number> {
  const { values } = parse('backend', args, { host: { type: 'string' }, port: { type: 'string' } });
  const port = portFlag('backend', '--port', values.port) ?? 8081;
  const host = hostFlag('backend', '--host', values.host) ?? '127.0.0.1';
  const server = createBackendServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address() as AddressInfo;
  process.stdout.write(`petstore-gateway backend listening on http://${addr.address}:${addr.port}/v1\n`);
  const stop = () => server.close(() => process.exit(EXIT.ok));
  // The backend has no file to reload: a SIGHUP (a process manager's reload) leaves it running.
  onReloadSignal(() => process.stderr.write('petstore-gateway backend: SIGHUP ignored: nothing to reload\n'));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return -1;
}
