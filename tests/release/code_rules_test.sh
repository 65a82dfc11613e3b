#!/bin/sh
# code_rules_test.sh — rules of the source tree a compiler does not check:
# - code above the store (src/deliver, src/durable, src/message, src/http) names no backend: the
#   store answers what differs between SQLite and PostgreSQL (store/*.h), so each query and each
#   decision above it is written once;
# - nothing in src/message, src/durable or src/store waits by sleeping: a wait is for a condition
#   (a lock, a condition variable, a listener, the loop's timer).
# Prints "N passed, M failed".
cd "$(dirname "$0")/../.." || exit 1
passed=0
failed=0

check() { # name, pattern, directories…
    name=$1
    pattern=$2
    shift 2
    hits=$(grep -rnE "$pattern" --include='*.c' --include='*.h' "$@" 2>/dev/null)
    if [ -n "$hits" ]; then
        echo "FAIL $name:"
        echo "$hits" | sed 's/^/    /'
        failed=$((failed + 1))
    else
        echo "ok $name"
        passed=$((passed + 1))
    fi
}

check code_above_the_store_names_no_backend \
    'mv_db_kind|mv_store_kind_of|MV_STORE_POSTGRES|MV_STORE_SQLITE' \
    src/deliver src/durable src/message src/http
check no_sleep_in_message_durable_or_store 'mv_sleep_ms' src/message src/durable src/store

echo "code_rules_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
