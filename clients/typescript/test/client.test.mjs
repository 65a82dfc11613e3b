// client.test.mjs — missive-client against a live missived (started here on a free port):
// every route of api/openapi.json at least once, an idempotent replay, two 409 races, a 422
// mismatch, a webhook verified by verifyWebhook and by the standardwebhooks package (rotation
// included), approvals, sagas, cursor iteration over 250 messages, the inbox marks and counts,
// the event stream (ticket, a live message.created, resuming with Last-Event-ID), the saga and
// approval lists, /livez and /readyz, and the /ui files.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { Webhook } from 'standardwebhooks';
import { Missive, MissiveError, verifyWebhook } from 'missive-client';
import { recordingFetch, repoRoot, startDaemon, startReceiver, writeTree } from './harness.mjs';

const NEW_RAW = Buffer.from('the-new-webhook-secret-0123456789');
const NEW_SECRET = 'whsec_' + NEW_RAW.toString('base64');
const OLD_SECRET = 'the-old-webhook-secret-raw-bytes';
const env = {
  MV_TS_WH_NEW: NEW_SECRET,
  MV_TS_WH_OLD: OLD_SECRET,
  MV_TS_APPROVALS: 'an-approval-secret-of-at-least-32-bytes!',
};

let receiver, daemon, daemon2, ana, bob, boss, admin;
const held = () => {
  let release;
  const promise = new Promise((r) => { release = r; });
  return { promise, release };
};
async function until(cond, ms = 5000) {
  for (const t0 = Date.now(); !cond(); await new Promise((r) => setTimeout(r, 5))) {
    if (Date.now() - t0 > ms) throw new Error('timed out waiting');
  }
}
const fetcher = recordingFetch();
const as = (user, extra = {}, d = daemon) => new Missive({ baseUrl: d.baseUrl, headers: { 'X-User-Id': user, ...extra }, fetch: fetcher });

before(async () => {
  receiver = await startReceiver();
  const R = receiver.url;
  const content = (title) => ({ title, short: '', long: '' });
  const dir = writeTree({
    'missive.json': {
      store: 'sqlite:missive.db', templates: 'templates', sagas: 'sagas', auth: { mode: 'headers' },
      adminPermissionKey: 'is.admin', list: { defaultLimit: 50, maxLimit: 100 },
      leases: { clientRequestWaitMs: 0, actionMs: 30000 },
      webhookSecretEnv: ['MV_TS_WH_NEW', 'MV_TS_WH_OLD'],
      webhooks: { timeoutMs: 5000 },
      approvals: { secretEnv: 'MV_TS_APPROVALS' },
    },
    'templates/note.json': {
      templateCd: 'note', type: 'info', senderContent: content('To {{to}}'), receiverContent: content('{{title}}'),
      prepare: { toUser: '{{to}}' },
      actions: [
        { actionCd: 'ack', name: 'Acknowledge', variant: 'primary', receiver: true, isDefault: true, handler: { webhook: `${R}/hooks/ack` } },
        { actionCd: 'refund', name: 'Refund', variant: 'danger', receiver: true, approval: { capability: 'refunds.large' }, handler: { webhook: `${R}/hooks/refund` } },
        { actionCd: 'withdraw', name: 'Withdraw', variant: 'secondary', sender: true, handler: null },
      ],
    },
    'templates/slow.json': {
      templateCd: 'slow', senderContent: content('slow'), receiverContent: content('slow'),
      prepare: { webhook: `${R}/prepare` }, actions: [],
    },
    'templates/bulk.json': {
      templateCd: 'bulk', senderContent: content('bulk {{n}}'), receiverContent: content('item {{n}}'),
      prepare: { toUser: '{{to}}', fanOut: 'items' }, actions: [],
    },
    'sagas/trip.json': {
      name: 'trip', capability: 'trips.book', retry: { maxAttempts: 1, backoffMs: { initial: 10, max: 100 } },
      steps: [
        { name: 'book', run: { webhook: `${R}/saga/book` }, compensate: { webhook: `${R}/saga/unbook` } },
        { name: 'pay', run: { webhook: `${R}/saga/pay` }, compensate: { webhook: `${R}/saga/refund` } },
      ],
    },
  });
  daemon = await startDaemon(dir, env);
  // a second daemon on the same store: the races below send their two requests to different
  // daemons, as a load balancer would, so neither waits behind the other inside one process
  daemon2 = await startDaemon(dir, env);
  ana = as('ana');
  bob = as('bob');
  boss = as('boss', { 'X-User-Permissions': 'approvals.decide' });
  admin = as('root', { 'X-User-Permissions': 'is.admin' });
});

