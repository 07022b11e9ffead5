# libFuzzer targets (see fuzz/README.md). Included by the top Makefile; to use
# it alone: make -f Makefile -f fuzz/fuzz.mk fuzz-quick
#
#   make fuzz-build    instrumented library + one binary per target
#   make fuzz-regress  replay fuzz/regressions/ and the seed corpora (no fuzzing)
#   make fuzz-quick    replay, then FUZZ_QUICK_TIME seconds of fuzzing per target (CI)
#   make fuzz          replay, then FUZZ_TIME seconds per target (long runs)
#   make fuzz-one FUZZ_TARGET=mesh_spec [FUZZ_TIME=...]
#   make fuzz-coverage line coverage of src/ by the seeds and the last runs' corpora
#
# The runs are done by fuzz/run.sh (each ends with "N passed, N failed").
# Fuzzing uses a scratch copy of each corpus under $(BUILD_FUZZ)/run/<target>
# (kept between runs, so they build on each other; fuzz-clean removes it);
# new inputs found there are not written back (see README: promoting seeds).
# Any crash, sanitizer report or failed invariant stops that target, saves
# the input as $(BUILD_FUZZ)/artifacts/<target>/crash-<sha1> and fails the make.

BUILD_FUZZ ?= build-fuzz

# Included once only (also when named with -f besides an including Makefile).
# The library build invoked below includes this file again with
# BUILD=$(BUILD_FUZZ): define nothing there, or its rules would collide.
ifndef _DLRUN_FUZZ_MK
_DLRUN_FUZZ_MK := 1
ifneq ($(BUILD),$(BUILD_FUZZ))

_fuzz_saved_goal := $(.DEFAULT_GOAL)

FUZZ_CC      ?= clang-14
FUZZ_SAN     ?= -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
FUZZ_OPT     ?= -O1 -g -fno-omit-frame-pointer
FUZZ_TARGETS := dlpack_import device_spec mesh_spec frombytes
FUZZ_TIME    ?= 600
FUZZ_QUICK_TIME ?= 20
# Extra libFuzzer flags, e.g. FUZZ_FLAGS=-fork=4 (parallel; -jobs would write its
# logs into the current directory)
FUZZ_FLAGS   ?=

FUZZ_LIB  := $(BUILD_FUZZ)/libdlrun.a
FUZZ_BIN  := $(BUILD_FUZZ)/fuzz
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BIN)/fuzz_%)

.PHONY: fuzz-build fuzz-regress fuzz-quick fuzz fuzz-one fuzz-coverage fuzz-clean _fuzz-lib

# The instrumented library, by the top Makefile's own rules. Always asked
# for (its make decides what is out of date); the binaries relink only when
# the archive changes.
_fuzz-lib:
	@+$(MAKE) --no-print-directory BUILD=$(BUILD_FUZZ) CC=$(FUZZ_CC) SAN="$(FUZZ_SAN)" \
	  OPT="$(FUZZ_OPT)" $(FUZZ_LIB)

$(FUZZ_LIB): _fuzz-lib ;

$(FUZZ_BIN)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	@$(FUZZ_CC) -std=c11 -D_GNU_SOURCE $(FUZZ_OPT) -Wall -Wextra -Werror \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -pthread \
	  -Iinclude -Isrc -o $@ $< $(FUZZ_LIB) -lm

fuzz-build: deps-hardening $(FUZZ_BINS)

FUZZ_RUN = FUZZ_WORK=$(BUILD_FUZZ) FUZZ_FLAGS="$(FUZZ_FLAGS)" \
           sh fuzz/run.sh

# Every saved input once, each on its own so that every failing one is
# listed: fuzz/regressions/, then fuzz/corpus/.
fuzz-regress: fuzz-build
	@$(FUZZ_RUN) replay $(FUZZ_BIN) $(FUZZ_TARGETS)

