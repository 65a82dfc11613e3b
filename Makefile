# missive — plain Makefile. `make` builds the library and both programs; `make test` runs every
# test binary and prints the grand total; `make asan` does the same with ASan + UBSan.
LIB_PKGS := sqlite3 libpq jansson libmicrohttpd libcurl libcrypto
# libsystemd: sd_notify; gnutls: HTTPS certificates that a reload replaces (src/cmd/tls.c). Both in
# missived only (the library does not link them).
PKGS    := $(LIB_PKGS) libsystemd gnutls
BUILD   ?= build
CC      ?= cc
OPT     ?= -O2 -g
SAN     ?=

ifeq ($(filter clean,$(MAKECMDGOALS)),)
ifneq ($(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes),yes)
$(info missive: installing build dependencies with scripts/deps)
$(shell scripts/deps >&2)
endif
endif

CFLAGS  := -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -Werror -Wno-missing-field-initializers \
           -Iinclude -Isrc -Itests $(OPT) $(SAN) -MMD -MP $(shell pkg-config --cflags $(PKGS))
LDLIBS  := $(shell pkg-config --libs $(PKGS)) -lpthread -lm
LDFLAGS := $(SAN)
LIB_LDLIBS := $(shell pkg-config --libs $(LIB_PKGS)) -lpthread -lm

