// missive-inbox.js — the <missive-inbox> and <missive-preferences> custom elements, and the small
// HTTP client they (and the console at /ui/) talk to missived with. One ES module, no dependencies,
// no build step:
//
//   <script type="module" src="https://missive.example.com/ui/missive-inbox.js"></script>
//   <missive-inbox base-url="https://missive.example.com" locale="de" mode="popover"></missive-inbox>
//   document.querySelector('missive-inbox').getToken = async () => myApp.freshToken();
//
// Message text is attacker-controlled (any sender writes it), so this file never turns data into
// markup: every string from the API reaches the page through textContent or a text node, never
// innerHTML, and no URL from data becomes a link (an avatar image is the one URL used, and only an
// https:, http: or data:image one). Styles live in a constructed stylesheet adopted by the shadow
// root, so a page whose Content-Security-Policy forbids inline styles and scripts (as /ui/ does)
// still shows it. What end users read comes from the string catalogues below, never from an error
// body, an id or a template code: those go to the events, for the application's own logs.

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
 * The public HTTP API, as the elements and the console use it. Identity is either a token (a
 * string, or a function returning one or a promise of one) sent as `Authorization: Bearer`, or,
 * in headers mode against a loopback daemon, a user id (with optional roles, permissions, tenant)
 * sent as the X-User-* headers. `locale` goes out as Accept-Language, so contents come in it.
 */
