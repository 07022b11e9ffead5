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
LIBS     := -lm -ldl
LIBFLAG  ?= -shared
# Where DLPack's header lives when not on the compiler's default path
# (e.g. -I/opt/dlpack/include); also written into dlrun.pc's Cflags.
DLPACK_CFLAGS ?=
CFLAGS_ALL += $(DLPACK_CFLAGS)

# The version and the ABI number are written once, in include/dlrun/dlrun.h
# (DLRUN_VERSION_STRING, DLRUN_ABI_VERSION): the library's names, dlrun.pc, the
# man page and `make rock` (the rock's version) read them there.
VERSION  := $(shell sed -n 's/.*DLRUN_VERSION_STRING "\(.*\)".*/\1/p' include/dlrun/dlrun.h)
ABI      := $(shell sed -n 's/.*define DLRUN_ABI_VERSION \([0-9][0-9]*\).*/\1/p' include/dlrun/dlrun.h)

# The built-in platforms (sim, cpu, and host execution under both) are in libdlrun.
CORE_SRC := $(sort $(wildcard src/core/*.c src/mem/*.c src/distributed/*.c src/device/*.c \
              src/platforms/host/*.c src/platforms/sim/*.c src/platforms/cpu/*.c src/shard/*.c \
              src/array/*.c src/dlpack/*.c))
LUA_SRC  := $(sort $(wildcard src/lua/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard spec/c/test_*.c))
# Host applications on the public headers; opencl_interop also needs OpenCL
# (built with the OpenCL module, below).
HOST_SRC := $(filter-out examples/host/opencl_interop.c,$(sort $(wildcard examples/host/*.c)))
STRESS_SRC := $(sort $(wildcard spec/stress/*.c))

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
LUA_OBJ  := $(LUA_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    := $(TEST_SRC:spec/c/%.c=$(BUILD)/tests/%)
HOSTS    := $(HOST_SRC:examples/host/%.c=$(BUILD)/examples/%)
STRESSES := $(STRESS_SRC:spec/stress/%.c=$(BUILD)/stress/%)

LIB_A    := $(BUILD)/libdlrun.a
LIB_SO   := $(BUILD)/libdlrun.so
# The file is named after its soname, then the release: libdlrun.so.4.0.5.0.
SONAME   := libdlrun.so.$(ABI)
LIB_SO_FILE := $(SONAME).$(VERSION)
LUA_LIB_A := $(BUILD)/libdlrun_lua.a
LUA_MOD  := $(BUILD)/lua/dlrun/core.so
LUA_FILES := $(sort $(wildcard lua/dlrun/*.lua))
EXE      := $(BUILD)/dlrun
MAN      := $(BUILD)/dlrun.1
# Optional modules installed beside libdlrun; a rule that builds one adds it here.
LIB_MODULES :=

# The MPI transport, loaded only when a job is joined (include/dlrun/distributed.h):
# built when pkg-config knows an MPI (Open MPI's ompi-c, or MPICH's mpich). It is
# not instrumented by SAN: a sanitizer runtime of another compiler cannot share
# the process.
MPI_PC   := $(firstword $(foreach p,ompi-c mpich,$(shell pkg-config --exists $(p) 2>/dev/null && echo $(p))))
MPI_MOD  := $(BUILD)/libdlrun_mpi.so
ifneq ($(MPI_PC),)
LIB_MODULES += $(MPI_MOD)
endif

# What the platform modules with queues of their own share
# (src/platforms/common/: the op protocol, box copy planning), compiled into
# each module: a module sees the public headers and its services only.
PLATFORM_COMMON_SRC := $(sort $(wildcard src/platforms/common/*.c))
PLATFORM_COMMON_H   := $(sort $(wildcard src/platforms/common/*.h))

# The OpenCL platform (include/dlrun/platform.h), loaded at run time for
# "--devices opencl:N" and "auto": built when the OpenCL headers and the ICD
# loader are installed (Debian: opencl-headers, ocl-icd-opencl-dev). Like the
# MPI transport it links no libdlrun (the library hands it its services). It
# calls OpenCL 1.2 only, what every vendor's driver has.
OPENCL_SRC := $(sort $(wildcard src/platforms/opencl/*.c)) $(PLATFORM_COMMON_SRC)
OPENCL_MOD := $(BUILD)/libdlrun_opencl.so
OPENCL_OK := $(shell pkg-config --exists OpenCL 2>/dev/null && \
               printf '\043include <CL/cl.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo yes)
OPENCL_HOST := $(BUILD)/examples/opencl_interop
ifeq ($(OPENCL_OK),yes)
LIB_MODULES += $(OPENCL_MOD)
HOSTS += $(OPENCL_HOST)
endif

# The CUDA platform (docs/cuda.md), loaded at run time for "--devices cuda:N"
# and "auto": built everywhere, with no CUDA toolkit. It declares the driver
# API subset it calls itself (src/platforms/cuda/driver_api.h) and loads
# libcuda.so.1 when a runtime asks for it; its PTX kernels are text in the
# tree (kernels.ptx), embedded as a C string (never nvcc at build time).
CUDA_SRC := $(filter-out src/platforms/cuda/check_cuda_h.c,$(sort $(wildcard src/platforms/cuda/*.c))) \
            $(PLATFORM_COMMON_SRC)
CUDA_MOD := $(BUILD)/libdlrun_cuda.so
CUDA_PTX_C := $(BUILD)/gen/cuda_kernels_ptx.c
CUDA_HOME ?= /usr/local/cuda
LIB_MODULES += $(CUDA_MOD)

# Platform modules the C tests load (spec/c/modules/), built beside them and
# never installed: a stub for test_modules, and testnative (a platform with
# its own queue and events) for test_conformance.
TEST_PLATFORM_MOD := $(BUILD)/tests/libdlrun_test_platform.so
TEST_NATIVE_MOD  := $(BUILD)/tests/libdlrun_testnative.so
# The CUDA driver double (spec/cuda/double/, a test tool, never installed): a
# libcuda.so.1 stand-in the CUDA platform's tests load, and the same library
# without cuGetProcAddress_v2 (a pre-12.0 driver: the loader's dlsym path).
CUDA_DOUBLE_SRC := $(sort $(wildcard spec/cuda/double/*.c))
CUDA_DOUBLE     := $(BUILD)/tests/cuda-double/libcuda.so.1
CUDA_DOUBLE_NOGPA := $(BUILD)/tests/cuda-double-nogpa/libcuda.so.1
CUDA_DOUBLE_OBJ := $(BUILD)/obj/src/core/dtype.o $(BUILD)/obj/src/core/subbyte.o \
                   $(BUILD)/obj/src/core/dlpack_names.o $(BUILD)/obj/src/core/status.o
GPU_BW := $(BUILD)/bench/gpu_bandwidth

.PHONY: check-cuda-h check-ptx check-cycles
.PHONY: all _all sync-help deps deps-hardening test demo examples clean c-tests check-asan check-tsan check-valgrind \
        check-all check-layers check-abi abi-baseline check-fresh install uninstall lua-module \
        install-lua-module rock
# The packages first, then the build in a second make: what this Makefile
# detects when it is read (pkg-config's MPI) must see what deps.sh installed.
all: deps
	@+$(MAKE) --no-print-directory _all

_all: $(LIB_A) $(LIB_SO) $(LUA_LIB_A) $(LUA_MOD) $(EXE) $(MAN) $(TESTS) examples $(STRESSES) \
      $(LIB_MODULES) $(TEST_PLATFORM_MOD) $(TEST_NATIVE_MOD) $(CUDA_DOUBLE) $(CUDA_DOUBLE_NOGPA) \
      $(GPU_BW)

$(MPI_MOD): src/mpi/transport_mpi.c src/distributed/transport.h
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -fPIC -fvisibility=hidden -shared -Isrc \
	  $$(pkg-config --cflags $(MPI_PC)) -o $@ $< $$(pkg-config --libs $(MPI_PC))

$(OPENCL_MOD): $(OPENCL_SRC) src/platforms/opencl/ocl.h $(PLATFORM_COMMON_H) include/dlrun/platform.h
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE -DCL_TARGET_OPENCL_VERSION=120 $(OPT) $(SAN) $(WARN) -fPIC \
	  -fvisibility=hidden -shared -pthread -Iinclude -Isrc $$(pkg-config --cflags OpenCL) -o $@ \
	  $(OPENCL_SRC) $$(pkg-config --libs OpenCL)

$(CUDA_PTX_C): src/platforms/cuda/kernels.ptx
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	@{ echo '/* Generated from src/platforms/cuda/kernels.ptx by the Makefile. */'; \
	  echo 'const char cu_kernels_ptx[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; \
	  echo '    ;'; } >$@.tmp && mv $@.tmp $@

$(CUDA_MOD): $(CUDA_SRC) $(CUDA_PTX_C) src/platforms/cuda/cu.h src/platforms/cuda/driver_api.h \
             $(PLATFORM_COMMON_H) include/dlrun/platform.h
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC -fvisibility=hidden -shared -pthread \
	  -Iinclude -Isrc -o $@ $(CUDA_SRC) $(CUDA_PTX_C) -ldl

# The driver API declarations against NVIDIA's cuda.h, where one is installed
# (a compile-time check only: cuda.h is never included elsewhere); and the
# PTX against the toolkit's ptxas, where it is.
check-cuda-h:
	@if [ -f "$(CUDA_HOME)/include/cuda.h" ]; then \
	  $(CC) -std=c11 -fsyntax-only -I"$(CUDA_HOME)/include" src/platforms/cuda/check_cuda_h.c && \
	  echo "check-cuda-h: driver_api.h agrees with $(CUDA_HOME)/include/cuda.h"; \
	else echo "check-cuda-h: skipped (no $(CUDA_HOME)/include/cuda.h)"; fi

check-ptx:
	@if [ -x "$(CUDA_HOME)/bin/ptxas" ]; then \
	  "$(CUDA_HOME)/bin/ptxas" --gpu-name sm_80 src/platforms/cuda/kernels.ptx -o /dev/null && \
	  echo "check-ptx: kernels.ptx assembles for sm_80"; \
	else echo "check-ptx: skipped (no $(CUDA_HOME)/bin/ptxas)"; fi

# Test platform modules, built as a module is: public headers only.
define test_module
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -fPIC -fvisibility=hidden -shared -pthread \
	  -Iinclude -o $@ $<
endef
$(TEST_PLATFORM_MOD): spec/c/modules/platform_module.c include/dlrun/platform.h
	$(test_module)
# testnative is the skeleton of a platform module: the op protocol compiled in.
$(TEST_NATIVE_MOD): spec/c/modules/native_platform.c $(PLATFORM_COMMON_SRC) $(PLATFORM_COMMON_H) \
                    include/dlrun/platform.h
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -fPIC -fvisibility=hidden -shared -pthread \
	  -Iinclude -Isrc -o $@ $< $(PLATFORM_COMMON_SRC)

# The driver double is instrumented like the tests (SAN): it runs inside them.
# It links dlrun's dtype conversions (its sequence kernel's float16 and
# bfloat16 rounding), kept local by its export map.
define cuda_double
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC -fvisibility=hidden -shared -pthread \
	  -Iinclude -Isrc $(1) -Wl,-soname,libcuda.so.1 \
	  -Wl,--version-script=spec/cuda/double/exports.map -o $@ $(CUDA_DOUBLE_SRC) $(CUDA_DOUBLE_OBJ) -lm
endef
CUDA_DOUBLE_DEPS := $(CUDA_DOUBLE_SRC) $(CUDA_DOUBLE_OBJ) spec/cuda/double/double.h \
  spec/cuda/double/exports.map src/platforms/cuda/driver_api.h
$(CUDA_DOUBLE): $(CUDA_DOUBLE_DEPS)
	$(call cuda_double,)
$(CUDA_DOUBLE_NOGPA): $(CUDA_DOUBLE_DEPS)
	$(call cuda_double,-DCUDA_DOUBLE_NO_GPA)
$(BUILD)/tests/test_cuda_double: $(CUDA_DOUBLE) $(CUDA_DOUBLE_NOGPA)

# The CUDA bandwidth program (scripts/gpu-check.sh; docs/cuda.md, "Verifying
# on a GPU"): dlrun through its public API against the driver's own copies,
# the driver reached through the CUDA platform's loader, linked in. Never
# installed; make test runs it on the driver double.
$(GPU_BW): bench/gpu_bandwidth.c bench/gpu_latency.c bench/gpu_bench.h \
           src/platforms/cuda/loader.c src/platforms/cuda/cu.h \
           src/platforms/cuda/driver_api.h $(PLATFORM_COMMON_H) $(LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ bench/gpu_bandwidth.c bench/gpu_latency.c \
	  src/platforms/cuda/loader.c \
	  $(LIB_A) $(LIBS)

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

$(BUILD)/$(LIB_SO_FILE): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -shared $(LDFLAGS_ALL) -Wl,-soname,$(SONAME) -o $@ $^ $(LIBS)

# The names the loader (the soname) and the linker (-ldlrun) look for.
$(LIB_SO): $(BUILD)/$(LIB_SO_FILE)
	@ln -sf $(LIB_SO_FILE) $(BUILD)/$(SONAME)
	@ln -sf $(LIB_SO_FILE) $@

# The Lua binding alone, for host applications embedding Lua (include/dlrun/lua.h).
$(LUA_LIB_A): $(LUA_OBJ)
	@echo "  AR      $@"
	@rm -f $@ && ar rcs $@ $^

# The Lua C module: `require "dlrun"` loads lua/dlrun/init.lua, which loads this.
# Never unloaded (-z nodelete): lua_close dlcloses C modules, and unmapping
# the runtime's code while its worker threads may still run (the last buffer
# freed on a worker tears the runtime down on another thread) crashed plain
# lua5.4 at exit; its exit handlers (the default runtime, a trace still on)
# then run at exit, after the state has closed.
$(LUA_MOD): $(LUA_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LIBFLAG) $(LDFLAGS_ALL) -Wl,-z,nodelete -o $@ $(LUA_OBJ) $(LIB_A) $(LIBS)

$(EXE): $(CLI_OBJ) $(LUA_OBJ) $(LIB_A)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS_ALL) -rdynamic -o $@ $(CLI_OBJ) $(LUA_OBJ) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

$(BUILD)/tests/%: spec/c/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(LIBS)

# The host applications of examples/host/ (README, "A short tour of the C
# API"), into $(BUILD)/examples/: every one this machine can build
# (opencl_interop only with the OpenCL module). `make` builds them too.
examples: $(HOSTS)

# Host applications are built as a user would: public headers only.
$(BUILD)/examples/%: examples/host/%.c $(LIB_A) $(LUA_LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude -I$(LUA_INC) $(LDFLAGS_ALL) -o $@ $< \
	  $(LUA_LIB_A) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

# The OpenCL host example, on libdlrun.a and the ICD loader. Its run path
# ($ORIGIN/..) finds the OpenCL module in the build folder, as an installed
# application finds it beside the library.
$(OPENCL_HOST): examples/host/opencl_interop.c $(LIB_A)
ifeq ($(OPENCL_OK),yes)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude $$(pkg-config --cflags OpenCL) \
	  $(LDFLAGS_ALL) -Wl,-rpath,'$$ORIGIN/..' -o $@ $< $(LIB_A) $$(pkg-config --libs OpenCL) \
	  $(LIBS)
else
	@echo "$@ needs the OpenCL headers and ICD loader (Debian: opencl-headers," \
	  "ocl-icd-opencl-dev)" >&2; exit 1
endif

# Stress programs, on the public headers like host applications.
$(BUILD)/stress/%: spec/stress/%.c $(LIB_A) $(LUA_LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -Iinclude -I$(LUA_INC) $(LDFLAGS_ALL) \
	  -o $@ $< $(LUA_LIB_A) $(LIB_A) $(LUA_LIB) $(LIBS) -ldl

# The whole suite: C tests and busted specs; ends with "N passed, N failed".
test: all check-cuda-h check-ptx
	@scripts/run-tests.sh $(BUILD)

# The allowed include edges between the folders of src/ (also run by test).
check-layers:
	@scripts/check-layers.sh

# No circles among the C files of src/ (also run by test).
check-cycles:
	@scripts/check-cycles.sh

# The public ABI of the installed libdlrun.so against abi/libdlrun.abi (also
# run by test; README, "ABI"); abi-baseline records it after a soname bump
# (ABI_UNRELEASED=1: a break joining a bump not released yet).
check-abi: deps
	@scripts/check-abi.sh $(BUILD)

abi-baseline: deps
	@ABI_UNRELEASED=$(ABI_UNRELEASED) scripts/check-abi.sh --update $(BUILD)

c-tests: all
	@scripts/run-tests.sh $(BUILD) --c-only

# The main demo: a pipeline on the default simulated devices. A newcomer's
# first command: it installs (deps.sh --demo) and builds only what the
# pipeline needs, the dlrun command (its Lua files are the source tree's).
demo:
	@scripts/deps.sh --demo
	@+$(MAKE) --no-print-directory $(EXE)
	$(EXE) examples/pipeline.lua

# The README's two commands, run as a newcomer would in a minimal Debian
# root made by debootstrap (see README, "Development").
check-fresh:
	@scripts/check-fresh.sh $(BUILD)

# ---- install (see README, "Install") ----

PREFIX   ?= /usr/local
DESTDIR  ?=
LUA_V    := 5.4
bindir   ?= $(PREFIX)/bin
libdir   ?= $(PREFIX)/lib
includedir ?= $(PREFIX)/include
mandir   ?= $(PREFIX)/share/man
docdir   ?= $(PREFIX)/share/doc/dlrun
pkgdatadir ?= $(PREFIX)/share/dlrun
lmoddir  ?= $(PREFIX)/share/lua/$(LUA_V)
cmoddir  ?= $(PREFIX)/lib/lua/$(LUA_V)
HEADERS  := $(sort $(wildcard include/dlrun/*.h))
DOCS     := $(sort $(wildcard docs/*.md)) LICENSE
PC_FILES := dlrun.pc dlrun-lua.pc
# The folders install writes into. Those of them, and of their parents, that
# install creates are listed in $(pkgdatadir)/installed-dirs (without DESTDIR),
# which uninstall reads to remove them again once empty: never one that was
# there before (PREFIX=/usr keeps /usr/lib), nor one another package still uses.
INSTALL_DIRS := $(bindir) $(libdir)/pkgconfig $(includedir)/dlrun $(mandir)/man1 $(docdir) \
                $(pkgdatadir) $(lmoddir)/dlrun $(cmoddir)/dlrun
INSTALLED_DIRS = $(DESTDIR)$(pkgdatadir)/installed-dirs
# A directory under PREFIX, as the .pc files write it: relative to ${prefix}.
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# The .pc file $(1).in written as $(2), for this PREFIX and version.
pc_subst = sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(call pc_dir,$(libdir))|' \
  -e 's|@includedir@|$(call pc_dir,$(includedir))|' -e 's|@luadir@|$(call pc_dir,$(lmoddir))|' \
  -e 's|@VERSION@|$(VERSION)|' -e 's|@DLPACK_CFLAGS@|$(if $(DLPACK_CFLAGS), $(DLPACK_CFLAGS))|' \
  $(1).in >$(2)
# The Lua module into (Lua files folder, C modules folder): dlrun/*.lua and dlrun/core.so.
install_lua_module = install -d $(1)/dlrun $(2)/dlrun && install -m 644 $(LUA_FILES) $(1)/dlrun/ && \
  install -m 755 $(LUA_MOD) $(2)/dlrun/core.so

$(MAN): docs/dlrun.1.in include/dlrun/dlrun.h
	@mkdir -p $(dir $@)
	@sed 's/@VERSION@/$(VERSION)/g' $< >$@

# `dlrun --help` is the one list of options and variables: this copies it into
# the README's usage block and the man page's lists (spec/docs/help_spec.lua fails
# until they agree).
sync-help: $(EXE)
	@scripts/sync-help.sh $(EXE)

install: $(EXE) $(LIB_SO) $(LIB_A) $(LUA_LIB_A) $(LUA_MOD) $(MAN) $(LIB_MODULES)
	@echo "  INSTALL $(DESTDIR)$(PREFIX)"
	@made=$$(for d in $(INSTALL_DIRS); do p="$(DESTDIR)$$d"; \
	  while [ "$$p" != "$(DESTDIR)" ] && [ "$$p" != / ] && [ "$$p" != . ] && [ ! -d "$$p" ]; do \
	    echo "$${p#$(DESTDIR)}"; p=$$(dirname "$$p"); done; done); \
	  install -d $(addprefix $(DESTDIR),$(INSTALL_DIRS)) && \
	  { cat $(INSTALLED_DIRS) 2>/dev/null; echo "$$made"; } | sed '/^$$/d' | LC_ALL=C sort -u \
	    >$(INSTALLED_DIRS).new && mv $(INSTALLED_DIRS).new $(INSTALLED_DIRS)
	@install -m 755 $(EXE) $(DESTDIR)$(bindir)/dlrun
	@install -m 755 $(BUILD)/$(LIB_SO_FILE) $(LIB_MODULES) $(DESTDIR)$(libdir)/
	@ln -sf $(LIB_SO_FILE) $(DESTDIR)$(libdir)/$(SONAME)
	@ln -sf $(LIB_SO_FILE) $(DESTDIR)$(libdir)/libdlrun.so
	@install -m 644 $(LIB_A) $(LUA_LIB_A) $(DESTDIR)$(libdir)/
	@install -m 644 $(HEADERS) $(DESTDIR)$(includedir)/dlrun/
	@install -m 644 $(MAN) $(DESTDIR)$(mandir)/man1/dlrun.1
	@install -m 644 $(DOCS) $(DESTDIR)$(docdir)/
	@$(foreach pc,$(PC_FILES),$(call pc_subst,$(pc),$(DESTDIR)$(libdir)/pkgconfig/$(pc)) &&) true
	@$(call install_lua_module,$(DESTDIR)$(lmoddir),$(DESTDIR)$(cmoddir))

# Removes exactly what install wrote, then the folders it created (children
# first), each only when empty, and dlrun's own folders when empty.
uninstall:
	@echo "  UNINSTALL $(DESTDIR)$(PREFIX)"
	@made=$$(cat $(INSTALLED_DIRS) 2>/dev/null); \
	rm -f $(INSTALLED_DIRS) $(DESTDIR)$(bindir)/dlrun $(DESTDIR)$(mandir)/man1/dlrun.1 \
	  $(addprefix $(DESTDIR)$(libdir)/,$(LIB_SO_FILE) $(SONAME) libdlrun.so libdlrun.a \
	    libdlrun_lua.a $(addprefix pkgconfig/,$(PC_FILES)) $(notdir $(LIB_MODULES))) \
	  $(addprefix $(DESTDIR)$(includedir)/dlrun/,$(notdir $(HEADERS))) \
	  $(addprefix $(DESTDIR)$(docdir)/,$(notdir $(DOCS))) \
	  $(addprefix $(DESTDIR)$(lmoddir)/dlrun/,$(notdir $(LUA_FILES))) \
	  $(DESTDIR)$(cmoddir)/dlrun/core.so && \
	for d in $$(printf '%s\n' "$$made" | sed '/^$$/d; s|^|$(DESTDIR)|' | LC_ALL=C sort -r) \
	  $(addprefix $(DESTDIR),$(includedir)/dlrun $(docdir) $(pkgdatadir) $(lmoddir)/dlrun \
	    $(cmoddir)/dlrun); do \
	  if [ -d "$$d" ]; then rmdir --ignore-fail-on-non-empty "$$d"; fi; done

# LuaRocks (dlrun-scm-0.rockspec) builds the module alone, with its own
# flags, and installs it into its LUADIR (Lua files) and LIBDIR (C module).
lua-module: $(LUA_MOD)

install-lua-module: $(LUA_MOD)
	@$(call install_lua_module,$(LUADIR),$(LIBDIR))

# A source rock of this version, offline, into ROCK_DIR: a release archive of
# the checkout (no build folders, no version control), dlrun-VERSION-1.rockspec
# written from dlrun-scm-0.rockspec with that archive as its source, and
# `luarocks pack`. The archive is named by its absolute path: LuaRocks fetches
# a source from a temporary folder. The rock builds anywhere (a source rock
# carries its archive).
ROCK_DIR ?= $(BUILD)/rock
ROCK     := dlrun-$(VERSION)-1
LUAROCKS ?= luarocks
rock:
	@echo "  ROCK    $(ROCK_DIR)/$(ROCK).src.rock"
	@mkdir -p $(ROCK_DIR) && rm -f $(ROCK_DIR)/$(ROCK).src.rock
	@tar -czf $(ROCK_DIR)/dlrun-$(VERSION).tar.gz --exclude-vcs --exclude='./build*' \
	  --exclude='./$(ROCK_DIR)' --exclude='./*.rock' --transform 's|^\.|dlrun-$(VERSION)|' .
	@sed -e 's|^version = "scm-0"$$|version = "$(VERSION)-1"|' -e '/^source = {$$/,/^}$$/c\' \
	  -e 'source = {\n  url = "file://$(abspath $(ROCK_DIR))/dlrun-$(VERSION).tar.gz",\n  dir = "dlrun-$(VERSION)",\n}' \
	  dlrun-scm-0.rockspec >$(ROCK_DIR)/$(ROCK).rockspec
	@cd $(ROCK_DIR) && $(LUAROCKS) --lua-version $(LUA_V) pack $(ROCK).rockspec >/dev/null

# ---- hardening (see README, "Development") ----

CLANG    ?= clang-14
ASAN     := -fsanitize=address,undefined -fno-sanitize-recover=all

# The whole suite (C tests and busted, run inside the instrumented dlrun)
# under AddressSanitizer and UndefinedBehaviorSanitizer, leak checking on.
check-asan: deps-hardening
	@$(MAKE) --no-print-directory BUILD=build-asan CC=$(CLANG) SAN="$(ASAN)" OPT="-O1 -g" all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ABI_CHECK=off \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp \
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

# Never through a check-fresh root's mounts of /dev, /proc and /sys.
clean:
	@! grep -q " $(abspath $(BUILD))/fresh/" /proc/self/mounts || \
	  { echo "make clean: $(BUILD)/fresh has mounts (a check-fresh run); not removing $(BUILD)" >&2; exit 1; }
	rm -rf --one-file-system $(BUILD) build-asan build-tsan build-fuzz build-fuzz-cov build-bench build-rock

-include fuzz/fuzz.mk bench/bench.mk
-include $(CORE_OBJ:.o=.d) $(LUA_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
