// example.js — the example host page's only script: picks the identity from the query string so one
// page serves every demo user (?user=ana&roles=finance, or ?token=JWT). A real application would
// set the element's token or getToken from its own session instead.
const q = new URLSearchParams(location.search);
const inbox = document.querySelector('missive-inbox');
for (const name of ['user', 'roles', 'permissions', 'tenant', 'base-url', 'page-size', 'poll-ms']) {
  if (q.has(name)) inbox.setAttribute(name, q.get(name));
}
if (q.has('token')) {
  inbox.removeAttribute('user');
  inbox.token = q.get('token');
}
