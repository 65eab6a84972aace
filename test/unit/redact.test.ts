/**
 * What of an upstream's error text may reach a client (`isPlainMessage`) or the operator log
 * (`redactForLog`: secrets masked, whitespace folded, bounded).
 */
import t from 'tap';
import { credentialSecrets, isPlainMessage, MAX_CLIENT_MESSAGE, redactForLog, SecretSet } from '../../src/core/redact.js';

t.test('isPlainMessage: short plain prose only', async (t) => {
  t.equal(MAX_CLIENT_MESSAGE, 200);
  const plain = [
    'Pet not found.',
    'x',
    'The name is too long (max 64 characters).',
    'Category 12 does not exist',
    "The pet's name must not be empty; try again.",
    'Ünïcödé names are fine: 犬',
    'Pet no. '.repeat(25), // exactly 200 characters
    ' padded ',
  ];
  for (const text of plain) t.equal(isPlainMessage(text), true, JSON.stringify(text));

  const notPlain: [string, unknown][] = [
    // Not a non-empty string, or too long.
    ['empty', ''],
    ['blank', '   '],
    ['201 characters', 'Pet no. '.repeat(25) + 'x'],
    ['a number', 404],
    ['null', null],
    ['undefined', undefined],
    ['an object', { message: 'Pet not found.' }],
    ['an array', ['Pet not found.']],
    // Markup and structure.
    ['HTML', '<b>Not found</b>'],
    ['a lone angle bracket', 'a > b'],
    ['braces', 'got {id}'],
    ['brackets', 'ids [1, 2]'],
    ['a backslash', 'C:\\pets'],
    ['a backtick', 'use `limit`'],
    ['a newline', 'line one\nline two'],
    ['a carriage return', 'line one\rline two'],
    ['a tab', 'a\tb'],
    // Internals.
    ['a JS stack frame', 'at foo (/app/x.js:1:2)'],
    ['a stack frame with a method', 'failed at Object.<anonymous> (index.js:3:9)'],
    ['a source position', 'error in main.go:42'],
    ['a Python position', 'in views.py:120'],
    ['Traceback', 'Traceback (most recent call last)'],
    ['an exception', 'NullPointerException'],
    ['stack', 'see the stack for details'],
    ['errno', 'errno 111'],
    ['SQLSTATE', 'SQLSTATE 23505'],
    ['Oracle', 'ORA-00942: table or view does not exist'],
    ['Postgres', 'syntax error at or near "FROM"'],
    ['a server path', 'cannot open /var/lib/pets.db'],
    ['an app path', 'missing /app/config'],
    // Secrets and internal addresses.
    ['password=', 'password=hunter2'],
    ['passwd', 'bad passwd'],
    ['secret', 'the secret is out'],
    ['token', 'token expired'],
    ['api_key', 'api_key invalid'],
    ['api-key', 'api-key invalid'],
    ['apikey', 'APIKEY invalid'],
    ['API key with a space', 'Invalid API key abcd'],
    ['access key', 'bad access key'],
    ['Bearer', 'Bearer abc'],
    ['Authorization', 'Authorization failed'],
    ['credential', 'bad credentials'],
    ['private key', 'private key missing'],
    ['session', 'session expired'],
    ['cookie', 'cookie missing'],
    ['user:pass@ URL', 'cannot reach postgres://admin:s3cr3t@db/pets'],
    ['user@ URL', 'cannot reach https://admin@db/pets'],
    ['long base64', 'key QUJDREVGR0hJSktMTU5PUFFSU1RVVldY rejected'],
    ['long base64url', 'id abcdefghijklmnopqrstuvwxyz_-0123456'],
    ['an IPv4 address', 'upstream 10.0.3.17 refused'],
  ];
  for (const [name, value] of notPlain) t.equal(isPlainMessage(value), false, name);
  // 31 base64 characters are still words.
  t.equal(isPlainMessage('id ' + 'a'.repeat(31)), true, '31 characters');
  t.equal(isPlainMessage('id ' + 'a'.repeat(32)), false, '32 characters');
});

t.test('redactForLog: masks secrets', async (t) => {
  const cases: [string, string][] = [
    ['password=hunter2 next', 'password=[redacted] next'],
    ['PASSWORD: hunter2', 'PASSWORD: [redacted]'],
    ['passwd=abc&user=bob', 'passwd=[redacted]&user=bob'],
    ['pass=abc;', 'pass=[redacted];'],
    ['{"password":"hunter2","user":"bob"}', '{"password":"[redacted]","user":"bob"}'],
    ["{'secret': 'shh'}", "{'secret': '[redacted]'}"],
    ['client_secret=abc123', 'client_secret=[redacted]'],
    ['access_token=abc.def', 'access_token=[redacted]'],
    ['api_key=XYZ, api-key: ABC, apikey=DEF', 'api_key=[redacted], api-key: [redacted], apikey=[redacted]'],
    ['API key: XYZ and api key="ABC D"', 'API key: [redacted] and api key="[redacted]"'],
    ['credential=xyz', 'credential=[redacted]'],
    ['session=s1 cookie: c1', 'session=[redacted] cookie: [redacted]'],
    ['Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig', 'Authorization: Bearer [redacted]'],
    ['authorization: bearer abc~+/def==', 'authorization: bearer [redacted]'],
    ['Authorization: Basic dXNlcjpwYXNz', 'Authorization: Basic [redacted]'],
    ['postgres://admin:s3cr3t@db.internal:5432/pets', 'postgres://[redacted]@db.internal:5432/pets'],
    ['see https://user@example.com/x', 'see https://[redacted]@example.com/x'],
    ['mongodb+srv://u:p@cluster/db', 'mongodb+srv://[redacted]@cluster/db'],
    [`key ${'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkw'} end`, 'key [redacted] end'],
    [`${'a'.repeat(32)}`, '[redacted]'],
    [`${'a'.repeat(31)}`, 'a'.repeat(31)],
  ];
  for (const [input, expected] of cases) t.equal(redactForLog(input), expected, input);
});

