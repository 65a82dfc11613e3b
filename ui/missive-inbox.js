// missive-inbox.js — the <missive-inbox> custom element, and the small HTTP client it (and the
// console at /ui/) talks to missived with. One ES module, no dependencies, no build step:
//
//   <script type="module" src="https://missive.example.com/ui/missive-inbox.js"></script>
//   <missive-inbox base-url="https://missive.example.com"></missive-inbox>
//   document.querySelector('missive-inbox').getToken = async () => myApp.freshToken();
//
// Message text is attacker-controlled (any sender writes it), so this file never turns data into
// markup: every string from the API reaches the page through textContent or a text node, never
// innerHTML, and no URL from data becomes a link. Styles live in a constructed stylesheet adopted by
// the shadow root, so a page whose Content-Security-Policy forbids inline styles and scripts (as
// /ui/ does) still shows it.

/** An error answered by missived: HTTP status, the error code, its message and extra fields. */
export class MissiveError extends Error {
  constructor(status, code, message, fields = {}) {
    super(message);
    this.name = 'MissiveError';
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/** The base URL's host is a loopback address (headers mode is allowed only there). */
export function isLoopback(baseUrl) {
  try {
    return LOOPBACK.test(new URL(baseUrl, globalThis.location?.href).hostname);
  } catch {
    return false;
  }
}

/**
 * The public HTTP API, as the element and the console use it. Identity is either a token (a
 * string, or a function returning one or a promise of one) sent as `Authorization: Bearer`, or,
 * in headers mode against a loopback daemon, a user id (with optional roles, permissions, tenant)
 * sent as the X-User-* headers.
 */
export class MissiveApi {
  constructor({ baseUrl = '', token = null, getToken = null, user = null, roles = '', permissions = '', tenant = '' } = {}) {
    this.baseUrl = String(baseUrl || '').replace(/\/+$/, '');
    this.token = token;
    this.getToken = getToken;
    this.user = user;
    this.roles = roles;
    this.permissions = permissions;
    this.tenant = tenant;
  }

  url(path, query) {
    const base = this.baseUrl || globalThis.location?.origin || '';
    const u = new URL(base + path);
    for (const [k, v] of Object.entries(query || {}))
      if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, String(v));
    return u.toString();
  }

  async headers(extra = {}) {
    const h = { Accept: 'application/json', ...extra };
    let token = this.token;
    if (!token && typeof this.getToken === 'function') token = await this.getToken();
    if (token) {
      h.Authorization = `Bearer ${token}`;
    } else if (this.user) {
      if (!isLoopback(this.url('/'))) throw new MissiveError(0, 'unauthenticated', 'the user attribute (headers mode) works only against a daemon on a loopback address; give the inbox a token');
      h['X-User-Id'] = this.user;
      if (this.roles) h['X-User-Roles'] = this.roles;
      if (this.permissions) h['X-User-Permissions'] = this.permissions;
    }
    if (this.tenant) h['X-Tenant-Id'] = this.tenant;
    return h;
  }

  /** Sends one request; resolves to {status, body} for 2xx, throws MissiveError otherwise. */
  async request(method, path, { query, body, headers } = {}) {
    const init = { method, headers: await this.headers(headers), cache: 'no-store' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(this.url(path, query), init);
    } catch {
      throw new MissiveError(0, 'network', 'missive cannot be reached; check the connection and try again');
    }
    let data = null;
    const text = await res.text();
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (!res.ok) {
      const e = (data && data.error) || {};
      const { code = 'http_' + res.status, message = `missive answered ${res.status}`, ...fields } = e;
      throw new MissiveError(res.status, code, message, fields);
    }
    return { status: res.status, body: data };
  }

  get(path, query) { return this.request('GET', path, { query }); }
  post(path, body, headers) { return this.request('POST', path, { body, headers }); }

  listMessages(query) { return this.get('/messages', query).then((r) => r.body); }
  count(query) { return this.get('/messages/count', query).then((r) => r.body); }
  message(id) { return this.get(`/messages/${encodeURIComponent(id)}`).then((r) => r.body); }
  actions(id, usertype) { return this.get(`/messages/${encodeURIComponent(id)}/actions/${usertype}`).then((r) => r.body); }
  mark(id, what) { return this.post(`/messages/${encodeURIComponent(id)}/${what}`).then((r) => r.body); }
  markAll(what, filter) { return this.post(`/messages/${what}-all`, filter || {}).then((r) => r.body); }
  act(id, actionCd, input, resumeToken) {
    return this.post(`/messages/${encodeURIComponent(id)}/action/${encodeURIComponent(actionCd)}`, input || {},
      resumeToken ? { 'X-Resume-Token': resumeToken } : undefined);
  }
  approval(id) { return this.get(`/approvals/${encodeURIComponent(id)}`).then((r) => r.body); }
  streamTicket() { return this.post('/stream-tickets').then((r) => r.body); }
}

/** Words for the errors a press can meet; the server's own message follows them. */
export function explain(err) {
  const f = err.fields || {};
  switch (err.code) {
    case 'action_conflict': return 'Someone else is acting on this message right now, so your press was not run. The list shows what happened.';
    case 'message_archived': return 'This message was already handled and archived, so nothing was done.';
    case 'action_retryable': return 'The action did not go through; nothing was lost and you can press again.';
    case 'action_needs_review': return `The action is waiting for an operator to review it${f.sagaId ? ` (saga ${f.sagaId})` : ''}. Press again once it is resolved.`;
    case 'action_compensated': return 'The action was undone, so nothing happened. You can press again.';
    case 'approval_denied': return 'The approval was denied, so the action did not run.';
    case 'approval_token_expired': return 'The approval expired. Press the action again to ask anew.';
    case 'approval_token_replay': return 'This approval was already used.';
    case 'approval_pending': return 'The approval has not been decided yet.';
    case 'approval_binding': return 'The approval was given for someone or something else.';
    case 'action_not_allowed': return 'You are not allowed to do this.';
    case 'message_not_found': return 'This message no longer exists or is not visible to you.';
    case 'unauthenticated': return 'You are not signed in.';
    case 'forbidden': return 'You do not have the permission for this.';
    case 'network': return 'missive cannot be reached.';
    default: return err.status >= 500 ? 'missive could not do this right now.' : 'This did not work.';
  }
}

// ---- DOM helpers: text only ---------------------------------------------------------------------

const SAFE_ATTR = /^(class|id|part|role|type|tabindex|title|hidden|disabled|value|name|for|rows|required|placeholder|lang|dir|data-[a-z-]+|aria-[a-z-]+)$/;

/** Builds an element; strings and numbers among the children become text nodes. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (SAFE_ATTR.test(k)) el.setAttribute(k, v === true ? '' : String(v));
    else throw new Error(`h(): attribute ${k} is not allowed`);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function timeText(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const now = Date.now();
  const s = Math.round((now - ms) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400 && d.getDate() === new Date(now).getDate()) return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return d.toLocaleDateString([], { month: 'short', day: 'numeric' });
}

function resultText(result) {
  if (result === null || result === undefined) return 'Done.';
  if (typeof result === 'string' || typeof result === 'number' || typeof result === 'boolean') return `Done: ${result}`;
  const s = JSON.stringify(result);
  return s.length > 200 ? `Done: ${s.slice(0, 200)}…` : `Done: ${s}`;
}

// ---- styles -------------------------------------------------------------------------------------

const CSS = `
:host {
  --_bg: var(--missive-bg, #ffffff);
  --_fg: var(--missive-fg, #1b1e24);
  --_muted: var(--missive-muted, #5d6472);
  --_border: var(--missive-border, #d9dde4);
  --_surface: var(--missive-surface, #f5f7fa);
  --_accent: var(--missive-accent, #2457d6);
  --_accent-fg: var(--missive-accent-fg, #ffffff);
  --_danger: var(--missive-danger, #c0312b);
  --_success: var(--missive-success, #1d7a46);
  --_unread: var(--missive-unread, #2457d6);
  --_focus: var(--missive-focus, #f0a500);
  --_radius: var(--missive-radius, 10px);
  display: block;
  box-sizing: border-box;
  min-width: 0;
  max-width: var(--missive-max-width, 720px);
  font: var(--missive-font, 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif);
  color: var(--_fg);
  background: var(--_bg);
  border: 1px solid var(--_border);
  border-radius: var(--_radius);
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :host {
    --_bg: var(--missive-bg, #17191e);
    --_fg: var(--missive-fg, #e8eaee);
    --_muted: var(--missive-muted, #a2a9b6);
    --_border: var(--missive-border, #343843);
    --_surface: var(--missive-surface, #21242b);
    --_accent: var(--missive-accent, #7fa3ff);
    --_accent-fg: var(--missive-accent-fg, #0d1320);
    --_danger: var(--missive-danger, #ff7b72);
    --_success: var(--missive-success, #5fd08f);
    --_unread: var(--missive-unread, #7fa3ff);
  }
}
:host([hidden]), [hidden] { display: none !important; }
*, *::before, *::after { box-sizing: border-box; }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; padding: 12px 14px; border-bottom: 1px solid var(--_border); }
h2 { margin: 0; font-size: 1.1em; display: flex; align-items: center; gap: 8px; flex: 1 1 auto; }
.badge { display: inline-flex; min-width: 1.6em; height: 1.6em; padding: 0 .45em; align-items: center; justify-content: center; border-radius: 999px; background: var(--_unread); color: var(--_accent-fg); font-size: .8em; font-weight: 700; }
.badge[data-count="0"] { background: var(--_surface); color: var(--_muted); }
.tools { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
label.check { display: inline-flex; gap: 6px; align-items: center; color: var(--_muted); font-size: .92em; }
select, textarea, input[type=text] { font: inherit; color: var(--_fg); background: var(--_bg); border: 1px solid var(--_border); border-radius: 6px; padding: 4px 6px; max-width: 100%; }
button { font: inherit; cursor: pointer; border-radius: 6px; border: 1px solid var(--_border); background: var(--_surface); color: var(--_fg); padding: 5px 12px; min-height: 32px; }
button:disabled { opacity: .55; cursor: default; }
button:focus-visible, select:focus-visible, input:focus-visible, textarea:focus-visible, .summary:focus-visible { outline: 3px solid var(--_focus); outline-offset: 1px; }
.status { padding: 6px 14px; color: var(--_muted); font-size: .9em; min-height: 0; }
.status:empty { display: none; }
.status.error { color: var(--_danger); }
ul.list { list-style: none; margin: 0; padding: 0; max-height: var(--missive-max-height, none); overflow: auto; }
li.item { border-bottom: 1px solid var(--_border); }
li.item.open { background: var(--_surface); }
li.item:last-child { border-bottom: 0; }
.head { display: flex; align-items: flex-start; }
.head:hover { background: var(--_surface); }
.dismiss-x { border: 0; background: transparent; color: var(--_muted); font-size: 1.25em; line-height: 1; min-width: 36px; min-height: 36px; padding: 0; margin: 6px 6px 0 0; border-radius: 50%; }
.dismiss-x:hover { background: var(--_border); color: var(--_fg); }
.summary { all: unset; box-sizing: border-box; display: grid; grid-template-columns: 12px 1fr auto; gap: 2px 10px; flex: 1 1 auto; min-width: 0; padding: 10px 4px 10px 14px; cursor: pointer; }
.dot { width: 9px; height: 9px; border-radius: 50%; margin-top: .45em; background: transparent; }
li.unread .dot { background: var(--_unread); }
.title { font-weight: 500; overflow-wrap: anywhere; }
li.unread .title { font-weight: 700; }
.time { color: var(--_muted); font-size: .82em; white-space: nowrap; }
.short { grid-column: 2 / 4; color: var(--_muted); font-size: .92em; overflow-wrap: anywhere; }
.tag { display: inline-block; margin-left: 6px; padding: 0 6px; border-radius: 4px; font-size: .75em; font-weight: 600; background: var(--_surface); color: var(--_muted); border: 1px solid var(--_border); vertical-align: middle; }
.detail { padding: 0 14px 12px 36px; }
.long { margin: 0 0 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
.actions, .row { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.row { margin-top: 10px; }
button.variant-primary { background: var(--_accent); color: var(--_accent-fg); border-color: var(--_accent); }
button.variant-success { background: var(--_success); color: var(--_accent-fg); border-color: var(--_success); }
button.variant-danger { background: transparent; color: var(--_danger); border-color: var(--_danger); }
button.link { border: 0; background: transparent; color: var(--_muted); padding: 5px 6px; text-decoration: underline; }
.outcome { margin: 10px 0 0; font-size: .92em; overflow-wrap: anywhere; }
.outcome.ok { color: var(--_success); }
.outcome.error { color: var(--_danger); }
.outcome.info { color: var(--_muted); }
.empty { padding: 28px 14px; text-align: center; color: var(--_muted); }
.more { display: block; margin: 10px auto; }
.sentinel { height: 1px; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
dialog { border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg); color: var(--_fg); padding: 18px; width: min(420px, calc(100vw - 32px)); }
dialog::backdrop { background: rgb(0 0 0 / .45); }
dialog h3 { margin: 0 0 8px; font-size: 1.05em; overflow-wrap: anywhere; }
dialog p { margin: 0 0 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
dialog label { display: block; margin-bottom: 4px; font-size: .92em; }
dialog textarea { width: 100%; }
dialog .row { justify-content: flex-end; }
@media (max-width: 420px) {
  header { padding: 10px; }
  .summary { padding: 10px; }
  .detail { padding: 0 10px 12px 10px; }
}
`;

let sheet = null;
function styles() {
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
  }
  return sheet;
}

// ---- the element --------------------------------------------------------------------------------

const PAGE = 20;

/**
 * <missive-inbox base-url="…" [user="…" roles="…" permissions="…" tenant="…"] [get-token="fnName"]
 *                [page-size="20"] [heading="Inbox"]>
 * Properties: token (string), getToken (function → string | Promise<string>), api (MissiveApi),
 * refresh(). Events: missive-action {messageId, actionCd, ok, result?, error?}, missive-counts
 * {count, unseen, unread}.
 */
export class MissiveInbox extends HTMLElement {
  static get observedAttributes() { return ['base-url', 'user', 'roles', 'permissions', 'tenant', 'get-token', 'heading']; }

