// inbox.test.mjs — the web inbox and the console in a real browser (Debian's Chromium, driven by
// playwright-core) against a live missived on a free port, with a small webhook server for action
// handlers and saga steps. Run by tests/browser/browser_test.sh from `make test`; prints one line per test and
// ends with "N passed, M failed". A test that needs routes this daemon does not have (the inbox
// state and stream of issue 15, the approval and saga lists of the operations work) prints
// "SKIP browser: …" and counts neither way.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { register } from './person.test.mjs';
import { register as registerConsole } from './console.test.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const build = path.resolve(repo, process.env.BUILD || 'build');
const daemonBin = path.join(build, 'missived');
const chromiumBin = process.env.CHROMIUM || '/usr/bin/chromium';
// Each run writes its pictures under the build directory, so `make test` leaves the tree clean;
// `make screenshots` runs the suite with MISSIVE_SCREENSHOT_DIR=docs/img to refresh the docs' copies.
const imgDir = process.env.MISSIVE_SCREENSHOT_DIR
  ? path.resolve(process.env.MISSIVE_SCREENSHOT_DIR)
  : path.join(repo, process.env.BUILD || 'build', 'screenshots');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'missive-browser-'));

// ---- fixtures: templates, a saga, a webhook server -----------------------------------------------

const hooks = { calls: [] };

function startHooks() {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (req.method === 'GET' && req.url.startsWith('/host.html')) {
        // an application page on another origin that embeds the inbox from the daemon
        const d = daemon.base;
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><html lang="en"><meta charset="utf-8"><title>host</title>
<script type="module" src="${d}/ui/missive-inbox.js"></script>
<h1>Another origin</h1><missive-inbox base-url="${d}" user="otto"></missive-inbox></html>`);
        return;
      }
      hooks.calls.push({ path: req.url, body });
      const reply = (status, obj, delay = 0) => setTimeout(() => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(obj));
      }, delay);
      if (req.url === '/slow') reply(200, { shipped: true }, 1500);
      else if (req.url === '/reserve') reply(200, { reserved: true });
      else if (req.url === '/charge') reply(500, { error: 'gateway timeout' });
      else reply(200, { ok: true });
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function writeFixtures(hookPort) {
  const t = path.join(tmp, 'templates');
  const s = path.join(tmp, 'sagas');
  fs.mkdirSync(t);
  fs.mkdirSync(s);
  const hook = (p) => `http://127.0.0.1:${hookPort}${p}`;
  const tpl = (o) => fs.writeFileSync(path.join(t, `${o.templateCd}.json`), JSON.stringify(o, null, 2));
  const content = {
    senderContent: { title: 'You asked {{host}} about {{listing}}', short: '', long: '' },
    receiverContent: { title: '{{guest}} wants {{listing}}', short: '{{note}}', long: '{{long}}' },
  };
  tpl({
    templateCd: 'booking', type: 'request', label: 'Booking request', locales: { de: { label: 'Buchungsanfrage' } }, ...content, uiTemplate: 'booking-card',
    prepare: { toUser: '{{host}}', toRoles: [] },
    actions: [
      { actionCd: 'accept', name: 'Accept', variant: 'primary', receiver: true, isDefault: true,
        confirmation: { title: 'Accept {{guest}}?', message: '{{guest}} is told right away.' },
        handler: null, senderNotification: { title: 'Your booking of {{listing}} was accepted' } },
      { actionCd: 'decline', name: 'Decline', variant: 'danger', receiver: true,
        confirmation: { title: 'Decline {{guest}}?', message: 'Say why.', notesLabel: 'Reason', requireNotes: true },
        handler: null, senderNotification: 'Your booking of {{listing}} was declined' },
    ],
  });
  tpl({
    templateCd: 'shared-task', type: 'request', ...content, uiTemplate: 'task',
    prepare: { toRoles: ['hosts'] },
    actions: [{ actionCd: 'ship', name: 'Ship it', variant: 'primary', receiver: true,
      handler: { webhook: hook('/slow') }, senderNotification: 'Shipped {{listing}}' }],
  });
  tpl({
    templateCd: 'refund', type: 'request', label: 'Refund request', ...content, uiTemplate: 'refund',
    prepare: { toUser: '{{host}}' },
    actions: [{ actionCd: 'refund', name: 'Refund {{listing}}', variant: 'success', receiver: true,
      approval: { capability: 'refunds.large' }, handler: null, senderNotification: 'Refunded {{listing}}' }],
  });
  tpl({
    templateCd: 'order', type: 'request', ...content, uiTemplate: 'order',
    prepare: { toUser: '{{host}}' },
    actions: [{ actionCd: 'charge', name: 'Charge', variant: 'primary', receiver: true,
      handler: { saga: 'pay' }, resultTemplate: 'Charged. Receipt {{charge.receipt}}', senderNotification: 'Charged for {{listing}}' }],
  });
  fs.writeFileSync(path.join(s, 'pay.json'), JSON.stringify({
    name: 'pay', capability: 'orders.pay', retry: { maxAttempts: 2, backoffMs: { initial: 10, max: 100 } },
    steps: [
      { name: 'reserve', run: { webhook: hook('/reserve') }, compensate: { webhook: hook('/release') } },
      { name: 'charge', run: { webhook: hook('/charge') }, compensate: { webhook: hook('/refund') } },
    ],
  }));
}

// ---- the daemon ---------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Daemon {
  constructor(name, config) {
    this.name = name;
    this.configPath = path.join(tmp, `${name}.json`);
    this.port = null;
    this.config = config;
  }

  async start(port) {
    this.port = port || this.port || await freePort();
    fs.writeFileSync(this.configPath, JSON.stringify({ ...this.config, listen: `127.0.0.1:${this.port}` }, null, 2));
    this.base = `http://127.0.0.1:${this.port}`;
    this.log = fs.openSync(path.join(tmp, `${this.name}.log`), 'a');
    this.proc = spawn(daemonBin, ['--config', this.configPath], {
      stdio: ['ignore', this.log, this.log],
      env: { ...process.env, MISSIVE_TEST_APPROVAL_SECRET: 'x'.repeat(48) },
    });
    this.exited = new Promise((r) => this.proc.on('exit', r));
    for (let i = 0; i < 200; i++) {
      try {
        const r = await fetch(`${this.base}/healthz`);
        if (r.ok) return this;
      } catch { /* not yet */ }
      await sleep(50);
    }
    throw new Error(`${this.name} did not start: ${fs.readFileSync(path.join(tmp, `${this.name}.log`), 'utf8').slice(-2000)}`);
  }

  /** Stops the daemon; resolves to its exit code (null when killed by a signal). */
  async kill(signal = 'SIGTERM') {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal);
    return this.exited;
  }

  logText() { return fs.readFileSync(path.join(tmp, `${this.name}.log`), 'utf8'); }
}

