// client.ts — `new Missive({baseUrl, token | headers})`: one method per route of api/openapi.json,
// grouped as messages, approvals, sagas and ops. Requests are plain fetch calls; every non-2xx
// answer throws a MissiveError; creates carry a fresh Idempotency-Key unless one is given, so a
// retried create (network error, 5xx) with the same key is answered once.

import { MissiveError } from './errors.js';
import { parseEventStream, type ParsedStream } from './sse.js';
import type {
  Actions,
  Approval,
  ApprovalList,
  ApprovalRequired,
  ApprovalState,
  BulkMark,
  Counts,
  ListParams,
  Message,
  MessageFilters,
  MessageList,
  Saga,
  SagaList,
  SagaResolution,
  SagaState,
  StreamEvent,
  StreamTicket,
} from './types.js';
import { errorOf, Transport, type MissiveOptions, type Query } from './transport.js';
import { randomUUID } from './webcrypto.js';
import { PreferencesApi } from './reach.js';
import { AdminApi } from './admin.js';

export type { MissiveOptions } from './transport.js';

export class Missive {
  readonly messages: MessagesApi;
  readonly approvals: ApprovalsApi;
  readonly sagas: SagasApi;
  readonly ops: OpsApi;
  readonly preferences: PreferencesApi;
  readonly admin: AdminApi;

  constructor(options: MissiveOptions) {
    const t = new Transport(options);
    this.messages = new MessagesApi(t);
    this.approvals = new ApprovalsApi(t);
    this.sagas = new SagasApi(t);
    this.ops = new OpsApi(t);
    this.preferences = new PreferencesApi(t);
    this.admin = new AdminApi(t);
  }
}

const enc = encodeURIComponent;

function filterQuery(f: MessageFilters = {}): Query {
  return {
    templateCd: f.templateCd,
    type: f.type,
    read: f.read,
    seen: f.seen,
    dismissed: f.dismissed,
    snoozed: f.snoozed,
    archived: f.archived,
  };
}

export interface CreateOptions {
  /** The Idempotency-Key; a fresh UUID when absent. Reuse it to retry the same create. */
  idempotencyKey?: string;
}

export interface Created {
  messages: Message[];
  /** True when the server replayed an earlier request with the same key. */
  replayed: boolean;
  /** The Idempotency-Key sent (to retry with). */
  idempotencyKey: string;
}

/** The outcome of running an action: done with a result, or waiting for an approval. */
export type ActionOutcome = { status: 'done'; result: unknown } | ApprovalRequired;

export interface StreamOptions {
  /** Resume after this event id (sent as Last-Event-ID). */
  lastEventId?: string;
  /** A ticket from createStreamTicket() instead of the client's headers. */
  ticket?: string;
  /** Reconnect (resuming after the last event) when the connection ends; default true. */
  reconnect?: boolean;
  /** Delay before reconnecting, in ms (default 1000, or the server's `retry:`). */
  retryMs?: number;
  signal?: AbortSignal;
}

/** An open event stream: iterate it with for await; close() ends it. */
export interface MessageStream extends AsyncIterable<StreamEvent> {
  /** The id of the last event received (resume point). */
  readonly lastEventId: string | undefined;
  close(): void;
}

export class MessagesApi {
  readonly #c: Transport;
  /** @internal */
  constructor(c: Transport) {
    this.#c = c;
  }

