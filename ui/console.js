// console.js — the operator console at /ui/: the inbox, pending approvals (approve / deny), sagas in
// manual review (steps, states, record an outcome, then resume or compensate) and a message lookup
// by id. It uses only the public HTTP API, through the same client as <missive-inbox>, and like it
// puts data on the page as text only.
import { MissiveApi, catalogue, explain, h } from './missive-inbox.js';
import { SignInError, completeSignIn, oidcSettings, signIn } from './console-oidc.js';
import { setupLists } from './console-lists.js';
import { consoleLocale, strings } from './console-strings.js';

const $ = (id) => document.getElementById(id);
const KEY = 'missive-console-identity';
const FIELDS = ['user', 'roles', 'permissions', 'tenant', 'token'];
const locale = consoleLocale();
const t = strings(locale);
const et = catalogue(locale).t; // the inbox's words for errors, in the same language

/** The page's fixed words (index.html marks them with data-t, data-t-placeholder, data-t-aria-label). */
function localizePage() {
  document.documentElement.lang = locale;
  document.title = t('title');
  for (const el of document.querySelectorAll('[data-t]')) el.textContent = t(el.dataset.t);
  for (const el of document.querySelectorAll('[data-t-placeholder]')) el.setAttribute('placeholder', t(el.dataset.tPlaceholder));
  for (const el of document.querySelectorAll('[data-t-aria-label]')) el.setAttribute('aria-label', t(el.dataset.tAriaLabel));
  $('inbox').setAttribute('locale', locale);
}
localizePage();

function loadIdentity() {
  const q = new URLSearchParams(location.search);
  let who = {};
  try { who = JSON.parse(sessionStorage.getItem(KEY) || '{}'); } catch { who = {}; }
  for (const f of FIELDS) if (q.has(f)) who[f] = q.get(f);
  return who;
}

let who = loadIdentity();
let api = new MissiveApi({});

function applyIdentity() {
  api = new MissiveApi({ baseUrl: '', token: who.token || null, user: who.token ? null : who.user || null,
    roles: who.roles || '', permissions: who.permissions || '', tenant: who.tenant || '' });
  const inbox = $('inbox');
  for (const f of ['user', 'roles', 'permissions', 'tenant']) {
    if (who[f] && !who.token) inbox.setAttribute(f, who[f]); else inbox.removeAttribute(f);
  }
  if (who.tenant) inbox.setAttribute('tenant', who.tenant);
  inbox.token = who.token || null;
  for (const f of FIELDS) $(`who-${f}`).value = who[f] || '';
  loadApprovals();
  loadSagas();
  if (who.user || who.token) lists.reload();
}

const lists = setupLists($('lists'), () => api);

$('who').addEventListener('submit', (e) => {
  e.preventDefault();
  who = {};
  for (const f of FIELDS) if ($(`who-${f}`).value.trim()) who[f] = $(`who-${f}`).value.trim();
  sessionStorage.setItem(KEY, JSON.stringify(who));
  applyIdentity();
});

function say(id, text, kind = '') {
  const el = $(id);
  el.textContent = text || '';
  el.className = `status ${kind}`;
}

function errorText(err) { return `${explain(err, et)} (${err.message})`; }

function when(ms) { return ms ? new Date(ms).toLocaleString(locale) : '—'; }

/** Replaces ul's cards with one per item, keeping a card whose item has not changed (so a form
 * being filled in survives the periodic refresh). */
function reconcile(ul, items, key, version, build) {
  const old = new Map([...ul.children].map((li) => [li.dataset.key, li]));
  ul.replaceChildren(...items.map((it) => {
    const li = old.get(key(it));
    if (li && li.dataset.version === version(it)) return li;
    const fresh = build(it);
    fresh.dataset.key = key(it);
    fresh.dataset.version = version(it);
    return fresh;
  }));
}

function meta(pairs) {
  return h('dl', { class: 'meta' }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]));
}

// ---- approvals ----------------------------------------------------------------------------------