  constructor() {
    super();
    this.attachShadow({ mode: 'open' }).adoptedStyleSheets = [styles()];
    this._token = null;
    this._getToken = null;
    this._items = new Map();     // id → {m, el, actions, busy, outcome, pending}
    this._order = [];            // ids, newest first
    this._cursor = null;
    this._done = false;
    this._loading = false;
    this._open = null;
    this._filter = { unread: false, templateCd: '' };
    this._templates = new Set();
    this._counts = null;
    this._generation = 0;
    this._listGeneration = 0;
    this._lastEventId = null;
    this._es = null;
    this._retryMs = 500;
    this._live = 'off';
    this._seenQueue = new Set();
    this._build();
  }

  get token() { return this._token; }
  set token(v) { this._token = v || null; this._restart(); }
  get getToken() { return this._getToken; }
  set getToken(fn) { this._getToken = typeof fn === 'function' ? fn : null; this._restart(); }
  /** 'stream' when live over SSE, 'polling' when falling back, 'off' before connecting. */
  get live() { return this._live; }

  get api() {
    let getToken = this._getToken;
    const named = this.getAttribute('get-token');
    if (!getToken && named) {
      const fn = named.split('.').reduce((o, k) => (o == null ? o : o[k]), globalThis);
      if (typeof fn === 'function') getToken = fn;
    }
    return new MissiveApi({
      baseUrl: this.getAttribute('base-url') || '',
      token: this._token,
      getToken,
      user: this.getAttribute('user'),
      roles: this.getAttribute('roles') || '',
      permissions: this.getAttribute('permissions') || '',
      tenant: this.getAttribute('tenant') || '',
    });
  }

