// errors.ts — every non-2xx answer of missive becomes a MissiveError carrying the HTTP status,
// the snake_case code and the error's structured fields (actionAttemptId, sagaId, approvalId…).

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
  readonly code: string;
  /** The other fields of the error object. */
  readonly fields: MissiveErrorFields;
  /** Seconds from Retry-After (client_request_pending), when given. */
  readonly retryAfter: number | undefined;
  /** The X-Request-Id of the answer, for the server's log. */
  readonly requestId: string | undefined;

  constructor(
    status: number,
    code: string,
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
