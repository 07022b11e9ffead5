/* Packed sub-byte arrays through the C API: bytes of creation, fills and
 * arange; element counts; reshards over sim and cpu devices, and the
 * ValueError of a sharding that would split a byte; DLPack export fields
 * (no padded flag, element shape and strides) and imports of packed data,
 * with the refusals of padded tensors, odd widths and strided layouts. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dlrun/dlpack.h"
#include "dlrun/dlrun.h"

static dlrun_runtime *rt;

static dlrun_sharding *single(dlrun_device *dev) {
  dlrun_sharding *s = NULL;
  if (dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &s))
    printf("  sharding: %s\n", dlrun_last_error());
  return s;
}

/* NamedSharding over the first n devices of `platform`, spec: dim 0 split
 * over axis "x" (split0) or not at all. */
static dlrun_sharding *named(const char *platform, int n, bool split0) {
  dlrun_device *devs[8];
  for (int i = 0; i < n; i++) devs[i] = dlrun_device_get(rt, platform, (size_t)i);
  const char *names[1] = {"x"};
  int64_t sizes[1] = {n};
  dlrun_mesh *m = NULL;
  dlrun_sharding *s = NULL;
  if (dlrun_mesh_create(devs, (size_t)n, 1, names, sizes, &m))
    printf("  mesh: %s\n", dlrun_last_error());
  dlrun_partition_spec spec = {.nentries = split0 ? 1 : 0};
  spec.entries[0].naxes = 1;
  spec.entries[0].axes[0] = "x";
  if (dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &s))
    printf("  named: %s\n", dlrun_last_error());
  dlrun_mesh_release(m);
  return s;
}

static bool bytes_are(dlrun_array *a, const uint8_t *want, size_t n) {
  uint8_t got[64];
  if (dlrun_array_nbytes(a) != n || dlrun_array_read(a, 0, n, got)) return false;
  return memcmp(got, want, n) == 0;
}

typedef struct hand {
  DLManagedTensorVersioned versioned;
  atomic_int calls;
} hand;

static void hand_delete(DLManagedTensorVersioned *self) {
  atomic_fetch_add((atomic_int *)self->manager_ctx, 1);
}

static void hand_init(hand *h, void *data, uint8_t code, uint8_t bits, int ndim, int64_t *shape,
                      int64_t *strides, uint64_t flags) {
  memset(h, 0, sizeof *h);
  atomic_init(&h->calls, 0);
  h->versioned.version = (DLPackVersion){.major = 1, .minor = 1};
  h->versioned.manager_ctx = &h->calls;
  h->versioned.deleter = hand_delete;
  h->versioned.flags = flags;
  h->versioned.dl_tensor = (DLTensor){.data = data,
                                      .device = {kDLCPU, 0},
                                      .ndim = ndim,
                                      .dtype = {code, bits, 1},
                                      .shape = shape,
                                      .strides = strides};
}