after(async () => {
  const code2 = await daemon2?.stop();
  assert.equal(code2, 0, 'the second missived exits 0 on SIGTERM');
  const code = await daemon?.stop();
  await receiver?.close();
  assert.equal(code, 0, 'missived exits 0 on SIGTERM');
});

describe('messages', () => {
  test('create, get, list, count, actions and an action whose webhook both verifiers accept', async () => {
    const created = await ana.messages.create('note', { to: 'bob', title: 'Hello Bob' });
    assert.equal(created.replayed, false);
    assert.match(created.idempotencyKey, /^[0-9a-f-]{36}$/);
    assert.equal(created.messages.length, 1);
    const m = created.messages[0];
    assert.equal(m.fromUser, 'ana');
    assert.equal(m.receiverContent.title, 'Hello Bob');

    assert.equal((await bob.messages.get(m.id)).id, m.id);
    const page = await bob.messages.list({ limit: 10 });
    assert.ok(page.messages.some((x) => x.id === m.id));
    assert.ok((await bob.messages.count()).count >= 1);
    const actions = await bob.messages.actions(m.id, 'receiver');
    assert.deepEqual(actions.actions.map((a) => a.actionCd), ['ack', 'refund']);

    receiver.handlers['/hooks/ack'] = () => ({ status: 200, body: { acknowledged: true } });
    const before = receiver.requests.length;
    const outcome = await bob.messages.act(m.id, 'ack', { note: 'thanks' });
    assert.deepEqual(outcome, { status: 'done', result: { acknowledged: true } });
    const hook = receiver.requests.slice(before).find((r) => r.path === '/hooks/ack');
    assert.ok(hook, 'the handler webhook arrived');
    assert.equal(hook.headers['webhook-id'], hook.headers['idempotency-key']);
    // ours: with both secrets, with the new one alone, and with only the old one (rotation)
    assert.equal(await verifyWebhook([NEW_SECRET, OLD_SECRET], hook.headers, hook.raw), true);
    assert.equal(await verifyWebhook(NEW_SECRET, hook.headers, hook.raw), true);
    assert.equal(await verifyWebhook(OLD_SECRET, hook.headers, hook.raw), true);
    assert.equal(await verifyWebhook('another-secret', hook.headers, hook.raw), false);
    assert.equal(await verifyWebhook(NEW_SECRET, hook.headers, hook.raw + ' '), false);
    assert.equal(await verifyWebhook(NEW_SECRET, hook.headers, hook.raw, { now: Date.now() + 6 * 60 * 1000 }), false);
    // an independent implementation: the standardwebhooks package
    const hdrs = { 'webhook-id': hook.headers['webhook-id'], 'webhook-timestamp': hook.headers['webhook-timestamp'], 'webhook-signature': hook.headers['webhook-signature'] };
    assert.deepEqual(new Webhook(NEW_SECRET).verify(hook.raw, hdrs), JSON.parse(hook.raw));
    assert.deepEqual(new Webhook(Buffer.from(OLD_SECRET).toString('base64')).verify(hook.raw, hdrs), JSON.parse(hook.raw));
    assert.throws(() => new Webhook(Buffer.from('wrong').toString('base64')).verify(hook.raw, hdrs));
    // X-Missive-Signature stays, keyed with the first (new) secret
    const xsig = 'sha256=' + createHmac('sha256', NEW_RAW).update(hook.raw).digest('hex');
    assert.equal(hook.headers['x-missive-signature'], xsig);

    const archived = await bob.messages.get(m.id);
    assert.equal(archived.actionState, 'archived');
    await assert.rejects(bob.messages.act(m.id, 'ack'), (e) => e instanceof MissiveError && e.status === 410 && e.code === 'message_archived');
  });

  test('a create retried with its key is replayed, and the same key with another payload is 422', async () => {
    const first = await ana.messages.create('note', { to: 'bob', title: 'once' }, { idempotencyKey: 'ts-replay-1' });
    const again = await ana.messages.create('note', { to: 'bob', title: 'once' }, { idempotencyKey: 'ts-replay-1' });
    assert.equal(again.replayed, true);
    assert.deepEqual(again.messages.map((m) => m.id), first.messages.map((m) => m.id));
    await assert.rejects(
      ana.messages.create('note', { to: 'bob', title: 'twice' }, { idempotencyKey: 'ts-replay-1' }),
      (e) => e instanceof MissiveError && e.status === 422 && e.code === 'client_request_mismatch',
    );
    const fresh = await ana.messages.create('note', { to: 'bob', title: 'once' });
    assert.notEqual(fresh.messages[0].id, first.messages[0].id, 'a fresh key per create');
  });

  test('two creates racing on one key (two daemons, one store): one succeeds, the other is 409 client_request_pending', async () => {
    const gate = held();
    let calls = 0;
    receiver.handlers['/prepare'] = async () => {
      calls++;
      await gate.promise;
      return { status: 200, body: { toUser: 'bob' } };
    };
    const first = ana.messages.create('slow', { x: 1 }, { idempotencyKey: 'ts-race-1' });
    await until(() => calls === 1); // the first holds the reservation, waiting on its prepare hook
    const second = await as('ana', {}, daemon2).messages.create('slow', { x: 1 }, { idempotencyKey: 'ts-race-1' }).catch((e) => e);
    gate.release();
    const done = await first;
    assert.equal(done.messages.length, 1);
    assert.ok(second instanceof MissiveError);
    assert.equal(second.status, 409);
    assert.equal(second.code, 'client_request_pending');
    assert.ok(second.retryAfter >= 1);
    assert.equal(calls, 1, 'the prepare hook ran once');
  });

  test('two presses racing on one message (two daemons, one store): one runs the handler, the other is 409 action_conflict', async () => {
    const { messages: [m] } = await ana.messages.create('note', { to: 'bob', title: 'race' });
    const gate = held();
    let calls = 0;
    receiver.handlers['/hooks/ack'] = async () => {
      calls++;
      await gate.promise;
      return { status: 200, body: { ok: 1 } };
    };
    const first = bob.messages.act(m.id, 'ack');
    await until(() => calls === 1);
    const second = await as('bob', {}, daemon2).messages.act(m.id, 'ack').catch((e) => e);
    gate.release();
    assert.deepEqual(await first, { status: 'done', result: { ok: 1 } });
    assert.ok(second instanceof MissiveError);
    assert.equal(second.status, 409);
    assert.equal(second.code, 'action_conflict');
    assert.equal(calls, 1, 'the handler ran once');
  });

  test('errors carry status, code and message; invisible messages are 404', async () => {
    const { messages: [m] } = await ana.messages.create('note', { to: 'bob', title: 'private' });
    await assert.rejects(as('mallory').messages.get(m.id), (e) => e.status === 404 && e.code === 'message_not_found');
    await assert.rejects(bob.messages.get('nope'), (e) => e.status === 400 && e.code === 'invalid_argument' && /24-character/.test(e.message));
    await assert.rejects(ana.messages.create('no-such-template', {}), (e) => e.status === 404 && e.code === 'template_not_found');
    const anonymous = new Missive({ baseUrl: daemon.baseUrl, fetch: fetcher });
    await assert.rejects(anonymous.messages.count(), (e) => e instanceof MissiveError && e.status === 401 && e.code === 'unauthenticated');
    await assert.rejects(bob.messages.list({ cursor: '!!' }), (e) => e.status === 400 && e.code === 'invalid_pagination');
  });

  test('listAll walks 250 messages across cursor pages, newest first, each once', async () => {
    const items = Array.from({ length: 250 }, (_, n) => ({ to: 'carol', n }));
    const created = await ana.messages.create('bulk', { items });
    assert.equal(created.messages.length, 250);
    const carol = as('carol');
    const seen = [];
    for await (const m of carol.messages.listAll({ limit: 100 })) seen.push(m);
    assert.equal(seen.length, 250);
    assert.equal(new Set(seen.map((m) => m.id)).size, 250);
    for (let i = 1; i < seen.length; i++) {
      const a = seen[i - 1], b = seen[i];
      assert.ok(a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id), 'newest first');
    }
    assert.deepEqual(new Set(seen.map((m) => m.id)), new Set(created.messages.map((m) => m.id)));
    const first = await carol.messages.list({ limit: 100 });
    assert.equal(first.messages.length, 100);
    assert.equal(typeof first.nextCursor, 'string');
  });
});