async function loadApprovals() {
  if (!who.user && !who.token) { say('approvals-status', t('sayWho')); $('approvals').replaceChildren(); return; }
  try {
    const { body } = await api.get('/approvals', { state: 'pending', limit: 50 });
    const list = body.approvals || [];
    reconcile($('approvals'), list, (a) => a.approvalId, (a) => a.state, approvalCard);
    say('approvals-status', list.length ? '' : t('noApprovals'));
  } catch (err) {
    $('approvals').replaceChildren();
    say('approvals-status', err.status === 404 && err.code === 'not_found' ? t('noApprovalList') : errorText(err), 'error');
  }
}

function approvalCard(a) {
  const out = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
  const decide = async (decision, buttons) => {
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const { body } = await api.post(`/approvals/${encodeURIComponent(a.approvalId)}/decision`, { decision });
      out.textContent = t(body.state === 'approved' ? 'decidedApproved' : 'decidedDenied');
      out.className = 'status ok';
      setTimeout(loadApprovals, 1500);
    } catch (err) {
      out.textContent = errorText(err);
      out.className = 'status error';
      buttons.forEach((b) => { b.disabled = false; });
    }
  };
  const approve = h('button', { type: 'button', class: 'primary approve' }, t('b_approved'));
  const deny = h('button', { type: 'button', class: 'danger deny' }, t('b_denied'));
  approve.addEventListener('click', () => decide('approved', [approve, deny]));
  deny.addEventListener('click', () => decide('denied', [approve, deny]));
  const target = h('button', { type: 'button', class: 'link' }, t('showMessage'));
  target.addEventListener('click', () => { $('search-id').value = a.target || ''; findMessage(); });
  return h('li', { class: 'card approval', 'data-approval-id': a.approvalId },
    h('h3', {}, a.capability || t('one_approvals')),
    meta([[t('m_askedBy'), a.principalId], [t('m_message'), a.target], [t('m_created'), when(a.createdAt)], [t('m_expires'), when(a.expiresAt)]]),
    h('div', { class: 'row' }, approve, deny, a.target ? target : null), out);
}

$('approvals-refresh').addEventListener('click', loadApprovals);

// ---- sagas --------------------------------------------------------------------------------------

const touched = new Set(); // sagas the operator acted on: their cards stay until Refresh

async function loadSagas() {
  if (!who.user && !who.token) { say('sagas-status', t('sayWho')); $('sagas').replaceChildren(); return; }
  try {
    const { body } = await api.get('/sagas', { state: 'manual-review', limit: 50 });
    const list = body.sagas || [];
    const full = await Promise.all(list.map((s) => (s.steps ? s : api.get(`/sagas/${encodeURIComponent(s.sagaId)}`).then((r) => r.body).catch(() => s))));
    const keep = [...$('sagas').children].filter((li) => touched.has(li.dataset.key) && !full.some((s) => s.sagaId === li.dataset.key));
    reconcile($('sagas'), full, (s) => s.sagaId, (s) => `${s.state}/${s.updatedAt}`, sagaCard);
    $('sagas').append(...keep);
    say('sagas-status', list.length || keep.length ? '' : t('noSagas'));
  } catch (err) {
    $('sagas').replaceChildren();
    if (err.code === 'forbidden') say('sagas-status', t('onlyAdmins'), '');
    else say('sagas-status', err.status === 404 && err.code === 'not_found' ? t('noSagaList') : errorText(err), 'error');
  }
}

function stepRow(s) {
  return h('tr', { 'data-step': s.name },
    h('td', {}, s.name), h('td', { class: `state state-${s.state}` }, s.state), h('td', {}, String(s.attempts ?? '')),
    h('td', {}, s.errorCode || (s.result !== undefined ? JSON.stringify(s.result) : '')));
}