  /** POST /messages/new/{templateCd} */
  async create(templateCd: string, payload: Record<string, unknown> = {}, options: CreateOptions = {}): Promise<Created> {
    const idempotencyKey = options.idempotencyKey ?? (await randomUUID());
    const a = await this.#c.request<{ messages: Message[] }>('POST', `/messages/new/${enc(templateCd)}`, {
      body: payload,
      headers: { 'Idempotency-Key': idempotencyKey },
    });
    return { messages: a.body.messages, replayed: a.headers.get('Idempotent-Replayed') === 'true', idempotencyKey };
  }

  /** GET /messages — one page. */
  async list(params: ListParams = {}): Promise<MessageList> {
    const query = {
      ...filterQuery(params), limit: params.limit, skip: params.skip, cursor: params.cursor, scheduled: params.scheduled,
    };
    return (await this.#c.request<MessageList>('GET', '/messages', { query })).body;
  }

  /** Every message of GET /messages, page after page (cursor), newest first. */
  async *listAll(params: Omit<ListParams, 'cursor' | 'skip'> = {}): AsyncGenerator<Message> {
    let cursor: string | undefined;
    do {
      const page = await this.list(cursor === undefined ? params : { ...params, cursor });
      yield* page.messages;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** GET /messages/count */
  async count(filters: MessageFilters = {}): Promise<Counts> {
    return (await this.#c.request<Counts>('GET', '/messages/count', { query: filterQuery(filters) })).body;
  }

  /** GET /messages/{id} */
  async get(id: string): Promise<Message> {
    return (await this.#c.request<Message>('GET', `/messages/${enc(id)}`)).body;
  }

  /** GET /messages/{id}/actions/{usertype} */
  async actions(id: string, usertype: 'sender' | 'receiver'): Promise<Actions> {
    return (await this.#c.request<Actions>('GET', `/messages/${enc(id)}/actions/${usertype}`)).body;
  }

  /** POST /messages/{id}/action/{actionCd} — runs it, or answers that it needs an approval
   * (pass the approval's resumeToken once it is approved). */
  async act(id: string, actionCd: string, input: unknown = {}, options: { resumeToken?: string } = {}): Promise<ActionOutcome> {
    const headers: Record<string, string> = {};
    if (options.resumeToken) headers['X-Resume-Token'] = options.resumeToken;
    const a = await this.#c.request<{ result: unknown } | ApprovalRequired>(
      'POST',
      `/messages/${enc(id)}/action/${enc(actionCd)}`,
      { body: input, headers },
    );
    if (a.status === 202) return a.body as ApprovalRequired;
    return { status: 'done', result: (a.body as { result: unknown }).result };
  }

  private async mark(id: string, verb: string): Promise<Message> {
    return (await this.#c.request<Message>('POST', `/messages/${enc(id)}/${verb}`)).body;
  }
  /** POST /messages/{id}/seen */
  markSeen(id: string): Promise<Message> { return this.mark(id, 'seen'); }
  /** POST /messages/{id}/read (implies seen) */
  markRead(id: string): Promise<Message> { return this.mark(id, 'read'); }
  /** POST /messages/{id}/unread */
  markUnread(id: string): Promise<Message> { return this.mark(id, 'unread'); }
  /** POST /messages/{id}/dismiss */
  dismiss(id: string): Promise<Message> { return this.mark(id, 'dismiss'); }
  /** POST /messages/{id}/undismiss */
  undismiss(id: string): Promise<Message> { return this.mark(id, 'undismiss'); }
  /** POST /messages/{id}/snooze — out of the caller's inbox until `until` (ms), then back. */
  async snooze(id: string, until: number): Promise<Message> {
    return (await this.#c.request<Message>('POST', `/messages/${enc(id)}/snooze`, { body: { until } })).body;
  }
  /** POST /messages/{id}/unsnooze — back in the caller's inbox now. */
  unsnooze(id: string): Promise<Message> { return this.mark(id, 'unsnooze'); }
  /** POST /messages/{id}/cancel — the sender withdraws a scheduled message before its sendAt. */
  cancel(id: string): Promise<Message> { return this.mark(id, 'cancel'); }

  /** POST /messages/seen-all */
  async markAllSeen(filter: BulkMark = {}): Promise<{ updated: number }> {
    return (await this.#c.request<{ updated: number }>('POST', '/messages/seen-all', { body: filter })).body;
  }
  /** POST /messages/read-all */
  async markAllRead(filter: BulkMark = {}): Promise<{ updated: number }> {
    return (await this.#c.request<{ updated: number }>('POST', '/messages/read-all', { body: filter })).body;
  }

  /** POST /stream-tickets — for EventSource, which cannot send headers. */
  async createStreamTicket(): Promise<StreamTicket> {
    return (await this.#c.request<StreamTicket>('POST', '/stream-tickets')).body;
  }

  /** GET /messages/stream — live events; reconnects and resumes with Last-Event-ID. */
  stream(options: StreamOptions = {}): MessageStream {
    const c = this.#c;
    const controller = new AbortController();
    const outer = options.signal;
    if (outer) {
      if (outer.aborted) controller.abort();
      else outer.addEventListener('abort', () => controller.abort(), { once: true });
    }
    let lastEventId = options.lastEventId;
    const reconnect = options.reconnect ?? true;
    async function* events(): AsyncGenerator<StreamEvent> {
      const state: ParsedStream = { retryMs: undefined };
      while (!controller.signal.aborted) {
        const headers: Record<string, string> = { Accept: 'text/event-stream' };
        if (lastEventId !== undefined) headers['Last-Event-ID'] = lastEventId;
        let res: Response;
        try {
          res = await c.send('GET', '/messages/stream', {
            headers,
            signal: controller.signal,
            query: { ticket: options.ticket },
          });
        } catch (e) {
          if (controller.signal.aborted) return;
          if (!reconnect) throw e;
          await sleep(state.retryMs ?? options.retryMs ?? 1000, controller.signal);
          continue;
        }
        if (!res.ok) throw await errorOf(res); // 401, 503 stream_capacity: reconnecting would not help
        if (!res.body) throw new MissiveError(res.status, 'invalid_stream', 'the stream has no body');
        try {
          for await (const raw of parseEventStream(res.body, state)) {
            if (raw.id !== undefined) lastEventId = raw.id;
            if (!['message.created', 'message.updated', 'counts', 'reset'].includes(raw.event)) continue;
            let data: unknown = null;
            try {
              data = raw.data ? JSON.parse(raw.data) : null;
            } catch {
              data = raw.data;
            }
            yield { event: raw.event, id: raw.id ?? '', data } as StreamEvent;
          }
        } catch (e) {
          if (controller.signal.aborted) return;
          if (!reconnect) throw e;
        }
        if (!reconnect || controller.signal.aborted) return;
        await sleep(state.retryMs ?? options.retryMs ?? 1000, controller.signal);
      }
    }
    const it = events();
    return {
      get lastEventId() {
        return lastEventId;
      },
      close() {
        controller.abort();
      },
      [Symbol.asyncIterator]() {
        return it;
      },
    };
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

export class ApprovalsApi {
  readonly #c: Transport;
  /** @internal */
  constructor(c: Transport) {
    this.#c = c;
  }

  /** GET /approvals */
  async list(params: { state?: ApprovalState; limit?: number; cursor?: string } = {}): Promise<ApprovalList> {
    return (await this.#c.request<ApprovalList>('GET', '/approvals', { query: { ...params } })).body;
  }

  /** GET /approvals/{id} */
  async get(id: string): Promise<Approval> {
    return (await this.#c.request<Approval>('GET', `/approvals/${enc(id)}`)).body;
  }

  /** POST /approvals/{id}/decision */
  async decide(id: string, decision: 'approved' | 'denied'): Promise<Approval> {
    return (await this.#c.request<Approval>('POST', `/approvals/${enc(id)}/decision`, { body: { decision } })).body;
  }
}

export class SagasApi {
  readonly #c: Transport;
  /** @internal */
  constructor(c: Transport) {
    this.#c = c;
  }

  /** GET /sagas (admin) */
  async list(params: { state?: SagaState; definition?: string; limit?: number; cursor?: string } = {}): Promise<SagaList> {
    return (await this.#c.request<SagaList>('GET', '/sagas', { query: { ...params } })).body;
  }

  /** POST /sagas/{definition} — runs it; the same sagaId again replays (or 422 on another input). */
  async start(definition: string, sagaId: string, input?: unknown): Promise<Saga & { replayed: boolean }> {
    const body: { sagaId: string; input?: unknown } = { sagaId };
    if (input !== undefined) body.input = input;
    const a = await this.#c.request<Saga>('POST', `/sagas/${enc(definition)}`, { body });
    return { ...a.body, replayed: a.headers.get('Idempotent-Replayed') === 'true' };
  }

  /** GET /sagas/{id} */
  async get(id: string): Promise<Saga> {
    return (await this.#c.request<Saga>('GET', `/sagas/${enc(id)}`)).body;
  }

  /** POST /sagas/{id}/resume */
  async resume(id: string): Promise<Saga> {
    return (await this.#c.request<Saga>('POST', `/sagas/${enc(id)}/resume`)).body;
  }

  /** POST /sagas/{id}/compensate */
  async compensate(id: string): Promise<Saga> {
    return (await this.#c.request<Saga>('POST', `/sagas/${enc(id)}/compensate`)).body;
  }

  /** POST /sagas/{id}/resolve */
  async resolve(id: string, resolution: SagaResolution): Promise<Saga> {
    return (await this.#c.request<Saga>('POST', `/sagas/${enc(id)}/resolve`, { body: resolution })).body;
  }
}

export class OpsApi {
  readonly #c: Transport;
  /** @internal */
  constructor(c: Transport) {
    this.#c = c;
  }

  /** GET /healthz */
  async health(): Promise<{ status: string }> {
    return (await this.#c.request<{ status: string }>('GET', '/healthz')).body;
  }
  /** GET /livez */
  async live(): Promise<{ status: string }> {
    return (await this.#c.request<{ status: string }>('GET', '/livez')).body;
  }
  /** GET /readyz */
  async ready(): Promise<{ status: string }> {
    return (await this.#c.request<{ status: string }>('GET', '/readyz')).body;
  }
  /** GET /metrics (Prometheus text) */
  metrics(): Promise<string> {
    return this.#c.text('/metrics');
  }
  /** GET /openapi.json */
  async openapi(): Promise<Record<string, unknown>> {
    return (await this.#c.request<Record<string, unknown>>('GET', '/openapi.json')).body;
  }
}
