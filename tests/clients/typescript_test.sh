#!/bin/sh
# typescript_test.sh — the TypeScript client's suite as one of make test's programs: it runs
# after the C test binaries, so it also validates the responses they recorded under
# $BUILD/responses against api/openapi.json (see clients/typescript/run-tests).
cd "$(dirname "$0")/../.." || exit 1
exec clients/typescript/run-tests
