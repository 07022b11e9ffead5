/* C tests of DLPack export and import: the 15-item conformance checklist of
 * the DLPack reference notes (one "checklist N" test per item), JAX's
 * messages, and round trips of every dtype through both struct kinds.
 *
 * Imports are fed hand-built DLManagedTensor / DLManagedTensorVersioned
 * structs over the test's own host buffers, with deleters that count their
 * calls, so that "not called", "called once" and "called when" can be
 * checked exactly. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlpack.h"
#include "dlrun/dlrun.h"

/* Errors valgrind has reported so far (0 when not under valgrind). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define VG_ERRORS() ((unsigned)VALGRIND_COUNT_ERRORS)
#endif
#endif
#ifndef VG_ERRORS
#define VG_ERRORS() 0u
#endif

static dlrun_runtime *rt;
static dlrun_device *host, *cpu1, *sim0, *sim1;
static dlrun_sharding *on_host, *on_cpu1, *on_sim0, *on_sim1;

#define NELEM(a) (sizeof(a) / sizeof *(a))
#define ALL_FLAGS                                                                   \
  (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |                  \
   DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)

/* ---- helpers: arrays, exports ------------------------------------------- */

static dlrun_sharding *single(dlrun_device *dev) {
  dlrun_sharding *s = NULL;
  if (dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &s))
    printf("  sharding: %s\n", dlrun_last_error());
  return s;
}

/* A float32 array 0, 1, 2, ... of shape dims on sharding s. */
static dlrun_array *iota_f32(dlrun_sharding *s, int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= dims[d];
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = (float)i;
  dlrun_array *a = NULL;
  if (dlrun_array_from_host(s, DLRUN_FLOAT32, ndim, dims, v, (uint64_t)n * sizeof *v, &a))
    printf("  from_host: %s\n", dlrun_last_error());
  free(v);
  return a;
}

static const DLTensor *tensor_of(const dlrun_exported *e) {
  return e->legacy ? &e->legacy->dl_tensor : &e->versioned->dl_tensor;
}

static void call_deleter(const dlrun_exported *e) {
  if (e->legacy) e->legacy->deleter(e->legacy);
  if (e->versioned) e->versioned->deleter(e->versioned);
}

/* The tests' shorthand for a copy mode: -1 if needed, 0 never, 1 always
 * (the array API's None, False, True). */
static dlrun_copy_mode copy_mode(int copy) {
  return copy < 0 ? DLRUN_COPY_IF_NEEDED : copy ? DLRUN_COPY_ALWAYS : DLRUN_COPY_NEVER;
}

static dlrun_export_options versioned_opts(int copy) {
  return (dlrun_export_options){.has_max_version = true, .max_major = 1, .max_minor = 1,
                                .copy = copy_mode(copy)};
}

/* Bytes in use once the device's queued work (frees after copies among
 * it) has run. */
static uint64_t in_use(dlrun_device *dev) {
  dlrun_device_synchronize(dev);
  dlrun_memory_stats ms;
  memset(&ms, 0, sizeof ms);
  dlrun_device_memory_stats(dev, DLRUN_MEM_DEVICE, &ms);
  return ms.bytes_in_use;
}

/* The float32 values of an exported host-visible tensor, honouring strides. */
/* A host copy of the elements a tensor spans (its data may be device
 * memory, which a consumer reads through the driver, as with cudaMemcpy).
 * Free with free(). */
static void *host_copy_in(dlrun_runtime *in, const DLTensor *t) {
  int64_t span = 1;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] == 0) span = 0;
  for (int d = 0; span && d < t->ndim; d++)
    span += (t->shape[d] - 1) * (t->strides ? t->strides[d] : 0);
  /* Packed sub-byte types: ceil(bits / 8) bytes for the run. */
  size_t nbytes = ((size_t)span * t->dtype.bits * t->dtype.lanes + 7) / 8;
  void *copy = malloc(nbytes ? nbytes : 1);
  const char *data = (const char *)t->data + t->byte_offset;
  if (!copy || !nbytes) return copy;
  if (t->device.device_type == kDLExtDev) {
    dlrun_device *dev = dlrun_device_get(in, "sim", (size_t)t->device.device_id);
    if (dlrun_device_copy_to_host(dev, DLRUN_MEM_DEVICE, data, nbytes, copy) != DLRUN_OK) {
      printf("  device copy: %s\n", dlrun_last_error());
      free(copy);
      return NULL;
    }
  } else {
    memcpy(copy, data, nbytes);
  }
  return copy;
}

static void *host_copy_of(const DLTensor *t) { return host_copy_in(rt, t); }

/* Whether the float32 tensor t of runtime `in` holds 0, 1, 2, ... */
static int iota_in(dlrun_runtime *in, const DLTensor *t) {
  float *p = NULL;
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  int64_t idx[DLRUN_MAX_NDIM] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0, rest = i;
    for (int d = t->ndim - 1; d >= 0; d--) {
      idx[d] = rest % t->shape[d];
      rest /= t->shape[d];
      off += idx[d] * (t->strides ? t->strides[d] : 0);
    }
    if (!t->strides && t->ndim) return 0;
    if (!p && !(p = host_copy_in(in, t))) return 0;
    if (p[off] != (float)i) {
      free(p);
      return 0;
    }
  }
  free(p);
  return 1;
}

static int export_values_are_iota(const DLTensor *t) { return iota_in(rt, t); }

/* ---- helpers: hand-built producer tensors -------------------------------- */

typedef struct hand {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  bool is_versioned;
  atomic_int calls;
} hand;

static void hand_delete_legacy(DLManagedTensor *self) {
  atomic_fetch_add((atomic_int *)self->manager_ctx, 1);
}
static void hand_delete_versioned(DLManagedTensorVersioned *self) {
  atomic_fetch_add((atomic_int *)self->manager_ctx, 1);
}

static void hand_init(hand *h, DLTensor t, bool versioned) {
  memset(h, 0, sizeof *h);
  h->is_versioned = versioned;
  atomic_init(&h->calls, 0);
  if (versioned) {
    h->versioned.version = (DLPackVersion){.major = 1, .minor = 1};
    h->versioned.manager_ctx = &h->calls;
    h->versioned.deleter = hand_delete_versioned;
    h->versioned.flags = 0;
    h->versioned.dl_tensor = t;
  } else {
    h->legacy.manager_ctx = &h->calls;
    h->legacy.deleter = hand_delete_legacy;
    h->legacy.dl_tensor = t;
  }
}

static dlrun_status hand_import(hand *h, int copy, dlrun_sharding *target, dlrun_array **out) {
  dlrun_import_options o = {.target = target, .copy = copy_mode(copy)};
  return dlrun_import(rt, h->is_versioned ? NULL : &h->legacy,
                      h->is_versioned ? &h->versioned : NULL, &o, out, NULL);
}

static int hand_calls(hand *h) { return atomic_load(&h->calls); }

static DLTensor host_tensor(void *data, uint8_t code, uint8_t bits, int ndim, int64_t *shape,
                            int64_t *strides) {
  return (DLTensor){.data = data,
                    .device = {.device_type = kDLCPU, .device_id = 0},
                    .ndim = ndim,
                    .dtype = {.code = code, .bits = bits, .lanes = 1},
                    .shape = shape,
                    .strides = strides,
                    .byte_offset = 0};
}

static DLTensor f32_tensor(void *data, int ndim, int64_t *shape, int64_t *strides) {
  return host_tensor(data, kDLFloat, 32, ndim, shape, strides);
}

/* Read all of a float32 array; 1 when it equals want[0..n). */
static int array_equals_f32(dlrun_array *a, const float *want, int64_t n) {
  if (!a || dlrun_array_size(a) != n) return 0;
  float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
  int ok = dlrun_array_read(a, 0, (uint64_t)n * sizeof *got, got) == DLRUN_OK &&
           memcmp(got, want, (size_t)n * sizeof *got) == 0;
  if (!ok && n <= 64) {
    printf("  got:");
    for (int64_t i = 0; i < n; i++) printf(" %g", (double)got[i]);
    printf("\n");
  }
  free(got);
  return ok;
}

static int shape_is(dlrun_array *a, int ndim, const int64_t *dims) {
  if (!a || dlrun_array_ndim(a) != ndim) return 0;
  return ndim == 0 || memcmp(dlrun_array_shape(a), dims, (size_t)ndim * sizeof *dims) == 0;
}

/* ---- export: checklist 1-7 ---------------------------------------------- */