/** The resolve form for a step whose outcome the engine cannot know, or null. */
function resolveForm(saga, s, card) {
  let kind;
  let outcomes;
  let effectId;
  if (s.state === 'executing' || s.state === 'ambiguous') {
    kind = 'execution'; outcomes = ['committed', 'not-committed']; effectId = s.effectId;
  } else if (s.state === 'compensating') {
    kind = 'compensation'; outcomes = ['compensated', 'not-compensated']; effectId = s.compensationEffectId;
  } else {
    return null;
  }
  const outcome = h('select', { class: 'outcome', 'aria-label': t('outcomeOf', { name: s.name }) }, outcomes.map((o) => h('option', { value: o }, o)));
  const result = h('textarea', { class: 'result', rows: 1, placeholder: '{"receipt": "…"}', 'aria-label': t('resultOf', { name: s.name }) });
  const code = h('input', { type: 'text', class: 'error-code', placeholder: 'not_committed', 'aria-label': t('errorCodeFor', { name: s.name }) });
  const record = h('button', { type: 'button', class: 'primary record' }, t('recordOutcome'));
  record.addEventListener('click', async () => {
    const body = { kind, step: s.name, effectId, outcome: outcome.value };
    if (result.value.trim()) {
      try { body.result = JSON.parse(result.value); } catch { card.say(t('resultJson'), 'error'); result.focus(); return; }
    }
    if (code.value.trim()) body.errorCode = code.value.trim();
    record.disabled = true;
    try {
      const { body: saga2 } = await api.post(`/sagas/${encodeURIComponent(saga.sagaId)}/resolve`, body);
      card.update(saga2, t('recorded', { name: s.name, outcome: outcome.value }));
    } catch (err) {
      card.say(errorText(err), 'error');
      record.disabled = false;
    }
  });
  return h('div', { class: 'resolve', 'data-step': s.name },
    h('span', {}, `${s.name}: ${t(`r_${kind}`)}`), h('label', {}, t('outcomeLabel'), outcome),
    kind === 'execution' ? h('label', {}, t('resultLabel'), result) : null,
    h('label', {}, t('errorCodeLabel'), code), record);
}

function sagaCard(saga) {
  const li = h('li', { class: 'card saga', 'data-saga-id': saga.sagaId });
  const out = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
  const card = {
    say(text, kind = '') { out.textContent = text; out.className = `status ${kind}`; touched.add(saga.sagaId); },
    update(s, text) { render(s); card.say(text, 'ok'); },
  };
  const run = async (what, button) => {
    button.disabled = true;
    try {
      const { body } = await api.post(`/sagas/${encodeURIComponent(saga.sagaId)}/${what}`);
      render(body);
      card.say(t(what === 'resume' ? 'resumedNow' : 'compensatedNow', { state: body.state }), 'ok');
    } catch (err) {
      card.say(errorText(err), 'error');
      button.disabled = false;
    }
  };
  function render(s) {
    saga = s;
    const resume = h('button', { type: 'button', class: 'resume' }, t('b_resume'));
    const compensate = h('button', { type: 'button', class: 'danger compensate' }, t('b_compensate'));
    resume.addEventListener('click', () => run('resume', resume));
    compensate.addEventListener('click', () => run('compensate', compensate));
    const steps = s.steps || [];
    li.dataset.state = s.state || '';
    li.replaceChildren(...[ // replaceChildren() writes null as the text "null": left out
      h('h3', {}, s.sagaId),
      meta([[t('m_definition'), s.definition], [t('m_state'), s.state], [t('m_updated'), when(s.updatedAt)]]),
      h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, t('h_step')), h('th', {}, t('h_state')), h('th', {}, t('h_attempts')), h('th', {}, t('h_result')))),
        h('tbody', {}, steps.map(stepRow))),
      ...steps.map((st) => resolveForm(s, st, card)).filter(Boolean),
      s.state === 'completed' || s.state === 'compensated' ? null : h('div', { class: 'row' }, resume, compensate),
      out].filter((c) => c !== null));
  }
  render(saga);
  return li;
}

$('sagas-refresh').addEventListener('click', () => { touched.clear(); loadSagas(); });

// ---- message lookup -----------------------------------------------------------------------------

