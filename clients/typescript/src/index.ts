// missive-client — a dependency-free, fetch-based client for the missive HTTP API. This module is
// the package's whole public surface (package.json "exports" points here, as ESM and CommonJS):
// the client, its error, webhook verification, and the types of every body the API answers and
// every webhook body missive sends. The API groups are exported as types only: reach them as
// `client.messages`, `client.approvals`, `client.sagas`, `client.ops`, `client.preferences`, `client.admin`.
export { Missive } from './client.js';
export type {
  MissiveOptions,
  MessagesApi,
  ApprovalsApi,
  SagasApi,
  OpsApi,
  CreateOptions,
  Created,
  ActionOutcome,
  StreamOptions,
  MessageStream,
} from './client.js';
export type { PreferencesApi } from './reach.js';
export type * from './admin.js';
export { actionLinkToken, deliveryLinks } from './reach.js';
export { MissiveError, isErrorCode } from './errors.js';
export type { MissiveErrorFields, MissiveErrorCode, ClientErrorCode } from './errors.js';
export { ERROR_CODES } from './codes.js';
export type { ErrorCode } from './codes.js';
export { verifyWebhook, webhookSecretBytes } from './webhook.js';
export type { WebhookSecret, HeaderSource, VerifyOptions } from './webhook.js';
export type * from './types.js';
export type * from './webhook-types.js';
