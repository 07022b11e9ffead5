/* Functions that do nothing, with the signatures of the libdlrun calls
 * bench/numpy_ref.py times through ctypes (benchmark 7): the same Python
 * code calling these instead measures what the calls themselves cost there
 * (argument conversion, the call), so that what is left of dlrun's time is
 * dlrun's own. Built by bench/bench.mk into $(BENCH_BUILD)/bench. */
#define _GNU_SOURCE
#include <dlfcn.h>
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

typedef int (*gil_ensure_fn)(void);   /* PyGILState_STATE is an enum */
typedef void (*gil_release_fn)(int);

/* dlrun's release of a wrapped NumPy array runs NumPy's deleter, which
 * takes Python's lock back because ctypes let it go for the call. That
 * hand-off is the binding's cost (a C extension would hold the lock), so
 * the stand-in pays it too, through the interpreter's own functions (found
 * in the running process; absent outside Python: then nothing). */
void noop_release(void *array) {
  static gil_ensure_fn ensure;
  static gil_release_fn release;
  static int looked;
  (void)array;
  if (!looked) {
    ensure = (gil_ensure_fn)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    release = (gil_release_fn)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    looked = 1;
  }
  if (ensure && release) release(ensure());
}
