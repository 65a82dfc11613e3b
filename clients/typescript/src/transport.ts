// transport.ts — the HTTP side of the client (internal: the package's entry point does not
// export this module). Requests are plain fetch calls with the client's authentication; every
// non-2xx answer becomes a MissiveError with the code and fields of the error body.

import { MissiveError, type MissiveErrorCode, type MissiveErrorFields } from './errors.js';

export interface MissiveOptions {
  /** e.g. "https://missive.example.com" (a path prefix is kept). */
  baseUrl: string;
  /** A bearer token (auth.mode "jwt"), or a function returning one (called per request). */
  token?: string | (() => string | Promise<string>);
  /** Extra headers on every request, e.g. X-User-Id behind a trusted proxy (auth.mode "headers"). */
  headers?: Record<string, string>;
  /** A fetch implementation (default: globalThis.fetch). */
  fetch?: typeof fetch;
}

export type Query = Record<string, string | number | boolean | undefined>;

interface RequestOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

interface Answer<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** The HTTP side of a client: base URL, authentication, fetch, and the error of a non-2xx
 * answer. Not exported from the package: the API classes hold one in a private field. */
export class Transport {
  readonly #base: string;
  readonly #options: MissiveOptions;
  readonly #fetcher: typeof fetch;

  constructor(options: MissiveOptions) {
    if (!options || typeof options.baseUrl !== 'string' || !/^https?:\/\//.test(options.baseUrl)) {
      throw new TypeError('Missive needs a baseUrl starting with http:// or https://');
    }
    this.#options = options;
    this.#base = options.baseUrl.replace(/\/+$/, '');
    const f = options.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (!f) throw new TypeError('no fetch implementation: pass options.fetch');
    this.#fetcher = f;
  }

  /** The URL of a path and query. */
  #url(path: string, query?: Query): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
    const s = q.toString();
    return `${this.#base}${path}${s ? `?${s}` : ''}`;
  }

  /** The authentication and default headers. */
  async #headers(extra?: Record<string, string>): Promise<Record<string, string>> {
    const h: Record<string, string> = { Accept: 'application/json', ...this.#options.headers };
    const t = this.#options.token;
    if (t !== undefined) h['Authorization'] = `Bearer ${typeof t === 'function' ? await t() : t}`;
    return { ...h, ...extra };
  }

  /** One fetch, without reading the body. */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers = await this.#headers(opts.headers);
    const init: RequestInit = { method, headers };
    if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    if (opts.signal) init.signal = opts.signal;
    try {
      return await this.#fetcher(this.#url(path, opts.query), init);
    } catch (cause) {
      if ((cause as { name?: string })?.name === 'AbortError') throw cause;
      throw new MissiveError(0, 'network_error', `${method} ${path}: ${(cause as Error)?.message ?? cause}`, {}, { cause });
    }
  }

  /** A request whose answer is JSON; non-2xx throws MissiveError. */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<Answer<T>> {
    const res = await this.send(method, path, opts);
    if (!res.ok) throw await errorOf(res);
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as T };
  }

  /** A request whose answer is text. */
  async text(path: string): Promise<string> {
    const res = await this.send('GET', path, { headers: { Accept: '*/*' } });
    if (!res.ok) throw await errorOf(res);
    return res.text();
  }
}

/** The MissiveError of a non-2xx response. */
export async function errorOf(res: Response): Promise<MissiveError> {
  const text = await res.text().catch(() => '');
  let code: MissiveErrorCode = `http_${res.status}`;
  let message = `HTTP ${res.status}`;
  let fields: MissiveErrorFields = {};
  try {
    const e = (JSON.parse(text) as { error?: Record<string, unknown> }).error;
    if (e && typeof e.code === 'string') {
      const { code: c, message: m, ...rest } = e;
      code = c as MissiveErrorCode;
      if (typeof m === 'string') message = m;
      fields = rest;
    }
  } catch {
    /* not JSON: keep the HTTP status as the code */
  }
  const ra = res.headers.get('Retry-After');
  const extra: { retryAfter?: number; requestId?: string } = {};
  if (ra && /^\d+$/.test(ra)) extra.retryAfter = Number(ra);
  const rid = res.headers.get('X-Request-Id');
  if (rid) extra.requestId = rid;
  return new MissiveError(res.status, code, message, fields, extra);
}

