// missive-client — a dependency-free, fetch-based client for the missive HTTP API.
export { Missive, MessagesApi, ApprovalsApi, SagasApi, OpsApi, errorOf } from './client.js';
export type { MissiveOptions, CreateOptions, Created, ActionOutcome, StreamOptions, MessageStream } from './client.js';
export { PreferencesApi, actionLinkToken, deliveryLinks } from './reach.js';
export { MissiveError } from './errors.js';
export type { MissiveErrorFields } from './errors.js';
export { verifyWebhook, webhookSecretBytes } from './webhook.js';
export type { WebhookSecret, HeaderSource, VerifyOptions } from './webhook.js';
export * from './types.js';
