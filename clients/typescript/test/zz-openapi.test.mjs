// zz-openapi.test.mjs — every response the end-to-end tests received (recorded under
// MISSIVE_TEST_RECORD_DIR by tests/support/daemon_proc.c and test/harness.mjs) is validated with
// ajv against api/openapi.json: the path and method are described (or the answer is 404
// not_found), the status is described for that operation, the content type is one it lists, and a
// JSON body matches the schema. Runs last (the runner orders it), after the C and TS suites.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import Ajv2020 from 'ajv/dist/2020.js';
import { missived, repoRoot } from './harness.mjs';

const doc = JSON.parse(readFileSync(join(repoRoot, 'api/openapi.json'), 'utf8'));
const dir = process.env.MISSIVE_TEST_RECORD_DIR;
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'options', 'head'];

const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
ajv.addSchema(doc, 'openapi.json');
const compiled = new Map();
const pointer = (parts) => parts.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
function validatorAt(parts) {
  const ref = `openapi.json#/${pointer(parts)}`;
  if (!compiled.has(ref)) compiled.set(ref, ajv.compile({ $ref: ref }));
  return compiled.get(ref);
}

/** The best-matching path template of a concrete path (literal segments beat parameters). */
function matchPath(path) {
  const segs = path.split('/');
  let best, bestScore = -1;
  for (const tpl of Object.keys(doc.paths)) {
    const t = tpl.split('/');
    if (t.length !== segs.length) continue;
    let score = 0, ok = true;
    for (let i = 0; i < t.length && ok; i++) {
      if (/^\{.+\}$/.test(t[i])) ok = segs[i].length > 0;
      else if (t[i] === segs[i]) score += 1 << (t.length - i);
      else ok = false;
    }
    if (ok && score > bestScore) [best, bestScore] = [tpl, score];
  }
  return best;
}

function deref(obj, parts) {
  while (obj && obj.$ref) {
    parts = obj.$ref.slice(2).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    obj = parts.reduce((o, k) => o?.[k], doc);
  }
  return [obj, parts];
}

/** Problems with one recorded exchange ([] when it matches the document). */
function check(r) {
  const where = `${r.method} ${r.path} → ${r.status}`;
  const path = r.path.split('?')[0];
  const tpl = matchPath(path);
  const op = tpl && doc.paths[tpl][r.method.toLowerCase()];
  let body;
  try { body = r.body ? JSON.parse(r.body) : undefined; } catch { body = undefined; }
  if (!op) {
    if (r.status === 404 && body?.error?.code === 'not_found') return [];
    return [`${where}: no operation describes it`];
  }
  const key = String(r.status);
  let [resp, parts] = deref(op.responses[key] ?? op.responses.default, ['paths', tpl, r.method.toLowerCase(), 'responses', key]);
  if (!resp) return [`${where}: status ${r.status} is not described for ${r.method} ${tpl}`];
  const ctype = (r.contentType || '').split(';')[0].trim();
  if (!resp.content) return r.body ? [`${where}: a body where none is described`] : [];
  const media = resp.content[ctype] ?? resp.content[ctype.split('/')[0] + '/*'] ?? resp.content['*/*'];
  if (!media) return [`${where}: content type "${ctype}" is not one of ${Object.keys(resp.content).join(', ')}`];
  if (ctype !== 'application/json') return [];
  if (body === undefined) return [`${where}: the body is not JSON`];
  const validate = validatorAt([...parts, 'content', ctype, 'schema']);
  if (validate(body)) return [];
  return [`${where}: ${ajv.errorsText(validate.errors, { separator: '; ' })} — body ${r.body.slice(0, 300)}`];
}

// Recordings older than the daemon binary came from an earlier build: they prove nothing now.
let builtAt = 0;
try { builtAt = statSync(missived).mtimeMs; } catch { /* no daemon: every recording counts */ }

function recorded(prefix) {
  if (!dir) return [];
  let files = [];
  try { files = readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith('.jsonl')); } catch { return []; }
  files = files.filter((f) => statSync(join(dir, f)).mtimeMs >= builtAt);
  return files.flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)));
}

const c = recorded('c-'), ts = recorded('ts-');
const sources = [['the C end-to-end tests', c], ['the TypeScript client tests', ts]];
for (const [name, records] of sources) {
  if (records.length === 0) continue; // not run (npm test alone runs no C tests); nothing to count
  test(`every response received by ${name} (${records.length}) matches api/openapi.json`, () => {
    const problems = records.flatMap(check);
    assert.deepEqual(problems.slice(0, 20), []);
  });
}

test('api/openapi.json is a valid OpenAPI 3.1 document under the specification\'s own schema', async () => {
  const v = new Validator();
  const result = await v.validate(structuredClone(doc));
  assert.equal(v.version, '3.1');
  assert.deepEqual(result, { valid: true });
  const broken = structuredClone(doc);
  broken.paths['/messages'].get.responses['200'] = { content: {} }; // a response without description
  assert.equal((await new Validator().validate(broken)).valid, false);
});

test('the validator rejects responses that drift from the document', () => {
  const ok = { method: 'GET', path: '/messages/count', status: 200, contentType: 'application/json', body: '{"count":1,"unseen":0,"unread":1}' };
  assert.deepEqual(check(ok), []);
  assert.equal(check({ ...ok, body: '{"count":"1","unseen":0,"unread":1}' }).length, 1);
  assert.equal(check({ ...ok, body: '{"count":1,"unseen":0,"unread":1,"extra":true}' }).length, 1);
  assert.equal(check({ ...ok, body: '{"count":1}' }).length, 1, 'unseen and unread are always sent');
  assert.equal(check({ ...ok, status: 418 }).length, 1);
  assert.equal(check({ ...ok, contentType: 'text/html' }).length, 1);
  const err = { method: 'GET', path: '/messages/0123456789abcdef01234567', status: 404, contentType: 'application/json' };
  assert.deepEqual(check({ ...err, body: '{"error":{"code":"message_not_found","message":"m"}}' }), []);
  assert.equal(check({ ...err, body: '{"error":{"code":"saga_not_found","message":"m"}}' }).length, 1);
  assert.deepEqual(check({ method: 'GET', path: '/nope', status: 404, contentType: 'application/json', body: '{"error":{"code":"not_found","message":"x"}}' }), []);
  assert.equal(check({ method: 'DELETE', path: '/messages', status: 200, contentType: 'application/json', body: '{}' }).length, 1);
});

if (c.length > 0 && ts.length > 0) {
  test('every operation of the document was exercised by an end-to-end test', () => {
    const seen = new Set([...c, ...ts].map((r) => {
      const tpl = matchPath(r.path.split('?')[0]);
      return tpl && `${r.method.toLowerCase()} ${tpl}`;
    }));
    const missing = [];
    for (const [tpl, item] of Object.entries(doc.paths)) {
      for (const m of METHODS) {
        const k = `${m} ${tpl}`;
        if (item[m] && !seen.has(k)) missing.push(k);
      }
    }
    assert.deepEqual(missing, []);
  });
}
