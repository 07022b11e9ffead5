/* Functions that do nothing, with the signatures of the libdlrun calls
 * bench/numpy_ref.py times through ctypes (benchmark 7): the same Python
 * code calling these instead measures what the calls themselves cost there
 * (argument conversion, the call), so that what is left of dlrun's time is
 * dlrun's own. Built by bench/bench.mk into $(BENCH_BUILD)/bench. */
#include <stdint.h>

int noop_import(void *rt, void *legacy, void *versioned, void *options, void **out,
                void *outcome) {
  (void)rt, (void)legacy, (void)versioned, (void)options, (void)out, (void)outcome;
  return 0;
}

int noop_block(void *array) {
  (void)array;
  return 0;
}

void noop_release(void *array) { (void)array; }
