// index.ts — missive-react: the <missive-inbox> custom element as a React component, and a hook
// that follows its unread counts from anywhere in the application. A thin typed wrapper: the
// element does the work (it is loaded from the daemon, /ui/missive-inbox.js); this file maps props
// to the element's attributes and properties and its DOM events to callbacks, nothing more.
import { createElement, useEffect, useRef, useSyncExternalStore } from 'react';
import type { ReactElement } from 'react';

/** The counts the inbox reports (GET /messages/count). */
export interface MissiveCounts {
  count: number;
  unseen: number;
  unread: number;
}

/** What a `missive-action` event says about a press. */
export interface MissiveActionDetail {
  messageId: string;
  actionCd: string;
  ok: boolean;
  result?: unknown;
  approvalId?: string;
  error?: { status: number; code: string; message: string; [field: string]: unknown };
}

/** What `renderItem` is given besides the message. */
export interface MissiveItemContext {
  title: string;
  short: string;
  long: string;
  label: string;
  time: string;
  unread: boolean;
  open: boolean;
  locale: string;
  t(key: string, vars?: Record<string, string | number>): string;
  toggle(): void;
  dismiss(): void;
}

export type MissiveLocale = 'en' | 'de' | 'fr' | 'es' | 'pt' | 'ar' | (string & {});
export type MissiveTab = 'inbox' | 'unread' | 'snoozed' | 'archived';

export interface MissiveInboxProps {
  /** The daemon, e.g. "https://missive.example.com"; empty = the page's origin. */
  baseUrl?: string;
  /** A JWT, or a function returning one (called before each request). */
  token?: string | null;
  getToken?: () => string | Promise<string>;
  /** Headers mode against a loopback daemon (development). */
  user?: string;
  roles?: string;
  permissions?: string;
  tenant?: string;
  locale?: MissiveLocale;
  mode?: 'inline' | 'popover';
  pageSize?: number;
  pollMs?: number;
  heading?: string;
  /** Overrides for any catalogue string ({tabInbox: 'Messages'}). */
  strings?: Record<string, string>;
  /** Draws a row's summary; build it with textContent, never innerHTML. */
  renderItem?: (message: Record<string, unknown>, ctx: MissiveItemContext) => Node | null;
  onAction?: (detail: MissiveActionDetail) => void;
  onCounts?: (counts: MissiveCounts) => void;
  onError?: (detail: { status: number; code: string; message: string }) => void;
  className?: string;
  id?: string;
}

/** The element as TypeScript sees it once the module is loaded. */
export interface MissiveInboxElement extends HTMLElement {
  token: string | null;
  getToken: (() => string | Promise<string>) | null;
  strings: Record<string, string>;
  renderItem: MissiveInboxProps['renderItem'] | null;
  tab: MissiveTab;
  refresh(): Promise<void>;
  open(): void;
  close(): void;
}

/** Loads the element's module from the daemon (once); resolves when <missive-inbox> is defined. */
export function loadMissiveInbox(baseUrl = ''): Promise<CustomElementConstructor> {
  if (typeof customElements === 'undefined') return Promise.reject(new Error('missive-react: no custom elements here'));
  if (!customElements.get('missive-inbox')) {
    const src = `${baseUrl.replace(/\/+$/, '')}/ui/missive-inbox.js`;
    import(/* @vite-ignore */ /* webpackIgnore: true */ src).catch(() => undefined);
  }
  return customElements.whenDefined('missive-inbox');
}

// ---- the counts store: the last counts any mounted inbox reported ------------------------------

let counts: MissiveCounts | null = null;
const listeners = new Set<() => void>();

function publish(c: MissiveCounts): void {
  counts = c;
  for (const l of listeners) l();
}

function subscribe(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

/** The unread counts of the inbox on the page (null until one has reported); re-renders on change. */
export function useMissiveCounts(): MissiveCounts | null {
  return useSyncExternalStore(subscribe, () => counts, () => null);
}

// ---- the component -------------------------------------------------------------------------------

const ATTRIBUTES: [keyof MissiveInboxProps, string][] = [
  ['baseUrl', 'base-url'], ['user', 'user'], ['roles', 'roles'], ['permissions', 'permissions'],
  ['tenant', 'tenant'], ['locale', 'locale'], ['mode', 'mode'], ['pageSize', 'page-size'],
  ['pollMs', 'poll-ms'], ['heading', 'heading'],
];

function attributes(props: MissiveInboxProps): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [prop, attr] of ATTRIBUTES) {
    const v = props[prop];
    if (v !== undefined && v !== null && v !== '') out[attr] = String(v);
  }
  if (props.className) out.class = props.className;
  if (props.id) out.id = props.id;
  return out;
}

/** <MissiveInbox baseUrl=… getToken=… locale="de" mode="popover" onAction=… />. */
export function MissiveInbox(props: MissiveInboxProps): ReactElement {
  const ref = useRef<MissiveInboxElement | null>(null);
  const handlers = useRef(props);
  handlers.current = props;

  // properties: set after mount and whenever they change (attributes cannot carry them)
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    if (props.token !== undefined && el.token !== props.token) el.token = props.token;
  }, [props.token]);
  useEffect(() => {
    const el = ref.current;
    if (el && props.getToken && el.getToken !== props.getToken) el.getToken = props.getToken;
  }, [props.getToken]);
  useEffect(() => {
    const el = ref.current;
    if (el && props.strings) el.strings = props.strings;
  }, [props.strings]);
  useEffect(() => {
    const el = ref.current;
    if (el) el.renderItem = props.renderItem ?? null;
  }, [props.renderItem]);

  // events → the latest callbacks, and the counts store
  useEffect(() => {
    const el = ref.current;
    if (!el) return undefined;
    const onAction = (e: Event) => handlers.current.onAction?.((e as CustomEvent<MissiveActionDetail>).detail);
    const onCounts = (e: Event) => {
      const c = (e as CustomEvent<MissiveCounts>).detail;
      publish(c);
      handlers.current.onCounts?.(c);
    };
    const onError = (e: Event) => handlers.current.onError?.((e as CustomEvent<{ status: number; code: string; message: string }>).detail);
    el.addEventListener('missive-action', onAction);
    el.addEventListener('missive-counts', onCounts);
    el.addEventListener('missive-error', onError);
    return () => {
      el.removeEventListener('missive-action', onAction);
      el.removeEventListener('missive-counts', onCounts);
      el.removeEventListener('missive-error', onError);
    };
  }, []);

  return createElement('missive-inbox', { ref, ...attributes(props) });
}
