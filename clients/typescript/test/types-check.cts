// types-check.cts — compiled (never run) with tsc --strict as a CommonJS module: `require()` of
// the package resolves its "require" condition and dist/cjs's declarations, which must type the
// same public API as the ES module build.
import { Missive, MissiveError, isErrorCode, type ErrorCode, type ChannelDelivery } from 'missive-client';

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
