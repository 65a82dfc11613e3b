// missive-preferences.js — the <missive-preferences> custom element: where a user says which
// channels (email, sms, chat, …) bring them which categories of messages, whether email comes as a
// digest, and which language they read. It talks to GET and PUT /preferences with the identity,
// locale and string catalogues of <missive-inbox> (imported from it, so the two share one client):
//
//   <script type="module" src="https://missive.example.com/ui/missive-preferences.js"></script>
//   <missive-preferences base-url="https://missive.example.com" channels="email,sms"
//                        categories="bookings,payments"></missive-preferences>
//
// Like the inbox it puts data on the page as text only, and never shows the server's error text.
import { MissiveBase, CATALOGUES, explain, h } from './missive-inbox.js';

const DIGESTS = [['digestOff', 0], ['digestHourly', 3600000], ['digestDaily', 86400000]];
const CHANNEL_KEYS = { inbox: 'chInbox', email: 'chEmail', sms: 'chSms', chat: 'chChat' };

function list(attr) { return String(attr || '').split(',').map((s) => s.trim()).filter(Boolean); }
function humanize(s) { const t = String(s).replace(/[-_.]+/g, ' ').trim(); return t ? t[0].toUpperCase() + t.slice(1) : ''; }

/**
 * <missive-preferences base-url="…" [user|token|get-token as for the inbox] [locale="de"]
 *                      [channels="email,sms"] [categories="bookings,payments"]>
 * Properties: token, getToken, strings, categoryLabels ({bookings: 'Bookings'}), preferences (the
 * last loaded or saved object), reload(). Events: missive-preferences-saved {preferences}.
 */
export class MissivePreferences extends MissiveBase {
  static get observedAttributes() { return ['base-url', 'user', 'roles', 'permissions', 'tenant', 'get-token', 'locale', 'channels', 'categories']; }

  constructor() {
    super();
    this._prefs = null;
    this._labels = {};
    this._render();
  }

  get preferences() { return this._prefs; }
  get categoryLabels() { return this._labels; }
  set categoryLabels(v) { this._labels = v && typeof v === 'object' ? v : {}; this._render(); }
  reload() { return this._restart(); }

  attributeChangedCallback(name, oldValue, newValue) {
    if (oldValue === newValue) return;
    super.attributeChangedCallback(name, oldValue, newValue);
    if (name === 'channels' || name === 'categories') this._render();
  }

  _relocalize() { super._relocalize(); this._render(); }

  async _restart() {
    if (!this._connected) return;
    this.removeAttribute('data-ready');
    this._say(this.t('prefLoading'));
    try {
      this._prefs = await this.api.preferences();
      this._say('');
      this._render();
      this.setAttribute('data-ready', '');
    } catch (err) {
      this._say(explain(err, this._loc.t), true);
    }
  }

  _say(text, error = false) {
    if (!this._toast) return;
    this._toast.textContent = text || '';
    this._toast.classList.toggle('error', !!error);
  }

  _channels() {
    const p = this._prefs || {};
    const set = new Set(list(this.getAttribute('channels') || 'email'));
    for (const ch of Object.keys(p.channels || {})) set.add(ch);
    for (const c of Object.values(p.categories || {})) for (const ch of Object.keys(c || {})) set.add(ch);
    set.delete('inbox');
    return [...set];
  }

  _categories() {
    const set = new Set(list(this.getAttribute('categories')));
    for (const c of Object.keys((this._prefs || {}).categories || {})) set.add(c);
    return [...set];
  }

  _channelName(ch) { return CHANNEL_KEYS[ch] ? this.t(CHANNEL_KEYS[ch]) : humanize(ch); }
  _categoryName(c) { return typeof this._labels[c] === 'string' ? this._labels[c] : humanize(c); }