static void test_export_version(void) {
  TEST("checklist 1: versioned export says {1, 2}, or the consumer's lower 1.x; only defined flag bits") {
    /* dlrun follows DLPack 1.2's rules (strides set whenever ndim > 0). */
    CHECK(DLRUN_DLPACK_MAJOR == 1 && DLRUN_DLPACK_MINOR == 2, "dlrun follows DLPack (%d, %d)",
          DLRUN_DLPACK_MAJOR, DLRUN_DLPACK_MINOR);
    int64_t dims[2] = {3, 4};
    dlrun_array *c = iota_f32(on_host, 2, dims), *s = iota_f32(on_sim0, 2, dims);
    struct {
      dlrun_array *a;
      dlrun_export_options o;
      const char *what;
      uint32_t minor; /* what the export must say: the array API's max_version rule */
    } cases[] = {
        {c, versioned_opts(-1), "cpu", 1},
        {c, versioned_opts(1), "cpu copy=1", 1},
        {s, versioned_opts(-1), "sim", 1},
        {s, versioned_opts(0), "sim copy=0", 1},
        {s, versioned_opts(1), "sim copy=1", 1},
        {s, {.has_max_version = true, .max_major = 1, .max_minor = 0, .copy = DLRUN_COPY_IF_NEEDED}, "max (1, 0)", 0},
        {s, {.has_max_version = true, .max_major = 1, .max_minor = 2, .copy = DLRUN_COPY_IF_NEEDED}, "max (1, 2)", 2},
        {s, {.has_max_version = true, .max_major = 1, .max_minor = 3, .copy = DLRUN_COPY_IF_NEEDED}, "max (1, 3)", 2},
        {s, {.has_max_version = true, .max_major = 1, .max_minor = 7, .copy = DLRUN_COPY_IF_NEEDED}, "max (1, 7)", 2},
        {s, {.has_max_version = true, .max_major = 2, .max_minor = 3, .copy = DLRUN_COPY_IF_NEEDED}, "max (2, 3)", 2},
        {s, {.has_max_version = true, .max_major = 1, .max_minor = 1, .has_dl_device = true,
             .device_type = kDLCPU, .device_id = 0, .copy = DLRUN_COPY_IF_NEEDED}, "sim to host", 1},
        {s, {.has_max_version = true, .max_major = 1, .max_minor = DLRUN_DLPACK_MINOR,
             .has_dl_device = true, .device_type = kDLCPU, .device_id = 0,
             .copy = DLRUN_COPY_IF_NEEDED}, "sim to host, max (1, 2)", 2},
    };
    for (size_t i = 0; i < NELEM(cases); i++) {
      dlrun_exported e;
      dlrun_status st = dlrun_export(cases[i].a, &cases[i].o, &e);
      CHECK(st == DLRUN_OK, "%s: %s", cases[i].what, dlrun_last_error());
      if (st) continue;
      CHECK(e.versioned && !e.legacy, "%s: not a versioned struct", cases[i].what);
      if (!e.versioned) {
        call_deleter(&e);
        continue;
      }
      CHECK(e.versioned->version.major == 1 && e.versioned->version.minor == cases[i].minor,
            "%s: version (%u, %u), expected (1, %u)", cases[i].what, e.versioned->version.major,
            e.versioned->version.minor, cases[i].minor);
      const DLTensor *t = &e.versioned->dl_tensor;
      CHECK(t->strides && t->strides[0] == 4 && t->strides[1] == 1, "%s: strides",
            cases[i].what);
      CHECK((e.versioned->flags & ~(uint64_t)ALL_FLAGS) == 0, "%s: undefined flag bits %#llx",
            cases[i].what, (unsigned long long)e.versioned->flags);
      CHECK(!(e.versioned->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED),
            "%s: sub-byte flag on float32", cases[i].what);
      CHECK(e.versioned->deleter != NULL, "%s: no deleter", cases[i].what);
      call_deleter(&e);
    }
    dlrun_array_release(c);
    dlrun_array_release(s);
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
}

static void test_export_legacy(void) {
  TEST("checklist 2: legacy export when max_version is absent or major 0; no arguments works") {
    int64_t dims[1] = {5};
    dlrun_array *a = iota_f32(on_sim0, 1, dims);
    dlrun_exported e;
    CHECK(dlrun_export(a, NULL, &e) == DLRUN_OK, "no options: %s", dlrun_last_error());
    CHECK(e.legacy && !e.versioned, "no options: not legacy");
    if (e.legacy) {
      CHECK(e.legacy->deleter != NULL, "no deleter");
      CHECK(export_values_are_iota(&e.legacy->dl_tensor), "values");
    }
    call_deleter(&e);
    dlrun_export_options cases[] = {
        {.copy = DLRUN_COPY_IF_NEEDED},
        {.has_max_version = false, .max_major = 1, .max_minor = 1, .copy = DLRUN_COPY_IF_NEEDED},
        {.has_max_version = true, .max_major = 0, .max_minor = 5, .copy = DLRUN_COPY_IF_NEEDED},
        {.has_max_version = true, .max_major = 0, .max_minor = 8, .copy = DLRUN_COPY_IF_NEEDED},
        {.has_max_version = true, .max_major = 0, .max_minor = 99, .copy = DLRUN_COPY_ALWAYS},
    };
    for (size_t i = 0; i < NELEM(cases); i++) {
      dlrun_status st = dlrun_export(a, &cases[i], &e);
      CHECK(st == DLRUN_OK, "case %zu: %s", i, dlrun_last_error());
      if (st) continue;
      CHECK(e.legacy && !e.versioned, "case %zu: not legacy", i);
      call_deleter(&e);
    }
    uint32_t low[][2] = {{0, 4}, {0, 0}};
    for (size_t i = 0; i < NELEM(low); i++) {
      dlrun_export_options o = {.has_max_version = true, .max_major = low[i][0],
                                .max_minor = low[i][1], .copy = DLRUN_COPY_IF_NEEDED};
      e.legacy = (DLManagedTensor *)&e; /* must be cleared on failure */
      CHECK(dlrun_export(a, &o, &e) == DLRUN_ERR_BUFFER, "(%u, %u) accepted", low[i][0], low[i][1]);
      CHECK(!e.legacy && !e.versioned, "out set on failure");
      char want[160];
      snprintf(want, sizeof want,
               "dlrun does not support any version below (0, 5) but version (%u, %u) was "
               "requested.",
               low[i][0], low[i][1]);
      CHECK(strcmp(dlrun_last_error(), want) == 0, "\"%s\"", dlrun_last_error());
    }
    dlrun_array_release(a);
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
}

static void test_export_shape_strides(void) {
  TEST("checklist 3: shape and strides hold ndim entries, strides in elements; set for ndim 0 too") {
    int64_t dims[3] = {2, 3, 4};
    dlrun_array *a = iota_f32(on_host, 3, dims);
    for (int v = 0; v < 2; v++) {
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e;
      CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
      const DLTensor *t = tensor_of(&e);
      CHECK(t->ndim == 3, "ndim %d", t->ndim);
      CHECK(t->shape && t->shape[0] == 2 && t->shape[1] == 3 && t->shape[2] == 4, "shape");
      CHECK(t->strides && t->strides[0] == 12 && t->strides[1] == 4 && t->strides[2] == 1,
            "strides not in elements: (%lld, %lld, %lld)", (long long)t->strides[0],
            (long long)t->strides[1], (long long)t->strides[2]);
      CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1, "dtype");
      CHECK(export_values_are_iota(t), "values");
      call_deleter(&e);
    }
    dlrun_array_release(a);
    /* ndim 0: shape and strides are set all the same (pointing at zero
     * entries after the struct), and the one element. */
    float x = 42.5f;
    dlrun_array *s = NULL;
    CHECK(dlrun_array_from_host(on_sim0, DLRUN_FLOAT32, 0, NULL, &x, sizeof x, &s) == DLRUN_OK,
          "%s", dlrun_last_error());
    for (int v = 0; v < 2 && s; v++) {
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e;
      CHECK(dlrun_export(s, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
      const DLTensor *t = tensor_of(&e);
      CHECK(t->ndim == 0, "ndim %d", t->ndim);
      const char *head = e.legacy ? (const char *)e.legacy : (const char *)e.versioned;
      size_t size = e.legacy ? sizeof *e.legacy : sizeof *e.versioned;
      CHECK(t->shape && t->strides && (const char *)t->shape >= head + size &&
                (uintptr_t)t->shape % 8 == 0,
            "ndim 0: shape %p strides %p", (void *)t->shape, (void *)t->strides);
      float *value = t->data ? host_copy_of(t) : NULL;
      CHECK(value && *value == 42.5f, "scalar value");
      free(value);
      call_deleter(&e);
    }
    dlrun_array_release(s);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
}

static void test_export_zero_size_and_cpu(void) {
  TEST("checklist 4: zero-size exports have data NULL; CPU exports byte_offset 0, device_id 0") {
    int64_t shapes[][2] = {{0, 0}, {3, 0}, {0, 4}};
    int ndims[] = {1, 2, 2};
    dlrun_sharding *where[] = {on_host, on_sim0, on_cpu1};
    for (size_t w = 0; w < NELEM(where); w++)
      for (size_t i = 0; i < NELEM(shapes); i++)
        for (int v = 0; v < 2; v++) {
          dlrun_array *a = iota_f32(where[w], ndims[i], shapes[i]);
          dlrun_export_options o = versioned_opts(-1);
          dlrun_exported e;
          CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
          const DLTensor *t = tensor_of(&e);
          CHECK(t->data == NULL, "zero-size data %p (where %zu shape %zu)", t->data, w, i);
          CHECK(t->byte_offset == 0, "byte_offset");
          CHECK(t->ndim == ndims[i] && t->shape[0] == shapes[i][0], "shape");
          call_deleter(&e);
          dlrun_array_release(a);
        }
    int64_t dims[2] = {3, 4};
    dlrun_sharding *cpus[] = {on_host, on_cpu1};
    for (size_t w = 0; w < NELEM(cpus); w++)
      for (int v = 0; v < 2; v++) {
        dlrun_array *a = iota_f32(cpus[w], 2, dims);
        dlrun_export_options o = versioned_opts(-1);
        dlrun_exported e;
        CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
        const DLTensor *t = tensor_of(&e);
        CHECK(t->device.device_type == kDLCPU && t->device.device_id == 0,
              "cpu device %zu exports (%d, %d)", w, (int)t->device.device_type,
              t->device.device_id);
        CHECK(t->byte_offset == 0, "byte_offset %llu", (unsigned long long)t->byte_offset);
        CHECK(export_values_are_iota(t), "values");
        call_deleter(&e);
        int32_t type = -1, id = -1;
        CHECK(dlrun_export_device(a, &type, &id) == DLRUN_OK && type == kDLCPU && id == 0,
              "export_device (%d, %d)", type, id);
        dlrun_array_release(a);
      }
    /* Sim devices: (kDLExtDev, id), byte_offset 0 too. */
    dlrun_array *s = iota_f32(on_sim1, 2, dims);
    dlrun_exported e;
    CHECK(dlrun_export(s, NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(e.legacy->dl_tensor.device.device_type == kDLExtDev &&
              e.legacy->dl_tensor.device.device_id == 1 && e.legacy->dl_tensor.byte_offset == 0,
          "sim export device (%d, %d)", (int)e.legacy->dl_tensor.device.device_type,
          e.legacy->dl_tensor.device.device_id);
    call_deleter(&e);
    int32_t type = -1, id = -1;
    CHECK(dlrun_export_device(s, &type, &id) == DLRUN_OK && type == kDLExtDev && id == 1,
          "export_device (%d, %d)", type, id);
    dlrun_array_release(s);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
}

static void test_export_flags(void) {
  TEST("checklist 5: READ_ONLY when shared, IS_COPIED whenever copied") {
    int64_t dims[2] = {3, 4};
    dlrun_array *c = iota_f32(on_host, 2, dims), *s = iota_f32(on_sim0, 2, dims);
    dlrun_exported own_c, own_s;
    dlrun_export_options o = versioned_opts(-1);
    CHECK(dlrun_export(c, &o, &own_c) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_export(s, &o, &own_s) == DLRUN_OK, "%s", dlrun_last_error());
    struct {
      dlrun_array *a;
      dlrun_export_options o;
      bool copied;
      int type, id;
      const char *what;
    } cases[] = {
        {c, versioned_opts(-1), false, kDLCPU, 0, "cpu, copy if needed"},
        {c, versioned_opts(0), false, kDLCPU, 0, "cpu, copy=0"},
        {c, versioned_opts(1), true, kDLCPU, 0, "cpu, copy=1"},
        {s, versioned_opts(-1), false, kDLExtDev, 0, "sim, copy if needed"},
        {s, versioned_opts(1), true, kDLExtDev, 0, "sim, copy=1"},
        {s, {.has_max_version = true, .max_major = 1, .has_dl_device = true,
             .device_type = kDLExtDev, .device_id = 0, .copy = DLRUN_COPY_NEVER}, false, kDLExtDev, 0,
         "sim, dl_device itself, copy=0"},
        {s, {.has_max_version = true, .max_major = 1, .has_dl_device = true,
             .device_type = kDLCPU, .device_id = 0, .copy = DLRUN_COPY_IF_NEEDED}, true, kDLCPU, 0,
         "sim, dl_device host, copy if needed"},
        {s, {.has_max_version = true, .max_major = 1, .has_dl_device = true,
             .device_type = kDLCPU, .device_id = 0, .copy = DLRUN_COPY_ALWAYS}, true, kDLCPU, 0,
         "sim, dl_device host, copy=1"},
        {s, {.has_max_version = true, .max_major = 1, .has_dl_device = true,
             .device_type = kDLExtDev, .device_id = 1, .copy = DLRUN_COPY_IF_NEEDED}, true, kDLExtDev, 1,
         "sim 0, dl_device sim 1"},
        {c, {.has_max_version = true, .max_major = 1, .has_dl_device = true,
             .device_type = kDLExtDev, .device_id = 1, .copy = DLRUN_COPY_IF_NEEDED}, true, kDLExtDev, 1,
         "cpu, dl_device sim 1"},
        {c, {.has_max_version = true, .max_major = 1, .has_dl_device = true,
             .device_type = kDLCPU, .device_id = 0, .copy = DLRUN_COPY_NEVER}, false, kDLCPU, 0,
         "cpu, dl_device host, copy=0"},
    };
    for (size_t i = 0; i < NELEM(cases); i++) {
      dlrun_exported e;
      dlrun_status st = dlrun_export(cases[i].a, &cases[i].o, &e);
      CHECK(st == DLRUN_OK, "%s: %s", cases[i].what, dlrun_last_error());
      if (st) continue;
      uint64_t f = e.versioned->flags;
      const DLTensor *t = &e.versioned->dl_tensor;
      const DLTensor *orig = cases[i].a == c ? &own_c.versioned->dl_tensor
                                             : &own_s.versioned->dl_tensor;
      if (cases[i].copied) {
        CHECK(f & DLPACK_FLAG_BITMASK_IS_COPIED, "%s: IS_COPIED not set (flags %#llx)",
              cases[i].what, (unsigned long long)f);
        CHECK(!(f & DLPACK_FLAG_BITMASK_READ_ONLY), "%s: a private copy marked READ_ONLY",
              cases[i].what);
        CHECK(t->data != orig->data, "%s: claims a copy but shares the data", cases[i].what);
      } else {
        CHECK(f & DLPACK_FLAG_BITMASK_READ_ONLY, "%s: READ_ONLY not set (flags %#llx)",
              cases[i].what, (unsigned long long)f);
        CHECK(!(f & DLPACK_FLAG_BITMASK_IS_COPIED), "%s: IS_COPIED without a copy", cases[i].what);
        CHECK(t->data == orig->data, "%s: copied although no copy was needed", cases[i].what);
      }
      CHECK((int)t->device.device_type == cases[i].type && t->device.device_id == cases[i].id,
            "%s: device (%d, %d)", cases[i].what, (int)t->device.device_type, t->device.device_id);
      CHECK(export_values_are_iota(t), "%s: values", cases[i].what);
      CHECK(t->strides && t->strides[0] == 4 && t->strides[1] == 1, "%s: strides", cases[i].what);
      call_deleter(&e);
    }
    call_deleter(&own_c);
    call_deleter(&own_s);
    dlrun_array_release(c);
    dlrun_array_release(s);
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
}

static void *deleter_thread(void *p) {
  call_deleter(p);
  return NULL;
}

static void test_export_deleter(void) {
  TEST("checklist 6: the deleter frees everything, once, after the array is gone, from any thread") {
    int64_t dims[2] = {64, 64}; /* 16 KiB: visible in the pool */
    for (int v = 0; v < 2; v++)
      for (int order = 0; order < 3; order++) {
        uint64_t before = in_use(sim0);
        int64_t live = dlrun_live_exports(rt);
        dlrun_array *a = iota_f32(on_sim0, 2, dims);
        uint64_t with = in_use(sim0);
        CHECK(with >= before + 64 * 64 * 4, "pool did not grow: %llu -> %llu",
              (unsigned long long)before, (unsigned long long)with);
        dlrun_export_options o = versioned_opts(-1);
        dlrun_exported e;
        CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
        CHECK(dlrun_live_exports(rt) == live + 1, "live exports not counted");
        if (order == 0) { /* array released first: the export keeps the memory */
          dlrun_array_release(a);
          CHECK(in_use(sim0) == with, "memory freed under a live export (v%d)", v);
          CHECK(export_values_are_iota(tensor_of(&e)), "export data changed after release");
          call_deleter(&e);
        } else if (order == 1) { /* array deleted (not released) first */
          dlrun_array_delete(a);
          CHECK(dlrun_array_is_deleted(a), "not deleted");
          CHECK(in_use(sim0) == with, "memory freed under a live export after delete (v%d)", v);
          CHECK(export_values_are_iota(tensor_of(&e)), "export data changed after delete");
          call_deleter(&e);
          CHECK(in_use(sim0) == before, "memory not returned after delete + deleter: %llu vs %llu",
                (unsigned long long)in_use(sim0), (unsigned long long)before);
          dlrun_array_release(a);
        } else { /* deleter first: the array still owns its memory */
          call_deleter(&e);
          CHECK(in_use(sim0) == with, "deleter freed the array's memory");
          float back[4];
          CHECK(dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK && back[3] == 3.0f,
                "array unreadable after the deleter");
          dlrun_array_release(a);
        }
        CHECK(in_use(sim0) == before, "pool bytes %llu, expected %llu (v%d order %d)",
              (unsigned long long)in_use(sim0), (unsigned long long)before, v, order);
        CHECK(dlrun_live_exports(rt) == live, "live exports %lld, expected %lld",
              (long long)dlrun_live_exports(rt), (long long)live);
      }
    /* From another thread, after the array is gone. */
    for (int v = 0; v < 2; v++) {
      uint64_t before = in_use(sim0);
      dlrun_array *a = iota_f32(on_sim0, 2, dims);
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e;
      CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_array_release(a);
      pthread_t th;
      CHECK(pthread_create(&th, NULL, deleter_thread, &e) == 0, "pthread_create");
      pthread_join(th, NULL);
      CHECK(dlrun_live_exports(rt) == 0, "live exports after a deleter on another thread");
      CHECK(in_use(sim0) == before, "memory not returned by a deleter on another thread");
    }
    /* Many exports of one array, deleted concurrently from many threads. */
    {
      uint64_t before = in_use(sim0);
      dlrun_array *a = iota_f32(on_sim0, 2, dims);
      enum { N = 8 };
      dlrun_exported e[N];
      pthread_t th[N];
      for (int i = 0; i < N; i++) {
        dlrun_export_options o = versioned_opts(-1);
        CHECK(dlrun_export(a, i % 2 ? &o : NULL, &e[i]) == DLRUN_OK, "%s", dlrun_last_error());
      }
      CHECK(dlrun_live_exports(rt) == N, "live exports %lld", (long long)dlrun_live_exports(rt));
      dlrun_array_release(a);
      for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, deleter_thread, &e[i]);
      for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
      CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
      CHECK(in_use(sim0) == before, "memory not returned after concurrent deleters");
    }
    /* The export outlives its runtime's last other reference. */
    {
      dlrun_config cfg = {.devices = "sim:1", .device_memory = 1 << 20};
      dlrun_runtime *own;
      CHECK(dlrun_runtime_create(&cfg, &own) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_sharding *sh = single(dlrun_device_get(own, "sim", 0));
      dlrun_array *a = iota_f32(sh, 2, dims);
      dlrun_exported e1, e2;
      dlrun_export_options o = versioned_opts(-1);
      CHECK(dlrun_export(a, NULL, &e1) == DLRUN_OK && dlrun_export(a, &o, &e2) == DLRUN_OK,
            "%s", dlrun_last_error());
      CHECK(dlrun_live_exports(own) == 2, "live exports");
      dlrun_array_release(a);
      dlrun_sharding_release(sh);
      dlrun_runtime_release(own);
      CHECK(iota_in(own, tensor_of(&e1)), "data gone with the runtime");
      call_deleter(&e1); /* the runtime stays until the last export goes */
      call_deleter(&e2);
    }
  }
}

/* A second call of an export's deleter must do nothing. It runs in a fresh
 * run of this binary (fork and exec: a use after free cannot take the whole
 * test down, and under valgrind the child runs natively and fast). Right
 * after the first call the child takes back the freed small blocks (many of
 * every size up to 1 KiB) and fills them with 0xA5 bytes: a deleter that
 * reads its freed struct again then dereferences 0xA5A5... and crashes every
 * time instead of only sometimes. Run under valgrind itself, the child
 * counts valgrind's errors instead. Exit status: 0 fine, 2 set-up failed,
 * 3 the second call changed the counts, 4 valgrind saw it touch freed memory. */
static const char *self_path;

static int deleter_twice_main(int versioned) {
  dlrun_config cfg = {.devices = "sim:1", .device_memory = 1 << 20};
  if (dlrun_runtime_create(&cfg, &rt)) return 2;
  sim0 = dlrun_device_get(rt, "sim", 0);
  on_sim0 = single(sim0);
  int64_t dims[2] = {64, 64};
  uint64_t before = in_use(sim0);
  dlrun_array *a = iota_f32(on_sim0, 2, dims);
  dlrun_export_options o = versioned_opts(-1);
  dlrun_exported e;
  if (!a || dlrun_export(a, versioned ? &o : NULL, &e)) return 2;
  dlrun_array_release(a);
  /* A consumer that calls twice must keep the deleter from before the first
   * call: reading it from the freed struct would be the consumer's own use
   * after free. dlrun's part is not to touch the freed struct. */
  void (*legacy_deleter)(DLManagedTensor *) = e.legacy ? e.legacy->deleter : NULL;
  void (*versioned_deleter)(DLManagedTensorVersioned *) = e.versioned ? e.versioned->deleter : NULL;
  call_deleter(&e);
  if (dlrun_live_exports(rt) != 0 || in_use(sim0) != before) return 2;
  enum { ROUNDS = 24, SIZES = 64 };
  static void *grab[ROUNDS * SIZES];
  int ngrab = 0;
  for (int round = 0; round < ROUNDS; round++)
    for (size_t size = 16; size <= 16 * SIZES; size += 16)
      if ((grab[ngrab] = malloc(size))) memset(grab[ngrab++], 0xA5, size);
  unsigned errors = VG_ERRORS();
  if (legacy_deleter) legacy_deleter(e.legacy);
  if (versioned_deleter) versioned_deleter(e.versioned);
  int r = VG_ERRORS() != errors                                     ? 4
          : dlrun_live_exports(rt) != 0 || in_use(sim0) != before ? 3
                                                                   : 0;
  for (int i = 0; i < ngrab; i++) free(grab[i]);
  dlrun_sharding_release(on_sim0);
  dlrun_runtime_release(rt);
  return r;
}

static void test_export_deleter_twice(void) {
  TEST("export deleter: a second call is a no-op (legacy and versioned)") {
    for (int v = 0; v < 2; v++) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        char *args[] = {(char *)self_path, "--deleter-twice", v ? "1" : "0", NULL};
        alarm(60);
        execvp(self_path, args);
        _exit(127);
      }
      int status = 0;
      CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
      const char *kind = v ? "versioned" : "legacy";
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      CHECK(!WIFSIGNALED(status),
            "%s export: the second deleter call crashed the process (signal %d): it reads "
            "the struct the first call freed",
            kind, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      CHECK(code != 127, "%s export: could not run %s again", kind, self_path);
      CHECK(code != 2, "%s export: setting up the double call failed", kind);
      CHECK(code != 3, "%s export: the second deleter call changed live exports or pool bytes",
            kind);
      CHECK(code != 4, "%s export: the second deleter call touched freed memory (valgrind)",
            kind);
      CHECK(code <= 0 || code == 2 || code == 3 || code == 4 || code == 127,
            "%s export: the double-call child exited with status %d (a sanitizer may have "
            "caught the second call touching freed memory)",
            kind, code);
    }
  }
}

static void test_export_alignment(void) {
  TEST("checklist 7: shape and strides are 8-byte aligned, stored after the struct") {
    for (int ndim = 1; ndim <= 7; ndim++)
      for (int v = 0; v < 2; v++) {
        int64_t dims[7] = {2, 1, 3, 1, 2, 1, 2};
        dlrun_array *a = iota_f32(v ? on_sim0 : on_host, ndim, dims);
        dlrun_export_options o = versioned_opts(-1);
        dlrun_exported e;
        CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
        const DLTensor *t = tensor_of(&e);
        const char *head = e.legacy ? (const char *)e.legacy : (const char *)e.versioned;
        size_t size = e.legacy ? sizeof *e.legacy : sizeof *e.versioned;
        CHECK((uintptr_t)t->shape % 8 == 0 && (uintptr_t)t->strides % 8 == 0,
              "ndim %d: shape %p strides %p", ndim, (void *)t->shape, (void *)t->strides);
        CHECK((const char *)t->shape >= head + size && (const char *)t->strides >= head + size,
              "ndim %d: shape/strides inside the struct", ndim);
        CHECK((const char *)t->strides >= (const char *)(t->shape + ndim) ||
                  (const char *)t->shape >= (const char *)(t->strides + ndim),
              "ndim %d: shape and strides overlap", ndim);
        int64_t expect = 1;
        for (int d = ndim - 1; d >= 0; d--) {
          CHECK(t->shape[d] == dims[d], "ndim %d: shape[%d]", ndim, d);
          if (dims[d] != 1) CHECK(t->strides[d] == expect, "ndim %d: strides[%d]", ndim, d);
          expect *= dims[d];
        }
        call_deleter(&e);
        dlrun_array_release(a);
      }
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
}

static void test_export_errors(void) {
  TEST("export errors: JAX's texts for multi-device arrays, devices, copy=False, deleted arrays") {
    dlrun_device *devs[2] = {sim0, sim1};
    const char *names[1] = {"x"};
    int64_t sizes[1] = {2};
    dlrun_mesh *m = NULL;
    CHECK(dlrun_mesh_create(devs, 2, 1, names, sizes, &m) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_partition_spec split = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
    dlrun_partition_spec repl = {.nentries = 0};
    dlrun_sharding *ss = NULL, *rs = NULL;
    dlrun_named_sharding_create(m, &split, DLRUN_MEM_DEVICE, &ss);
    dlrun_named_sharding_create(m, &repl, DLRUN_MEM_DEVICE, &rs);
    int64_t dims[1] = {4};
    dlrun_sharding *multi[2] = {ss, rs};
    for (int i = 0; i < 2; i++) {
      dlrun_array *a = iota_f32(multi[i], 1, dims);
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e;
      CHECK(dlrun_export(a, NULL, &e) == DLRUN_ERR_BUFFER, "multi-device export accepted");
      CHECK(strcmp(dlrun_last_error(),
                   "to_dlpack can only pack a dlpack tensor from an array on a singular device, "
                   "but an array with a Sharding over 2 devices was provided.") == 0,
            "\"%s\"", dlrun_last_error());
      CHECK(!e.legacy && !e.versioned, "out set");
      CHECK(dlrun_export(a, &o, &e) == DLRUN_ERR_BUFFER, "multi-device versioned export accepted");
      int32_t type, id;
      CHECK(dlrun_export_device(a, &type, &id) == DLRUN_ERR_BUFFER, "export_device accepted");
      CHECK(strcmp(dlrun_last_error(), "__dlpack__ only supported for unsharded arrays.") == 0,
            "\"%s\"", dlrun_last_error());
      dlrun_array_release(a);
    }
    dlrun_sharding_release(ss);
    dlrun_sharding_release(rs);
    dlrun_mesh_release(m);

    dlrun_array *s = iota_f32(on_sim0, 1, dims), *c = iota_f32(on_host, 1, dims);
    dlrun_exported e;
    /* dl_device of an unsupported type, and of a sim id that does not exist */
    static const struct {
      int type;
      const char *text;
    } bad_types[] = {{kDLCUDA, "2 (kDLCUDA)"},
                     {kDLOpenCL, "4 (kDLOpenCL)"},
                     {kDLROCM, "10 (kDLROCM)"},
                     {kDLTrn, "18 (kDLTrn)"},
                     {99, "99 (unknown to DLPack 1.3)"},
                     {-1, "-1 (unknown to DLPack 1.3)"}};
    for (size_t i = 0; i < NELEM(bad_types); i++) {
      dlrun_export_options o = {.has_dl_device = true, .device_type = bad_types[i].type,
                                .device_id = 0, .copy = DLRUN_COPY_IF_NEEDED};
      CHECK(dlrun_export(s, &o, &e) == DLRUN_ERR_BUFFER, "type %d accepted", bad_types[i].type);
      char want[200];
      snprintf(want, sizeof want,
               "The device specification passed to to_dlpack contains an unsupported device "
               "type (DLDeviceType: %s)",
               bad_types[i].text);
      CHECK(strcmp(dlrun_last_error(), want) == 0, "\"%s\"", dlrun_last_error());
      CHECK(!e.legacy && !e.versioned, "out set");
    }
    dlrun_export_options bad_id = {.has_dl_device = true, .device_type = kDLExtDev,
                                   .device_id = 99, .copy = DLRUN_COPY_IF_NEEDED};
    CHECK(dlrun_export(s, &bad_id, &e) == DLRUN_ERR_BUFFER, "sim 99 accepted");
    CHECK(strcmp(dlrun_last_error(),
                 "The device specification passed to to_dlpack names device id 99, which does "
                 "not exist for DLDeviceType 12 (kDLExtDev)") == 0,
          "\"%s\"", dlrun_last_error());
    /* copy=False with a copy needed */
    dlrun_export_options to_host = {.has_dl_device = true, .device_type = kDLCPU,
                                    .device_id = 0, .copy = DLRUN_COPY_NEVER};
    CHECK(dlrun_export(s, &to_host, &e) == DLRUN_ERR_VALUE, "copy=0 to host accepted");
    char want[400];
    snprintf(want, sizeof want,
             "Specified device=%s which requires a copy since the source device is %s, however "
             "copy=False. Set copy=True or copy=None to perform the requested operation.",
             dlrun_device_name(host), dlrun_device_name(sim0));
    CHECK(strcmp(dlrun_last_error(), want) == 0, "\"%s\"", dlrun_last_error());
    dlrun_export_options to_sim1 = {.has_max_version = true, .max_major = 1,
                                    .has_dl_device = true, .device_type = kDLExtDev,
                                    .device_id = 1, .copy = DLRUN_COPY_NEVER};
    CHECK(dlrun_export(c, &to_sim1, &e) == DLRUN_ERR_VALUE, "copy=0 to sim 1 accepted");
    snprintf(want, sizeof want,
             "Specified device=%s which requires a copy since the source device is %s, however "
             "copy=False. Set copy=True or copy=None to perform the requested operation.",
             dlrun_device_name(sim1), dlrun_device_name(host));
    CHECK(strcmp(dlrun_last_error(), want) == 0, "\"%s\"", dlrun_last_error());
    dlrun_export_options bad_copy = {.copy = (dlrun_copy_mode)7};
    CHECK(dlrun_export(s, &bad_copy, &e) == DLRUN_ERR_VALUE, "copy=7 accepted");
    CHECK(dlrun_live_exports(rt) == 0, "a failed export left a live export");
    /* a deleted array */
    dlrun_array_delete(c);
    CHECK(dlrun_export(c, NULL, &e) == DLRUN_ERR_RUNTIME, "deleted array exported");
    CHECK(strcmp(dlrun_last_error(), "Array has been deleted with shape=float32[4].") == 0,
          "\"%s\"", dlrun_last_error());
    dlrun_array_release(s);
    dlrun_array_release(c);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
  TEST("export streams: cpu takes only none; sim takes none or -1") {
    int64_t dims[1] = {4};
    dlrun_array *s = iota_f32(on_sim0, 1, dims), *c = iota_f32(on_host, 1, dims);
    dlrun_exported e;
    dlrun_export_options none = {.copy = DLRUN_COPY_IF_NEEDED};
    CHECK(dlrun_export(c, &none, &e) == DLRUN_OK, "cpu, no stream: %s", dlrun_last_error());
    call_deleter(&e);
    CHECK(dlrun_export(s, &none, &e) == DLRUN_OK, "sim, no stream: %s", dlrun_last_error());
    call_deleter(&e);
    dlrun_export_options nowait = {.has_stream = true, .stream = -1, .copy = DLRUN_COPY_IF_NEEDED};
    CHECK(dlrun_export(s, &nowait, &e) == DLRUN_OK, "sim, stream -1: %s", dlrun_last_error());
    call_deleter(&e);
    int64_t cpu_bad[] = {-1, 0, 1, 2, 1234};
    for (size_t i = 0; i < NELEM(cpu_bad); i++) {
      dlrun_export_options o = {.has_stream = true, .stream = cpu_bad[i], .copy = DLRUN_COPY_IF_NEEDED};
      CHECK(dlrun_export(c, &o, &e) == DLRUN_ERR_BUFFER, "cpu stream %lld accepted",
            (long long)cpu_bad[i]);
      CHECK_STR_CONTAINS(dlrun_last_error(), "stream must be nil");
      CHECK(!e.legacy && !e.versioned, "out set");
    }
    int64_t sim_bad[] = {0, 1, 2, 7};
    for (size_t i = 0; i < NELEM(sim_bad); i++) {
      dlrun_export_options o = {.has_stream = true, .stream = sim_bad[i], .copy = DLRUN_COPY_IF_NEEDED};
      CHECK(dlrun_export(s, &o, &e) == DLRUN_ERR_BUFFER, "sim stream %lld accepted",
            (long long)sim_bad[i]);
      CHECK_STR_CONTAINS(dlrun_last_error(), "-1");
    }
    dlrun_array_release(s);
    dlrun_array_release(c);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
}

/* ---- import: checklist 8-15 --------------------------------------------- */

static void test_import_kinds(void) {
  TEST("checklist 8: both struct kinds import; neither or both is refused cleanly") {
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    for (int v = 0; v < 2; v++) {
      hand h;
      hand_init(&h, f32_tensor(buf, 2, shape, NULL), v);
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "%s: %s", v ? "versioned" : "legacy",
            dlrun_last_error());
      CHECK(shape_is(a, 2, shape) && dlrun_array_dtype(a) == DLRUN_FLOAT32, "shape/dtype");
      CHECK(array_equals_f32(a, buf, 6), "values");
      CHECK(dlrun_array_device(a) == host, "device");
      CHECK(hand_calls(&h) == 0, "deleter called while the array lives");
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
    }
    hand l, v;
    hand_init(&l, f32_tensor(buf, 2, shape, NULL), false);
    hand_init(&v, f32_tensor(buf, 2, shape, NULL), true);
    dlrun_array *a = (dlrun_array *)&l;
    CHECK(dlrun_import(rt, NULL, NULL, NULL, &a, NULL) == DLRUN_ERR_VALUE, "no tensor accepted");
    CHECK(a == NULL, "out not cleared");
    CHECK(dlrun_import(rt, &l.legacy, &v.versioned, NULL, &a, NULL) == DLRUN_ERR_VALUE,
          "two tensors accepted");
    CHECK(dlrun_import(NULL, &l.legacy, NULL, NULL, &a, NULL) == DLRUN_ERR_VALUE, "no runtime accepted");
    CHECK(hand_calls(&l) == 0 && hand_calls(&v) == 0, "deleter called on a refused call");
    /* dlrun's own exports of both kinds come back */
    int64_t dims[1] = {6};
    dlrun_array *src = iota_f32(on_sim0, 1, dims);
    for (int k = 0; k < 2; k++) {
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e;
      CHECK(dlrun_export(src, k ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_array *back = NULL;
      CHECK(dlrun_import(rt, e.legacy, e.versioned, NULL, &back, NULL) == DLRUN_OK, "%s",
            dlrun_last_error());
      float want[6] = {0, 1, 2, 3, 4, 5};
      CHECK(array_equals_f32(back, want, 6), "values");
      CHECK(dlrun_array_device(back) == sim0, "device");
      CHECK(dlrun_live_exports(rt) == 1, "export consumed too early");
      dlrun_array_release(back);
      CHECK(dlrun_live_exports(rt) == 0, "export not released with the array");
    }
    dlrun_array_release(src);
  }
}

static void test_import_version(void) {
  TEST("checklist 9: an unknown major version calls the deleter once and is a BufferError") {
    float buf[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    uint32_t majors[][2] = {{2, 0}, {0, 9}, {3, 1}};
    for (size_t i = 0; i < NELEM(majors); i++) {
      hand h;
      hand_init(&h, f32_tensor(buf, 1, shape, NULL), true);
      h.versioned.version = (DLPackVersion){.major = majors[i][0], .minor = majors[i][1]};
      /* Past the stable header, nothing may be read: poison the tensor. */
      h.versioned.dl_tensor.ndim = -7;
      h.versioned.dl_tensor.shape = NULL;
      dlrun_array *a = (dlrun_array *)&h;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_ERR_BUFFER, "(%u, %u) accepted", majors[i][0],
            majors[i][1]);
      CHECK(a == NULL, "out not cleared");
      CHECK(hand_calls(&h) == 1, "(%u, %u): deleter calls %d", majors[i][0], majors[i][1],
            hand_calls(&h));
      char v[64];
      snprintf(v, sizeof v, "(%u, %u)", majors[i][0], majors[i][1]);
      CHECK_STR_CONTAINS(dlrun_last_error(), "version");
      CHECK_STR_CONTAINS(dlrun_last_error(), v);
    }
    hand h; /* a NULL deleter is not called */
    hand_init(&h, f32_tensor(buf, 1, shape, NULL), true);
    h.versioned.version.major = 2;
    h.versioned.deleter = NULL;
    dlrun_array *a;
    CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_ERR_BUFFER, "accepted");
    /* a newer minor version of major 1 is readable */
    hand_init(&h, f32_tensor(buf, 1, shape, NULL), true);
    h.versioned.version = (DLPackVersion){.major = 1, .minor = 99};
    CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "(1, 99): %s", dlrun_last_error());
    CHECK(array_equals_f32(a, buf, 4), "values");
    dlrun_array_release(a);
    CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
  }
}

/* Tensors every importer must refuse, each with words its message names. */
typedef struct bad_case {
  const char *what;
  DLTensor t;
  const char *word1, *word2;
} bad_case;

static float bad_buf[16];
static int64_t s4[1] = {4}, s34[2] = {3, 4}, s_neg[2] = {3, -2}, s_huge[2] = {(int64_t)1 << 61, 8};
static int64_t s_huge1[1] = {(int64_t)1 << 62}, s33[33];
static int64_t st_huge[1] = {INT64_MAX};

static size_t bad_cases(bad_case *out) {
  for (int i = 0; i < 33; i++) s33[i] = 1;
  DLTensor ok = f32_tensor(bad_buf, 1, s4, NULL);
  size_t n = 0;
#define BAD(w, w1, w2, ...)                                          \
  do {                                                               \
    DLTensor t_ = ok;                                                \
    __VA_ARGS__;                                                     \
    out[n++] = (bad_case){.what = w, .t = t_, .word1 = w1, .word2 = w2}; \
  } while (0)
  BAD("negative ndim", "ndim", "-1", t_.ndim = -1);
  BAD("ndim 33", "ndim", "33", t_.ndim = 33; t_.shape = s33);
  BAD("NULL shape with ndim 2", "shape", "NULL", t_.ndim = 2; t_.shape = NULL);
  BAD("negative dimension", "negative", "-2", t_.ndim = 2; t_.shape = s_neg);
  BAD("byte size overflows", "overflow", "from_dlpack", t_.ndim = 2; t_.shape = s_huge;
      t_.dtype.bits = 8; t_.dtype.code = kDLInt);
  BAD("byte size overflows (float64)", "overflow", "from_dlpack", t_.shape = s_huge1;
      t_.dtype.bits = 64);
  BAD("byte_offset overflows the address", "byte_offset", "overflow",
      t_.byte_offset = UINT64_MAX - 3);
  BAD("byte_offset above INTPTR_MAX", "byte_offset", "overflow",
      t_.byte_offset = (uint64_t)INTPTR_MAX + 16);
  BAD("strides overflow", "strides", "overflow", t_.ndim = 1; t_.shape = s4; t_.strides = st_huge);
  BAD("lanes 4", "lanes", "4", t_.dtype.lanes = 4);
  BAD("lanes 0", "lanes", "0", t_.dtype.lanes = 0);
  BAD("bool with 1 bit", "bool", "8 bits", t_.dtype.code = DLRUN_DL_BOOL; t_.dtype.bits = 1);
  BAD("bool with 16 bits", "bool", "16", t_.dtype.code = DLRUN_DL_BOOL; t_.dtype.bits = 16);
  /* Codes are named, DLPack 1.1's included; bits no 1.1 type has. */
  BAD("opaque handle code", "dtype", "code=3 (kDLOpaqueHandle), bits=32",
      t_.dtype.code = kDLOpaqueHandle);
  BAD("float8 e3m4 with 16 bits", "dtype", "code=7 (kDLFloat8_e3m4), bits=16",
      t_.dtype.code = kDLFloat8_e3m4; t_.dtype.bits = 16);
  BAD("float8 e4m3fn with 4 bits", "dtype", "code=10 (kDLFloat8_e4m3fn), bits=4",
      t_.dtype.code = kDLFloat8_e4m3fn; t_.dtype.bits = 4);
  BAD("float8 e8m0fnu with 7 bits", "dtype", "code=14 (kDLFloat8_e8m0fnu), bits=7",
      t_.dtype.code = kDLFloat8_e8m0fnu; t_.dtype.bits = 7);
  BAD("float6 e2m3fn with 8 bits", "dtype", "code=15 (kDLFloat6_e2m3fn), bits=8",
      t_.dtype.code = kDLFloat6_e2m3fn; t_.dtype.bits = 8);
  BAD("float6 e3m2fn with 4 bits", "dtype", "code=16 (kDLFloat6_e3m2fn), bits=4",
      t_.dtype.code = kDLFloat6_e3m2fn; t_.dtype.bits = 4);
  BAD("float4 e2m1fn with 8 bits", "dtype", "code=17 (kDLFloat4_e2m1fn), bits=8",
      t_.dtype.code = kDLFloat4_e2m1fn; t_.dtype.bits = 8);
  BAD("code 18, past DLPack 1.3's", "dtype", "code=18 (unknown to DLPack 1.3), bits=8",
      t_.dtype.code = 18; t_.dtype.bits = 8);
  BAD("unknown code 200", "dtype", "code=200 (unknown to DLPack 1.3)", t_.dtype.code = 200);
  BAD("float with 8 bits", "dtype", "bits=8", t_.dtype.bits = 8);
  BAD("int with 12 bits", "dtype", "bits=12", t_.dtype.code = kDLInt; t_.dtype.bits = 12);
  BAD("bfloat with 32 bits", "dtype", "bits=32", t_.dtype.code = kDLBfloat);
  /* Device types are named, DLPack 1.2's kDLTrn included. */
  BAD("CUDA device", "device", "device type 2 (kDLCUDA), device_id 0",
      t_.device.device_type = kDLCUDA);
  BAD("OpenCL device", "device", "device type 4 (kDLOpenCL)", t_.device.device_type = kDLOpenCL);
  BAD("Vulkan device", "device", "device type 7 (kDLVulkan)", t_.device.device_type = kDLVulkan);
  BAD("WebGPU device", "device", "device type 15 (kDLWebGPU)",
      t_.device.device_type = (DLDeviceType)15);
  BAD("MAIA device", "device", "device type 17 (kDLMAIA)",
      t_.device.device_type = (DLDeviceType)17);
  BAD("Trainium device (1.2)", "device", "device type 18 (kDLTrn), device_id 0",
      t_.device.device_type = (DLDeviceType)kDLTrn);
  BAD("device type 19, past DLPack 1.3's", "device", "device type 19 (unknown to DLPack 1.3)",
      t_.device.device_type = (DLDeviceType)19);
  BAD("device type 5, never assigned", "device", "device type 5 (unknown to DLPack 1.3)",
      t_.device.device_type = (DLDeviceType)5);
  BAD("device type 0", "device", "device type 0 (unknown to DLPack 1.3)",
      t_.device.device_type = (DLDeviceType)0);
  BAD("unknown device type 99", "device", "device type 99 (unknown to DLPack 1.3)",
      t_.device.device_type = (DLDeviceType)99);
  BAD("kDLExtDev id 99 (no such sim device)", "device", "device type 12 (kDLExtDev), device_id 99",
      t_.device.device_type = kDLExtDev; t_.device.device_id = 99);
  BAD("kDLExtDev id -1", "device", "device_id -1",
      t_.device.device_type = kDLExtDev; t_.device.device_id = -1);
  BAD("NULL data with 4 elements", "data", "NULL", t_.data = NULL);
  BAD("NULL data with 12 elements", "data", "12", t_.data = NULL; t_.ndim = 2; t_.shape = s34);
#undef BAD
  return n;
}

static void test_import_validation(void) {
  TEST("checklist 10: every refused tensor leaves the deleter uncalled (legacy and versioned)") {
    bad_case cases[64];
    size_t n = bad_cases(cases);
    for (size_t i = 0; i < n; i++)
      for (int v = 0; v < 2; v++)
        for (int copy = -1; copy <= 1; copy++) {
          hand h;
          hand_init(&h, cases[i].t, v);
          dlrun_array *a = (dlrun_array *)&h;
          dlrun_status st = hand_import(&h, copy, NULL, &a);
          CHECK(st != DLRUN_OK, "%s (%s, copy=%d) accepted", cases[i].what,
                v ? "versioned" : "legacy", copy);
          if (st == DLRUN_OK) {
            dlrun_array_release(a);
            continue;
          }
          CHECK(a == NULL, "%s: out not cleared", cases[i].what);
          CHECK(hand_calls(&h) == 0, "%s (%s): refused AND the deleter called %d times",
                cases[i].what, v ? "versioned" : "legacy", hand_calls(&h));
          CHECK_STR_CONTAINS(dlrun_last_error(), cases[i].word1);
          CHECK_STR_CONTAINS(dlrun_last_error(), cases[i].word2);
        }
    /* Refusals that come after the tensor checks: the target. */
    float buf[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    dlrun_device *devs[2] = {sim0, sim1};
    const char *names[1] = {"x"};
    int64_t sizes[1] = {2};
    dlrun_mesh *m = NULL;
    dlrun_mesh_create(devs, 2, 1, names, sizes, &m);
    dlrun_partition_spec repl = {.nentries = 0};
    dlrun_sharding *two = NULL;
    dlrun_named_sharding_create(m, &repl, DLRUN_MEM_DEVICE, &two);
    for (int v = 0; v < 2; v++) {
      hand h;
      hand_init(&h, f32_tensor(buf, 1, shape, NULL), v);
      dlrun_array *a;
      CHECK(hand_import(&h, -1, two, &a) == DLRUN_ERR_VALUE, "multi-device target accepted");
      CHECK(strcmp(dlrun_last_error(),
                   "from_dlpack can only unpack a dlpack tensor onto a singular device, but a "
                   "Sharding with 2 devices was provided.") == 0,
            "\"%s\"", dlrun_last_error());
      CHECK(hand_calls(&h) == 0, "deleter called on a refused target");
      CHECK(hand_import(&h, 0, on_sim1, &a) == DLRUN_ERR_VALUE, "copy=0 to sim accepted");
      char want[400];
      snprintf(want, sizeof want,
               "Specified device=%s which requires a copy since the source device is %s, however "
               "copy=False. Set copy=True or copy=None to perform the requested operation.",
               dlrun_device_name(sim1), dlrun_device_name(host));
      CHECK(strcmp(dlrun_last_error(), want) == 0, "\"%s\"", dlrun_last_error());
      CHECK(hand_calls(&h) == 0, "deleter called on a refused copy=0");
      /* the producer still owns it and can hand it over again */
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(array_equals_f32(a, buf, 4), "values");
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
    }
    dlrun_sharding_release(two);
    dlrun_mesh_release(m);
  }
}

static void test_import_shapes(void) {
  TEST("checklist 11: ndim range, NULL shape, negative dims, size and byte_offset overflow") {
    bad_case cases[64];
    size_t n = bad_cases(cases);
    const char *shape_cases[] = {"negative ndim", "ndim 33", "NULL shape with ndim 2",
                                 "negative dimension", "byte size overflows",
                                 "byte size overflows (float64)",
                                 "byte_offset overflows the address",
                                 "byte_offset above INTPTR_MAX", "strides overflow"};
    for (size_t k = 0; k < NELEM(shape_cases); k++)
      for (size_t i = 0; i < n; i++) {
        if (strcmp(cases[i].what, shape_cases[k])) continue;
        hand h;
        hand_init(&h, cases[i].t, true);
        dlrun_array *a;
        CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_ERR_BUFFER, "%s: not a BufferError",
              cases[i].what);
        CHECK_STR_CONTAINS(dlrun_last_error(), "from_dlpack");
        CHECK_STR_CONTAINS(dlrun_last_error(), cases[i].word1);
        CHECK_STR_CONTAINS(dlrun_last_error(), cases[i].word2);
        CHECK(hand_calls(&h) == 0, "deleter called");
      }
    /* The limits themselves are fine: ndim 0 and ndim 32. */
    static int64_t s32[32];
    for (int i = 0; i < 32; i++) s32[i] = 1;
    s32[31] = 3;
    float buf[3] = {7, 8, 9};
    int64_t *shapes[2] = {NULL, s32};
    int ndims[2] = {0, 32};
    for (int k = 0; k < 2; k++) {
      hand h;
      hand_init(&h, f32_tensor(buf, ndims[k], shapes[k], NULL), false);
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "ndim %d: %s", ndims[k], dlrun_last_error());
      CHECK(a && dlrun_array_ndim(a) == ndims[k], "ndim");
      CHECK(array_equals_f32(a, buf, k ? 3 : 1), "values");
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
    }
    /* A byte_offset that fits is added to the address. */
    hand h;
    float seq[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t shape[1] = {4};
    hand_init(&h, f32_tensor(seq, 1, shape, NULL), true);
    h.versioned.dl_tensor.byte_offset = 3 * sizeof(float);
    dlrun_array *a = NULL;
    CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(array_equals_f32(a, seq + 3, 4), "byte_offset ignored");
    dlrun_array_release(a);
  }
}

static void test_import_strides(void) {
  TEST("checklist 12: NULL strides are row-major; negative, zero, non-compact strides copy or fail") {
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    int64_t shape[2] = {3, 4};
    /* NULL strides and explicit row-major strides: no copy. */
    int64_t rm[2] = {4, 1};
    int64_t *strides_of[2] = {NULL, rm};
    for (int k = 0; k < 2; k++)
      for (int v = 0; v < 2; v++) {
        hand h;
        hand_init(&h, f32_tensor(buf, 2, shape, strides_of[k]), v);
        dlrun_array *a = NULL;
        CHECK(hand_import(&h, 0, NULL, &a) == DLRUN_OK, "copy=0: %s", dlrun_last_error());
        CHECK(array_equals_f32(a, buf, 12), "row-major values (strides %s)", k ? "set" : "NULL");
        buf[5] = 50;
        float want[12];
        memcpy(want, buf, sizeof want);
        CHECK(array_equals_f32(a, want, 12), "no-copy import does not alias the producer");
        buf[5] = 5;
        CHECK(hand_calls(&h) == 0, "deleter called before release");
        dlrun_array_release(a);
        CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
      }
    /* Strides that need a copy. */
    float rev[6] = {0, 1, 2, 3, 4, 5};
    float grid[3][8];
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 8; c++) grid[r][c] = (float)(r * 10 + c);
    float row[4] = {1, 2, 3, 4};
    int64_t s6[1] = {6}, neg1[1] = {-1};
    int64_t s23[2] = {2, 3}, rows_rev[2] = {-3, 1}, both_rev[2] = {-3, -1};
    int64_t bcast[2] = {0, 1}, col_bcast[2] = {1, 0};
    int64_t every_other[2] = {8, 2}, sub_block[2] = {8, 1};
    struct {
      const char *what;
      DLTensor t;
      float want[12];
      int64_t n;
    } cases[] = {
        {"reversed 1-d", f32_tensor(rev + 5, 1, s6, neg1), {5, 4, 3, 2, 1, 0}, 6},
        {"rows reversed", f32_tensor(rev + 3, 2, s23, rows_rev), {3, 4, 5, 0, 1, 2}, 6},
        {"both reversed", f32_tensor(rev + 5, 2, s23, both_rev), {5, 4, 3, 2, 1, 0}, 6},
        {"broadcast rows (stride 0)", f32_tensor(row, 2, shape, bcast),
         {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}, 12},
        {"broadcast columns (stride 0)", f32_tensor(row, 2, shape, col_bcast),
         {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, 12},
        {"every other column", f32_tensor(grid, 2, shape, every_other),
         {0, 2, 4, 6, 10, 12, 14, 16, 20, 22, 24, 26}, 12},
        {"a 3x4 block of a 3x8 array", f32_tensor(&grid[0][2], 2, shape, sub_block),
         {2, 3, 4, 5, 12, 13, 14, 15, 22, 23, 24, 25}, 12},
    };
    for (size_t i = 0; i < NELEM(cases); i++)
      for (int v = 0; v < 2; v++) {
        hand h;
        hand_init(&h, cases[i].t, v);
        dlrun_array *a = NULL;
        dlrun_status st = hand_import(&h, -1, NULL, &a);
        CHECK(st == DLRUN_OK, "%s: %s", cases[i].what, dlrun_last_error());
        CHECK(array_equals_f32(a, cases[i].want, cases[i].n), "%s: values", cases[i].what);
        CHECK(hand_calls(&h) == 1, "%s: a copy was made, deleter calls %d (want 1 right away)",
              cases[i].what, hand_calls(&h));
        dlrun_array_release(a);
        CHECK(hand_calls(&h) == 1, "%s: deleter calls %d after release", cases[i].what,
              hand_calls(&h));
        /* copy=0: refused, deleter untouched */
        hand_init(&h, cases[i].t, v);
        a = (dlrun_array *)&h;
        CHECK(hand_import(&h, 0, NULL, &a) == DLRUN_ERR_VALUE, "%s: copy=0 accepted",
              cases[i].what);
        CHECK(a == NULL, "out set");
        CHECK_STR_CONTAINS(dlrun_last_error(), "strides");
        CHECK_STR_CONTAINS(dlrun_last_error(), "copy=False");
        CHECK(hand_calls(&h) == 0, "%s: copy=0 refused but deleter called", cases[i].what);
        /* copy=1: a copy too */
        hand_init(&h, cases[i].t, v);
        CHECK(hand_import(&h, 1, NULL, &a) == DLRUN_OK, "%s: copy=1: %s", cases[i].what,
              dlrun_last_error());
        CHECK(array_equals_f32(a, cases[i].want, cases[i].n), "%s: copy=1 values", cases[i].what);
        CHECK(hand_calls(&h) == 1, "%s: copy=1 deleter calls %d", cases[i].what, hand_calls(&h));
        dlrun_array_release(a);
      }
    /* A transposed (column-major, compact) tensor is wrapped without a copy. */
    float colmajor[12];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) colmajor[j * 3 + i] = (float)(i * 4 + j);
    int64_t cm[2] = {1, 3};
    float logical[12];
    for (int i = 0; i < 12; i++) logical[i] = (float)i;
    for (int v = 0; v < 2; v++)
      for (int copy = -1; copy <= 0; copy++) {
        hand h;
        hand_init(&h, f32_tensor(colmajor, 2, shape, cm), v);
        dlrun_array *a = NULL;
        CHECK(hand_import(&h, copy, NULL, &a) == DLRUN_OK, "transposed, copy=%d: %s", copy,
              dlrun_last_error());
        CHECK(shape_is(a, 2, shape), "transposed shape");
        CHECK(array_equals_f32(a, logical, 12), "transposed: values not in row-major order");
        CHECK(hand_calls(&h) == 0, "transposed: copied (deleter called %d times)", hand_calls(&h));
        colmajor[1 * 3 + 2] = 99; /* element (2, 1) */
        float want[12];
        memcpy(want, logical, sizeof want);
        want[2 * 4 + 1] = 99;
        CHECK(array_equals_f32(a, want, 12), "transposed: not aliasing the producer's memory");
        colmajor[1 * 3 + 2] = 9;
        /* partial reads honour the layout too */
        float part[3];
        CHECK(dlrun_array_read(a, 5 * sizeof(float), sizeof part, part) == DLRUN_OK &&
                  part[0] == 5 && part[1] == 6 && part[2] == 7,
              "transposed partial read %g %g %g", (double)part[0], (double)part[1],
              (double)part[2]);
        dlrun_array_release(a);
        CHECK(hand_calls(&h) == 1, "transposed: deleter calls %d after release", hand_calls(&h));
      }
    /* A 3-d permutation: shape (2, 3, 4) stored as (4, 2, 3). */
    float perm[24];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++) perm[k * 6 + i * 3 + j] = (float)(i * 12 + j * 4 + k);
    int64_t s234[3] = {2, 3, 4}, pst[3] = {3, 1, 6};
    float want24[24];
    for (int i = 0; i < 24; i++) want24[i] = (float)i;
    hand h;
    hand_init(&h, f32_tensor(perm, 3, s234, pst), true);
    dlrun_array *a = NULL;
    CHECK(hand_import(&h, 0, NULL, &a) == DLRUN_OK, "permuted 3-d, copy=0: %s", dlrun_last_error());
    CHECK(array_equals_f32(a, want24, 24), "permuted 3-d values");
    dlrun_array_release(a);
    CHECK(hand_calls(&h) == 1, "deleter calls");
  }
}

static void test_import_zero_size_and_unit_dims(void) {
  TEST("checklist 13: zero-size tensors with NULL data; size-1 dimensions with any stride") {
    int64_t z1[1] = {0}, z30[2] = {3, 0}, z04[2] = {0, 4}, z_huge[2] = {0, (int64_t)1 << 62};
    int64_t odd[2] = {-5, 77};
    struct {
      int ndim;
      int64_t *shape, *strides;
    } zs[] = {{1, z1, NULL}, {2, z30, NULL}, {2, z04, NULL}, {2, z30, odd}, {2, z_huge, NULL}};
    for (size_t i = 0; i < NELEM(zs); i++)
      for (int v = 0; v < 2; v++)
        for (int copy = -1; copy <= 1; copy++) {
          hand h;
          hand_init(&h, f32_tensor(NULL, zs[i].ndim, zs[i].shape, zs[i].strides), v);
          dlrun_array *a = NULL;
          dlrun_status st = hand_import(&h, copy, NULL, &a);
          CHECK(st == DLRUN_OK, "zero-size case %zu copy=%d: %s", i, copy, dlrun_last_error());
          if (st) continue;
          CHECK(shape_is(a, zs[i].ndim, zs[i].shape), "shape");
          CHECK(dlrun_array_size(a) == 0 && dlrun_array_nbytes(a) == 0, "size");
          float dummy;
          CHECK(dlrun_array_read(a, 0, 0, &dummy) == DLRUN_OK, "read: %s", dlrun_last_error());
          dlrun_array_release(a);
          CHECK(hand_calls(&h) == 1, "zero-size: deleter calls %d", hand_calls(&h));
        }
    /* Zero-size onto a sim device. */
    hand h;
    hand_init(&h, f32_tensor(NULL, 2, z30, NULL), true);
    dlrun_array *a = NULL;
    CHECK(hand_import(&h, -1, on_sim1, &a) == DLRUN_OK, "zero-size to sim: %s", dlrun_last_error());
    CHECK(a && dlrun_array_device(a) == sim1, "device");
    dlrun_array_release(a);
    CHECK(hand_calls(&h) == 1, "deleter calls");

    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    int64_t s314[3] = {3, 1, 4}, st314a[3] = {4, 12345, 1}, st314b[3] = {4, -7, 1};
    int64_t st314c[3] = {4, 0, 1};
    int64_t s1[1] = {1}, st1[1] = {0}, st1b[1] = {-100};
    int64_t s15[2] = {1, 5}, st15[2] = {-3, 1};
    int64_t s41[2] = {4, 1}, st41[2] = {1, -9};
    int64_t s111[3] = {1, 1, 1}, st111[3] = {INT64_MIN + 1, 0, INT64_MAX};
    struct {
      int ndim;
      int64_t *shape, *strides;
      int64_t n;
    } us[] = {{3, s314, st314a, 12}, {3, s314, st314b, 12}, {3, s314, st314c, 12},
              {1, s1, st1, 1},       {1, s1, st1b, 1},      {2, s15, st15, 5},
              {2, s41, st41, 4},     {3, s111, st111, 1}};
    for (size_t i = 0; i < NELEM(us); i++)
      for (int v = 0; v < 2; v++) {
        hand_init(&h, f32_tensor(buf, us[i].ndim, us[i].shape, us[i].strides), v);
        a = NULL;
        CHECK(hand_import(&h, 0, NULL, &a) == DLRUN_OK, "size-1 case %zu, copy=0: %s", i,
              dlrun_last_error());
        CHECK(array_equals_f32(a, buf, us[i].n), "size-1 case %zu values", i);
        CHECK(hand_calls(&h) == 0, "size-1 case %zu copied", i);
        dlrun_array_release(a);
        CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
      }
  }
}

static void test_import_dtypes_devices(void) {
  TEST("checklist 14: lanes != 1, bool not 8 bits, unknown codes or devices are BufferErrors") {
    bad_case cases[64];
    size_t n = bad_cases(cases);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
      bool dtype_or_device = strstr(cases[i].word1, "lanes") || strstr(cases[i].word1, "bool") ||
                             strstr(cases[i].word1, "dtype") || strstr(cases[i].word1, "device");
      if (!dtype_or_device) continue;
      seen++;
      for (int v = 0; v < 2; v++) {
        hand h;
        hand_init(&h, cases[i].t, v);
        dlrun_array *a;
        CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_ERR_BUFFER, "%s: not a BufferError (%s)",
              cases[i].what, dlrun_last_error());
        CHECK_STR_CONTAINS(dlrun_last_error(), "from_dlpack");
        CHECK_STR_CONTAINS(dlrun_last_error(), cases[i].word1);
        CHECK_STR_CONTAINS(dlrun_last_error(), cases[i].word2);
        CHECK(hand_calls(&h) == 0, "%s: deleter called", cases[i].what);
      }
    }
    CHECK(seen >= 14, "only %d dtype/device cases", seen);
    /* Every supported triple is accepted, and host-like devices are read. */
    static const struct {
      uint8_t code, bits;
      dlrun_dtype dt;
    } good[] = {{DLRUN_DL_BOOL, 8, DLRUN_BOOL},  {kDLInt, 8, DLRUN_INT8},
                {kDLInt, 16, DLRUN_INT16},       {kDLInt, 32, DLRUN_INT32},
                {kDLInt, 64, DLRUN_INT64},       {kDLUInt, 8, DLRUN_UINT8},
                {kDLUInt, 16, DLRUN_UINT16},     {kDLUInt, 32, DLRUN_UINT32},
                {kDLUInt, 64, DLRUN_UINT64},     {kDLFloat, 16, DLRUN_FLOAT16},
                {kDLBfloat, 16, DLRUN_BFLOAT16}, {kDLFloat, 32, DLRUN_FLOAT32},
                {kDLFloat, 64, DLRUN_FLOAT64},   {kDLComplex, 64, DLRUN_COMPLEX64},
                {kDLComplex, 128, DLRUN_COMPLEX128},
                /* DLPack 1.1's float8 codes, read from any producer */
                {7, 8, DLRUN_FLOAT8_E3M4},       {8, 8, DLRUN_FLOAT8_E4M3},
                {9, 8, DLRUN_FLOAT8_E4M3B11FNUZ}, {10, 8, DLRUN_FLOAT8_E4M3FN},
                {11, 8, DLRUN_FLOAT8_E4M3FNUZ},  {12, 8, DLRUN_FLOAT8_E5M2},
                {13, 8, DLRUN_FLOAT8_E5M2FNUZ},  {14, 8, DLRUN_FLOAT8_E8M0FNU}};
    static _Alignas(16) unsigned char bytes[4 * 16];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i % 2);
    int64_t shape[1] = {4};
    for (size_t i = 0; i < NELEM(good); i++) {
      hand h;
      hand_init(&h, host_tensor(bytes, good[i].code, good[i].bits, 1, shape, NULL), true);
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "code %u bits %u: %s", good[i].code,
            good[i].bits, dlrun_last_error());
      CHECK(a && dlrun_array_dtype(a) == good[i].dt, "code %u bits %u: dtype", good[i].code,
            good[i].bits);
      dlrun_array_release(a);
    }
    float buf[4] = {1, 2, 3, 4};
    DLDeviceType hostlike[] = {kDLCPU, kDLCUDAHost, kDLROCMHost};
    for (size_t i = 0; i < NELEM(hostlike); i++) {
      hand h;
      DLTensor t = f32_tensor(buf, 1, shape, NULL);
      t.device.device_type = hostlike[i];
      hand_init(&h, t, false);
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "device type %d: %s", (int)hostlike[i],
            dlrun_last_error());
      CHECK(a && dlrun_array_device(a) == host, "device type %d not on the host", (int)hostlike[i]);
      CHECK(array_equals_f32(a, buf, 4), "values");
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter calls");
    }
  }
}

static void test_import_ownership(void) {
  TEST("checklist 15: READ_ONLY honoured; NULL deleter never called; others once, after last use") {
    float buf[6] = {1, 2, 3, 4, 5, 6}, orig[6];
    memcpy(orig, buf, sizeof buf);
    int64_t shape[2] = {2, 3};
    /* READ_ONLY: imported (wrapped or copied), never written. */
    for (int copy = -1; copy <= 1; copy++) {
      hand h;
      hand_init(&h, f32_tensor(buf, 2, shape, NULL), true);
      h.versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, copy, NULL, &a) == DLRUN_OK, "read-only, copy=%d: %s", copy,
            dlrun_last_error());
      CHECK(array_equals_f32(a, orig, 6), "values");
      /* a put onto a sim device and back must not write the source */
      dlrun_array *moved = NULL;
      if (a) CHECK(dlrun_device_put(a, on_sim0, NULL, &moved) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_array_release(moved);
      dlrun_array_release(a);
      /* the put's copy runs on sim 0 and uses the memory until it is done */
      dlrun_device_synchronize(sim0);
      CHECK(memcmp(buf, orig, sizeof buf) == 0, "read-only producer memory written");
      CHECK(hand_calls(&h) == 1, "deleter calls %d after the last use", hand_calls(&h));
    }
    /* NULL deleters: wrapped, copied, and refused. */
    int64_t every[2] = {2, 3}; /* with shape (2, 2): a slice, copied */
    int64_t s22[2] = {2, 2};
    for (int v = 0; v < 2; v++) {
      DLTensor ts[2] = {f32_tensor(buf, 2, shape, NULL), f32_tensor(buf, 2, s22, every)};
      for (int k = 0; k < 2; k++) {
        hand h;
        hand_init(&h, ts[k], v);
        if (v) h.versioned.deleter = NULL;
        else h.legacy.deleter = NULL;
        dlrun_array *a = NULL;
        CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "NULL deleter: %s", dlrun_last_error());
        dlrun_array_release(a); /* would crash calling NULL */
      }
      hand h;
      DLTensor bad = f32_tensor(buf, 2, shape, NULL);
      bad.ndim = -1;
      hand_init(&h, bad, v);
      if (v) h.versioned.deleter = NULL;
      else h.legacy.deleter = NULL;
      dlrun_array *a;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_ERR_BUFFER, "refused");
    }
    /* Once, after the last use: two references, then an export of it. */
    hand h;
    hand_init(&h, f32_tensor(buf, 2, shape, NULL), false);
    dlrun_array *a = NULL;
    CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_array_retain(a);
    dlrun_array_release(a);
    CHECK(hand_calls(&h) == 0, "deleter called with a reference left");
    dlrun_exported e;
    dlrun_export_options o = versioned_opts(-1);
    CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "re-export: %s", dlrun_last_error());
    CHECK(e.versioned && e.versioned->dl_tensor.data == (void *)buf, "re-export copied");
    CHECK(e.versioned && (e.versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY), "re-export flags");
    dlrun_array_delete(a);
    dlrun_array_release(a);
    CHECK(hand_calls(&h) == 0, "deleter called while dlrun's export still uses the memory");
    call_deleter(&e);
    CHECK(hand_calls(&h) == 1, "deleter calls %d after the export went", hand_calls(&h));
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
    /* A copy made at import releases the producer at once. */
    hand_init(&h, f32_tensor(buf, 2, shape, NULL), true);
    CHECK(hand_import(&h, 1, NULL, &a) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(hand_calls(&h) == 1, "copy=1: deleter calls %d right after import", hand_calls(&h));
    buf[0] = -1;
    CHECK(array_equals_f32(a, orig, 6), "copy=1 aliases the producer");
    buf[0] = 1;
    dlrun_array_release(a);
    CHECK(hand_calls(&h) == 1, "copy=1: deleter called again on release");
  }
}

