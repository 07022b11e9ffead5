# dlrun build. Everything goes under $(BUILD) (out of tree); `make clean` removes it.
BUILD    ?= build
ifeq ($(origin CC),default)
CC       := gcc
endif
LUA_INC  ?= /usr/include/lua5.4
LUA_LIB  ?= -llua5.4
OPT      ?= -O2 -g
SAN      ?=
WARN     := -Wall -Wextra -Werror
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC -fvisibility=hidden \
              -pthread -Iinclude -Isrc -I$(LUA_INC) $(CFLAGS)
LDFLAGS_ALL := $(SAN) -pthread $(LDFLAGS)
LIBS     := -lm

CORE_SRC := $(sort $(wildcard src/core/*.c src/mem/*.c src/device/*.c src/shard/*.c src/array/*.c src/dlpack/*.c))
LUA_SRC  := $(sort $(wildcard src/lua/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard spec/c/test_*.c))
HOST_SRC := $(sort $(wildcard examples/host/*.c))
STRESS_SRC := $(sort $(wildcard spec/stress/*.c))

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
LUA_OBJ  := $(LUA_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    := $(TEST_SRC:spec/c/%.c=$(BUILD)/tests/%)
HOSTS    := $(HOST_SRC:examples/host/%.c=$(BUILD)/examples/%)
STRESSES := $(STRESS_SRC:spec/stress/%.c=$(BUILD)/stress/%)

LIB_A    := $(BUILD)/libdlrun.a
LIB_SO   := $(BUILD)/libdlrun.so
LUA_LIB_A := $(BUILD)/libdlrun_lua.a
LUA_MOD  := $(BUILD)/lua/dlrun/core.so
EXE      := $(BUILD)/dlrun

.PHONY: all deps deps-hardening test demo clean c-tests check-asan check-tsan check-valgrind check-all \
        check-layers
all: deps $(LIB_A) $(LIB_SO) $(LUA_LIB_A) $(LUA_MOD) $(EXE) $(TESTS) $(HOSTS) $(STRESSES)

# Installs missing Debian packages (no-op when everything is there).
deps:
	@scripts/deps.sh

deps-hardening:
	@scripts/deps.sh --hardening

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(LIB_A): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	@rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(CORE_OBJ)
	@echo "  LD      $@"
	@$(CC) -shared $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# The Lua binding alone, for host applications embedding Lua (include/dlrun/lua.h).
$(LUA_LIB_A): $(LUA_OBJ)
	@echo "  AR      $@"
	@rm -f $@ && ar rcs $@ $^

# The Lua C module: `require "dlrun"` loads lua/dlrun/init.lua, which loads this.
$(LUA_MOD): $(LUA_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -shared $(LDFLAGS_ALL) -o $@ $(LUA_OBJ) $(LIB_A) $(LIBS)

$(EXE): $(CLI_OBJ) $(LUA_OBJ) $(LIB_A)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -rdynamic -o $@ $(CLI_OBJ) $(LUA_OBJ) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

$(BUILD)/tests/%: spec/c/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(LIBS)

# Host applications are built as a user would: public headers only.
$(BUILD)/examples/%: examples/host/%.c $(LIB_A) $(LUA_LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude -I$(LUA_INC) $(LDFLAGS_ALL) -o $@ $< \
	  $(LUA_LIB_A) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

# Stress programs, on the public headers like host applications.
$(BUILD)/stress/%: spec/stress/%.c $(LIB_A) $(LUA_LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -Iinclude -I$(LUA_INC) $(LDFLAGS_ALL) \
	  -o $@ $< $(LUA_LIB_A) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

# The whole suite: C tests and busted specs; ends with "N passed, N failed".
test: all
	@scripts/run-tests.sh $(BUILD)

# The allowed include edges between the folders of src/ (also run by test).
check-layers:
	@scripts/check-layers.sh

c-tests: all
	@scripts/run-tests.sh $(BUILD) --c-only

# The main demo: a pipeline on the default simulated devices.
demo: all
	$(EXE) examples/pipeline.lua

# ---- hardening (see README, "Development") ----

CLANG    ?= clang-14
ASAN     := -fsanitize=address,undefined -fno-sanitize-recover=all

# Stress programs, on the public headers like host applications.
$(BUILD)/stress/%: spec/stress/%.c $(LIB_A) $(LUA_LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -Iinclude -I$(LUA_INC) $(LDFLAGS_ALL) \
	  -o $@ $< $(LUA_LIB_A) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

# The whole suite (C tests and busted, run inside the instrumented dlrun)
# under AddressSanitizer and UndefinedBehaviorSanitizer, leak checking on.
check-asan: deps-hardening
	@$(MAKE) --no-print-directory BUILD=build-asan CC=$(CLANG) SAN="$(ASAN)" OPT="-O1 -g" all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  BUSTED_RUNNER=build-asan/dlrun scripts/run-tests.sh build-asan

# Concurrency under ThreadSanitizer: host threads and Lua states sharing one
# runtime, plus the C tests.
check-tsan: deps-hardening
	@$(MAKE) --no-print-directory BUILD=build-tsan CC=$(CLANG) SAN=-fsanitize=thread OPT="-O1 -g" all
	@TSAN_OPTIONS=halt_on_error=1 scripts/run-stress.sh build-tsan

# The C tests, the stress programs and a pipeline under valgrind's memcheck.
check-valgrind: deps-hardening all
	@scripts/run-valgrind.sh $(BUILD)

check-all: test check-asan check-tsan check-valgrind

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-fuzz-cov build-bench

-include fuzz/fuzz.mk bench/bench.mk
-include $(CORE_OBJ:.o=.d) $(LUA_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
