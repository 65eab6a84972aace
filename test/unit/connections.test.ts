/**
 * The connection accounting's refusal after a pipelining overflow and its per-client share of
 * connections, through its public seam (`shareConnections` on a server that emits 'connection'),
 * with an injected clock: the machine's loopback has one IPv6 address, so a /64 cannot be shown
 * with real sockets.
 */
import { EventEmitter } from 'node:events';
import t from 'tap';
import { shareConnections, type AcceptedSocket } from '../../src/fronts/connections.js';

/** A socket as the server would hand it over: its address, and whether it was refused. */
function accepted(remoteAddress: string): AcceptedSocket & { refused: boolean } {
  const closeListeners: Array<() => void> = [];
  return {
    remoteAddress,
    refused: false,
    destroy() {
      this.refused = true;
      for (const l of closeListeners) l();
    },
    once(_event: 'close', listener: () => void) {
      closeListeners.push(listener);
    },
  };
}

function setup(trustedProxies: readonly string[] = []) {
  const server = new EventEmitter();
  let clock = 1000;
  const share = shareConnections(server, 1000, trustedProxies, 10_000, () => clock);
  const connect = (address: string) => {
    const socket = accepted(address);
    server.emit('connection', socket);
    return socket.refused;
  };
  return { share, connect, advance: (ms: number) => (clock += ms) };
}

t.test('a refusal covers the IPv6 /64 of the address, not the next /64', async (t) => {
  const { share, connect } = setup();
  t.equal(connect('2001:db8:1:2::5'), false, 'accepted before any refusal');
  share.refuse('2001:db8:1:2::5');
  t.equal(connect('2001:db8:1:2::5'), true, 'the same address is refused');
  t.equal(connect('2001:db8:1:2:ffff:1:2:3'), true, 'another address of the same /64 is refused');
  t.equal(connect('2001:DB8:1:2:0:0:0:99'), true, 'written another way, still the same /64');
  t.equal(connect('2001:db8:1:3::5'), false, 'the next /64 is accepted');
});

t.test('IPv4 is refused per address; an IPv4-mapped address counts as its IPv4 address', async (t) => {
  const { share, connect } = setup();
  share.refuse('192.0.2.1');
  t.equal(connect('192.0.2.1'), true, 'refused');
  t.equal(connect('::ffff:192.0.2.1'), true, 'the same client through a dual-stack socket is refused');
  t.equal(connect('192.0.2.2'), false, 'its neighbour is accepted');
});

t.test('the refusal ends after refuseMs; trusted proxies are never refused', async (t) => {
  const { share, connect, advance } = setup(['2001:db8:9::/48']);
  share.refuse('2001:db8:1:2::5');
  advance(9_999);
  t.equal(connect('2001:db8:1:2::6'), true, 'still refused just before refuseMs');
  advance(2);
  t.equal(connect('2001:db8:1:2::6'), false, 'accepted once refuseMs passed');
  share.refuse('2001:db8:9:1::1');
  t.equal(connect('2001:db8:9:1::1'), false, 'a trusted proxy is not refused');
});

/** A share of `perAddress` on an emitter; `connect` keeps the socket so a test can close it. */
function shared(perAddress: number) {
  const server = new EventEmitter();
  shareConnections(server, perAddress, [], 0, () => 0);
  return (address: string) => {
    const socket = accepted(address);
    server.emit('connection', socket);
    return socket;
  };
}

t.test('maxConnectionsPerAddress counts an IPv6 /64 as one client, not each address of it', async (t) => {
  const connect = shared(2);
  t.equal(connect('2001:db8:1:2::1').refused, false, 'first connection of the /64 accepted');
  t.equal(connect('2001:db8:1:2::2').refused, false, 'second, from another address of it, accepted');
  const third = connect('2001:db8:1:2:a:b:c:d');
  t.equal(third.refused, true, 'a third address of the same /64 is refused: the /64 holds its share');
  t.equal(connect('2001:db8:1:3::1').refused, false, 'the next /64 has its own share');
  t.equal(connect('::ffff:192.0.2.1').refused, false, 'an IPv4-mapped address is counted as its IPv4 address');
  t.equal(connect('192.0.2.1').refused, false, 'so its IPv4 form is the second of that client');
  t.equal(connect('192.0.2.1').refused, true, 'and a third is refused');
});

t.test('a closed connection gives its place back to the /64', async (t) => {
  const connect = shared(1);
  const first = connect('2001:db8:1:2::1');
  t.equal(connect('2001:db8:1:2::2').refused, true, 'the /64 is at its share');
  first.destroy();
  t.equal(connect('2001:db8:1:2::2').refused, false, 'accepted once the first closed');
});

t.test('at accept: an expired refusal stops costing a peer lookup per connection', async (t) => {
  // A server as refuseAtAccept sees node's: a listening handle whose onconnection it wraps.
  const accepted: unknown[] = [];
  const handle = { onconnection: (_err: number, client?: unknown) => void accepted.push(client) };
  const server = Object.assign(new EventEmitter(), { _handle: handle });
  let clock = 1000;
  const share = shareConnections(server, 1000, [], 10_000, () => clock);
  server.emit('listening');
  let lookups = 0;
  let closed = 0;
  const client = (address: string) => ({
    getpeername(out: { address?: string }) {
      lookups++;
      out.address = address;
      return 0;
    },
    unref() {},
    close() {
      closed++;
    },
  });
  handle.onconnection(0, client('192.0.2.9'));
  t.equal(lookups, 0, 'no refusal in force: no lookup');
  t.equal(accepted.length, 1, 'accepted');
  share.refuse('192.0.2.1');
  handle.onconnection(0, client('192.0.2.1'));
  t.equal(lookups, 1, 'a refusal in force: the peer is looked up');
  t.equal(accepted.length, 1, 'the refused client is not handed to node');
  handle.onconnection(0, client('192.0.2.9'));
  t.equal(accepted.length, 2, 'another client is accepted meanwhile');
  clock += 10_001;
  const before = lookups;
  handle.onconnection(0, client('192.0.2.9'));
  handle.onconnection(0, client('192.0.2.8'));
  t.equal(lookups, before, 'the refusal expired: no lookup, though its client never came back');
  t.equal(accepted.length, 4, 'both accepted');
  t.equal(closed, 0, 'the held connection is not closed by another client');
  server.emit('close');
  t.equal(closed, 1, 'the held connection is closed with the server');
});