  connectedCallback() {
    this._connected = true;
    this._onOnline = () => { if (this._live !== 'stream') this._connectStream(true); };
    globalThis.addEventListener('online', this._onOnline);
    this._restart();
  }

  disconnectedCallback() {
    this._connected = false;
    globalThis.removeEventListener('online', this._onOnline);
    this._stop();
  }

  attributeChangedCallback(name, oldValue, newValue) {
    if (name === 'heading') this._heading.firstChild.textContent = newValue || 'Inbox';
    else if (oldValue !== newValue && this._connected) this._restart();
  }

  /** Reloads the list and the counts from the first page. */
  refresh() { return this._reload(); }

  // ---- structure --------------------------------------------------------------------------------

  _build() {
    const root = this.shadowRoot;
    this._badge = h('span', { class: 'badge', part: 'badge', 'data-count': '0', 'aria-live': 'polite' }, '0');
    this._heading = h('h2', { part: 'heading', id: 'heading' }, h('span', { class: 'heading-text' }, 'Inbox'), this._badge);
    this._unreadBox = h('input', { type: 'checkbox', class: 'filter-unread', onchange: () => { this._filter.unread = this._unreadBox.checked; this._reload(); } });
    this._templateSel = h('select', { class: 'filter-template', 'aria-label': 'Template', onchange: () => { this._filter.templateCd = this._templateSel.value; this._reload(); } },
      h('option', { value: '' }, 'All kinds'));
    this._markAll = h('button', { type: 'button', class: 'mark-all', part: 'button', onclick: () => this._markAllRead() }, 'Mark all read');
    const header = h('header', { part: 'header' }, this._heading,
      h('div', { class: 'tools' }, h('label', { class: 'check' }, this._unreadBox, 'Unread only'), this._templateSel, this._markAll));
    this._status = h('div', { class: 'status', role: 'status', 'aria-live': 'polite' });
    this._list = h('ul', { class: 'list', part: 'list', 'aria-labelledby': 'heading' });
    this._sentinel = h('div', { class: 'sentinel', 'aria-hidden': 'true' });
    this._more = h('button', { type: 'button', class: 'more', part: 'button', hidden: true, onclick: () => this._loadMore() }, 'Load more');
    this._dialog = h('dialog', { class: 'confirm', part: 'dialog', 'aria-labelledby': 'confirm-title' });
    root.append(header, this._status, this._list, this._sentinel, this._more, this._dialog);

    this._scrollObserver = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this._loadMore();
    }, { rootMargin: '200px' });
    this._scrollObserver.observe(this._sentinel);
    this._seenObserver = new IntersectionObserver((entries) => {
      for (const e of entries) {
        if (!e.isIntersecting) continue;
        const id = e.target.dataset.id;
        const it = this._items.get(id);
        if (it && this._viewer(it.m).seenAt == null) this._seenQueue.add(id);
        this._seenObserver.unobserve(e.target);
      }
      if (this._seenQueue.size) {
        clearTimeout(this._seenTimer);
        this._seenTimer = setTimeout(() => this._flushSeen(), 250);
      }
    }, { threshold: 0.6 });
  }

  _say(text, isError = false) {
    this._status.textContent = text || '';
    this._status.classList.toggle('error', !!isError);
  }

  // ---- loading ----------------------------------------------------------------------------------

  _restart() {
    if (!this._connected) return;
    this._stop();
    this._lastEventId = null;
    this._reload();
    this._connectStream(false);
  }

  _stop() {
    this._generation++;
    if (this._es) this._es.close();
    this._es = null;
    clearTimeout(this._reconnectTimer);
    clearInterval(this._pollTimer);
    this._pollTimer = null;
    this._live = 'off';
  }

  _query(cursor) {
    const q = { limit: Number(this.getAttribute('page-size')) || PAGE };
    if (cursor) q.cursor = cursor;
    if (this._filter.unread) q.read = 'false';
    if (this._filter.templateCd) q.templateCd = this._filter.templateCd;
    return q;
  }

  async _reload() {
    const gen = ++this._listGeneration;
    this._cursor = null;
    this._done = false;
    this._loading = true;
    try {
      const page = await this.api.listMessages(this._query(null));
      if (gen !== this._listGeneration) return;
      this._items.clear();
      this._order = [];
      this._list.replaceChildren();
      this._absorbPage(page);
      this._say('');
      this.setAttribute('data-ready', '');
    } catch (err) {
      if (gen === this._listGeneration) this._fail(err);
    } finally {
      if (gen === this._listGeneration) this._loading = false;
    }
    this._refreshCounts();
    this._renderEmpty();
  }

  async _loadMore() {
    if (this._loading || this._done || !this._cursor) return;
    const gen = this._listGeneration;
    this._loading = true;
    this._more.disabled = true;
    try {
      const page = await this.api.listMessages(this._query(this._cursor));
      if (gen === this._listGeneration) this._absorbPage(page);
    } catch (err) {
      this._fail(err);
    } finally {
      this._loading = false;
      this._more.disabled = false;
    }
  }

  _absorbPage(page) {
    for (const m of page.messages || []) this._upsert(m, 'append');
    this._cursor = page.nextCursor || null;
    this._done = !this._cursor;
    this._more.hidden = this._done;
    this._renderEmpty();
    // a short first page leaves the sentinel visible: keep filling until the view is full
    if (!this._done) requestAnimationFrame(() => {
      const r = this._sentinel.getBoundingClientRect();
      if (r.top < (globalThis.innerHeight || 800) + 200) this._loadMore();
    });
  }

  _fail(err) {
    this._say(`${explain(err)} (${err.message})`, true);
  }

  _renderEmpty() {
    const empty = this._list.querySelector(':scope > .empty');
    if (this._order.length === 0 && !empty) this._list.append(h('li', { class: 'empty' }, this._filter.unread || this._filter.templateCd ? 'Nothing matches these filters.' : 'You are all caught up.'));
    else if (this._order.length && empty) empty.remove();
  }

  async _refreshCounts() {
    try {
      this._setCounts(await this.api.count());
    } catch {
      // the badge keeps its last value; the list shows the error
    }
  }

  _setCounts(c) {
    if (!c || typeof c !== 'object') return;
    this._counts = c;
    const n = typeof c.unread === 'number' ? c.unread : (typeof c.count === 'number' ? c.count : 0);
    this._badge.textContent = n > 99 ? '99+' : String(n);
    this._badge.dataset.count = String(n);
    this._badge.setAttribute('aria-label', `${n} unread`);
    this.dispatchEvent(new CustomEvent('missive-counts', { detail: c }));
  }

  // ---- one message ------------------------------------------------------------------------------

  _viewer(m) { return m.viewer || { seenAt: null, readAt: null, dismissedAt: null }; }

  _me() { return this.getAttribute('user') || this._tokenSubject(); }

  _tokenSubject() {
    const t = this._token;
    if (!t || typeof t !== 'string') return null;
    try {
      const part = t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(atob(part)).sub || null;
    } catch {
      return null;
    }
  }

  _usertype(m) {
    const me = this._me();
    return me && m.fromUser && String(m.fromUser).trim() === me && String(m.toUser || '').trim() !== me ? 'sender' : 'receiver';
  }

  _content(m) {
    const c = (this._usertype(m) === 'sender' ? m.senderContent : m.receiverContent) || {};
    return { title: c.title || m.templateCd || '(no title)', short: c.short || '', long: c.long || '' };
  }

  _matches(m) {
    const v = this._viewer(m);
    if (v.dismissedAt != null) return false;
    if (this._filter.unread && v.readAt != null) return false;
    if (this._filter.templateCd && m.templateCd !== this._filter.templateCd) return false;
    return true;
  }

  _noteTemplate(cd) {
    if (!cd || this._templates.has(cd)) return;
    this._templates.add(cd);
    const opts = [...this._templates].sort();
    const current = this._templateSel.value;
    this._templateSel.replaceChildren(h('option', { value: '' }, 'All kinds'), ...opts.map((t) => h('option', { value: t }, t)));
    this._templateSel.value = current;
  }

  /** Adds or updates a message; where: 'append' (paging), 'top' (live), 'keep' (in place). */
  _upsert(m, where) {
    if (!m || !m.id) return;
    this._noteTemplate(m.templateCd);
    let it = this._items.get(m.id);
    if (!it) {
      if (!this._matches(m)) return;
      it = { m, el: null, actions: null, outcome: null, pending: null, busy: false };
      this._items.set(m.id, it);
      if (where === 'top') {
        const i = this._order.findIndex((id) => {
          const o = this._items.get(id).m;
          return o.createdAt < m.createdAt || (o.createdAt === m.createdAt && o.id < m.id);
        });
        if (i < 0) this._order.push(m.id); else this._order.splice(i, 0, m.id);
      } else {
        this._order.push(m.id);
      }
      it.el = h('li', { class: 'item', part: 'item', 'data-id': m.id });
      const next = this._items.get(this._order[this._order.indexOf(m.id) + 1]);
      this._list.insertBefore(it.el, next ? next.el : null);
      this._seenObserver.observe(it.el);
    } else {
      it.m = m;
      if (!this._matches(m) && this._open !== m.id) {
        this._remove(m.id);
        return;
      }
    }
    this._renderItem(it);
    this._renderEmpty();
  }

  _remove(id) {
    const it = this._items.get(id);
    if (!it) return;
    this._seenObserver.unobserve(it.el);
    it.el.remove();
    this._items.delete(id);
    this._order = this._order.filter((x) => x !== id);
    if (this._open === id) this._open = null;
    this._renderEmpty();
  }

  _renderItem(it) {
    const m = it.m;
    const v = this._viewer(m);
    const open = this._open === m.id;
    const c = this._content(m);
    it.el.className = 'item' + (v.readAt == null ? ' unread' : '') + (open ? ' open' : '');
    it.el.dataset.state = m.actionState || '';
    it.el.dataset.templateCd = m.templateCd || '';
    const tags = [];
    if (m.actionState === 'archived') tags.push(h('span', { class: 'tag' }, 'Done'));
    else if (m.actionState === 'processing') tags.push(h('span', { class: 'tag' }, 'In progress'));
    else if (m.actionState === 'retryable') tags.push(h('span', { class: 'tag' }, 'Needs attention'));
    const summary = h('button', {
      type: 'button', class: 'summary', 'aria-expanded': open ? 'true' : 'false',
      'aria-controls': `detail-${m.id}`, onclick: () => this._toggle(m.id),
    },
    h('span', { class: 'dot', 'aria-hidden': 'true' }),
    h('span', { class: 'title' }, c.title, v.readAt == null ? h('span', { class: 'sr' }, ' (unread)') : null, ...tags),
    h('time', { class: 'time' }, timeText(m.createdAt)),
    c.short ? h('span', { class: 'short' }, c.short) : null);
    const quick = h('button', { type: 'button', class: 'dismiss-x', part: 'button', 'aria-label': `Dismiss: ${c.title}`, title: 'Dismiss', onclick: () => this._dismiss(it) }, '×');
    const children = [h('div', { class: 'head' }, summary, quick)];
    if (open) children.push(this._detail(it, c));
    const hadFocus = it.el.contains(this.shadowRoot.activeElement) ? this.shadowRoot.activeElement.className : null;
    it.el.replaceChildren(...children);
    if (hadFocus) {
      const again = it.el.querySelector('.' + hadFocus.split(' ')[0]);
      if (again) again.focus();
    }
  }

  _detail(it, c) {
    const m = it.m;
    const parts = [];
    if (c.long) parts.push(h('p', { class: 'long' }, c.long));
    const actions = h('div', { class: 'actions' });
    if (m.actionState !== 'archived' && it.actions) {
      for (const a of it.actions.actions || []) {
        actions.append(h('button', {
          type: 'button', part: 'button action', class: `action variant-${a.variant || 'secondary'}`,
          'data-action': a.actionCd, disabled: it.busy, onclick: () => this._press(it, a),
        }, a.name || a.actionCd));
      }
    }
    if (it.pending && it.pending.state === 'approved') {
      actions.append(h('button', { type: 'button', part: 'button action', class: 'action variant-primary continue', 'data-action': it.pending.actionCd, disabled: it.busy, onclick: () => this._continue(it) }, 'Continue'));
    }
    if (actions.childNodes.length) parts.push(actions);
    if (it.outcome) parts.push(h('p', { class: `outcome ${it.outcome.kind}`, role: 'status', 'aria-live': 'polite' }, it.outcome.text));
    const v = this._viewer(m);
    parts.push(h('div', { class: 'row' },
      h('button', { type: 'button', class: 'link toggle-read', onclick: () => this._mark(it, v.readAt == null ? 'read' : 'unread') }, v.readAt == null ? 'Mark read' : 'Mark unread'),
      h('button', { type: 'button', class: 'link dismiss', onclick: () => this._dismiss(it) }, 'Dismiss')));
    return h('div', { class: 'detail', id: `detail-${m.id}` }, parts);
  }

  async _toggle(id) {
    const it = this._items.get(id);
    if (!it) return;
    const wasOpen = this._open === id;
    const prev = this._open && this._items.get(this._open);
    this._open = wasOpen ? null : id;
    if (prev) {
      if (!this._matches(prev.m) && prev !== it) this._remove(prev.m.id);
      else this._renderItem(prev);
    }
    this._renderItem(it);
    if (wasOpen) return;
    const tasks = [];
    if (this._viewer(it.m).readAt == null) tasks.push(this._mark(it, 'read'));
    if (!it.actions && it.m.actionState !== 'archived') tasks.push(this._loadActions(it));
    await Promise.all(tasks);
  }

  async _loadActions(it) {
    try {
      it.actions = await this.api.actions(it.m.id, this._usertype(it.m));
    } catch (err) {
      it.actions = { actions: [] };
      if (err.code !== 'message_not_found') it.outcome = { kind: 'error', text: `${explain(err)} (${err.message})` };
    }
    if (this._items.get(it.m.id) === it) this._renderItem(it);
  }

  async _mark(it, what) {
    try {
      const m = await this.api.mark(it.m.id, what);
      if (this._items.get(it.m.id) === it) this._upsert(m, 'keep');
      this._refreshCounts();
    } catch (err) {
      this._fail(err);
    }
  }

  async _flushSeen() {
    const ids = [...this._seenQueue];
    this._seenQueue.clear();
    let changed = false;
    for (const id of ids) {
      const it = this._items.get(id);
      if (!it || this._viewer(it.m).seenAt != null) continue;
      try {
        const m = await this.api.mark(id, 'seen');
        if (this._items.get(id) === it) it.m = m;
        changed = true;
      } catch {
        // seen is a courtesy; the next display tries again
      }
    }
    if (changed) this._refreshCounts();
  }

  async _dismiss(it) {
    const id = it.m.id;
    const idx = this._order.indexOf(id);
    try {
      await this.api.mark(id, 'dismiss');
      this._open = null;
      this._remove(id);
      const next = this._items.get(this._order[Math.min(idx, this._order.length - 1)]);
      (next ? next.el.querySelector('.summary') : this._markAll).focus();
      this._say('Dismissed.');
      this._refreshCounts();
    } catch (err) {
      this._fail(err);
    }
  }

  async _markAllRead() {
    this._markAll.disabled = true;
    try {
      const filter = this._filter.templateCd ? { templateCd: this._filter.templateCd } : {};
      const r = await this.api.markAll('read', filter);
      const now = Date.now();
      for (const it of this._items.values()) {
        if (filter.templateCd && it.m.templateCd !== filter.templateCd) continue;
        const v = this._viewer(it.m);
        it.m = { ...it.m, viewer: { ...v, seenAt: v.seenAt ?? now, readAt: v.readAt ?? now } };
      }
      for (const id of [...this._order]) this._upsert(this._items.get(id).m, 'keep');
      this._say(r && typeof r.updated === 'number' ? `Marked ${r.updated} as read.` : 'Marked all as read.');
      this._refreshCounts();
    } catch (err) {
      this._fail(err);
    } finally {
      this._markAll.disabled = false;
    }
  }

  // ---- actions ----------------------------------------------------------------------------------

  _confirm(a) {
    const conf = a.confirmation;
    if (!conf) return Promise.resolve({});
    return new Promise((resolve) => {
      const d = this._dialog;
      const needsNotes = !!conf.notesLabel;
      const required = !!conf.requireNotes;
      const notes = needsNotes ? h('textarea', { id: 'confirm-notes', class: 'notes', rows: 3, required }) : null;
      const err = h('p', { class: 'outcome error', role: 'alert' });
      const finish = (value) => { d.close(); resolve(value); };
      const ok = h('button', { type: 'button', class: `confirm-ok variant-${a.variant || 'primary'}`, part: 'button', onclick: () => {
        const text = notes ? notes.value.trim() : '';
        if (required && !text) { err.textContent = `${conf.notesLabel} is required.`; notes.focus(); return; }
        finish(text ? { notes: text } : {});
      } }, a.name || 'Confirm');
      const cancel = h('button', { type: 'button', class: 'confirm-cancel', part: 'button', onclick: () => finish(null) }, 'Cancel');
      // replaceChildren() writes null as the text "null": the parts a confirmation lacks are left out
      d.replaceChildren(...[
        h('h3', { id: 'confirm-title' }, conf.title || a.name || 'Are you sure?'),
        conf.message ? h('p', { class: 'confirm-message' }, conf.message) : null,
        needsNotes ? h('label', { for: 'confirm-notes' }, conf.notesLabel) : null, notes, err,
        h('div', { class: 'row' }, cancel, ok)].filter((c) => c !== null));
      d.oncancel = (e) => { e.preventDefault(); finish(null); };
      d.showModal();
      (notes || ok).focus();
    });
  }

  async _press(it, a) {
    if (it.busy) return;
    const input = await this._confirm(a);
    if (input === null) return;
    await this._run(it, a.actionCd, input, null);
  }

  async _continue(it) {
    const p = it.pending;
    await this._run(it, p.actionCd, p.input, p.resumeToken);
  }

  async _run(it, actionCd, input, resumeToken) {
    const id = it.m.id;
    it.busy = true;
    it.outcome = { kind: 'info', text: 'Working…' };
    this._renderItem(it);
    let detail;
    try {
      const r = await this.api.act(id, actionCd, input, resumeToken);
      if (r.status === 202 && r.body && r.body.status === 'approval_required') {
        it.pending = { actionCd, input, approvalId: r.body.approvalId, resumeToken: r.body.resumeToken, state: 'pending' };
        it.outcome = { kind: 'info', text: 'This needs an approval first. You can continue here once it is approved.' };
        this._watchApproval(it);
        detail = { messageId: id, actionCd, ok: false, approvalId: r.body.approvalId };
      } else {
        it.pending = null;
        it.outcome = { kind: 'ok', text: resultText(r.body ? r.body.result : null) };
        detail = { messageId: id, actionCd, ok: true, result: r.body ? r.body.result : null };
      }
    } catch (err) {
      if (resumeToken && /^approval_/.test(err.code)) it.pending = null;
      it.outcome = { kind: 'error', text: `${explain(err)} (${err.message})` };
      detail = { messageId: id, actionCd, ok: false, error: { status: err.status, code: err.code, message: err.message } };
    }
    it.busy = false;
    try {
      const m = await this.api.message(id);
      it.m = m;
      it.actions = m.actionState === 'archived' ? null : await this.api.actions(id, this._usertype(m)).catch(() => it.actions);
    } catch {
      // keep what we had; the outcome already says what happened
    }
    if (this._items.get(id) === it) this._renderItem(it);
    this.dispatchEvent(new CustomEvent('missive-action', { detail }));
    this._refreshCounts();
  }

  async _watchApproval(it) {
    const p = it.pending;
    const gen = this._generation;
    for (let delay = 1000; it.pending === p && gen === this._generation; delay = Math.min(delay * 1.5, 10000)) {
      await new Promise((r) => setTimeout(r, delay));
      let a;
      try {
        a = await this.api.approval(p.approvalId);
      } catch {
        continue;
      }
      if (a.state === 'pending') continue;
      p.state = a.state;
      if (a.state === 'approved') it.outcome = { kind: 'ok', text: `Approved${a.decidedBy ? ` by ${a.decidedBy}` : ''}. Press Continue to run it.` };
      else { it.outcome = { kind: 'error', text: `The approval was ${a.state}, so the action did not run.` }; it.pending = null; }
      if (this._items.get(it.m.id) === it) this._renderItem(it);
      return;
    }
  }

  // ---- live updates -----------------------------------------------------------------------------

  async _connectStream(immediate) {
    const gen = this._generation;
    clearTimeout(this._reconnectTimer);
    if (!immediate && this._es) return;
    let ticket;
    try {
      ticket = await this.api.streamTicket();
    } catch (err) {
      if (gen !== this._generation) return;
      // no stream on this daemon (or not reachable now): poll, and try the stream again later
      this._startPolling();
      this._scheduleReconnect(err.status === 404 ? 30000 : null);
      return;
    }
    if (gen !== this._generation) return;
    const url = this.api.url('/messages/stream', { ticket: ticket.ticket, lastEventId: this._lastEventId });
    const es = new EventSource(url);
    if (this._es) this._es.close();
    this._es = es;
    const handle = (type) => (e) => {
      if (e.lastEventId) this._lastEventId = e.lastEventId;
      let data = null;
      try { data = e.data ? JSON.parse(e.data) : null; } catch { return; }
      this._onEvent(type || (data && (data.type || data.event)) || 'message', data);
    };
    for (const t of ['message.created', 'message.updated', 'counts', 'reset']) es.addEventListener(t, handle(t));
    es.onmessage = handle(null);
    es.onopen = () => {
      if (gen !== this._generation) return;
      const wasDown = this._live !== 'stream';
      this._live = 'stream';
      this._retryMs = 500;
      clearInterval(this._pollTimer);
      this._pollTimer = null;
      this.setAttribute('data-live', 'stream');
      if (wasDown && this._hadStream) this._refreshCounts();
      this._hadStream = true;
    };
    es.onerror = () => {
      if (gen !== this._generation || this._es !== es) return;
      // the browser would retry with the same (soon expired) ticket: take over with a fresh one
      es.close();
      this._es = null;
      this._live = 'off';
      this.setAttribute('data-live', 'reconnecting');
      this._scheduleReconnect(null);
    };
  }

  _scheduleReconnect(ms) {
    const gen = this._generation;
    const delay = ms ?? this._retryMs;
    this._retryMs = Math.min(this._retryMs * 2, 15000);
    clearTimeout(this._reconnectTimer);
    this._reconnectTimer = setTimeout(() => { if (gen === this._generation) this._connectStream(true); }, delay);
  }

  _startPolling() {
    if (this._pollTimer) return;
    this._live = 'polling';
    this.setAttribute('data-live', 'polling');
    const ms = Number(this.getAttribute('poll-ms')) || 5000;
    this._pollTimer = setInterval(() => this._poll(), ms);
  }

  async _poll() {
    try {
      const page = await this.api.listMessages(this._query(null));
      for (const m of (page.messages || []).slice().reverse()) this._upsert(m, this._items.has(m.id) ? 'keep' : 'top');
      this._refreshCounts();
    } catch {
      // next tick
    }
  }

  _onEvent(type, data) {
    if (data && data.truncated && data.id && type.startsWith('message.')) {
      // a message too large to travel in an event: fetch it, then handle it as if it had
      this.api.message(data.id).then((m) => this._onEvent(type, m), () => {});
      return;
    }
    switch (type) {
      case 'message.created':
        this._upsert(data && data.message ? data.message : data, 'top');
        break;
      case 'message.updated': {
        const m = data && data.message ? data.message : data;
        if (!m || !m.id) break;
        const it = this._items.get(m.id);
        if (it) {
          if (it.m.actionState !== m.actionState) it.actions = null;
          this._upsert(m, 'keep');
          if (this._open === m.id && !it.actions && m.actionState !== 'archived') this._loadActions(it);
        } else {
          this._upsert(m, 'top');
        }
        break;
      }
      case 'counts':
        this._setCounts(data);
        break;
      case 'reset':
        this._reload();
        break;
      default:
        break;
    }
  }
}

if (!customElements.get('missive-inbox')) customElements.define('missive-inbox', MissiveInbox);
