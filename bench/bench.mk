# Benchmarks (not part of `make test`). Included by the top Makefile:
#   include bench/bench.mk
# or used on its own: make -f Makefile -f bench/bench.mk bench-quick
#
#   make bench        the full runs (256 MiB arrays; a few minutes at most)
#   make bench-quick  smaller sizes, fewer runs (under a minute)
#
# Both build an optimised tree in $(BENCH_BUILD) with a recursive make of the
# top Makefile, build bench/bench.c against its libdlrun.a, then run
# bench/run.sh, which prints the table and writes bench/results.json.

BENCH_BUILD ?= build-bench
BENCH_OPT   ?= -O3 -g -DNDEBUG
BENCH_BIN   := $(BENCH_BUILD)/bench/bench
BENCH_MPI   := $(BENCH_BUILD)/bench/bench_mpi
BENCH_NOOP  := $(BENCH_BUILD)/bench/libctypes_noop.so

.PHONY: bench bench-quick bench-build

bench-build:
	@$(MAKE) --no-print-directory BUILD=$(BENCH_BUILD) OPT="$(BENCH_OPT)" all
	@mkdir -p $(BENCH_BUILD)/bench
	@echo "  CC      $(BENCH_BIN)"
	@$(CC) -std=c11 -D_GNU_SOURCE $(BENCH_OPT) -Wall -Wextra -Werror -pthread -Iinclude -Isrc \
	  -o $(BENCH_BIN) bench/bench.c $(BENCH_BUILD)/libdlrun.a -pthread -lm
	@echo "  LD      $(BENCH_NOOP)"
	@$(CC) -std=c11 $(BENCH_OPT) -Wall -Wextra -Werror -fPIC -shared -o $(BENCH_NOOP) bench/ctypes_noop.c
	@# Benchmark 8 needs MPI's headers (the MPI_PC the module is built with);
	@# without them run.sh reports its lines as skipped.
	@if [ -n "$(MPI_PC)" ]; then \
	  echo "  CC      $(BENCH_MPI)"; \
	  $(CC) -std=c11 -D_GNU_SOURCE $(BENCH_OPT) -Wall -Wextra -Werror -pthread -Iinclude -Isrc \
	    $$(pkg-config --cflags $(MPI_PC)) -o $(BENCH_MPI) bench/bench_mpi.c \
	    $(BENCH_BUILD)/libdlrun.a $$(pkg-config --libs $(MPI_PC)) -pthread -lm -ldl; \
	else \
	  echo "  SKIP    $(BENCH_MPI): no MPI development files (pkg-config ompi-c or mpich)"; \
	  rm -f $(BENCH_MPI); \
	fi

bench: bench-build
	@BUILD=$(BENCH_BUILD) sh bench/run.sh

bench-quick: bench-build
	@BUILD=$(BENCH_BUILD) sh bench/run.sh --quick