export class MissiveApi {
  constructor({ baseUrl = '', token = null, getToken = null, user = null, roles = '', permissions = '', tenant = '', locale = '' } = {}) {
    this.baseUrl = String(baseUrl || '').replace(/\/+$/, '');
    this.token = token;
    this.getToken = getToken;
    this.user = user;
    this.roles = roles;
    this.permissions = permissions;
    this.tenant = tenant;
    this.locale = locale;
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
    if (this.locale) h['Accept-Language'] = this.locale;
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
  put(path, body) { return this.request('PUT', path, { body }); }

  listMessages(query) { return this.get('/messages', query).then((r) => r.body); }
  count(query) { return this.get('/messages/count', query).then((r) => r.body); }
  message(id) { return this.get(`/messages/${encodeURIComponent(id)}`).then((r) => r.body); }
  actions(id, usertype) { return this.get(`/messages/${encodeURIComponent(id)}/actions/${usertype}`).then((r) => r.body); }
  mark(id, what) { return this.post(`/messages/${encodeURIComponent(id)}/${what}`).then((r) => r.body); }
  markAll(what, filter) { return this.post(`/messages/${what}-all`, filter || {}).then((r) => r.body); }
  snooze(id, until) { return this.post(`/messages/${encodeURIComponent(id)}/snooze`, { until }).then((r) => r.body); }
  unsnooze(id) { return this.post(`/messages/${encodeURIComponent(id)}/unsnooze`).then((r) => r.body); }
  act(id, actionCd, input, resumeToken) {
    return this.post(`/messages/${encodeURIComponent(id)}/action/${encodeURIComponent(actionCd)}`, input || {},
      resumeToken ? { 'X-Resume-Token': resumeToken } : undefined);
  }
  approval(id) { return this.get(`/approvals/${encodeURIComponent(id)}`).then((r) => r.body); }
  streamTicket() { return this.post('/stream-tickets').then((r) => r.body); }
  preferences() { return this.get('/preferences').then((r) => r.body); }
  savePreferences(p) { return this.put('/preferences', p).then((r) => r.body); }
}

const ERROR_KEYS = {
  action_conflict: 'errConflict', message_archived: 'errArchived', action_retryable: 'errRetryable',
  action_needs_review: 'errReview', action_compensated: 'errCompensated', approval_denied: 'errDenied',
  approval_token_expired: 'errExpired', approval_token_replay: 'errReplay', approval_pending: 'errPending',
  approval_binding: 'errBinding', action_not_allowed: 'errNotAllowed', message_not_found: 'errNotFound',
  unauthenticated: 'errUnauthenticated', forbidden: 'errForbidden', network: 'errNetwork',
};

/** Words for an error, in the catalogue's language (English by default); never the server's text. */
export function explain(err, t = catalogue('en').t) {
  const key = ERROR_KEYS[err.code];
  if (key) return t(key);
  return t(err.status >= 500 ? 'errServer' : 'errGeneric');
}

// ---- DOM helpers: text only ---------------------------------------------------------------------

const SAFE_ATTR = /^(class|id|part|role|type|tabindex|title|hidden|disabled|value|name|for|rows|required|placeholder|lang|dir|min|alt|checked|scope|data-[a-z-]+|aria-[a-z-]+)$/;

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

/**
 * The Mustache subset a resultTemplate uses, rendered to plain text: {{name}}, {{a.b}}, {{{name}}},
 * sections {{#x}}…{{/x}} (a list repeats, an object becomes the context, a truthy value shows) and
 * inverted sections {{^x}}…{{/x}}. Objects and arrays are never printed as JSON.
 */
export function mustacheText(tpl, view) {
  const lookup = (stack, name) => {
    if (name === '.') return stack[stack.length - 1];
    for (let i = stack.length - 1; i >= 0; i--) {
      let v = stack[i];
      const parts = name.split('.');
      if (v === null || typeof v !== 'object' || !(parts[0] in v)) continue;
      for (const p of parts) v = v === null || v === undefined ? undefined : v[p];
      return v;
    }
    return undefined;
  };
  const render = (src, stack) => {
    let out = '';
    let i = 0;
    const re = /\{\{(\{?)\s*([#^/]?)\s*([\w.]+)\s*\}?\}\}/g;
    for (let m = re.exec(src); m; m = re.exec(src)) {
      out += src.slice(i, m.index);
      const [, , kind, name] = m;
      if (kind === '#' || kind === '^') {
        const close = new RegExp(`\\{\\{\\s*/\\s*${name.replace(/\./g, '\\.')}\\s*\\}\\}`, 'g');
        close.lastIndex = re.lastIndex;
        const end = close.exec(src);
        const inner = src.slice(re.lastIndex, end ? end.index : src.length);
        const v = lookup(stack, name);
        const truthy = Array.isArray(v) ? v.length > 0 : !!v;
        if (kind === '^') out += truthy ? '' : render(inner, stack);
        else if (Array.isArray(v)) out += v.map((x) => render(inner, [...stack, x])).join('');
        else if (truthy) out += render(inner, typeof v === 'object' ? [...stack, v] : stack);
        re.lastIndex = end ? close.lastIndex : src.length;
      } else if (kind !== '/') {
        const v = lookup(stack, name);
        out += v === null || v === undefined || typeof v === 'object' ? '' : String(v);
      }
      i = re.lastIndex;
    }
    return out + src.slice(i);
  };
  return render(String(tpl), [view]);
}

const formatters = new Map();
/** Intl formatters are costly to build (a list of 50 would spend most of its time there): one each. */
function formatter(locale, kind) {
  const key = `${kind}|${locale}`;
  let f = formatters.get(key);
  if (!f) {
    const make = (l) => (kind === 'rtf' ? new Intl.RelativeTimeFormat(l, { numeric: 'auto' })
      : new Intl.DateTimeFormat(l, kind === 'date' ? { month: 'short', day: 'numeric' } : { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }));
    try { f = make(locale); } catch { f = make('en'); }
    formatters.set(key, f);
  }
  return f;
}

/** "now", "5 minutes ago", "yesterday" in the locale; older than a week: the date. */
export function relativeTime(ms, locale, now = Date.now()) {
  if (!ms) return '';
  const s = Math.round((ms - now) / 1000);
  const a = Math.abs(s);
  const rtf = formatter(locale, 'rtf');
  if (a < 45) return rtf.format(0, 'second');
  if (a < 3600) return rtf.format(Math.round(s / 60), 'minute');
  if (a < 86400) return rtf.format(Math.round(s / 3600), 'hour');
  if (a < 7 * 86400) return rtf.format(Math.round(s / 86400), 'day');
  return formatter(locale, 'date').format(new Date(ms));
}

function dateTimeText(ms, locale) {
  return formatter(locale, 'datetime').format(new Date(ms));
}

/** The snooze presets: later today (+3 h), tomorrow 09:00, next Monday 09:00 (local time). */
export function snoozePresets(now = Date.now()) {
  const at9 = (days) => { const d = new Date(now); d.setDate(d.getDate() + days); d.setHours(9, 0, 0, 0); return d.getTime(); };
  const dow = new Date(now).getDay();
  return { laterToday: now + 3 * 3600 * 1000, tomorrow: at9(1), nextWeek: at9(((8 - dow) % 7) || 7) };
}

/** The template's label in the locale (the listing's "labels": the exact tag, then its language,
 * then any tag of that language), else its "label"; null when it has none. */
function localLabel(listing, locale) {
  const ok = (v) => (typeof v === 'string' && v.trim() ? v : null);
  const labels = listing && typeof listing.labels === 'object' && listing.labels ? listing.labels : {};
  const want = String(locale || '').toLowerCase().replace(/_/g, '-');
  const lang = want.split('-')[0];
  const tags = Object.keys(labels);
  const pick = tags.find((k) => k.toLowerCase() === want) || tags.find((k) => k.toLowerCase() === lang) ||
    tags.find((k) => k.toLowerCase().split('-')[0] === lang);
  return ok(pick && labels[pick]) || ok(listing && listing.label);
}

/** A template code made readable when the template has no label: "booking-request" → "Booking request". */
function humanize(cd) {
  const s = String(cd || '').replace(/[-_.]+/g, ' ').trim();
  return s ? s[0].toUpperCase() + s.slice(1) : '';
}

function initials(name) {
  const words = String(name || '').replace(/[^\p{L}\p{N}\s]+/gu, ' ').trim().split(/\s+/).filter(Boolean);
  if (!words.length) return '?';
  return (words.length === 1 ? words[0].slice(0, 2) : words[0][0] + words[words.length - 1][0]).toUpperCase();
}

const AVATAR_URL = /^(https?:\/\/|data:image\/(png|jpeg|gif|webp);)/i;
// ---- string catalogues ----------------------------------------------------------------------------
// One object per language; {name} marks a value filled in. `strings` (a property) overrides any key.

const EN = {
  inbox: 'Inbox', notifications: 'Notifications', bellLabel: 'Notifications, {n} unread', unreadCount: '{n} unread',
  tabs: 'Views', tabInbox: 'Inbox', tabUnread: 'Unread', tabSnoozed: 'Snoozed', tabArchived: 'Archived',
  kind: 'Kind', allKinds: 'All kinds', notification: 'Notification', markAllRead: 'Mark all read', loadMore: 'Load more',
  emptyInbox: 'You are all caught up.', emptyUnread: 'No unread messages.', emptySnoozed: 'Nothing is snoozed.',
  emptyArchived: 'Nothing archived yet.', emptyFiltered: 'Nothing matches these filters.', noTitle: '(no title)',
  unreadSr: ' (unread)', tagDone: 'Done', tagProcessing: 'In progress', tagRetryable: 'Needs attention',
  dismiss: 'Dismiss', dismissOf: 'Dismiss: {title}', dismissed: 'Dismissed.', undo: 'Undo', restored: 'Back in your inbox.',
  markRead: 'Mark read', markUnread: 'Mark unread', markedN: 'Marked {n} as read.', markedAll: 'Marked all as read.',
  snooze: 'Snooze', snoozeLaterToday: 'Later today', snoozeTomorrow: 'Tomorrow', snoozeNextWeek: 'Next week',
  snoozeDate: 'Pick a date…', snoozeUntil: 'Snooze until', snoozedUntil: 'Snoozed until {time}.', unsnooze: 'Unsnooze',
  done: 'Done.', working: 'Working…', confirm: 'Confirm', cancel: 'Cancel', areYouSure: 'Are you sure?', close: 'Close',
  required: '{field} is required.', needsApproval: 'This needs an approval first. You can continue here once it is approved.',
  approvedBy: 'Approved by {who}. Press Continue to run it.', approved: 'Approved. Press Continue to run it.',
  approvalEnded: 'The approval ended without a yes, so the action did not run.', continue: 'Continue', avatarOf: 'From {who}',
  errConflict: 'Someone else is acting on this message right now, so your press was not run. The list shows what happened.',
  errArchived: 'This message was already handled and archived, so nothing was done.',
  errRetryable: 'The action did not go through; nothing was lost and you can press again.',
  errReview: 'The action is waiting for an operator to review it. Press again once it is resolved.',
  errCompensated: 'The action was undone, so nothing happened. You can press again.',
  errDenied: 'The approval was denied, so the action did not run.', errExpired: 'The approval expired. Press the action again to ask anew.',
  errReplay: 'This approval was already used.', errPending: 'The approval has not been decided yet.',
  errBinding: 'The approval was given for someone or something else.', errNotAllowed: 'You are not allowed to do this.',
  errNotFound: 'This message no longer exists or is not visible to you.', errUnauthenticated: 'You are not signed in.',
  errForbidden: 'You do not have the permission for this.', errNetwork: 'missive cannot be reached. Check the connection and try again.',
  errServer: 'missive could not do this right now. Try again in a moment.', errGeneric: 'This did not work.',
  prefTitle: 'Notification preferences', prefChannels: 'Channels', prefCategory: 'Category', prefAll: 'All messages',
  prefDigest: 'Email digest', digestOff: 'Send each one right away', digestHourly: 'One email per hour', digestDaily: 'One email per day',
  prefLanguage: 'Language', save: 'Save', saved: 'Saved.', chInbox: 'In the app', chEmail: 'Email', chSms: 'SMS', chChat: 'Chat',
  inboxAlwaysOn: 'Always on', prefLoading: 'Loading…',
};

const DE = {
  inbox: 'Posteingang', notifications: 'Benachrichtigungen', bellLabel: 'Benachrichtigungen, {n} ungelesen', unreadCount: '{n} ungelesen',
  tabs: 'Ansichten', tabInbox: 'Posteingang', tabUnread: 'Ungelesen', tabSnoozed: 'Zurückgestellt', tabArchived: 'Archiv',
  kind: 'Art', allKinds: 'Alle Arten', notification: 'Benachrichtigung', markAllRead: 'Alle als gelesen markieren', loadMore: 'Mehr laden',
  emptyInbox: 'Alles erledigt.', emptyUnread: 'Keine ungelesenen Nachrichten.', emptySnoozed: 'Nichts ist zurückgestellt.',
  emptyArchived: 'Noch nichts archiviert.', emptyFiltered: 'Nichts passt zu diesen Filtern.', noTitle: '(ohne Titel)',
  unreadSr: ' (ungelesen)', tagDone: 'Erledigt', tagProcessing: 'In Arbeit', tagRetryable: 'Braucht Aufmerksamkeit',
  dismiss: 'Ausblenden', dismissOf: 'Ausblenden: {title}', dismissed: 'Ausgeblendet.', undo: 'Rückgängig', restored: 'Wieder im Posteingang.',
  markRead: 'Als gelesen markieren', markUnread: 'Als ungelesen markieren', markedN: '{n} als gelesen markiert.', markedAll: 'Alle als gelesen markiert.',
  snooze: 'Zurückstellen', snoozeLaterToday: 'Später heute', snoozeTomorrow: 'Morgen', snoozeNextWeek: 'Nächste Woche',
  snoozeDate: 'Datum wählen…', snoozeUntil: 'Zurückstellen bis', snoozedUntil: 'Zurückgestellt bis {time}.', unsnooze: 'Zurückholen',
  done: 'Erledigt.', working: 'Wird ausgeführt…', confirm: 'Bestätigen', cancel: 'Abbrechen', areYouSure: 'Sind Sie sicher?', close: 'Schließen',
  required: '{field} ist erforderlich.', needsApproval: 'Dafür ist zuerst eine Freigabe nötig. Sie können hier fortfahren, sobald sie erteilt ist.',
  approvedBy: 'Freigegeben von {who}. Drücken Sie „Fortfahren“.', approved: 'Freigegeben. Drücken Sie „Fortfahren“.',
  approvalEnded: 'Die Freigabe wurde nicht erteilt, die Aktion lief nicht.', continue: 'Fortfahren', avatarOf: 'Von {who}',
  errConflict: 'Jemand anderes bearbeitet diese Nachricht gerade, daher wurde Ihre Aktion nicht ausgeführt. Die Liste zeigt, was passiert ist.',
  errArchived: 'Diese Nachricht wurde bereits erledigt und archiviert, es wurde nichts getan.',
  errRetryable: 'Die Aktion ging nicht durch; nichts ist verloren, Sie können es erneut versuchen.',
  errReview: 'Die Aktion wartet auf eine Prüfung durch das Betriebsteam. Versuchen Sie es danach erneut.',
  errCompensated: 'Die Aktion wurde rückgängig gemacht, es ist nichts passiert. Sie können es erneut versuchen.',
  errDenied: 'Die Freigabe wurde abgelehnt, die Aktion lief nicht.', errExpired: 'Die Freigabe ist abgelaufen. Lösen Sie die Aktion erneut aus.',
  errReplay: 'Diese Freigabe wurde bereits verwendet.', errPending: 'Über die Freigabe ist noch nicht entschieden.',
  errBinding: 'Die Freigabe gilt für jemand anderen oder etwas anderes.', errNotAllowed: 'Das dürfen Sie nicht.',
  errNotFound: 'Diese Nachricht gibt es nicht mehr oder Sie können sie nicht sehen.', errUnauthenticated: 'Sie sind nicht angemeldet.',
  errForbidden: 'Dafür fehlt Ihnen die Berechtigung.', errNetwork: 'missive ist nicht erreichbar. Prüfen Sie die Verbindung.',
  errServer: 'missive kann das gerade nicht tun. Versuchen Sie es gleich noch einmal.', errGeneric: 'Das hat nicht funktioniert.',
  prefTitle: 'Benachrichtigungseinstellungen', prefChannels: 'Kanäle', prefCategory: 'Kategorie', prefAll: 'Alle Nachrichten',
  prefDigest: 'E-Mail-Zusammenfassung', digestOff: 'Jede sofort senden', digestHourly: 'Eine E-Mail pro Stunde', digestDaily: 'Eine E-Mail pro Tag',
  prefLanguage: 'Sprache', save: 'Speichern', saved: 'Gespeichert.', chInbox: 'In der App', chEmail: 'E-Mail', chSms: 'SMS', chChat: 'Chat',
  inboxAlwaysOn: 'Immer an', prefLoading: 'Wird geladen…',
};

const FR = {
  inbox: 'Boîte de réception', notifications: 'Notifications', bellLabel: 'Notifications, {n} non lues', unreadCount: '{n} non lues',
  tabs: 'Vues', tabInbox: 'Réception', tabUnread: 'Non lues', tabSnoozed: 'En attente', tabArchived: 'Archivées',
  kind: 'Type', allKinds: 'Tous les types', notification: 'Notification', markAllRead: 'Tout marquer comme lu', loadMore: 'Afficher plus',
  emptyInbox: 'Vous êtes à jour.', emptyUnread: 'Aucun message non lu.', emptySnoozed: 'Rien n’est en attente.',
  emptyArchived: 'Rien d’archivé pour l’instant.', emptyFiltered: 'Rien ne correspond à ces filtres.', noTitle: '(sans titre)',
  unreadSr: ' (non lu)', tagDone: 'Traité', tagProcessing: 'En cours', tagRetryable: 'À revoir',
  dismiss: 'Masquer', dismissOf: 'Masquer : {title}', dismissed: 'Masqué.', undo: 'Annuler', restored: 'De retour dans la boîte.',
  markRead: 'Marquer comme lu', markUnread: 'Marquer comme non lu', markedN: '{n} marqués comme lus.', markedAll: 'Tout est marqué comme lu.',
  snooze: 'Reporter', snoozeLaterToday: 'Plus tard aujourd’hui', snoozeTomorrow: 'Demain', snoozeNextWeek: 'La semaine prochaine',
  snoozeDate: 'Choisir une date…', snoozeUntil: 'Reporter jusqu’au', snoozedUntil: 'Reporté jusqu’à {time}.', unsnooze: 'Ne plus reporter',
  done: 'C’est fait.', working: 'En cours…', confirm: 'Confirmer', cancel: 'Annuler', areYouSure: 'Êtes-vous sûr ?', close: 'Fermer',
  required: '{field} est obligatoire.', needsApproval: 'Une approbation est d’abord nécessaire. Vous pourrez continuer ici une fois approuvé.',
  approvedBy: 'Approuvé par {who}. Appuyez sur Continuer.', approved: 'Approuvé. Appuyez sur Continuer.',
  approvalEnded: 'L’approbation n’a pas été accordée, l’action n’a pas eu lieu.', continue: 'Continuer', avatarOf: 'De {who}',
  errConflict: 'Quelqu’un d’autre agit sur ce message en ce moment, votre action n’a donc pas été exécutée. La liste montre ce qui s’est passé.',
  errArchived: 'Ce message a déjà été traité et archivé, rien n’a été fait.',
  errRetryable: 'L’action n’a pas abouti ; rien n’est perdu et vous pouvez réessayer.',
  errReview: 'L’action attend l’examen d’un opérateur. Réessayez une fois le problème résolu.',
  errCompensated: 'L’action a été annulée, rien ne s’est passé. Vous pouvez réessayer.',
  errDenied: 'L’approbation a été refusée, l’action n’a pas eu lieu.', errExpired: 'L’approbation a expiré. Relancez l’action pour la redemander.',
  errReplay: 'Cette approbation a déjà été utilisée.', errPending: 'L’approbation n’a pas encore été décidée.',
  errBinding: 'L’approbation concerne quelqu’un ou quelque chose d’autre.', errNotAllowed: 'Vous n’avez pas le droit de faire cela.',
  errNotFound: 'Ce message n’existe plus ou ne vous est pas visible.', errUnauthenticated: 'Vous n’êtes pas connecté.',
  errForbidden: 'Vous n’avez pas l’autorisation pour cela.', errNetwork: 'missive est injoignable. Vérifiez la connexion.',
  errServer: 'missive ne peut pas le faire pour l’instant. Réessayez dans un moment.', errGeneric: 'Cela n’a pas fonctionné.',
  prefTitle: 'Préférences de notification', prefChannels: 'Canaux', prefCategory: 'Catégorie', prefAll: 'Tous les messages',
  prefDigest: 'Résumé par e-mail', digestOff: 'Envoyer chacun tout de suite', digestHourly: 'Un e-mail par heure', digestDaily: 'Un e-mail par jour',
  prefLanguage: 'Langue', save: 'Enregistrer', saved: 'Enregistré.', chInbox: 'Dans l’application', chEmail: 'E-mail', chSms: 'SMS', chChat: 'Discussion',
  inboxAlwaysOn: 'Toujours actif', prefLoading: 'Chargement…',
};

const ES = {
  inbox: 'Bandeja de entrada', notifications: 'Notificaciones', bellLabel: 'Notificaciones, {n} sin leer', unreadCount: '{n} sin leer',
  tabs: 'Vistas', tabInbox: 'Entrada', tabUnread: 'Sin leer', tabSnoozed: 'Pospuestos', tabArchived: 'Archivados',
  kind: 'Tipo', allKinds: 'Todos los tipos', notification: 'Notificación', markAllRead: 'Marcar todo como leído', loadMore: 'Cargar más',
  emptyInbox: 'Estás al día.', emptyUnread: 'No hay mensajes sin leer.', emptySnoozed: 'No hay nada pospuesto.',
  emptyArchived: 'Todavía no hay nada archivado.', emptyFiltered: 'Nada coincide con estos filtros.', noTitle: '(sin título)',
  unreadSr: ' (sin leer)', tagDone: 'Hecho', tagProcessing: 'En curso', tagRetryable: 'Requiere atención',
  dismiss: 'Descartar', dismissOf: 'Descartar: {title}', dismissed: 'Descartado.', undo: 'Deshacer', restored: 'De vuelta en la bandeja.',
  markRead: 'Marcar como leído', markUnread: 'Marcar como no leído', markedN: '{n} marcados como leídos.', markedAll: 'Todo marcado como leído.',
  snooze: 'Posponer', snoozeLaterToday: 'Más tarde hoy', snoozeTomorrow: 'Mañana', snoozeNextWeek: 'La próxima semana',
  snoozeDate: 'Elegir una fecha…', snoozeUntil: 'Posponer hasta', snoozedUntil: 'Pospuesto hasta {time}.', unsnooze: 'Dejar de posponer',
  done: 'Hecho.', working: 'Procesando…', confirm: 'Confirmar', cancel: 'Cancelar', areYouSure: '¿Estás seguro?', close: 'Cerrar',
  required: '{field} es obligatorio.', needsApproval: 'Primero hace falta una aprobación. Podrás continuar aquí cuando se apruebe.',
  approvedBy: 'Aprobado por {who}. Pulsa Continuar.', approved: 'Aprobado. Pulsa Continuar.',
  approvalEnded: 'La aprobación no se concedió, así que la acción no se ejecutó.', continue: 'Continuar', avatarOf: 'De {who}',
  errConflict: 'Otra persona está actuando sobre este mensaje ahora mismo, así que tu acción no se ejecutó. La lista muestra lo que pasó.',
  errArchived: 'Este mensaje ya se gestionó y archivó, así que no se hizo nada.',
  errRetryable: 'La acción no se completó; no se perdió nada y puedes volver a intentarlo.',
  errReview: 'La acción espera la revisión de un operador. Vuelve a intentarlo cuando se resuelva.',
  errCompensated: 'La acción se deshizo, así que no pasó nada. Puedes volver a intentarlo.',
  errDenied: 'La aprobación fue denegada, así que la acción no se ejecutó.', errExpired: 'La aprobación caducó. Pulsa la acción de nuevo para pedirla otra vez.',
  errReplay: 'Esta aprobación ya se usó.', errPending: 'La aprobación aún no se ha decidido.',
  errBinding: 'La aprobación se dio para otra persona u otra cosa.', errNotAllowed: 'No tienes permiso para hacer esto.',
  errNotFound: 'Este mensaje ya no existe o no es visible para ti.', errUnauthenticated: 'No has iniciado sesión.',
  errForbidden: 'No tienes el permiso para esto.', errNetwork: 'No se puede conectar con missive. Comprueba la conexión.',
  errServer: 'missive no puede hacerlo ahora. Inténtalo de nuevo en un momento.', errGeneric: 'Esto no funcionó.',
  prefTitle: 'Preferencias de notificación', prefChannels: 'Canales', prefCategory: 'Categoría', prefAll: 'Todos los mensajes',
  prefDigest: 'Resumen por correo', digestOff: 'Enviar cada uno al momento', digestHourly: 'Un correo por hora', digestDaily: 'Un correo al día',
  prefLanguage: 'Idioma', save: 'Guardar', saved: 'Guardado.', chInbox: 'En la aplicación', chEmail: 'Correo', chSms: 'SMS', chChat: 'Chat',
  inboxAlwaysOn: 'Siempre activo', prefLoading: 'Cargando…',
};

const PT = {
  inbox: 'Caixa de entrada', notifications: 'Notificações', bellLabel: 'Notificações, {n} não lidas', unreadCount: '{n} não lidas',
  tabs: 'Vistas', tabInbox: 'Entrada', tabUnread: 'Não lidas', tabSnoozed: 'Adiadas', tabArchived: 'Arquivadas',
  kind: 'Tipo', allKinds: 'Todos os tipos', notification: 'Notificação', markAllRead: 'Marcar tudo como lido', loadMore: 'Carregar mais',
  emptyInbox: 'Está tudo em dia.', emptyUnread: 'Nenhuma mensagem não lida.', emptySnoozed: 'Nada adiado.',
  emptyArchived: 'Nada arquivado ainda.', emptyFiltered: 'Nada corresponde a estes filtros.', noTitle: '(sem título)',
  unreadSr: ' (não lida)', tagDone: 'Concluído', tagProcessing: 'Em andamento', tagRetryable: 'Requer atenção',
  dismiss: 'Dispensar', dismissOf: 'Dispensar: {title}', dismissed: 'Dispensada.', undo: 'Desfazer', restored: 'De volta à caixa de entrada.',
  markRead: 'Marcar como lida', markUnread: 'Marcar como não lida', markedN: '{n} marcadas como lidas.', markedAll: 'Tudo marcado como lido.',
  snooze: 'Adiar', snoozeLaterToday: 'Mais tarde hoje', snoozeTomorrow: 'Amanhã', snoozeNextWeek: 'Próxima semana',
  snoozeDate: 'Escolher uma data…', snoozeUntil: 'Adiar até', snoozedUntil: 'Adiada até {time}.', unsnooze: 'Deixar de adiar',
  done: 'Feito.', working: 'Processando…', confirm: 'Confirmar', cancel: 'Cancelar', areYouSure: 'Tem certeza?', close: 'Fechar',
  required: '{field} é obrigatório.', needsApproval: 'Isto precisa primeiro de uma aprovação. Pode continuar aqui quando for aprovado.',
  approvedBy: 'Aprovado por {who}. Toque em Continuar.', approved: 'Aprovado. Toque em Continuar.',
  approvalEnded: 'A aprovação não foi concedida, por isso a ação não foi executada.', continue: 'Continuar', avatarOf: 'De {who}',
  errConflict: 'Outra pessoa está agindo sobre esta mensagem agora, por isso a sua ação não foi executada. A lista mostra o que aconteceu.',
  errArchived: 'Esta mensagem já foi tratada e arquivada, por isso nada foi feito.',
  errRetryable: 'A ação não foi concluída; nada se perdeu e pode tentar novamente.',
  errReview: 'A ação aguarda a revisão de um operador. Tente novamente quando estiver resolvido.',
  errCompensated: 'A ação foi desfeita, por isso nada aconteceu. Pode tentar novamente.',
  errDenied: 'A aprovação foi negada, por isso a ação não foi executada.', errExpired: 'A aprovação expirou. Toque na ação novamente para pedir outra.',
  errReplay: 'Esta aprovação já foi usada.', errPending: 'A aprovação ainda não foi decidida.',
  errBinding: 'A aprovação foi dada para outra pessoa ou outra coisa.', errNotAllowed: 'Não tem permissão para fazer isto.',
  errNotFound: 'Esta mensagem já não existe ou não está visível para si.', errUnauthenticated: 'Não tem sessão iniciada.',
  errForbidden: 'Não tem a permissão para isto.', errNetwork: 'Não é possível contactar o missive. Verifique a ligação.',
  errServer: 'O missive não pode fazer isto agora. Tente novamente daqui a pouco.', errGeneric: 'Isto não funcionou.',
  prefTitle: 'Preferências de notificação', prefChannels: 'Canais', prefCategory: 'Categoria', prefAll: 'Todas as mensagens',
  prefDigest: 'Resumo por e-mail', digestOff: 'Enviar cada uma de imediato', digestHourly: 'Um e-mail por hora', digestDaily: 'Um e-mail por dia',
  prefLanguage: 'Idioma', save: 'Guardar', saved: 'Guardado.', chInbox: 'Na aplicação', chEmail: 'E-mail', chSms: 'SMS', chChat: 'Chat',
  inboxAlwaysOn: 'Sempre ativo', prefLoading: 'A carregar…',
};

const AR = {
  inbox: 'صندوق الوارد', notifications: 'الإشعارات', bellLabel: 'الإشعارات، {n} غير مقروءة', unreadCount: '{n} غير مقروءة',
  tabs: 'طرق العرض', tabInbox: 'الوارد', tabUnread: 'غير مقروءة', tabSnoozed: 'مؤجلة', tabArchived: 'المؤرشفة',
  kind: 'النوع', allKinds: 'كل الأنواع', notification: 'إشعار', markAllRead: 'تعليم الكل كمقروء', loadMore: 'تحميل المزيد',
  emptyInbox: 'لا جديد لديك.', emptyUnread: 'لا توجد رسائل غير مقروءة.', emptySnoozed: 'لا يوجد شيء مؤجل.',
  emptyArchived: 'لا يوجد شيء مؤرشف بعد.', emptyFiltered: 'لا شيء يطابق عوامل التصفية هذه.', noTitle: '(بلا عنوان)',
  unreadSr: ' (غير مقروءة)', tagDone: 'تم', tagProcessing: 'قيد التنفيذ', tagRetryable: 'يحتاج إلى انتباه',
  dismiss: 'إخفاء', dismissOf: 'إخفاء: {title}', dismissed: 'تم الإخفاء.', undo: 'تراجع', restored: 'عادت إلى صندوق الوارد.',
  markRead: 'تعليم كمقروءة', markUnread: 'تعليم كغير مقروءة', markedN: 'تم تعليم {n} كمقروءة.', markedAll: 'تم تعليم الكل كمقروء.',
  snooze: 'تأجيل', snoozeLaterToday: 'لاحقًا اليوم', snoozeTomorrow: 'غدًا', snoozeNextWeek: 'الأسبوع القادم',
  snoozeDate: 'اختيار تاريخ…', snoozeUntil: 'تأجيل حتى', snoozedUntil: 'مؤجلة حتى {time}.', unsnooze: 'إلغاء التأجيل',
  done: 'تم.', working: 'جارٍ التنفيذ…', confirm: 'تأكيد', cancel: 'إلغاء', areYouSure: 'هل أنت متأكد؟', close: 'إغلاق',
  required: '{field} مطلوب.', needsApproval: 'يحتاج هذا إلى موافقة أولًا. يمكنك المتابعة هنا بعد الموافقة.',
  approvedBy: 'وافق عليه {who}. اضغط متابعة.', approved: 'تمت الموافقة. اضغط متابعة.',
  approvalEnded: 'لم تُمنح الموافقة، لذلك لم يُنفَّذ الإجراء.', continue: 'متابعة', avatarOf: 'من {who}',
  errConflict: 'شخص آخر يتعامل مع هذه الرسالة الآن، لذلك لم يُنفَّذ طلبك. تعرض القائمة ما حدث.',
  errArchived: 'تمت معالجة هذه الرسالة وأرشفتها من قبل، لذلك لم يُنفَّذ شيء.',
  errRetryable: 'لم يكتمل الإجراء؛ لم يضع شيء ويمكنك المحاولة مرة أخرى.',
  errReview: 'الإجراء بانتظار مراجعة أحد المشغلين. حاول مجددًا بعد حلّ المشكلة.',
  errCompensated: 'تم التراجع عن الإجراء، لذلك لم يحدث شيء. يمكنك المحاولة مرة أخرى.',
  errDenied: 'رُفضت الموافقة، لذلك لم يُنفَّذ الإجراء.', errExpired: 'انتهت صلاحية الموافقة. اضغط الإجراء مرة أخرى لطلبها من جديد.',
  errReplay: 'استُخدمت هذه الموافقة من قبل.', errPending: 'لم يُبتّ في الموافقة بعد.',
  errBinding: 'مُنحت الموافقة لشخص آخر أو لشيء آخر.', errNotAllowed: 'غير مسموح لك بذلك.',
  errNotFound: 'هذه الرسالة لم تعد موجودة أو غير مرئية لك.', errUnauthenticated: 'لم تسجّل الدخول.',
  errForbidden: 'ليست لديك صلاحية لذلك.', errNetwork: 'تعذّر الوصول إلى missive. تحقّق من الاتصال.',
  errServer: 'تعذّر على missive تنفيذ ذلك الآن. حاول مجددًا بعد قليل.', errGeneric: 'لم ينجح ذلك.',
  prefTitle: 'تفضيلات الإشعارات', prefChannels: 'القنوات', prefCategory: 'الفئة', prefAll: 'كل الرسائل',
  prefDigest: 'ملخص البريد الإلكتروني', digestOff: 'إرسال كل رسالة فورًا', digestHourly: 'رسالة واحدة كل ساعة', digestDaily: 'رسالة واحدة كل يوم',
  prefLanguage: 'اللغة', save: 'حفظ', saved: 'تم الحفظ.', chInbox: 'في التطبيق', chEmail: 'البريد الإلكتروني', chSms: 'رسائل نصية', chChat: 'دردشة',
  inboxAlwaysOn: 'مفعّل دائمًا', prefLoading: 'جارٍ التحميل…',
};

/** The catalogues the element ships, by primary language subtag. */
export const CATALOGUES = { en: EN, de: DE, fr: FR, es: ES, pt: PT, ar: AR };
const RTL = new Set(['ar', 'he', 'fa', 'ur']);

/** 'de-AT' → 'de' when only 'de' is shipped; anything unknown → 'en'. */
export function resolveLocale(tag) {
  const t = String(tag || '').trim().toLowerCase();
  if (CATALOGUES[t]) return t;
  const primary = t.split(/[-_]/)[0];
  return CATALOGUES[primary] ? primary : 'en';
}

/** The strings for a locale with overrides on top; t(key, {n}) fills {n}. */
export function catalogue(locale, overrides) {
  const s = { ...EN, ...CATALOGUES[resolveLocale(locale)], ...(overrides || {}) };
  const t = (key, vars) => String(s[key] ?? EN[key] ?? key).replace(/\{(\w+)\}/g, (m, k) => (vars && k in vars ? String(vars[k]) : m));
  return { strings: s, t, dir: RTL.has(String(locale || '').toLowerCase().split(/[-_]/)[0]) ? 'rtl' : 'ltr' };
}

// ---- styles -------------------------------------------------------------------------------------

const CSS = `
:host {
  --_bg: var(--missive-bg, #ffffff);
  --_fg: var(--missive-fg, #1b1e24);
  --_muted: var(--missive-muted, #545b68);
  --_border: var(--missive-border, #d9dde4);
  --_surface: var(--missive-surface, #f5f7fa);
  --_accent: var(--missive-accent, #2457d6);
  --_accent-fg: var(--missive-accent-fg, #ffffff);
  --_danger: var(--missive-danger, #b42a24);
  --_success: var(--missive-success, #1a6e3f);
  --_unread: var(--missive-unread, #2457d6);
  --_focus: var(--missive-focus, #b86e00);
  --_radius: var(--missive-radius, 10px);
  display: block;
  box-sizing: border-box;
  min-width: 0;
  max-width: var(--missive-max-width, 720px);
  font: var(--missive-font, 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif);
  color: var(--_fg);
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :host {
    --_bg: var(--missive-bg, #17191e);
    --_fg: var(--missive-fg, #e8eaee);
    --_muted: var(--missive-muted, #a8afbb);
    --_border: var(--missive-border, #343843);
    --_surface: var(--missive-surface, #21242b);
    --_accent: var(--missive-accent, #7fa3ff);
    --_accent-fg: var(--missive-accent-fg, #0d1320);
    --_danger: var(--missive-danger, #ff7b72);
    --_success: var(--missive-success, #5fd08f);
    --_unread: var(--missive-unread, #7fa3ff);
    --_focus: var(--missive-focus, #f0a500);
  }
}
:host([mode="popover"]) { display: inline-block; position: relative; max-width: none; }
:host([hidden]), [hidden] { display: none !important; }
*, *::before, *::after { box-sizing: border-box; }
.panel { background: var(--_bg); color: var(--_fg); border: 1px solid var(--_border); border-radius: var(--_radius); }
:host([mode="popover"]) .panel { position: absolute; inset-inline-end: 0; top: calc(100% + 6px); z-index: 1000; width: min(420px, calc(100vw - 16px)); box-shadow: 0 8px 28px rgb(0 0 0 / .18); }
:host([mode="popover"]) ul.list { max-height: var(--missive-max-height, 60vh); }
.bell { position: relative; display: inline-flex; align-items: center; justify-content: center; min-width: 40px; min-height: 40px; border-radius: 50%; padding: 0; }
.bell svg { width: 22px; height: 22px; fill: currentColor; }
.bell .badge { position: absolute; top: -4px; inset-inline-end: -6px; }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; padding: 12px 14px 0; }
h2 { margin: 0; font-size: 1.1em; display: flex; align-items: center; gap: 8px; flex: 1 1 auto; }
.badge { display: inline-flex; min-width: 1.6em; height: 1.6em; padding: 0 .45em; align-items: center; justify-content: center; border-radius: 999px; background: var(--_unread); color: var(--_accent-fg); font-size: .8em; font-weight: 700; }
.badge[data-count="0"] { background: var(--_surface); color: var(--_muted); }
.bell .badge[data-count="0"] { display: none; }
.tools { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
[role=tablist] { display: flex; gap: 2px; padding: 8px 10px 0; border-bottom: 1px solid var(--_border); overflow-x: auto; }
[role=tab] { border: 0; border-bottom: 3px solid transparent; border-radius: 6px 6px 0 0; background: transparent; color: var(--_muted); padding: 6px 10px; white-space: nowrap; }
[role=tab][aria-selected=true] { color: var(--_fg); border-bottom-color: var(--_accent); font-weight: 600; }
select, textarea, input[type=text], input[type=date] { font: inherit; color: var(--_fg); background: var(--_bg); border: 1px solid var(--_border); border-radius: 6px; padding: 4px 6px; max-width: 100%; }
button { font: inherit; cursor: pointer; border-radius: 6px; border: 1px solid var(--_border); background: var(--_surface); color: var(--_fg); padding: 5px 12px; min-height: 32px; }
button:disabled { opacity: .6; cursor: default; }
button:focus-visible, select:focus-visible, input:focus-visible, textarea:focus-visible, .summary:focus-visible { outline: 3px solid var(--_focus); outline-offset: 1px; }
.toast { display: flex; align-items: center; gap: 10px; padding: 6px 14px; color: var(--_muted); font-size: .9em; }
.toast:empty { display: none; }
.toast.error { color: var(--_danger); }
ul.list { list-style: none; margin: 0; padding: 0; max-height: var(--missive-max-height, none); overflow: auto; }
li.item { border-bottom: 1px solid var(--_border); }
li.item.open { background: var(--_surface); }
li.item:last-child { border-bottom: 0; }
.head { display: flex; align-items: flex-start; }
.head:hover { background: var(--_surface); }
.dismiss-x { border: 0; background: transparent; color: var(--_muted); font-size: 1.25em; line-height: 1; min-width: 36px; min-height: 36px; padding: 0; margin: 6px 0 0; margin-inline-end: 6px; border-radius: 50%; }
.dismiss-x:hover { background: var(--_border); color: var(--_fg); }
.summary { all: unset; box-sizing: border-box; display: grid; grid-template-columns: 12px 36px 1fr auto; gap: 2px 10px; flex: 1 1 auto; min-width: 0; padding: 10px 4px; padding-inline-start: 14px; cursor: pointer; }
.dot { width: 9px; height: 9px; border-radius: 50%; margin-top: .45em; background: transparent; }
li.unread .dot { background: var(--_unread); }
.avatar { grid-row: span 2; width: 36px; height: 36px; border-radius: 50%; display: inline-flex; align-items: center; justify-content: center; background: var(--_border); color: var(--_fg); font-size: .8em; font-weight: 700; overflow: hidden; }
.avatar img { width: 100%; height: 100%; object-fit: cover; }
.title { font-weight: 500; overflow-wrap: anywhere; }
li.unread .title { font-weight: 700; }
.time { color: var(--_muted); font-size: .82em; white-space: nowrap; }
.meta { grid-column: 3 / 5; color: var(--_muted); font-size: .92em; overflow-wrap: anywhere; }
.kind { font-size: .85em; }
.kind:not(:empty) + .short::before { content: " · "; }
.tag { display: inline-block; margin-inline-start: 6px; padding: 0 6px; border-radius: 4px; font-size: .75em; font-weight: 600; background: var(--_bg); color: var(--_muted); border: 1px solid var(--_border); vertical-align: middle; }
.detail { padding: 0 14px 12px; padding-inline-start: 82px; }
.long { margin: 0 0 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
.actions, .row { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.row { margin-top: 10px; position: relative; }
button.variant-primary { background: var(--_accent); color: var(--_accent-fg); border-color: var(--_accent); }
button.variant-success { background: var(--_success); color: var(--_accent-fg); border-color: var(--_success); }
button.variant-danger { background: transparent; color: var(--_danger); border-color: var(--_danger); }
button.link { border: 0; background: transparent; color: var(--_muted); padding: 5px 6px; text-decoration: underline; }
.menu { position: absolute; z-index: 10; top: 100%; inset-inline-start: 0; margin: 4px 0 0; padding: 4px; list-style: none; background: var(--_bg); border: 1px solid var(--_border); border-radius: 8px; box-shadow: 0 6px 20px rgb(0 0 0 / .15); min-width: 200px; }
.menu [role=menuitem] { display: block; width: 100%; text-align: start; border: 0; background: transparent; }
.menu [role=menuitem]:hover, .menu [role=menuitem]:focus-visible { background: var(--_surface); }
.snooze-date { display: flex; gap: 6px; padding: 6px; align-items: center; flex-wrap: wrap; }
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
table.prefs { border-collapse: collapse; width: 100%; }
table.prefs th, table.prefs td { padding: 6px 8px; text-align: start; border-bottom: 1px solid var(--_border); }
table.prefs td { text-align: center; }
fieldset { border: 0; margin: 0; padding: 10px 14px; }
legend { font-weight: 600; padding: 0; margin-bottom: 6px; }
.prefs-body { padding: 0 0 12px; overflow-x: auto; }
@media (max-width: 420px) {
  header { padding: 10px 10px 0; }
  .summary { padding: 10px; grid-template-columns: 12px 30px 1fr auto; }
  .avatar { width: 30px; height: 30px; }
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

// ---- shared by both elements ----------------------------------------------------------------------

const IDENTITY_ATTRS = ['base-url', 'user', 'roles', 'permissions', 'tenant', 'get-token', 'locale'];

/** What <missive-inbox> and <missive-preferences> share: identity, locale, the shadow root. */
export class MissiveBase extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({ mode: 'open' }).adoptedStyleSheets = [styles()];
    this._token = null;
    this._getToken = null;
    this._overrides = null;
    this._root = h('div', { class: 'root' });
    this.shadowRoot.append(this._root);
    this._setLocale();
  }

  get token() { return this._token; }
  set token(v) { this._token = v || null; this._restart(); }
  get getToken() { return this._getToken; }
  set getToken(fn) { this._getToken = typeof fn === 'function' ? fn : null; this._restart(); }
  /** Overrides for any catalogue string ({inbox: 'Messages', …}); see CATALOGUES.en for the keys. */
  get strings() { return this._loc.strings; }
  set strings(v) { this._overrides = v && typeof v === 'object' ? v : null; this._relocalize(); }
  /** The language the element speaks: its locale attribute, else the page's lang, else the browser's. */
  get locale() { return this._locale; }
  set locale(v) { if (v) this.setAttribute('locale', String(v)); else this.removeAttribute('locale'); }

  _setLocale() {
    const asked = this.getAttribute('locale') || document.documentElement.lang || globalThis.navigator?.language || 'en';
    this._loc = catalogue(asked, this._overrides);
    this._lang = resolveLocale(asked);
    this._locale = this._lang === asked.toLowerCase().split(/[-_]/)[0] ? asked : this._lang; // Intl gets the full tag
    this._root.setAttribute('lang', this._lang);
    this._root.setAttribute('dir', this._loc.dir);
  }

  t(key, vars) { return this._loc.t(key, vars); }

  get api() {
    let getToken = this._getToken;
    const named = this.getAttribute('get-token');
    if (!getToken && named) {
      const fn = named.split('.').reduce((o, k) => (o == null ? o : o[k]), globalThis);
      if (typeof fn === 'function') getToken = fn;
    }
    return new MissiveApi({
      baseUrl: this.getAttribute('base-url') || '', token: this._token, getToken,
      user: this.getAttribute('user'), roles: this.getAttribute('roles') || '',
      permissions: this.getAttribute('permissions') || '', tenant: this.getAttribute('tenant') || '',
      locale: this._locale,
    });
  }

  connectedCallback() { this._connected = true; this._restart(); }
  disconnectedCallback() { this._connected = false; }

  attributeChangedCallback(name, oldValue, newValue) {
    if (oldValue === newValue) return;
    if (name === 'locale') this._relocalize();
    if (this._connected && IDENTITY_ATTRS.includes(name)) this._restart();
  }

  _relocalize() { this._setLocale(); }
  _restart() {}
}

// ---- <missive-inbox> ------------------------------------------------------------------------------

const PAGE = 20;
const TABS = ['inbox', 'unread', 'snoozed', 'archived'];
const TAB_KEYS = { inbox: 'tabInbox', unread: 'tabUnread', snoozed: 'tabSnoozed', archived: 'tabArchived' };
const EMPTY_KEYS = { inbox: 'emptyInbox', unread: 'emptyUnread', snoozed: 'emptySnoozed', archived: 'emptyArchived' };
const GENERIC = '__generic-notification__';
const BELL = 'M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3a1.5 1.5 0 0 0-3 0v1.16A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z';

/**
 * <missive-inbox base-url="…" [user="…" roles="…" permissions="…" tenant="…"] [get-token="fnName"]
 *                [locale="de"] [mode="popover"] [page-size="20"] [poll-ms="5000"] [heading="…"]>
 * Properties: token, getToken, strings (catalogue overrides), renderItem (message, ctx) → Node,
 * api, live, tab, refresh(), open(), close(). Events: missive-action {messageId, actionCd, ok,
 * result?, error?}, missive-counts {count, unseen, unread}.
 */
export class MissiveInbox extends MissiveBase {
  static get observedAttributes() { return [...IDENTITY_ATTRS, 'heading', 'mode']; }

  constructor() {
    super();
    this._items = new Map(); // id → {m, el, actions, busy, outcome, pending}
    this._left = new Set(); // ids this view took out (dismissed, snoozed): events about them are checked with the daemon
    this._order = []; // ids, newest first
    this._cursor = null;
    this._done = false;
    this._loading = false;
    this._open = null;
    this._tab = 'inbox';
    this._templateCd = '';
    this._labels = new Map(); // templateCd → label (null: none; undefined: not asked yet)
    this._counts = null;
    this._generation = 0;
    this._listGeneration = 0;
    this._lastEventId = null;
    this._es = null;
    this._retryMs = 500;
    this._live = 'off';
    this._renderItemFn = null;
    this._seenQueue = new Set();
    this._list = h('ul', { class: 'list', part: 'list' });
    this._sentinel = h('div', { class: 'sentinel', 'aria-hidden': 'true' });
    this._dialog = h('dialog', { class: 'confirm', part: 'dialog', 'aria-labelledby': 'confirm-title' });
    this._observe();
    this._build();
  }

  /** 'stream' when live over SSE, 'polling' when falling back, 'off' before connecting. */
  get live() { return this._live; }
  get tab() { return this._tab; }
  set tab(v) { if (TABS.includes(v)) this._selectTab(v, false); }
  get renderItem() { return this._renderItemFn; }
  set renderItem(fn) { this._renderItemFn = typeof fn === 'function' ? fn : null; for (const it of this._items.values()) this._renderItem(it); }
  /** Milliseconds the last first page took from its answer to its rows on the page. */
  get lastRenderMs() { return this._lastRenderMs; }

  connectedCallback() {
    this._onOnline = () => { if (this._live !== 'stream') this._connectStream(true); };
    this._onDocClick = (e) => { if (this._isPopover() && !this._panel.hidden && !e.composedPath().includes(this)) this.close(false); };
    globalThis.addEventListener('online', this._onOnline);
    document.addEventListener('click', this._onDocClick);
    super.connectedCallback();
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    globalThis.removeEventListener('online', this._onOnline);
    document.removeEventListener('click', this._onDocClick);
    this._stop();
  }

  attributeChangedCallback(name, oldValue, newValue) {
    if (oldValue === newValue) return;
    if (name === 'heading' || name === 'mode') this._relocalize();
    else super.attributeChangedCallback(name, oldValue, newValue);
  }

  /** Reloads the list and the counts from the first page. */
  refresh() { return this._reload(); }

  /** Popover mode: opens the panel (focus moves to its tabs) or closes it (focus back to the bell). */
  open() {
    if (!this._isPopover()) return;
    this._panel.hidden = false;
    this._place();
    this._bell.setAttribute('aria-expanded', 'true');
    this._tabButtons[this._tab].focus();
  }

  close(focusBell = true) {
    if (!this._isPopover() || this._panel.hidden) return;
    this._closeMenu(false);
    this._panel.hidden = true;
    this._bell.setAttribute('aria-expanded', 'false');
    if (focusBell) this._bell.focus();
  }

  _isPopover() { return this.getAttribute('mode') === 'popover'; }

  /** Puts the panel's end edge under the bell, shifted as needed to stay inside the viewport. */
  _place() {
    const r = this.getBoundingClientRect();
    const vw = document.documentElement.clientWidth || globalThis.innerWidth;
    const w = Math.min(420, vw - 16);
    const left = Math.max(8, Math.min(this._loc.dir === 'rtl' ? r.left : r.right - w, vw - w - 8));
    Object.assign(this._panel.style, { width: `${w}px`, left: `${left - r.left}px`, right: 'auto' });
  }

  // ---- structure --------------------------------------------------------------------------------

  _relocalize() {
    super._relocalize();
    if (!this._list) return; // during the base constructor
    // labels learned in the former language, in the new one
    for (const [cd, listing] of this._listings || []) { const l = localLabel(listing, this._locale); if (l) this._labels.set(cd, l); }
    this._build();
    for (const it of this._items.values()) this._renderItem(it);
    this._renderEmpty(true);
    if (this._counts) this._setCounts(this._counts);
  }

  _build() {
    const t = (k, v) => this.t(k, v);
    const heading = this.getAttribute('heading') || t('inbox');
    this._badge = h('span', { class: 'badge', part: 'badge', 'data-count': '0' }, '0');
    this._heading = h('h2', { part: 'heading', id: 'heading' }, h('span', { class: 'heading-text' }, heading), this._badge);
    this._templateSel = h('select', { class: 'filter-template', 'aria-label': t('kind'), onchange: () => { this._templateCd = this._templateSel.value; this._reload(); } });
    this._fillTemplates();
    this._markAll = h('button', { type: 'button', class: 'mark-all', part: 'button', onclick: () => this._markAllRead() }, t('markAllRead'));
    const header = h('header', { part: 'header' }, this._heading, h('div', { class: 'tools' }, this._templateSel, this._markAll));
    this._tabButtons = {};
    const tablist = h('div', { role: 'tablist', 'aria-label': t('tabs'), onkeydown: (e) => this._tabKey(e) },
      TABS.map((name) => (this._tabButtons[name] = h('button', {
        type: 'button', role: 'tab', id: `tab-${name}`, class: `tab tab-${name}`, 'data-tab': name,
        'aria-selected': name === this._tab ? 'true' : 'false', 'aria-controls': 'tabpanel',
        tabindex: name === this._tab ? '0' : '-1', onclick: () => this._selectTab(name, true),
      }, t(TAB_KEYS[name])))));
    this._toast = h('div', { class: 'toast', role: 'status', 'aria-live': 'polite' });
    this._more = h('button', { type: 'button', class: 'more', part: 'button', hidden: this._done || !this._cursor, onclick: () => this._loadMore() }, t('loadMore'));
    const tabpanel = h('div', { role: 'tabpanel', id: 'tabpanel', 'aria-labelledby': `tab-${this._tab}` }, this._list, this._sentinel, this._more);
    this._tabpanel = tabpanel;
    const wasOpen = this._wasPopover && this._panel && !this._panel.hidden;
    this._wasPopover = this._isPopover();
    this._panel = h('div', { class: 'panel', part: 'panel', hidden: this._isPopover() && !wasOpen,
      role: this._isPopover() ? 'dialog' : null, 'aria-labelledby': 'heading',
      onkeydown: (e) => { if (e.key === 'Escape' && this._isPopover() && !e.defaultPrevented) { e.preventDefault(); this.close(true); } } },
    header, tablist, this._toast, tabpanel);
    const parts = [];
    if (this._isPopover()) {
      this._bellBadge = h('span', { class: 'badge', 'data-count': '0', 'aria-hidden': 'true' }, '0');
      this._bell = h('button', { type: 'button', class: 'bell', part: 'bell button', 'aria-haspopup': 'dialog',
        'aria-expanded': wasOpen ? 'true' : 'false', 'aria-label': t('bellLabel', { n: 0 }),
        onclick: (e) => { e.stopPropagation(); if (this._panel.hidden) this.open(); else this.close(true); } },
      this._bellIcon(), this._bellBadge);
      parts.push(this._bell);
    } else {
      this._bell = null;
      this._bellBadge = null;
    }
    parts.push(this._panel, this._dialog);
    this._root.replaceChildren(...parts);
  }

  _bellIcon() {
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('focusable', 'false');
    const p = document.createElementNS(ns, 'path');
    p.setAttribute('d', BELL);
    svg.append(p);
    return svg;
  }

  _observe() {
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

  /** A short line under the tabs; with undo, a button that takes the last step back. */
  _say(text, { error = false, undo = null } = {}) {
    const parts = [h('span', { class: 'toast-text' }, text || '')];
    if (undo) parts.push(h('button', { type: 'button', class: 'undo link', onclick: () => { this._say(''); undo(); } }, this.t('undo')));
    this._toast.replaceChildren(...(text ? parts : []));
    this._toast.classList.toggle('error', !!error);
  }

  _selectTab(name, focus) {
    if (name === this._tab) return;
    this._tab = name;
    for (const [n, b] of Object.entries(this._tabButtons)) {
      b.setAttribute('aria-selected', n === name ? 'true' : 'false');
      b.setAttribute('tabindex', n === name ? '0' : '-1');
    }
    this._tabpanel.setAttribute('aria-labelledby', `tab-${name}`);
    if (focus) this._tabButtons[name].focus();
    this._say('');
    this._reload();
  }

  _tabKey(e) {
    const i = TABS.indexOf(this._tab);
    const rtl = this._loc.dir === 'rtl';
    const step = { ArrowRight: rtl ? -1 : 1, ArrowLeft: rtl ? 1 : -1 }[e.key];
    let next = null;
    if (step) next = TABS[(i + step + TABS.length) % TABS.length];
    else if (e.key === 'Home') next = TABS[0];
    else if (e.key === 'End') next = TABS[TABS.length - 1];
    if (!next) return;
    e.preventDefault();
    this._selectTab(next, true);
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
    if (this._tab === 'unread') q.read = 'false';
    if (this._tab === 'snoozed') q.snoozed = 'true';
    if (this._tab === 'archived') q.archived = 'true';
    if (this._templateCd) q.templateCd = this._templateCd;
    return q;
  }

  async _reload() {
    const gen = ++this._listGeneration;
    this._cursor = null;
    this._done = false;
    this._loading = true;
    this.removeAttribute('data-ready');
    try {
      const page = await this.api.listMessages(this._query(null));
      if (gen !== this._listGeneration) return;
      const t0 = performance.now();
      const open = this._open; // a reload (a stream's reset, a tab) keeps an open message open
      this._items.clear();
      this._order = [];
      this._open = null;
      this._list.replaceChildren();
      this._absorbPage(page);
      const again = open && this._items.get(open);
      if (again) {
        this._open = open;
        this._renderItem(again);
        if (again.m.actionState !== 'archived') this._loadActions(again);
      }
      this._lastRenderMs = performance.now() - t0;
      if (this._toast.classList.contains('error')) this._say('');
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
      if (r.height !== 0 || r.top !== 0) if (r.top < (globalThis.innerHeight || 800) + 200) this._loadMore();
    });
  }

  _fail(err) {
    this._say(explain(err, this._loc.t), { error: true });
    this.dispatchEvent(new CustomEvent('missive-error', { detail: { status: err.status, code: err.code, message: err.message } }));
  }

  _renderEmpty(again = false) {
    let empty = this._list.querySelector(':scope > .empty');
    if (again && empty) { empty.remove(); empty = null; }
    if (this._order.length === 0 && !empty) {
      this._list.append(h('li', { class: 'empty' }, this._templateCd ? this.t('emptyFiltered') : this.t(EMPTY_KEYS[this._tab])));
    } else if (this._order.length && empty) {
      empty.remove();
    }
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
    for (const b of [this._badge, this._bellBadge]) {
      if (!b) continue;
      b.replaceChildren(h('span', { 'aria-hidden': 'true' }, n > 99 ? '99+' : String(n)));
      if (b === this._badge) b.append(h('span', { class: 'sr' }, this.t('unreadCount', { n })));
      b.dataset.count = String(n);
    }
    if (this._bell) this._bell.setAttribute('aria-label', this.t('bellLabel', { n }));
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

  _label(cd) {
    if (cd === GENERIC) return this.t('notification');
    const l = this._labels.get(cd);
    return l || humanize(cd);
  }

  _content(m) {
    const c = (this._usertype(m) === 'sender' ? m.senderContent : m.receiverContent) || {};
    return { title: c.title || this._label(m.templateCd) || this.t('noTitle'), short: c.short || '', long: c.long || '' };
  }

  _snoozed(m) {
    const u = this._viewer(m).snoozedUntil;
    return typeof u === 'number' && u > Date.now();
  }

  _matches(m) {
    const v = this._viewer(m);
    if (v.dismissedAt != null) return false;
    if (this._templateCd && m.templateCd !== this._templateCd) return false;
    switch (this._tab) {
      case 'unread': return v.readAt == null && !this._snoozed(m);
      case 'snoozed': return this._snoozed(m);
      case 'archived': return m.actionState === 'archived';
      default: return !this._snoozed(m);
    }
  }

  /** Learns a template's label from the actions listing of one of its messages (once per template). */
  _noteTemplate(m) {
    const cd = m.templateCd;
    if (!cd || this._labels.has(cd)) return;
    this._labels.set(cd, null);
    this._fillTemplates();
    if (cd === GENERIC) return;
    this.api.actions(m.id, this._usertype(m)).then((r) => this._learnLabel(cd, r)).catch(() => {});
  }

  _learnLabel(cd, listing) {
    if (listing && (listing.label || listing.labels)) (this._listings ||= new Map()).set(cd, listing);
    const label = localLabel(listing, this._locale);
    if (!label || this._labels.get(cd) === label) return;
    this._labels.set(cd, label);
    this._fillTemplates();
    for (const it of this._items.values()) if (it.m.templateCd === cd) this._renderItem(it);
  }

  _fillTemplates() {
    const current = this._templateCd;
    const cds = [...this._labels.keys()];
    if (current && !cds.includes(current)) cds.push(current);
    const opts = cds.map((cd) => ({ cd, text: this._label(cd) })).sort((a, b) => a.text.localeCompare(b.text, this._lang));
    this._templateSel.replaceChildren(h('option', { value: '' }, this.t('allKinds')), ...opts.map((o) => h('option', { value: o.cd }, o.text)));
    this._templateSel.value = current;
    this._templateSel.hidden = opts.length < 2 && !current;
  }

  /** Adds or updates a message; where: 'append' (paging), 'top' (live), 'keep' (in place). */
  _upsert(m, where) {
    if (!m || !m.id) return;
    this._noteTemplate(m);
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

  _avatar(m) {
    const d = m.display && typeof m.display === 'object' ? m.display : {};
    const who = typeof d.name === 'string' && d.name ? d.name : (this._usertype(m) === 'sender' ? m.toUser : m.fromUser) || this._label(m.templateCd);
    const url = typeof d.avatarUrl === 'string' && AVATAR_URL.test(d.avatarUrl) ? d.avatarUrl : null;
    const box = h('span', { class: 'avatar', part: 'avatar', 'aria-hidden': 'true' });
    const letters = () => box.replaceChildren(initials(who));
    if (url) {
      const img = h('img', { alt: '' });
      img.addEventListener('error', letters, { once: true });
      img.src = url;
      box.append(img);
    } else {
      letters();
    }
    return box;
  }

  _defaultSummary(it, c, open) {
    const m = it.m;
    const v = this._viewer(m);
    const tags = [];
    if (m.actionState === 'archived') tags.push(h('span', { class: 'tag' }, this.t('tagDone')));
    else if (m.actionState === 'processing') tags.push(h('span', { class: 'tag' }, this.t('tagProcessing')));
    else if (m.actionState === 'retryable') tags.push(h('span', { class: 'tag' }, this.t('tagRetryable')));
    const when = this._tab === 'snoozed' && v.snoozedUntil ? dateTimeText(v.snoozedUntil, this._locale) : relativeTime(m.createdAt, this._locale);
    return h('button', {
      type: 'button', class: 'summary', 'aria-expanded': open ? 'true' : 'false',
      'aria-controls': `detail-${m.id}`, onclick: () => this._toggle(m.id),
    },
    h('span', { class: 'dot', 'aria-hidden': 'true' }),
    this._avatar(m),
    h('span', { class: 'title', dir: 'auto' }, c.title, v.readAt == null ? h('span', { class: 'sr' }, this.t('unreadSr')) : null, ...tags),
    h('span', { class: 'time' }, when),
    h('span', { class: 'meta' }, h('span', { class: 'kind' }, this._label(m.templateCd)), c.short ? h('span', { class: 'short', dir: 'auto' }, c.short) : null));
  }

  _renderItem(it) {
    const m = it.m;
    const v = this._viewer(m);
    const open = this._open === m.id;
    const c = this._content(m);
    it.el.className = 'item' + (v.readAt == null ? ' unread' : '') + (open ? ' open' : '');
    it.el.dataset.state = m.actionState || '';
    it.el.dataset.templateCd = m.templateCd || '';
    let summary = null;
    if (this._renderItemFn) {
      try {
        summary = this._renderItemFn(m, {
          title: c.title, short: c.short, long: c.long, label: this._label(m.templateCd), unread: v.readAt == null,
          time: relativeTime(m.createdAt, this._locale), open, locale: this._locale, t: (k, x) => this.t(k, x),
          toggle: () => this._toggle(m.id), dismiss: () => this._dismiss(it),
        });
      } catch {
        summary = null;
      }
      if (!(summary instanceof Node)) summary = null;
    }
    if (!summary) summary = this._defaultSummary(it, c, open);
    const quick = h('button', { type: 'button', class: 'dismiss-x', part: 'button', 'aria-label': this.t('dismissOf', { title: c.title }), title: this.t('dismiss'), onclick: () => this._dismiss(it) }, '×');
    const children = [h('div', { class: 'head' }, summary, quick)];
    if (open) children.push(this._detail(it, c));
    const active = this.shadowRoot.activeElement;
    const hadFocus = active && it.el.contains(active) ? active.className.split(' ')[0] : null;
    const menu = this._menu && it.el.contains(this._menu.el) ? this._menu : null;
    it.el.replaceChildren(...children);
    if (menu) this._keepMenu(it, menu);
    if (hadFocus) {
      const again = it.el.querySelector('.' + hadFocus);
      if (again) again.focus();
    }
  }

  _detail(it, c) {
    const m = it.m;
    const t = (k, v) => this.t(k, v);
    const parts = [];
    if (c.long) parts.push(h('p', { class: 'long', dir: 'auto' }, c.long));
    const actions = h('div', { class: 'actions' });
    if (m.actionState !== 'archived' && it.actions) {
      for (const a of it.actions.actions || []) {
        actions.append(h('button', {
          type: 'button', part: 'button action', class: `action variant-${a.variant || 'secondary'}`,
          'data-action': a.actionCd, disabled: it.busy, onclick: () => this._press(it, a),
        }, a.name || humanize(a.actionCd)));
      }
    }
    if (it.pending && it.pending.state === 'approved') {
      actions.append(h('button', { type: 'button', part: 'button action', class: 'action variant-primary continue', 'data-action': it.pending.action.actionCd, disabled: it.busy, onclick: () => this._continue(it) }, t('continue')));
    }
    if (actions.childNodes.length) parts.push(actions);
    if (it.outcome) parts.push(h('p', { class: `outcome ${it.outcome.kind}`, role: 'status' }, it.outcome.text));
    const v = this._viewer(m);
    const row = h('div', { class: 'row' },
      h('button', { type: 'button', class: 'link toggle-read', onclick: () => this._mark(it, v.readAt == null ? 'read' : 'unread') }, v.readAt == null ? t('markRead') : t('markUnread')),
      this._snoozed(m)
        ? h('button', { type: 'button', class: 'link unsnooze', onclick: () => this._unsnooze(it) }, t('unsnooze'))
        : m.actionState === 'archived' ? null
          : h('button', { type: 'button', class: 'link snooze', 'aria-haspopup': 'menu', 'aria-expanded': 'false', onclick: (e) => this._openMenu(it, e.currentTarget) }, t('snooze')),
      h('button', { type: 'button', class: 'link dismiss', onclick: () => this._dismiss(it) }, t('dismiss')));
    parts.push(row);
    return h('div', { class: 'detail', id: `detail-${m.id}` }, parts);
  }

  async _toggle(id) {
    const it = this._items.get(id);
    if (!it) return;
    const wasOpen = this._open === id;
    const prev = this._open && this._items.get(this._open);
    this._closeMenu(false);
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
      this._learnLabel(it.m.templateCd, it.actions);
    } catch (err) {
      it.actions = { actions: [] };
      if (err.code !== 'message_not_found') it.outcome = { kind: 'error', text: explain(err, this._loc.t) };
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

  /** Takes a row out of the view (dismissed or snoozed), moves focus on, offers undo. */
  _leave(it, text, undo) {
    const id = it.m.id;
    this._left.add(id);
    const idx = this._order.indexOf(id);
    this._open = null;
    this._remove(id);
    const next = this._items.get(this._order[Math.min(idx, this._order.length - 1)]);
    this._say(text, { undo });
    const target = next ? next.el.querySelector('.summary') || next.el.querySelector('button') : this._toast.querySelector('.undo') || this._markAll;
    if (target) target.focus();
    this._refreshCounts();
  }

  /** Puts a message back in the view after an undo and focuses it. */
  _back(m, text) {
    this._left.delete(m.id);
    this._upsert(m, 'top');
    this._say(text);
    const it = this._items.get(m.id);
    const s = it && (it.el.querySelector('.summary') || it.el.querySelector('button'));
    if (s) s.focus();
    this._refreshCounts();
  }

  async _dismiss(it) {
    try {
      await this.api.mark(it.m.id, 'dismiss');
      this._leave(it, this.t('dismissed'), async () => {
        try {
          this._back(await this.api.mark(it.m.id, 'undismiss'), this.t('restored'));
        } catch (err) {
          this._fail(err);
        }
      });
    } catch (err) {
      this._fail(err);
    }
  }

  async _snooze(it, until) {
    this._closeMenu(false);
    try {
      const m = await this.api.snooze(it.m.id, until);
      it.m = m || it.m;
      this._leave(it, this.t('snoozedUntil', { time: dateTimeText(until, this._locale) }), async () => {
        try {
          this._back(await this.api.unsnooze(it.m.id), this.t('restored'));
        } catch (err) {
          this._fail(err);
        }
      });
    } catch (err) {
      this._fail(err);
    }
  }

  async _unsnooze(it) {
    try {
      const m = await this.api.unsnooze(it.m.id);
      it.m = m || it.m;
      this._leave(it, this.t('restored'), null);
    } catch (err) {
      this._fail(err);
    }
  }

  // ---- the snooze menu --------------------------------------------------------------------------

  _openMenu(it, button) {
    if (this._menu) { const same = this._menu.button === button; this._closeMenu(true); if (same) return; }
    const p = snoozePresets();
    const item = (cls, key, fn) => h('li', { role: 'none' }, h('button', { type: 'button', role: 'menuitem', tabindex: '-1', class: cls, onclick: fn }, this.t(key)));
    const menu = h('ul', { class: 'menu', role: 'menu', 'aria-label': this.t('snooze'), onkeydown: (e) => this._menuKey(e) },
      item('snooze-later', 'snoozeLaterToday', () => this._snooze(it, p.laterToday)),
      item('snooze-tomorrow', 'snoozeTomorrow', () => this._snooze(it, p.tomorrow)),
      item('snooze-week', 'snoozeNextWeek', () => this._snooze(it, p.nextWeek)),
      item('snooze-pick', 'snoozeDate', () => this._pickDate(it, button)));
    button.setAttribute('aria-expanded', 'true');
    button.after(menu);
    this._menu = { el: menu, button };
    menu.querySelector('[role=menuitem]').focus();
  }

  /** A row drawn again while its snooze menu is open (its actions arrived, it was marked read, a
   * live update) keeps the menu open, under the row's new snooze button. */
  _keepMenu(it, menu) {
    const button = it.el.querySelector('button.snooze');
    if (!button) { this._menu = null; return; }
    button.setAttribute('aria-expanded', 'true');
    button.after(menu.el);
    menu.button = button;
  }

  _menuKey(e) {
    const items = [...this._menu.el.querySelectorAll('[role=menuitem]')];
    const i = items.indexOf(this.shadowRoot.activeElement);
    const go = (j) => { e.preventDefault(); items[(j + items.length) % items.length].focus(); };
    if (e.key === 'ArrowDown') go(i + 1);
    else if (e.key === 'ArrowUp') go(i - 1);
    else if (e.key === 'Home') go(0);
    else if (e.key === 'End') go(items.length - 1);
    else if (e.key === 'Escape') { e.preventDefault(); this._closeMenu(true); } else if (e.key === 'Tab') this._closeMenu(false);
  }

  _closeMenu(focusButton) {
    const m = this._menu;
    if (!m) return;
    this._menu = null;
    m.el.remove();
    if (m.button.isConnected) {
      m.button.setAttribute('aria-expanded', 'false');
      if (focusButton) m.button.focus();
    }
  }

  _pickDate(it, button) {
    this._closeMenu(false);
    const d = new Date();
    d.setDate(d.getDate() + 1);
    const min = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
    const input = h('input', { type: 'date', id: `snooze-date-${it.m.id}`, class: 'snooze-date-input', min, value: min, required: true });
    const go = () => {
      const [y, mo, da] = input.value.split('-').map(Number);
      if (!y) { input.focus(); return; }
      this._snooze(it, new Date(y, mo - 1, da, 9, 0, 0, 0).getTime());
    };
    const form = h('div', { class: 'snooze-date menu', role: 'group', 'aria-label': this.t('snoozeUntil'),
      onkeydown: (e) => { if (e.key === 'Escape') { e.preventDefault(); this._closeMenu(true); } else if (e.key === 'Enter' && e.target === input) { e.preventDefault(); go(); } } },
    h('label', { for: `snooze-date-${it.m.id}` }, this.t('snoozeUntil')), input,
    h('button', { type: 'button', class: 'snooze-date-ok variant-primary', onclick: go }, this.t('snooze')));
    button.setAttribute('aria-expanded', 'true');
    button.after(form);
    this._menu = { el: form, button };
    input.focus();
  }

  async _markAllRead() {
    this._markAll.disabled = true;
    try {
      const filter = this._templateCd ? { templateCd: this._templateCd } : {};
      const r = await this.api.markAll('read', filter);
      const now = Date.now();
      for (const it of this._items.values()) {
        if (filter.templateCd && it.m.templateCd !== filter.templateCd) continue;
        const v = this._viewer(it.m);
        it.m = { ...it.m, viewer: { ...v, seenAt: v.seenAt ?? now, readAt: v.readAt ?? now } };
      }
      for (const id of [...this._order]) this._upsert(this._items.get(id).m, 'keep');
      this._say(r && typeof r.updated === 'number' ? this.t('markedN', { n: r.updated }) : this.t('markedAll'));
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
      const t = (k, v) => this.t(k, v);
      const needsNotes = !!conf.notesLabel;
      const required = !!conf.requireNotes;
      const notes = needsNotes ? h('textarea', { id: 'confirm-notes', class: 'notes', rows: 3, required }) : null;
      const err = h('p', { class: 'outcome error', role: 'alert' });
      const finish = (value) => { d.close(); resolve(value); };
      const ok = h('button', { type: 'button', class: `confirm-ok variant-${a.variant || 'primary'}`, part: 'button', onclick: () => {
        const text = notes ? notes.value.trim() : '';
        if (required && !text) { err.textContent = t('required', { field: conf.notesLabel }); notes.focus(); return; }
        finish(text ? { notes: text } : {});
      } }, a.name || t('confirm'));
      const cancel = h('button', { type: 'button', class: 'confirm-cancel', part: 'button', onclick: () => finish(null) }, t('cancel'));
      const parts = [
        h('h3', { id: 'confirm-title' }, conf.title || a.name || t('areYouSure')),
        conf.message ? h('p', { class: 'confirm-message' }, conf.message) : null,
        needsNotes ? h('label', { for: 'confirm-notes' }, conf.notesLabel) : null, notes, err,
        h('div', { class: 'row' }, cancel, ok)];
      d.replaceChildren(...parts.filter(Boolean)); // replaceChildren would print a null as "null"
      d.oncancel = (e) => { e.preventDefault(); finish(null); };
      d.showModal();
      (notes || ok).focus();
    });
  }

  async _press(it, a) {
    if (it.busy) return;
    const input = await this._confirm(a);
    if (input === null) return;
    await this._run(it, a, input, null);
  }

  async _continue(it) {
    const p = it.pending;
    await this._run(it, p.action, p.input, p.resumeToken);
  }

  /** The words for a result: the action's resultTemplate over it, else a plain "Done." */
  _resultText(a, result) {
    if (a && typeof a.resultTemplate === 'string' && a.resultTemplate) {
      const text = mustacheText(a.resultTemplate, result && typeof result === 'object' ? result : { result }).trim();
      if (text) return text;
    }
    return this.t('done');
  }

  async _run(it, a, input, resumeToken) {
    const id = it.m.id;
    const actionCd = a.actionCd;
    it.busy = true;
    it.outcome = { kind: 'info', text: this.t('working') };
    this._renderItem(it);
    let detail;
    try {
      const r = await this.api.act(id, actionCd, input, resumeToken);
      if (r.status === 202 && r.body && r.body.status === 'approval_required') {
        it.pending = { action: a, input, approvalId: r.body.approvalId, resumeToken: r.body.resumeToken, state: 'pending' };
        it.outcome = { kind: 'info', text: this.t('needsApproval') };
        this._watchApproval(it);
        detail = { messageId: id, actionCd, ok: false, approvalId: r.body.approvalId };
      } else {
        it.pending = null;
        const result = r.body ? r.body.result : null;
        it.outcome = { kind: 'ok', text: this._resultText(a, result) };
        detail = { messageId: id, actionCd, ok: true, result };
      }
    } catch (err) {
      if (resumeToken && /^approval_/.test(err.code)) it.pending = null;
      it.outcome = { kind: 'error', text: explain(err, this._loc.t) };
      detail = { messageId: id, actionCd, ok: false, error: { status: err.status, code: err.code, message: err.message, ...err.fields } };
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
      if (a.state === 'approved') it.outcome = { kind: 'ok', text: a.decidedBy ? this.t('approvedBy', { who: a.decidedBy }) : this.t('approved') };
      else { it.outcome = { kind: 'error', text: a.state === 'denied' ? this.t('errDenied') : this.t('approvalEnded') }; it.pending = null; }
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
        } else if (this._left.has(m.id)) {
          // an event sent before this view's dismiss or snooze reached the daemon can arrive after
          // it: ask for the message as it is now instead of bringing the row back
          this.api.message(m.id).then((now) => this._upsert(now, 'top'), () => {});
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
