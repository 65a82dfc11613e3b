// example.js — the example host pages' only script: picks the identity (and the element's language
// and mode) from the query string so one page serves every demo user (?user=ana&roles=finance&locale=de,
// or ?token=JWT). A real application would set the element's token or getToken from its own session.
const q = new URLSearchParams(location.search);
for (const el of document.querySelectorAll('missive-inbox, missive-preferences')) {
  for (const name of ['user', 'roles', 'permissions', 'tenant', 'base-url', 'page-size', 'poll-ms', 'locale', 'mode', 'channels', 'categories']) {
    if (q.has(name)) el.setAttribute(name, q.get(name));
  }
  if (q.has('token')) {
    el.removeAttribute('user');
    el.token = q.get('token');
  }
}
