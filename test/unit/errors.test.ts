import t from 'tap';
import { CATALOGUE, GatewayError, renderError } from '../../src/core/errors.js';

t.test('every catalogue entry renders to the Error shape with status equal to the HTTP status', async (t) => {
  for (const code of Object.keys(CATALOGUE) as (keyof typeof CATALOGUE)[]) {
    const err = new GatewayError(code);
    t.same(JSON.parse(renderError(err)), { code, message: CATALOGUE[code].message, status: CATALOGUE[code].status });
    t.ok(err.status >= 400 && err.status <= 599, code);
  }
});

t.test('a raiser may give its own message and headers', async (t) => {
  const err = new GatewayError('method_not_allowed', 'no', { allow: 'GET' });
  t.equal(renderError(err), '{"code":"method_not_allowed","message":"no","status":405}');
  t.same(err.headers, { allow: 'GET' });
});
