// webhook.ts — verifying a webhook missive sent (Standard Webhooks): the signed content is
// "{webhook-id}.{webhook-timestamp}.{raw body}", each `v1,<base64>` entry of webhook-signature is
// an HMAC-SHA256 of it under one of the sender's secrets (several during a rotation). A request
// is genuine when any entry matches any of our secrets, compared in constant time, and its
// timestamp is within the tolerance (5 minutes) of our clock, so a captured call cannot be
// replayed later.

import { webcrypto } from './webcrypto.js';

/** A secret as configured on the server: `whsec_<base64>` (decoded) or any other string (its
 * UTF-8 bytes), or raw bytes. */
export type WebhookSecret = string | Uint8Array;

export type HeaderSource =
  | Headers
  | Record<string, string | string[] | undefined>
  | Iterable<[string, string]>;

export interface VerifyOptions {
  /** Allowed distance between webhook-timestamp and now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Now, in milliseconds since the epoch (default Date.now()). */
  now?: number;
}

const encoder = new TextEncoder();

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  if (Symbol.iterator in Object(headers)) {
    for (const [k, v] of headers as Iterable<[string, string]>) if (k.toLowerCase() === name) return v;
    return undefined;
  }
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(' ') : v;
  }
  return undefined;
}

function base64Decode(s: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 === 1) return undefined;
  try {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return undefined;
  }
}

/** The key bytes of a secret, as the server reads webhookSecretEnv. */
export function webhookSecretBytes(secret: WebhookSecret): Uint8Array {
  if (typeof secret !== 'string') return secret;
  if (secret.startsWith('whsec_')) {
    const b = base64Decode(secret.slice(6));
    if (!b || b.length === 0) throw new TypeError('a whsec_ secret must be base64 after the prefix');
    return b;
  }
  return encoder.encode(secret);
}

function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}

async function hmac(key: Uint8Array, data: Uint8Array): Promise<Uint8Array> {
  const subtle = (await webcrypto()).subtle;
  // copies into plain ArrayBuffers (a view may sit on a SharedArrayBuffer)
  const k = await subtle.importKey('raw', new Uint8Array(key), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await subtle.sign('HMAC', k, new Uint8Array(data)));
}

/**
 * True when headers and rawBody are a webhook missive signed with one of secrets (the new and
 * the old one during a rotation) less than toleranceSeconds ago. rawBody must be the exact bytes
 * received (do not re-serialise parsed JSON).
 */
export async function verifyWebhook(
  secrets: WebhookSecret | WebhookSecret[],
  headers: HeaderSource,
  rawBody: string | Uint8Array,
  options: VerifyOptions = {},
): Promise<boolean> {
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  if (!id || !ts || !sigs || !/^\d{1,12}$/.test(ts)) return false;
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(now - Number(ts)) > tolerance) return false;
  const body = typeof rawBody === 'string' ? encoder.encode(rawBody) : rawBody;
  const prefix = encoder.encode(`${id}.${ts}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix, 0);
  signed.set(body, prefix.length);
  const given: Uint8Array[] = [];
  for (const entry of sigs.split(' ')) {
    if (!entry.startsWith('v1,')) continue;
    const b = base64Decode(entry.slice(3));
    if (b) given.push(b);
  }
  let ok = false;
  for (const secret of Array.isArray(secrets) ? secrets : [secrets]) {
    const expected = await hmac(webhookSecretBytes(secret), signed);
    // every entry is compared (no early exit), each in constant time
    for (const g of given) ok = timingSafeEqual(expected, g) || ok;
  }
  return ok;
}
