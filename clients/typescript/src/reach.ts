// reach.ts — the reach routes (GET/PUT /preferences) and helpers for channel receivers: reading a
// delivery's action links. An action link is meant for a person's browser (GET shows a page,
// POST runs the action once), so there is no method that follows one.
import type { Transport } from './transport.js';
import type { Preferences, StoredPreferences } from './types.js';
import type { ActionLinks, ChannelDelivery } from './webhook-types.js';

export class PreferencesApi {
  readonly #c: Transport;
  /** @internal */
  constructor(c: Transport) {
    this.#c = c;
  }

  /** GET /preferences — the caller's stored set in their tenant. */
  async get(): Promise<StoredPreferences> {
    return (await this.#c.request<StoredPreferences>('GET', '/preferences')).body;
  }

  /** PUT /preferences — replaces the whole set; 400 invalid_argument names a bad field. */
  async put(preferences: Preferences): Promise<StoredPreferences> {
    return (await this.#c.request<StoredPreferences>('PUT', '/preferences', { body: preferences })).body;
  }
}

/** The token of an action-link URL ({baseUrl}/a/{token}), or null when url is not one. */
export function actionLinkToken(url: string): string | null {
  const m = /\/a\/([A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43})$/.exec(url);
  return m?.[1] ?? null;
}

/** The action links of a parsed channel delivery, checked to be action-link URLs. */
export function deliveryLinks(delivery: ChannelDelivery): ActionLinks {
  const out: ActionLinks = {};
  for (const [action, url] of Object.entries(delivery.links ?? {})) {
    if (typeof url === 'string' && actionLinkToken(url)) out[action] = url;
  }
  return out;
}
