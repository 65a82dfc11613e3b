// webhook.test.mjs — verifyWebhook against signatures made by the standardwebhooks package (an
// independent implementation): valid, rotated secrets, tampering, the 5-minute tolerance both
// ways, malformed headers, and every header container an application may hold.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, webhookSecretBytes } from 'missive-client';

const SECRET = 'whsec_' + Buffer.from('a-secret-for-the-webhook-tests!!').toString('base64');
const OTHER = 'whsec_' + Buffer.from('another-secret-of-the-same-size').toString('base64');
const body = JSON.stringify({ message: { id: 'abc' }, action: { actionCd: 'ack' } });

function signed(secret, at = new Date(), id = 'msg_1') {
  const signature = new Webhook(secret).sign(id, at, body);
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature };
}

test('a webhook signed by standardwebhooks verifies, in every header container', async () => {
  const h = signed(SECRET);
  assert.equal(await verifyWebhook(SECRET, h, body), true);
  assert.equal(await verifyWebhook(SECRET, new Headers(h), body), true);
  assert.equal(await verifyWebhook(SECRET, Object.entries(h), body), true);
  assert.equal(await verifyWebhook([SECRET], h, new TextEncoder().encode(body)), true);
  const upper = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toUpperCase(), v]));
  assert.equal(await verifyWebhook(SECRET, upper, body), true);
});

test('during a rotation any of several signatures and any of several secrets match', async () => {
  const a = signed(SECRET), b = signed(OTHER);
  const both = { ...a, 'webhook-signature': `${b['webhook-signature']} ${a['webhook-signature']}` };
  assert.equal(await verifyWebhook(SECRET, both, body), true);
  assert.equal(await verifyWebhook(OTHER, both, body), true);
  assert.equal(await verifyWebhook([OTHER, SECRET], a, body), true);
  assert.equal(await verifyWebhook(OTHER, a, body), false);
});

test('a changed body, id or timestamp, or a foreign secret, fails', async () => {
  const h = signed(SECRET);
  assert.equal(await verifyWebhook(SECRET, h, body.replace('ack', 'nak')), false);
  assert.equal(await verifyWebhook(SECRET, { ...h, 'webhook-id': 'msg_2' }, body), false);
  assert.equal(await verifyWebhook(SECRET, { ...h, 'webhook-timestamp': String(Number(h['webhook-timestamp']) + 1) }, body), false);
  assert.equal(await verifyWebhook('whsec_' + Buffer.from('x').toString('base64'), h, body), false);
});

test('timestamps more than five minutes away are refused, either way', async () => {
  const now = Date.now();
  assert.equal(await verifyWebhook(SECRET, signed(SECRET, new Date(now - 290_000)), body), true);
  assert.equal(await verifyWebhook(SECRET, signed(SECRET, new Date(now - 310_000)), body), false);
  assert.equal(await verifyWebhook(SECRET, signed(SECRET, new Date(now + 310_000)), body), false);
  assert.equal(await verifyWebhook(SECRET, signed(SECRET, new Date(now - 310_000)), body, { toleranceSeconds: 600 }), true);
});

test('missing or malformed headers fail without throwing', async () => {
  const h = signed(SECRET);
  for (const drop of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
    const copy = { ...h };
    delete copy[drop];
    assert.equal(await verifyWebhook(SECRET, copy, body), false, drop);
  }
  assert.equal(await verifyWebhook(SECRET, { ...h, 'webhook-timestamp': 'soon' }, body), false);
  assert.equal(await verifyWebhook(SECRET, { ...h, 'webhook-signature': 'v2,abc v1,!!!' }, body), false);
  assert.equal(await verifyWebhook(SECRET, { ...h, 'webhook-signature': '' }, body), false);
});

test('secrets decode as the server reads them: whsec_ base64, else raw bytes', () => {
  assert.deepEqual(Buffer.from(webhookSecretBytes('whsec_aGVsbG8=')), Buffer.from('hello'));
  assert.deepEqual(Buffer.from(webhookSecretBytes('plain')), Buffer.from('plain'));
  assert.throws(() => webhookSecretBytes('whsec_***'), TypeError);
});
