#!/bin/sh
# react_test.sh — the React bindings' suite (clients/react/run-tests) as one of make test's programs.
cd "$(dirname "$0")/../.." || exit 1
exec clients/react/run-tests