let hookOrigin = null;

function daemonConfig(extra = {}) {
  return {
    ...(has.cors ? { cors: { allowedOrigins: [hookOrigin] } } : {}),
    store: `sqlite:${path.join(tmp, 'missive.db')}`,
    templates: path.join(tmp, 'templates'),
    sagas: path.join(tmp, 'sagas'),
    auth: { mode: 'headers' },
    adminPermissionKey: 'is.admin',
    leases: { actionMs: 5000 },
    webhooks: { connectTimeoutMs: 1000, timeoutMs: 3000 },
    approvals: { secretEnv: 'MISSIVE_TEST_APPROVAL_SECRET', ttlMs: 600000 },
    shutdownTimeoutMs: 2000,
    // the preferences panel offers email and sms: the daemon refuses preferences for a channel it lacks
    channels: { sms: { webhook: `${hookOrigin}/sms` } },
    ...extra,
  };
}

let daemon;

/** One API call from the test (not the browser), in headers mode. */
async function api(method, p, { user = 'ana', roles, permissions, body } = {}) {
  const headers = { 'X-User-Id': user };
  if (roles) headers['X-User-Roles'] = roles;
  if (permissions) headers['X-User-Permissions'] = permissions;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(daemon.base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  return { status: r.status, headers: r.headers, body: json, text };
}

/** Creates a message with curl, as the tests promise; returns the created message. */
function curlCreate(templateCd, payload, user = 'ana') {
  const out = execFileSync('curl', ['-s', '-X', 'POST', `${daemon.base}/messages/new/${templateCd}`,
    '-H', `X-User-Id: ${user}`, '-H', 'Content-Type: application/json', '-d', JSON.stringify(payload)], { encoding: 'utf8' });
  const body = JSON.parse(out);
  if (!body.messages) throw new Error(`create failed: ${out}`);
  return body.messages[0];
}

let seq = 0;
function booking(host, extra = {}) {
  seq++;
  return curlCreate('booking', { host, guest: `Guest ${seq}`, listing: `Flat ${seq}`, note: `Note ${seq}`, long: `Long text ${seq}`, ...extra });
}

// ---- the browser --------------------------------------------------------------------------------

let browser;
const cspViolations = [];
const pageErrors = [];

async function newPage({ width = 1000, height = 760, scheme = 'light' } = {}) {
  const ctx = await browser.newContext({ viewport: { width, height }, colorScheme: scheme, reducedMotion: 'reduce' });
  const page = await ctx.newPage();
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text()); });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('dialog', (d) => { pageErrors.push(`unexpected dialog: ${d.message()}`); d.dismiss(); });
  return page;
}

/** Opens the example host page for user; resolves once the first page of the inbox is in. */
async function openInbox(user, { roles, permissions, pageSize, base, locale, mode, ...view } = {}) {
  const page = await newPage(view);
  const q = new URLSearchParams({ user });
  if (locale) q.set('locale', locale);
  if (mode) q.set('mode', mode);
  if (roles) q.set('roles', roles);
  if (permissions) q.set('permissions', permissions);
  await page.goto(`${base || daemon.base}/ui/example.html?${q}`);
  if (pageSize) await page.evaluate((n) => { const el = document.querySelector('missive-inbox'); el.setAttribute('page-size', String(n)); el.refresh(); }, pageSize);
  await page.waitForSelector('missive-inbox[data-ready]');
  return page;
}

async function openConsole(who, view = {}) {
  const page = await newPage(view);
  await page.goto(`${daemon.base}/ui/?${new URLSearchParams(who)}`);
  await page.waitForSelector('missive-inbox[data-ready]');
  return page;
}

const item = (page, id) => page.locator(`missive-inbox li.item[data-id="${id}"]`);
const badge = (page) => page.locator('missive-inbox .badge');