describe('inbox', () => {
  test('seen, read, unread, dismiss, undismiss, snooze and unsnooze change only the caller\'s viewer state, and counts follow the filters', async () => {
    const dora = as('dora');
    const { messages: [m1] } = await ana.messages.create('note', { to: 'dora', title: 'one' });
    const { messages: [m2] } = await ana.messages.create('note', { to: 'dora', title: 'two' });
    const { messages: [m3] } = await ana.messages.create('note', { to: 'dora', title: 'three' });
    assert.deepEqual((await dora.messages.get(m1.id)).viewer, { seenAt: null, readAt: null, dismissedAt: null, snoozedUntil: null, remindedAt: null });
    assert.equal(m1.lastFailure, null);
    assert.deepEqual(await dora.messages.count(), { count: 3, unseen: 3, unread: 3 });

    const seen = await dora.messages.markSeen(m1.id);
    assert.equal(seen.id, m1.id);
    assert.equal(typeof seen.viewer.seenAt, 'number');
    assert.equal(seen.viewer.readAt, null);
    assert.equal(seen.actionState, 'active', 'viewer state never changes actionState');
    const again = await dora.messages.markSeen(m1.id);
    assert.equal(again.viewer.seenAt, seen.viewer.seenAt, 'marking again keeps the first timestamp');
    assert.deepEqual(await dora.messages.count(), { count: 3, unseen: 2, unread: 3 });
    assert.equal((await dora.messages.count({ seen: false })).count, 2);
    assert.equal((await dora.messages.count({ seen: true })).count, 1);

    const read = await dora.messages.markRead(m2.id);
    assert.equal(typeof read.viewer.readAt, 'number');
    assert.equal(typeof read.viewer.seenAt, 'number', 'read implies seen');
    assert.deepEqual(await dora.messages.count(), { count: 3, unseen: 1, unread: 2 });
    assert.equal((await dora.messages.count({ read: true })).count, 1);
    const unread = await dora.messages.markUnread(m2.id);
    assert.equal(unread.viewer.readAt, null);
    assert.equal(unread.viewer.seenAt, read.viewer.seenAt, 'unread clears readAt only');

    const dismissed = await dora.messages.dismiss(m3.id);
    assert.equal(typeof dismissed.viewer.dismissedAt, 'number');
    assert.equal((await dora.messages.count()).count, 2, 'dismissed messages leave the inbox');
    assert.equal((await dora.messages.count({ dismissed: true })).count, 1);
    assert.deepEqual((await dora.messages.list({ dismissed: true })).messages.map((m) => m.id), [m3.id]);
    assert.equal((await ana.messages.get(m3.id)).viewer.dismissedAt, null, 'the sender\'s state is their own');
    const back = await dora.messages.undismiss(m3.id);
    assert.equal(back.viewer.dismissedAt, null);
    assert.equal((await dora.messages.count()).count, 3);

    const until = Date.now() + 3600000;
    const snoozed = await dora.messages.snooze(m3.id, until);
    assert.equal(snoozed.viewer.snoozedUntil, until);
    assert.equal((await dora.messages.count()).count, 2, 'snoozed messages leave the inbox');
    assert.deepEqual((await dora.messages.list({ snoozed: true })).messages.map((m) => m.id), [m3.id]);
    assert.equal((await ana.messages.get(m3.id)).viewer.snoozedUntil, null, 'the sender\'s state is their own');
    await assert.rejects(dora.messages.snooze(m3.id, 1), (e) => e.status === 400 && e.code === 'invalid_argument' && /until/.test(e.message));
    await assert.rejects(ana.messages.snooze(m3.id, until), (e) => e.status === 404 && e.code === 'message_not_found');
    assert.equal((await dora.messages.unsnooze(m3.id)).viewer.snoozedUntil, null);
    assert.equal((await dora.messages.count()).count, 3);

    assert.equal((await dora.messages.count({ type: 'info', templateCd: 'note' })).count, 3);
    assert.equal((await dora.messages.count({ templateCd: 'bulk' })).count, 0);
    await assert.rejects(dora.messages.count({ read: 'maybe' }), (e) => e.status === 400 && e.code === 'invalid_argument');
    await assert.rejects(as('mallory').messages.markSeen(m1.id), (e) => e.status === 404 && e.code === 'message_not_found');
    await assert.rejects(dora.messages.markRead('nope'), (e) => e.status === 400 && e.code === 'invalid_argument');
  });

  test('seen-all and read-all mark what the caller sees, filtered, and answer how many changed', async () => {
    const erin = as('erin');
    await ana.messages.create('note', { to: 'erin', title: 'a' });
    const { messages: [b] } = await ana.messages.create('note', { to: 'erin', title: 'b' });
    await ana.messages.create('bulk', { items: [{ to: 'erin', n: 1 }] });
    await erin.messages.markSeen(b.id);
    assert.deepEqual(await erin.messages.markAllSeen({ templateCd: 'note' }), { updated: 1 });
    assert.deepEqual(await erin.messages.count(), { count: 3, unseen: 1, unread: 3 });
    assert.deepEqual(await erin.messages.markAllRead({ before: 0 }), { updated: 0 });
    assert.deepEqual(await erin.messages.markAllRead(), { updated: 3 });
    assert.deepEqual(await erin.messages.count(), { count: 3, unseen: 0, unread: 0 });
    assert.deepEqual(await erin.messages.markAllSeen(), { updated: 0 });
    assert.equal((await bob.messages.get(b.id).catch((e) => e)).status, 404, 'another user\'s inbox is untouched (and invisible)');
  });
});