async function findMessage() {
  const id = $('search-id').value.trim();
  $('search-result').replaceChildren();
  if (!/^[0-9a-f]{24}$/.test(id)) { say('search-status', t('idFormat'), 'error'); return; }
  say('search-status', t('looking'));
  try {
    const m = await api.message(id);
    const c = m.receiverContent || {};
    say('search-status', '');
    $('search-result').replaceChildren(h('div', { class: 'card message', 'data-id': m.id },
      h('h3', {}, c.title || m.templateCd),
      meta([[t('m_template'), m.templateCd], [t('m_state'), m.actionState], [t('m_from'), m.fromUser], [t('m_to'), m.toUser || (m.toRoles || []).join(', ')],
        [t('m_action'), m.actionCd], [t('m_attempt'), m.actionAttemptId], [t('m_created'), when(m.createdAt)],
        [t('m_archived'), m.archivedAt ? t('archivedAtBy', { when: when(m.archivedAt), who: m.archivedBy || t('unknown') }) : ''],
        [t('m_lastFailure'), m.lastFailure ? `${m.lastFailure.code}: ${m.lastFailure.message}` : '']]),
      c.short ? h('p', {}, c.short) : null,
      h('h4', {}, t('timeline')),
      h('ol', { class: 'events message-events' }, messageEvents(m).map((e) => h('li', { 'data-what': e.what },
        h('span', { class: 'when' }, e.at ? when(e.at) : ''), ' ', h('strong', {}, t(`me_${e.what}`)), ' ', e.detail))),
      h('details', {}, h('summary', {}, t('json')), h('pre', {}, JSON.stringify(m, null, 2)))));
  } catch (err) {
    say('search-status', err.code === 'message_not_found' ? t('noMessage') : errorText(err), 'error');
  }
}

/** A message's story from its record, oldest first: who created it, its action, its end. */
function messageEvents(m) {
  const q = t('unknown');
  const roles = (m.toRoles || []).join(', ');
  const attempt = (n) => (n ? ` (${t('attempts', { n })})` : '');
  const ev = [{ at: m.createdAt, what: 'created', detail: t('createdFor', { who: m.fromUser || q, to: m.toUser || roles || q }) }];
  if (m.sendAt) ev.push({ at: m.sendAt, what: 'sent', detail: t('scheduled') });
  if (m.escalatedAt) ev.push({ at: m.escalatedAt, what: 'escalated', detail: t('escalatedTo', { roles }) });
  const v = m.viewer || {};
  if (v.seenAt) ev.push({ at: v.seenAt, what: 'seen', detail: t('byYou') });
  if (v.readAt) ev.push({ at: v.readAt, what: 'read', detail: t('byYou') });
  if (m.actionState === 'processing') ev.push({ at: m.updatedAt, what: 'processing', detail: t('withAttempt', { what: m.actionCd || '', n: m.actionAttemptId || q }) });
  if (m.lastFailure) ev.push({ at: m.lastFailure.at, what: 'failed', detail: t('withAttempt', { what: `${m.lastFailure.code}: ${m.lastFailure.message}`, n: m.lastFailure.actionAttemptId || m.actionAttemptId || q }) });
  if (m.archivedAt) ev.push({ at: m.archivedAt, what: 'archived', detail: `${m.actionCd ? t('archivedWith', { who: m.archivedBy || q, action: m.actionCd }) : t('by', { who: m.archivedBy || q })}${attempt(m.actionAttemptId)}` });
  return ev.sort((a, b) => (a.at || 0) - (b.at || 0));
}

$('search').addEventListener('submit', (e) => { e.preventDefault(); findMessage(); });

// ---- sign-in with the identity provider ("ui.oidc") ------------------------------------------------

function showSignedIn() {
  const signedIn = !!(who.token && who.name);
  $('signed-in').hidden = !signedIn;
  $('signin').hidden = signedIn || !oidc;
  $('signed-in-name').textContent = signedIn ? who.name : '';
}

let oidc = null;

async function start() {
  oidc = await oidcSettings();
  if (oidc) {
    try {
      const s = await completeSignIn(oidc);
      if (s) {
        who = { token: s.token, name: s.name };
        sessionStorage.setItem(KEY, JSON.stringify(who));
        say('signin-status', '');
      }
    } catch (err) {
      say('signin-status', err instanceof SignInError ? t(err.key) : t('signInFailed'), 'error');
    }
  }
  showSignedIn();
  applyIdentity();
}

$('signin').addEventListener('click', async () => {
  $('signin').disabled = true;
  say('signin-status', t('goingToSignIn'));
  try {
    await signIn(oidc);
  } catch (err) {
    say('signin-status', err instanceof SignInError ? t(err.key) : t('signInFailed'), 'error');
    $('signin').disabled = false;
  }
});

$('signout').addEventListener('click', () => {
  who = {};
  sessionStorage.removeItem(KEY);
  showSignedIn();
  applyIdentity();
  say('signin-status', t('signedOut'));
});

start();
setInterval(() => { if (document.visibilityState === 'visible') { loadApprovals(); loadSagas(); } }, 4000);