async function waitFor(what, fn, timeout = 10000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

function assert(cond, what) { if (!cond) throw new Error(`assertion failed: ${what}`); }
function eq(a, b, what) { if (a !== b) throw new Error(`${what}: ${JSON.stringify(a)} !== ${JSON.stringify(b)}`); }

// ---- capabilities of the daemon under test --------------------------------------------------------

const has = {};
async function probe() {
  const c = await api('GET', '/messages/count', { user: 'probe' });
  const t = await api('POST', '/stream-tickets', { user: 'probe' });
  has.state = c.status === 200 && typeof c.body.unread === 'number';
  has.stream = t.status === 201;
  const a = await api('GET', '/approvals?state=pending', { user: 'probe', permissions: 'is.admin' });
  const s = await api('GET', '/sagas?state=manual-review', { user: 'probe', permissions: 'is.admin' });
  has.ops = a.status === 200 && s.status === 200;
  const z = await api('POST', '/messages/000000000000000000000000/snooze', { user: 'probe', body: { until: Date.now() + 3600000 } });
  has.snooze = !(z.status === 404 && z.body && z.body.error && z.body.error.code === 'not_found');
  const p = await api('GET', '/preferences', { user: 'probe' });
  has.preferences = p.status === 200;
}
const NEEDS = { state: 'the viewer state routes and counts (issue 15)', stream: 'POST /stream-tickets and GET /messages/stream (issue 15)',
  ops: 'GET /approvals and GET /sagas lists (issue 18)', cors: 'the "cors" config key (issue 15)' };

// ---- tests ----------------------------------------------------------------------------------------

const tests = [];
const test = (name, needs, fn) => tests.push({ name, needs, fn });

test('ui_files_are_served_with_their_types_cache_control_and_a_csp_without_inline_script', [], async () => {
  const want = { '/ui/': 'text/html', '/ui/missive-inbox.js': 'text/javascript', '/ui/console.js': 'text/javascript',
    '/ui/console.css': 'text/css', '/ui/example.html': 'text/html' };
  for (const [p, type] of Object.entries(want)) {
    const r = await fetch(daemon.base + p);
    eq(r.status, 200, `${p} status`);
    assert(r.headers.get('content-type').startsWith(type), `${p} is ${type}`);
    eq(r.headers.get('cache-control'), 'no-cache', `${p} Cache-Control`);
    const csp = r.headers.get('content-security-policy');
    assert(/script-src 'self'/.test(csp) && !/unsafe-inline|unsafe-eval/.test(csp), `${p} CSP forbids inline script: ${csp}`);
    eq(r.headers.get('x-content-type-options'), 'nosniff', `${p} nosniff`);
    const etag = r.headers.get('etag');
    const again = await fetch(daemon.base + p, { headers: { 'If-None-Match': etag } });
    eq(again.status, 304, `${p} revalidates to 304`);
  }
  const html = await (await fetch(`${daemon.base}/ui/`)).text();
  assert(!/<script(?![^>]*\bsrc=)[^>]*>/i.test(html), 'the console page has no inline script');
  const bare = await fetch(`${daemon.base}/ui`, { redirect: 'manual' });
  eq(bare.status, 308, '/ui redirects');
  const missing = await api('GET', '/ui/nothing.js');
  eq(missing.status, 404, 'unknown file status');
  eq(missing.body.error.code, 'not_found', 'unknown file code');
});

test('ui_disabled_in_the_config_answers_404_not_found', [], async () => {
  const off = new Daemon('ui-off', daemonConfig({ store: `sqlite:${path.join(tmp, 'off.db')}`, ui: { enabled: false } }));
  await off.start();
  try {
    for (const p of ['/ui/', '/ui/missive-inbox.js', '/ui']) {
      const r = await fetch(off.base + p, { redirect: 'manual' });
      eq(r.status, 404, `${p} when disabled`);
      eq((await r.json()).error.code, 'not_found', `${p} code`);
    }
    eq((await fetch(`${off.base}/healthz`)).status, 200, 'the API still answers');
  } finally {
    await off.kill();
  }
});

test('xss_payloads_in_message_content_render_as_text', [], async () => {
  const payload = {
    guest: '<script>window.__xss = 1</script>',
    note: '<img src=x onerror="window.__xss = 2">',
    long: 'javascript:window.__xss = 3 <a href="javascript:window.__xss=4">click me</a> <iframe src="javascript:alert(5)"></iframe>',
    listing: '<svg onload="window.__xss = 6">',
  };
  const m = booking('xavier', payload);
  const page = await openInbox('xavier');
  const li = item(page, m.id);
  await li.locator('.summary').click();
  await li.locator('.long').waitFor();
  eq(await li.locator('.title').evaluate((e) => e.firstChild.textContent), `${payload.guest} wants ${payload.listing}`, 'title is the text');
  eq(await li.locator('.short').textContent(), payload.note, 'short is the text');
  eq(await li.locator('.long').textContent(), payload.long, 'long is the text');
  // press Accept: the confirmation dialog shows the payload as text too
  await li.locator('button[data-action="accept"]').click();
  const dialog = page.locator('missive-inbox dialog[open]');
  eq(await dialog.locator('h3').textContent(), `Accept ${payload.guest}?`, 'dialog title is the text');
  await dialog.locator('.confirm-cancel').click();
  const counts = await page.locator('missive-inbox').evaluate((el) => {
    const r = el.shadowRoot;
    return { img: r.querySelectorAll('img').length, script: r.querySelectorAll('script').length,
      a: r.querySelectorAll('a').length, iframe: r.querySelectorAll('iframe').length, svg: r.querySelectorAll('svg').length };
  });
  eq(JSON.stringify(counts), JSON.stringify({ img: 0, script: 0, a: 0, iframe: 0, svg: 0 }), 'no element came from message data');
  await sleep(300);
  eq(await page.evaluate(() => window.__xss), undefined, 'no payload ran');
  await page.context().close();
});

test('infinite_scroll_walks_the_cursor_to_the_last_page_without_duplicates', [], async () => {
  const ids = [];
  for (let i = 0; i < 27; i++) ids.push(booking('paula').id);
  const page = await openInbox('paula', { pageSize: 5, height: 500 });
  await waitFor('every page', async () => {
    await page.locator('missive-inbox .sentinel').scrollIntoViewIfNeeded();
    return (await page.locator('missive-inbox li.item').count()) === ids.length;
  }, 20000);
  const shown = await page.locator('missive-inbox li.item').evaluateAll((els) => els.map((e) => e.dataset.id));
  eq(new Set(shown).size, ids.length, 'no duplicates');
  eq(JSON.stringify(shown), JSON.stringify([...ids].reverse()), 'newest first, in order');
  assert(await page.locator('missive-inbox .more').isHidden(), 'no "Load more" after the last page');
  await page.context().close();
});

test('keyboard_alone_opens_a_message_presses_an_action_and_cancels_the_dialog', [], async () => {
  const m = booking('kim');
  const page = await openInbox('kim');
  await page.locator('missive-inbox li.item .summary').first().focus();
  await page.keyboard.press('Enter');
  const li = item(page, m.id);
  await li.locator('button[data-action="accept"]').waitFor();
  eq(await li.locator('.summary').getAttribute('aria-expanded'), 'true', 'expanded state is announced');
  await li.locator('button[data-action="decline"]').focus();
  await page.keyboard.press('Enter');
  const dialog = page.locator('missive-inbox dialog[open]');
  await dialog.waitFor();
  eq(await page.locator('missive-inbox').evaluate((el) => el.shadowRoot.activeElement.className), 'notes', 'focus moves into the dialog');
  // Reason is required: confirming empty keeps the dialog open with a message
  await dialog.locator('.confirm-ok').focus();
  await page.keyboard.press('Enter');
  assert(/required/.test(await dialog.locator('[role=alert]').textContent()), 'required notes are asked for');
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'detached' }).catch(() => {});
  assert(!(await page.locator('missive-inbox dialog[open]').count()), 'Escape closes the dialog');
  eq((await api('GET', `/messages/${m.id}`, { user: 'kim' })).body.actionState, 'active', 'nothing ran');
  await page.context().close();
});

