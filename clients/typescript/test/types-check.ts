// types-check.ts — compiled (never run) with tsc --strict: the public API used the way an
// application uses it, so a change that breaks typical code fails `make test`.
import {
  ERROR_CODES,
  Missive,
  MissiveError,
  actionLinkToken,
  deliveryLinks,
  isErrorCode,
  verifyWebhook,
  type ActionLinks,
  type ActionWebhook,
  type ChannelDelivery,
  type ErrorCode,
  type MissiveErrorCode,
  type PrepareAnswer,
  type SagaStepWebhook,
  type WebhookPayload,
  type ActionOutcome,
  type Counts,
  type Message,
  type StoredPreferences,
  type StreamEvent,
} from 'missive-client';

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

/** Error codes are a union generated from the server's table: a typo is a compile error. */
export function typedCodes(e: MissiveError): number {
  const code: MissiveErrorCode = e.code;
  let n = 0;
  if (code === 'action_conflict' || code === 'network_error' || code === 'http_502') n += 1;
  // @ts-expect-error — no such code: comparing it with the union does not compile
  if (code === 'action_conflcit') n += 1;
  if (isErrorCode(code)) {
    const known: ErrorCode = code;
    n += ERROR_CODES[known];
  }
  // @ts-expect-error — a code the client makes up is not one of the server's
  const server: ErrorCode = 'network_error';
  void server;
  return n;
}

/** A receiver of missive's webhooks: verify, then parse the raw body as its payload type. */
export async function receive(secret: string, headers: Headers, rawBody: string, path: string): Promise<unknown> {
  if (!(await verifyWebhook(secret, headers, rawBody))) throw new Error('bad signature');
  const payload = JSON.parse(rawBody) as WebhookPayload;
  if (path === '/hooks/ack') {
    const call = payload as ActionWebhook;
    const trigger: 'user' | 'link' | 'expiry' = call.trigger;
    return { by: call.user.id, message: call.message.id, attempt: call.attemptId, action: call.action.actionCd, trigger };
  }
  if (path === '/prepare') {
    const answer: PrepareAnswer = [{ toUser: 'bob', templateData: { n: 1 } }];
    return answer;
  }
  if (path === '/saga/book') {
    const step = payload as SagaStepWebhook;
    return { booked: step.effectId, after: Object.keys(step.results) };
  }
  const delivery = payload as ChannelDelivery;
  const kind: 'message' | 'reminder' | 'digest' = delivery.kind;
  return { to: delivery.to.userId, title: delivery.content.title, links: Object.values(delivery.links), kind };
}

/** Preferences, a message's expiry and language, and a channel receiver's action links. */
export async function reach(client: Missive, body: string): Promise<number> {
  const stored: StoredPreferences = await client.preferences.put({ channels: { email: false }, locale: 'de' });
  const locale: string | null = (await client.preferences.get()).locale;
  // @ts-expect-error — a preference set has no such field
  await client.preferences.put({ channel: { email: false } });
  const { messages } = await client.messages.create('offer', { expiresAt: Date.now() + 86_400_000 });
  const expires: number | null = messages[0]?.expiresAt ?? null;
  const read: Message = await client.messages.get(messages[0]?.id ?? '');
  const language: string | null | undefined = read.locale;
  const delivery = JSON.parse(body) as ChannelDelivery;
  const links: ActionLinks = deliveryLinks(delivery);
  const token: string | null = actionLinkToken(links['accept'] ?? '');
  const contact: string | null = delivery.to.contact;
  return Object.keys(stored.channels).length + (locale ?? '').length + (token ?? '').length +
    (contact ?? '').length + delivery.content.title.length + (expires ?? 0) + (language ?? '').length;
}
