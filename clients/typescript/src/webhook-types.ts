// webhook-types.ts — the bodies a receiver gets from missive, as api/openapi.json's `webhooks`
// section describes them (the end-to-end tests validate what a live daemon sends against it).
// Every call is signed with Standard Webhooks headers: check it with verifyWebhook(secrets,
// headers, rawBody) before trusting the body, then parse the raw body as one of these.

import type { Content, Message } from './types.js';

/** The user on whose behalf missive calls. */
export interface WebhookUser {
  id: string;
  roles: string[];
}

/** An action handler call (`"handler": {"webhook": URL}`); Idempotency-Key is `attemptId`.
 * Answer 2xx with the result as JSON (or no body: null); anything else makes the attempt
 * retryable. */
export interface ActionWebhook {
  message: Message;
  action: { actionCd: string; name: string };
  user: WebhookUser;
  /** The body of the action request, or {}. */
  input: unknown;
  /** The same on every retry of this attempt. */
  attemptId: string;
  /** What ran the action: a user's request, an action link (POST /a/{token}), or the message's
   * expiry. */
  trigger: 'user' | 'link' | 'expiry';
}

/** A template's prepare hook call: decides which messages a create makes. */
export interface PrepareWebhook {
  templateCd: string;
  user: WebhookUser;
  identity: Record<string, unknown>;
  permissions: Record<string, unknown>;
  /** The create request body. */
  payload: unknown;
}

/** One message to create, as a prepare hook answers it. */
export interface PrepareItem {
  toUser?: string | null;
  toRoles?: string[];
  templateData?: Record<string, unknown>;
  payload?: unknown;
  display?: unknown;
  paymentCd?: string | null;
  priceArgs?: unknown;
  type?: string | null;
  fromUser?: string | null;
}

/** What a prepare hook answers (2xx): null, one item or several. */
export type PrepareAnswer = null | PrepareItem | PrepareItem[];

/** Opens a payment session; answer `{"sessionId": "…"}` (PaymentSession). */
export interface PaymentCreateWebhook {
  op: 'create';
  payerId: string;
  paymentCd: string;
  priceArgs: unknown;
}

/** Expires or refunds a payment session; any 2xx answer means done. */
export interface PaymentSessionWebhook {
  op: 'expire' | 'refund';
  sessionId: string;
}

/** Any call to the payment provider (one URL receives all three operations). */
export type PaymentWebhook = PaymentCreateWebhook | PaymentSessionWebhook;

/** The answer to a PaymentCreateWebhook. */
export interface PaymentSession {
  sessionId: string;
}

/** A saga step's run call; Idempotency-Key is `effectId`. 2xx = committed (the JSON body is the
 * step's result), 4xx = conclusively not committed, 5xx or no answer = ambiguous. */
export interface SagaStepWebhook {
  sagaId: string;
  step: string;
  input: unknown;
  /** The results of the steps before, by step name. */
  results: Record<string, unknown>;
  effectId: string;
}

/** A saga step's compensate call; Idempotency-Key is `compensationEffectId`, the same on every
 * attempt. 2xx = compensated. */
export interface SagaCompensationWebhook {
  sagaId: string;
  step: string;
  input: unknown;
  /** The step's result. */
  result: unknown;
  compensationEffectId: string;
  /** 1 on the first attempt. */
  attempt: number;
}

/** An email handed to `email.webhook` instead of SMTP; Idempotency-Key is the outbox row id. */
export interface EmailWebhook {
  email: { to: string; subject: string; body: string; messageId: string; toUser: string };
}

/** What the recipient directory (`GET <email.directory.webhook>/{userId}`) answers. */
export interface DirectoryEntry {
  email?: string | null;
}

/** actionCd → action-link URL ({baseUrl}/a/{token}); read them with deliveryLinks. */
export type ActionLinks = Record<string, string>;

/** Why a channel delivery is sent. */
export type ChannelDeliveryKind = 'message' | 'reminder' | 'digest';

/** A delivery on a named webhook channel (`"channels": {"sms": {"webhook": URL}}`), sent from
 * the outbox with retries (a 4xx answer other than 408 and 429 is not retried); Idempotency-Key
 * and webhook-id are `deliveryId`, the same on every retry. */
export interface ChannelDelivery {
  /** The channel's name, e.g. `sms`. */
  channel: string;
  deliveryId: string;
  to: {
    userId: string;
    /** The user directory's answer for that user, or null. */
    contact: string | null;
  };
  /** The message delivered; null for a digest (its messages are in `messages`). */
  messageId: string | null;
  templateCd: string | null;
  category: string | null;
  kind: ChannelDeliveryKind;
  /** A digest's own content: "N unread messages", the titles as short, titles and short texts
   * as long. */
  content: Content;
  /** One action link per actionCd (empty unless links are configured); each runs its action
   * once, from an email or a chat. */
  links: ActionLinks;
  /** Digest only: the window (ms; aligned to multiples of everyMs) and how many of its messages
   * were unread when it closed. */
  windowStart?: number;
  windowEnd?: number;
  unread?: number;
  /** Digest only: the unread messages (at most 100), oldest first. */
  messages?: DigestEntry[];
}

/** One message of a digest, as its own delivery on the channel would have carried it. */
export interface DigestEntry {
  messageId: string;
  templateCd: string;
  category: string;
  content: Content;
  links: ActionLinks;
}

/** Any body missive POSTs to a receiver. */
export type WebhookPayload =
  | ActionWebhook
  | PrepareWebhook
  | PaymentWebhook
  | SagaStepWebhook
  | SagaCompensationWebhook
  | EmailWebhook
  | ChannelDelivery;