int main(void) {
  dlrun_config cfg = {.devices = "sim:4,cpu:2", .device_memory = 1 << 24};
  if (dlrun_runtime_create(&cfg, &rt)) {
    printf("runtime: %s\n", dlrun_last_error());
    return 1;
  }
  dlrun_sharding *on_host = single(dlrun_host_device(rt));
  dlrun_sharding *on_sim0 = single(dlrun_device_get(rt, "sim", 0));

  TEST("int4 [1, -2, 3] is the bytes 0xE1 0x03; size 3, 2 bytes") {
    dlrun_array *a = NULL;
    uint8_t bytes[2] = {0xE1, 0x03};
    int64_t dims[1] = {3};
    CHECK(dlrun_array_from_host(on_sim0, DLRUN_INT4, 1, dims, bytes, 2, &a) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(dlrun_array_size(a) == 3 && dlrun_array_nbytes(a) == 2, "size %lld nbytes %llu",
          (long long)dlrun_array_size(a), (unsigned long long)dlrun_array_nbytes(a));
    CHECK(bytes_are(a, bytes, 2), "bytes");
    dlrun_array *b = NULL;
    CHECK(dlrun_array_from_host(on_sim0, DLRUN_INT4, 1, dims, bytes, 3, &b) == DLRUN_ERR_VALUE,
          "3 bytes for int4[3]");
    CHECK(strcmp(dlrun_last_error(), "got 3 bytes of data but the shape needs 2") == 0, "%s",
          dlrun_last_error());
    dlrun_array_release(a);
  }

  TEST("full and arange pack on the host, bit for bit on sim and cpu") {
    dlrun_sharding *places[2] = {named("sim", 4, true), named("cpu", 2, true)};
    for (int p = 0; p < 2; p++) {
      dlrun_array *a = NULL, *b = NULL;
      int64_t dims[1] = {16}; /* 4 elements, 3 bytes, a shard on sim */
      dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = 7.5};
      CHECK(dlrun_array_full(places[p], DLRUN_FLOAT6_E2M3FN, 1, dims, &v, &a) == DLRUN_OK, "%s",
            dlrun_last_error());
      /* 7.5 is 0b011111: 0x1F in every 6 bits */
      uint8_t want[12];
      for (int i = 0; i < 12; i += 3) want[i] = 0xDF, want[i + 1] = 0xF7, want[i + 2] = 0x7D;
      CHECK(bytes_are(a, want, 12), "float6 full on %d", p);
      dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 0},
                   step = {.kind = DLRUN_SCALAR_INT, .i = 1};
      CHECK(dlrun_array_arange(places[p], DLRUN_UINT4, &start, &step, 16, &b) == DLRUN_OK, "%s",
            dlrun_last_error());
      uint8_t seq[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
      CHECK(bytes_are(b, seq, 8), "uint4 arange on %d", p);
      dlrun_array_release(a);
      dlrun_array_release(b);
      b = NULL;
      CHECK(dlrun_array_arange(places[p], DLRUN_UINT4, &start, &step, 24, &b) == DLRUN_ERR_VALUE,
            "24 uint4 values from 0");
      CHECK(
          strcmp(dlrun_last_error(), "arange: value 23 does not fit in uint4 (range 0 to 15)") == 0,
          "%s", dlrun_last_error());
      dlrun_array_release(b);
    }
    dlrun_sharding_release(places[0]);
    dlrun_sharding_release(places[1]);
  }

  TEST("reshards of packed arrays move their bytes; a split byte is the rule's ValueError") {
    dlrun_sharding *split = named("sim", 2, true), *whole = named("sim", 4, false);
    dlrun_sharding *cpus = named("cpu", 2, true);
    uint8_t bytes[9];
    for (int i = 0; i < 9; i++) bytes[i] = (uint8_t)(0x10 * i + 9 - i);
    int64_t dims[2] = {6, 3};
    dlrun_array *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK(dlrun_array_from_host(on_sim0, DLRUN_INT4, 2, dims, bytes, 9, &a) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(dlrun_device_put(a, split, NULL, &b) == DLRUN_ERR_VALUE, "int4[6,3] over 2 devices");
    CHECK(strstr(dlrun_last_error(),
                 "shard [0:3, 0:3] of int4[6,3] does not start and end on a byte: packed int4 (4 "
                 "bits each) holds 12 bits in each index of dim 0, so a shard may split dim 0 "
                 "only at multiples of 2 (index 3 is not one)") != NULL,
          "%s", dlrun_last_error());
    dlrun_array_release(a);
    int64_t dims2[2] = {4, 3}; /* 2 rows of 12 bits: 3 bytes a shard */
    CHECK(dlrun_array_from_host(on_sim0, DLRUN_INT4, 2, dims2, bytes, 6, &a) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(dlrun_device_put(a, split, NULL, &b) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_array *shard = NULL;
    CHECK(dlrun_array_shard_data(b, 1, &shard) == DLRUN_OK && bytes_are(shard, bytes + 3, 3),
          "shard 1 holds bytes 3..5");
    dlrun_array_release(shard);
    CHECK(dlrun_device_put(b, cpus, NULL, &c) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_device_put(c, whole, NULL, &d) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(bytes_are(c, bytes, 6) && bytes_are(d, bytes, 6), "bytes after sim -> cpu -> replicated");
    dlrun_array_release(a);
    dlrun_array_release(b);
    dlrun_array_release(c);
    dlrun_array_release(d);
    dlrun_sharding_release(split);
    dlrun_sharding_release(whole);
    dlrun_sharding_release(cpus);
  }

  TEST("DLPack export: (Int, 4, 1), shape and strides in elements, no padded flag") {
    dlrun_sharding *places[2] = {on_host, on_sim0};
    for (int p = 0; p < 2; p++) {
      uint8_t bytes[3] = {0x21, 0x43, 0x05};
      int64_t dims[2] = {5, 1};
      dlrun_array *a = NULL, *b = NULL;
      CHECK(dlrun_array_from_host(places[p], DLRUN_UINT4, 2, dims, bytes, 3, &a) == DLRUN_OK, "%s",
            dlrun_last_error());
      dlrun_export_options o = {.has_max_version = true, .max_major = 1, .max_minor = 1};
      dlrun_exported e = {0};
      CHECK(dlrun_export(a, &o, &e) == DLRUN_OK, "%s", dlrun_last_error());
      const DLTensor *t = &e.versioned->dl_tensor;
      CHECK(t->dtype.code == 1 && t->dtype.bits == 4 && t->dtype.lanes == 1, "dtype");
      CHECK(t->ndim == 2 && t->shape[0] == 5 && t->shape[1] == 1 && t->strides[0] == 1 &&
                t->strides[1] == 1,
            "shape/strides");
      CHECK(!(e.versioned->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED), "padded flag set");
      CHECK(dlrun_import(rt, NULL, e.versioned, NULL, &b, NULL) == DLRUN_OK, "%s",
            dlrun_last_error());
      CHECK(
          dlrun_array_dtype(b) == DLRUN_UINT4 && dlrun_array_size(b) == 5 && bytes_are(b, bytes, 3),
          "round trip");
      dlrun_array_release(b);
      /* A versioned consumer asking for (1, 0) gets it labelled 1.1; a
       * legacy one only when vouched for. */
      dlrun_export_options old = {.has_max_version = true, .max_major = 1, .max_minor = 0};
      CHECK(dlrun_export(a, &old, &e) == DLRUN_OK, "max_version (1, 0): %s", dlrun_last_error());
      CHECK(e.versioned && e.versioned->version.major == 1 && e.versioned->version.minor == 1,
            "labelled 1.1");
      if (e.versioned) e.versioned->deleter(e.versioned);
      CHECK(dlrun_export(a, NULL, &e) == DLRUN_ERR_BUFFER, "legacy");
      CHECK(strcmp(dlrun_last_error(),
                   "uint4 is a packed sub-byte type (code=1 (kDLUInt), bits=4), whose layout "
                   "DLPack 1.1 set: the consumer of a legacy DLPack tensor (no max_version) may "
                   "predate it. Ask for max_version (1, 0) or later, or pass "
                   "legacy_knows_1_1=true if the consumer reads DLPack 1.1's type codes.") == 0,
            "%s", dlrun_last_error());
      dlrun_array_release(a);
    }
  }

  TEST("DLPack import: packed data in, padded, odd widths and strides refused") {
    uint8_t data[2] = {0xE1, 0x03};
    int64_t shape[1] = {3}, one_strides[1] = {1};
    hand h;
    dlrun_array *a = NULL;
    hand_init(&h, data, 0, 4, 1, shape, one_strides, 0);
    CHECK(dlrun_import(rt, NULL, &h.versioned, NULL, &a, NULL) == DLRUN_OK, "%s",
          dlrun_last_error());
    dlrun_scalar s;
    uint8_t got[2];
    CHECK(a && dlrun_array_read(a, 0, 2, got) == DLRUN_OK, "read");
    dlrun_dtype_load_at(DLRUN_INT4, got, 1, &s);
    CHECK(s.i == -2 && dlrun_array_dtype(a) == DLRUN_INT4, "element 1: %lld", (long long)s.i);
    dlrun_array_release(a);
    CHECK(atomic_load(&h.calls) == 1, "deleter once");

    hand_init(&h, data, 0, 4, 1, shape, NULL, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    CHECK(dlrun_import(rt, NULL, &h.versioned, NULL, &a, NULL) == DLRUN_ERR_BUFFER, "padded");
    CHECK(strcmp(dlrun_last_error(),
                 "from_dlpack: the int4 tensor is padded (flags=0x4: "
                 "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED), but dlrun reads sub-byte types "
                 "only packed, DLPack 1.1's default") == 0,
          "%s", dlrun_last_error());
    CHECK(atomic_load(&h.calls) == 0, "a refused tensor stays the producer's");

    static const struct {
      uint8_t code, bits;
      const char *msg;
    } odd[] = {
        {0, 3, "from_dlpack: unsupported DLPack dtype (code=0 (kDLInt), bits=3, lanes=1)"},
        {2, 6, "from_dlpack: unsupported DLPack dtype (code=2 (kDLFloat), bits=6, lanes=1)"},
        {15, 8,
         "from_dlpack: unsupported DLPack dtype (code=15 (kDLFloat6_e2m3fn), bits=8, lanes=1)"},
        {17, 6,
         "from_dlpack: unsupported DLPack dtype (code=17 (kDLFloat4_e2m1fn), bits=6, lanes=1)"},
    };
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
      hand_init(&h, data, odd[i].code, odd[i].bits, 1, shape, NULL, 0);
      CHECK(dlrun_import(rt, NULL, &h.versioned, NULL, &a, NULL) == DLRUN_ERR_BUFFER, "odd %zu", i);
      CHECK(strstr(dlrun_last_error(), odd[i].msg) == dlrun_last_error(), "%s", dlrun_last_error());
      CHECK(atomic_load(&h.calls) == 0, "odd %zu: deleter", i);
    }
    int64_t shape2[2] = {2, 2}, strides2[2] = {1, 2};
    hand_init(&h, data, 0, 4, 2, shape2, strides2, 0);
    CHECK(dlrun_import(rt, NULL, &h.versioned, NULL, &a, NULL) == DLRUN_ERR_BUFFER, "transposed");
    CHECK(strcmp(dlrun_last_error(),
                 "from_dlpack: int4 is a packed sub-byte type, which dlrun reads only row-major "
                 "and compact, but shape (2, 2) has strides (1, 2) (expected (2, 1))") == 0,
          "%s", dlrun_last_error());
    CHECK(atomic_load(&h.calls) == 0, "transposed: deleter");
  }

  dlrun_sharding_release(on_host);
  dlrun_sharding_release(on_sim0);
  CHECK(dlrun_live_exports(rt) == 0, "live exports");
  dlrun_runtime_release(rt);
  return check_summary("subbyte_arrays");
}
