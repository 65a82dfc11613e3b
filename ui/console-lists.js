// console-lists.js — the console's lists: sagas (admins), approvals, and for admins every message of
// the tenant (filters and a title search), the outbox deliveries and the timers; a timeline per
// message and per saga (GET /admin/…/timeline: every recorded change, who, when, which attempt or
// step, the outcome), and bulk actions behind a confirmation (resume / compensate sagas, approve /
// deny approvals). It uses only the public HTTP routes, puts data on the page as text only, and
// speaks the console's language (console-strings.js).
import { catalogue, explain, h } from './missive-inbox.js';
import { consoleLocale, strings } from './console-strings.js';

const KINDS = {
  sagas: {
    path: '/sagas', key: 'sagaId', field: 'sagas', timeline: (id) => `/admin/sagas/${encodeURIComponent(id)}/timeline`,
    states: ['', 'running', 'waiting', 'manual-review', 'compensating', 'completed', 'compensated', 'failed'],
    filters: ['definition'],
    columns: ['sagaId', 'definition', 'state', 'updatedAt'],
    bulk: [['resume', 'resumed', ''], ['compensate', 'compensated', 'danger']],
    text: (s) => `${s.sagaId} ${s.definition || ''} ${s.state || ''}`,
  },
  approvals: {
    path: '/approvals', key: 'approvalId', field: 'approvals',
    states: ['pending', 'approved', 'denied', 'expired'],
    filters: [],
    columns: ['capability', 'principalId', 'state', 'createdAt'],
    bulk: [['approved', 'approved', 'primary'], ['denied', 'denied', 'danger']],
    text: (a) => `${a.approvalId} ${a.capability || ''} ${a.principalId || ''} ${a.target || ''}`,
  },
  messages: {
    path: '/admin/messages', key: 'id', field: 'messages', timeline: (id) => `/admin/messages/${encodeURIComponent(id)}/timeline`,
    states: ['', 'scheduled', 'active', 'processing', 'retryable', 'archived', 'cancelled'], stateField: 'actionState',
    filters: ['q', 'templateCd', 'sender', 'recipient'],
    columns: ['title', 'templateCd', 'fromUser', 'toUser', 'actionState', 'createdAt'],
    bulk: [],
    text: (m) => `${m.title || ''} ${m.fromUser || ''} ${m.toUser || ''} ${m.templateCd || ''}`,
  },
  outbox: {
    path: '/admin/outbox', key: 'id', field: 'outbox',
    states: ['', 'pending', 'delivering', 'sent', 'skipped', 'failed'],
    filters: ['channel'],
    columns: ['channel', 'recipient', 'state', 'attempts', 'createdAt'],
    bulk: [],
    text: (o) => `${o.channel || ''} ${o.recipient || ''} ${o.state || ''}`,
  },
  timers: {
    path: '/admin/timers', key: 'id', field: 'timers',
    states: ['', 'pending', 'fired', 'cancelled', 'failed'],
    filters: [],
    selects: [['kind', ['', 'expiry', 'reminder', 'escalation', 'snooze', 'send', 'saga']]],
    columns: ['kind', 'ref', 'state', 'dueAt'],
    bulk: [],
    text: (t) => `${t.kind || ''} ${t.ref || ''} ${t.state || ''}`,
  },
};


