// How much listPets response enforcement costs, beside a plain JSON.parse + JSON.stringify of the
// same body (which would also lose every integer above 2^53), in one run, interleaved rounds.
//   npm run build && node bench/list-enforcement.mjs
import { filterArray } from '../dist/core/json-scan.js';

const STATUSES = ['available', 'pending', 'sold'];
function list(n) {
  const items = [];
  for (let i = 0; i < n; i++) items.push(`{"id":${9007199254740993 + i === 0 ? 0 : i + 1},"name":"pet number ${i}","categoryId":9223372036854775807,"status":"${STATUSES[i % 3]}"}`);
  return Buffer.from('[' + items.join(',') + ']');
}

function time(fn, iterations) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn();
  return Number(process.hrtime.bigint() - start) / iterations;
}

const cases = [
  { name: '20 items, limit 20 (nothing removed)', body: list(20), limit: 20, status: undefined, iterations: 20000 },
  { name: '20 items, limit 20, status=sold', body: list(20), limit: 20, status: 'sold', iterations: 20000 },
  { name: '10,000 items, limit 20 (legacy ignores limit)', body: list(10000), limit: 20, status: undefined, iterations: 2000 },
  { name: '10,000 items, limit 100, status=sold', body: list(10000), limit: 100, status: 'sold', iterations: 2000 },
];

const rounds = 5;
const results = cases.map(() => ({ scan: [], parse: [] }));
for (let r = 0; r < rounds; r++) {
  cases.forEach((c, i) => {
    results[i].scan.push(time(() => filterArray(c.body, c.limit, c.status), c.iterations));
    results[i].parse.push(time(() => JSON.stringify(JSON.parse(c.body.toString('utf8'))), Math.max(50, c.iterations / 20)));
  });
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`node ${process.version}, ${rounds} interleaved rounds, median ns per body`);
console.log('| case | bytes | enforcement (ns) | JSON.parse+stringify (ns) | ratio |');
console.log('|---|---|---|---|---|');
cases.forEach((c, i) => {
  const s = median(results[i].scan);
  const p = median(results[i].parse);
  console.log(`| ${c.name} | ${c.body.length} | ${Math.round(s)} | ${Math.round(p)} | ${(s / p).toFixed(3)} |`);
});
