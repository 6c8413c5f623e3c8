# saelite - one Makefile for everything. `make` builds ./saelite, `make test` runs the tests,
# `make bench` the benchmarks, `make demo` the whole pipeline. Missing Debian packages are
# installed by tools/deps.sh the first time (see build/flags.mk below).

.DEFAULT_GOAL := all
# Compile on every core unless the caller gave -j: a serial build took 4 of `make test`'s 10
# minutes on 2 cores. The pipelines (demo.mk) are chains of one step after another, each step
# already on every core, so only the build and the data fetch overlap there.
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
BUILD   ?= build
OPT     ?= -O2
ARCH    ?= -march=native
SAN     ?=
# Never -ffast-math: the numerical tests compare against references to 1e-4 and rely on IEEE
# semantics (NaN checks, -inf masks). No contraction into FMAs either: GCC's ISO C mode does not
# contract, clang's does, and the vector kernels (Adam's AVX-512 loop) give the scalar tails'
# bits only when neither side is contracted.
CFLAGS  ?= $(OPT) -g $(ARCH)
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
           -fno-fast-math -ffp-contract=off -pthread -I. -I$(BUILD)/gen $(SAN)
LDFLAGS += -pthread $(SAN)

PKGS := openblas sqlite3 libpng libpcre2-8 libcjson cairo libmicrohttpd ompi-c
# OpenMPI (common/dist.c; `mpirun -np N ./saelite sae-train ...`). Root is the norm on the build
# and CI machines, and 2 cores run the -np 4 tests: let mpirun run as root and oversubscribe, and
# use the shared-memory transport without the single-copy (CMA) path that containers forbid.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1
export OMPI_MCA_btl_vader_single_copy_mechanism := none
# Libraries without a pkg-config file: oneDNN (libdnnl-dev; the bf16 path of sae/sae_bf16.c),
# LIBLINEAR (liblinear-dev; the logistic-regression probes of analysis/eval_probe.c).
NOPKG_LIBS := -ldnnl -llinear
# `make` alone builds ./saelite (the flags.mk rule below would otherwise be the default goal).
.DEFAULT_GOAL := all

ifeq ($(filter clean distclean,$(MAKECMDGOALS)),)
# Installing packages and asking pkg-config happens once; flags.mk is remade (and make restarts)
# when the dependency script changes.
include build/flags.mk
endif

build/flags.mk: tools/deps.sh
	@mkdir -p build
	@bash tools/deps.sh
	@echo "PKG_CFLAGS := $$(pkg-config --cflags $(PKGS))" > $@.tmp
	@echo "PKG_LIBS := $$(pkg-config --libs $(PKGS)) $(NOPKG_LIBS) -Wl,-rpath,$$(pkg-config --variable=libdir openblas) -lm" >> $@.tmp
	@mv $@.tmp $@

