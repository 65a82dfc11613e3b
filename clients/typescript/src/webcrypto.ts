// webcrypto.ts — the Web Crypto object: globalThis.crypto in browsers and Node ≥ 19, node:crypto's
// webcrypto on Node 18 (loaded lazily, through a computed specifier so bundlers leave it alone).

let cached: Crypto | undefined;

export async function webcrypto(): Promise<Crypto> {
  if (cached) return cached;
  const g = (globalThis as { crypto?: Crypto }).crypto;
  if (g?.subtle && typeof g.randomUUID === 'function') return (cached = g);
  const specifier = 'node:' + 'crypto';
  const mod = (await import(specifier)) as { webcrypto: Crypto };
  return (cached = mod.webcrypto);
}

export async function randomUUID(): Promise<string> {
  return (await webcrypto()).randomUUID();
}