# Replay, then fuzz every target (all of them, even after a failure); ends
# with "N passed, N failed" and fails if anything did.
fuzz-quick: fuzz-build
	@$(FUZZ_RUN) fuzz $(FUZZ_BIN) $(FUZZ_QUICK_TIME) $(FUZZ_TARGETS)

fuzz: fuzz-build
	@$(FUZZ_RUN) fuzz $(FUZZ_BIN) $(FUZZ_TIME) $(FUZZ_TARGETS)

FUZZ_TARGET ?= dlpack_import
fuzz-one: $(FUZZ_BIN)/fuzz_$(FUZZ_TARGET)
	@$(FUZZ_RUN) fuzz $(FUZZ_BIN) $(FUZZ_TIME) $(FUZZ_TARGET)

# Line coverage of dlrun's sources reached by the saved inputs: the seeds
# plus whatever the last fuzz runs kept under $(BUILD_FUZZ)/run/ (no
# sanitizers; profile build in $(BUILD_FUZZ)-cov). Each input runs on its
# own, so inputs that fail (known bugs) only lose their own coverage.
FUZZ_COV_BUILD := $(BUILD_FUZZ)-cov
FUZZ_COV_FLAGS := -fprofile-instr-generate -fcoverage-mapping
FUZZ_PROFDATA  ?= llvm-profdata-14
FUZZ_LLVM_COV  ?= llvm-cov-14
FUZZ_COV_SRC   ?= src/dlpack/import.c src/device/spec.c src/device/runtime.c src/shard \
                  src/array/create.c src/array/read.c src/array/boxcopy.c src/array/grid.c \
                  src/core/shape.c

fuzz-coverage:
	@+$(MAKE) --no-print-directory BUILD=$(FUZZ_COV_BUILD) CC=$(FUZZ_CC) \
	  SAN="-fsanitize=fuzzer-no-link $(FUZZ_COV_FLAGS)" OPT="-O1 -g" $(FUZZ_COV_BUILD)/libdlrun.a
	@set -e; p=$(FUZZ_COV_BUILD)/prof; rm -rf $$p; mkdir -p $$p $(FUZZ_COV_BUILD)/fuzz; bins=; \
	for t in $(FUZZ_TARGETS); do \
	  b=$(FUZZ_COV_BUILD)/fuzz/fuzz_$$t; \
	  $(FUZZ_CC) -std=c11 -D_GNU_SOURCE -O1 -g $(FUZZ_DEFS) $(FUZZ_COV_FLAGS) -fsanitize=fuzzer -pthread \
	    -Iinclude -Isrc -o $$b fuzz/fuzz_$$t.c $(FUZZ_COV_BUILD)/libdlrun.a -lm; \
	  files=$$(find fuzz/corpus/$$t $(BUILD_FUZZ)/run/$$t -type f 2>/dev/null || true); \
	  bad=0; for f in $$files; do \
	    LLVM_PROFILE_FILE=$$p/$$t-%1m.profraw $$b -artifact_prefix=$$p/ $$f >/dev/null 2>&1 || \
	      bad=$$((bad + 1)); \
	  done; \
	  echo "  COV     $$t: $$(echo "$$files" | wc -l) inputs$$([ $$bad = 0 ] || echo ", $$bad failing")"; \
	  bins="$$bins $${bins:+-object} $$b"; \
	done; \
	$(FUZZ_PROFDATA) merge -o $$p/all.profdata $$p/*.profraw; \
	$(FUZZ_LLVM_COV) report -instr-profile=$$p/all.profdata $$bins $(FUZZ_COV_SRC); \
	echo "per-line: $(FUZZ_LLVM_COV) show -instr-profile=$$p/all.profdata $$bins <file>"

fuzz-clean:
	rm -rf $(BUILD_FUZZ) $(FUZZ_COV_BUILD)

.DEFAULT_GOAL := $(_fuzz_saved_goal)

endif
endif
