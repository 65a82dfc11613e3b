# missive — plain Makefile. `make` builds the library and both programs; `make test` runs every
# test binary and prints the grand total; `make asan` does the same with ASan + UBSan.
PKGS    := sqlite3 libpq jansson libmicrohttpd libcurl libcrypto
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

CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-missing-field-initializers -Wno-format-truncation \
           -Iinclude -Isrc -Itests $(OPT) $(SAN) -MMD -MP $(shell pkg-config --cflags $(PKGS))
LDLIBS  := $(shell pkg-config --libs $(PKGS)) -lpthread -lm
LDFLAGS := $(SAN)

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cmd/*' | sort)
CMD_MAIN := src/cmd/missive.c src/cmd/missived.c
CMD_SRC  := $(filter-out $(CMD_MAIN),$(wildcard src/cmd/*.c))
TEST_SRC := $(shell find tests -name '*_test.c' | sort)
SUP_SRC  := $(wildcard tests/support/*.c)
# Tests written as scripts (documentation, packaging, manual pages): run as they are.
TEST_SCRIPTS := $(shell find tests -name '*_test.py' -o -name '*_test.sh' | sort)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# The web inbox and console (ui/) are compiled into the programs as a generated table.
UI_FILES := $(sort $(wildcard ui/*.js ui/*.html ui/*.css ui/*.svg))
UI_OBJ   := $(BUILD)/obj/gen/ui_assets.o
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/obj/%.o) $(UI_OBJ)
SUP_OBJ  := $(SUP_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libmissive.a

all: $(LIB) $(BUILD)/missive $(BUILD)/missived

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/gen/ui_assets.c: $(UI_FILES) scripts/embed-ui
	@mkdir -p $(dir $@)
	@scripts/embed-ui $(UI_FILES) > $@.tmp && mv $@.tmp $@

$(UI_OBJ): $(BUILD)/gen/ui_assets.c
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/missive: $(BUILD)/obj/src/cmd/missive.o $(CMD_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/missived: $(BUILD)/obj/src/cmd/missived.o $(CMD_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(SUP_OBJ) $(CMD_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Test programs that are scripts rather than C binaries (they print the same "N passed, M failed").
TEST_SCRIPTS := tests/browser/run

test: all $(TEST_BIN)
	@BUILD=$(BUILD) scripts/run-tests $(TEST_BIN) $(TEST_SCRIPTS)

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test

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

# libFuzzer harnesses (fuzz/*_fuzz.c), built with clang + ASan/UBSan into build-fuzz/ and run
# FUZZ_SECONDS each; seeds come from fuzz/seeds/<name>/, the growing corpus stays in build-fuzz/.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_SRC     := $(wildcard fuzz/*_fuzz.c)

fuzz:
	@dpkg-query -W -f='$${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; }
	@mkdir -p build-fuzz
	@set -e; for f in $(FUZZ_SRC); do \
	    n=$$(basename $$f .c); \
	    echo "fuzz: building $$n"; \
	    $(FUZZ_CC) -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	        -Iinclude -Isrc $(shell pkg-config --cflags $(PKGS)) $$f $(LIB_SRC) -o build-fuzz/$$n $(LDLIBS); \
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

clean:
	rm -rf build build-asan build-release build-fuzz var

.PHONY: all test asan run lint clean fuzz bench bench-bin
.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