test('the_confirmation_dialog_shows_only_its_text_with_and_without_a_notes_field', [], async () => {
  const m = booking('dora');
  const guest = `Guest ${seq}`;
  const page = await openInbox('dora');
  const li = item(page, m.id);
  await li.locator('.summary').click();
  const dialog = page.locator('missive-inbox dialog[open]');
  const seen = async () => (await dialog.evaluate((d) => d.innerText)).replace(/\s+/g, ' ').trim();
  // Accept has a title and a message but no notes field
  await li.locator('button[data-action="accept"]').click();
  await dialog.waitFor();
  const accept = await seen();
  eq(accept, `Accept ${guest}? ${guest} is told right away. Cancel Accept`, 'the dialog without notes reads as written');
  assert(!/null|undefined/.test(accept), `no "null" in the dialog: ${accept}`);
  await dialog.locator('.confirm-cancel').click();
  await dialog.waitFor({ state: 'detached' }).catch(() => {});
  // Decline asks for a reason: its label is shown, the empty textarea adds no text
  await li.locator('button[data-action="decline"]').click();
  await dialog.waitFor();
  const decline = await seen();
  eq(decline, `Decline ${guest}? Say why. Reason Cancel Decline`, 'the dialog with notes reads as written');
  assert(!/null|undefined/.test(decline), `no "null" in the dialog: ${decline}`);
  await dialog.locator('.confirm-cancel').click();
  eq((await api('GET', `/messages/${m.id}`, { user: 'dora' })).body.actionState, 'active', 'nothing ran');
  await page.context().close();
});

test('two_contexts_pressing_at_once_exactly_one_wins_and_the_other_sees_the_409_explained', [], async () => {
  // The two contexts talk to two daemons on the same store, so their presses reach the store at the
  // same time whatever the I/O threads of one daemon do; the store's conditional claim decides.
  const second = new Daemon('second', daemonConfig());
  await second.start();
  const m = curlCreate('shared-task', { guest: 'Team', listing: 'crate 7', note: 'ship it', long: '' });
  // one side is the popover (English), the other the inline inbox in German: each reads its own words
  const [p1, p2] = await Promise.all([openInbox('bob', { roles: 'hosts', mode: 'popover' }), openInbox('carol', { roles: 'hosts', base: second.base, locale: 'de' })]);
  await p1.locator('missive-inbox button.bell').click();
  for (const p of [p1, p2]) {
    await item(p, m.id).locator('.summary').click();
    await item(p, m.id).locator('button[data-action="ship"]').waitFor();
  }
  await Promise.all([p1, p2].map((p) => item(p, m.id).locator('button[data-action="ship"]').click()));
  const outcomes = await Promise.all([p1, p2].map((p, i) => waitFor('an outcome', async () => {
    const o = item(p, m.id).locator('.outcome');
    const cls = (await o.count()) ? await o.getAttribute('class') : '';
    return /\b(ok|error)\b/.test(cls) ? { cls, text: await o.textContent(), locale: i ? 'de' : 'en' } : null;
  })));
  const wins = outcomes.filter((o) => /\bok\b/.test(o.cls));
  const losses = outcomes.filter((o) => /\berror\b/.test(o.cls));
  eq(wins.length, 1, 'exactly one press wins');
  eq(losses.length, 1, 'the other loses');
  eq(wins[0].text, wins[0].locale === 'de' ? 'Erledigt.' : 'Done.', 'the winner reads a plain Done');
  eq(losses[0].text, losses[0].locale === 'de'
    ? 'Jemand anderes bearbeitet diese Nachricht gerade, daher wurde Ihre Aktion nicht ausgeführt. Die Liste zeigt, was passiert ist.'
    : 'Someone else is acting on this message right now, so your press was not run. The list shows what happened.',
  `the 409 is explained in words (${losses[0].locale})`);
  for (const p of [p1, p2]) await person.looks(p, 'the 409 race');
  eq(hooks.calls.filter((c) => c.path === '/slow').length, 1, 'the handler ran once');
  await waitFor('archived', async () => (await api('GET', `/messages/${m.id}`, { user: 'bob', roles: 'hosts' })).body.actionState === 'archived');
  await p1.context().close();
  await p2.context().close();
  await second.kill();
});

test('a_message_created_by_curl_appears_without_reload', ['state', 'stream'], async () => {
  const page = await openInbox('liv');
  await page.waitForSelector('missive-inbox[data-live="stream"]');
  const before = Number(await badge(page).getAttribute('data-count'));
  const m = booking('liv', { guest: 'Live Guest' });
  await item(page, m.id).waitFor({ timeout: 5000 });
  assert(/Live Guest wants/.test(await item(page, m.id).locator('.title').textContent()), 'the new message shows its title');
  await waitFor('the badge to count it', async () => Number(await badge(page).getAttribute('data-count')) === before + 1, 5000);
  await page.context().close();
});

