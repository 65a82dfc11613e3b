// console-oidc.js — the console's sign-in with an OpenID Connect provider: the authorization code
// flow with PKCE (S256), as a public client in the browser. The daemon says which provider
// (GET /ui/oidc.json, from "ui.oidc"); the provider's endpoints come from its discovery document
// ({issuer}/.well-known/openid-configuration). The token the daemon then checks (auth.mode "jwt"
// on that issuer) is the access token when it is a JWT, else the ID token. The code verifier,
// state and nonce live in sessionStorage only between the redirect and its answer.

const PENDING = 'missive-console-oidc-pending';

/** A sign-in that did not work, in words for the operator. */
export class SignInError extends Error {
  /** key names the words in console-strings.js; the message is the English of them. */
  constructor(key, message) { super(message); this.key = key; }
}

/** {issuer, clientId} when the daemon has "ui.oidc", else null. */
export async function oidcSettings() {
  try {
    const r = await fetch('/ui/oidc.json', { cache: 'no-store' });
    if (!r.ok) return null;
    const s = await r.json();
    return s && s.issuer && s.clientId ? s : null;
  } catch {
    return null;
  }
}

async function discover(issuer) {
  let d;
  try {
    const r = await fetch(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`, { cache: 'no-store' });
    d = r.ok ? await r.json() : null;
  } catch {
    d = null;
  }
  if (!d || !d.authorization_endpoint || !d.token_endpoint) throw new SignInError('o_unreachable', 'The identity provider cannot be reached or does not describe itself; try again later.');
  if (d.issuer && d.issuer.replace(/\/+$/, '') !== issuer.replace(/\/+$/, '')) throw new SignInError('o_otherIssuer', 'The identity provider names another issuer than the one configured.');
  return d;
}

function b64url(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomText(n) { return b64url(crypto.getRandomValues(new Uint8Array(n))); }

/** The claims of a JWT (not verified here: the daemon verifies every request's token). */
export function jwtClaims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(decodeURIComponent(escape(atob(part))));
  } catch {
    return null;
  }
}

function redirectUri() { return `${location.origin}${location.pathname}`; }

/** Leaves for the provider's sign-in page. */
export async function signIn(settings) {
  const d = await discover(settings.issuer);
  const verifier = randomText(48);
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const pending = { verifier, state: randomText(16), nonce: randomText(16) };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const u = new URL(d.authorization_endpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code', client_id: settings.clientId, redirect_uri: redirectUri(), scope: 'openid profile',
    state: pending.state, nonce: pending.nonce, code_challenge: challenge, code_challenge_method: 'S256',
  })) u.searchParams.set(k, v);
  location.assign(u.toString());
}

/**
 * On the provider's answer (?code=…&state=… or ?error=…): exchanges the code for tokens and
 * resolves to {token, name, expiresAt}; without an answer in the URL resolves to null.
 */
export async function completeSignIn(settings) {
  const q = new URLSearchParams(location.search);
  if (!q.has('code') && !q.has('error')) return null;
  let pending = null;
  try { pending = JSON.parse(sessionStorage.getItem(PENDING) || 'null'); } catch { pending = null; }
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, '', location.pathname);
  if (q.has('error')) throw new SignInError('o_refused', 'The identity provider did not sign you in.');
  if (!pending || pending.state !== q.get('state')) throw new SignInError('o_foreign', 'This sign-in answer does not belong to this page. Sign in again.');
  const d = await discover(settings.issuer);
  let t = null;
  try {
    const r = await fetch(d.token_endpoint, {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: q.get('code'), redirect_uri: redirectUri(),
        client_id: settings.clientId, code_verifier: pending.verifier }),
    });
    t = r.ok ? await r.json() : null;
  } catch {
    t = null;
  }
  if (!t || (!t.access_token && !t.id_token)) throw new SignInError('o_noToken', 'The identity provider did not issue a token. Sign in again.');
  const id = t.id_token ? jwtClaims(t.id_token) : null;
  if (id && id.nonce !== pending.nonce) throw new SignInError('o_otherNonce', 'The identity provider answered for another sign-in. Sign in again.');
  const token = t.access_token && jwtClaims(t.access_token) ? t.access_token : t.id_token;
  const claims = jwtClaims(token) || {};
  const who = (id && (id.preferred_username || id.name)) || claims.preferred_username || claims.name || claims.sub || '';
  return { token, name: String(who), expiresAt: claims.exp ? claims.exp * 1000 : null };
}
