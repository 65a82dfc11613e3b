#!/bin/sh
# typescript_test.sh — the TypeScript client's suite as one of make test's programs, then the
# client as an integrator gets it.
#
# 1. clients/typescript/run-tests: the build, the type checks and the client tests against live
#    daemons; it runs after the C test binaries, so it also validates the responses they
#    recorded under $BUILD/responses against api/openapi.json.
# 2. The tarball `npm pack` makes, installed (offline: it has no dependencies) into fresh Node
#    applications beside a live missived: a CommonJS one that require()s it, an ES module one
#    that imports it, and a TypeScript one type-checked as both, each using only the package's
#    exports: the documented names and nothing else (the internal modules are not reachable, the
#    client objects carry no url/send/request), a real request, a typed MissiveError from a real
#    404, and verifyWebhook on a body signed as missive signs it.
# Ends with "N passed, M failed" for both parts together.
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export BUILD
passed=0
failed=0
TMP=$(mktemp -d /tmp/missive-ts-pack.XXXXXX)
DAEMON=""
cleanup() {
    [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

clients/typescript/run-tests >"$TMP/suite.log" 2>&1
cat "$TMP/suite.log"
line=$(grep -E '[0-9]+ passed, [0-9]+ failed$' "$TMP/suite.log" | tail -n 1)
p=$(echo "$line" | sed -E 's/^(.* )?([0-9]+) passed, ([0-9]+) failed$/\2/')
f=$(echo "$line" | sed -E 's/^(.* )?([0-9]+) passed, ([0-9]+) failed$/\3/')
[ -n "$p" ] || { p=0; f=1; }
passed=$((passed + p))
failed=$((failed + f))

result() { # NAME STATUS LOG
    if [ "$2" -eq 0 ]; then
        echo "ok $1"
        passed=$((passed + 1))
    else
        echo "FAIL $1"
        sed 's/^/    /' "$3" | tail -n 30
        failed=$((failed + 1))
    fi
}

# The tarball. Its prepack script (node build.mjs, as `npm publish` runs it) is what run-tests
# ran a moment ago, so the build is not repeated here unless a source is newer than it.
newer=$(find clients/typescript/src clients/typescript/build.mjs clients/typescript/tsconfig*.json \
    -newer clients/typescript/dist/cjs/package.json 2>/dev/null | head -n 1)
if [ ! -f clients/typescript/dist/cjs/package.json ] || [ -n "$newer" ]; then
    (cd clients/typescript && node build.mjs) >"$TMP/build.log" 2>&1 || cat "$TMP/build.log"
fi
if ! (cd clients/typescript && grep -q '"prepack": "node build.mjs"' package.json &&
    npm pack --ignore-scripts --silent --pack-destination "$TMP" >"$TMP/pack.log" 2>&1); then
    result "npm pack makes the tarball" 1 "$TMP/pack.log"
    echo "typescript_test: $passed passed, $failed failed"
    exit 1
fi
TARBALL=$(ls "$TMP"/missive-client-*.tgz)
tar -tzf "$TARBALL" | sort >"$TMP/contents"
{ grep -qx 'package/dist/cjs/index.js' "$TMP/contents" && grep -qx 'package/dist/esm/index.js' "$TMP/contents" &&
    grep -qx 'package/dist/cjs/package.json' "$TMP/contents" && grep -qx 'package/dist/esm/index.d.ts' "$TMP/contents" &&
    ! grep -q 'package/src/\|package/test/\|node_modules' "$TMP/contents"; } >"$TMP/contents.log" 2>&1
status=$?
cat "$TMP/contents" >>"$TMP/contents.log"
result "the packed tarball holds both builds with their declarations and no sources or tests" $status "$TMP/contents.log"

# One fresh application holds the CommonJS (.cjs, .cts) and the ES module (.mjs, .ts) files.
APP=$TMP/app
mkdir -p "$APP"
echo '{"name": "an-app", "version": "1.0.0", "private": true, "type": "module"}' >"$APP/package.json"
(cd "$APP" && npm install --offline --no-audit --no-fund --loglevel=error "$TARBALL") >"$TMP/install.log" 2>&1
result "the tarball installs offline into a fresh application" $? "$TMP/install.log"

# A live daemon for the applications to call.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$TMP/missive.json" <<JSON
{"listen": "127.0.0.1:$PORT", "store": "sqlite:$TMP/missive.db", "templates": "$ROOT/examples/templates",
 "auth": {"mode": "headers"}}
JSON
"$BUILD/missived" --config "$TMP/missive.json" 2>"$TMP/missived.log" &
DAEMON=$!
i=0
until curl -sf "http://127.0.0.1:$PORT/livez" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || break
    sleep 0.1
done
export MISSIVE_URL="http://127.0.0.1:$PORT"

# The same checks from require() and from import: LOAD is how each application gets the package.
checks() { # LOAD INTERNAL
    cat <<JS
const assert = require('node:assert/strict');
const { createHmac } = require('node:crypto');
async function main() {
  const m = $1;
  assert.deepEqual(Object.keys(m).filter((k) => k !== 'default' && k !== '__esModule').sort(),
    ['ERROR_CODES', 'Missive', 'MissiveError', 'actionLinkToken', 'deliveryLinks', 'isErrorCode', 'verifyWebhook',
      'webhookSecretBytes']);
  await assert.rejects($2, (e) => e.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED');
  const client = new m.Missive({ baseUrl: process.env.MISSIVE_URL, headers: { 'X-User-Id': 'ana' } });
  assert.deepEqual(Object.keys(client).sort(), ['admin', 'approvals', 'messages', 'ops', 'preferences', 'sagas']);
  for (const o of [client, client.admin, client.messages, client.approvals, client.sagas, client.ops, client.preferences]) {
    for (const k of ['url', 'send', 'request', 'text', 'headers', 'c', 'base', 'fetcher', 'options']) {
      assert.equal(k in o, false, k);
    }
  }
  assert.deepEqual(await client.ops.live(), { status: 'ok' });
  assert.deepEqual((await client.messages.list()).messages, []);
  assert.deepEqual(await client.preferences.get(), { channels: {}, categories: {}, digest: {}, locale: null });
  const err = await client.messages.get('000000000000000000000000').then(() => null, (e) => e);
  assert.ok(err instanceof m.MissiveError && err instanceof Error);
  assert.equal(err.status, 404);
  assert.equal(err.code, 'message_not_found');
  assert.equal(m.isErrorCode(err.code), true);
  assert.equal(m.ERROR_CODES[err.code], 404);
  const body = '{"sagaId":"s-1"}', id = 'msg_1', ts = String(Math.floor(Date.now() / 1000));
  const sig = 'v1,' + createHmac('sha256', 'a-secret').update(id + '.' + ts + '.' + body).digest('base64');
  const headers = { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sig };
  assert.equal(await m.verifyWebhook('a-secret', headers, body), true);
  assert.equal(await m.verifyWebhook('another', headers, body), false);
  console.log('ok');
}
main().catch((e) => { console.error(e); process.exit(1); });
JS
}
checks "require('missive-client')" "(async () => require('missive-client/dist/cjs/transport.js'))()" >"$APP/app.cjs"
(cd "$APP" && node app.cjs) >"$TMP/cjs.log" 2>&1
result "require() of the packed client works in a fresh CommonJS application" $? "$TMP/cjs.log"

{
    echo "import { createRequire } from 'node:module';"
    echo "const require = createRequire(import.meta.url);"
    checks "await import('missive-client')" "import('missive-client/dist/esm/transport.js')"
} >"$APP/app.mjs"
(cd "$APP" && node app.mjs) >"$TMP/esm.log" 2>&1
result "import of the packed client works in a fresh ES module application" $? "$TMP/esm.log"
(cd "$APP" && node --input-type=module -e "
import { createRequire } from 'node:module';
const v = createRequire(import.meta.url)('missive-client/package.json').version;
if (v !== process.argv[1]) { console.error('package.json version', v); process.exit(1); }
" "$(sed -n 's/^#define MV_VERSION_STRING "\(.*\)"/\1/p' "$ROOT/include/missive/version.h")") >"$TMP/version.log" 2>&1
result "the packed package.json is exported and carries the version of version.h" $? "$TMP/version.log"

# TypeScript: the declarations of both conditions, as an application compiles against them.
cat >"$APP/tsconfig.json" <<'JSON'
{"compilerOptions": {"module": "NodeNext", "moduleResolution": "NodeNext", "target": "ES2022",
  "lib": ["ES2022", "DOM"], "types": [], "strict": true, "noEmit": true, "skipLibCheck": false},
 "files": ["app.ts", "app.cts"]}
JSON
for ext in ts cts; do
    cat >"$APP/app.$ext" <<'TS'
import { Missive, MissiveError, verifyWebhook, type ErrorCode, type ChannelDelivery, type SagaStepWebhook } from 'missive-client';
export async function use(baseUrl: string, d: ChannelDelivery, s: SagaStepWebhook): Promise<ErrorCode | string> {
  const client = new Missive({ baseUrl, headers: { 'X-User-Id': 'ana' } });
  // @ts-expect-error — the transport is not part of the client's API
  client.send('GET', '/messages');
  // @ts-expect-error — nor are the API groups' internals
  void client.messages.c;
  try {
    if (d.messageId !== null) await client.messages.get(d.messageId); // null on a digest
  } catch (e) {
    if (e instanceof MissiveError && e.code !== 'network_error' && e.code !== 'invalid_stream' && !e.code.startsWith('http_')) {
      return e.code;
    }
  }
  // @ts-expect-error — nor is the preferences group's
  void client.preferences.c;
  const contact: string | null = d.to.contact;
  return (await verifyWebhook('secret', new Headers(), '{}')) ? s.effectId : contact ?? d.kind;
}
TS
done
(cd "$APP" && "$ROOT/clients/typescript/node_modules/.bin/tsc" -p tsconfig.json) >"$TMP/ts.log" 2>&1
result "a TypeScript application type-checks against the packed declarations as ESM and as CommonJS" $? "$TMP/ts.log"

echo "typescript_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
