// A collector that only counts: POST /v1/traces (OTLP/HTTP, protobuf) answered 200 with an empty
// ExportTraceServiceResponse as soon as the body is read, its spans counted by kind; GET /__stats:
// {"exports","spans","server","client","other","bytes","bad"}. The sink of bench/traces.mjs, in its
// own process (pinned with the load generator), so that what it costs is no gateway's.
//
//   node bench/otlp-sink.mjs     prints "ready http://127.0.0.1:PORT", serves until SIGTERM/SIGINT
import { createServer } from 'node:http';

const stats = { exports: 0, spans: 0, server: 0, client: 0, other: 0, bytes: 0, bad: 0 };

/** Calls `each(field, wire, value, start, end)` for every field of a protobuf message (throws when malformed). */
function fields(buf, start, end, each) {
  let pos = start;
  const varint = () => {
    let v = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      if (pos >= end) throw new Error('truncated');
      const b = buf[pos++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
    throw new Error('varint too long');
  };
  while (pos < end) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) each(field, wire, varint(), 0, 0);
    else if (wire === 2) {
      const len = varint();
      if (pos + len > end) throw new Error('truncated');
      each(field, wire, 0, pos, pos + len);
      pos += len;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new Error(`wire type ${wire}`);
  }
}

/**
 * The spans of an ExportTraceServiceRequest by kind: resource_spans (1) > scope_spans (2) > spans
 * (2) > kind (6: 2 SERVER, 3 CLIENT).
 */
function count(buf) {
  const c = { spans: 0, server: 0, client: 0, other: 0 };
  fields(buf, 0, buf.length, (f1, w1, _v1, s1, e1) => {
    if (f1 !== 1 || w1 !== 2) return;
    fields(buf, s1, e1, (f2, w2, _v2, s2, e2) => {
      if (f2 !== 2 || w2 !== 2) return;
      fields(buf, s2, e2, (f3, w3, _v3, s3, e3) => {
        if (f3 !== 2 || w3 !== 2) return;
        let kind = 0;
        fields(buf, s3, e3, (f4, w4, v4) => {
          if (f4 === 6 && w4 === 0) kind = v4;
        });
        c.spans++;
        if (kind === 2) c.server++;
        else if (kind === 3) c.client++;
        else c.other++;
      });
    });
  });
  return c;
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/__stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify(stats));
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    stats.exports++;
    stats.bytes += body.length;
    try {
      const c = count(body);
      stats.spans += c.spans;
      stats.server += c.server;
      stats.client += c.client;
      stats.other += c.other;
    } catch {
      stats.bad++;
    }
    res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 });
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.once(sig, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
server.listen(0, '127.0.0.1', () => process.stdout.write(`ready http://127.0.0.1:${server.address().port}\n`));
