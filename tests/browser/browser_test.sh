#!/bin/sh
# browser_test.sh — the browser tests as one entry of `make test`: Debian's Chromium driven by
# playwright-core (an npm dev dependency, installed here with `npm ci` from package-lock.json; never a
# downloaded browser) against a live build/missived. Prints the test lines and "N passed, M failed".
# Only where no Chromium can be installed does it print "SKIP browser: …" (and 0 passed, 0 failed).
cd "$(dirname "$0")" || exit 1
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; }
fi
if [ ! -x "$CHROMIUM" ]; then
    echo "SKIP browser: Chromium is not installed and could not be installed (apt-get install chromium)"
    echo "tests/browser: 0 passed, 0 failed"
    exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "FAIL browser: node and npm are needed to drive Chromium (scripts/deps installs them)"
    echo "tests/browser: 0 passed, 1 failed"
    exit 1
fi
if [ ! -f node_modules/playwright-core/package.json ] || [ ! -f node_modules/axe-core/package.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1 || {
        echo "FAIL browser: npm ci failed:"; tail -n 20 npm-ci.log
        echo "tests/browser: 0 passed, 1 failed"
        exit 1
    }
fi
export CHROMIUM
export BUILD="${BUILD:-build}"
exec node inbox.test.mjs
