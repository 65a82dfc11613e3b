// errors.ts — every non-2xx answer of missive becomes a MissiveError carrying the HTTP status,
// the snake_case code and the error's structured fields (actionAttemptId, sagaId, approvalId…).
// The codes are typed: ErrorCode (codes.ts) is generated from the server's error table, and the
// client adds its own for answers that never arrived or were not missive's.

import { ERROR_CODES, type ErrorCode } from './codes.js';

/** Codes the client itself gives: `network_error` (no answer arrived), `invalid_stream` (an
 * event stream without a body), `http_<status>` (a non-2xx answer without a missive error body,
 * e.g. from a proxy). */
export type ClientErrorCode = 'network_error' | 'invalid_stream' | `http_${number}`;

/** The `code` of a MissiveError. */
export type MissiveErrorCode = ErrorCode | ClientErrorCode;

/** True when code is one of the server's error codes (not one the client made up). */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CODES, code);
}

/** The `error` object of an error body, minus code and message. */
export type MissiveErrorFields = {
  actionAttemptId?: string;
  approvalId?: string;
  resumeToken?: string;
  sagaId?: string;
  sessionId?: string;
  expiresAt?: number;
  [field: string]: unknown;
};

export class MissiveError extends Error {
  /** HTTP status (0 when no answer arrived). */
  readonly status: number;
  /** The error code, e.g. `client_request_mismatch`; `network_error` when no answer arrived. */
  readonly code: MissiveErrorCode;
  /** The other fields of the error object. */
  readonly fields: MissiveErrorFields;
  /** Seconds from Retry-After (client_request_pending), when given. */
  readonly retryAfter: number | undefined;
  /** The X-Request-Id of the answer, for the server's log. */
  readonly requestId: string | undefined;

  constructor(
    status: number,
    code: MissiveErrorCode,
    message: string,
    fields: MissiveErrorFields = {},
    extra: { retryAfter?: number; requestId?: string; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'MissiveError';
    this.status = status;
    this.code = code;
    this.fields = fields;
    this.retryAfter = extra.retryAfter;
    this.requestId = extra.requestId;
  }
}
