// console-strings.js — the words of the console's lists and timelines, in English and German. The
// language is the page's `?locale=` (then the browser's); anything not translated falls back to
// English. t(key, {n}) fills {n}.
const EN = {
  lists: 'Lists', refresh: 'Refresh', show: 'Show', state: 'State', search: 'Search', apply: 'Apply', any: 'any',
  searchHint: 'id, name, who…', loading: 'Loading…', selectAll: 'Select all shown', select: 'Select {id}',
  shown: '{what}: {n} shown', none: 'No {what} match.', forbidden: 'You may not list {what}.',
  absent: 'This daemon does not offer the {what} list.', selected: '{n} selected', pickRows: 'Select rows for a bulk action',
  cancel: 'Cancel', eachOnItsOwn: 'Each is sent on its own; the list says how each went.',
  timelineOf: 'Timeline of {id}', timelineEmpty: 'Nothing recorded yet.', timelineAbsent: 'No timeline is available for this item.',
  k_sagas: 'Sagas', k_approvals: 'Approvals', k_messages: 'Messages', k_outbox: 'Deliveries', k_timers: 'Timers',
  c_sagaId: 'Saga', c_definition: 'Definition', c_state: 'State', c_updatedAt: 'Updated', c_capability: 'Capability',
  c_principalId: 'Asked by', c_createdAt: 'Created', c_title: 'Title', c_templateCd: 'Template', c_fromUser: 'From',
  c_toUser: 'To', c_actionState: 'State', c_channel: 'Channel', c_recipient: 'Recipient', c_attempts: 'Attempts',
  c_kind: 'Kind', c_ref: 'For', c_dueAt: 'Due', f_templateCd: 'Template', f_sender: 'From', f_recipient: 'To',
  f_q: 'Title contains', f_channel: 'Channel', f_kind: 'Kind',
  b_resume: 'Resume', b_compensate: 'Compensate', b_approved: 'Approve', b_denied: 'Deny',
  e_created: 'created', e_delivered: 'delivered', e_updated: 'changed', e_viewer: 'seen or marked', e_reminded: 'reminded',
  e_actionStarted: 'action started', e_actionFailed: 'action failed', e_actionSucceeded: 'action succeeded',
  e_approvalRequested: 'approval asked', e_approvalDecided: 'approval decided', e_cancelled: 'cancelled', e_archived: 'archived',
  e_sagaStarted: 'started', e_stepStarted: 'step started', e_effect: 'step effect', e_stepFinished: 'step ended',
  e_compensation: 'compensation', e_sagaFinished: 'ended', by: 'by {who}', step: 'step {name}', attempts: 'attempt {n}',
  outcome: 'outcome {what}',
};
const DE = {
  lists: 'Listen', refresh: 'Aktualisieren', show: 'Zeigen', state: 'Zustand', search: 'Suche', apply: 'Anwenden', any: 'alle',
  searchHint: 'ID, Name, wer…', loading: 'Wird geladen…', selectAll: 'Alle gezeigten auswählen', select: '{id} auswählen',
  shown: '{what}: {n} gezeigt', none: 'Keine {what} gefunden.', forbidden: 'Sie dürfen {what} nicht auflisten.',
  absent: 'Dieser Dienst bietet die Liste {what} nicht an.', selected: '{n} ausgewählt', pickRows: 'Zeilen für eine Sammelaktion auswählen',
  cancel: 'Abbrechen', eachOnItsOwn: 'Jede wird einzeln gesendet; die Liste zeigt, wie es ausging.',
  timelineOf: 'Verlauf von {id}', timelineEmpty: 'Noch nichts aufgezeichnet.', timelineAbsent: 'Für diesen Eintrag gibt es keinen Verlauf.',
  k_sagas: 'Sagas', k_approvals: 'Freigaben', k_messages: 'Nachrichten', k_outbox: 'Zustellungen', k_timers: 'Zeitgeber',
  c_sagaId: 'Saga', c_definition: 'Definition', c_state: 'Zustand', c_updatedAt: 'Geändert', c_capability: 'Befugnis',
  c_principalId: 'Angefragt von', c_createdAt: 'Erstellt', c_title: 'Titel', c_templateCd: 'Vorlage', c_fromUser: 'Von',
  c_toUser: 'An', c_actionState: 'Zustand', c_channel: 'Kanal', c_recipient: 'Empfänger', c_attempts: 'Versuche',
  c_kind: 'Art', c_ref: 'Für', c_dueAt: 'Fällig', f_templateCd: 'Vorlage', f_sender: 'Von', f_recipient: 'An',
  f_q: 'Titel enthält', f_channel: 'Kanal', f_kind: 'Art',
  b_resume: 'Fortsetzen', b_compensate: 'Kompensieren', b_approved: 'Freigeben', b_denied: 'Ablehnen',
  e_created: 'erstellt', e_delivered: 'zugestellt', e_updated: 'geändert', e_viewer: 'gesehen oder markiert', e_reminded: 'erinnert',
  e_actionStarted: 'Aktion begonnen', e_actionFailed: 'Aktion fehlgeschlagen', e_actionSucceeded: 'Aktion gelungen',
  e_approvalRequested: 'Freigabe angefragt', e_approvalDecided: 'Freigabe entschieden', e_cancelled: 'storniert', e_archived: 'archiviert',
  e_sagaStarted: 'begonnen', e_stepStarted: 'Schritt begonnen', e_effect: 'Wirkung des Schritts', e_stepFinished: 'Schritt beendet',
  e_compensation: 'Kompensation', e_sagaFinished: 'beendet', by: 'von {who}', step: 'Schritt {name}', attempts: 'Versuch {n}',
  outcome: 'Ergebnis {what}',
};
const CATALOGUES = { en: EN, de: DE };

/** The console's language: ?locale=, else the browser's, reduced to one the console speaks. */
export function consoleLocale() {
  const asked = new URLSearchParams(location.search).get('locale') || globalThis.navigator?.language || 'en';
  const lang = String(asked).toLowerCase().split(/[-_]/)[0];
  return CATALOGUES[lang] ? lang : 'en';
}

export function strings(locale) {
  const s = { ...EN, ...(CATALOGUES[locale] || {}) };
  return (key, vars = {}) => String(s[key] ?? key).replace(/\{(\w+)\}/g, (_, k) => (vars[k] ?? ''));
}
