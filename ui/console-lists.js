// console-lists.js — the console's lists: sagas (admins) and approvals, with filters and a search,
// a timeline per item, and bulk actions behind a confirmation (resume / compensate sagas, approve /
// deny approvals). It uses only the public HTTP list routes (GET /sagas, GET /approvals) and puts
// data on the page as text only.
import { explain, h } from './missive-inbox.js';

const KINDS = {
  sagas: {
    label: 'Sagas', path: '/sagas', key: 'sagaId', field: 'sagas',
    states: ['', 'running', 'waiting', 'manual-review', 'compensating', 'completed', 'compensated', 'failed'],
    filters: [['definition', 'Definition']],
    columns: [['sagaId', 'Saga'], ['definition', 'Definition'], ['state', 'State'], ['updatedAt', 'Updated']],
    bulk: [['resume', 'Resume', 'resumed', ''], ['compensate', 'Compensate', 'compensated', 'danger']],
    text: (s) => `${s.sagaId} ${s.definition || ''} ${s.state || ''}`,
  },
  approvals: {
    label: 'Approvals', path: '/approvals', key: 'approvalId', field: 'approvals',
    states: ['pending', 'approved', 'denied', 'expired'],
    filters: [],
    columns: [['capability', 'Capability'], ['principalId', 'Asked by'], ['state', 'State'], ['createdAt', 'Asked']],
    bulk: [['approved', 'Approve', 'approved', 'primary'], ['denied', 'Deny', 'denied', 'danger']],
    text: (a) => `${a.approvalId} ${a.capability || ''} ${a.principalId || ''} ${a.target || ''}`,
  },
};

const when = (ms) => (ms ? new Date(ms).toLocaleString() : '—');
const errorText = (err) => `${explain(err)} (${err.message})`;

