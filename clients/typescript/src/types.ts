// types.ts — the shapes of api/openapi.json (components.schemas), by hand and kept in step with
// it: the end-to-end tests validate every response against the document, and the type tests
// (test/types-check.ts) use these names the way an application would.

/** Milliseconds since the epoch. */
export type Millis = number;

export interface Content {
  title: string;
  short: string;
  long: string;
}

/** The requesting user's own inbox state for a message. */
export interface Viewer {
  seenAt: Millis | null;
  readAt: Millis | null;
  dismissedAt: Millis | null;
  /** Until when the caller snoozed the message (out of their inbox until then), or null. */
  snoozedUntil: Millis | null;
  /** When this user was last reminded of the message (the template's reminders), or null. */
  remindedAt: Millis | null;
}

export interface LastFailure {
  code: string;
  message: string;
  at: Millis;
  actionAttemptId: string;
}

export type ActionState = 'scheduled' | 'active' | 'processing' | 'retryable' | 'archived' | 'cancelled';

export interface Message {
  id: string;
  type: string | null;
  templateCd: string | null;
  fromUser: string | null;
  toUser: string | null;
  toRoles: string[];
  senderContent: Content;
  receiverContent: Content;
  documents: unknown[];
  paymentSession: string | null;
  paymentCd: string | null;
  payload: unknown;
  display: unknown;
  clientRequestId: string | null;
  actionState: ActionState;
  actionCd: string | null;
  actionAttemptId: string | null;
  archivedBy: string | null;
  archivedAt: Millis | null;
  createdAt: Millis;
  updatedAt: Millis;
  /** When the message expires (the create's expiresAt or the template's expiry), or null. */
  expiresAt: Millis | null;
  /** When an escalation step of the template added roles to toRoles, or null. */
  escalatedAt: Millis | null;
  /** When a scheduled message is (or was) sent (the create's sendAt), or null. */
  sendAt: Millis | null;
  /** The requesting user's own inbox state. */
  viewer: Viewer;
  /** What the handler said about the last failed attempt; null unless actionState is retryable. */
  lastFailure: LastFailure | null;
  /** GET /messages/{id} with Accept-Language: the template locale of the contents (null: the
   * default). Absent otherwise. */
  locale?: string | null;
}

export interface MessageList {
  messages: Message[];
  nextCursor: string | null;
}

export interface Counts {
  count: number;
  unseen: number;
  unread: number;
}

export interface ActionView {
  actionCd: string;
  isDefault?: boolean;
  name: string;
  variant: string;
  confirmation?: {
    title?: string;
    message?: string;
    notesLabel?: string;
    requireNotes?: unknown;
    documents?: unknown;
  };
  payload?: unknown;
}

export interface Actions {
  uiTemplate: string;
  actions: ActionView[];
  /** The template's label, when it has one. */
  label?: string;
  /** The label in each of the template's locales that has one (BCP 47 tag → label). */
  labels?: Record<string, string>;
}

export interface ApprovalRequired {
  status: 'approval_required';
  approvalId: string;
  resumeToken: string;
  expiresAt: Millis;
}

export type ApprovalState = 'pending' | 'approved' | 'denied' | 'expired' | 'consumed';

export interface Approval {
  approvalId: string;
  state: ApprovalState;
  capability: string;
  target?: string;
  tenantId: string;
  principalId: string;
  createdAt: Millis;
  expiresAt: Millis;
  decidedBy?: string;
}

export interface ApprovalList {
  approvals: Approval[];
  nextCursor: string | null;
}

export type SagaState =
  | 'running'
  | 'waiting'
  | 'compensating'
  | 'completed'
  | 'compensated'
  | 'manual-review';
export type SagaStepState =
  | 'executing'
  | 'committed'
  | 'failed'
  | 'ambiguous'
  | 'compensating'
  | 'compensated'
  | 'compensation-failed';

export interface SagaStep {
  name: string;
  state: SagaStepState;
  attempts: number;
  effectId: string;
  compensationEffectId: string;
  result?: unknown;
  errorCode?: string;
  nextAttemptAt?: Millis;
}

export interface Saga {
  sagaId: string;
  definition: string;
  state: SagaState;
  input: unknown;
  steps: SagaStep[];
  createdAt: Millis;
  updatedAt: Millis;
  /** While the saga is `waiting`: when it resumes with the step that carries `delayMs`. */
  wakeAt?: Millis;
}

export interface SagaList {
  sagas: Saga[];
  nextCursor: string | null;
}

export interface SagaResolution {
  kind: 'execution' | 'compensation';
  step: string;
  effectId: string;
  outcome: 'committed' | 'not-committed' | 'compensated' | 'not-compensated';
  result?: unknown;
  errorCode?: string | null;
}

export interface StreamTicket {
  ticket: string;
  expiresAt: Millis;
}

/** Filters of GET /messages and GET /messages/count (combined with AND). */
export interface MessageFilters {
  templateCd?: string;
  type?: string;
  read?: boolean;
  seen?: boolean;
  dismissed?: boolean;
  /** Messages the caller snoozed (default false: they leave the inbox until their snooze ends). */
  snoozed?: boolean;
  archived?: boolean;
}

export interface ListParams extends MessageFilters {
  limit?: number;
  skip?: number;
  cursor?: string;
  /** The caller's own messages waiting for their sendAt (nobody else sees them until then). */
  scheduled?: boolean;
}

export interface BulkMark {
  templateCd?: string;
  type?: string;
  before?: Millis;
}

/** One Server-Sent Event of GET /messages/stream (events of other names are skipped). `reset`
 * means the resume point is older than the server keeps: refetch, then keep reading. */
export type StreamEvent =
  | { event: 'message.created'; id: string; data: Message }
  | { event: 'message.updated'; id: string; data: Message }
  | { event: 'counts'; id: string; data: Counts }
  | { event: 'reset'; id: string; data: unknown };

/** Channel name → on/off ("inbox" cannot be off). */
export type ChannelSwitches = Record<string, boolean>;

/** A user's delivery preferences in their tenant (GET/PUT /preferences). */
export interface Preferences {
  channels?: ChannelSwitches;
  /** Category → channel switches for messages of that category. */
  categories?: Record<string, ChannelSwitches>;
  /** Channel → digest window (stored; digests are not sent yet). */
  digest?: Record<string, { everyMs: number }>;
  /** BCP 47 tag ("de", "de-AT") or null. */
  locale?: string | null;
}

/** The stored set as GET and PUT /preferences answer it: every key present. */
export interface StoredPreferences {
  channels: ChannelSwitches;
  categories: Record<string, ChannelSwitches>;
  digest: Record<string, { everyMs: number }>;
  locale: string | null;
}
