// types-check.cts — compiled (never run) with tsc --strict as a CommonJS module: `require()` of
// the package resolves its "require" condition and dist/cjs's declarations, which must type the
// same public API as the ES module build.
import {
  Missive,
  MissiveError,
  deliveryLinks,
  isErrorCode,
  type ErrorCode,
  type ChannelDelivery,
  type StoredPreferences,
} from 'missive-client';

export async function fromCommonJs(baseUrl: string): Promise<ErrorCode | undefined> {
  const client = new Missive({ baseUrl, headers: { 'X-User-Id': 'ana' } });
  try {
    await client.messages.get('m-1');
  } catch (e) {
    if (e instanceof MissiveError && isErrorCode(e.code)) return e.code;
  }
  const d: ChannelDelivery | undefined = undefined;
  return d;
}

export async function reachFromCommonJs(client: Missive, d: ChannelDelivery): Promise<number> {
  const stored: StoredPreferences = await client.preferences.get();
  return Object.keys(deliveryLinks(d)).length + (stored.locale ?? '').length;
}