/** Builds the "Lists" panel into root; getApi() gives the current client. Returns {reload}. */
export function setupLists(root, getApi) {
  let kind = 'sagas';
  let rows = [];
  const $ = (sel) => root.querySelector(sel);
  const status = h('p', { class: 'status', id: 'lists-status', role: 'status', 'aria-live': 'polite' });
  const kindSel = h('select', { id: 'lists-kind' }, Object.entries(KINDS).map(([k, v]) => h('option', { value: k }, v.label)));
  const stateSel = h('select', { id: 'lists-state' });
  const extra = h('span', { class: 'extra-filters' });
  const search = h('input', { type: 'search', id: 'lists-search', placeholder: 'id, name, who…' });
  const all = h('input', { type: 'checkbox', id: 'lists-all', 'aria-label': 'Select all shown' });
  const table = h('table', { class: 'list-table' });
  const bulk = h('div', { class: 'row bulk' });
  const timeline = h('section', { class: 'timeline', id: 'timeline', 'aria-labelledby': 'timeline-h', hidden: true });
  const dialog = h('dialog', { class: 'bulk-confirm', 'aria-labelledby': 'bulk-title' });
  root.replaceChildren(
    h('div', { class: 'panel-head' }, h('h2', { id: 'lists-h' }, 'Lists'), h('button', { type: 'button', id: 'lists-refresh', onclick: () => load() }, 'Refresh')),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); load(); } },
      h('label', { for: 'lists-kind' }, 'Show'), kindSel, h('label', { for: 'lists-state' }, 'State'), stateSel, extra,
      h('label', { for: 'lists-search' }, 'Search'), search, h('button', { type: 'submit' }, 'Apply')),
    status, table, bulk, timeline, dialog);

  function say(text, cls = '') { status.textContent = text || ''; status.className = `status ${cls}`; }

  function setupFilters() {
    const k = KINDS[kind];
    stateSel.replaceChildren(...k.states.map((s) => h('option', { value: s }, s || 'any')));
    if (kind === 'approvals') stateSel.value = 'pending';
    extra.replaceChildren(...k.filters.flatMap(([f, label]) => [h('label', { for: `lists-${f}` }, label), h('input', { type: 'text', id: `lists-${f}`, class: 'filter', 'data-filter': f })]));
  }
  kindSel.addEventListener('change', () => { kind = kindSel.value; setupFilters(); load(); });
  search.addEventListener('input', () => render());
  all.addEventListener('change', () => { for (const b of table.querySelectorAll('tbody input[type=checkbox]')) b.checked = all.checked; renderBulk(); });
  setupFilters();

  async function load() {
    const k = KINDS[kind];
    const query = { limit: 100 };
    if (stateSel.value) query.state = stateSel.value;
    for (const input of extra.querySelectorAll('input.filter')) if (input.value.trim()) query[input.dataset.filter] = input.value.trim();
    say('Loading…');
    try {
      const { body } = await getApi().get(k.path, query);
      rows = body[k.field] || [];
      say(rows.length ? '' : `No ${k.label.toLowerCase()} match.`);
    } catch (err) {
      rows = [];
      if (err.code === 'forbidden') say(`You may not list ${k.label.toLowerCase()}.`, 'error');
      else say(err.status === 404 && err.code === 'not_found' ? `This daemon does not offer the ${k.label.toLowerCase()} list.` : errorText(err), 'error');
    }
    render();
  }

  function shown() {
    const q = search.value.trim().toLowerCase();
    return rows.filter((r) => !q || KINDS[kind].text(r).toLowerCase().includes(q));
  }

  function render() {
    const k = KINDS[kind];
    const list = shown();
    all.checked = false;
    table.replaceChildren(
      h('caption', { class: 'sr' }, `${k.label}: ${list.length} shown`),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, all), k.columns.map(([, label]) => h('th', { scope: 'col' }, label)))),
      h('tbody', null, list.map((r) => h('tr', { 'data-key': r[k.key], 'data-state': r.state || '' },
        h('td', null, h('input', { type: 'checkbox', class: 'pick', 'aria-label': `Select ${r[k.key]}`, onchange: renderBulk })),
        k.columns.map(([f], i) => h('td', { class: f === 'state' ? `state state-${r.state}` : null },
          i === 0 ? h('button', { type: 'button', class: 'link open', onclick: () => showTimeline(r) }, String(r[f] ?? '')) : /At$/.test(f) ? when(r[f]) : String(r[f] ?? '')))))));
    renderBulk();
  }

  function picked() {
    return [...table.querySelectorAll('tbody tr')].filter((tr) => tr.querySelector('input.pick').checked).map((tr) => tr.dataset.key);
  }

  function renderBulk() {
    const ids = picked();
    bulk.replaceChildren(h('span', { class: 'count' }, ids.length ? `${ids.length} selected` : 'Select rows for a bulk action'),
      ...KINDS[kind].bulk.map(([what, label, , cls]) => h('button', { type: 'button', class: `bulk-${what} ${cls}`, disabled: !ids.length, onclick: () => confirmBulk(what, label, ids) }, label)));
  }

  function confirmBulk(what, label, ids) {
    const k = KINDS[kind];
    const noun = ids.length === 1 ? k.label.toLowerCase().replace(/s$/, '') : k.label.toLowerCase();
    const ok = h('button', { type: 'button', class: 'confirm-ok primary' }, `${label} ${ids.length}`);
    const cancel = h('button', { type: 'button', class: 'confirm-cancel' }, 'Cancel');
    dialog.replaceChildren(h('h3', { id: 'bulk-title' }, `${label} ${ids.length} ${noun}?`),
      h('ul', { class: 'bulk-ids' }, ids.map((id) => h('li', null, id))),
      h('p', null, 'Each is sent on its own; the list says how each went.'), h('div', { class: 'row' }, cancel, ok));
    cancel.addEventListener('click', () => dialog.close());
    ok.addEventListener('click', () => { dialog.close(); runBulk(what, ids); });
    dialog.showModal();
    ok.focus();
  }

  async function runBulk(what, ids) {
    const k = KINDS[kind];
    const [, , done] = k.bulk.find(([w]) => w === what);
    let good = 0;
    const bad = [];
    for (const id of ids) {
      try {
        if (kind === 'sagas') await getApi().post(`/sagas/${encodeURIComponent(id)}/${what}`);
        else await getApi().post(`/approvals/${encodeURIComponent(id)}/decision`, { decision: what });
        good++;
      } catch (err) {
        bad.push(`${id}: ${explain(err)}`);
      }
    }
    await load();
    say(`${good} ${done}${bad.length ? `, ${bad.length} not: ${bad.join('; ')}` : '.'}`, bad.length ? 'error' : 'ok');
  }

  async function showTimeline(r) {
    const k = KINDS[kind];
    let item = r;
    try { item = (await getApi().get(`${k.path}/${encodeURIComponent(r[k.key])}`)).body || r; } catch { item = r; }
    const events = kind === 'sagas' ? sagaEvents(item) : approvalEvents(item);
    timeline.hidden = false;
    timeline.replaceChildren(h('h3', { id: 'timeline-h' }, `Timeline of ${r[k.key]}`),
      h('ol', { class: 'events' }, events.map((e) => h('li', { 'data-what': e.what },
        h('span', { class: 'when' }, e.at ? when(e.at) : ''), ' ', h('strong', null, e.what), ' ', e.detail))));
    timeline.querySelector('h3').setAttribute('tabindex', '-1');
    timeline.querySelector('h3').focus();
  }

  return { reload: load };
}

/** A saga's story: started, each step with its state, attempts and outcome, where it is now. */
function sagaEvents(s) {
  const ev = [{ at: s.createdAt, what: 'started', detail: `${s.definition || ''}` }];
  (s.steps || []).forEach((st, i) => {
    const outcome = st.errorCode ? `error ${st.errorCode}` : st.result !== undefined ? `result ${JSON.stringify(st.result)}` : '';
    const tries = typeof st.attempts === 'number' && st.attempts > 0 ? `, ${st.attempts} attempt${st.attempts === 1 ? '' : 's'}` : '';
    ev.push({ at: null, what: `step ${i + 1} ${st.name}`, detail: `${st.state}${tries}${outcome ? `, ${outcome}` : ''}` });
  });
  ev.push({ at: s.updatedAt, what: s.state, detail: s.wakeAt ? `until ${new Date(s.wakeAt).toLocaleString()}` : '' });
  return ev;
}

function approvalEvents(a) {
  const ev = [{ at: a.createdAt, what: 'asked', detail: `by ${a.principalId || '?'} for ${a.capability || '?'}${a.target ? ` on ${a.target}` : ''}` }];
  if (a.decidedAt || (a.state && a.state !== 'pending')) ev.push({ at: a.decidedAt, what: a.state, detail: a.decidedBy ? `by ${a.decidedBy}` : '' });
  else ev.push({ at: a.expiresAt, what: 'expires', detail: '' });
  return ev;
}
