// reach.test.mjs — the reach surface of missive-client against a live missived: preferences get
// and put (a bad field is a MissiveError naming it), a named channel's delivery verified with
// verifyWebhook, matching the ChannelDelivery schema of api/openapi.json, and its action link:
// GET shows a page, POST runs the action once, a second POST is 410. Also a message read in the
// reader's language (Message.locale) and a create's expiresAt (Message.expiresAt).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import { Missive, MissiveError, actionLinkToken, deliveryLinks, verifyWebhook } from 'missive-client';
import { recordingFetch, repoRoot, startDaemon, startReceiver, writeTree } from './harness.mjs';

const SECRET = 'the-channel-webhook-secret-0123456789';
const env = { MV_TS_REACH_WH: SECRET, MV_TS_REACH_LINKS: 'a-links-secret-of-at-least-32-bytes!!' };
let receiver, daemon;
const fetcher = recordingFetch();
const as = (user, headers = {}) =>
  new Missive({ baseUrl: daemon.baseUrl, headers: { 'X-User-Id': user, ...headers }, fetch: fetcher });

before(async () => {
  receiver = await startReceiver();
  const dir = writeTree({
    'missive.json': {
      store: 'sqlite:missive.db', templates: 'templates', auth: { mode: 'headers' },
      webhookSecretEnv: 'MV_TS_REACH_WH', outbox: { pollMs: 50 },
      channels: { sms: { webhook: `${receiver.url}/sms` } },
      links: { baseUrl: 'http://127.0.0.1:1', secretEnv: 'MV_TS_REACH_LINKS' },
    },
    'templates/offer.json': {
      templateCd: 'offer', type: 'request', category: 'offers',
      receiverContent: { title: 'Flat {{flat}}', short: '', long: '' },
      prepare: { toUser: '{{to}}' }, channels: { sms: { title: 'Book {{flat}}?' } },
      locales: { de: { receiverContent: { title: 'Wohnung {{flat}}' } } },
      actions: [{ actionCd: 'book', name: 'Book', variant: 'primary', receiver: true }],
    },
  });
  daemon = await startDaemon(dir, env);
});

after(async () => {
  const code = await daemon?.stop();
  await receiver?.close();
  assert.equal(code, 0);
});

test('preferences are put and read back; an unknown channel is a MissiveError naming it', async () => {
  const bob = as('bob');
  assert.deepEqual(await bob.preferences.get(), { channels: {}, categories: {}, digest: {}, locale: null });
  const stored = await bob.preferences.put({ categories: { offers: { sms: true } }, locale: 'de' });
  assert.equal(stored.locale, 'de');
  assert.deepEqual((await bob.preferences.get()).categories, { offers: { sms: true } });
  await assert.rejects(bob.preferences.put({ channels: { fax: true } }), (e) =>
    e instanceof MissiveError && e.status === 400 && e.code === 'invalid_argument' && /channels\.fax/.test(e.message));
});

test('a channel delivery verifies, carries a link, and the link runs the action once', async () => {
  await as('ana').messages.create('offer', { to: 'carol', flat: '3B' });
  for (let i = 0; i < 200 && !receiver.requests.some((r) => r.path === '/sms'); i++) await new Promise((r) => setTimeout(r, 25));
  const req = receiver.requests.find((r) => r.path === '/sms');
  assert.ok(req, 'the sms channel received the delivery');
  assert.equal(await verifyWebhook(SECRET, req.headers, req.raw), true);
  /** @type {import('missive-client').ChannelDelivery} */
  const delivery = JSON.parse(req.raw);
  assert.equal(req.headers['idempotency-key'], delivery.deliveryId);
  const doc = JSON.parse(readFileSync(join(repoRoot, 'api/openapi.json'), 'utf8'));
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  ajv.addFormat('uri', /^[a-z][a-z0-9+.-]*:/i);
  ajv.addSchema(doc, 'openapi.json');
  const validate = ajv.compile({ $ref: 'openapi.json#/components/schemas/ChannelDelivery' });
  assert.ok(validate(delivery), ajv.errorsText(validate.errors));
  assert.equal(delivery.to.contact, null, 'no directory: no contact');
  assert.equal(delivery.content.title, 'Book 3B?');
  const links = deliveryLinks(delivery);
  assert.ok(actionLinkToken(links.book));
  const path = new URL(links.book).pathname;
  const page = await fetcher(`${daemon.baseUrl}${path}`);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<form method="post">/);
  const first = await fetcher(`${daemon.baseUrl}${path}`, { method: 'POST' });
  assert.equal(first.status, 200);
  await first.text();
  const again = await fetcher(`${daemon.baseUrl}${path}`, { method: 'POST' });
  assert.equal(again.status, 410);
  await again.text();
  const msg = (await as('carol').messages.list({ archived: true })).messages[0];
  assert.equal(msg.actionCd, 'book');
});

test('a message read in the reader\'s language says which; a create\'s expiresAt is the message\'s', async () => {
  const expiresAt = Date.now() + 3_600_000;
  const { messages } = await as('ana').messages.create('offer', { to: 'dora', flat: '4C', expiresAt });
  assert.equal(messages[0].expiresAt, expiresAt);
  const german = await as('dora', { 'Accept-Language': 'de-AT' }).messages.get(messages[0].id);
  assert.equal(german.locale, 'de');
  assert.equal(german.receiverContent.title, 'Wohnung 4C');
  assert.equal(german.expiresAt, expiresAt);
  const plain = await as('dora').messages.get(messages[0].id);
  assert.equal(plain.receiverContent.title, 'Flat 4C');
  assert.ok(plain.locale === undefined || plain.locale === null, String(plain.locale));
  await assert.rejects(as('ana').messages.create('offer', { to: 'dora', flat: '4D', expiresAt: Date.now() - 1000 }),
    (e) => e instanceof MissiveError && e.status === 400 && e.code === 'invalid_argument' && /expiresAt/.test(e.message));
});