describe('live updates', () => {
  /** The next event matching pred, or a rejection after ms. */
  async function nextEvent(it, pred, ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('no matching event in time');
      let timer;
      const r = await Promise.race([it.next(), new Promise((_, rej) => { timer = setTimeout(() => rej(new Error('no matching event in time')), left); })]);
      clearTimeout(timer);
      if (r.done) throw new Error('the stream ended');
      if (pred(r.value)) return r.value;
    }
  }

  test('a stream-ticket stream receives message.created for a message created after connecting, and resumes with Last-Event-ID', async () => {
    const ticket = await as('fay').messages.createStreamTicket();
    assert.equal(typeof ticket.ticket, 'string');
    assert.ok(ticket.expiresAt > Date.now() && ticket.expiresAt <= Date.now() + 61000, 'valid for about 60 s');
    const anonymous = new Missive({ baseUrl: daemon.baseUrl, fetch: fetcher });
    await assert.rejects(anonymous.messages.count(), (e) => e.status === 401, 'no other route accepts a ticket');

    const stream = anonymous.messages.stream({ ticket: ticket.ticket, reconnect: false });
    const it = stream[Symbol.asyncIterator]();
    try {
      const first = await nextEvent(it, () => true);
      assert.equal(first.event, 'counts', 'a new stream starts with the counts');
      assert.deepEqual(first.data, { count: 0, unseen: 0, unread: 0 });
      const { messages: [m1] } = await ana.messages.create('note', { to: 'fay', title: 'live one' });
      const created = await nextEvent(it, (e) => e.event === 'message.created');
      assert.equal(created.data.id, m1.id);
      assert.equal(created.data.receiverContent.title, 'live one');
      assert.deepEqual(created.data.viewer, { seenAt: null, readAt: null, dismissedAt: null, snoozedUntil: null, remindedAt: null });
      assert.match(created.id, /^\d+$/);
      const counts = await nextEvent(it, (e) => e.event === 'counts');
      assert.deepEqual(counts.data, { count: 1, unseen: 1, unread: 1 });
      stream.close();

      // while nobody listens: a second message and a mark; resuming replays both, in order
      const { messages: [m2] } = await ana.messages.create('note', { to: 'fay', title: 'missed' });
      await as('fay').messages.markRead(m1.id);
      const resumed = as('fay').messages.stream({ lastEventId: created.id, reconnect: false });
      const rit = resumed[Symbol.asyncIterator]();
      try {
        const replayed = await nextEvent(rit, (e) => e.event !== 'counts');
        assert.equal(replayed.event, 'message.created');
        assert.equal(replayed.data.id, m2.id, 'the first event after the resume point, not m1 again');
        assert.ok(Number(replayed.id) > Number(created.id));
        const updated = await nextEvent(rit, (e) => e.event !== 'counts');
        assert.equal(updated.event, 'message.updated');
        assert.equal(updated.data.id, m1.id);
        assert.equal(typeof updated.data.viewer.readAt, 'number');
        assert.equal(resumed.lastEventId, updated.id);
      } finally {
        resumed.close();
      }
    } finally {
      stream.close();
    }
    await assert.rejects(async () => { for await (const _ of anonymous.messages.stream({ ticket: 'v1.forged.ticket', reconnect: false })) { /* nothing */ } },
      (e) => e instanceof MissiveError && e.status === 401);
  });
});

