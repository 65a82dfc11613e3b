// console.test.mjs — the console's sign-in with an OpenID Connect provider, against a local
// identity-provider stub that issues RS256 tokens: discovery, the authorization code with PKCE
// (S256, checked by the stub), the token exchange, and a daemon in auth mode "jwt" that checks the
// token with the stub's JWKS. Registered by inbox.test.mjs, which owns the browser and the runner.
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';

const b64url = (buf) => Buffer.from(buf).toString('base64url');

/** The identity provider: one user (olga), one client, codes bound to their PKCE challenge. */
export function startIdp({ user = 'olga', permissions = ['approvals.decide'] } = {}) {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'stub-1', alg: 'RS256', use: 'sig' };
  const codes = new Map();
  const seen = { authorize: [], token: [] };
  let origin = null;
  const sign = (claims) => {
    const head = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: jwk.kid }));
    const body = b64url(JSON.stringify(claims));
    return `${head}.${body}.${b64url(crypto.sign('sha256', Buffer.from(`${head}.${body}`), privateKey))}`;
  };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      const url = new URL(req.url, origin);
      const cors = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Allow-Headers': 'Content-Type, Accept' };
      const json = (status, obj) => { res.writeHead(status, { 'Content-Type': 'application/json', ...cors }); res.end(JSON.stringify(obj)); };
      if (req.method === 'OPTIONS') { res.writeHead(204, cors); res.end(); return; }
      if (url.pathname === '/.well-known/openid-configuration') {
        json(200, { issuer: origin, authorization_endpoint: `${origin}/authorize`, token_endpoint: `${origin}/token`,
          jwks_uri: `${origin}/jwks`, response_types_supported: ['code'], code_challenge_methods_supported: ['S256'] });
      } else if (url.pathname === '/jwks') {
        json(200, { keys: [jwk] });
      } else if (url.pathname === '/authorize') {
        const p = Object.fromEntries(url.searchParams);
        seen.authorize.push(p);
        if (p.response_type !== 'code' || p.client_id !== 'missive-console' || p.code_challenge_method !== 'S256' || !p.code_challenge) {
          res.writeHead(302, { Location: `${p.redirect_uri}?error=invalid_request&state=${p.state}` });
          res.end();
          return;
        }
        const code = b64url(crypto.randomBytes(16));
        codes.set(code, p);
        res.writeHead(302, { Location: `${p.redirect_uri}?code=${code}&state=${encodeURIComponent(p.state)}` });
        res.end();
      } else if (url.pathname === '/token' && req.method === 'POST') {
        const f = Object.fromEntries(new URLSearchParams(raw));
        seen.token.push(f);
        const p = codes.get(f.code);
        codes.delete(f.code); // single use
        const verified = p && f.grant_type === 'authorization_code' && f.redirect_uri === p.redirect_uri && f.client_id === p.client_id &&
          b64url(crypto.createHash('sha256').update(f.code_verifier || '').digest()) === p.code_challenge;
        if (!verified) { json(400, { error: 'invalid_grant' }); return; }
        const now = Math.floor(Date.now() / 1000);
        json(200, {
          token_type: 'Bearer', expires_in: 600,
          access_token: sign({ iss: origin, sub: user, aud: 'missive', iat: now, exp: now + 600, permissions }),
          id_token: sign({ iss: origin, sub: user, aud: p.client_id, iat: now, exp: now + 600, nonce: p.nonce, preferred_username: user }),
        });
      } else {
        json(404, { error: 'not_found' });
      }
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    origin = `http://127.0.0.1:${server.address().port}`;
    resolve({ origin, seen, server, sign });
  }));
}

