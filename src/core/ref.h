/* Internal: the one reference-counted object base (as IREE's resources).
 * An object starts with a dlrun_ref, names its destroy function once, and
 * is retained and released the same way as every other. The last release
 * may happen on any thread; destroy runs there (an object that must not be
 * torn down on some threads, like the runtime, says so in its destroy). */
#ifndef DLRUN_REF_H
#define DLRUN_REF_H

#include <stdatomic.h>

typedef struct dlrun_ref dlrun_ref;
typedef void (*dlrun_destroy_fn)(dlrun_ref *self);

struct dlrun_ref {
  atomic_int count;
  dlrun_destroy_fn destroy;
};

/* One reference, owned by the creator. */
static inline void dlrun_ref_init(dlrun_ref *r, dlrun_destroy_fn destroy) {
  atomic_init(&r->count, 1);
  r->destroy = destroy;
}

static inline void dlrun_ref_retain(dlrun_ref *r) {
  atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
}

/* Drop one reference; the last one destroys the object. Acquire-release so
 * that every write made under any reference is seen by destroy. */
static inline void dlrun_ref_release(dlrun_ref *r) {
  if (atomic_fetch_sub_explicit(&r->count, 1, memory_order_acq_rel) == 1) r->destroy(r);
}

#endif
