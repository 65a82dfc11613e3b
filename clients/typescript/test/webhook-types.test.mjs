// webhook-types.test.mjs — src/webhook-types.ts, written by hand, against the schemas of the
// webhook bodies in api/openapi.json: each interface has exactly the schema's properties, and
// exactly its required ones are non-optional. (The end-to-end tests validate the bodies a live
// daemon sends against the same schemas, so the types describe what a receiver really gets.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';
import { repoRoot } from './harness.mjs';

const doc = JSON.parse(readFileSync(join(repoRoot, 'api/openapi.json'), 'utf8'));
const file = join(repoRoot, 'clients/typescript/src/webhook-types.ts');
const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);

/** {interface name: {member: optional?}} of the file's exported interfaces. */
function interfaces() {
  const out = {};
  for (const node of source.statements) {
    if (!ts.isInterfaceDeclaration(node)) continue;
    out[node.name.text] = Object.fromEntries(node.members.filter(ts.isPropertySignature)
      .map((m) => [m.name.getText(source), m.questionToken !== undefined]));
  }
  return out;
}

/** The schemas every webhook of the document sends or expects. */
function webhookSchemas() {
  const names = new Set();
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      if (typeof v.$ref === 'string' && v.$ref.startsWith('#/components/schemas/')) names.add(v.$ref.split('/').pop());
      Object.values(v).forEach(walk);
    }
  };
  walk(doc.webhooks);
  // and the schemas those refer to (WebhookUser), but not the API's own bodies (Message, Content)
  for (const n of [...names]) walk(doc.components.schemas[n]);
  return [...names].filter((n) => !['Message', 'Content', 'Viewer', 'LastFailure'].includes(n)).sort();
}

test('every webhook body schema of api/openapi.json has an interface of the same name and shape', () => {
  const types = interfaces();
  const schemas = webhookSchemas();
  assert.ok(schemas.length >= 10, schemas.join());
  for (const name of schemas) {
    const schema = doc.components.schemas[name];
    const members = types[name];
    assert.ok(members, `src/webhook-types.ts has no interface ${name}`);
    assert.deepEqual(Object.keys(members).sort(), Object.keys(schema.properties ?? {}).sort(), `${name}: properties`);
    const required = Object.entries(members).filter(([, optional]) => !optional).map(([k]) => k).sort();
    assert.deepEqual(required, [...(schema.required ?? [])].sort(), `${name}: required properties`);
  }
});

test('the nested objects of the bodies have the schema\'s fields too', () => {
  const types = interfaces();
  // ActionWebhook.action, ChannelDelivery.to and EmailWebhook.email are inline objects
  const inline = (iface, member) => {
    for (const node of source.statements) {
      if (!ts.isInterfaceDeclaration(node) || node.name.text !== iface) continue;
      const m = node.members.find((x) => x.name?.getText(source) === member);
      return m.type.members.map((x) => x.name.getText(source)).sort();
    }
    return undefined;
  };
  assert.ok(types.ActionWebhook && types.ChannelDelivery && types.EmailWebhook);
  const s = doc.components.schemas;
  assert.deepEqual(inline('ActionWebhook', 'action'), Object.keys(s.ActionWebhook.properties.action.properties).sort());
  assert.deepEqual(inline('ChannelDelivery', 'to'), Object.keys(s.ChannelDelivery.properties.to.properties).sort());
  assert.deepEqual(inline('EmailWebhook', 'email'), Object.keys(s.EmailWebhook.properties.email.properties).sort());
});
