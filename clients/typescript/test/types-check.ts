// types-check.ts — compiled (never run) with tsc --strict: the public API used the way an
// application uses it, so a change that breaks typical code fails `make test`.
import {
  Missive,
  MissiveError,
  verifyWebhook,
  actionLinkToken,
  deliveryLinks,
  type ActionLinks,
  type ActionOutcome,
  type ChannelDelivery,
  type StoredPreferences,
  type Counts,
  type Message,
  type StreamEvent,
} from '../dist/index.js';

export async function typicalUse(baseUrl: string, token: string): Promise<number> {
  const client = new Missive({ baseUrl, token: () => token });
  const { messages, replayed } = await client.messages.create('booking-request', { hostId: 'bob' });
  const first: Message | undefined = messages[0];
  if (!first || replayed) return 0;
  const outcome: ActionOutcome = await client.messages.act(first.id, 'accept', { note: 'ok' });
  if (outcome.status === 'approval_required') {
    const approval = await client.approvals.get(outcome.approvalId);
    if (approval.state === 'approved') await client.messages.act(first.id, 'accept', {}, { resumeToken: outcome.resumeToken });
  } else {
    const result: unknown = outcome.result;
    void result;
  }
  let n = 0;
  for await (const m of client.messages.listAll({ templateCd: 'booking-request', read: false })) {
    n += m.viewer.readAt === null ? 1 : 0;
  }
  const counts: Counts = await client.messages.count({ dismissed: false });
  const stream = client.messages.stream({ lastEventId: '42' });
  for await (const e of stream) {
    const ev: StreamEvent = e;
    if (ev.event === 'counts') n += ev.data.unread;
    else if (ev.event === 'message.created') n += ev.data.toRoles.length;
    stream.close();
  }
  try {
    await client.sagas.resume('trip-1');
  } catch (e) {
    if (e instanceof MissiveError && e.code === 'saga_not_found') n += e.status;
    if (e instanceof MissiveError && typeof e.fields.sagaId === 'string') n += 1;
  }
  const ok: boolean = await verifyWebhook(['whsec_aGVsbG8=', 'old'], new Headers(), '{}');
  return n + counts.count + (ok ? 1 : 0);
}

/** The inbox, operations and list routes, typed as an application would call them. */
export async function inboxAndOperations(client: Missive, id: string): Promise<number> {
  const m: Message = await client.messages.markRead(id);
  const read: number | null = m.viewer.readAt;
  const { updated } = await client.messages.markAllSeen({ templateCd: 'note', before: Date.now() });
  const ticket: string = (await client.messages.createStreamTicket()).ticket;
  const live: string = (await client.ops.live()).status;
  const ready: string = (await client.ops.ready()).status;
  const sagas = await client.sagas.list({ state: 'manual-review', limit: 10 });
  const approvals = await client.approvals.list({ state: 'pending' });
  const next: string | null = sagas.nextCursor;
  return (read ?? 0) + updated + ticket.length + live.length + ready.length + sagas.sagas.length +
    approvals.approvals.length + (next ? 1 : 0) + (m.lastFailure?.at ?? 0);
}

/** Preferences and a channel receiver's view of a delivery, typed as an application uses them. */
export async function reach(client: Missive, body: string): Promise<number> {
  const stored: StoredPreferences = await client.preferences.put({ channels: { email: false }, locale: 'de' });
  const locale: string | null = (await client.preferences.get()).locale;
  const delivery: ChannelDelivery = JSON.parse(body);
  const links: ActionLinks = deliveryLinks(delivery);
  const token: string | null = actionLinkToken(links['accept'] ?? '');
  const contact: string | null = delivery.to.contact;
  return Object.keys(stored.channels).length + (locale ?? '').length + (token ?? '').length +
    (contact ?? '').length + delivery.content.title.length;
}
