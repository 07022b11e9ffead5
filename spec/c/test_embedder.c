/* C tests of the DLPack API as a host application meets it (docs/dlpack.md):
 * all-zero options are the defaults; every import says who owns the
 * producer's tensor afterwards and whether it wrapped or copied; a second
 * deleter call through a saved pointer does nothing, even when a newer
 * export could have taken the freed address; legacy exports never let a
 * consumer write into dlrun's arrays unless asked; host memory labelled
 * kDLExtDev is refused; 0-d exports set shape and strides.
 *
 * Producer tensors are hand-built over the test's own buffers, with
 * deleters that count their calls. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dlrun/dlpack.h"
#include "dlrun/dlrun.h"

static dlrun_runtime *rt;
static dlrun_device *host, *sim0;
static dlrun_sharding *on_host, *on_sim0, *on_sim1, *on_both;

/* ---- helpers ------------------------------------------------------------ */

static dlrun_sharding *single(dlrun_device *dev) {
  dlrun_sharding *s = NULL;
  if (dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &s))
    printf("  sharding: %s\n", dlrun_last_error());
  return s;
}

/* float32 0, 1, 2, ... of n elements (1-d), or a scalar when n < 0. */
static dlrun_array *iota(dlrun_sharding *s, int64_t n) {
  float v[64];
  int64_t dims[1] = {n};
  int64_t count = n < 0 ? 1 : n;
  for (int64_t i = 0; i < count; i++) v[i] = (float)i;
  dlrun_array *a = NULL;
  if (dlrun_array_from_host(s, DLRUN_FLOAT32, n < 0 ? 0 : 1, dims, v,
                            (uint64_t)count * sizeof(float), &a))
    printf("  from_host: %s\n", dlrun_last_error());
  return a;
}

static void release(const dlrun_exported *e) {
  if (e->legacy) e->legacy->deleter(e->legacy);
  if (e->versioned) e->versioned->deleter(e->versioned);
}

static const DLTensor *tensor_of(const dlrun_exported *e) {
  return e->legacy ? &e->legacy->dl_tensor : &e->versioned->dl_tensor;
}

typedef struct hand {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  bool is_versioned;
  atomic_int calls;
} hand;

static void count_legacy(DLManagedTensor *self) {
  atomic_fetch_add((atomic_int *)self->manager_ctx, 1);
}
static void count_versioned(DLManagedTensorVersioned *self) {
  atomic_fetch_add((atomic_int *)self->manager_ctx, 1);
}

/* A float32 host tensor over data, as a legacy or a versioned struct. */
static void hand_init(hand *h, void *data, int ndim, int64_t *shape, int64_t *strides,
                      bool versioned) {
  memset(h, 0, sizeof *h);
  atomic_init(&h->calls, 0);
  h->is_versioned = versioned;
  DLTensor t = {.data = data, .device = {kDLCPU, 0}, .ndim = ndim,
                .dtype = {.code = kDLFloat, .bits = 32, .lanes = 1}, .shape = shape,
                .strides = strides};
  if (versioned) {
    h->versioned = (DLManagedTensorVersioned){.version = {1, 1}, .manager_ctx = &h->calls,
                                              .deleter = count_versioned, .dl_tensor = t};
  } else {
    h->legacy = (DLManagedTensor){.dl_tensor = t, .manager_ctx = &h->calls,
                                  .deleter = count_legacy};
  }
}

static DLTensor *hand_tensor(hand *h) {
  return h->is_versioned ? &h->versioned.dl_tensor : &h->legacy.dl_tensor;
}

static dlrun_status hand_import(dlrun_runtime *in, hand *h, const dlrun_import_options *o,
                                dlrun_array **out, dlrun_import_outcome *how) {
  return dlrun_import(in, h->is_versioned ? NULL : &h->legacy,
                      h->is_versioned ? &h->versioned : NULL, o, out, how);
}

static int calls(hand *h) { return atomic_load(&h->calls); }