# Library modules (everything but cli/), one directory each. A module has one or more public
# headers (store/ has store.h, store_ana.h, store_sae.h, ...), each opening with its contract;
# docs/architecture.md says which module may include which, and `make lint` checks it.
MODULES  := common corpus model extract store sae analysis reports toy serve sweep
LIB_SRC  := $(foreach m,$(MODULES),$(wildcard $(m)/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC  := $(wildcard cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_SH  := $(sort $(wildcard tests/test_*.sh))
BENCH_SRC:= $(wildcard bench/bench_*.c)
BENCH_BIN:= $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
SQL_SRC  := $(wildcard store/*.sql)
SERVE_ASSETS := $(sort $(wildcard serve/assets/*))
GEN      := $(BUILD)/gen/commands.h $(SQL_SRC:store/%.sql=$(BUILD)/gen/%_sql.h) $(BUILD)/gen/serve_assets.h
# Generated headers are real inputs of the objects (-MMD records them): never delete them as
# intermediates, or the next make recompiles the store.
.SECONDARY: $(GEN)

.PHONY: all test bench demo data clean distclean test-asan fuzz lint
all: saelite
all: saelite.so
test: saelite.so

# The SQL functions of store/sqlfuncs.c as a loadable SQLite extension: sqlite3 db ".load ./saelite"
saelite.so: store/sqlfuncs.c store/sqlfuncs.h build/flags.mk
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -fPIC -shared -DSAELITE_SQLITE_EXT -o $@ store/sqlfuncs.c $(LDFLAGS) -lm

saelite: $(CLI_OBJ) $(BUILD)/libsaelite.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libsaelite.a $(PKG_LIBS)

$(BUILD)/libsaelite.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

# The command table: every `CLI_COMMAND(id, ...)` line in cli/cmd_*.c, sorted.
$(BUILD)/gen/commands.h: $(wildcard cli/cmd_*.c)
	@mkdir -p $(dir $@)
	@grep -ho '^CLI_COMMAND([a-z0-9_]*' /dev/null $^ | sed 's/CLI_COMMAND(\(.*\)/X(\1)/' | sort > $@.tmp
	@mv $@.tmp $@

# SQL files are embedded as NUL-terminated strings: store/schema.sql -> schema_sql[].
$(BUILD)/gen/%_sql.h: store/%.sql
	@mkdir -p $(dir $@)
	@{ echo "static const char $*_sql[] = {"; xxd -i < $<; echo ", 0x00};"; } > $@.tmp
	@mv $@.tmp $@

# The browser's files (serve/assets/*) as byte arrays: app.js -> app_js[], app_js_len (xxd -i names
# them after the file). The page needs no build step of its own and no network.
$(BUILD)/gen/serve_assets.h: $(SERVE_ASSETS)
	@mkdir -p $(dir $@)
	@{ for f in $(SERVE_ASSETS); do (cd $$(dirname $$f) && xxd -i $$(basename $$f)) | \
	    sed 's/^unsigned/static const unsigned/'; done; } > $@.tmp
	@mv $@.tmp $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libsaelite.a | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libsaelite.a $(PKG_LIBS) $(LDFLAGS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libsaelite.a | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libsaelite.a $(PKG_LIBS) $(LDFLAGS)

# Tests use the real corpus and GPT-2 tokenizer files when present, so fetch them first.
test: saelite $(TEST_BIN) data
	@tools/run-tests.sh $(TEST_BIN) $(TEST_SH)

# The include check (docs/architecture.md); tests/test_layering.sh also runs it in `make test`.
lint:
	@tools/check-layering.sh

bench: saelite $(BENCH_BIN)
	@bash tools/run-bench.sh $(BENCH_BIN)

# AddressSanitizer + UBSan build of the library and tests in build/asan (see issue: reliability).
test-asan:
	@$(MAKE) --no-print-directory BUILD=build/asan OPT=-O1 \
	    SAN="-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=undefined,float-cast-overflow" \
	    build/asan/saelite-asan asan-run

build/asan/saelite-asan: $(CLI_OBJ) $(BUILD)/libsaelite.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libsaelite.a $(PKG_LIBS)

# the binary the scripts run is a prerequisite: under -j both goals of test-asan build at once
asan-run: $(TEST_BIN) $(BUILD)/saelite-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	    SAELITE_BIN=build/asan/saelite-asan tools/run-tests.sh $(TEST_BIN) $(TEST_SH)

data:
	@bash tools/fetch-data.sh

# `make install` (PREFIX, DESTDIR as usual): the binary, the SQLite extension and the man page,
# which is generated from the command and flag tables (`saelite help --man`), never hand-written.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib/saelite
MANDIR  ?= $(PREFIX)/share/man/man1
.PHONY: man install uninstall
man: $(BUILD)/saelite.1
$(BUILD)/saelite.1: saelite
	@mkdir -p $(dir $@)
	./saelite help --man > $@.tmp
	@mv $@.tmp $@
install: saelite saelite.so $(BUILD)/saelite.1
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(MANDIR)
	install -m 755 saelite $(DESTDIR)$(BINDIR)/saelite
	install -m 644 saelite.so $(DESTDIR)$(LIBDIR)/saelite.so
	install -m 644 $(BUILD)/saelite.1 $(DESTDIR)$(MANDIR)/saelite.1
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/saelite $(DESTDIR)$(LIBDIR)/saelite.so $(DESTDIR)$(MANDIR)/saelite.1
	rmdir $(DESTDIR)$(LIBDIR) 2>/dev/null || true

include demo.mk

clean:
	rm -rf build saelite

distclean: clean
	rm -rf data runs demo

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) $(BENCH_BIN:=.d)

# libFuzzer targets fuzz/fuzz_<t>.c (clang; the library is rebuilt in build/fuzz with coverage and
# ASan+UBSan). `make fuzz FUZZ_SECONDS=N` runs each target N seconds (default 60) from its
# committed seed corpus fuzz/corpus/<t>/; findings land in build/fuzz/crashes/<t>/ (see
# docs/reliability.md). `make fuzz FUZZ_TARGETS="npy"` runs a subset.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
fuzz:
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang OPT=-O1 \
	    SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" \
	    $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
	@bash fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

build/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(BUILD)/libsaelite.a | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libsaelite.a $(PKG_LIBS) $(LDFLAGS) -fsanitize=fuzzer
