// admin.ts — `client.admin`: the operator's views behind the console (GET /admin/…): every
// message of the tenant with filters and a title search, the tenant's outbox deliveries and
// timers, and the timeline of one message or saga. Every route needs the admin permission.

import type { Transport } from './transport.js';

type Millis = number;

export type AdminMessageState = 'scheduled' | 'active' | 'processing' | 'retryable' | 'archived' | 'cancelled';
export type DeliveryState = 'pending' | 'delivering' | 'sent' | 'skipped' | 'failed';
export type TimerKind = 'expiry' | 'reminder' | 'escalation' | 'snooze' | 'send' | 'saga';
export type TimerState = 'pending' | 'fired' | 'cancelled' | 'failed';

export interface AdminMessage {
  id: string;
  templateCd: string;
  type: string;
  fromUser: string | null;
  toUser: string | null;
  toRoles: string[];
  actionState: AdminMessageState;
  actionCd: string | null;
  /** The recipient's title. */
  title: string;
  createdAt: Millis;
  updatedAt: Millis;
}

export interface AdminDelivery {
  id: string;
  kind: 'email' | 'webhook';
  /** "email" or the channel's name. */
  channel: string;
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: Millis;
  createdAt: Millis;
  updatedAt: Millis;
  messageId?: string;
  recipient?: string;
  failureStage?: string;
}

export interface AdminTimer {
  id: string;
  kind: TimerKind;
  ref: string;
  dueAt: Millis;
  state: TimerState;
  claims: number;
  createdAt: Millis;
  firedAt: Millis | null;
}

export interface TimelineEntry {
  at: Millis;
  event: string;
  actor: string | null;
  /** A message's action attempt id; a saga step's attempts. */
  attempt: string | number | null;
  step: string | null;
  outcome: string | null;
  detail: string | null;
}

export interface MessageTimeline {
  messageId: string;
  templateCd: string;
  actionState: string;
  entries: TimelineEntry[];
}

export interface SagaTimeline {
  sagaId: string;
  definition: string;
  state: string;
  entries: TimelineEntry[];
}

export interface Page {
  limit?: number;
  cursor?: string;
}

const enc = encodeURIComponent;

export class AdminApi {
  readonly #c: Transport;
  /** @internal */
  constructor(c: Transport) {
    this.#c = c;
  }

  /** GET /admin/messages — newest first; with `q` a page may be short and still carry a cursor. */
  async messages(
    params: { state?: AdminMessageState; templateCd?: string; sender?: string; recipient?: string; q?: string } & Page = {},
  ): Promise<{ messages: AdminMessage[]; nextCursor: string | null }> {
    return (await this.#c.request<{ messages: AdminMessage[]; nextCursor: string | null }>('GET', '/admin/messages', { query: { ...params } })).body;
  }

  /** GET /admin/messages/{id}/timeline */
  async messageTimeline(id: string): Promise<MessageTimeline> {
    return (await this.#c.request<MessageTimeline>('GET', `/admin/messages/${enc(id)}/timeline`)).body;
  }

  /** GET /admin/outbox */
  async outbox(params: { state?: DeliveryState; channel?: string } & Page = {}): Promise<{ outbox: AdminDelivery[]; nextCursor: string | null }> {
    return (await this.#c.request<{ outbox: AdminDelivery[]; nextCursor: string | null }>('GET', '/admin/outbox', { query: { ...params } })).body;
  }

  /** GET /admin/timers — in due order. */
  async timers(params: { state?: TimerState; kind?: TimerKind } & Page = {}): Promise<{ timers: AdminTimer[]; nextCursor: string | null }> {
    return (await this.#c.request<{ timers: AdminTimer[]; nextCursor: string | null }>('GET', '/admin/timers', { query: { ...params } })).body;
  }

  /** GET /admin/sagas/{id}/timeline */
  async sagaTimeline(id: string): Promise<SagaTimeline> {
    return (await this.#c.request<SagaTimeline>('GET', `/admin/sagas/${enc(id)}/timeline`)).body;
  }
}
