// person.test.mjs — the browser tests that look at the inbox as a person does: each asserts the
// text and state a user reads (tabs, toasts, dialogs, badges, empty states) in English and in at
// least one other language, runs axe-core (WCAG 2.2 AA) on every state it reaches, and scans the
// rendered DOM for what must never reach an end user (ids, template codes, raw JSON, server text).
// Registered by inbox.test.mjs, which owns the daemon, the browser and the runner.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];
const TEMPLATE_CODES = ['booking', 'booking-card', 'shared-task', 'refund', 'order', '__generic-notification__'];

export function register(c) {
  const { test, api, booking, curlCreate, openInbox, newPage, item, waitFor, assert, eq, sleep, imgDir } = c;

  /** axe-core on the page as it is now: zero WCAG 2.2 AA violations, or the list of them. */
  async function axe(page, state) {
    // injected through the DevTools protocol, so the page's CSP (no inline script) still holds
    if (!(await page.evaluate(() => typeof window.axe !== 'undefined'))) await page.evaluate(axeSource);
    const r = await page.evaluate((tags) => window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] }), AXE_TAGS);
    const v = r.violations.map((x) => `${x.id} (${x.impact}): ${x.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
    eq(v.length, 0, `axe violations in "${state}": ${v.join(' | ')}`);
  }

  /** Everything an end user can read or hear in the inbox: its text and its accessible names. */
  async function readable(page, sel = 'missive-inbox') {
    return page.locator(sel).first().evaluate((el) => {
      const out = [];
      const walk = (n) => {
        if (n.nodeType === Node.TEXT_NODE) { out.push(n.textContent); return; }
        if (n.nodeType !== Node.ELEMENT_NODE && n.nodeType !== Node.DOCUMENT_FRAGMENT_NODE) return;
        if (n.nodeType === Node.ELEMENT_NODE) {
          if (n.tagName === 'STYLE' || n.tagName === 'SCRIPT' || n.hidden) return;
          for (const a of ['aria-label', 'title', 'alt', 'placeholder']) if (n.getAttribute(a)) out.push(n.getAttribute(a));
          if (n.tagName === 'INPUT') out.push(n.value || '');
        }
        for (const ch of n.childNodes) walk(ch);
      };
      walk(el.shadowRoot);
      return out.join('\n');
    });
  }

  /** No id, attempt UUID, template code, raw JSON or server-side error text in what a person reads. */
  async function scan(page, state, sel) {
    const text = await readable(page, sel);
    const bad = [];
    if (/\b[0-9a-f]{24}\b/.test(text)) bad.push('a message id');
    if (/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/i.test(text)) bad.push('a UUID');
    for (const cd of TEMPLATE_CODES) if (new RegExp(`(^|[^\\w-])${cd.replace(/[-_]/g, '\\$&')}($|[^\\w-])`).test(text)) bad.push(`the template code ${cd}`);
    if (/[{[]\s*"/.test(text)) bad.push('raw JSON');
    if (/\bnull\b|\bundefined\b|\[object /.test(text)) bad.push('null / undefined');
    if (/not found|https?:\/\/|invalid_argument|_[a-z]+_/.test(text)) bad.push('server text');
    eq(bad.join(', '), '', `the ${state} view shows ${bad.join(', ')}: ${JSON.stringify(text.slice(0, 600))}`);
  }

  /** What a person would check of a state: readable text only, and no accessibility violation. */
  async function looks(page, state, sel) {
    await scan(page, state, sel);
    await axe(page, state);
  }

  const shadowText = (page, css) => page.locator(`missive-inbox ${css}`).first().textContent();
  const focusedClass = (page) => page.locator('missive-inbox').first().evaluate((el) => {
    const a = el.shadowRoot.activeElement;
    return a ? `${a.getAttribute('class') || ''}|${a.dataset.tab || ''}` : '';
  });

  test('the_inbox_speaks_english_german_and_arabic_right_to_left_with_relative_times_and_labels', [], async () => {
    const want = {
      en: { tabs: ['Inbox', 'Unread', 'Snoozed', 'Archived'], markAll: 'Mark all read', now: 'now', empty: 'Nothing archived yet.', done: 'Done', dir: 'ltr', label: 'Booking request' },
      de: { tabs: ['Posteingang', 'Ungelesen', 'Zurückgestellt', 'Archiv'], markAll: 'Alle als gelesen markieren', now: 'jetzt', empty: 'Noch nichts archiviert.', done: 'Erledigt', dir: 'ltr', label: 'Buchungsanfrage' },
      ar: { tabs: ['الوارد', 'غير مقروءة', 'مؤجلة', 'المؤرشفة'], markAll: 'تعليم الكل كمقروء', now: 'الآن', empty: 'لا يوجد شيء مؤرشف بعد.', done: 'تم', dir: 'rtl', label: 'Booking request' },
    };
    for (const [locale, w] of Object.entries(want)) {
      const user = `lang-${locale}`;
      const m = booking(user, { guest: 'Ana Souza' });
      const page = await openInbox(user, { locale: locale === 'de' ? 'de-DE' : locale });
      const li = item(page, m.id);
      eq(JSON.stringify(await page.locator('missive-inbox [role=tab]').allTextContents()), JSON.stringify(w.tabs), `${locale} tabs`);
      eq(await shadowText(page, '.mark-all'), w.markAll, `${locale} mark all read`);
      eq(await li.locator('.time').textContent(), w.now, `${locale} relative time`);
      // the template's label in the reader's language (its locales' "label"), never its code
      await waitFor(`${locale} label`, async () => (await li.locator('.kind').textContent()) === w.label);
      eq(await li.locator('.avatar').textContent(), 'AN', `${locale}: initials of the sender`);
      eq(await page.locator('missive-inbox .root').getAttribute('dir'), w.dir, `${locale} direction`);
      await looks(page, `${locale} inbox`);
      await page.locator('missive-inbox [role=tab][data-tab=archived]').click();
      await page.waitForSelector('missive-inbox[data-ready]');
      eq(await shadowText(page, 'li.empty'), w.empty, `${locale} empty archive`);
      await looks(page, `${locale} empty archive`);
      await api('POST', `/messages/${m.id}/action/accept`, { user });
      await page.locator('missive-inbox [role=tab][data-tab=inbox]').click();
      await page.locator('missive-inbox [role=tab][data-tab=archived]').click();
      await li.waitFor();
      eq(await li.locator('.tag').textContent(), w.done, `${locale} archived tag`);
      await page.context().close();
    }
    // the strings property overrides any catalogue entry
    const page = await openInbox('lang-en', { locale: 'fr' });
    eq(await shadowText(page, '[role=tab][data-tab=inbox]'), 'Réception', 'fr tab');
    await page.locator('missive-inbox').evaluate((el) => { el.strings = { tabInbox: 'Courrier' }; });
    eq(await shadowText(page, '[role=tab][data-tab=inbox]'), 'Courrier', 'an overridden string');
    eq(await shadowText(page, '[role=tab][data-tab=unread]'), 'Non lues', 'the others stay');
    await page.context().close();
  });

  test('tabs_and_actions_work_by_keyboard_alone_and_results_are_words_in_two_languages', ['state'], async () => {
    for (const [locale, w] of Object.entries({
      en: { unreadEmpty: 'No unread messages.', dialogOk: 'Accept', cancel: 'Cancel', done: 'Done.' },
      de: { unreadEmpty: 'Keine ungelesenen Nachrichten.', dialogOk: 'Accept', cancel: 'Abbrechen', done: 'Erledigt.' },
    })) {
      const user = `keys-${locale}`;
      const m = booking(user, { guest: 'Keyboard Kim' });
      const page = await openInbox(user, { locale });
      await page.locator('missive-inbox [role=tab][data-tab=inbox]').focus();
      await page.keyboard.press('ArrowRight');
      eq(await page.locator('missive-inbox [role=tab][data-tab=unread]').getAttribute('aria-selected'), 'true', `${locale}: ArrowRight selects Unread`);
      eq((await focusedClass(page)).split('|')[1], 'unread', `${locale}: focus follows the tab`);
      await item(page, m.id).waitFor();
      await page.keyboard.press('End');
      await page.waitForSelector('missive-inbox[data-ready]');
      eq((await focusedClass(page)).split('|')[1], 'archived', `${locale}: End goes to the last tab`);
      await page.keyboard.press('Home');
      await item(page, m.id).waitFor();
      await looks(page, `${locale} inbox tab`);
      // Tab from the tabs reaches the first row; Enter opens it; the dialog is all keyboard
      await item(page, m.id).locator('.summary').focus();
      await page.keyboard.press('Enter');
      const accept = item(page, m.id).locator('button[data-action="accept"]');
      await accept.waitFor();
      await accept.focus();
      await page.keyboard.press('Enter');
      const dialog = page.locator('missive-inbox dialog[open]');
      await dialog.waitFor();
      eq(await dialog.locator('h3').textContent(), 'Accept Keyboard Kim?', `${locale} dialog title`);
      eq(await dialog.locator('.confirm-message').textContent(), 'Keyboard Kim is told right away.', `${locale} dialog message`);
      eq(await dialog.locator('.confirm-cancel').textContent(), w.cancel, `${locale} cancel button`);
      assert(!/null/.test(await dialog.textContent()), `${locale}: a dialog without notes prints no "null"`);
      await looks(page, `${locale} confirmation dialog`);
      eq((await focusedClass(page)).split('|')[0].split(' ')[0], 'confirm-ok', `${locale}: focus is on the confirm button`);
      await page.keyboard.press('Enter');
      await waitFor('the result', async () => (await item(page, m.id).locator('.outcome.ok').count()) === 1);
      eq(await item(page, m.id).locator('.outcome.ok').textContent(), w.done, `${locale}: no resultTemplate → a plain Done`);
      await looks(page, `${locale} action done`);
      // the Unread tab is empty now: it says so
      await page.locator('missive-inbox [role=tab][data-tab=unread]').click();
      await page.waitForSelector('missive-inbox[data-ready]');
      eq(await shadowText(page, 'li.empty'), w.unreadEmpty, `${locale} unread empty state`);
      await page.context().close();
    }
  });

  test('dismiss_offers_undo_which_brings_the_message_back_in_english_and_german', ['state'], async () => {
    for (const [locale, w] of Object.entries({ en: ['Dismissed.', 'Undo', 'Back in your inbox.'], de: ['Ausgeblendet.', 'Rückgängig', 'Wieder im Posteingang.'] })) {
      const user = `undo-${locale}`;
      const m = booking(user, { guest: 'Undo Uma' });
      const page = await openInbox(user, { locale });
      const li = item(page, m.id);
      await li.locator('.dismiss-x').click();
      await li.waitFor({ state: 'detached' });
      eq(await shadowText(page, '.toast-text'), w[0], `${locale} toast`);
      eq(await shadowText(page, '.toast .undo'), w[1], `${locale} undo button`);
      assert((await api('GET', `/messages/${m.id}`, { user })).body.viewer.dismissedAt, 'dismissed in the store');
      await looks(page, `${locale} dismissed with undo`);
      await page.locator('missive-inbox .toast .undo').focus();
      await page.keyboard.press('Enter');
      await li.waitFor();
      eq(await shadowText(page, '.toast-text'), w[2], `${locale} restored`);
      eq((await api('GET', `/messages/${m.id}`, { user })).body.viewer.dismissedAt, null, 'undismissed in the store');
      eq((await focusedClass(page)).split('|')[0], 'summary', `${locale}: focus is on the restored row`);
      await page.context().close();
    }
  });

  test('snooze_by_keyboard_leaves_the_inbox_until_tomorrow_and_unsnooze_brings_it_back', [], async () => {
    for (const [locale, w] of Object.entries({
      en: { menu: ['Later today', 'Tomorrow', 'Next week', 'Pick a date…'], snoozed: /^Snoozed until .+\.$/, tab: 'Snoozed', unsnooze: 'Unsnooze', back: 'Back in your inbox.' },
      de: { menu: ['Später heute', 'Morgen', 'Nächste Woche', 'Datum wählen…'], snoozed: /^Zurückgestellt bis .+\.$/, tab: 'Zurückgestellt', unsnooze: 'Zurückholen', back: 'Wieder im Posteingang.' },
    })) {
      const user = `snooze-${locale}`;
      const m = booking(user, { guest: 'Sleepy Sam' });
      const page = await newPage();
      assert(c.has.snooze, 'the daemon answers POST /messages/{id}/snooze');
      await page.goto(`${c.daemon().base}/ui/example.html?user=${user}&locale=${locale}`);
      await page.waitForSelector('missive-inbox[data-ready]');
      const li = item(page, m.id);
      await li.locator('.summary').focus();
      await page.keyboard.press('Enter');
      // what a person sees before reaching for Snooze: the message open, read, with its actions
      await li.locator('button.action').first().waitFor();
      await waitFor('the opened message shows as read', async () => !/\bunread\b/.test(await li.getAttribute('class')));
      const snoozeBtn = li.locator('button.snooze');
      await snoozeBtn.focus();
      await page.keyboard.press('Enter');
      const menu = page.locator('missive-inbox [role=menu]');
      await menu.locator('[role=menuitem]').first().waitFor(); // the items, not only their list
      eq(JSON.stringify(await menu.locator('[role=menuitem]').allTextContents()), JSON.stringify(w.menu), `${locale} snooze menu`);
      await waitFor('the menu button says it is open', async () => (await snoozeBtn.getAttribute('aria-expanded')) === 'true');
      await looks(page, `${locale} snooze menu`);
      await page.keyboard.press('Escape');
      await menu.waitFor({ state: 'detached' });
      await waitFor('Escape returns focus to the snooze button', async () => (await focusedClass(page)).split('|')[0] === 'link snooze');
      await page.keyboard.press('Enter');
      await page.keyboard.press('ArrowDown');
      await page.keyboard.press('Enter');
      await li.waitFor({ state: 'detached' });
      assert(w.snoozed.test(await shadowText(page, '.toast-text')), `${locale} snoozed toast: ${await shadowText(page, '.toast-text')}`);
      const tomorrow9 = new Date(); tomorrow9.setDate(tomorrow9.getDate() + 1); tomorrow9.setHours(9, 0, 0, 0);
      eq((await api('GET', `/messages/${m.id}`, { user })).body.viewer.snoozedUntil, tomorrow9.getTime(), 'the store has it snoozed until tomorrow 09:00');
      eq((await api('GET', '/messages/count', { user })).body.count, 0, 'it left the count');
      eq((await api('GET', '/messages/count?snoozed=true', { user })).body.count, 1, 'snoozed=true counts it');
      await looks(page, `${locale} snoozed with undo`);
      await page.locator('missive-inbox [role=tab][data-tab=snoozed]').click();
      await li.waitFor();
      eq(await shadowText(page, '[role=tab][data-tab=snoozed]'), w.tab, `${locale} snoozed tab`);
      await li.locator('.summary').click();
      eq(await li.locator('button.unsnooze').textContent(), w.unsnooze, `${locale} unsnooze button`);
      await looks(page, `${locale} snoozed tab`);
      await li.locator('button.unsnooze').click();
      await li.waitFor({ state: 'detached' });
      eq(await shadowText(page, '.toast-text'), w.back, `${locale} back in the inbox`);
      eq((await api('GET', `/messages/${m.id}`, { user })).body.viewer.snoozedUntil, null, 'unsnoozed in the store');
      eq((await api('GET', '/messages/count', { user })).body.count, 1, 'back in the count');
      await page.locator('missive-inbox [role=tab][data-tab=inbox]').click();
      await li.waitFor();
      await page.context().close();
    }
  });

  test('popover_mode_bell_counts_live_arrivals_opens_by_keyboard_and_escape_returns_focus', ['state', 'stream'], async () => {
    for (const [locale, w] of Object.entries({ en: ['Notifications, 0 unread', 'Notifications, 1 unread'], de: ['Benachrichtigungen, 0 ungelesen', 'Benachrichtigungen, 1 ungelesen'] })) {
      const user = `bell-${locale}`;
      const page = await openInbox(user, { locale, mode: 'popover' });
      await page.waitForSelector('missive-inbox[data-live="stream"]');
      const bell = page.locator('missive-inbox button.bell');
      const panel = page.locator('missive-inbox .panel');
      assert(await panel.isHidden(), 'the panel starts closed');
      eq(await bell.getAttribute('aria-label'), w[0], `${locale} bell label`);
      await looks(page, `${locale} popover closed`);
      const m = booking(user, { guest: 'Live Lou' });
      await waitFor('the bell badge', async () => (await bell.locator('.badge').textContent()) === '1', 8000);
      eq(await bell.getAttribute('aria-label'), w[1], `${locale} bell label after the arrival`);
      await bell.focus();
      await page.keyboard.press('Enter');
      await panel.waitFor();
      eq(await bell.getAttribute('aria-expanded'), 'true', 'the bell says the panel is open');
      eq((await focusedClass(page)).split('|')[1], 'inbox', 'focus moves to the tabs');
      await item(page, m.id).waitFor();
      assert(/^Live Lou wants Flat \d+$/.test(await item(page, m.id).locator('.title').evaluate((e) => e.firstChild.textContent)), 'the arrival is listed');
      await looks(page, `${locale} popover open`);
      await page.keyboard.press('Escape');
      await panel.waitFor({ state: 'hidden' });
      eq((await focusedClass(page)).split('|')[0], 'bell', 'Escape returns focus to the bell');
      // a click outside closes it too
      await bell.click();
      await panel.waitFor();
      await page.mouse.click(5, 5);
      await panel.waitFor({ state: 'hidden' });
      await page.context().close();
    }
  });

  test('render_item_draws_custom_rows_and_avatars_come_from_display_or_initials', [], async () => {
    const m = booking('custom', { guest: 'Row Rita' });
    const page = await openInbox('custom');
    await page.locator('missive-inbox').evaluate((el) => {
      el.renderItem = (msg, ctx) => {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'my-row';
        b.textContent = `${ctx.label}: ${ctx.title} (${ctx.time})`;
        b.addEventListener('click', ctx.toggle);
        return b;
      };
    });
    const row = item(page, m.id).locator('.my-row');
    assert(/^Booking request: Row Rita wants Flat \d+ \(now\)$/.test(await row.textContent()), `the custom row: ${await row.textContent()}`);
    await row.click();
    await item(page, m.id).locator('button[data-action="accept"]').waitFor();
    await looks(page, 'custom row open');
    await page.context().close();
  });

  test('the_component_stays_under_40_kib_gzipped_and_renders_50_messages', [], async () => {
    const js = Buffer.from(await (await fetch(`${c.daemon().base}/ui/missive-inbox.js`)).arrayBuffer());
    const gz = zlib.gzipSync(js, { level: 9 }).length;
    console.log(`  missive-inbox.js: ${js.length} bytes, ${gz} bytes gzipped (limit 40960)`);
    assert(gz < 40 * 1024, `the component is ${gz} bytes gzipped`);
    for (let i = 0; i < 50; i++) booking('fifty');
    const page = await openInbox('fifty', { pageSize: 50 });
    eq(await page.locator('missive-inbox li.item').count(), 50, 'fifty rows');
    const ms = await page.locator('missive-inbox').evaluate((el) => el.lastRenderMs);
    const again = await page.locator('missive-inbox').evaluate(async (el) => { await el.refresh(); return el.lastRenderMs; });
    console.log(`  first render of 50 messages: ${ms.toFixed(1)} ms (page load), ${again.toFixed(1)} ms (a refresh)`);
    await page.context().close();
  });


  /** Preferences routes: the daemon's when it has them, else a page-level stand-in of the same contract. */
  async function preferenceRoutes(page, has) {
    if (has.preferences) return { stubbed: false, puts: null };
    const puts = [];
    let stored = { channels: { email: true }, categories: {}, digest: {} };
    await page.route(/\/preferences$/, async (route) => {
      const r = route.request();
      if (r.method() === 'PUT') {
        const body = r.postDataJSON();
        puts.push(body);
        const known = new Set(['email', 'sms', 'inbox']);
        const bad = Object.keys(body.channels || {}).find((ch) => !known.has(ch));
        if (bad) {
          await route.fulfill({ status: 400, contentType: 'application/json', body: JSON.stringify({ error: { code: 'invalid_argument', message: `channels.${bad} is not a channel` } }) });
          return;
        }
        stored = body;
      }
      await route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(stored) });
    });
    return { stubbed: true, puts };
  }

  test('preferences_by_keyboard_turn_a_category_off_choose_a_digest_and_a_language', [], async () => {
    for (const [locale, w] of Object.entries({
      en: { title: 'Notification preferences', cols: ['Category', 'In the app', 'Email', 'SMS'], rows: ['All messages', 'Bookings', 'Payments'], saved: 'Saved.', daily: 'One email per day' },
      de: { title: 'Benachrichtigungseinstellungen', cols: ['Kategorie', 'In der App', 'E-Mail', 'SMS'], rows: ['Alle Nachrichten', 'Bookings', 'Payments'], saved: 'Gespeichert.', daily: 'Eine E-Mail pro Tag' },
    })) {
      const user = `prefs-${locale}`;
      const page = await newPage();
      const routes = await preferenceRoutes(page, c.has);
      await page.goto(`${c.daemon().base}/ui/example-preferences.html?user=${user}&locale=${locale}`);
      await page.waitForSelector('missive-preferences[data-ready]');
      const el = page.locator('missive-preferences');
      eq(await el.locator('h2').textContent(), w.title, `${locale} heading`);
      eq(JSON.stringify(await el.locator('thead th').allTextContents()), JSON.stringify(w.cols), `${locale} columns`);
      eq(JSON.stringify(await el.locator('tbody th').allTextContents()), JSON.stringify(w.rows), `${locale} rows`);
      eq(await el.locator('tbody tr').first().locator('input').first().isDisabled(), true, 'the inbox cannot be turned off');
      await looks(page, `${locale} preferences`, 'missive-preferences');
      // keyboard only: Space unticks Email for Bookings; the digest and the language by arrow keys
      await el.locator('input[data-row="bookings"][data-channel="email"]').focus();
      await page.keyboard.press('Space');
      await el.locator('select.digest').focus();
      await el.locator('select.digest').selectOption({ label: w.daily });
      await el.locator('select.language').selectOption('pt');
      await el.locator('button.save').focus();
      await page.keyboard.press('Enter');
      await waitFor('saved', async () => (await el.locator('.toast').textContent()) === w.saved);
      const want = { channels: { email: true, sms: true }, categories: { bookings: { email: false } }, digest: { email: { everyMs: 86400000 } }, locale: 'pt' };
      const got = routes.stubbed ? routes.puts[0] : (await api('GET', '/preferences', { user })).body;
      eq(JSON.stringify({ channels: got.channels, categories: got.categories, digest: got.digest, locale: got.locale }), JSON.stringify(want), `${locale}: what was stored`);
      eq(await el.locator('input[data-row="bookings"][data-channel="email"]').isChecked(), false, 'the form shows what was saved');
      await looks(page, `${locale} preferences saved`, 'missive-preferences');
      await page.context().close();
    }
  });

  void imgDir;
  void curlCreate;
  void sleep;
  return { looks, scan, axe };
}