test('a_message_too_large_for_an_event_appears_without_reload', ['state', 'stream'], async () => {
  const page = await openInbox('big');
  await page.waitForSelector('missive-inbox[data-live="stream"]');
  const m = booking('big', { guest: 'Big Guest', long: 'x'.repeat(20000) }); // its event: a stub
  await item(page, m.id).waitFor({ timeout: 5000 });
  assert(/Big Guest wants/.test(await item(page, m.id).locator('.title').textContent()), 'the large message shows its title');
  await page.context().close();
});

test('accept_archives_the_message_and_the_sender_notification_arrives_in_a_second_context', ['stream'], async () => {
  const m = booking('hugo', { guest: 'Ana', listing: 'Loft 9' }, 'ana');
  const host = await openInbox('hugo');
  const guest = await openInbox('ana');
  await guest.waitForSelector('missive-inbox[data-live="stream"]');
  const li = item(host, m.id);
  await li.locator('.summary').click();
  await li.locator('button[data-action="accept"]').click();
  const dialog = host.locator('missive-inbox dialog[open]');
  eq(await dialog.locator('.confirm-message').textContent(), 'Ana is told right away.', 'the confirmation message');
  await dialog.locator('.confirm-ok').click();
  await waitFor('the result', async () => /Done/.test(await li.locator('.outcome.ok').textContent()));
  eq(await li.getAttribute('data-state'), 'archived', 'the item shows it archived');
  eq((await api('GET', `/messages/${m.id}`, { user: 'hugo' })).body.actionState, 'archived', 'the store has it archived');
  const note = guest.locator('missive-inbox li.item', { hasText: 'Your booking of Loft 9 was accepted' });
  await note.waitFor({ timeout: 5000 });
  await host.context().close();
  await guest.context().close();
});

test('an_application_on_another_allowed_origin_embeds_the_inbox_over_cors', ['stream', 'cors'], async () => {
  const page = await newPage();
  const failedRequests = [];
  page.on('requestfailed', (r) => failedRequests.push(`${r.method()} ${r.url()}`));
  await page.goto(`${hookOrigin}/host.html`);
  await page.waitForSelector('missive-inbox[data-ready]');
  await page.waitForSelector('missive-inbox[data-live="stream"]');
  const m = booking('otto', { guest: 'Cross Origin' });
  const li = item(page, m.id);
  await li.waitFor({ timeout: 5000 });
  await li.locator('.summary').click();
  await li.locator('button[data-action="accept"]').click();
  await page.locator('missive-inbox dialog[open] .confirm-ok').click();
  await waitFor('the result', async () => /Done/.test(await li.locator('.outcome.ok').textContent()));
  eq((await api('GET', `/messages/${m.id}`, { user: 'otto' })).body.actionState, 'archived', 'the action ran');
  eq(failedRequests.length, 0, `no request failed: ${failedRequests.join(', ')}`);
  await page.context().close();
});

test('a_press_on_a_message_archived_meanwhile_is_explained_as_410', [], async () => {
  const m = booking('walt', { guest: 'Late' });
  // no live updates for this page, so it still shows the message as active when it is pressed
  const page = await newPage();
  await page.route('**/stream-tickets', (route) => route.abort());
  await page.goto(`${daemon.base}/ui/example.html?user=walt&poll-ms=600000`);
  await page.waitForSelector('missive-inbox[data-ready]');
  const li = item(page, m.id);
  await li.locator('.summary').click();
  await li.locator('button[data-action="decline"]').waitFor();
  // opening marks it read, and the answer re-renders the item: let that land first, or (on a slow
  // machine) it lands after the accept below and the item already shows archived before the press
  await waitFor('read on open', async () => !/\bunread\b/.test(await li.getAttribute('class')));
  eq((await api('POST', `/messages/${m.id}/action/accept`, { user: 'walt' })).status, 200, 'accepted elsewhere');
  await li.locator('button[data-action="decline"]').click();
  await page.locator('missive-inbox dialog[open] textarea.notes').fill('too late');
  await page.locator('missive-inbox dialog[open] .confirm-ok').click();
  const text = await waitFor('the 410', async () => {
    const o = li.locator('.outcome.error');
    return (await o.count()) ? o.textContent() : null;
  });
  eq(text, 'This message was already handled and archived, so nothing was done.', 'the 410 in words, without the server\'s text');
  await waitFor('shown archived', async () => (await li.getAttribute('data-state')) === 'archived');
  await person.looks(page, 'a press answered 410');
  await page.context().close();
});

test('the_host_page_themes_the_inbox_with_css_custom_properties', [], async () => {
  const m = booking('tess');
  const page = await openInbox('tess');
  await item(page, m.id).locator('.summary').click();
  const accept = item(page, m.id).locator('button[data-action="accept"]');
  await accept.waitFor();
  // as a host page's stylesheet would (this page's CSP allows no inline <style>, so set them from script)
  await page.locator('missive-inbox').evaluate((el) => { el.style.setProperty('--missive-accent', 'rgb(200, 30, 120)'); el.style.setProperty('--missive-radius', '0px'); });
  // read on open redraws the row, so a button read mid-redraw is detached (its style is ""): ask
  // again until the row has settled, then compare what it shows
  const settled = async (what, read) => waitFor(what, async () => { const v = await read(); return v !== '' ? v : null; });
  eq(await settled('the primary action drawn', () => accept.evaluate((b) => getComputedStyle(b).backgroundColor)), 'rgb(200, 30, 120)', 'the accent colours the primary action');
  eq(await settled('the panel drawn', () => page.locator('missive-inbox').evaluate((el) => getComputedStyle(el.shadowRoot.querySelector('.panel')).borderTopLeftRadius)), '0px', 'the radius shapes the box');
  await page.context().close();
});

