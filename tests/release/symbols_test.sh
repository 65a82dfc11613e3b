#!/bin/sh
# symbols_test.sh — libmissive.a defines no global symbol outside the mv_ prefix (mv_ public,
# mv__ internal), so a program linking it statically meets no clash with its own names. (The
# sanitizer build's own __odr_asan markers are the compiler's, not ours.)
# Prints "N passed, M failed".
lib=${BUILD:-build}/libmissive.a
others=$(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDRBCVW]/ { print $3 }' |
         grep -v -e '^mv_' -e '^__odr_asan' -e '^__asan' -e '^__ubsan' | sort -u)
if [ ! -f "$lib" ]; then
    echo "FAIL libmissive_a_exports_only_mv_names: $lib is missing"
    echo "symbols_test: 0 passed, 1 failed"
    exit 1
fi
if [ -n "$others" ]; then
    echo "FAIL libmissive_a_exports_only_mv_names: $(echo $others)"
    echo "symbols_test: 0 passed, 1 failed"
    exit 1
fi
echo "ok libmissive_a_exports_only_mv_names"
echo "symbols_test: 1 passed, 0 failed"