/* ---- more import behaviour ----------------------------------------------- */

static void test_import_more(void) {
  TEST("import honours byte_offset (wrapped and copied)") {
    float seq[16];
    for (int i = 0; i < 16; i++) seq[i] = (float)i;
    int64_t shape[2] = {2, 3}, strides[2] = {6, 2};
    for (int v = 0; v < 2; v++) {
      hand h;
      hand_init(&h, f32_tensor(seq, 2, shape, NULL), v);
      if (v) h.versioned.dl_tensor.byte_offset = 4 * sizeof(float);
      else h.legacy.dl_tensor.byte_offset = 4 * sizeof(float);
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(array_equals_f32(a, seq + 4, 6), "wrapped: byte_offset ignored");
      CHECK(hand_calls(&h) == 0, "wrapped: copied");
      dlrun_array_release(a);
      hand_init(&h, f32_tensor(seq, 2, shape, strides), v);
      if (v) h.versioned.dl_tensor.byte_offset = 3 * sizeof(float);
      else h.legacy.dl_tensor.byte_offset = 3 * sizeof(float);
      float want[6] = {3, 5, 7, 9, 11, 13};
      CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(array_equals_f32(a, want, 6), "strided copy: byte_offset ignored");
      dlrun_array_release(a);
      hand_init(&h, f32_tensor(seq, 2, shape, NULL), v);
      if (v) h.versioned.dl_tensor.byte_offset = 2 * sizeof(float);
      else h.legacy.dl_tensor.byte_offset = 2 * sizeof(float);
      CHECK(hand_import(&h, 1, on_sim1, &a) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(array_equals_f32(a, seq + 2, 6), "copy to sim: byte_offset ignored");
      dlrun_array_release(a);
    }
  }
  TEST("import copies misaligned data; copy=0 refuses it") {
    static _Alignas(16) unsigned char raw[64];
    float vals[5] = {1.5f, -2, 3.25f, 4, 1e9f};
    for (int off = 1; off < 4; off++)
      for (int via_offset = 0; via_offset < 2; via_offset++)
        for (int v = 0; v < 2; v++) {
          memset(raw, 0, sizeof raw);
          memcpy(raw + 8 + off, vals, sizeof vals);
          int64_t shape[1] = {5};
          DLTensor t = f32_tensor(via_offset ? raw + 8 : raw + 8 + off, 1, shape, NULL);
          if (via_offset) t.byte_offset = (uint64_t)off;
          hand h;
          hand_init(&h, t, v);
          dlrun_array *a = NULL;
          CHECK(hand_import(&h, -1, NULL, &a) == DLRUN_OK, "misaligned by %d: %s", off,
                dlrun_last_error());
          CHECK(array_equals_f32(a, vals, 5), "misaligned by %d: values", off);
          CHECK(hand_calls(&h) == 1, "misaligned by %d: not copied (deleter calls %d)", off,
                hand_calls(&h));
          dlrun_array_release(a);
          CHECK(hand_calls(&h) == 1, "deleter calls");
          hand_init(&h, t, v);
          CHECK(hand_import(&h, 0, NULL, &a) == DLRUN_ERR_VALUE, "misaligned, copy=0 accepted");
          CHECK_STR_CONTAINS(dlrun_last_error(), "aligned");
          CHECK_STR_CONTAINS(dlrun_last_error(), "copy=False");
          CHECK(hand_calls(&h) == 0, "deleter called on refusal");
        }
  }
  TEST("import onto a target device: copied there, producer released at once") {
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    for (int v = 0; v < 2; v++) {
      hand h;
      hand_init(&h, f32_tensor(buf, 2, shape, NULL), v);
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, -1, on_sim1, &a) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(a && dlrun_array_device(a) == sim1, "not on sim 1");
      CHECK(hand_calls(&h) == 1, "deleter calls %d right after a copy", hand_calls(&h));
      buf[0] = 100;
      float want[6] = {1, 2, 3, 4, 5, 6};
      CHECK(array_equals_f32(a, want, 6), "values");
      buf[0] = 1;
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter called again");
      /* the host device as target: no copy */
      hand_init(&h, f32_tensor(buf, 2, shape, NULL), v);
      CHECK(hand_import(&h, 0, on_host, &a) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(hand_calls(&h) == 0, "copied onto its own device");
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter calls");
    }
    /* a tensor on a sim device (kDLExtDev) stays there */
    dlrun_sharding *on_sim1 = single(sim1);
    dlrun_array *src = iota_f32(on_sim1, 2, shape);
    dlrun_exported e, again = {0};
    CHECK(src && dlrun_export(src, NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
    void *device_data = e.legacy ? e.legacy->dl_tensor.data : NULL;
    dlrun_array *a = NULL;
    CHECK(dlrun_import(rt, e.legacy, NULL, NULL, &a, NULL) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(a && dlrun_array_device(a) == sim1, "kDLExtDev 1 not on sim 1");
    /* its memory is also src's: shared only when asked for */
    dlrun_export_options share = {.legacy_sharing = DLRUN_LEGACY_SHARE};
    CHECK(a && dlrun_export(a, &share, &again) == DLRUN_OK && again.legacy &&
              again.legacy->dl_tensor.data == device_data && !again.copied,
          "copied");
    call_deleter(&again);
    dlrun_array_release(a);
    dlrun_array_release(src);
    dlrun_sharding_release(on_sim1);
    /* host memory that claims to be a sim device's is refused, not read */
    hand h;
    DLTensor t = f32_tensor(buf, 2, shape, NULL);
    t.device = (DLDevice){.device_type = kDLExtDev, .device_id = 1};
    hand_init(&h, t, true);
    a = NULL;
    dlrun_status st = hand_import(&h, -1, NULL, &a);
    CHECK(st == DLRUN_ERR_BUFFER && !a, "status %d", (int)st);
    CHECK(strstr(dlrun_last_error(), "names SimDevice(id=1) (device type 12 (kDLExtDev), device_id 1), but "
                                      "its 24 bytes at ") != NULL,
          "message: %s", dlrun_last_error());
    CHECK(hand_calls(&h) == 0, "the refused tensor's deleter ran");
  }
}

/* ---- per-call transfer counts, self-imports, memory-kind messages ------- */

/* Resets the runtime's statistics and makes transfers of its own until
 * told to stop: another user of the runtime. */
typedef struct interferer {
  dlrun_array *src;
  atomic_bool stop;
  atomic_long rounds;
} interferer;

static void *interfere(void *arg) {
  interferer *it = arg;
  while (!atomic_load(&it->stop)) {
    dlrun_transfer_stats_reset(rt);
    dlrun_array *out = NULL;
    dlrun_put_options never = {.may_alias = DLRUN_ALIAS_NEVER};
    if (dlrun_device_put(it->src, on_sim1, &never, &out) == DLRUN_OK) dlrun_array_release(out);
    atomic_fetch_add(&it->rounds, 1);
  }
  return NULL;
}

static void test_counts(void) {
  TEST("device_put and export report their own copies in options.stats") {
    int64_t dims[1] = {64};
    dlrun_array *a = iota_f32(on_sim0, 1, dims), *out = NULL;
    dlrun_transfer_stats got = {.bytes_moved = 99, .local_bytes = 99, .copies = 99, .shares = 99};
    dlrun_put_options with_stats = {.stats = &got};
    CHECK(dlrun_device_put(a, on_sim0, &with_stats, &out) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(out == a, "an equal sharding gives the array itself");
    CHECK(got.bytes_moved == 0 && got.local_bytes == 0 && got.copies == 0 && got.shares == 0,
          "returned as it is: %llu %llu %llu %llu", (unsigned long long)got.bytes_moved,
          (unsigned long long)got.local_bytes, (unsigned long long)got.copies,
          (unsigned long long)got.shares);
    dlrun_array_release(out);
    CHECK(dlrun_device_put(a, on_sim1, &with_stats, &out) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(got.bytes_moved == 256 && got.local_bytes == 0 && got.copies == 1 && got.shares == 0,
          "to sim 1: moved %llu local %llu copies %llu", (unsigned long long)got.bytes_moved,
          (unsigned long long)got.local_bytes, (unsigned long long)got.copies);
    dlrun_array_release(out);
    dlrun_put_options never = {.may_alias = DLRUN_ALIAS_NEVER, .stats = &got};
    CHECK(dlrun_device_put(a, on_sim0, &never, &out) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(got.bytes_moved == 0 && got.local_bytes == 256, "a local copy: moved %llu local %llu",
          (unsigned long long)got.bytes_moved, (unsigned long long)got.local_bytes);
    dlrun_array_release(out);
    got = (dlrun_transfer_stats){.bytes_moved = 7};
    CHECK(dlrun_device_put(a, NULL, &with_stats, &out) == DLRUN_ERR_VALUE, "NULL sharding");
    CHECK(got.bytes_moved == 7, "a failed put wrote its stats");

    dlrun_exported e;
    dlrun_export_options plain = {.stats = &got, .legacy_sharing = DLRUN_LEGACY_SHARE};
    CHECK(dlrun_export(a, &plain, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(got.bytes_moved == 0 && got.local_bytes == 0 && got.copies == 0, "shared export counted");
    call_deleter(&e);
    dlrun_export_options to_host = {.copy = DLRUN_COPY_IF_NEEDED, .has_dl_device = true, .device_type = kDLCPU,
                                    .stats = &got};
    CHECK(dlrun_export(a, &to_host, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(got.bytes_moved == 256 && got.local_bytes == 0 && got.copies == 1,
          "dl_device host: moved %llu local %llu", (unsigned long long)got.bytes_moved,
          (unsigned long long)got.local_bytes);
    call_deleter(&e);
    dlrun_export_options copy = {.copy = DLRUN_COPY_ALWAYS, .stats = &got};
    CHECK(dlrun_export(a, &copy, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(got.bytes_moved == 0 && got.local_bytes == 256, "copy=1: moved %llu local %llu",
          (unsigned long long)got.bytes_moved, (unsigned long long)got.local_bytes);
    call_deleter(&e);
    dlrun_array_release(a);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
  TEST("per-call counts stay exact while another thread resets and transfers") {
    int64_t dims[1] = {1024};
    dlrun_array *a = iota_f32(on_sim0, 1, dims);
    interferer it = {.src = iota_f32(on_sim0, 1, dims)};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, interfere, &it) == 0, "pthread_create");
    long wrong = 0;
    for (int i = 0; i < 400 || atomic_load(&it.rounds) < 50; i++) {
      dlrun_transfer_stats got;
      dlrun_exported e;
      dlrun_export_options to_host = {.copy = DLRUN_COPY_IF_NEEDED, .has_dl_device = true, .device_type = kDLCPU,
                                      .stats = &got};
      if (dlrun_export(a, &to_host, &e) != DLRUN_OK) {
        wrong++;
        continue;
      }
      wrong += got.bytes_moved != 4096 || got.local_bytes != 0;
      call_deleter(&e);
      dlrun_array *out = NULL;
      dlrun_put_options o = {.stats = &got};
      if (dlrun_device_put(a, on_host, &o, &out) == DLRUN_OK) {
        wrong += got.bytes_moved != 4096 || got.copies != 1;
        dlrun_array_release(out);
      } else {
        wrong++;
      }
    }
    atomic_store(&it.stop, true);
    pthread_join(th, NULL);
    CHECK(wrong == 0, "%ld exports or puts counted other transfers' bytes", wrong);
    CHECK(atomic_load(&it.rounds) >= 50, "the other thread ran %ld rounds",
          (long)atomic_load(&it.rounds));
    dlrun_array_release(it.src);
    dlrun_array_release(a);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
  TEST("importing a stream -1 export reads it only once written (shared and copied)") {
    int64_t dims[1] = {1 << 20};
    int64_t wrong = 0;
    for (int round = 0; round < 8; round++) {
      dlrun_scalar value = {.kind = DLRUN_SCALAR_FLOAT, .re = 100.0 + round};
      dlrun_array *a = NULL, *b = NULL;
      CHECK(dlrun_array_full(on_sim0, DLRUN_FLOAT32, 1, dims, &value, &a) == DLRUN_OK, "%s",
            dlrun_last_error());
      dlrun_export_options nowait = {.copy = DLRUN_COPY_IF_NEEDED, .has_stream = true, .stream = -1,
                                     .has_max_version = round % 2, .max_major = 1};
      dlrun_exported e;
      CHECK(dlrun_export(a, &nowait, &e) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_sharding *targets[] = {NULL, on_sim1, on_host, on_sim0};
      dlrun_import_options o = {.target = targets[round % 4], .copy = round % 4 == 3 ? DLRUN_COPY_ALWAYS : DLRUN_COPY_IF_NEEDED};
      CHECK(dlrun_import(rt, e.legacy, e.versioned, &o, &b, NULL) == DLRUN_OK, "%s", dlrun_last_error());
      float first = 0, last = 0;
      dlrun_array_read(b, 0, 4, &first);
      dlrun_array_read(b, (uint64_t)(dims[0] - 1) * 4, 4, &last);
      wrong += (first != (float)value.re) + (last != (float)value.re);
      dlrun_array_release(b);
      dlrun_array_release(a);
    }
    CHECK(wrong == 0, "%lld elements read before the fill wrote them", (long long)wrong);
    dlrun_device_synchronize(sim0);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
  TEST("copy=False between memory kinds of one device names both kinds") {
    int64_t dims[1] = {4};
    dlrun_sharding *pinned0 = NULL;
    CHECK(dlrun_single_device_sharding_create(sim0, DLRUN_MEM_PINNED_HOST, &pinned0) == DLRUN_OK,
          "%s", dlrun_last_error());
    dlrun_array *p = iota_f32(pinned0, 1, dims), *s = iota_f32(on_sim0, 1, dims), *out = NULL;
    dlrun_exported e;
    dlrun_export_options to_sim0 = {.copy = DLRUN_COPY_NEVER, .has_dl_device = true, .device_type = kDLExtDev};
    CHECK(dlrun_export(p, &to_sim0, &e) == DLRUN_ERR_VALUE, "copy=0 pinned to device accepted");
    CHECK(strcmp(dlrun_last_error(),
                 "Specified device=SimDevice(id=0) (memory_kind=device) which requires a copy "
                 "since the source device is SimDevice(id=0) (memory_kind=pinned_host), however "
                 "copy=False. Set copy=True or copy=None to perform the requested operation.") == 0,
          "\"%s\"", dlrun_last_error());
    CHECK(dlrun_export(s, NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_import_options into_pinned = {.target = pinned0, .copy = DLRUN_COPY_NEVER};
    CHECK(dlrun_import(rt, e.legacy, e.versioned, &into_pinned, &out, NULL) == DLRUN_ERR_VALUE,
          "copy=0 device to pinned accepted");
    CHECK(strcmp(dlrun_last_error(),
                 "Specified device=SimDevice(id=0) (memory_kind=pinned_host) which requires a "
                 "copy since the source device is SimDevice(id=0) (memory_kind=device), however "
                 "copy=False. Set copy=True or copy=None to perform the requested operation.") == 0,
          "\"%s\"", dlrun_last_error());
    call_deleter(&e);
    dlrun_array_release(p);
    dlrun_array_release(s);
    dlrun_sharding_release(pinned0);
    CHECK(dlrun_live_exports(rt) == 0, "live exports");
  }
}

static void test_waits_and_exhaustion(void) {
  TEST("an export with no stream waits for the array's data to be written") {
    int64_t dims[1] = {1 << 20};
    dlrun_scalar seven = {.kind = DLRUN_SCALAR_FLOAT, .re = 7.0};
    for (int v = 0; v < 2; v++) {
      dlrun_array *a = NULL;
      CHECK(dlrun_array_full(on_sim0, DLRUN_FLOAT32, 1, dims, &seven, &a) == DLRUN_OK, "%s",
            dlrun_last_error());
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e;
      CHECK(dlrun_export(a, v ? &o : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
      float *p = host_copy_of(tensor_of(&e));
      int64_t bad = p ? 0 : dims[0];
      for (int64_t i = 0; p && i < dims[0]; i++) bad += p[i] != 7.0f;
      free(p);
      CHECK(bad == 0, "%lld elements not yet written when the export returned", (long long)bad);
      call_deleter(&e);
      dlrun_array_release(a);
    }
    dlrun_device_synchronize(sim0);
  }
  TEST("running out of memory: import and export fail cleanly, the deleter stays with its owner") {
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 64 << 10};
    dlrun_runtime *small = NULL;
    CHECK(dlrun_runtime_create(&cfg, &small) == DLRUN_OK, "%s", dlrun_last_error());
    if (!small) continue;
    dlrun_device *sd = dlrun_device_get(small, "sim", 0);
    dlrun_sharding *on_small = single(sd);
    enum { N = 32768 }; /* 128 KiB of float32 */
    float *big = calloc(2 * N, sizeof *big);
    int64_t shape[1] = {N}, two[1] = {2};
    DLTensor tensors[2] = {f32_tensor(big, 1, shape, NULL), f32_tensor(big, 1, shape, two)};
    for (int k = 0; k < 2; k++)
      for (int v = 0; v < 2; v++) {
        hand h;
        hand_init(&h, tensors[k], v);
        dlrun_import_options o = {.target = on_small, .copy = DLRUN_COPY_IF_NEEDED};
        dlrun_array *a = (dlrun_array *)&h;
        dlrun_status st = dlrun_import(small, v ? NULL : &h.legacy, v ? &h.versioned : NULL, &o, &a, NULL);
        CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED, "import %d into 64 KiB: status %d", k, (int)st);
        CHECK(a == NULL, "out set");
        if (st == DLRUN_OK) dlrun_array_release(a);
        CHECK(hand_calls(&h) == 0, "failed import called the deleter");
        /* a target of another runtime is refused too */
        o.target = on_sim0;
        CHECK(dlrun_import(small, v ? NULL : &h.legacy, v ? &h.versioned : NULL, &o, &a, NULL) ==
                  DLRUN_ERR_VALUE,
              "target of another runtime accepted");
        CHECK(hand_calls(&h) == 0, "refused import called the deleter");
      }
    dlrun_sharding *small_host = single(dlrun_host_device(small));
    dlrun_array *a = NULL;
    CHECK(dlrun_array_from_host(small_host, DLRUN_FLOAT32, 1, shape, big, N * sizeof(float),
                                &a) == DLRUN_OK,
          "%s", dlrun_last_error());
    if (a) {
      dlrun_export_options to_sim = {.has_max_version = true, .max_major = 1,
                                     .has_dl_device = true, .device_type = kDLExtDev,
                                     .device_id = 0, .copy = DLRUN_COPY_IF_NEEDED};
      dlrun_exported e;
      CHECK(dlrun_export(a, &to_sim, &e) == DLRUN_ERR_RESOURCE_EXHAUSTED, "export to 64 KiB: %s",
            dlrun_last_error());
      CHECK(!e.legacy && !e.versioned, "out set");
      CHECK(dlrun_live_exports(small) == 0, "live exports after a failed export");
      CHECK(in_use(sd) == 0, "sim memory left in use: %llu", (unsigned long long)in_use(sd));
      float back[2];
      CHECK(dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK, "source array harmed");
      dlrun_array_release(a);
    }
    free(big);
    dlrun_sharding_release(small_host);
    dlrun_sharding_release(on_small);
    dlrun_runtime_release(small);
  }
}

static dlrun_array *import_transposed(hand *h, float *colmajor) {
  static int64_t shape[2] = {3, 4}, cm[2] = {1, 3};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) colmajor[j * 3 + i] = (float)(i * 4 + j);
  hand_init(h, f32_tensor(colmajor, 2, shape, cm), true);
  dlrun_array *a = NULL;
  if (hand_import(h, 0, NULL, &a)) printf("  import: %s\n", dlrun_last_error());
  return a;
}

static void test_transposed_downstream(void) {
  TEST("a transposed import keeps its values through shard_data, device_put, assembly, export") {
    float colmajor[12], logical[12];
    for (int i = 0; i < 12; i++) logical[i] = (float)i;
    int64_t dims[2] = {3, 4};
    hand h;
    dlrun_array *a = import_transposed(&h, colmajor);
    CHECK(array_equals_f32(a, logical, 12), "import itself");
    /* copies: to a sim device, and exported copies */
    dlrun_array *b = NULL;
    CHECK(dlrun_device_put(a, on_sim0, NULL, &b) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(array_equals_f32(b, logical, 12), "device_put to sim");
    dlrun_array_release(b);
    dlrun_export_options o = versioned_opts(1);
    dlrun_exported e;
    CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(export_values_are_iota(&e.versioned->dl_tensor), "export copy=1 values");
    call_deleter(&e);
    o = versioned_opts(-1);
    CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(e.versioned->dl_tensor.strides[0] == 1 && e.versioned->dl_tensor.strides[1] == 3,
          "shared export strides (%lld, %lld)", (long long)e.versioned->dl_tensor.strides[0],
          (long long)e.versioned->dl_tensor.strides[1]);
    CHECK(export_values_are_iota(&e.versioned->dl_tensor), "shared export values");
    call_deleter(&e);
    /* shares: the same buffer seen by another array */
    dlrun_array *shard = NULL;
    CHECK(dlrun_array_shard_data(a, 0, &shard) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(array_equals_f32(shard, logical, 12),
          "dlrun_array_shard_data of a transposed import reads it as row-major");
    dlrun_array_release(shard);
    dlrun_device *hd[1] = {host};
    const char *names[1] = {"x"};
    int64_t one[1] = {1};
    dlrun_mesh *m = NULL;
    dlrun_mesh_create(hd, 1, 1, names, one, &m);
    dlrun_partition_spec spec = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
    dlrun_sharding *named = NULL;
    dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &named);
    CHECK(dlrun_device_put(a, named, NULL, &b) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(array_equals_f32(b, logical, 12),
          "device_put onto a 1-device NamedSharding of the same device (buffer shared) "
          "reads the transposed import as row-major");
    dlrun_array_release(b);
    b = NULL;
    CHECK(dlrun_array_from_single_device_arrays(named, 2, dims, &a, 1, &b) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(array_equals_f32(b, logical, 12),
          "from_single_device_arrays of a transposed import reads it as row-major");
    dlrun_array_release(b);
    dlrun_put_options donate = {.donate = true};
    b = NULL;
    CHECK(dlrun_device_put(a, on_host, &donate, &b) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(array_equals_f32(b, logical, 12),
          "device_put with donate of a transposed import reads it as row-major");
    dlrun_array_release(b);
    dlrun_array_release(a);
    dlrun_sharding_release(named);
    dlrun_mesh_release(m);
    dlrun_device_synchronize(sim0); /* the copy to sim 0 read the producer's memory */
    dlrun_device_synchronize(host);
    CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
  }
}

/* ---- round trips of every dtype ------------------------------------------ */

static int roundtrip(dlrun_sharding *where, dlrun_device *dev, dlrun_dtype dt, int ndim,
                     const int64_t *dims, bool versioned, char *why, size_t n) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dt);
  int64_t size = 1;
  for (int d = 0; d < ndim; d++) size *= dims[d];
  uint64_t packed_nbytes = 0;
  dlrun_dtype_nbytes(dt, size, &packed_nbytes); /* size * itemsize, packed: ceil(bits / 8) */
  size_t nbytes = (size_t)packed_nbytes;
  unsigned char *data = malloc(nbytes + 1), *back = malloc(nbytes + 1);
  for (size_t i = 0; i < nbytes; i++)
    data[i] = dt == DLRUN_BOOL ? (unsigned char)(i % 3 == 1) : (unsigned char)(i * 37 + 11);
  int ok = 0;
  dlrun_array *a = NULL, *b = NULL;
  dlrun_exported e = {0};
  int64_t live = dlrun_live_exports(rt);
#define FAIL(...)                      \
  do {                                 \
    snprintf(why, n, __VA_ARGS__);     \
    goto done;                         \
  } while (0)
  if (dlrun_array_from_host(where, dt, ndim, dims, data, nbytes, &a))
    FAIL("from_host: %s", dlrun_last_error());
  dlrun_export_options o = versioned_opts(-1);
  /* a legacy export of DLPack 1.1's codes and packed layout needs the caller to vouch */
  dlrun_export_options legacy_1_1 = {.legacy_knows_1_1 = true};
  dlrun_export_options *lo = info->dl_code >= 7 || info->dl_bits < 8 ? &legacy_1_1 : NULL;
  if (dlrun_export(a, versioned ? &o : lo, &e)) FAIL("export: %s", dlrun_last_error());
  if (versioned != (e.versioned != NULL)) FAIL("wrong struct kind");
  const DLTensor *t = tensor_of(&e);
  if (versioned && (e.versioned->version.major != 1 ||
                    e.versioned->flags != DLPACK_FLAG_BITMASK_READ_ONLY))
    FAIL("version/flags");
  if (t->ndim != ndim) FAIL("ndim %d", t->ndim);
  if (t->dtype.code != info->dl_code || t->dtype.bits != info->dl_bits || t->dtype.lanes != 1)
    FAIL("dtype (%u, %u, %u)", t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (ndim && (!t->shape || !t->strides)) FAIL("NULL shape/strides");
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (t->shape[d] != dims[d]) FAIL("shape[%d]", d);
    if (dims[d] > 1 && size && t->strides[d] != expect) FAIL("strides[%d]", d);
    expect *= dims[d];
  }
  if ((size == 0) != (t->data == NULL)) FAIL("data %p for size %lld", t->data, (long long)size);
  if (t->byte_offset != 0) FAIL("byte_offset");
  int want_type = dev == host ? kDLCPU : kDLExtDev, want_id = dev == host ? 0 : dlrun_device_id(dev);
  if ((int)t->device.device_type != want_type || t->device.device_id != want_id)
    FAIL("device (%d, %d)", (int)t->device.device_type, t->device.device_id);
  if (size) {
    void *got = host_copy_of(t);
    int differ = !got || memcmp(got, data, nbytes);
    free(got);
    if (differ) FAIL("exported bytes differ");
  }
  if (dlrun_import(rt, e.legacy, e.versioned, NULL, &b, NULL)) FAIL("import: %s", dlrun_last_error());
  e = (dlrun_exported){0}; /* owned by b now */
  if (dlrun_array_dtype(b) != dt || !shape_is(b, ndim, dims)) FAIL("imported dtype/shape");
  if (dlrun_array_device(b) != dev) FAIL("imported onto %s", dlrun_device_name(dlrun_array_device(b)));
  dlrun_array_release(a); /* b keeps the memory through the export */
  a = NULL;
  memset(back, 0xEE, nbytes + 1);
  if (dlrun_array_read(b, 0, nbytes, back)) FAIL("read: %s", dlrun_last_error());
  if (memcmp(back, data, nbytes) || back[nbytes] != 0xEE) FAIL("bytes differ after the round trip");
  if (dlrun_live_exports(rt) != live + 1) FAIL("live exports %lld", (long long)dlrun_live_exports(rt));
  dlrun_array_release(b);
  b = NULL;
  if (dlrun_live_exports(rt) != live) FAIL("live exports %lld after release", (long long)dlrun_live_exports(rt));
  ok = 1;
done:
#undef FAIL
  if (e.legacy || e.versioned) call_deleter(&e);
  dlrun_array_release(a);
  dlrun_array_release(b);
  free(data);
  free(back);
  return ok;
}

/* Host memory is one DLPack device, (kDLCPU, 0), for every cpu device and
 * every pinned_host memory: an export of dlrun's own comes back, with no
 * target, where it was exported from, without a copy. */
static void test_import_own_host_memory(void) {
  TEST("own exports of host memory import back into their device and memory kind") {
    dlrun_sharding *pinned1 = NULL;
    CHECK(dlrun_single_device_sharding_create(sim1, DLRUN_MEM_PINNED_HOST, &pinned1) == DLRUN_OK,
          "%s", dlrun_last_error());
    dlrun_sharding *places[] = {on_cpu1, pinned1};
    static const int64_t dims[] = {6};
    for (size_t k = 0; k < NELEM(places); k++) {
      dlrun_array *a = iota_f32(places[k], 1, dims), *b = NULL;
      dlrun_export_options o = versioned_opts(-1);
      dlrun_exported e = {0};
      CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(tensor_of(&e)->device.device_type == kDLCPU && tensor_of(&e)->device.device_id == 0,
            "place %zu exports as (%d, %d)", k, (int)tensor_of(&e)->device.device_type,
            tensor_of(&e)->device.device_id);
      dlrun_import_outcome how;
      CHECK(dlrun_import(rt, e.legacy, e.versioned, NULL, &b, &how) == DLRUN_OK, "%s",
            dlrun_last_error());
      CHECK(how == DLRUN_IMPORT_WRAPPED, "place %zu: outcome %d", k, (int)how);
      dlrun_sharding *s = dlrun_array_sharding(b);
      CHECK(dlrun_array_device(b) == dlrun_sharding_device(places[k], 0), "place %zu: device %s", k,
            dlrun_device_name(dlrun_array_device(b)));
      CHECK(dlrun_sharding_memory_kind(s) == dlrun_sharding_memory_kind(places[k]),
            "place %zu: memory kind %d", k, (int)dlrun_sharding_memory_kind(s));
      float v[6];
      CHECK(dlrun_array_read(b, 0, sizeof v, v) == DLRUN_OK && v[5] == 5.0f, "values");
      dlrun_array_release(b);
      dlrun_array_release(a);
    }
    dlrun_sharding_release(pinned1);
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
}

static void test_roundtrips(void) {
  static const int64_t shapes[][3] = {{0}, {4}, {3, 4}, {2, 3, 4}, {3, 1}, {1, 4}, {2, 1, 4},
                                      {0}, {0, 4}, {3, 0}};
  static const int ndims[] = {0, 1, 2, 3, 2, 2, 3, 1, 2, 2};
  for (int dt = 0; dt < DLRUN_DTYPE_COUNT; dt++) {
    char name[96];
    snprintf(name, sizeof name, "round trip %s: 10 shapes, cpu and sim, legacy and versioned",
             dlrun_dtype_get((dlrun_dtype)dt)->name);
    TEST(name) {
      uint64_t before = in_use(sim0);
      for (size_t s = 0; s < NELEM(ndims); s++)
        for (int w = 0; w < 2; w++)
          for (int v = 0; v < 2; v++) {
            char why[256] = "";
            int ok = roundtrip(w ? on_sim0 : on_host, w ? sim0 : host, (dlrun_dtype)dt, ndims[s],
                               shapes[s], v, why, sizeof why);
            CHECK(ok, "shape #%zu on %s, %s: %s", s, w ? "sim" : "cpu", v ? "versioned" : "legacy",
                  why);
          }
      CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
      CHECK(in_use(sim0) == before, "sim pool %llu, was %llu", (unsigned long long)in_use(sim0),
            (unsigned long long)before);
    }
  }
}

static void test_export_float8_versions(void) {
  static const char *const float8_code_names[] = {
      "kDLFloat8_e3m4",    "kDLFloat8_e4m3",   "kDLFloat8_e4m3b11fnuz", "kDLFloat8_e4m3fn",
      "kDLFloat8_e4m3fnuz", "kDLFloat8_e5m2",  "kDLFloat8_e5m2fnuz",    "kDLFloat8_e8m0fnu"};
  TEST("float8 exports to versioned consumers, labelled 1.1 even for max_version (1, 0); "
       "legacy needs the caller's word") {
    for (int dt = DLRUN_FLOAT8_E3M4; dt <= DLRUN_FLOAT8_E8M0FNU; dt++) {
      const dlrun_dtype_info *info = dlrun_dtype_get((dlrun_dtype)dt);
      static const int64_t dims[] = {3};
      unsigned char data[3] = {0x38, 0x40, 0x7E};
      dlrun_array *a = NULL;
      CHECK(dlrun_array_from_host(on_host, (dlrun_dtype)dt, 1, dims, data, 3, &a) == DLRUN_OK,
            "%s", dlrun_last_error());
      char want[512];
      dlrun_exported e = {0};
      CHECK(dlrun_export(a, NULL, &e) == DLRUN_ERR_BUFFER, "%s: legacy accepted", info->name);
      CHECK(!e.legacy && !e.versioned, "%s: out set on failure", info->name);
      snprintf(want, sizeof want,
               "%s has DLPack type code %u (%s), which DLPack 1.1 added: the consumer of a "
               "legacy DLPack tensor (no max_version) may predate it. Ask for max_version (1, 0) "
               "or later, or pass legacy_knows_1_1=true if the consumer reads DLPack 1.1's type "
               "codes.",
               info->name, (unsigned)info->dl_code, float8_code_names[dt - DLRUN_FLOAT8_E3M4]);
      CHECK(strcmp(dlrun_last_error(), want) == 0, "%s", dlrun_last_error());
      dlrun_export_options o = versioned_opts(-1);
      o.max_minor = 0; /* PyTorch's ask: it reads 1.1's codes */
      CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s: (1, 0): %s", info->name,
            dlrun_last_error());
      CHECK(e.versioned && e.versioned->version.major == 1 && e.versioned->version.minor == 1,
            "%s: (1, 0) labelled 1.1", info->name);
      if (e.versioned) e.versioned->deleter(e.versioned);
      o.max_minor = 1;
      CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s: %s", info->name, dlrun_last_error());
      CHECK(e.versioned && e.versioned->dl_tensor.dtype.code == info->dl_code &&
                e.versioned->dl_tensor.dtype.bits == 8,
            "%s: dtype", info->name);
      if (e.versioned) e.versioned->deleter(e.versioned);
      o = versioned_opts(-1);
      o.max_major = 2;
      o.max_minor = 0;
      CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s (2, 0): %s", info->name, dlrun_last_error());
      if (e.versioned) e.versioned->deleter(e.versioned);
      dlrun_export_options l = {.legacy_knows_1_1 = true, .legacy_sharing = DLRUN_LEGACY_SHARE};
      e = (dlrun_exported){0};
      CHECK(dlrun_export(a, &l, &e) == DLRUN_OK, "%s legacy: %s", info->name, dlrun_last_error());
      CHECK(e.legacy && e.legacy->dl_tensor.dtype.code == info->dl_code, "%s legacy dtype",
            info->name);
      if (e.legacy) e.legacy->deleter(e.legacy);
      dlrun_array_release(a);
    }
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
}

/* ---- export into the caller's storage ---------------------------------- */

static void test_export_into(void) {
  TEST("dlrun_export_into: the tensor in the caller's storage, as dlrun_export's") {
    for (int v = 0; v < 2; v++) {
      int64_t dims[3] = {2, 3, 4};
      dlrun_array *a = iota_f32(v ? on_sim0 : on_host, 3, dims);
      dlrun_export_options o = versioned_opts(-1);
      o.legacy_sharing = DLRUN_LEGACY_SHARE;
      dlrun_export_options legacy = {.legacy_sharing = DLRUN_LEGACY_SHARE};
      dlrun_export_options *opts = v ? &o : &legacy;
      size_t size = dlrun_export_size(3, opts);
      CHECK(size == (v ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor)) + 48,
            "dlrun_export_size(3) = %zu", size);
      CHECK(dlrun_export_size(2, opts) == size - 16 &&
                dlrun_export_size(-1, opts) == dlrun_export_size(DLRUN_MAX_NDIM, opts) &&
                dlrun_export_size(3, NULL) == dlrun_export_size(3, &legacy),
            "sizes %zu %zu %zu", dlrun_export_size(2, opts), dlrun_export_size(-1, opts),
            dlrun_export_size(DLRUN_MAX_NDIM, opts));
      uint64_t *storage = calloc(1, size);
      int64_t live = dlrun_live_exports(rt);
      dlrun_exported e;
      CHECK(dlrun_export_into(a, opts, storage, size, &e) == DLRUN_OK, "%s", dlrun_last_error());
      const char *head = e.legacy ? (const char *)e.legacy : (const char *)e.versioned;
      CHECK(head == (const char *)storage, "the tensor is not at the storage");
      const DLTensor *t = tensor_of(&e);
      CHECK((const char *)t->shape >= head && (const char *)(t->strides + 3) <= head + size,
            "shape/strides outside the storage");
      CHECK(!e.copied && t->ndim == 3 && t->shape[2] == 4 && t->strides[0] == 12,
            "copied %d ndim %d", e.copied, t->ndim);
      CHECK(export_values_are_iota(t), "values");
      CHECK(dlrun_live_exports(rt) == live + 1, "live exports %lld",
            (long long)dlrun_live_exports(rt));
      call_deleter(&e);
      CHECK(dlrun_live_exports(rt) == live, "live exports after the deleter");
      call_deleter(&e); /* the storage is still valid: a second call does nothing */
      CHECK(dlrun_live_exports(rt) == live, "a second deleter call counted again");
      free(storage);
      dlrun_array_release(a);
    }
  }
  TEST("dlrun_export_into: storage checked, nothing exported on failure") {
    int64_t dims[2] = {2, 2};
    dlrun_array *a = iota_f32(on_host, 2, dims);
    uint64_t storage[64];
    dlrun_exported e = {.copied = true};
    int64_t live = dlrun_live_exports(rt);
    CHECK(dlrun_export_into(a, NULL, NULL, sizeof storage, &e) == DLRUN_ERR_VALUE,
          "NULL storage");
    CHECK(!e.legacy && !e.versioned && !e.copied, "out not cleared");
    CHECK(dlrun_export_into(a, NULL, (char *)storage + 4, sizeof storage - 8, &e) ==
              DLRUN_ERR_VALUE,
          "misaligned storage");
    CHECK_STR_CONTAINS(dlrun_last_error(), "not 8-byte aligned");
    CHECK(dlrun_export_into(a, NULL, storage, dlrun_export_size(2, NULL) - 8, &e) ==
              DLRUN_ERR_VALUE,
          "small storage");
    dlrun_export_options v11 = versioned_opts(-1);
    CHECK(dlrun_export_into(a, &v11, storage, dlrun_export_size(2, NULL), &e) == DLRUN_ERR_VALUE,
          "storage for a legacy tensor taken for a versioned one");
    CHECK_STR_CONTAINS(dlrun_last_error(), "too small");
    CHECK(dlrun_export_into(NULL, NULL, storage, sizeof storage, &e) == DLRUN_ERR_VALUE,
          "NULL array");
    /* dlrun_export's own errors, as dlrun_export gives them. */
    dlrun_export_options low = {.has_max_version = true, .max_major = 0, .max_minor = 4};
    CHECK(dlrun_export_into(a, &low, storage, sizeof storage, &e) == DLRUN_ERR_BUFFER,
          "version below (0, 5)");
    CHECK_STR_CONTAINS(dlrun_last_error(), "does not support any version below (0, 5)");
    CHECK(dlrun_live_exports(rt) == live, "a failed export is live");
    dlrun_array_release(a);
  }
  TEST("dlrun_export_detach: the tensor moves to memory of its own, for a consumer") {
    for (int v = 0; v < 2; v++) {
      int64_t dims[2] = {3, 5};
      dlrun_array *a = iota_f32(on_host, 2, dims);
      dlrun_export_options o = versioned_opts(-1);
      o.legacy_sharing = DLRUN_LEGACY_SHARE;
      if (!v) o.has_max_version = false;
      size_t size = dlrun_export_size(2, &o);
      uint64_t *storage = malloc(size);
      int64_t live = dlrun_live_exports(rt);
      dlrun_exported e;
      CHECK(dlrun_export_into(a, &o, storage, size, &e) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_exported moved = e;
      CHECK(dlrun_export_detach(&moved) == DLRUN_OK, "%s", dlrun_last_error());
      const char *head = moved.legacy ? (const char *)moved.legacy : (const char *)moved.versioned;
      CHECK(head && head != (const char *)storage && !moved.legacy == !e.legacy, "not moved");
      const DLTensor *t = tensor_of(&moved);
      CHECK((const char *)t->shape > head && t->shape[1] == 5 && t->strides[0] == 5,
            "shape %p strides %p", (void *)t->shape, (void *)t->strides);
      if (moved.versioned)
        CHECK(moved.versioned->flags == DLPACK_FLAG_BITMASK_READ_ONLY &&
                  moved.versioned->version.major == 1,
              "flags %llu", (unsigned long long)moved.versioned->flags);
      CHECK(export_values_are_iota(t), "values");
      memset(storage, 0xA5, size); /* the storage is free now */
      free(storage);
      CHECK(dlrun_live_exports(rt) == live + 1, "live exports %lld after the move",
            (long long)dlrun_live_exports(rt));
      dlrun_exported again = moved;
      CHECK(dlrun_export_detach(&again) == DLRUN_OK && again.legacy == moved.legacy &&
                again.versioned == moved.versioned,
            "a tensor in memory of its own moved again");
      /* dlrun's import recognises it as its own export (imports of it wrap). */
      dlrun_array *b = NULL;
      dlrun_import_outcome how;
      CHECK(dlrun_import(rt, moved.legacy, moved.versioned, NULL, &b, &how) == DLRUN_OK &&
                how == DLRUN_IMPORT_WRAPPED,
            "%s", dlrun_last_error());
      float want[15];
      for (int i = 0; i < 15; i++) want[i] = (float)i;
      CHECK(array_equals_f32(b, want, 15), "imported values");
      dlrun_array_release(b); /* calls the moved tensor's deleter */
      CHECK(dlrun_live_exports(rt) == live, "live exports %lld after the deleter",
            (long long)dlrun_live_exports(rt));
      dlrun_array_release(a);
    }
  }
  TEST("dlrun_export_detach: refuses what is not a live export of dlrun") {
    int64_t dims[1] = {4};
    dlrun_array *a = iota_f32(on_host, 1, dims);
    dlrun_export_options share = {.legacy_sharing = DLRUN_LEGACY_SHARE};
    size_t size = dlrun_export_size(1, &share);
    uint64_t *storage = malloc(size);
    dlrun_exported e;
    CHECK(dlrun_export_into(a, &share, storage, size, &e) == DLRUN_OK, "%s", dlrun_last_error());
    call_deleter(&e);
    dlrun_exported spent = e;
    CHECK(dlrun_export_detach(&spent) == DLRUN_ERR_VALUE && spent.legacy == e.legacy,
          "a spent export moved");
    CHECK_STR_CONTAINS(dlrun_last_error(), "not a live export of dlrun");
    free(storage);
    float data[4] = {0};
    int64_t shape[1] = {4};
    hand h;
    hand_init(&h, f32_tensor(data, 1, shape, NULL), false);
    dlrun_exported foreign = {.legacy = &h.legacy};
    CHECK(dlrun_export_detach(&foreign) == DLRUN_ERR_VALUE && foreign.legacy == &h.legacy,
          "another producer's tensor moved");
    CHECK(hand_calls(&h) == 0, "its deleter was called");
    dlrun_exported none = {0};
    CHECK(dlrun_export_detach(&none) == DLRUN_ERR_VALUE, "no tensor");
    CHECK(dlrun_export_detach(NULL) == DLRUN_ERR_VALUE, "NULL");
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
    dlrun_array_release(a);
  }
}

/* ---- DLPack 1.2: strides --------------------------------------------------- */

/* 1 when t's strides are set (for ndim 0 too: dlrun's choice, docs/dlpack.md)
 * and equal want[0..ndim). */
static int strides_are(const DLTensor *t, const int64_t *want) {
  if (!t || !t->strides || !t->shape) return 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->strides[d] != want[d]) return 0;
  return 1;
}

static void test_export_strides_1_2(void) {
  TEST("DLPack 1.2: every export path sets strides (ndim 0 to 3, legacy and versioned)") {
    int64_t dims[3] = {2, 3, 4}, rm[3][3] = {{0}, {1}, {4, 1}}, rm3[3] = {12, 4, 1};
    for (int ndim = 0; ndim <= 3; ndim++) {
      const int64_t *want = ndim == 3 ? rm3 : rm[ndim];
      const int64_t *shape = ndim == 3 ? dims : dims + 3 - ndim;
      dlrun_array *c = iota_f32(on_host, ndim, shape), *s = iota_f32(on_sim0, ndim, shape);
      struct {
        dlrun_array *a;
        dlrun_export_options o;
        const char *what;
      } paths[] = {
          {c, {0}, "legacy (a protecting copy)"},
          {c, {.legacy_sharing = DLRUN_LEGACY_SHARE}, "legacy shared"},
          {s, {.copy = DLRUN_COPY_ALWAYS}, "legacy copy=1"},
          {c, {.has_max_version = true, .max_major = 1, .max_minor = 2}, "versioned shared"},
          {c, {.has_max_version = true, .max_major = 1, .max_minor = 0}, "versioned (1, 0)"},
          {s, {.has_max_version = true, .max_major = 1, .max_minor = 2,
               .copy = DLRUN_COPY_ALWAYS}, "versioned copy=1"},
          {s, {.has_max_version = true, .max_major = 1, .max_minor = 2, .has_dl_device = true,
               .device_type = kDLCPU}, "versioned, moved to the host"},
          {c, {.has_max_version = true, .max_major = 1, .max_minor = 2, .has_dl_device = true,
               .device_type = kDLExtDev, .device_id = 1}, "versioned, moved to a sim device"},
          {s, {.has_max_version = true, .max_major = 1, .max_minor = 2, .has_stream = true,
               .stream = -1}, "versioned, stream -1"},
      };
      for (size_t i = 0; i < NELEM(paths); i++) {
        dlrun_exported e;
        dlrun_status st = dlrun_export(paths[i].a, &paths[i].o, &e);
        CHECK(st == DLRUN_OK, "ndim %d, %s: %s", ndim, paths[i].what, dlrun_last_error());
        if (st) continue;
        CHECK(strides_are(tensor_of(&e), want), "ndim %d, %s: strides %p", ndim, paths[i].what,
              (void *)tensor_of(&e)->strides);
        call_deleter(&e);
        /* The same through the caller's storage, then moved out for a consumer. */
        _Alignas(8) char storage[512];
        st = dlrun_export_into(paths[i].a, &paths[i].o, storage, sizeof storage, &e);
        CHECK(st == DLRUN_OK, "ndim %d, %s (into): %s", ndim, paths[i].what, dlrun_last_error());
        if (st) continue;
        CHECK(strides_are(tensor_of(&e), want), "ndim %d, %s (into): strides", ndim,
              paths[i].what);
        CHECK(dlrun_export_detach(&e) == DLRUN_OK, "detach: %s", dlrun_last_error());
        CHECK(strides_are(tensor_of(&e), want) &&
                  ((const char *)tensor_of(&e)->strides < storage ||
                   (const char *)tensor_of(&e)->strides >= storage + sizeof storage),
              "ndim %d, %s (detached): strides not moved with the tensor", ndim, paths[i].what);
        call_deleter(&e);
      }
      dlrun_array_release(c);
      dlrun_array_release(s);
    }
    /* A transposed import (its buffer keeps column-major strides) and a
     * zero-size array export their strides too. */
    float buf[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[2] = {2, 3}, col[2] = {1, 2};
    hand h;
    hand_init(&h, f32_tensor(buf, 2, shape, col), false);
    dlrun_array *t = NULL;
    CHECK(hand_import(&h, 0, NULL, &t) == DLRUN_OK, "transposed import: %s", dlrun_last_error());
    dlrun_export_options shared = {.has_max_version = true, .max_major = 1, .max_minor = 2};
    dlrun_exported e;
    if (t && dlrun_export(t, &shared, &e) == DLRUN_OK) {
      CHECK(strides_are(tensor_of(&e), col), "transposed re-export: strides");
      call_deleter(&e);
    }
    dlrun_array_release(t);
    int64_t empty[2] = {0, 5}, empty_rm[2] = {5, 1};
    dlrun_array *z = iota_f32(on_sim0, 2, empty);
    for (int v = 0; v < 2 && z; v++) {
      CHECK(dlrun_export(z, v ? &shared : NULL, &e) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(tensor_of(&e)->data == NULL && strides_are(tensor_of(&e), empty_rm),
            "zero-size export: strides");
      call_deleter(&e);
    }
    dlrun_array_release(z);
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
}

/* ---- the device's kept SingleDeviceSharding --------------------------- */

/* The array keeps the tensor (its deleter runs at the array's release). */
typedef struct race {
  dlrun_runtime *rt;
  float *buf;
  int64_t shape[1];
  DLManagedTensor m;
  dlrun_array *out;
} race;

static void *import_in_thread(void *p) {
  race *r = p;
  r->shape[0] = 4;
  r->m = (DLManagedTensor){.dl_tensor = f32_tensor(r->buf, 1, r->shape, NULL)};
  dlrun_import_options o = {.copy = DLRUN_COPY_IF_NEEDED};
  if (dlrun_import(r->rt, &r->m, NULL, &o, &r->out, NULL)) r->out = NULL;
  return NULL;
}

/* A runtime of one cpu device whose devices no import has used yet. */
static dlrun_runtime *fresh_cpu_runtime(void) {
  dlrun_config cfg = {.devices = "cpu:1", .device_memory = 1 << 20};
  dlrun_runtime *own = NULL;
  CHECK(dlrun_runtime_create(&cfg, &own) == DLRUN_OK, "%s", dlrun_last_error());
  return own;
}

static void test_import_kept_sharding(void) {
  TEST("imports share their device's kept sharding; it outlives the runtime's release") {
    dlrun_runtime *own = fresh_cpu_runtime();
    if (!own) break;
    float buf[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    dlrun_import_options o = {.copy = DLRUN_COPY_IF_NEEDED};
    dlrun_array *a[2] = {NULL, NULL};
    DLManagedTensor ms[3]; /* the arrays keep them */
    for (int i = 0; i < 2; i++) {
      ms[i] = (DLManagedTensor){.dl_tensor = f32_tensor(buf, 1, shape, NULL)};
      CHECK(dlrun_import(own, &ms[i], NULL, &o, &a[i], NULL) == DLRUN_OK, "%s",
            dlrun_last_error());
    }
    dlrun_sharding *s = a[0] ? dlrun_array_sharding(a[0]) : NULL;
    CHECK(s && a[1] && dlrun_array_sharding(a[1]) == s, "two imports, two shardings");
    CHECK(s && dlrun_sharding_device_count(s) == 1 &&
              dlrun_sharding_device(s, 0) == dlrun_host_device(own) &&
              dlrun_sharding_memory_kind(s) == DLRUN_MEM_DEVICE && !dlrun_sharding_is_named(s),
          "not the host device's SingleDeviceSharding");
    /* An import after the first makes three allocations: the array, its
     * buffer table and the buffer (it made a mesh and a sharding too). */
    dlrun_debug_fail_alloc(DLRUN_ALLOC_HOST, INT64_MAX);
    dlrun_array *b = NULL;
    ms[2] = (DLManagedTensor){.dl_tensor = f32_tensor(buf, 1, shape, NULL)};
    CHECK(dlrun_import(own, &ms[2], NULL, &o, &b, NULL) == DLRUN_OK, "%s", dlrun_last_error());
    int64_t allocs = dlrun_debug_alloc_count(DLRUN_ALLOC_HOST);
    dlrun_debug_fail_alloc(DLRUN_ALLOC_HOST, 0);
    CHECK(allocs == 3, "an import made %lld host allocations", (long long)allocs);
    CHECK(b && dlrun_array_sharding(b) == s, "a third sharding");
    dlrun_array_release(b);
    /* References to the sharding and its mesh hold the runtime: both stay
     * usable after the arrays and the runtime are released. */
    dlrun_sharding_retain(s);
    dlrun_mesh *mesh = s ? dlrun_sharding_mesh(s) : NULL;
    dlrun_mesh_retain(mesh);
    dlrun_array_release(a[0]);
    dlrun_array_release(a[1]);
    dlrun_runtime_release(own);
    dlrun_array *c = NULL;
    int64_t two[1] = {2};
    CHECK(s && dlrun_array_from_host(s, DLRUN_FLOAT32, 1, two, buf, sizeof(float) * 2, &c) ==
                   DLRUN_OK,
          "an array on the kept sharding after the runtime's release: %s", dlrun_last_error());
    CHECK(array_equals_f32(c, buf, 2), "its values");
    dlrun_array_release(c);
    dlrun_sharding_release(s);
    CHECK(mesh && dlrun_mesh_device_count(mesh) == 1 &&
              strcmp(dlrun_device_name(dlrun_mesh_device(mesh, 0)), "CpuDevice(id=0)") == 0,
          "the mesh after the sharding's release");
    dlrun_mesh_release(mesh); /* the runtime goes here (leak checkers see the rest) */
  }
  TEST("threads importing first at once make one kept sharding") {
    dlrun_runtime *own = fresh_cpu_runtime();
    if (!own) break;
    float buf[4] = {1, 2, 3, 4};
    race r[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
      r[i] = (race){.rt = own, .buf = buf};
      pthread_create(&t[i], NULL, import_in_thread, &r[i]);
    }
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 8; i++) {
      CHECK(r[i].out && dlrun_array_sharding(r[i].out) == dlrun_array_sharding(r[0].out),
            "thread %d: %s", i, r[i].out ? "another sharding" : "import failed");
      CHECK(array_equals_f32(r[i].out, buf, 4), "thread %d: values", i);
    }
    dlrun_runtime_release(own);
    for (int i = 0; i < 8; i++) dlrun_array_release(r[i].out);
  }
}

static void test_import_null_strides_1_2(void) {
  TEST("DLPack 1.2: NULL strides still import as row-major, legacy and versioned (1, 0) to (1, 3)") {
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    int64_t shape[2] = {3, 4};
    uint32_t minors[] = {0, 1, 2, 3};
    for (size_t k = 0; k <= NELEM(minors); k++) {
      bool versioned = k < NELEM(minors);
      hand h;
      hand_init(&h, f32_tensor(buf, 2, shape, NULL), versioned);
      if (versioned) h.versioned.version.minor = minors[k];
      dlrun_array *a = NULL;
      CHECK(hand_import(&h, 0, NULL, &a) == DLRUN_OK, "%s (1, %u): %s",
            versioned ? "versioned" : "legacy", versioned ? minors[k] : 0, dlrun_last_error());
      CHECK(shape_is(a, 2, shape) && array_equals_f32(a, buf, 12),
            "NULL strides not read as row-major (minor %u)", versioned ? minors[k] : 0);
      CHECK(dlrun_array_import_outcome(a) == DLRUN_IMPORT_WRAPPED, "row-major: not wrapped");
      dlrun_array_release(a);
      CHECK(hand_calls(&h) == 1, "deleter calls %d", hand_calls(&h));
    }
  }
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--deleter-twice") == 0)
    return deleter_twice_main(strcmp(argv[2], "1") == 0);
  self_path = argv[0];
  dlrun_config cfg = {.devices = "sim:4,cpu:2", .device_memory = 1 << 24};
  if (dlrun_runtime_create(&cfg, &rt)) {
    printf("runtime: %s\n", dlrun_last_error());
    return 1;
  }
  host = dlrun_host_device(rt);
  cpu1 = dlrun_device_get(rt, "cpu", 1);
  sim0 = dlrun_device_get(rt, "sim", 0);
  sim1 = dlrun_device_get(rt, "sim", 1);
  if (!host || !cpu1 || !sim0 || !sim1) {
    printf("devices missing\n");
    return 1;
  }
  on_host = single(host);
  on_cpu1 = single(cpu1);
  on_sim0 = single(sim0);
  on_sim1 = single(sim1);

  test_export_version();
  test_export_legacy();
  test_export_shape_strides();
  test_export_zero_size_and_cpu();
  test_export_flags();
  test_export_deleter();
  test_export_deleter_twice();
  test_export_alignment();
  test_export_into();
  test_import_kinds();
  test_import_version();
  test_import_validation();
  test_import_shapes();
  test_import_strides();
  test_import_zero_size_and_unit_dims();
  test_import_dtypes_devices();
  test_import_ownership();
  test_export_errors();
  test_import_more();
  test_waits_and_exhaustion();
  test_counts();
  test_transposed_downstream();
  test_import_own_host_memory();
  test_roundtrips();
  test_export_strides_1_2();
  test_import_null_strides_1_2();
  test_import_kept_sharding();
  test_export_float8_versions();

  dlrun_sharding_release(on_host);
  dlrun_sharding_release(on_cpu1);
  dlrun_sharding_release(on_sim0);
  dlrun_sharding_release(on_sim1);
  dlrun_runtime_release(rt);
  return check_summary("dlpack");
}
