// jwt_fixtures.mjs — keys, JWKS files and tokens for jwt_test.c, made with Node's own crypto so
// the code under test never checks its own work. Usage: node jwt_fixtures.mjs OUTDIR NOW_S
// Writes OUTDIR/jwks-a.json (rsa-1, ec-1, ed-1), jwks-b.json (rsa-2: the rotated key),
// jwks-one.json (rsa-1 alone), jwks-mislabelled.json (ec-1's key published as alg RS256),
// rsa-1.pem (the RSA public key, PEM) and tokens.json {name: token}.
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';

const [outDir, nowArg] = process.argv.slice(2);
const now = Number(nowArg);
const HS_SECRET = '0123456789abcdef0123456789abcdef';

const rsa1 = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsa2 = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec1 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ed1 = generateKeyPairSync('ed25519');
const jwk = (pair, kid, alg) => ({ ...pair.publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' });

const b64 = (x) => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x)).toString('base64url');
function token(header, claims, signer) {
  const input = `${b64(header)}.${b64(claims)}`;
  const sig = signer ? signer(Buffer.from(input)) : Buffer.alloc(0);
  return `${input}.${sig.toString('base64url')}`;
}
const rs = (pair) => (data) => sign('sha256', data, pair.privateKey);
const es = (pair) => (data) => sign('sha256', data, { key: pair.privateKey, dsaEncoding: 'ieee-p1363' });
const ed = (pair) => (data) => sign(null, data, pair.privateKey);
const hs = (secret) => (data) => createHmac('sha256', secret).update(data).digest();

const base = { sub: 'ana', roles: ['staff'], tenant: 't1', iss: 'https://idp.example', aud: 'missive', exp: now + 600, iat: now };
const rsaPem = rsa1.publicKey.export({ format: 'pem', type: 'spki' });
const t = {
  rs256: token({ alg: 'RS256', kid: 'rsa-1', typ: 'JWT' }, base, rs(rsa1)),
  es256: token({ alg: 'ES256', kid: 'ec-1' }, base, es(ec1)),
  eddsa: token({ alg: 'EdDSA', kid: 'ed-1' }, base, ed(ed1)),
  hs256: token({ alg: 'HS256' }, base, hs(HS_SECRET)),
  alg_none: token({ alg: 'none', kid: 'rsa-1' }, base, null),
  alg_none_upper: token({ alg: 'NONE', kid: 'rsa-1' }, base, null),
  // algorithm confusion: the RSA public key (PEM and JWK n) used as an HMAC secret
  confusion_pem: token({ alg: 'HS256', kid: 'rsa-1' }, base, hs(rsaPem)),
  rs256_signed_by_other_key: token({ alg: 'RS256', kid: 'rsa-1' }, base, rs(rsa2)),
  es256_with_rsa_kid: token({ alg: 'ES256', kid: 'rsa-1' }, base, es(ec1)),
  rs256_with_ec_kid: token({ alg: 'RS256', kid: 'ec-1' }, base, rs(rsa1)),
  wrong_kid: token({ alg: 'RS256', kid: 'nobody' }, base, rs(rsa1)),
  no_kid: token({ alg: 'RS256' }, base, rs(rsa1)),
  expired: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, exp: now - 120 }, rs(rsa1)),
  expired_within_leeway: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, exp: now - 10 }, rs(rsa1)),
  not_yet_valid: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, nbf: now + 120 }, rs(rsa1)),
  wrong_issuer: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, iss: 'https://evil.example' }, rs(rsa1)),
  wrong_audience: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, aud: 'someone-else' }, rs(rsa1)),
  audience_array: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, aud: ['other', 'missive'] }, rs(rsa1)),
  crit_header: token({ alg: 'RS256', kid: 'rsa-1', crit: ['exp'] }, base, rs(rsa1)),
  huge: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, pad: 'x'.repeat(65536) }, rs(rsa1)),
  rotated: token({ alg: 'RS256', kid: 'rsa-2' }, base, rs(rsa2)),
  rotated_again: token({ alg: 'RS256', kid: 'rsa-3' }, base, rs(rsa2)),
  keycloak: token({ alg: 'RS256', kid: 'rsa-1' },
    { ...base, roles: undefined, tenant: undefined, sub: 'f4c1-uuid', preferred_username: 'bob',
      realm_access: { roles: ['approver', 'offline_access'] } }, rs(rsa1)),
  cognito: token({ alg: 'RS256', kid: 'rsa-1' },
    { ...base, roles: undefined, 'cognito:groups': ['admins', 'staff'], 'custom:tenant': 't9' }, rs(rsa1)),
  auth0: token({ alg: 'RS256', kid: 'rsa-1' },
    { ...base, roles: undefined, tenant: undefined, 'https://missive.example.com/roles': ['editor'],
      'https://missive.example.com/tenant': 'acme', permissions: ['read:messages'] }, rs(rsa1)),
  space_roles: token({ alg: 'RS256', kid: 'rsa-1' }, { ...base, roles: 'reader  writer' }, rs(rsa1)),
};
// a tampered payload under a valid signature
const [h, , s] = t.rs256.split('.');
t.tampered = `${h}.${b64({ ...base, sub: 'mallory' })}.${s}`;

writeFileSync(`${outDir}/jwks-a.json`, JSON.stringify({ keys: [jwk(rsa1, 'rsa-1', 'RS256'), jwk(ec1, 'ec-1', 'ES256'), jwk(ed1, 'ed-1', 'EdDSA'),
  { kty: 'oct', kid: 'sym', k: 'c2VjcmV0' }, { ...jwk(rsa2, 'enc-1', 'RSA-OAEP'), use: 'enc' }] }));
writeFileSync(`${outDir}/jwks-b.json`, JSON.stringify({ keys: [jwk(rsa2, 'rsa-2', 'RS256')] }));
writeFileSync(`${outDir}/jwks-one.json`, JSON.stringify({ keys: [{ ...jwk(rsa1, 'rsa-1') }] }));
writeFileSync(`${outDir}/jwks-mislabelled.json`, JSON.stringify({ keys: [{ ...jwk(ec1, 'ec-1'), alg: 'RS256' }] }));
writeFileSync(`${outDir}/rsa-1.pem`, rsaPem);
writeFileSync(`${outDir}/tokens.json`, JSON.stringify(t));