  _render() {
    const t = (k, v) => this.t(k, v);
    const p = this._prefs || {};
    const channels = this._channels();
    const cats = this._categories();
    const base = (ch) => (p.channels && typeof p.channels[ch] === 'boolean' ? p.channels[ch] : true);
    const cell = (row, ch, checked) => h('td', null, h('input', {
      type: 'checkbox', class: 'pref', 'data-row': row, 'data-channel': ch, checked,
      'aria-label': `${this._channelName(ch)} — ${row === '*' ? t('prefAll') : this._categoryName(row)}`,
    }));
    const head = h('tr', null, h('th', { scope: 'col' }, t('prefCategory')), h('th', { scope: 'col' }, t('chInbox')),
      channels.map((ch) => h('th', { scope: 'col' }, this._channelName(ch))));
    const rows = [h('tr', null, h('th', { scope: 'row' }, t('prefAll')),
      h('td', null, h('input', { type: 'checkbox', checked: true, disabled: true, 'aria-label': `${t('chInbox')} — ${t('inboxAlwaysOn')}` })),
      channels.map((ch) => cell('*', ch, base(ch))))];
    for (const c of cats) {
      const mine = (p.categories && p.categories[c]) || {};
      rows.push(h('tr', null, h('th', { scope: 'row' }, this._categoryName(c)),
        h('td', null, h('input', { type: 'checkbox', checked: true, disabled: true, 'aria-label': `${t('chInbox')} — ${t('inboxAlwaysOn')}` })),
        channels.map((ch) => cell(c, ch, typeof mine[ch] === 'boolean' ? mine[ch] : base(ch)))));
    }
    const every = p.digest && p.digest.email && p.digest.email.everyMs;
    this._digest = h('select', { id: 'digest', class: 'digest' }, DIGESTS.map(([k, ms]) => h('option', { value: String(ms) }, t(k))));
    this._digest.value = String(DIGESTS.some(([, ms]) => ms === every) ? every : 0);
    const names = Object.keys(CATALOGUES).map((l) => {
      let name = l;
      try { name = new Intl.DisplayNames([l], { type: 'language' }).of(l); } catch { /* keep the tag */ }
      return [l, name];
    });
    this._language = h('select', { id: 'language', class: 'language' }, names.map(([l, n]) => h('option', { value: l, lang: l }, n)));
    this._language.value = typeof p.locale === 'string' && CATALOGUES[p.locale] ? p.locale : this._lang;
    this._toast = h('p', { class: 'toast', role: 'status' });
    this._save = h('button', { type: 'button', class: 'save variant-primary', part: 'button', onclick: () => this._store() }, t('save'));
    this._root.replaceChildren(h('div', { class: 'panel', part: 'panel' },
      h('header', { part: 'header' }, h('h2', { id: 'prefs-heading', part: 'heading' }, t('prefTitle'))),
      h('fieldset', null, h('legend', null, t('prefChannels')),
        h('div', { class: 'prefs-body' }, h('table', { class: 'prefs' }, h('thead', null, head), h('tbody', null, rows)))),
      h('fieldset', null, h('legend', null, t('prefDigest')), h('label', { for: 'digest', class: 'sr' }, t('prefDigest')), this._digest),
      h('fieldset', null, h('legend', null, t('prefLanguage')), h('label', { for: 'language', class: 'sr' }, t('prefLanguage')), this._language),
      h('div', { class: 'toast-row row' }, this._save, this._toast)));
  }

  /** The form as a preferences object: category cells only where they differ from "all". */
  _collect() {
    const prev = this._prefs || {};
    const boxes = [...this.shadowRoot.querySelectorAll('input.pref')];
    const channels = {};
    for (const b of boxes) if (b.dataset.row === '*') channels[b.dataset.channel] = b.checked;
    const categories = {};
    for (const b of boxes) {
      const c = b.dataset.row;
      if (c === '*') continue;
      const had = prev.categories && prev.categories[c] && typeof prev.categories[c][b.dataset.channel] === 'boolean';
      if (!had && b.checked === channels[b.dataset.channel]) continue;
      (categories[c] ||= {})[b.dataset.channel] = b.checked;
    }
    const out = { ...prev, channels, categories };
    const every = Number(this._digest.value);
    const digest = { ...(prev.digest || {}) };
    if (every) digest.email = { everyMs: every }; else delete digest.email;
    out.digest = digest;
    out.locale = this._language.value;
    return out;
  }

  async _store() {
    this._save.disabled = true;
    const body = this._collect();
    try {
      const saved = await this.api.savePreferences(body);
      this._prefs = saved && typeof saved === 'object' ? saved : body;
      this._render();
      this._say(this.t('saved'));
      this._save.focus();
      this.dispatchEvent(new CustomEvent('missive-preferences-saved', { detail: { preferences: this._prefs } }));
    } catch (err) {
      this._say(explain(err, this._loc.t), true);
      this.dispatchEvent(new CustomEvent('missive-error', { detail: { status: err.status, code: err.code, message: err.message } }));
    } finally {
      this._save.disabled = false;
    }
  }
}

if (!customElements.get('missive-preferences')) customElements.define('missive-preferences', MissivePreferences);
