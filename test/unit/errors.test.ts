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
  const err = new GatewayError('method_not_allowed', { message: 'no', headers: { allow: 'GET' } });
  t.equal(renderError(err), '{"code":"method_not_allowed","message":"no","status":405}');
  t.same(err.headers, { allow: 'GET' });
});

t.test('status is taken only for upstream_error; every other code keeps the catalogue status', async (t) => {
  t.equal(new GatewayError('upstream_error', { status: 418 }).status, 418);
  t.equal(new GatewayError('upstream_error').status, CATALOGUE.upstream_error.status);
  t.equal(new GatewayError('bad_gateway', { status: 418 }).status, 502);
  t.equal(new GatewayError('not_found', { status: 200 }).status, 404);
});

t.test('cause is kept for the log and never rendered; no options means the catalogue defaults', async (t) => {
  const cause = new Error('ECONNRESET from 10.0.0.1');
  const err = new GatewayError('bad_gateway', { cause });
  t.equal(err.cause, cause);
  t.equal(renderError(err), JSON.stringify({ code: 'bad_gateway', message: CATALOGUE.bad_gateway.message, status: 502 }));
  const bare = new GatewayError('internal_error');
  t.equal(bare.cause, undefined);
  t.notOk('cause' in bare, 'no cause property when none was given');
  t.same(bare.headers, {});
  t.equal(bare.message, CATALOGUE.internal_error.message);
});