# The version lives in include/missive/version.h only.
VERSION := $(shell sed -n 's/^\#define MV_VERSION_STRING "\(.*\)"/\1/p' include/missive/version.h)
SONAME  := libmissive.so.0
SHLIB   := $(BUILD)/libmissive.so.$(VERSION)

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cmd/*' | sort)
CMD_MAIN := src/cmd/missive.c src/cmd/missived.c
CMD_SRC  := $(filter-out $(CMD_MAIN),$(wildcard src/cmd/*.c))
TEST_SRC := $(shell find tests -name '*_test.c' | sort)
SUP_SRC  := $(wildcard tests/support/*.c)
# Tests written as scripts (documentation, packaging, manual pages) run as they are, with the
# build's OPT and SAN in their environment to compile and install as the build does.
TEST_SCRIPTS := $(shell find tests -name '*_test.py' -o -name '*_test.sh' | sort)
export OPT SAN

# api/openapi.json compiled in (scripts/embed): GET /openapi.json serves the repository's document.
GEN_SRC  := $(BUILD)/gen/openapi_json.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_SRC:%.c=$(BUILD)/obj/%.o)
# The web inbox and console (ui/) are compiled into the programs as a generated table.
UI_FILES := $(sort $(wildcard ui/*.js ui/*.html ui/*.css ui/*.svg))
UI_OBJ   := $(BUILD)/obj/gen/ui_assets.o
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/obj/%.o) $(UI_OBJ)
SUP_OBJ  := $(SUP_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%) $(TEST_SCRIPTS)
LIB      := $(BUILD)/libmissive.a

all: $(LIB) $(SHLIB) $(BUILD)/missive $(BUILD)/missived

# Objects depend on a stamp named for the compiler flags, so changing the flags (e.g. -fPIC)
# rebuilds them instead of linking stale objects.
# (Made at parse time: `.SECONDARY:` below would let a missing stamp rebuild nothing.)
FLAGS_STAMP := $(BUILD)/.flags-$(shell echo '$(CC) $(CFLAGS)' | md5sum | cut -c1-12)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && [ -f $(FLAGS_STAMP) ] || { rm -f $(BUILD)/.flags-*; touch $(FLAGS_STAMP); })
endif

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS) -c $< -o $@

$(GEN_SRC): api/openapi.json scripts/embed
	@mkdir -p $(dir $@)
	@scripts/embed mv__openapi_json api/openapi.json > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/ui_assets.c: $(UI_FILES) scripts/embed-ui
	@mkdir -p $(dir $@)
	@scripts/embed-ui $(UI_FILES) > $@.tmp && mv $@.tmp $@

$(UI_OBJ): $(BUILD)/gen/ui_assets.c
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports exactly what the public headers declare: scripts/gen-symbols reads
# the declarations of include/ into the version script $(BUILD)/libmissive.map, so declaring a
# function in include/missive/ is what exports it, and every other symbol (the mv_ helpers of
# src/ included) stays local — a program cannot come to depend on them.
# (tests/release/abi_test.sh compares the library's dynamic symbols with the declarations.)
SYMBOL_MAP := $(BUILD)/libmissive.map
$(SYMBOL_MAP): include/missive.h $(wildcard include/missive/*.h) scripts/gen-symbols
	@mkdir -p $(dir $@)
	@scripts/gen-symbols > $@.tmp && mv $@.tmp $@

$(SHLIB): $(LIB_OBJ) $(SYMBOL_MAP)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(SYMBOL_MAP) \
	    -Wl,--as-needed -o $@ $(LIB_OBJ) $(LIB_LDLIBS)
	@ln -sf libmissive.so.$(VERSION) $(BUILD)/$(SONAME)
	@ln -sf $(SONAME) $(BUILD)/libmissive.so

$(BUILD)/missive: $(BUILD)/obj/src/cmd/missive.o $(CMD_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/missived: $(BUILD)/obj/src/cmd/missived.o $(CMD_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(SUP_OBJ) $(CMD_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The allocation-failure test sees every allocation of missive's own objects (tests/base/torture_test.c).
$(BUILD)/tests/base/torture_test: LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc \
    -Wl,--wrap=free,--wrap=strdup,--wrap=strndup

# The browser suite again, writing its screenshots into docs/img (the pictures docs/web-inbox.md shows).
screenshots: all
	@MISSIVE_SCREENSHOT_DIR=$(CURDIR)/docs/img BUILD=$(BUILD) tests/browser/browser_test.sh

test: all $(TEST_BIN)
	@BUILD=$(BUILD) scripts/run-tests $(TEST_BIN)

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test

# The tests whose claims are about threads (group commit, the work pools, the outgoing-call loop,
# claim races, sagas under concurrent runners, the change log) under ThreadSanitizer.
TSAN_TESTS := store/group_commit_test store/store_test store/pipeline_test http/work_pool_test \
    http/server_test http/server_later_test deliver/loop_test message/claim_test \
    message/action_loop_test message/create_loop_test message/changes_test durable/saga_test \
    durable/saga_async_test store/pg_batch_test store/write_async_test

tsan:
	@$(MAKE) --no-print-directory BUILD=build-tsan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=thread" tsan-run

tsan-run: all $(addprefix $(BUILD)/tests/,$(TSAN_TESTS))
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0 suppressions=$(CURDIR)/tests/tsan.supp $(TSAN_OPTIONS)" BUILD=$(BUILD) \
	    scripts/run-tests $(addprefix $(BUILD)/tests/,$(TSAN_TESTS))

run: all
	@scripts/run-example

# Benchmarks (not part of `make test`): release binaries in build-release/ (-O2 -DNDEBUG), the
# programs of bench/*.c beside them in build-release/bench/, then bench/run prints the table.
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench-bin: all $(BENCH_BIN)

bench:
	@$(MAKE) --no-print-directory BUILD=build-release OPT="-O2 -DNDEBUG" bench-bin
	@BUILD=build-release bench/run

# The same 3-step saga on DBOS and Restate beside missive (bench/peers/run; needs node and npm).
bench-peers:
	@$(MAKE) --no-print-directory BUILD=build-release OPT="-O2 -DNDEBUG" bench-bin
	@BUILD=build-release bench/peers/run

# libFuzzer harnesses (fuzz/*_fuzz.c: the HTTP router and bodies, the Mustache compiler, the
# JsonLogic compiler, template validation), built with clang + ASan/UBSan into build-fuzz/ (the
# library compiled once, each harness linked against it) and run FUZZ_SECONDS each; seeds come
# from fuzz/seeds/<name>/, the growing corpus stays in build-fuzz/. FUZZ_TARGETS picks some.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_TARGETS ?= $(patsubst fuzz/%.c,%,$(wildcard fuzz/*_fuzz.c))
FUZZ_SAN     := -fsanitize=address,undefined
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 $(FUZZ_SAN) -Iinclude -Isrc \
                $(shell pkg-config --cflags $(PKGS))
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=build-fuzz/obj/%.o) $(GEN_SRC:%.c=build-fuzz/obj/%.o)

build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -fsanitize=fuzzer-no-link -c $< -o $@

build-fuzz/%_fuzz: build-fuzz/obj/fuzz/%_fuzz.o $(FUZZ_LIB_OBJ)
	@echo "fuzz: linking $@"
	@$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(LDLIBS)

fuzz-deps:
	@dpkg-query -W -f='$${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; }

fuzz: fuzz-deps
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=build-fuzz/%)
	@set -e; for n in $(FUZZ_TARGETS); do \
	    mkdir -p build-fuzz/corpus-$$n; \
	    echo "fuzz: running $$n for $(FUZZ_SECONDS) s"; \
	    build-fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	        build-fuzz/corpus-$$n $$(test -d fuzz/seeds/$$n && echo fuzz/seeds/$$n) 2>build-fuzz/$$n.log \
	        || { tail -n 40 build-fuzz/$$n.log; exit 1; }; \
	    grep -E 'stat::number_of_executed_units|stat::new_units_added' build-fuzz/$$n.log | sed "s/^/fuzz: $$n /"; \
	done

lint:
	clang-tidy --quiet $(LIB_SRC) $(CMD_SRC) $(CMD_MAIN) -- -std=c11 -D_GNU_SOURCE -Iinclude -Isrc \
	    $(shell pkg-config --cflags $(PKGS))
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	    --include=$(shell pkg-config --variable=includedir jansson)/jansson.h \
	    --suppress=missingIncludeSystem --inline-suppr -Iinclude -Isrc src

# Formatting as .clang-format says, checked without changing anything (clang-format -i fixes it).
FORMAT_SRC = $(shell find src include tests -name '*.[ch]' | sort)

format-check:
	@clang-format --dry-run -Werror $(FORMAT_SRC) && echo "format-check: $(words $(FORMAT_SRC)) files formatted"

# make install [PREFIX=/usr/local] [DESTDIR=]; the layout is in docs/operations.md ("Installing").
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
PUBLIC_H := $(wildcard include/missive/*.h)
MANPAGES := man/missive.1 man/missived.8 man/missive.json.5

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/missive \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR)
	install -m 755 $(BUILD)/missived $(BUILD)/missive $(DESTDIR)$(BINDIR)/
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libmissive.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmissive.so
	install -m 644 include/missive.h $(DESTDIR)$(INCDIR)/
	install -m 644 $(PUBLIC_H) $(DESTDIR)$(INCDIR)/missive/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' dist/missive.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/missive.pc
	install -m 644 man/missive.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 man/missive.json.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 644 man/missived.8 $(DESTDIR)$(MANDIR)/man8/
	sed -e 's|@BINDIR@|$(BINDIR)|' dist/missived.service.in > $(DESTDIR)$(UNITDIR)/missived.service

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/missived $(DESTDIR)$(BINDIR)/missive
	rm -f $(DESTDIR)$(LIBDIR)/libmissive.a $(DESTDIR)$(LIBDIR)/libmissive.so.$(VERSION) \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libmissive.so
	rm -f $(DESTDIR)$(INCDIR)/missive.h $(addprefix $(DESTDIR)$(INCDIR)/missive/,$(notdir $(PUBLIC_H)))
	rmdir $(DESTDIR)$(INCDIR)/missive 2>/dev/null || true
	rm -f $(DESTDIR)$(LIBDIR)/pkgconfig/missive.pc
	rm -f $(DESTDIR)$(MANDIR)/man1/missive.1 $(DESTDIR)$(MANDIR)/man5/missive.json.5 \
	    $(DESTDIR)$(MANDIR)/man8/missived.8
	rm -f $(DESTDIR)$(UNITDIR)/missived.service

# build/{libmissive0,libmissive-dev,missive}_<version>_amd64.deb: `make install PREFIX=/usr` staged
# and split by scripts/build-deb, which prints their paths in install order.
deb:
	@scripts/build-deb $(BUILD) $(VERSION)

# The version (MV_VERSION_STRING of include/missive/version.h); `make version-sync` copies it into
# api/openapi.json and the TypeScript client's package files (scripts/sync-version).
version:
	@echo $(VERSION)

version-sync:
	@scripts/sync-version

clean:
	rm -rf build build-asan build-tsan build-release build-fuzz var

.PHONY: all test screenshots asan tsan tsan-run run lint format-check clean fuzz fuzz-deps bench bench-bin bench-peers install uninstall deb version version-sync
.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
-include $(shell find build-fuzz/obj -name '*.d' 2>/dev/null)
