#!/bin/sh
# abi_test.sh — the declared API is the ABI: libmissive.so.0 exports exactly the functions and
# objects that the public headers (include/) declare, no more and no less. A helper of src/ that
# no public header declares must not be exported (a program could come to depend on it), and a
# declared function must be defined (a program using it would not link).
# Prints "N passed, M failed".
lib=${BUILD:-build}/libmissive.so.0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/abi-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() { echo "abi_test: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

if [ ! -f "$lib" ]; then
    fail shared_library_exports_exactly_what_include_declares "$lib is missing"
    finish
fi
if ! scripts/gen-symbols --list > "$tmp/declared" 2> "$tmp/err"; then
    fail shared_library_exports_exactly_what_include_declares "scripts/gen-symbols: $(cat "$tmp/err")"
    finish
fi
# the sanitizer build's own markers are the compiler's, not ours
nm -D --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sed 's/@.*//' |
    grep -v -e '^__odr_asan' -e '^__asan' -e '^__ubsan' -e '^__tsan' | sort -u > "$tmp/exported"

# The declarations were read at all: the list holds functions and the one object of include/, and
# none of the library's internal families (a reader that read src/ or nothing would fail here).
problems=""
for want in mv_version mv_store_open mv_message_create mv_action_handle mv_err_set mv_saga_state_names; do
    grep -qx "$want" "$tmp/declared" || problems="$problems $want is not in the list;"
done
for family in mv_db_ mv_stmt_ mv_arena_ mv_http_ mv__; do
    grep -q "^$family" "$tmp/declared" && problems="$problems the list has $family names;"
done
n=$(wc -l < "$tmp/declared")
[ "$n" -ge 200 ] || problems="$problems only $n names;"
if [ -z "$problems" ]; then ok "gen_symbols_reads_the_declarations_of_include ($n names)"
else fail gen_symbols_reads_the_declarations_of_include "$problems"; fi

extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -z "$extra" ] && [ -z "$missing" ]; then
    ok "shared_library_exports_exactly_what_include_declares ($(wc -l < "$tmp/exported") symbols)"
else
    why=""
    [ -z "$extra" ] || why="exported but declared by no public header: $(echo "$extra" | tr '\n' ' ' | head -c 1500)"
    [ -z "$missing" ] || why="$why${why:+; }declared but not exported: $(echo "$missing" | tr '\n' ' ' | head -c 1500)"
    fail shared_library_exports_exactly_what_include_declares "$why"
fi

# The same check through the linker: a program that takes the address of every declared function
# and object links against the shared library alone (each is defined and exported).
{
    echo '#include <missive.h>'
    echo 'int main(void) {'
    echo '    const void *volatile p;'
    sed 's/.*/    p = (const void *)\&&;/' "$tmp/declared"
    echo '    (void)p;'
    echo '    return 0;'
    echo '}'
} > "$tmp/all.c"
libdir=$(cd "$(dirname "$lib")" && pwd)
# shellcheck disable=SC2046,SC2086 # words
if cc $SAN -std=c11 -w -Iinclude $(pkg-config --cflags jansson) "$tmp/all.c" -o "$tmp/all" \
    -L"$libdir" -Wl,-rpath,"$libdir" -lmissive $(pkg-config --libs jansson) \
    > "$tmp/cc.log" 2>&1 && "$tmp/all"; then
    ok a_program_using_every_declared_symbol_links_against_the_shared_library
else
    fail a_program_using_every_declared_symbol_links_against_the_shared_library "$(head -c 1500 "$tmp/cc.log")"
fi
finish
