// types-check.ts — compiled with tsc --strict (never run): a typical application's use of the
// bindings type-checks, and a wrong prop does not.
import { createElement } from 'react';
import { MissiveInbox, useMissiveCounts, type MissiveActionDetail } from '../src/index.js';

export function App() {
  const counts = useMissiveCounts();
  const unread: number | undefined = counts?.unread;
  return [
    createElement(MissiveInbox, {
      baseUrl: 'https://missive.example.com', getToken: async () => 'jwt', locale: 'de', mode: 'popover',
      onAction: (d: MissiveActionDetail) => void d.actionCd, onCounts: (c) => void c.unseen,
      renderItem: (m, ctx) => { const b = document.createElement('button'); b.textContent = `${ctx.label} ${String(m.id)}`; return b; },
    }),
    // @ts-expect-error mode is inline or popover
    createElement(MissiveInbox, { mode: 'sidebar' }),
    unread,
  ];
}