describe('approvals', () => {
  test('an action needing approval: 202, get, decide, then resume with the token', async () => {
    const { messages: [m] } = await ana.messages.create('note', { to: 'bob', title: 'refund?' });
    const pending = await bob.messages.act(m.id, 'refund', { amount: 900 });
    assert.equal(pending.status, 'approval_required');
    const seen = await bob.approvals.get(pending.approvalId);
    assert.equal(seen.state, 'pending');
    assert.equal(seen.principalId, 'bob');
    assert.equal(seen.capability, 'refunds.large');
    await assert.rejects(bob.messages.act(m.id, 'refund', { amount: 900 }, { resumeToken: pending.resumeToken }),
      (e) => e.status === 409 && e.code === 'approval_pending');
    await assert.rejects(bob.approvals.decide(pending.approvalId, 'approved'), (e) => e.status === 403 && e.code === 'forbidden');
    const decided = await boss.approvals.decide(pending.approvalId, 'approved');
    assert.equal(decided.state, 'approved');
    assert.equal(decided.decidedBy, 'boss');
    receiver.handlers['/hooks/refund'] = () => ({ status: 200, body: { refunded: 900 } });
    const done = await bob.messages.act(m.id, 'refund', { amount: 900 }, { resumeToken: pending.resumeToken });
    assert.deepEqual(done, { status: 'done', result: { refunded: 900 } });
  });
  test('the approval list: approvers see the tenant\'s, a principal their own, anyone else none', async () => {
    const { messages: [m] } = await ana.messages.create('note', { to: 'bob', title: 'refund again?' });
    const pending = await bob.messages.act(m.id, 'refund', { amount: 50 });
    assert.equal(pending.status, 'approval_required');
    const forBoss = await boss.approvals.list({ state: 'pending' });
    assert.ok(forBoss.approvals.some((a) => a.approvalId === pending.approvalId));
    assert.ok(forBoss.approvals.every((a) => a.state === 'pending'));
    const own = await bob.approvals.list({ state: 'pending' });
    assert.deepEqual(own.approvals.map((a) => a.approvalId), [pending.approvalId]);
    assert.deepEqual((await as('mallory').approvals.list()).approvals, []);
    const consumed = await boss.approvals.list({ state: 'consumed' });
    assert.ok(consumed.approvals.length >= 1 && consumed.approvals.every((a) => a.state === 'consumed'));
    await assert.rejects(boss.approvals.list({ state: 'maybe' }), (e) => e.status === 400);
  });
});

