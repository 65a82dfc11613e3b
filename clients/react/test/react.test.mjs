// react.test.mjs — missive-react in a DOM (jsdom) with React 19: props become the element's
// attributes and properties, its events reach the callbacks, and useMissiveCounts() follows the
// counts from another component. The element here is a recording stand-in defined under the same
// tag (the real one is tested in a browser by tests/browser/); the wrapper is what is under test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JSDOM } from 'jsdom';

const dom = new JSDOM('<!doctype html><html><body><div id="app"></div><p id="badge"></p></body></html>');
for (const k of ['window', 'document', 'navigator', 'HTMLElement', 'customElements', 'CustomEvent', 'Event', 'Node'])
  Object.defineProperty(globalThis, k, { value: k === 'window' ? dom.window : dom.window[k], configurable: true, writable: true });
globalThis.IS_REACT_ACT_ENVIRONMENT = true;

const { createElement, act } = await import('react');
const { createRoot } = await import('react-dom/client');
const { MissiveInbox, useMissiveCounts, loadMissiveInbox } = await import('../dist/index.js');

const sets = [];
class Recording extends dom.window.HTMLElement {
  constructor() { super(); this._p = {}; }
  get token() { return this._p.token ?? null; }
  set token(v) { sets.push(['token', v]); this._p.token = v; }
  get getToken() { return this._p.getToken ?? null; }
  set getToken(v) { sets.push(['getToken', typeof v]); this._p.getToken = v; }
  get strings() { return this._p.strings ?? {}; }
  set strings(v) { sets.push(['strings', v]); this._p.strings = v; }
  get renderItem() { return this._p.renderItem ?? null; }
  set renderItem(v) { sets.push(['renderItem', typeof v]); this._p.renderItem = v; }
}

function Badge() {
  const c = useMissiveCounts();
  return createElement('span', { id: 'count' }, c ? `${c.unread} unread` : 'no counts yet');
}

test('load_missive_inbox_resolves_once_the_element_is_defined', async () => {
  const loaded = loadMissiveInbox('http://127.0.0.1:1');
  dom.window.customElements.define('missive-inbox', Recording);
  assert.equal(await loaded, Recording);
});

test('props_become_attributes_and_properties_and_events_reach_the_callbacks', async () => {
  const root = createRoot(document.getElementById('app'));
  const badge = createRoot(document.getElementById('badge'));
  const actions = [];
  const counted = [];
  const renderItem = () => document.createElement('b');
  const strings = { tabInbox: 'Messages' };
  await act(async () => {
    badge.render(createElement(Badge));
    root.render(createElement(MissiveInbox, {
      baseUrl: 'https://missive.example.com', locale: 'de', mode: 'popover', pageSize: 50, user: 'ana',
      token: 'jwt-1', strings, renderItem, className: 'inbox',
      onAction: (d) => actions.push(d), onCounts: (c) => counted.push(c),
    }));
  });
  const el = document.querySelector('missive-inbox');
  assert.ok(el instanceof Recording, 'the element is rendered');
  assert.equal(el.getAttribute('base-url'), 'https://missive.example.com');
  assert.equal(el.getAttribute('locale'), 'de');
  assert.equal(el.getAttribute('mode'), 'popover');
  assert.equal(el.getAttribute('page-size'), '50');
  assert.equal(el.getAttribute('user'), 'ana');
  assert.equal(el.getAttribute('class'), 'inbox');
  assert.equal(el.token, 'jwt-1');
  assert.equal(el.strings, strings);
  assert.equal(el.renderItem, renderItem);
  assert.equal(document.getElementById('count').textContent, 'no counts yet');

  await act(async () => {
    el.dispatchEvent(new CustomEvent('missive-action', { detail: { messageId: 'm1', actionCd: 'accept', ok: true, result: null } }));
    el.dispatchEvent(new CustomEvent('missive-counts', { detail: { count: 4, unseen: 2, unread: 3 } }));
  });
  assert.deepEqual(actions, [{ messageId: 'm1', actionCd: 'accept', ok: true, result: null }]);
  assert.deepEqual(counted, [{ count: 4, unseen: 2, unread: 3 }]);
  assert.equal(document.getElementById('count').textContent, '3 unread', 'useMissiveCounts re-renders another component');

  // a new token reaches the element; the latest callback is the one called
  const later = [];
  await act(async () => {
    root.render(createElement(MissiveInbox, { baseUrl: 'https://missive.example.com', token: 'jwt-2', onAction: (d) => later.push(d.actionCd) }));
  });
  assert.equal(el.token, 'jwt-2');
  assert.equal(el.getAttribute('locale'), null, 'a prop taken away leaves no attribute');
  await act(async () => { el.dispatchEvent(new CustomEvent('missive-action', { detail: { messageId: 'm2', actionCd: 'decline', ok: false } })); });
  assert.deepEqual(later, ['decline']);
  assert.equal(actions.length, 1, 'the old callback is not called');

  // unmounted: no listener is left behind
  await act(async () => root.unmount());
  await act(async () => { el.dispatchEvent(new CustomEvent('missive-action', { detail: { messageId: 'm3', actionCd: 'accept', ok: true } })); });
  assert.deepEqual(later, ['decline']);
  await act(async () => badge.unmount());
  assert.deepEqual(sets.filter(([k]) => k === 'token').map(([, v]) => v), ['jwt-1', 'jwt-2']);
});