static int read_f32(dlrun_array *a, float *out, int64_t n) {
  return a && dlrun_array_read(a, 0, (uint64_t)n * sizeof *out, out) == DLRUN_OK;
}

/* ---- item 1: zero options are the defaults ------------------------------ */

static void test_zero_options(void) {
  TEST("an all-zero import options struct copies a strided view, as NULL does") {
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    int64_t shape[1] = {6}, strides[1] = {2}; /* a[::2] */
    for (int v = 0; v < 2; v++)
      for (int with_null = 0; with_null < 2; with_null++) {
        hand h;
        hand_init(&h, buf, 1, shape, strides, v);
        dlrun_import_options zero = {0};
        dlrun_array *a = NULL;
        dlrun_import_outcome how;
        dlrun_status st = hand_import(rt, &h, with_null ? NULL : &zero, &a, &how);
        CHECK(st == DLRUN_OK, "%s options: %s", with_null ? "NULL" : "zero", dlrun_last_error());
        CHECK(how == DLRUN_IMPORT_COPIED && calls(&h) == 1, "outcome %d, deleter calls %d",
              (int)how, calls(&h));
        float got[6];
        CHECK(read_f32(a, got, 6) && got[0] == 0 && got[5] == 10, "values %g %g", got[0], got[5]);
        dlrun_array_release(a);
      }
  }
  TEST("an all-zero export options struct copies if needed, as NULL does") {
    dlrun_array *a = iota(on_sim0, 4);
    /* only dl_device set: the host copy it needs is made (zero copy mode is
     * "if needed", not "never") */
    dlrun_export_options to_host = {.has_dl_device = true, .device_type = kDLCPU};
    dlrun_exported e;
    CHECK(dlrun_export(a, &to_host, &e) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(e.legacy && e.copied && e.legacy->dl_tensor.device.device_type == kDLCPU,
          "a legacy host copy");
    CHECK(e.legacy && ((const float *)e.legacy->dl_tensor.data)[3] == 3, "values");
    release(&e);
    dlrun_export_options zero = {0};
    dlrun_exported z, n;
    CHECK(dlrun_export(a, &zero, &z) == DLRUN_OK && dlrun_export(a, NULL, &n) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(z.legacy && n.legacy && z.copied == n.copied, "zero and NULL options differ");
    release(&z);
    release(&n);
    dlrun_array_release(a);
    CHECK(dlrun_live_exports(rt) == 0, "live exports %lld", (long long)dlrun_live_exports(rt));
  }
  TEST("out-of-range modes are ValueErrors naming the accepted values") {
    dlrun_array *a = iota(on_host, 4);
    dlrun_exported e;
    dlrun_export_options bad_copy = {.copy = (dlrun_copy_mode)3};
    CHECK(dlrun_export(a, &bad_copy, &e) == DLRUN_ERR_VALUE && !e.legacy && !e.versioned,
          "copy 3 accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "copy must be DLRUN_COPY_IF_NEEDED (0), "
                                           "DLRUN_COPY_NEVER (1) or DLRUN_COPY_ALWAYS (2), got 3");
    dlrun_export_options bad_sharing = {.legacy_sharing = (dlrun_legacy_sharing)2};
    CHECK(dlrun_export(a, &bad_sharing, &e) == DLRUN_ERR_VALUE, "legacy_sharing 2 accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "legacy_sharing must be DLRUN_LEGACY_PROTECT (0) or "
                                           "DLRUN_LEGACY_SHARE (1), got 2");
    dlrun_array_release(a);
  }
}

/* ---- items 2 and 3: who owns the tensor, wrapped or copied --------------- */

typedef struct refusal {
  const char *what;
  dlrun_status status;
  const char *message;
  void (*spoil)(DLTensor *t, dlrun_import_options *o);
} refusal;

static int64_t big_shape[1] = {INT64_MAX / 2}, neg_shape[1] = {-1};
static void ndim_33(DLTensor *t, dlrun_import_options *o) { (void)o; t->ndim = 33; }
static void null_shape(DLTensor *t, dlrun_import_options *o) { (void)o; t->shape = NULL; }
static void negative_dim(DLTensor *t, dlrun_import_options *o) { (void)o; t->shape = neg_shape; }
static void too_big(DLTensor *t, dlrun_import_options *o) { (void)o; t->shape = big_shape; }
static void lanes_4(DLTensor *t, dlrun_import_options *o) { (void)o; t->dtype.lanes = 4; }
static void code_99(DLTensor *t, dlrun_import_options *o) { (void)o; t->dtype.code = 99; }
static void cuda(DLTensor *t, dlrun_import_options *o) { (void)o; t->device.device_type = kDLCUDA; }
static void ext_dev(DLTensor *t, dlrun_import_options *o) { (void)o; t->device.device_type = kDLExtDev; }
static void null_data(DLTensor *t, dlrun_import_options *o) { (void)o; t->data = NULL; }
static void offset_wraps(DLTensor *t, dlrun_import_options *o) { (void)o; t->byte_offset = UINT64_MAX; }
static void never_to_sim(DLTensor *t, dlrun_import_options *o) {
  (void)t;
  o->target = on_sim1;
  o->copy = DLRUN_COPY_NEVER;
}
static void never_strided(DLTensor *t, dlrun_import_options *o) {
  static int64_t two[1] = {2};
  t->shape[0] = 2;
  t->strides = two;
  o->copy = DLRUN_COPY_NEVER;
}
static void bool_16(DLTensor *t, dlrun_import_options *o) {
  (void)o;
  t->dtype = (DLDataType){.code = 6, .bits = 16, .lanes = 1};
}
static void two_devices(DLTensor *t, dlrun_import_options *o) {
  (void)t;
  o->target = on_both;
}
static void bad_mode(DLTensor *t, dlrun_import_options *o) {
  (void)t;
  o->copy = (dlrun_copy_mode)9;
}

static const refusal refusals[] = {
    {"ndim 33", DLRUN_ERR_BUFFER, "ndim 33 is out of range", ndim_33},
    {"NULL shape", DLRUN_ERR_BUFFER, "shape is NULL but ndim is 1", null_shape},
    {"negative dimension", DLRUN_ERR_BUFFER, "dimension 0 is negative", negative_dim},
    {"byte size overflow", DLRUN_ERR_BUFFER, "from_dlpack: ", too_big},
    {"lanes 4", DLRUN_ERR_BUFFER, "from_dlpack: ", lanes_4},
    {"type code 99", DLRUN_ERR_BUFFER, "code=99 (unknown to DLPack 1.3)", code_99},
    {"kDLCUDA", DLRUN_ERR_BUFFER, "unsupported DLPack device: device type 2 (kDLCUDA)", cuda},
    {"host memory as kDLExtDev", DLRUN_ERR_BUFFER,
     "dlrun imports device type 12 (kDLExtDev) only", ext_dev},
    {"NULL data", DLRUN_ERR_BUFFER, "data is NULL but the tensor has 4 elements", null_data},
    {"byte_offset wraps", DLRUN_ERR_BUFFER, "overflows the address", offset_wraps},
    {"copy never, another device", DLRUN_ERR_VALUE, "however copy=False", never_to_sim},
    {"copy never, strided", DLRUN_ERR_VALUE, "are not compact", never_strided},
    {"bool of 16 bits", DLRUN_ERR_BUFFER, "from_dlpack: ", bool_16},
    {"a two-device target", DLRUN_ERR_VALUE, "onto a singular device", two_devices},
    {"copy mode 9", DLRUN_ERR_VALUE, "copy must be DLRUN_COPY_IF_NEEDED", bad_mode},
};

static void test_ownership(void) {
  TEST("every refusal says the caller still owns the tensor (legacy and versioned)") {
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++)
      for (int v = 0; v < 2; v++) {
        float buf[4] = {1, 2, 3, 4};
        int64_t shape[1] = {4};
        hand h;
        hand_init(&h, buf, 1, shape, NULL, v);
        dlrun_import_options o = {0};
        refusals[i].spoil(hand_tensor(&h), &o);
        dlrun_array *a = (dlrun_array *)&h; /* overwritten with NULL on failure */
        dlrun_import_outcome how = DLRUN_IMPORT_COPIED;
        dlrun_status st = hand_import(rt, &h, &o, &a, &how);
        const char *kind = v ? "versioned" : "legacy";
        CHECK(st == refusals[i].status, "%s, %s: status %d", refusals[i].what, kind, (int)st);
        CHECK(how == DLRUN_IMPORT_REFUSED && calls(&h) == 0 && a == NULL,
              "%s, %s: outcome %d, deleter calls %d", refusals[i].what, kind, (int)how, calls(&h));
        CHECK(strstr(dlrun_last_error(), refusals[i].message) != NULL, "%s: message %s",
              refusals[i].what, dlrun_last_error());
      }
  }
  TEST("an unknown major version is released, and says so") {
    float buf[4] = {0};
    int64_t shape[1] = {4};
    hand h;
    hand_init(&h, buf, 1, shape, NULL, true);
    h.versioned.version.major = 2;
    dlrun_array *a = NULL;
    dlrun_import_outcome how = DLRUN_IMPORT_REFUSED;
    CHECK(hand_import(rt, &h, NULL, &a, &how) == DLRUN_ERR_BUFFER, "accepted");
    CHECK(how == DLRUN_IMPORT_RELEASED && calls(&h) == 1, "outcome %d, deleter calls %d",
          (int)how, calls(&h));
  }
  TEST("bad arguments and a failed allocation leave the tensor with the caller") {
    float buf[4] = {0};
    int64_t shape[1] = {4};
    hand h, g;
    hand_init(&h, buf, 1, shape, NULL, false);
    hand_init(&g, buf, 1, shape, NULL, true);
    dlrun_array *a = NULL;
    dlrun_import_outcome how = DLRUN_IMPORT_COPIED;
    CHECK(dlrun_import(NULL, &h.legacy, NULL, NULL, &a, &how) == DLRUN_ERR_VALUE &&
              how == DLRUN_IMPORT_REFUSED,
          "no runtime: outcome %d", (int)how);
    how = DLRUN_IMPORT_COPIED;
    CHECK(dlrun_import(rt, &h.legacy, &g.versioned, NULL, &a, &how) == DLRUN_ERR_VALUE &&
              how == DLRUN_IMPORT_REFUSED,
          "both tensors: outcome %d", (int)how);
    how = DLRUN_IMPORT_COPIED;
    dlrun_import_options always = {.copy = DLRUN_COPY_ALWAYS};
    dlrun_debug_fail_alloc(DLRUN_ALLOC_POOL, 1);
    dlrun_status st = hand_import(rt, &h, &always, &a, &how);
    dlrun_debug_fail_alloc(DLRUN_ALLOC_POOL, 0);
    CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED && how == DLRUN_IMPORT_REFUSED && !a,
          "out of memory: status %d outcome %d", (int)st, (int)how);
    CHECK(calls(&h) == 0 && calls(&g) == 0, "deleter calls %d %d", calls(&h), calls(&g));
    CHECK(hand_import(rt, &h, NULL, &a, NULL) == DLRUN_OK, "NULL outcome: %s",
          dlrun_last_error());
    dlrun_array_release(a);
    CHECK(calls(&h) == 1, "deleter calls %d", calls(&h));
  }
  TEST("the import and the array say whether it wrapped or copied") {
    float buf[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[1] = {6};
    for (int v = 0; v < 2; v++) {
      hand h;
      hand_init(&h, buf, 1, shape, NULL, v);
      dlrun_array *a = NULL;
      dlrun_import_outcome how;
      CHECK(hand_import(rt, &h, NULL, &a, &how) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(how == DLRUN_IMPORT_WRAPPED && dlrun_array_import_outcome(a) == DLRUN_IMPORT_WRAPPED,
            "outcome %d, array %d", (int)how, (int)dlrun_array_import_outcome(a));
      CHECK(calls(&h) == 0, "a wrapped tensor was released");
      /* arrays made from it are dlrun's own */
      dlrun_array *shard = NULL;
      CHECK(dlrun_array_shard_data(a, 0, &shard) == DLRUN_OK &&
                dlrun_array_import_outcome(shard) == DLRUN_IMPORT_REFUSED,
            "shard_data says %d", (int)dlrun_array_import_outcome(shard));
      dlrun_array_release(shard);
      dlrun_array_release(a);
      CHECK(calls(&h) == 1, "deleter calls %d after release", calls(&h));
      hand_init(&h, buf, 1, shape, NULL, v);
      dlrun_import_options to_sim = {.target = on_sim0};
      CHECK(hand_import(rt, &h, &to_sim, &a, &how) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(how == DLRUN_IMPORT_COPIED && dlrun_array_import_outcome(a) == DLRUN_IMPORT_COPIED &&
                calls(&h) == 1,
            "outcome %d, deleter calls %d", (int)how, calls(&h));
      dlrun_array_release(a);
    }
    dlrun_array *made = iota(on_host, 2);
    CHECK(dlrun_array_import_outcome(made) == DLRUN_IMPORT_REFUSED &&
              dlrun_array_import_outcome(NULL) == DLRUN_IMPORT_REFUSED,
          "a made array claims an import");
    dlrun_array_release(made);
  }
}

/* ---- item 4: a second deleter call -------------------------------------- */

static void test_second_call(void) {
  TEST("a second call through a saved deleter leaves a newer export alone") {
    for (int v = 0; v < 2; v++) {
      dlrun_array *a = iota(on_host, 8);
      dlrun_export_options o = {.has_max_version = v, .max_major = 1};
      dlrun_exported first, newer;
      CHECK(dlrun_export(a, &o, &first) == DLRUN_OK, "%s", dlrun_last_error());
      void (*dl)(DLManagedTensor *) = first.legacy ? first.legacy->deleter : NULL;
      void (*dv)(DLManagedTensorVersioned *) = first.versioned ? first.versioned->deleter : NULL;
      void *was = first.legacy ? (void *)first.legacy : (void *)first.versioned;
      release(&first);
      /* the same size again: malloc would hand back the freed block */
      CHECK(dlrun_export(a, &o, &newer) == DLRUN_OK, "%s", dlrun_last_error());
      void *now = newer.legacy ? (void *)newer.legacy : (void *)newer.versioned;
      CHECK(now != was, "the newer export took the released address");
      if (dl) dl((DLManagedTensor *)was);
      if (dv) dv((DLManagedTensorVersioned *)was);
      CHECK(dlrun_live_exports(rt) == 1, "the second call released the newer export (live %lld)",
            (long long)dlrun_live_exports(rt));
      release(&newer);
      CHECK(dlrun_live_exports(rt) == 0, "live %lld", (long long)dlrun_live_exports(rt));
      dlrun_array_release(a);
    }
  }
  TEST("released addresses stay out of use for DLRUN_EXPORT_REUSE_DELAY releases") {
    enum { N = 64 };
    dlrun_array *a = iota(on_host, 8);
    void *seen[N];
    for (int i = 0; i < N; i++) {
      dlrun_exported e;
      if (dlrun_export(a, NULL, &e)) break;
      seen[i] = e.legacy;
      release(&e);
      for (int j = 0; j < i; j++)
        CHECK(seen[j] != seen[i], "export %d reused export %d's address", i, j);
    }
    dlrun_array_release(a);
  }
}

/* ---- item 5: legacy exports and writes ---------------------------------- */

static void test_legacy_writes(void) {
  TEST("a consumer writing a legacy export does not change dlrun's arrays") {
    dlrun_array *a = iota(on_host, 4), *alias = NULL;
    CHECK(dlrun_array_shard_data(a, 0, &alias) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_exported e;
    CHECK(dlrun_export(a, NULL, &e) == DLRUN_OK && e.legacy, "%s", dlrun_last_error());
    CHECK(e.copied, "the legacy export shares dlrun's memory by default");
    ((float *)e.legacy->dl_tensor.data)[0] = 99; /* what torch did */
    float got[4];
    CHECK(read_f32(a, got, 4) && got[0] == 0, "the array changed: %g", got[0]);
    CHECK(read_f32(alias, got, 4) && got[0] == 0, "an array sharing it changed: %g", got[0]);
    release(&e);
    /* asked for: shared, as JAX does */
    dlrun_export_options share = {.legacy_sharing = DLRUN_LEGACY_SHARE};
    dlrun_exported s, v;
    CHECK(dlrun_export(a, &share, &s) == DLRUN_OK && s.legacy && !s.copied, "%s",
          dlrun_last_error());
    dlrun_export_options versioned = {.has_max_version = true, .max_major = 1};
    CHECK(dlrun_export(a, &versioned, &v) == DLRUN_OK && v.versioned && !v.copied &&
              (v.versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY) &&
              v.versioned->dl_tensor.data == s.legacy->dl_tensor.data,
          "a versioned export shares, READ_ONLY");
    release(&s);
    release(&v);
    /* copy never: the copy is needed, so it is refused, naming the ways out */
    dlrun_export_options never = {.copy = DLRUN_COPY_NEVER};
    CHECK(dlrun_export(a, &never, &e) == DLRUN_ERR_VALUE && !e.legacy, "copy never accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "a legacy DLPack tensor cannot be marked read-only");
    CHECK_STR_CONTAINS(dlrun_last_error(), "legacy_sharing=share");
    never.legacy_sharing = DLRUN_LEGACY_SHARE;
    CHECK(dlrun_export(a, &never, &e) == DLRUN_OK && !e.copied, "%s", dlrun_last_error());
    release(&e);
    /* nothing to protect in an empty array */
    dlrun_array *empty = iota(on_host, 0);
    CHECK(dlrun_export(empty, NULL, &e) == DLRUN_OK && !e.copied && !e.legacy->dl_tensor.data,
          "zero-size legacy export");
    release(&e);
    dlrun_array_release(empty);
    dlrun_array_release(alias);
    dlrun_array_release(a);
  }
}

/* ---- item 6: kDLExtDev memory that is not dlrun's ----------------------- */

static void test_foreign_ext_dev(void) {
  TEST("kDLExtDev tensors outside dlrun's pools are refused, even empty ones") {
    float buf[4] = {0};
    int64_t empty[1] = {0}, four[1] = {4};
    for (int v = 0; v < 2; v++) {
      hand h;
      hand_init(&h, buf, 1, empty, NULL, v);
      hand_tensor(&h)->device = (DLDevice){kDLExtDev, 0};
      dlrun_array *a = NULL;
      dlrun_import_outcome how;
      CHECK(hand_import(rt, &h, NULL, &a, &how) == DLRUN_ERR_BUFFER && !a,
            "an empty host tensor labelled kDLExtDev was imported onto %s",
            a ? dlrun_device_name(dlrun_array_device(a)) : "nothing");
      CHECK_STR_CONTAINS(dlrun_last_error(), "names SimDevice(id=0) (device type 12 (kDLExtDev), "
                                             "device_id 0), but its 0 bytes at ");
      CHECK_STR_CONTAINS(dlrun_last_error(), "dlrun imports device type 12 (kDLExtDev) only from "
                                             "memory of its own devices");
      CHECK(how == DLRUN_IMPORT_REFUSED && calls(&h) == 0, "outcome %d calls %d", (int)how,
            calls(&h));
      dlrun_array_release(a);
      /* an empty one without an address names no memory: fine */
      hand_tensor(&h)->data = NULL;
      CHECK(hand_import(rt, &h, NULL, &a, &how) == DLRUN_OK && dlrun_array_device(a) == sim0,
            "%s", dlrun_last_error());
      dlrun_array_release(a);
    }
    /* another runtime's sim memory is not this runtime's SimDevice(id=0)'s */
    dlrun_runtime *other;
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 1 << 20};
    CHECK(dlrun_runtime_create(&cfg, &other) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_sharding *there = single(dlrun_device_get(other, "sim", 0));
    dlrun_array *x = iota(there, 4);
    dlrun_exported e;
    dlrun_export_options share = {.legacy_sharing = DLRUN_LEGACY_SHARE};
    CHECK(dlrun_export(x, &share, &e) == DLRUN_OK, "%s", dlrun_last_error());
    hand h;
    hand_init(&h, e.legacy->dl_tensor.data, 1, four, NULL, false);
    hand_tensor(&h)->device = (DLDevice){kDLExtDev, 0};
    dlrun_array *a = NULL;
    CHECK(hand_import(rt, &h, NULL, &a, NULL) == DLRUN_ERR_BUFFER && !a,
          "another runtime's memory was taken for SimDevice(id=0)'s");
    release(&e);
    dlrun_array_release(x);
    dlrun_sharding_release(there);
    dlrun_runtime_release(other);
  }
}

/* ---- item 7: 0-d exports ------------------------------------------------- */

static void test_scalar_export(void) {
  TEST("0-d exports set shape and strides (never NULL), legacy and versioned") {
    dlrun_array *s = iota(on_sim0, -1);
    for (int v = 0; v < 2; v++) {
      dlrun_export_options o = {.has_max_version = v, .max_major = 1};
      dlrun_exported e;
      CHECK(dlrun_export(s, &o, &e) == DLRUN_OK, "%s", dlrun_last_error());
      const DLTensor *t = tensor_of(&e);
      CHECK(t->ndim == 0 && t->shape != NULL && t->strides != NULL, "shape %p strides %p",
            (void *)t->shape, (void *)t->strides);
      release(&e);
    }
    dlrun_array_release(s);
  }
}

int main(void) {
  dlrun_config cfg = {.devices = "sim:2,cpu:1", .device_memory = 1 << 22};
  if (dlrun_runtime_create(&cfg, &rt)) {
    printf("runtime: %s\n", dlrun_last_error());
    return 1;
  }
  host = dlrun_host_device(rt);
  sim0 = dlrun_device_get(rt, "sim", 0);
  on_host = single(host);
  on_sim0 = single(sim0);
  on_sim1 = single(dlrun_device_get(rt, "sim", 1));
  dlrun_device *both[2] = {sim0, dlrun_device_get(rt, "sim", 1)};
  const char *axis = "x";
  int64_t two = 2;
  dlrun_mesh *mesh = NULL;
  dlrun_partition_spec replicated = {0};
  if (dlrun_mesh_create(both, 2, 1, &axis, &two, &mesh) ||
      dlrun_named_sharding_create(mesh, &replicated, DLRUN_MEM_DEVICE, &on_both)) {
    printf("mesh: %s\n", dlrun_last_error());
    return 1;
  }
  test_zero_options();
  test_ownership();
  test_second_call();
  test_legacy_writes();
  test_foreign_ext_dev();
  test_scalar_export();
  CHECK(dlrun_live_exports(rt) == 0, "exports left alive: %lld",
        (long long)dlrun_live_exports(rt));
  dlrun_sharding_release(on_host);
  dlrun_sharding_release(on_sim0);
  dlrun_sharding_release(on_sim1);
  dlrun_sharding_release(on_both);
  dlrun_mesh_release(mesh);
  dlrun_runtime_release(rt);
  return check_summary("embedder");
}