describe('sagas', () => {
  test('start, replay, mismatch, manual review, resolve, resume, compensate and get', async () => {
    let payCalls = 0;
    receiver.handlers['/saga/book'] = () => ({ status: 200, body: { booking: 'B1' } });
    receiver.handlers['/saga/pay'] = () => (++payCalls === 1 ? { status: 500, body: { e: 1 } } : { status: 200, body: { paid: true } });
    const s = await admin.sagas.start('trip', 'trip-1', { city: 'Porto' });
    assert.equal(s.state, 'manual-review');
    assert.equal(s.replayed, false);
    const pay = s.steps.find((x) => x.name === 'pay');
    assert.equal(pay.state, 'ambiguous');
    const replay = await admin.sagas.start('trip', 'trip-1', { city: 'Porto' });
    assert.equal(replay.replayed, true);
    await assert.rejects(admin.sagas.start('trip', 'trip-1', { city: 'Lisbon' }), (e) => e.status === 422 && e.code === 'saga_mismatch');
    await assert.rejects(ana.sagas.get('trip-1'), (e) => e.status === 403 && e.code === 'forbidden');

    const resolved = await admin.sagas.resolve('trip-1', { kind: 'execution', step: 'pay', effectId: pay.effectId, outcome: 'committed', result: { paid: true } });
    assert.equal(resolved.steps.find((x) => x.name === 'pay').state, 'committed');
    const resumed = await admin.sagas.resume('trip-1');
    assert.equal(resumed.state, 'completed');
    const unchanged = await admin.sagas.compensate('trip-1');
    assert.equal(unchanged.state, 'completed');
    const got = await admin.sagas.get('trip-1');
    assert.equal(got.sagaId, 'trip-1');
    assert.equal(got.definition, 'trip');
    await assert.rejects(admin.sagas.get('no-such-saga'), (e) => e.status === 404 && e.code === 'saga_not_found');
  });
  test('the saga list pages by cursor, filters by state and definition, and is for admins only', async () => {
    receiver.handlers['/saga/pay'] = () => ({ status: 200, body: { paid: true } });
    const s2 = await admin.sagas.start('trip', 'trip-2', { city: 'Faro' });
    assert.equal(s2.state, 'completed');
    const first = await admin.sagas.list({ limit: 1 });
    assert.equal(first.sagas.length, 1);
    assert.equal(typeof first.nextCursor, 'string');
    const second = await admin.sagas.list({ limit: 1, cursor: first.nextCursor });
    assert.equal(second.sagas.length, 1);
    assert.deepEqual(new Set([first.sagas[0].sagaId, second.sagas[0].sagaId]), new Set(['trip-1', 'trip-2']));
    const done = await admin.sagas.list({ state: 'completed', definition: 'trip' });
    assert.deepEqual(done.sagas.map((x) => x.sagaId).sort(), ['trip-1', 'trip-2']);
    assert.deepEqual((await admin.sagas.list({ state: 'manual-review' })).sagas, []);
    await assert.rejects(ana.sagas.list(), (e) => e.status === 403 && e.code === 'forbidden');
    await assert.rejects(admin.sagas.list({ cursor: '!!' }), (e) => e.status === 400 && e.code === 'invalid_pagination');
  });
  test('client.admin: the tenant\'s messages, deliveries, timers and the saga and message timelines, for admins only', async () => {
    const tl = await admin.admin.sagaTimeline('trip-1');
    assert.equal(tl.sagaId, 'trip-1');
    assert.equal(tl.entries[0].event, 'sagaStarted');
    assert.ok(tl.entries.some((e) => e.event === 'stepFinished' && typeof e.step === 'string'));
    const page = await admin.admin.messages({ limit: 2 });
    assert.ok(Array.isArray(page.messages) && page.messages.length <= 2);
    assert.ok(page.nextCursor === null || typeof page.nextCursor === 'string');
    if (page.messages.length) {
      const m = page.messages[0];
      const mt = await admin.admin.messageTimeline(m.id);
      assert.equal(mt.messageId, m.id);
      assert.equal(mt.entries[0].event, 'created');
      const found = await admin.admin.messages({ q: m.title.slice(0, 20) || 'x', limit: 50 });
      assert.ok(Array.isArray(found.messages));
    }
    assert.ok(Array.isArray((await admin.admin.outbox({ state: 'failed' })).outbox));
    assert.ok(Array.isArray((await admin.admin.timers({ kind: 'expiry' })).timers));
    await assert.rejects(ana.admin.messages(), (e) => e.status === 403 && e.code === 'forbidden');
    await assert.rejects(admin.admin.timers({ state: 'late' }), (e) => e.status === 400 && e.code === 'invalid_argument');
    await assert.rejects(admin.admin.messageTimeline('0123456789abcdef01234567'), (e) => e.status === 404 && e.code === 'message_not_found');
  });
  test('a step answering 4xx compensates the committed steps, calling their compensate webhooks', async () => {
    receiver.handlers['/saga/book'] = () => ({ status: 200, body: { booking: 'B2' } });
    receiver.handlers['/saga/pay'] = () => ({ status: 402, body: { declined: true } });
    receiver.handlers['/saga/unbook'] = () => ({ status: 200, body: { released: 'B2' } });
    try {
      const s = await admin.sagas.start('trip', 'trip-declined', { city: 'Faro' });
      assert.equal(s.state, 'compensated');
      const unbook = receiver.requests.filter((r) => r.path === '/saga/unbook');
      assert.equal(unbook.length, 1);
      const body = JSON.parse(unbook[0].raw);
      assert.equal(body.sagaId, 'trip-declined');
      assert.deepEqual(body.result, { booking: 'B2' });
      assert.equal(unbook[0].headers['idempotency-key'], body.compensationEffectId);
    } finally {
      receiver.handlers['/saga/pay'] = () => ({ status: 200, body: { paid: true } });
    }
  });
});