export function register(c) {
  const { test, newPage, waitFor, assert, eq, Daemon, daemonConfig, tmp, person, api, curlCreate } = c;

  test('the_console_signs_in_with_openid_connect_pkce_and_the_daemon_accepts_the_rs256_token', [], async () => {
    const idp = await startIdp();
    const d = new Daemon('oidc', daemonConfig({
      store: `sqlite:${path.join(tmp, 'oidc.db')}`,
      auth: { mode: 'jwt', jwksUrl: `${idp.origin}/jwks`, issuer: idp.origin, audience: 'missive' },
      ui: { enabled: true, oidc: { issuer: idp.origin, clientId: 'missive-console' } },
    }));
    await d.start();
    try {
      const csp = (await fetch(`${d.base}/ui/`)).headers.get('content-security-policy');
      assert(csp.includes(`connect-src 'self' ${idp.origin};`), `the policy lets the console reach the provider: ${csp}`);
      const page = await newPage();
      await page.goto(`${d.base}/ui/`);
      const signin = page.locator('#signin');
      await signin.waitFor();
      eq(await signin.textContent(), 'Sign in', 'the sign-in button');
      await person.axe(page, 'console before sign-in');
      await signin.focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${d.base}/ui/`, { timeout: 10000 });
      await page.locator('#signed-in').waitFor({ timeout: 10000 });
      eq(await page.locator('#signed-in-name').textContent(), 'olga', 'signed in as the provider says');
      eq(await page.locator('#signin-status').textContent(), '', 'no error');
      // the stub saw a PKCE request and a verifier that matched it; the URL carries no code any more
      eq(idp.seen.authorize.length, 1, 'one authorization request');
      eq(idp.seen.authorize[0].code_challenge_method, 'S256', 'S256');
      eq(idp.seen.authorize[0].redirect_uri, `${d.base}/ui/`, 'back to the console');
      assert(idp.seen.token[0].code_verifier.length >= 43, 'a verifier of at least 43 characters');
      eq(new URL(page.url()).search, '', 'the code is gone from the address bar');
      // the daemon accepts the token: the approvals list answers (olga may decide approvals)
      await waitFor('the approval list', async () => (await page.locator('#approvals-status').textContent()) === 'No approvals are waiting.');
      await page.waitForSelector('missive-inbox[data-ready]');
      eq(await page.locator('missive-inbox li.empty').textContent(), 'You are all caught up.', 'the inbox loads with the token');
      await person.axe(page, 'console signed in');
      // a forged answer (wrong state) is refused in words
      await page.goto(`${d.base}/ui/?code=forged&state=nope`);
      await waitFor('refused', async () => /does not belong to this page/.test(await page.locator('#signin-status').textContent()));
      await page.locator('#signout').click().catch(() => {});
      eq((await fetch(`${d.base}/messages`)).status, 401, 'without a token the daemon answers 401');
      await page.context().close();
    } finally {
      await d.kill();
      idp.server.close();
    }
  });

  test('the_console_lists_sagas_and_approvals_with_filters_a_timeline_and_bulk_actions_after_confirmation', ['ops'], async () => {
    const sagas = [];
    for (const n of [41, 42]) {
      const o = curlCreate('order', { host: 'vic', guest: 'G', listing: `Order ${n}`, note: '', long: '' });
      const r = await api('POST', `/messages/${o.id}/action/charge`, { user: 'vic' });
      eq(r.body.error.code, 'action_needs_review', 'a saga waits for review');
      sagas.push(r.body.error.sagaId);
    }
    const approvals = [];
    for (const n of [7, 8]) {
      const m = curlCreate('refund', { host: 'vic', guest: 'G', listing: `Room ${n}`, note: '', long: '' });
      const r = await api('POST', `/messages/${m.id}/action/refund`, { user: 'vic' });
      eq(r.status, 202, 'an approval is asked');
      approvals.push(r.body.approvalId);
    }
    const page = await newPage({ width: 1280, height: 900 });
    await page.goto(`${c.daemon().base}/ui/?user=root&permissions=is.admin,approvals.decide`);
    const table = page.locator('#lists table');
    // sagas in manual review of the definition "pay"
    await page.locator('#lists-state').selectOption('manual-review');
    await page.locator('#lists-definition').fill('pay');
    await page.locator('#lists form button[type=submit]').click();
    for (const id of sagas) await table.locator(`tr[data-key="${id}"]`).waitFor();
    eq(await table.locator(`tr[data-key="${sagas[0]}"] td.state`).textContent(), 'manual-review', 'the state column');
    await page.locator('#lists-search').fill(sagas[1]);
    await waitFor('the search', async () => (await table.locator('tbody tr').count()) === 1);
    eq(await table.locator('tbody tr').getAttribute('data-key'), sagas[1], 'the search finds the one saga');
    // its timeline (saga steps and their journal effects): started, each step's start, effect and
    // end with its attempts and outcome, where it is now
    await table.locator(`tr[data-key="${sagas[1]}"] button.open`).click();
    const events = page.locator('#timeline li');
    await page.locator('#timeline h3').waitFor();
    eq(await page.locator('#timeline h3').textContent(), `Timeline of ${sagas[1]}`, 'the timeline heading');
    await waitFor('the saga timeline', async () => (await events.count()) > 3);
    const lines = await events.allTextContents();
    assert(/ started$/.test(lines[0]), `first the start: ${lines[0]}`);
    assert(lines.some((l) => / step effect step reserve(, attempt \d+)?, outcome committed$/.test(l)), `the first step's effect: ${lines.join(' | ')}`);
    assert(lines.some((l) => / step ended step charge(, attempt \d+)?, outcome \w+, execution_unknown$/.test(l)), `the failing step and its outcome: ${lines.join(' | ')}`);
    assert(/ ended outcome manual-review$/.test(lines[lines.length - 1]), `where it is now: ${lines[lines.length - 1]}`);
    await person.axe(page, 'console lists: sagas and a timeline');
    // approvals: select both, Approve, confirm in the dialog
    await page.locator('#lists-search').fill('');
    await page.locator('#lists-kind').selectOption('approvals');
    for (const id of approvals) await table.locator(`tr[data-key="${id}"]`).waitFor();
    eq(await page.locator('#lists .bulk .count').textContent(), 'Select rows for a bulk action', 'nothing selected yet');
    assert(await page.locator('#lists button.bulk-approved').isDisabled(), 'no bulk action without a selection');
    for (const id of approvals) await table.locator(`tr[data-key="${id}"] input.pick`).check();
    eq(await page.locator('#lists .bulk .count').textContent(), '2 selected', 'the selection is counted');
    await page.locator('#lists button.bulk-approved').click();
    const dialog = page.locator('#lists dialog[open]');
    eq(await dialog.locator('h3').textContent(), 'Approve 2 approvals?', 'the confirmation names what and how many');
    eq(JSON.stringify((await dialog.locator('li').allTextContents()).sort()), JSON.stringify([...approvals].sort()), 'and which');
    await person.axe(page, 'console bulk confirmation');
    await dialog.locator('.confirm-cancel').click();
    eq((await api('GET', `/approvals/${approvals[0]}`, { user: 'root', permissions: 'is.admin' })).body.state, 'pending', 'Cancel decides nothing');
    await page.locator('#lists button.bulk-approved').click();
    await page.locator('#lists dialog[open] .confirm-ok').focus();
    await page.keyboard.press('Enter');
    await waitFor('the bulk result', async () => (await page.locator('#lists-status').textContent()) === '2 approved.');
    for (const id of approvals) eq((await api('GET', `/approvals/${id}`, { user: 'root', permissions: 'is.admin' })).body.state, 'approved', 'approved in the store');
    // sagas: bulk compensate both; the list says how each went, as the store has it
    await page.locator('#lists-kind').selectOption('sagas');
    await page.locator('#lists-state').selectOption('manual-review');
    await page.locator('#lists form button[type=submit]').click();
    for (const id of sagas) await table.locator(`tr[data-key="${id}"] input.pick`).check();
    await page.locator('#lists button.bulk-compensate').click();
    eq(await page.locator('#lists dialog[open] h3').textContent(), 'Compensate 2 sagas?', 'the saga confirmation');
    await page.locator('#lists dialog[open] .confirm-ok').click();
    await waitFor('the saga bulk result', async () => /compensated/.test(await page.locator('#lists-status').textContent()));
    const states = await Promise.all(sagas.map(async (id) => (await api('GET', `/sagas/${id}`, { user: 'root', permissions: 'is.admin' })).body.state));
    const moved = states.filter((s) => s !== 'manual-review').length;
    const text = await page.locator('#lists-status').textContent();
    assert(text.startsWith(`${moved} compensated`), `the report (${text}) matches the store (${states.join(', ')})`);
    await page.context().close();
  });

  test('the_console_bulk_resumes_sagas_and_decides_approvals_in_german_with_confirmation_and_result_in_german', ['ops'], async () => {
    const admin = { user: 'root', permissions: 'is.admin' };
    const sagas = [];
    for (const n of [51, 52]) {
      const o = curlCreate('order', { host: 'vic', guest: 'G', listing: `Bestellung ${n}`, note: '', long: '' });
      const r = await api('POST', `/messages/${o.id}/action/charge`, { user: 'vic' });
      eq(r.body.error.code, 'action_needs_review', 'a saga waits for review');
      sagas.push(r.body.error.sagaId);
    }
    // the first saga's charge did happen: recorded, so a resume finishes it; the second stays in review
    const first = (await api('GET', `/sagas/${sagas[0]}`, admin)).body;
    const charge = first.steps.find((st) => st.name === 'charge');
    const resolved = await api('POST', `/sagas/${sagas[0]}/resolve`, { ...admin,
      body: { kind: 'execution', step: 'charge', effectId: charge.effectId, outcome: 'committed', result: { receipt: 'r-51' } } });
    eq(resolved.status, 200, `the charge is resolved: ${resolved.text}`);
    const approvals = [];
    for (const n of [17, 18]) {
      const m = curlCreate('refund', { host: 'vic', guest: 'G', listing: `Zimmer ${n}`, note: '', long: '' });
      const r = await api('POST', `/messages/${m.id}/action/refund`, { user: 'vic' });
      eq(r.status, 202, 'an approval is asked');
      approvals.push(r.body.approvalId);
    }
    const page = await newPage({ width: 1280, height: 900 });
    await page.goto(`${c.daemon().base}/ui/?user=root&permissions=is.admin,approvals.decide&locale=de`);
    // the page's own words are German too
    eq(await page.evaluate(() => document.documentElement.lang), 'de', 'the page says its language');
    eq(await page.title(), 'missive-Konsole', 'the title');
    eq(await page.locator('#approvals-h').textContent(), 'Offene Freigaben', 'the approvals panel');
    eq(await page.locator('#sagas-h').textContent(), 'Sagas zur manuellen Prüfung', 'the sagas panel');
    eq(await page.locator('#who-apply').textContent(), 'Übernehmen', 'the identity form');
    await page.locator(`#sagas li[data-saga-id="${sagas[1]}"] button.resume`).waitFor();
    eq(await page.locator(`#sagas li[data-saga-id="${sagas[1]}"] button.resume`).textContent(), 'Fortsetzen', 'a saga card');
    eq(await page.locator(`#approvals li[data-approval-id="${approvals[0]}"] button.approve`).textContent(), 'Freigeben', 'an approval card');
    const table = page.locator('#lists table');
    const dialog = page.locator('#lists dialog[open]');
    const status = page.locator('#lists-status');
    // bulk resume (a retry of what is due) of both sagas: the resolved one is running again, so any state
    await page.locator('#lists-state').selectOption('');
    await page.locator('#lists-definition').fill('pay');
    await page.locator('#lists form button[type=submit]').click();
    for (const id of sagas) await table.locator(`tr[data-key="${id}"] input.pick`).check();
    eq(await page.locator('#lists .bulk .count').textContent(), '2 ausgewählt', 'the selection is counted');
    await page.locator('#lists button.bulk-resume').click();
    eq(await dialog.locator('h3').textContent(), '2 Sagas fortsetzen?', 'the confirmation names what and how many, in German');
    eq(await dialog.locator('p').textContent(), 'Jede wird einzeln gesendet; die Liste zeigt, wie es ausging.', 'the note');
    eq(await dialog.locator('.confirm-ok').textContent(), 'Fortsetzen (2)', 'the confirm button');
    eq(await dialog.locator('.confirm-cancel').textContent(), 'Abbrechen', 'the cancel button');
    await person.axe(page, 'console bulk resume confirmation (de)');
    await dialog.locator('.confirm-ok').click();
    await waitFor('the bulk resume result', async () => (await status.textContent()) === '2 fortgesetzt.');
    eq(await status.getAttribute('class'), 'status ok', 'said as a success');
    eq((await api('GET', `/sagas/${sagas[0]}`, admin)).body.state, 'completed', 'the resolved saga finished');
    eq((await api('GET', `/sagas/${sagas[1]}`, admin)).body.state, 'manual-review', 'the other still waits for review');
    await person.axe(page, 'console bulk resume result (de)');
    // one saga that cannot go on: the result says which and why, in German
    await page.locator('#lists form button[type=submit]').click();
    await table.locator(`tr[data-key="${sagas[1]}"] input.pick`).check();
    await page.locator('#lists button.bulk-compensate').click();
    eq(await dialog.locator('h3').textContent(), '1 Saga kompensieren?', 'one saga, in the singular');
    await dialog.locator('.confirm-ok').click();
    await waitFor('the bulk compensate result', async () => /^0 kompensiert/.test(await status.textContent()));
    // its charge is still unknown: the daemon refuses (409 saga_ambiguous_step), said in the console's words
    eq(await status.textContent(), `0 kompensiert, 1 nicht: ${sagas[1]}: Das hat nicht funktioniert.`, 'the failure, in German');
    eq(await status.getAttribute('class'), 'status error', 'said as an error');
    eq((await api('GET', `/sagas/${sagas[1]}`, admin)).body.state, 'manual-review', 'nothing changed in the store');
    await person.axe(page, 'console bulk compensate result (de)');
    // bulk approve (the decision that resolves the approvals) of both approvals
    await page.locator('#lists-kind').selectOption('approvals');
    for (const id of approvals) await table.locator(`tr[data-key="${id}"] input.pick`).check();
    await page.locator('#lists button.bulk-approved').click();
    eq(await dialog.locator('h3').textContent(), '2 Freigaben erteilen?', 'the approval confirmation, in German');
    eq(await dialog.locator('.confirm-ok').textContent(), 'Freigeben (2)', 'its confirm button');
    eq(JSON.stringify((await dialog.locator('li').allTextContents()).sort()), JSON.stringify([...approvals].sort()), 'and which');
    await person.axe(page, 'console bulk approve confirmation (de)');
    await dialog.locator('.confirm-cancel').click();
    eq((await api('GET', `/approvals/${approvals[0]}`, admin)).body.state, 'pending', 'Abbrechen decides nothing');
    await page.locator('#lists button.bulk-approved').click();
    await page.locator('#lists dialog[open] .confirm-ok').focus();
    await page.keyboard.press('Enter');
    await waitFor('the bulk approve result', async () => (await status.textContent()) === '2 freigegeben.');
    for (const id of approvals) eq((await api('GET', `/approvals/${id}`, admin)).body.state, 'approved', 'approved in the store');
    await person.axe(page, 'console bulk approve result (de)');
    // the decided approval's timeline, in German
    await page.locator('#lists-state').selectOption('approved');
    await page.locator('#lists form button[type=submit]').click();
    await table.locator(`tr[data-key="${approvals[0]}"] button.open`).click();
    await page.locator('#timeline h3').waitFor();
    const lines = await page.locator('#timeline li').allTextContents();
    assert(/angefragt von vic für refunds\.large/.test(lines[0]), `asked, in German: ${lines.join(' | ')}`);
    assert(/freigegeben( von root)?$/.test(lines[1]), `decided, in German: ${lines.join(' | ')}`);
    await person.axe(page, 'console approval timeline (de)');
    await page.context().close();
  });

  /** What an operator reads in the lists panel: its text and accessible names, checked for ids and JSON. */
  async function scanLists(page, state) {
    const text = await page.locator('#lists').evaluate((el) => {
      const out = [];
      const walk = (n) => {
        if (n.nodeType === Node.TEXT_NODE) { out.push(n.textContent); return; }
        if (n.nodeType !== Node.ELEMENT_NODE || n.hidden || n.tagName === 'STYLE') return;
        for (const a of ['aria-label', 'title', 'placeholder']) if (n.getAttribute(a)) out.push(n.getAttribute(a));
        for (const ch of n.childNodes) walk(ch);
      };
      walk(el);
      return out.join('\n');
    });
    const bad = [];
    if (/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/i.test(text)) bad.push('a UUID');
    if (/\b[0-9a-f]{24}\b/.test(text)) bad.push('a message id');
    if (/[{[]\s*"/.test(text)) bad.push('raw JSON');
    if (/\bnull\b|\bundefined\b|\[object /.test(text)) bad.push('null / undefined');
    eq(bad.join(', '), '', `the ${state} view shows ${bad.join(', ')}: ${JSON.stringify(text.slice(0, 400))}`);
    await person.axe(page, state);
  }

  test('the_console_lists_messages_deliveries_and_timers_and_shows_a_message_timeline_in_english_and_german', [], async () => {
    const host = `wren${Date.now() % 100000}`;
    const made = [];
    for (const n of [1, 2]) made.push(curlCreate('booking', { host, guest: `Gina ${n}`, listing: `Studio ${n}`, note: '', long: '' }));
    eq((await api('POST', `/messages/${made[0].id}/action/accept`, { user: host })).status, 200, 'the host accepts the first');
    const words = {
      en: { kind: 'Messages', none: 'No messages match.', deliveries: 'No deliveries match.', timers: 'No timers match.',
        heading: 'Timeline of Gina 1 wants Studio 1', created: /created by ana$/, started: new RegExp(`action started by ${host}, step accept$`),
        ok: new RegExp(`action succeeded by ${host}, step accept, outcome succeeded$`), archived: new RegExp(`archived by ${host}$`),
        cols: 'Title|Template|From|To|State|Created' },
      de: { kind: 'Nachrichten', none: 'Keine Nachrichten gefunden.', deliveries: 'Keine Zustellungen gefunden.', timers: 'Keine Zeitgeber gefunden.',
        heading: 'Verlauf von Gina 1 wants Studio 1', created: /erstellt von ana$/, started: new RegExp(`Aktion begonnen von ${host}, Schritt accept$`),
        ok: new RegExp(`Aktion gelungen von ${host}, Schritt accept, Ergebnis succeeded$`), archived: new RegExp(`archiviert von ${host}$`),
        cols: 'Titel|Vorlage|Von|An|Zustand|Erstellt' },
    };
    for (const [locale, w] of Object.entries(words)) {
      const page = await newPage({ width: 1280, height: 900 });
      await page.goto(`${c.daemon().base}/ui/?user=root&permissions=is.admin&locale=${locale}`);
      const table = page.locator('#lists table');
      await page.locator('#lists-kind').selectOption('messages');
      eq(await page.locator('#lists-kind option:checked').textContent(), w.kind, `${locale}: the kind`);
      await page.locator('#lists-recipient').fill(host);
      await page.locator('#lists form button[type=submit]').click();
      // the filtered page replaces the unfiltered one: wait for it, not for rows both pages hold
      await waitFor(`${locale}: the host's messages`, async () => (await table.locator('tbody tr').count()) === made.length &&
        (await Promise.all(made.map((m) => table.locator(`tr[data-key="${m.id}"]`).count()))).every((n) => n === 1));
      eq((await table.locator('thead th').allTextContents()).join('|'), w.cols, `${locale}: the columns`);
      eq(await table.locator(`tr[data-key="${made[1].id}"] td.title`).textContent(), 'Gina 2 wants Studio 2', `${locale}: newest first, by its title`);
      eq(await table.locator(`tr[data-key="${made[0].id}"] td.state`).textContent(), 'archived', `${locale}: the accepted one is archived`);
      eq(await table.locator('tbody tr').count(), 2, `${locale}: only the host's messages`);
      await scanLists(page, `console messages (${locale})`);
      // the server-side title search and the state filter narrow it down
      await page.locator('#lists-q').fill('studio 2');
      await page.locator('#lists form button[type=submit]').click();
      await waitFor(`${locale}: the title search`, async () => (await table.locator('tbody tr').count()) === 1 &&
        (await table.locator('tbody tr').getAttribute('data-key')) === made[1].id);
      await page.locator('#lists-q').fill('');
      await page.locator('#lists-state').selectOption('cancelled');
      await page.locator('#lists form button[type=submit]').click();
      await waitFor(`${locale}: the empty state`, async () => { const x = await page.locator('#lists-status').textContent(); return x === w.none; });
      eq(await page.locator('#lists-status').textContent(), w.none, `${locale}: the empty state`);
      eq(await table.locator('tbody tr').count(), 0, `${locale}: nothing cancelled`);
      await scanLists(page, `console messages, none match (${locale})`);
      // the accepted message's timeline: who created it, who ran which action, how it ended
      await page.locator('#lists-state').selectOption('');
      await page.locator('#lists form button[type=submit]').click();
      await table.locator(`tr[data-key="${made[0].id}"] button.open`).click();
      await page.locator('#timeline h3').waitFor();
      eq(await page.locator('#timeline h3').textContent(), w.heading, `${locale}: the timeline heading`);
      const lines = await page.locator('#timeline li').allTextContents();
      assert(w.created.test(lines[0]), `${locale}: first its creation: ${lines.join(' | ')}`);
      for (const re of [w.started, w.ok, w.archived]) assert(lines.some((l) => re.test(l)), `${locale}: ${re} in ${lines.join(' | ')}`);
      assert(lines.findIndex((l) => w.started.test(l)) < lines.findIndex((l) => w.ok.test(l)), `${locale}: started before it succeeded`);
      await scanLists(page, `console message timeline (${locale})`);
      // deliveries and timers: none for these templates, said in words
      await page.locator('#lists-kind').selectOption('outbox');
      await waitFor(`${locale}: no deliveries`, async () => (await page.locator('#lists-status').textContent()) === w.deliveries);
      await page.locator('#lists-channel').fill('email');
      await page.locator('#lists form button[type=submit]').click();
      await waitFor(`${locale}: no email deliveries`, async () => (await page.locator('#lists-status').textContent()) === w.deliveries);
      await scanLists(page, `console deliveries, empty (${locale})`);
      await page.locator('#lists-kind').selectOption('timers');
      await page.locator('#lists-kind-filter').selectOption('expiry');
      await page.locator('#lists form button[type=submit]').click();
      await waitFor(`${locale}: no expiry timers`, async () => (await page.locator('#lists-status').textContent()) === w.timers);
      await scanLists(page, `console timers, empty (${locale})`);
      await page.context().close();
    }
    // a non-admin gets the words, not the data
    const page = await newPage({ width: 1280, height: 900 });
    await page.goto(`${c.daemon().base}/ui/?user=${host}`);
    await page.locator('#lists-kind').selectOption('messages');
    await waitFor('forbidden', async () => (await page.locator('#lists-status').textContent()) === 'You may not list messages.');
    eq(await page.locator('#lists table tbody tr').count(), 0, 'no rows for a non-admin');
    await page.context().close();
  });
}
