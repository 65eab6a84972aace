/**
 * The connection lane and the exchange hear of a response's close through one listener: the lane's
 * place is freed (a pipelined request waiting behind it is served), the exchange's record reaches
 * its observer, and the response carries one 'close' listener, not two. A real node:http server on
 * 127.0.0.1, two requests pipelined on one raw connection with a lane of one place.
 */
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import t from 'tap';
import { formatProblems, parsePolicy } from '../../src/config/load.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import type { Upstream, UpstreamHandler, UpstreamRequest } from '../../src/core/upstream.js';
import { boundInFlight } from '../../src/fronts/connections.js';
import { createNodeHandler } from '../../src/fronts/node-http.js';
import { compileGateway } from '../../src/gateway.js';
import { policyText, testKey } from '../helpers/servers.js';

const PET = Buffer.from('{"id":7,"name":"Rex","categoryId":1}');

/** An upstream in memory: answers every call with one animal on the next turn of the event loop. */
const upstream: Upstream = {
  name: 'memory',
  conforms: false,
  send(_request: UpstreamRequest, handler: UpstreamHandler): void {
    setImmediate(() => {
      handler.onStart({ pause() {}, resume() {}, abort() {} });
      handler.onHead(200, { 'content-type': 'application/json', 'content-length': String(PET.length) });
      handler.onData(PET);
      handler.onEnd();
    });
  },
  close: () => Promise.resolve(),
};

t.test('one close listener tells the lane and the exchange: the waiting request is served', async (t) => {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText({ upstream: { url: 'http://127.0.0.1:9/v1' } }), { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  const gw = compileGateway(loaded.config, { env });
  const records: ExchangeRecord[] = [];
  const { handler } = createNodeHandler({
    gateways: { current: gw, breaker: undefined },
    upstream,
    settings: { basePath: '/v1', headersMs: 5000, bodyMs: 5000, totalMs: 10_000, maxBufferedBytes: 1 << 20, retryIdempotent: false },
    observer: { onEnd: (r) => records.push(r) },
  });
  const listeners: number[] = [];
  const server = createServer(
    boundInFlight(1, (req, res: ServerResponse) => {
      handler(req, res);
      listeners.push(res.listenerCount('close'));
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;

  const socket = connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  const head = (id: string) => `GET /v1/pets/7 HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\nx-request-id: ${id}\r\n\r\n`;
  socket.write(head('first') + head('second'));
  let text = '';
  socket.setEncoding('latin1').on('data', (s: string) => (text += s));
  // Both answers, within 5 s: the second only starts once the first's close freed the lane's place.
  const until = Date.now() + 5000;
  while ((text.match(/HTTP\/1\.1 200/g) ?? []).length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  t.equal((text.match(/HTTP\/1\.1 200/g) ?? []).length, 2, 'both pipelined requests answered 200');
  t.match(text, /x-request-id: first[\s\S]*x-request-id: second/, 'in order');
  for (let i = 0; i < 100 && records.length < 2; i++) await new Promise((r) => setImmediate(r));
  t.same(
    records.map((r) => [r.requestId, r.status]),
    [
      ['first', 200],
      ['second', 200],
    ],
    'each exchange told its observer',
  );
  t.same(listeners, [1, 1], "one 'close' listener per response, shared by the lane and the exchange");
});