t.test('redactForLog: leaves plain text, folds whitespace', async (t) => {
  t.equal(redactForLog('Pet 7 was not found.'), 'Pet 7 was not found.');
  t.equal(redactForLog('<html>\n  <body>\r\n\t<h1>500</h1>\n</body></html>'), '<html> <body> <h1>500</h1> </body></html>');
  t.equal(redactForLog('Bearer\n\tabcdef'), 'Bearer [redacted]', 'a secret split over lines');
  t.equal(redactForLog(''), '');
});

t.test('redactForLog: bounded to max characters and an ellipsis', async (t) => {
  t.equal(redactForLog('ab '.repeat(1000)).length, 501);
  t.equal(redactForLog('ab '.repeat(1000)).endsWith('…'), true);
  t.equal(redactForLog('x y'.repeat(10), 10), 'x yx yx yx…');
  t.equal(redactForLog('a b c', 5), 'a b c', 'exactly max: no ellipsis');
  const long = 'word '.repeat(10000);
  t.ok(redactForLog(long, 100).length <= 101);
  // A secret cut at the bound is still masked.
  const cut = 'x '.repeat(245) + 'password=hunter2-is-long';
  const out = redactForLog(cut);
  t.notOk(out.includes('hunter2'), out.slice(-40));
  t.notOk(redactForLog('x '.repeat(248) + 'password=hunter2').includes('hunter'));
});

t.test('redactForLog: a token cut where the input is sliced is still masked', async (t) => {
  // Text before the token shrinks when it is masked, so the part of the token just before the
  // slice point (max * 2) stays in the output, shorter than 32 characters and unmasked.
  const token = 'sk_live_' + 'Q29tcGxldGVseVNlY3JldFRva2VuVmFsdWU';
  for (const before of [980, 990, 995]) {
    const text = 'A'.repeat(before) + ' ' + token;
    const out = redactForLog(text);
    const leaked = token.slice(0, 1000 - before - 1);
    t.notOk(leaked.length > 0 && out.includes(leaked), `${before} bytes before: no prefix of the token in ${JSON.stringify(out)}`);
  }
});

t.test('SecretSet: exact masking whatever the length, longest first, common spellings', async (t) => {
  const set = new SecretSet(['abcd', 'abcdef', '', 'x/y+z', 'k3']);
  t.equal(set.mask('key abcdef and abcd and abcdabcd'), 'key [redacted] and [redacted] and [redacted][redacted]', 'the longer one whole');
  t.equal(set.mask('k3 is 2 chars; k3k3'), '[redacted] is 2 chars; [redacted][redacted]');
  t.equal(set.mask('json "x\\/y+z" url x%2Fy%2Bz raw x/y+z'), 'json "[redacted]" url [redacted] raw [redacted]');
  t.equal(set.contains('no secret here'), false);
  t.equal(set.contains('...abcd...'), true);
  t.equal(set.mask('ABCD is another string'), 'ABCD is another string', 'exact: case matters');
  t.equal(SecretSet.EMPTY.mask('abcd'), 'abcd');
  t.equal(SecretSet.EMPTY.size, 0, 'the empty string is never a secret');
  const more = set.including('zz9');
  t.equal(more.mask('zz9 abcd'), '[redacted] [redacted]');
  t.equal(set.contains('zz9'), false, 'including returns a new set');
  t.equal(set.including(undefined), set);
});

t.test('credentialSecrets: the value, its token, and a Basic password decoded', async (t) => {
  t.strictSame(credentialSecrets('Bearer u9Zq'), ['Bearer u9Zq', 'u9Zq']);
  t.strictSame(credentialSecrets(' bearer  tok.en~ '), ['bearer  tok.en~', 'tok.en~']);
  t.strictSame(credentialSecrets('Basic dXA6cHc0eg=='), ['Basic dXA6cHc0eg==', 'dXA6cHc0eg==', 'up:pw4z', 'pw4z']);
  t.strictSame(credentialSecrets('Basic dXA6'), ['Basic dXA6', 'dXA6', 'up:'], 'an empty password is not a secret');
  t.strictSame(credentialSecrets('rawtokenonly'), ['rawtokenonly']);
});

t.test('redactForLog: the gateway secrets are masked before the cut; a caller-cut prefix loses its last token', async (t) => {
  const set = new SecretSet(['u9Zq']);
  t.equal(redactForLog('upstream: key u9Zq refused', 500, set), 'upstream: key [redacted] refused');
  // A secret straddling the slice point: masked whole before the slice, so no prefix remains.
  const text = 'A '.repeat(499) + 'u9Zq tail';
  t.notOk(redactForLog(text, 500, set).includes('u9'), 'no part at the bound');
  // The caller's window ended inside the secret: "u9" alone is not the secret, so only `cut` helps.
  t.equal(redactForLog('short excerpt then u9', 500, set, true), 'short excerpt then ');
  t.equal(redactForLog('short excerpt then u9', 500, set, false), 'short excerpt then u9', 'without cut the prefix would stay');
});