test('dismiss_and_mark_all_read_move_the_badge', ['state'], async () => {
  const ms = [booking('dora'), booking('dora'), booking('dora')];
  const page = await openInbox('dora');
  await waitFor('badge 3', async () => (await badge(page).getAttribute('data-count')) === '3');
  await item(page, ms[0].id).locator('.dismiss-x').click();
  await item(page, ms[0].id).waitFor({ state: 'detached' });
  await waitFor('badge 2 after dismiss', async () => (await badge(page).getAttribute('data-count')) === '2');
  const v = (await api('GET', `/messages/${ms[0].id}`, { user: 'dora' })).body.viewer;
  assert(v && v.dismissedAt, 'dismissedAt is stored');
  await page.locator('missive-inbox .mark-all').click();
  await waitFor('badge 0 after mark all read', async () => (await badge(page).getAttribute('data-count')) === '0');
  // the badge follows the counts event; the items re-render from the list a moment later
  await waitFor('no item is shown unread', async () => (await page.locator('missive-inbox li.item.unread').count()) === 0);
  eq((await api('GET', '/messages/count', { user: 'dora' })).body.unread, 0, 'the store agrees');
  // seen on display, read on open
  const fresh = booking('dora');
  await item(page, fresh.id).waitFor();
  await waitFor('seen on display', async () => (await api('GET', `/messages/${fresh.id}`, { user: 'dora' })).body.viewer.seenAt);
  eq((await api('GET', `/messages/${fresh.id}`, { user: 'dora' })).body.viewer.readAt, null, 'displayed is not read');
  await item(page, fresh.id).locator('.summary').click();
  await waitFor('read on open', async () => (await api('GET', `/messages/${fresh.id}`, { user: 'dora' })).body.viewer.readAt);
  await page.context().close();
});

test('filters_show_unread_only_and_one_template', ['state'], async () => {
  const a = booking('fay');
  const b = booking('fay');
  const c = curlCreate('refund', { host: 'fay', guest: 'G', listing: 'L', note: '', long: '' });
  await api('POST', `/messages/${a.id}/read`, { user: 'fay' });
  const page = await openInbox('fay');
  eq(await page.locator('missive-inbox li.item').count(), 3, 'all three');
  await page.locator('missive-inbox [role=tab][data-tab=unread]').click();
  await waitFor('unread only', async () => (await page.locator('missive-inbox li.item').count()) === 2);
  assert(!(await item(page, a.id).count()), 'the read one is hidden');
  await page.locator('missive-inbox .filter-template').selectOption({ label: 'Refund request' });
  await waitFor('template filter', async () => (await page.locator('missive-inbox li.item').count()) === 1);
  assert(await item(page, c.id).count(), 'the refund one stays');
  void b;
  await page.context().close();
});

test('an_approval_decided_in_the_console_lets_the_action_proceed', ['ops'], async () => {
  const m = curlCreate('refund', { host: 'rita', guest: 'G', listing: 'Room 5', note: '', long: '' });
  const inbox = await openInbox('rita');
  const li = item(inbox, m.id);
  await li.locator('.summary').click();
  await li.locator('button[data-action="refund"]').click();
  await waitFor('approval asked', async () => /needs an approval/.test(await li.locator('.outcome').textContent()));
  eq((await api('GET', `/messages/${m.id}`, { user: 'rita' })).body.actionState, 'active', 'nothing ran yet');
  const ops = await openConsole({ user: 'olga', permissions: 'approvals.decide' });
  const card = ops.locator('#approvals li.approval', { hasText: m.id });
  await card.waitFor({ timeout: 8000 });
  await card.locator('button.approve').click();
  await waitFor('approved', async () => /Approved/.test(await card.locator('.status').textContent()));
  await li.locator('button.continue').click({ timeout: 15000 });
  await waitFor('the result', async () => /Done/.test(await li.locator('.outcome.ok').textContent()));
  eq((await api('GET', `/messages/${m.id}`, { user: 'rita' })).body.actionState, 'archived', 'the action ran after approval');
  // Deny: the requester is told, and nothing runs
  const d = curlCreate('refund', { host: 'rita', guest: 'G', listing: 'Room 6', note: '', long: '' });
  await inbox.reload();
  await inbox.waitForSelector('missive-inbox[data-ready]');
  const dli = item(inbox, d.id);
  await dli.locator('.summary').click();
  await dli.locator('button[data-action="refund"]').click();
  await waitFor('approval asked', async () => /needs an approval/.test(await dli.locator('.outcome').textContent()));
  const dcard = ops.locator('#approvals li.approval', { hasText: d.id });
  await dcard.waitFor({ timeout: 8000 });
  await dcard.locator('button.deny').click();
  await waitFor('denied in the console', async () => /Denied/.test(await dcard.locator('.status').textContent()));
  await waitFor('denied in the inbox', async () => /approval was denied/.test(await dli.locator('.outcome.error').textContent()), 15000);
  eq((await api('GET', `/messages/${d.id}`, { user: 'rita' })).body.actionState, 'active', 'a denied action does not run');
  await inbox.context().close();
  await ops.context().close();
});

test('the_console_finds_a_message_by_id_and_hides_what_the_caller_cannot_see', [], async () => {
  const m = booking('quinn', { guest: 'Searcher', listing: 'Cabin 2' });
  const page = await openConsole({ user: 'quinn' });
  await page.fill('#search-id', m.id);
  await page.click('#search button[type=submit]');
  await page.locator('#search-result .card').waitFor();
  eq(await page.locator('#search-result h3').textContent(), 'Searcher wants Cabin 2', 'the title');
  assert((await page.locator('#search-result pre').textContent()).includes(`"id": "${m.id}"`), 'the JSON');
  // its timeline: created, then (after an accept elsewhere) archived by whom, with which attempt
  const ev = page.locator('#search-result .message-events li');
  eq(await page.locator('#search-result .message-events li[data-what=archived]').count(), 0, 'not archived yet');
  assert(/ created by ana for quinn$/.test(await ev.first().textContent()), `created: ${await ev.first().textContent()}`);
  const accepted = await api('POST', `/messages/${m.id}/action/accept`, { user: 'quinn' });
  eq(accepted.status, 200, 'accepted');
  await page.click('#search button[type=submit]');
  const archivedLine = page.locator('#search-result .message-events li[data-what=archived]');
  await archivedLine.waitFor();
  const line = await archivedLine.textContent();
  assert(/ archived by quinn with accept( \(attempt [0-9a-f-]+\))?$/.test(line), `archived: ${line}`);
  await page.fill('#search-id', 'not-an-id');
  await page.click('#search button[type=submit]');
  assert(/24 hexadecimal/.test(await page.locator('#search-status').textContent()), 'a malformed id is explained');
  const other = await openConsole({ user: 'mallory' });
  await other.fill('#search-id', m.id);
  await other.click('#search button[type=submit]');
  await waitFor('not visible', async () => /not visible to you|No message/.test(await other.locator('#search-status').textContent()));
  eq(await other.locator('#search-result .card').count(), 0, 'nothing of it is shown');
  await page.context().close();
  await other.context().close();
});

