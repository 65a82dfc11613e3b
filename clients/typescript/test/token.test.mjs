// token.test.mjs — the `token` option against missived in jwt mode (HS256 from auth.secretEnv):
// a token string or a function called per request; a bad token is MissiveError 401.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { Missive, MissiveError } from 'missive-client';
import { recordingFetch, startDaemon, writeTree } from './harness.mjs';

const SECRET = '0123456789abcdef0123456789abcdef-jwt';
let daemon;
const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
function jwt(claims, secret = SECRET) {
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

before(async () => {
  const dir = writeTree({
    'missive.json': { store: 'sqlite:missive.db', templates: 'templates', auth: { mode: 'jwt', secretEnv: 'MV_TS_JWT' } },
    'templates/hello.json': {
      templateCd: 'hello', senderContent: { title: 'hi', short: '', long: '' }, receiverContent: { title: 'hi {{who}}', short: '', long: '' },
      prepare: { toUser: '{{who}}' }, actions: [],
    },
  });
  daemon = await startDaemon(dir, { MV_TS_JWT: SECRET });
});
after(async () => assert.equal(await daemon.stop(), 0));

test('a bearer token, given as a string or a function, authenticates every call', async () => {
  const exp = Math.floor(Date.now() / 1000) + 600;
  const ana = new Missive({ baseUrl: daemon.baseUrl, token: jwt({ sub: 'ana', exp }), fetch: recordingFetch() });
  const { messages } = await ana.messages.create('hello', { who: 'bob' });
  assert.equal(messages[0].fromUser, 'ana');
  let calls = 0;
  const bob = new Missive({ baseUrl: daemon.baseUrl, token: async () => { calls++; return jwt({ sub: 'bob', exp }); }, fetch: recordingFetch() });
  assert.equal((await bob.messages.count()).count, 1);
  assert.equal((await bob.messages.get(messages[0].id)).toUser, 'bob');
  assert.equal(calls, 2);
  const forged = new Missive({ baseUrl: daemon.baseUrl, token: jwt({ sub: 'bob', exp }, 'not-the-secret-not-the-secret-xx'), fetch: recordingFetch() });
  await assert.rejects(forged.messages.count(), (e) => e instanceof MissiveError && e.status === 401 && e.code === 'unauthenticated' && typeof e.requestId === 'string');
});

test('a baseUrl that is not http(s) is refused at construction', () => {
  assert.throws(() => new Missive({ baseUrl: 'ftp://x' }), TypeError);
});