describe('operations', () => {
  test('health, metrics and the served API description', async () => {
    assert.deepEqual(await ana.ops.health(), { status: 'ok' });
    assert.match(await ana.ops.metrics(), /missive_http_requests_total/);
    const doc = await ana.ops.openapi();
    assert.equal(doc.openapi, '3.1.0');
    assert.ok(doc.paths['/messages/new/{templateCd}']);
  });
  test('livez and readyz answer ok without credentials', async () => {
    const anonymous = new Missive({ baseUrl: daemon.baseUrl, fetch: fetcher });
    assert.deepEqual(await anonymous.ops.live(), { status: 'ok' });
    assert.deepEqual(await anonymous.ops.ready(), { status: 'ok' });
  });

  test('the /ui files: a redirect, the console, the element and a static file, each with its content type', async () => {
    const get = (path) => fetcher(`${daemon.baseUrl}${path}`, { method: 'GET', redirect: 'manual' });
    const bare = await get('/ui');
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.get('location'), '/ui/');
    const index = await get('/ui/');
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type'), /^text\/html/);
    assert.match(index.headers.get('content-security-policy') ?? '', /script-src/);
    const element = await get('/ui/missive-inbox.js');
    assert.equal(element.status, 200);
    assert.match(element.headers.get('content-type'), /^text\/javascript/);
    assert.match(await element.text(), /customElements\.define\(\s*['"]missive-inbox['"]/);
    const css = await get('/ui/example.css');
    assert.equal(css.status, 200);
    assert.match(css.headers.get('content-type'), /^text\/css/);
    const missing = await get('/ui/no-such-file.js');
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, 'not_found');
  });
});

// Every call the daemon made to the receiver, against the `webhooks` section of api/openapi.json
// (the payload types of src/webhook-types.ts describe the same bodies).
const WEBHOOK_OF_PATH = {
  '/hooks/ack': 'ActionWebhook',
  '/hooks/refund': 'ActionWebhook',
  '/prepare': 'PrepareWebhook',
  '/saga/book': 'SagaStepWebhook',
  '/saga/pay': 'SagaStepWebhook',
  '/saga/unbook': 'SagaCompensationWebhook',
  '/saga/refund': 'SagaCompensationWebhook',
};

describe('webhook bodies', () => {
  test('every call the daemon made matches its schema in the webhooks section, with its signature headers', async () => {
    const doc = JSON.parse(readFileSync(join(repoRoot, 'api/openapi.json'), 'utf8'));
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
    ajv.addFormat('uri', /^[a-z][a-z0-9+.-]*:/i);
    ajv.addSchema(doc, 'openapi.json');
    const seen = new Set();
    for (const r of receiver.requests) {
      const schema = WEBHOOK_OF_PATH[r.path.split('?')[0]];
      assert.ok(schema, `a call to ${r.path} that the test does not map to a webhook`);
      assert.ok(Object.values(doc.webhooks).some((w) => w.post?.requestBody?.content?.['application/json']?.schema?.$ref === `#/components/schemas/${schema}`), schema);
      const validate = ajv.compile({ $ref: `openapi.json#/components/schemas/${schema}` });
      const body = JSON.parse(r.raw);
      assert.ok(validate(body), `${r.path}: ${ajv.errorsText(validate.errors)} in ${r.raw.slice(0, 400)}`);
      for (const h of ['idempotency-key', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'x-missive-signature']) {
        assert.ok(r.headers[h], `${r.path} lacks ${h}`);
      }
      assert.equal(r.headers['webhook-id'], r.headers['idempotency-key']);
      assert.equal(await verifyWebhook([NEW_SECRET], r.headers, r.raw), true, `${r.path} is not signed with the new secret`);
      seen.add(schema);
    }
    assert.deepEqual([...seen].sort(), ['ActionWebhook', 'PrepareWebhook', 'SagaCompensationWebhook', 'SagaStepWebhook']);
  });
});