test('a_saga_in_manual_review_is_resolved_from_the_console', ['ops'], async () => {
  const m = curlCreate('order', { host: 'sam', guest: 'G', listing: 'Order 12', note: '', long: '' });
  const inbox = await openInbox('sam');
  const li = item(inbox, m.id);
  await li.locator('.summary').click();
  await li.locator('button[data-action="charge"]').click();
  await waitFor('needs review', async () => /waiting for an operator/.test(await li.locator('.outcome').textContent()));
  const ops = await openConsole({ user: 'root', permissions: 'is.admin' });
  const card = ops.locator('#sagas li.saga').first();
  await card.waitFor({ timeout: 8000 });
  eq(await card.locator('tr[data-step="charge"] .state').textContent(), 'ambiguous', 'the step shows its state');
  const form = card.locator('.resolve[data-step="charge"]');
  await form.locator('select.outcome').selectOption('committed');
  await form.locator('textarea.result').fill('{"receipt": "r-1"}');
  await form.locator('button.record').click();
  await waitFor('recorded', async () => /Recorded/.test(await card.locator('p.status').textContent()));
  await card.locator('button.resume').click();
  await waitFor('completed', async () => /now completed/.test(await card.locator('p.status').textContent()));
  await li.locator('button[data-action="charge"]').click();
  await waitFor('the result', async () => /Charged/.test(await li.locator('.outcome.ok').textContent()), 15000);
  eq(await li.locator('.outcome.ok').textContent(), 'Charged. Receipt r-1', 'the resolved result, through the action\'s resultTemplate');
  await inbox.context().close();
  await ops.context().close();
});

test('screenshots_of_the_inbox_light_dark_narrow_wide_popover_rtl_preferences_and_the_console_are_written', [], async () => {
  fs.mkdirSync(imgDir, { recursive: true });
  const samples = [
    { guest: 'Ana Souza', listing: 'Flat 3B', note: 'Two nights, arriving late', long: 'Ana would like to stay at Flat 3B from 12 to 14 December. She wrote: "We arrive around 23:00, is a late check-in fine?"' },
    { guest: 'Jonas Berg', listing: 'Garden Studio', note: 'One week in January', long: 'Jonas would like to stay a week.' },
    { guest: 'Mei Chen', listing: 'Flat 3B', note: 'Weekend, two guests', long: '' },
  ];
  const ms = samples.map((s) => booking('demo', s));
  curlCreate('refund', { host: 'demo', guest: 'Leo', listing: 'Room 5', note: 'Refund the cleaning fee', long: '' });
  await api('POST', `/messages/${ms[2].id}/read`, { user: 'demo' });
  const shots = [];
  for (const [scheme, width, height] of [['light', 1000, 640], ['dark', 1000, 640], ['light', 360, 740], ['dark', 360, 740]]) {
    const page = await openInbox('demo', { scheme, width, height });
    await item(page, ms[0].id).locator('.summary').click();
    await item(page, ms[0].id).locator('button[data-action="accept"]').waitFor();
    await sleep(200);
    const bg = await page.locator('missive-inbox').evaluate((el) => getComputedStyle(el.shadowRoot.querySelector('.panel')).backgroundColor);
    eq(bg, scheme === 'dark' ? 'rgb(23, 25, 30)' : 'rgb(255, 255, 255)', `${scheme} scheme background`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 0, `no horizontal scrolling at ${width}px (${overflow}px over)`);
    const file = path.join(imgDir, `inbox-${scheme}-${width < 500 ? 'narrow' : 'wide'}.png`);
    await page.screenshot({ path: file, fullPage: true });
    shots.push(file);
    await page.context().close();
  }
  // the bell and its panel, the inbox in German and in Arabic (right to left), the preferences
  for (const [name, opts] of [['popover', { mode: 'popover' }], ['de', { locale: 'de' }], ['ar', { locale: 'ar' }]]) {
    const page = await openInbox('demo', { width: 1000, height: 640, ...opts });
    if (opts.mode) await page.locator('missive-inbox button.bell').click();
    else await item(page, ms[1].id).locator('.summary').click();
    await sleep(300);
    const file = path.join(imgDir, `inbox-${name}.png`);
    await page.screenshot({ path: file });
    shots.push(file);
    await page.context().close();
  }
  {
    const page = await newPage({ width: 1000, height: 640 });
    if (!has.preferences) await page.route(/\/preferences$/, (route) => route.fulfill({ status: 200, contentType: 'application/json',
      body: JSON.stringify({ channels: { email: true, sms: false }, categories: { bookings: { sms: true } }, digest: { email: { everyMs: 3600000 } } }) }));
    await page.goto(`${daemon.base}/ui/example-preferences.html?user=demo`);
    await page.waitForSelector('missive-preferences[data-ready]');
    const file = path.join(imgDir, 'preferences.png');
    await page.screenshot({ path: file, fullPage: true });
    shots.push(file);
    await page.context().close();
  }
  if (has.ops) {
    // something for the operator to do: a pending approval and a saga in manual review
    const r = curlCreate('refund', { host: 'vera', guest: 'Leo', listing: 'Room 5', note: 'Refund the cleaning fee', long: '' });
    eq((await api('POST', `/messages/${r.id}/action/refund`, { user: 'vera' })).status, 202, 'an approval is asked');
    const o = curlCreate('order', { host: 'vera', guest: 'Mia', listing: 'Order 31', note: '', long: '' });
    eq((await api('POST', `/messages/${o.id}/action/charge`, { user: 'vera' })).body.error.code, 'action_needs_review', 'a saga waits for review');
  }
  const ops = await openConsole({ user: 'demo', permissions: 'is.admin,approvals.decide' }, { width: 1280, height: 900 });
  if (has.ops) {
    await ops.locator('#approvals li.approval').first().waitFor();
    await ops.locator('#sagas li.saga').first().waitFor();
  }
  await sleep(600);
  const file = path.join(imgDir, 'console.png');
  await ops.screenshot({ path: file, fullPage: true });
  shots.push(file);
  await ops.context().close();
  for (const f of shots) assert(fs.statSync(f).size > 5000, `${f} is a picture`);
});