/** Builds the "Lists" panel into root; getApi() gives the current client. Returns {reload}. */
export function setupLists(root, getApi) {
  const locale = consoleLocale();
  const t = strings(locale);
  const et = catalogue(locale).t; // the inbox's words for errors, in the same language
  const errorText = (err) => `${explain(err, et)} (${err.message})`;
  const when = (ms) => (ms ? new Date(ms).toLocaleString(locale) : '—');
  const label = (k) => t(`k_${k}`);
  const noun = (k) => (locale === 'de' ? label(k) : label(k).toLowerCase()); // German nouns keep their capital
  if (locale !== 'en') root.setAttribute('lang', locale);
  let kind = 'sagas';
  let rows = [];
  const status = h('p', { class: 'status', id: 'lists-status', role: 'status', 'aria-live': 'polite' });
  const kindSel = h('select', { id: 'lists-kind' }, Object.keys(KINDS).map((k) => h('option', { value: k }, label(k))));
  const stateSel = h('select', { id: 'lists-state' });
  const extra = h('span', { class: 'extra-filters' });
  const search = h('input', { type: 'search', id: 'lists-search', placeholder: t('searchHint') });
  const all = h('input', { type: 'checkbox', id: 'lists-all', 'aria-label': t('selectAll') });
  const table = h('table', { class: 'list-table' });
  const bulk = h('div', { class: 'row bulk' });
  const timeline = h('section', { class: 'timeline', id: 'timeline', 'aria-labelledby': 'timeline-h', hidden: true });
  const dialog = h('dialog', { class: 'bulk-confirm', 'aria-labelledby': 'bulk-title' });
  root.replaceChildren(
    h('div', { class: 'panel-head' }, h('h2', { id: 'lists-h' }, t('lists')), h('button', { type: 'button', id: 'lists-refresh', onclick: () => load() }, t('refresh'))),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); load(); } },
      h('label', { for: 'lists-kind' }, t('show')), kindSel, h('label', { for: 'lists-state' }, t('state')), stateSel, extra,
      h('label', { for: 'lists-search' }, t('search')), search, h('button', { type: 'submit' }, t('apply'))),
    status, table, bulk, timeline, dialog);

  function say(text, cls = '') { status.textContent = text || ''; status.className = `status ${cls}`; }

  function setupFilters() {
    const k = KINDS[kind];
    stateSel.replaceChildren(...k.states.map((s) => h('option', { value: s }, s || t('any'))));
    if (kind === 'approvals') stateSel.value = 'pending';
    extra.replaceChildren(
      ...k.filters.flatMap((f) => [h('label', { for: `lists-${f}` }, t(`f_${f}`) === `f_${f}` ? t(`c_${f}`) : t(`f_${f}`)),
        h('input', { type: f === 'q' ? 'search' : 'text', id: `lists-${f}`, class: 'filter', 'data-filter': f })]),
      ...(k.selects || []).flatMap(([f, values]) => [h('label', { for: `lists-${f}-filter` }, t(`f_${f}`)),
        h('select', { id: `lists-${f}-filter`, class: 'filter', 'data-filter': f }, values.map((v) => h('option', { value: v }, v || t('any'))))]));
    timeline.hidden = true;
  }
  kindSel.addEventListener('change', () => { kind = kindSel.value; setupFilters(); load(); });
  search.addEventListener('input', () => render());
  all.addEventListener('change', () => { for (const b of table.querySelectorAll('tbody input[type=checkbox]')) b.checked = all.checked; renderBulk(); });
  setupFilters();

  // Only the latest load may draw: a slow answer for the kind shown before must not overwrite it.
  let loads = 0;
  async function load() {
    const mine = ++loads;
    const k = KINDS[kind];
    const query = { limit: 100 };
    if (stateSel.value) query.state = stateSel.value;
    for (const input of extra.querySelectorAll('.filter')) if (input.value.trim()) query[input.dataset.filter] = input.value.trim();
    say(t('loading'));
    const what = noun(kind);
    try {
      const { body } = await getApi().get(k.path, query);
      if (mine !== loads) return;
      rows = body[k.field] || [];
      say(rows.length ? '' : t('none', { what }));
    } catch (err) {
      if (mine !== loads) return;
      rows = [];
      if (err.code === 'forbidden') say(t('forbidden', { what }), 'error');
      else say(err.status === 404 && err.code === 'not_found' ? t('absent', { what }) : errorText(err), 'error');
    }
    render();
  }

  function shown() {
    const q = search.value.trim().toLowerCase();
    return rows.filter((r) => !q || KINDS[kind].text(r).toLowerCase().includes(q));
  }

  function cell(k, r, f, i) {
    const v = /At$/.test(f) ? when(r[f]) : String(r[f] ?? '');
    if (i === 0 && k.timeline !== undefined || (i === 0 && kind === 'approvals'))
      return h('button', { type: 'button', class: 'link open', onclick: () => showTimeline(r) }, v || '—');
    return v;
  }

  // A redraw (a reload, the search box) keeps the rows a person has ticked; a bulk run clears them.
  function render() {
    const k = KINDS[kind];
    const list = shown();
    const picks = k.bulk.length > 0;
    const ticked = new Set(picked());
    all.checked = false;
    table.replaceChildren(
      h('caption', { class: 'sr' }, t('shown', { what: label(kind), n: list.length })),
      h('thead', null, h('tr', null, picks ? h('th', { scope: 'col' }, all) : null, k.columns.map((f) => h('th', { scope: 'col' }, t(`c_${f}`))))),
      h('tbody', null, list.map((r) => h('tr', { 'data-key': r[k.key], 'data-state': r[k.stateField || 'state'] || '' },
        picks ? h('td', null, h('input', { type: 'checkbox', class: 'pick', checked: ticked.has(r[k.key]), 'aria-label': t('select', { id: r[k.key] }), onchange: renderBulk })) : null,
        k.columns.map((f, i) => h('td', { class: f === 'state' || f === 'actionState' ? `state state-${r[f]}` : f }, cell(k, r, f, i)))))));
    renderBulk();
  }

  function picked() {
    return [...table.querySelectorAll('tbody tr')].filter((tr) => tr.querySelector('input.pick')?.checked).map((tr) => tr.dataset.key);
  }

  function renderBulk() {
    const k = KINDS[kind];
    if (!k.bulk.length) { bulk.replaceChildren(); bulk.hidden = true; return; }
    bulk.hidden = false;
    const ids = picked();
    bulk.replaceChildren(h('span', { class: 'count' }, ids.length ? t('selected', { n: ids.length }) : t('pickRows')),
      ...k.bulk.map(([what, , cls]) => h('button', { type: 'button', class: `bulk-${what} ${cls}`, disabled: !ids.length, onclick: () => confirmBulk(what, t(`b_${what}`), ids) }, t(`b_${what}`))));
  }

  function confirmBulk(what, name, ids) {
    const items = ids.length === 1 ? t(`one_${kind}`) : noun(kind);
    const ok = h('button', { type: 'button', class: 'confirm-ok primary' }, t('confirmOk', { action: name, n: ids.length }));
    const cancel = h('button', { type: 'button', class: 'confirm-cancel' }, t('cancel'));
    dialog.replaceChildren(h('h3', { id: 'bulk-title' }, t(`cf_${what}`, { n: ids.length, what: items })),
      h('ul', { class: 'bulk-ids' }, ids.map((id) => h('li', null, id))),
      h('p', null, t('eachOnItsOwn')), h('div', { class: 'row' }, cancel, ok));
    cancel.addEventListener('click', () => dialog.close());
    ok.addEventListener('click', () => { dialog.close(); runBulk(what, ids); });
    dialog.showModal();
    ok.focus();
  }

  async function runBulk(what, ids) {
    const k = KINDS[kind];
    const [, done] = k.bulk.find(([w]) => w === what);
    let good = 0;
    const bad = [];
    for (const id of ids) {
      try {
        if (kind === 'sagas') await getApi().post(`/sagas/${encodeURIComponent(id)}/${what}`);
        else await getApi().post(`/approvals/${encodeURIComponent(id)}/decision`, { decision: what });
        good++;
      } catch (err) {
        bad.push(`${id}: ${explain(err, et)}`);
      }
    }
    for (const box of table.querySelectorAll('tbody input.pick')) box.checked = false;
    await load();
    const doneText = t(`d_${done}`, { n: good });
    say(bad.length ? t('bulkSome', { done: doneText, n: bad.length, list: bad.join('; ') }) : t('bulkAll', { done: doneText }), bad.length ? 'error' : 'ok');
  }

  /** One timeline entry as words: when, what, by whom, which step and attempt, the outcome. */
  function entryText(e) {
    const parts = [];
    if (e.actor) parts.push(t('by', { who: e.actor }));
    if (e.step) parts.push(t('step', { name: e.step }));
    if (typeof e.attempt === 'number' && e.attempt > 0) parts.push(t('attempts', { n: e.attempt }));
    if (e.outcome) parts.push(t('outcome', { what: e.outcome }));
    if (e.detail) parts.push(e.detail);
    return parts.join(', ');
  }

  let timelines = 0; // as with lists: only the timeline asked for last is drawn
  async function showTimeline(r) {
    const mine = ++timelines;
    const k = KINDS[kind];
    const id = r[k.key];
    let events = [];
    let empty = t('timelineEmpty');
    if (k.timeline) {
      try {
        const { body } = await getApi().get(k.timeline(id));
        events = (body.entries || []).map((e) => ({ at: e.at, what: t(`e_${e.event}`), event: e.event, detail: entryText(e) }));
      } catch (err) {
        empty = err.code === 'forbidden' || err.status === 404 ? t('timelineAbsent') : errorText(err);
      }
    } else {
      events = approvalEvents(r, t);
    }
    if (mine !== timelines) return;
    const name = kind === 'messages' ? r.title || id : id;
    timeline.hidden = false;
    timeline.replaceChildren(h('h3', { id: 'timeline-h' }, t('timelineOf', { id: name })),
      events.length
        ? h('ol', { class: 'events' }, events.map((e) => h('li', { 'data-what': e.event || e.what },
          h('span', { class: 'when' }, e.at ? when(e.at) : ''), ' ', h('strong', null, e.what), e.detail ? ' ' : '', e.detail || '')))
        : h('p', { class: 'empty' }, empty));
    timeline.querySelector('h3').setAttribute('tabindex', '-1');
    timeline.querySelector('h3').focus();
  }

  return { reload: load };
}

function approvalEvents(a, t) {
  const who = a.principalId || t('unknown');
  const what = a.capability || t('unknown');
  const ev = [{ at: a.createdAt, what: t('a_asked'), event: 'asked', detail: a.target ? t('askedOn', { who, what, target: a.target }) : t('askedFor', { who, what }) }];
  if (a.decidedAt || (a.state && a.state !== 'pending')) ev.push({ at: a.decidedAt, what: t(`a_${a.state}`), event: a.state, detail: a.decidedBy ? t('by', { who: a.decidedBy }) : '' });
  else ev.push({ at: a.expiresAt, what: t('a_expires'), event: 'expires', detail: '' });
  return ev;
}