test('the_inbox_reconnects_after_the_daemon_drops_and_misses_nothing', ['stream'], async () => {
  // a second daemon on the same store takes writes while the page's daemon is down
  const other = new Daemon('other', daemonConfig());
  await other.start();
  const page = await openInbox('nina');
  await page.waitForSelector('missive-inbox[data-live="stream"]');
  const before = booking('nina', { guest: 'Before the drop' });
  await item(page, before.id).waitFor({ timeout: 5000 });
  await daemon.kill('SIGKILL');
  await page.waitForSelector('missive-inbox:not([data-live="stream"])', { timeout: 10000 });
  const saved = daemon.base;
  daemon.base = other.base; // curl goes to the daemon that is up
  const during = booking('nina', { guest: 'During the drop' });
  daemon.base = saved;
  await other.kill();
  await daemon.start(daemon.port);
  await item(page, during.id).waitFor({ timeout: 20000 });
  const m = booking('nina', { guest: 'After the drop' });
  await item(page, m.id).waitFor({ timeout: 20000 });
  eq(await page.locator('missive-inbox li.item').count(), 3, 'each message once');
  await page.waitForSelector('missive-inbox[data-live="stream"]', { timeout: 20000 });
  const again = booking('nina', { guest: 'Live again' });
  await item(page, again.id).waitFor({ timeout: 5000 });
  await page.context().close();
});

const person = register({ test, api, booking, curlCreate, openInbox, newPage, item, waitFor, assert, eq, sleep, imgDir, has, daemon: () => daemon });
registerConsole({ test, newPage, waitFor, assert, eq, Daemon, daemonConfig, tmp, person, api, curlCreate, daemon: () => daemon });

test('no_page_violated_its_content_security_policy_or_threw', [], async () => {
  eq(cspViolations.length, 0, `CSP violations: ${cspViolations.join(' | ')}`);
  eq(pageErrors.length, 0, `page errors: ${pageErrors.join(' | ')}`);
});

// ---- runner -----------------------------------------------------------------------------------------

async function main() {
  const hookServer = await startHooks();
  writeFixtures(hookServer.address().port);
  hookOrigin = `http://127.0.0.1:${hookServer.address().port}`;
  has.cors = true; // a daemon without the "cors" key (issue 15) refuses it: check before starting
  const probePath = path.join(tmp, 'probe.json');
  fs.writeFileSync(probePath, JSON.stringify({ ...daemonConfig(), listen: '127.0.0.1:0' }));
  try {
    execFileSync(daemonBin, ['--check-config', probePath], { stdio: 'pipe', env: { ...process.env, MISSIVE_TEST_APPROVAL_SECRET: 'x'.repeat(48) } });
  } catch (e) {
    if (!/cors/.test(String(e.stderr) + String(e.stdout))) throw e;
    has.cors = false;
  }
  daemon = new Daemon('main', daemonConfig());
  await daemon.start();
  await probe();
  // launch() starts Chromium on a fresh temporary profile (its own --user-data-dir) every run
  browser = await chromium.launch({
    executablePath: chromiumBin,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  let passed = 0;
  let failed = 0;
  // MISSIVE_BROWSER_ONLY=regex runs the tests whose names match (while working on some of them)
  const only = process.env.MISSIVE_BROWSER_ONLY ? new RegExp(process.env.MISSIVE_BROWSER_ONLY) : null;
  for (const t of tests) {
    if (only && !only.test(t.name)) continue;
    const missing = t.needs.filter((n) => !has[n]);
    if (missing.length) {
      console.log(`SKIP browser: ${t.name} (this daemon lacks ${missing.map((n) => NEEDS[n]).join(' and ')})`);
      continue;
    }
    const started = Date.now();
    try {
      await t.fn();
      passed++;
      console.log(`ok ${t.name} (${Date.now() - started} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${t.name}: ${e.stack || e.message}`);
    }
  }
  await browser.close();
  // the daemon that served every test stops cleanly on SIGTERM, and no sanitizer spoke
  const code = await daemon.kill();
  const bad = daemon.logText().split('\n').filter((l) => /Sanitizer|runtime error/.test(l));
  if (code === 0 && bad.length === 0) {
    passed++;
    console.log('ok the_daemon_exits_0_on_sigterm_after_the_run_and_no_sanitizer_reported');
  } else {
    failed++;
    console.log(`FAIL the_daemon_exits_0_on_sigterm_after_the_run_and_no_sanitizer_reported: exit ${code}; ${bad.slice(0, 5).join(' | ')}`);
  }
  hookServer.close();
  if (!failed) fs.rmSync(tmp, { recursive: true, force: true });
  else console.log(`logs kept in ${tmp}`);
  console.log(`tests/browser: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL browser harness: ${e.stack || e.message}`);
  console.log('tests/browser: 0 passed, 1 failed');
  process.exit(1);
});
