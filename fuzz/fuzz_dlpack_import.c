/* libFuzzer target: dlrun_import of arbitrary DLPack tensors.
 *
 * The input bytes describe a producer's tensor: versioned or legacy struct,
 * version, ndim (may be negative or huge), device type and id, dtype code,
 * bits and lanes, byte_offset, the shape, optional strides, NULL pointers
 * where the input says so, the import options (copy -1/0/1, a target) and
 * finally the element bytes. The target builds that tensor over memory it
 * owns, allocated to cover exactly the bytes the tensor addresses (misaligned
 * starts are made with ASan-poisoned padding), so any read outside the
 * tensor is an ASan report. The deleter counts its calls and frees the
 * memory, so any use after it is an ASan report too.
 *
 * Device types reach every DLPack code up to 1.2's kDLTrn (18) and beyond;
 * dtype codes reach 1.1's float8/6/4 codes (7 to 17), with their own bits
 * and odd ones. Packed sub-byte dtypes (bits below 8) are valid only
 * compact and row-major, unpadded, and take ceil(size * bits / 8) bytes.
 * NULL strides come with any version, 1.2 and later included: row-major.
 *
 * Oracle: the target predicts independently of dlrun whether the tensor is
 * valid, whether the import must fail (bad target, copy=0 when a copy is
 * needed) and whether it copies, then checks:
 *   - the deleter runs at most once, never on failure except for an unknown
 *     major version (exactly once there, DLRUN_ERR_BUFFER);
 *   - on success: copy=1 has released the tensor at import, copy=0 has not;
 *     dtype, shape, device and memory kind are as asked; reading the whole
 *     array gives the tensor's elements in row-major order; a wrapped
 *     tensor's memory is left unchanged; the deleter has run exactly once
 *     after the array is released;
 *   - on failure: *out is NULL, there is a message that names every DLPack
 *     code it shows, the DLTensor is unchanged;
 *   - with an allocation failure injected (dlrun_debug_fail_alloc): a
 *     valid import fails with DLRUN_ERR_RESOURCE_EXHAUSTED, the deleter
 *     not called, nothing leaked.
 * Tensors that are valid but too large to back with real memory are not
 * imported (a real producer could not hand them out either). */
#include <sanitizer/asan_interface.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fuzz_common.h"

#define MAX_BACKED_BYTES (1u << 18)
#define MAX_BACKED_ELEMS (1u << 16)
#define MAX_SHAPE_ALLOC 64

/* ---- the runtimes and the import targets, made once ---- */

enum {
  T_NONE,       /* no target: the tensor's own device */
  T_SIM0,       /* SingleDeviceSharding(sim 0) */
  T_SIM1,       /* SingleDeviceSharding(sim 1) */
  T_CPU,        /* SingleDeviceSharding(cpu 0) */
  T_SIM0_PIN,   /* sim 0, pinned_host memory */
  T_CPU_PIN,    /* cpu 0, pinned_host memory */
  T_TWO_DEVICES,/* NamedSharding over sim 0 and 1: must be refused */
  T_OTHER_RT,   /* a device of another runtime: must be refused */
  T_COUNT
};

static dlrun_runtime *rt, *other_rt;
static dlrun_sharding *targets[T_COUNT];

static dlrun_sharding *single(dlrun_runtime *r, const char *platform, size_t i,
                              dlrun_memory_kind kind) {
  dlrun_sharding *s = NULL;
  if (dlrun_single_device_sharding_create(dlrun_device_get(r, platform, i), kind, &s)) abort();
  return s;
}

static void init_once(void) {
  if (rt) return;
  rt = fuzz_runtime("sim:2,cpu:1");
  other_rt = fuzz_runtime("cpu:1");
  targets[T_SIM0] = single(rt, "sim", 0, DLRUN_MEM_DEVICE);
  targets[T_SIM1] = single(rt, "sim", 1, DLRUN_MEM_DEVICE);
  targets[T_CPU] = single(rt, "cpu", 0, DLRUN_MEM_DEVICE);
  targets[T_SIM0_PIN] = single(rt, "sim", 0, DLRUN_MEM_PINNED_HOST);
  targets[T_CPU_PIN] = single(rt, "cpu", 0, DLRUN_MEM_PINNED_HOST);
  targets[T_OTHER_RT] = single(other_rt, "cpu", 0, DLRUN_MEM_DEVICE);
  dlrun_device *devs[2] = {dlrun_device_get(rt, "sim", 0), dlrun_device_get(rt, "sim", 1)};
  const char *names[1] = {"x"};
  int64_t sizes[1] = {2};
  dlrun_mesh *m = NULL;
  if (dlrun_mesh_create(devs, 2, 1, names, sizes, &m)) abort();
  dlrun_partition_spec spec = {.nentries = 0};
  if (dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &targets[T_TWO_DEVICES])) abort();
  dlrun_mesh_release(m);
}

/* ---- dtypes as DLPack describes them ---- */

typedef struct dl_dtype {
  uint8_t code, bits;
  size_t size; /* bytes per element (1 for packed ones); 0: not a dtype dlrun supports */
  dlrun_dtype dtype;
} dl_dtype;

/* Fewer than 8 bits: packed (DLPack 1.1), read only compact and row-major. */
static bool packed(const dl_dtype *d) { return d->bits < 8; }

static const dl_dtype dtype_choices[] = {
    {6, 8, 1, DLRUN_BOOL},       {0, 8, 1, DLRUN_INT8},        {0, 16, 2, DLRUN_INT16},
    {0, 32, 4, DLRUN_INT32},     {0, 64, 8, DLRUN_INT64},      {1, 8, 1, DLRUN_UINT8},
    {1, 16, 2, DLRUN_UINT16},    {1, 32, 4, DLRUN_UINT32},     {1, 64, 8, DLRUN_UINT64},
    {2, 16, 2, DLRUN_FLOAT16},   {4, 16, 2, DLRUN_BFLOAT16},   {2, 32, 4, DLRUN_FLOAT32},
    {2, 64, 8, DLRUN_FLOAT64},   {5, 64, 8, DLRUN_COMPLEX64},  {5, 128, 16, DLRUN_COMPLEX128},
    /* DLPack 1.1's float8 family (codes 7 to 14) */
    {7, 8, 1, DLRUN_FLOAT8_E3M4}, {8, 8, 1, DLRUN_FLOAT8_E4M3},
    {9, 8, 1, DLRUN_FLOAT8_E4M3B11FNUZ}, {10, 8, 1, DLRUN_FLOAT8_E4M3FN},
    {11, 8, 1, DLRUN_FLOAT8_E4M3FNUZ}, {12, 8, 1, DLRUN_FLOAT8_E5M2},
    {13, 8, 1, DLRUN_FLOAT8_E5M2FNUZ}, {14, 8, 1, DLRUN_FLOAT8_E8M0FNU},
    /* packed sub-byte types */
    {0, 4, 1, DLRUN_INT4}, {1, 4, 1, DLRUN_UINT4},
    {0, 2, 1, DLRUN_INT2}, {1, 2, 1, DLRUN_UINT2},
    {15, 6, 1, DLRUN_FLOAT6_E2M3FN}, {16, 6, 1, DLRUN_FLOAT6_E3M2FN},
    {17, 4, 1, DLRUN_FLOAT4_E2M1FN},
    /* unsupported ones */
    {2, 8, 0, 0},                {6, 16, 0, 0},                {3, 64, 0, 0},
    {0, 128, 0, 0},              {5, 32, 0, 0},                {4, 32, 0, 0},
    {0, 1, 0, 0},                {0, 3, 0, 0},
    /* DLPack 1.1's codes (7 to 17) with bits no 1.1 type has, and a code
     * past 1.3's: refused, with the code named (kDLFloat4_e2m1fn, "unknown
     * to DLPack 1.3"). */
    {7, 16, 0, 0},               {8, 4, 0, 0},                 {9, 6, 0, 0},
    {10, 16, 0, 0},              {11, 7, 0, 0},                {12, 9, 0, 0},
    {13, 32, 0, 0},              {14, 1, 0, 0},                {15, 8, 0, 0},
    {16, 8, 0, 0},               {17, 8, 0, 0},                {16, 4, 0, 0},
    {17, 6, 0, 0},               {18, 8, 0, 0},                {200, 32, 0, 0},
};
#define NDTYPE_CHOICES (sizeof dtype_choices / sizeof dtype_choices[0])

/* The dtype dlrun should see for (code, bits, lanes), from the table above. */
static const dl_dtype *lookup_dtype(uint8_t code, uint8_t bits, uint16_t lanes) {
  if (lanes != 1) return NULL;
  for (size_t i = 0; i < NDTYPE_CHOICES; i++)
    if (dtype_choices[i].size && dtype_choices[i].code == code && dtype_choices[i].bits == bits)
      return &dtype_choices[i];
  return NULL;
}

/* ---- the producer: its memory and its deleter ---- */

typedef struct producer_state {
  atomic_int calls;
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
  int64_t *shape, *strides;
  unsigned char *alloc; /* the element memory (or a poisoned stand-in) */
  size_t alloc_size;
} producer_state;

static producer_state P;

static void free_producer(void) {
  free(P.shape);
  free(P.strides);
  if (P.alloc) {
    ASAN_UNPOISON_MEMORY_REGION(P.alloc, P.alloc_size);
    free(P.alloc);
  }
  free(P.legacy);
  free(P.versioned);
  P.shape = P.strides = NULL;
  P.alloc = NULL;
  P.legacy = NULL;
  P.versioned = NULL;
}

static void count_call(void *self, void *ctx) {
  FUZZ_CHECK(ctx == &P, "deleter got a tensor whose manager_ctx is %p, not the producer's", ctx);
  FUZZ_CHECK(self == (void *)P.legacy || self == (void *)P.versioned,
             "deleter called with %p, which is not the producer's tensor", self);
  int n = atomic_fetch_add(&P.calls, 1) + 1;
  FUZZ_CHECK(n == 1, "deleter called %d times", n);
  /* What a real producer does: free everything. Later use is an ASan report. */
  free_producer();
}

static void legacy_deleter(DLManagedTensor *self) { count_call(self, self->manager_ctx); }
static void versioned_deleter(DLManagedTensorVersioned *self) {
  count_call(self, self->manager_ctx);
}

/* ---- reading the tensor description ---- */

typedef struct tensor_desc {
  int mode;           /* 0 legacy, 1 versioned, 2 both pointers, 3 neither */
  bool null_deleter, null_shape, null_data, null_options;
  uint32_t major, minor;
  uint64_t flags;
  int ndim;
  int32_t device_type, device_id;
  uint8_t code, bits;
  uint16_t lanes;
  uint64_t byte_offset;
  unsigned misalign;
  int strides_mode; /* 0 none, 1 row-major, 2 permuted compact, 3 arbitrary, 4 padded */
  int64_t dims[MAX_SHAPE_ALLOC], strides[MAX_SHAPE_ALLOC];
  int nshape; /* entries allocated for shape and strides */
  int copy;
  int target;
  fuzz_fault fault;
} tensor_desc;

static int64_t read_dim(fuzz_reader *r) {
  uint8_t v = fz_u8(r);
  if (v < 0xE0) return v % 7;
  if (v < 0xF0) return v - 0xE0 + 7;     /* 7..22 */
  if (v < 0xF8) return -(int64_t)(v - 0xF0) - 1; /* -1..-8 */
  return (int64_t)fz_u64(r);
}

static int64_t read_stride(fuzz_reader *r) {
  uint8_t v = fz_u8(r);
  if (v < 0xF0) return (int64_t)(v % 25) - 8; /* -8..16 */
  return (int64_t)fz_u64(r);
}

static void read_desc(fuzz_reader *r, tensor_desc *t) {
  memset(t, 0, sizeof *t);
  uint8_t f = fz_u8(r);
  t->mode = f & 3;
  if (t->mode >= 2 && (f & 0x80)) t->mode &= 1; /* the odd modes are rarer */
  t->null_deleter = (f >> 2 & 7) == 7;
  t->null_shape = (f >> 5 & 3) == 3;
  uint8_t o = fz_u8(r);
  t->null_data = (o & 0x0F) == 0x0F;
  t->null_options = (o & 0xF0) == 0xF0;

  uint8_t v = fz_u8(r);
  t->major = v < 0xE0 ? 1 : (v < 0xFF ? v - 0xE0 : fz_u32(r)); /* 0..30 or anything */
  t->minor = fz_u8(r);
  t->flags = fz_u8(r) & 7;

  v = fz_u8(r);
  if (v < 0xC0) t->ndim = v % 8;
  else if (v < 0xE0) t->ndim = v - 0xC0 + 8; /* 8..39 */
  else if (v < 0xF0) t->ndim = -(int)(v - 0xE0) - 1;
  else t->ndim = (int32_t)fz_u32(r);

  /* The first eight as before (the seeds name them by index); then every
   * other device type up to DLPack 1.2's kDLTrn, and codes past it. */
  static const int32_t types[] = {kDLCPU,    kDLExtDev, kDLCUDAHost, kDLROCMHost, kDLCUDA,
                                  kDLCUDAManaged, DLRUN_DL_ONEAPI, 0, kDLOpenCL, kDLVulkan,
                                  kDLMetal, kDLVPI, kDLROCM, 15, 16, 17, kDLTrn, 19, 99, 5};
  v = fz_u8(r);
  t->device_type =
      v < 0xF0 ? types[v % (sizeof types / sizeof types[0])] : (int32_t)fz_u32(r);
  v = fz_u8(r);
  t->device_id = v < 0xF0 ? v % 3 : (int32_t)fz_u32(r);

  v = fz_u8(r);
  if (v < 0xF0) {
    const dl_dtype *d = &dtype_choices[v % NDTYPE_CHOICES];
    t->code = d->code;
    t->bits = d->bits;
    t->lanes = 1;
  } else {
    t->code = fz_u8(r);
    t->bits = fz_u8(r);
    t->lanes = fz_u16(r);
  }

  v = fz_u8(r);
  if (v < 0xC0) t->byte_offset = v % 64;
  else if (v < 0xF0) t->byte_offset = fz_u16(r);
  else t->byte_offset = fz_u64(r);
  t->misalign = fz_u8(r) % 16;

  t->nshape = t->ndim < 0 ? 0 : t->ndim > MAX_SHAPE_ALLOC ? MAX_SHAPE_ALLOC : t->ndim;
  for (int d = 0; d < t->nshape; d++) t->dims[d] = read_dim(r);

  t->strides_mode = fz_u8(r) % 5;
  int n = t->nshape;
  switch (t->strides_mode) {
  case 1: case 2: case 4: {
    /* Row-major over a permutation of the dimensions, each extent padded
     * in mode 4 (a strided slice), with one stride negated sometimes. */
    int order[MAX_SHAPE_ALLOC];
    for (int d = 0; d < n; d++) order[d] = d;
    if (t->strides_mode == 2)
      for (int d = n - 1; d > 0; d--) {
        int j = (int)(fz_u8(r) % (unsigned)(d + 1)), tmp = order[d];
        order[d] = order[j];
        order[j] = tmp;
      }
    int64_t s = 1;
    for (int k = n - 1; k >= 0; k--) {
      int d = order[k];
      t->strides[d] = s;
      int64_t extent = t->dims[d] < 0 ? 1 : t->dims[d];
      if (t->strides_mode == 4) {
        uint8_t pad = fz_u8(r) % 3;
        if (extent <= INT64_MAX - pad) extent += pad;
      }
      if (__builtin_mul_overflow(s, extent ? extent : 1, &s)) s = 1;
    }
    if (t->strides_mode == 4 && n > 0 && fz_bool(r)) {
      int d = (int)(fz_u8(r) % (unsigned)n);
      t->strides[d] = t->strides[d] == INT64_MIN ? 0 : -t->strides[d];
    }
    break;
  }
  case 3:
    for (int d = 0; d < n; d++) t->strides[d] = read_stride(r);
    break;
  default:
    break;
  }
  uint8_t c = fz_u8(r);
  t->copy = (int)(c % 3) - 1;
  t->target = (int)(fz_u8(r) % T_COUNT);
  t->fault = fuzz_fault_read(r);
}

/* ---- the oracle ---- */

/* Whether every DLPack code in a message is named: a number after any of
 * these marks is followed by " (kDL..." or " (unknown to DLPack 1.3)". */
static bool codes_named(const char *msg) {
  static const char *const marks[] = {"device type ", "device_type=", "DLDeviceType: ",
                                      "DLDeviceType ", "code="};
  for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++)
    for (const char *at = strstr(msg, marks[m]); at; at = strstr(at + 1, marks[m])) {
      const char *n = at + strlen(marks[m]);
      if (*n == '-') n++;
      if (*n < '0' || *n > '9') continue; /* prose, not a code */
      while (*n >= '0' && *n <= '9') n++;
      if (strncmp(n, " (kDL", 5) != 0 && strncmp(n, " (unknown to DLPack 1.3)", 24) != 0)
        return false;
    }
  return true;
}

typedef struct prediction {
  bool tensor_ok;  /* dlrun must accept the tensor itself */
  bool backed;     /* small enough to build over real memory */
  const dl_dtype *dt;
  int64_t size;            /* elements */
  int64_t lo_bytes, hi_bytes; /* addressed bytes relative to the first element */
} prediction;

/* The bytes a tensor's elements take: packed, ceil(size * bits / 8). */
static uint64_t packed_bytes(const prediction *p) {
  uint64_t n = (uint64_t)p->size, b = p->dt->bits; /* n / 8 * b cannot overflow */
  return packed(p->dt) ? n / 8 * b + (n % 8 * b + 7) / 8 : n * p->dt->size;
}

static void predict_tensor(const tensor_desc *t, prediction *p) {
  memset(p, 0, sizeof *p);
  if (t->ndim < 0 || t->ndim > DLRUN_MAX_NDIM) return;
  if (t->ndim > 0 && t->null_shape) return;
  for (int d = 0; d < t->ndim; d++)
    if (t->dims[d] < 0) return;
  p->dt = lookup_dtype(t->code, t->bits, t->lanes);
  if (!p->dt) return;
  bool zero = false, overflow = false;
  unsigned __int128 size = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->dims[d] == 0) zero = true;
    if (!overflow) {
      size *= (uint64_t)t->dims[d];
      if (size > INT64_MAX) overflow = true;
    }
  }
  if (zero) size = 0;
  else if (overflow || size * p->dt->size > INT64_MAX) return;
  bool host = t->device_type == kDLCPU || t->device_type == kDLCUDAHost ||
              t->device_type == kDLROCMHost;
  bool sim = t->device_type == kDLExtDev && (t->device_id == 0 || t->device_id == 1);
  if (!host && !sim) return;
  p->size = (int64_t)size;
  if (size == 0) {
    /* Nothing to read, but host memory labelled as a sim device's is still
     * refused: only a NULL address passes. */
    if (sim && !t->null_data) return;
    p->tensor_ok = p->backed = true;
    return;
  }
  if (t->null_data) return;
  /* The fuzzer's data is host memory: a tensor that says it is a sim
   * device's must be refused (its bytes must lie in that device's memory). */
  if (sim) return;
  if (t->byte_offset > (uint64_t)INTPTR_MAX) return;
  if (packed(p->dt)) {
    /* Packed data is read only compact and row-major (size-1 dimensions
     * may carry any stride): ceil(size * bits / 8) bytes from the first. */
    int64_t rm = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (t->strides_mode && t->dims[d] != 1 && t->strides[d] != rm) return;
      rm *= t->dims[d];
    }
    p->tensor_ok = true;
    p->hi_bytes = (int64_t)packed_bytes(p);
    p->backed = (uint64_t)p->hi_bytes <= MAX_BACKED_BYTES && size <= MAX_BACKED_ELEMS &&
                t->byte_offset <= MAX_BACKED_BYTES;
    return;
  }
  /* Whether the data pointer plus offset can overflow is decided when the
   * pointer is known (see build_tensor); the reach of the strides here. */
  unsigned __int128 lo = 0, hi = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->dims[d] == 1) continue;
    int64_t s = t->strides_mode ? t->strides[d] : 0;
    if (!t->strides_mode) { /* row-major */
      s = 1;
      for (int e = d + 1; e < t->ndim; e++) s *= t->dims[e];
    }
    unsigned __int128 mag = s < 0 ? (unsigned __int128)(-(s + 1)) + 1 : (unsigned __int128)s;
    unsigned __int128 term = mag * (uint64_t)(t->dims[d] - 1);
    if (s < 0) lo += term;
    else hi += term;
    if (lo + hi > INT64_MAX) return;
  }
  if ((lo + hi) * p->dt->size > INT64_MAX) return;
  p->tensor_ok = true;
  p->lo_bytes = -(int64_t)(lo * p->dt->size);
  p->hi_bytes = (int64_t)(hi * p->dt->size) + (int64_t)p->dt->size;
  p->backed = (uint64_t)(p->hi_bytes - p->lo_bytes) <= MAX_BACKED_BYTES &&
              size <= MAX_BACKED_ELEMS && t->byte_offset <= MAX_BACKED_BYTES;
}

/* Element strides as dlrun must interpret them (row-major when absent). */
static void effective_strides(const tensor_desc *t, int64_t *s) {
  int64_t acc = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    s[d] = t->strides_mode ? t->strides[d] : acc;
    acc *= t->dims[d] ? t->dims[d] : 1;
  }
}

/* Byte offsets (from the first element) of every element in row-major
 * order. */
static FUZZ_NO_COVERAGE void element_offsets(const tensor_desc *t, const prediction *p, int64_t *out) {
  int64_t s[DLRUN_MAX_NDIM], idx[DLRUN_MAX_NDIM] = {0};
  effective_strides(t, s);
  for (int64_t e = 0; e < p->size; e++) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * s[d];
    out[e] = off * (int64_t)p->dt->size;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->dims[d]) break;
      idx[d] = 0;
    }
  }
}

/* Compact: the elements fill [0, size) exactly once (any permutation of a
 * row-major layout, with no gaps and no negative strides). */
static FUZZ_NO_COVERAGE bool is_compact(const prediction *p, const int64_t *offs) {
  if (p->size == 0) return true;
  size_t n = (size_t)p->size;
  unsigned char *seen = calloc(n, 1);
  bool ok = true;
  for (size_t e = 0; e < n && ok; e++) {
    int64_t i = offs[e] / (int64_t)p->dt->size;
    if (i < 0 || (uint64_t)i >= n || seen[i]) ok = false;
    else seen[i] = 1;
  }
  free(seen);
  return ok;
}

static FUZZ_NO_COVERAGE void gather(unsigned char *dst, const unsigned char *first,
                                     const int64_t *offs, int64_t n, size_t esize) {
  for (int64_t e = 0; e < n; e++) memcpy(dst + e * (int64_t)esize, first + offs[e], esize);
}

static dlrun_device *source_device(const tensor_desc *t) {
  if (t->device_type == kDLExtDev) return dlrun_device_get(rt, "sim", (size_t)t->device_id);
  return dlrun_host_device(rt);
}

/* ---- one run ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init_once();
  fuzz_reader r = {data, size};
  tensor_desc t;
  read_desc(&r, &t);
  prediction p;
  predict_tensor(&t, &p);
  bool version_ok = !(t.mode == 1 && t.major != DLRUN_DLPACK_MAJOR);
  /* An unknown version is refused before anything else is read. */
  if (version_ok && p.tensor_ok && !p.backed) return 0;

  memset(&P, 0, sizeof P);
  atomic_init(&P.calls, 0);
  /* Shape and strides hold exactly ndim entries, so reading more is caught. */
  if (!t.null_shape) {
    P.shape = malloc((size_t)t.nshape * sizeof(int64_t));
    memcpy(P.shape, t.dims, (size_t)t.nshape * sizeof(int64_t));
  }
  if (t.strides_mode) {
    P.strides = malloc((size_t)t.nshape * sizeof(int64_t));
    memcpy(P.strides, t.strides, (size_t)t.nshape * sizeof(int64_t));
  }

  /* The element memory: [first + lo, first + hi) exactly, behind `misalign`
   * poisoned bytes. Tensors that must be refused get a fully poisoned
   * stand-in: dlrun must not read it. */
  unsigned char *first = NULL;
  int64_t *offs = NULL;
  unsigned char *expect = NULL;
  bool reading = version_ok && p.tensor_ok && p.size > 0;
  if (reading) {
    size_t span = (size_t)(p.hi_bytes - p.lo_bytes);
    P.alloc_size = t.misalign + span;
    P.alloc = malloc(P.alloc_size);
    first = P.alloc + t.misalign - p.lo_bytes;
    fuzz_fill(P.alloc + t.misalign, span, r.p, r.n);
    ASAN_POISON_MEMORY_REGION(P.alloc, t.misalign);
    expect = malloc(packed_bytes(&p));
    if (packed(p.dt)) {
      memcpy(expect, first, packed_bytes(&p));
    } else {
      offs = malloc((size_t)p.size * sizeof *offs);
      element_offsets(&t, &p, offs);
      gather(expect, first, offs, p.size, p.dt->size);
    }
  } else {
    P.alloc_size = 16;
    P.alloc = malloc(P.alloc_size);
    ASAN_POISON_MEMORY_REGION(P.alloc, P.alloc_size);
  }
  void *data_ptr = NULL;
  if (!t.null_data) {
    data_ptr = reading ? (void *)((uintptr_t)first - (uintptr_t)t.byte_offset) : P.alloc;
  }
  uintptr_t at;
  bool address_overflow = data_ptr && __builtin_add_overflow((uintptr_t)data_ptr,
                                                             (uintptr_t)t.byte_offset, &at);
  bool tensor_ok = p.tensor_ok && !(p.size > 0 && address_overflow);

  DLTensor dl = {
      .data = data_ptr,
      .device = {.device_type = (DLDeviceType)t.device_type, .device_id = t.device_id},
      .ndim = t.ndim,
      .dtype = {.code = t.code, .bits = t.bits, .lanes = t.lanes},
      .shape = P.shape,
      .strides = P.strides,
      .byte_offset = t.byte_offset,
  };
  if (t.mode == 0 || t.mode == 2) {
    P.legacy = calloc(1, sizeof *P.legacy);
    P.legacy->dl_tensor = dl;
    P.legacy->manager_ctx = &P;
    P.legacy->deleter = t.null_deleter ? NULL : legacy_deleter;
  }
  if (t.mode == 1 || t.mode == 2) {
    P.versioned = calloc(1, sizeof *P.versioned);
    P.versioned->version = (DLPackVersion){t.major, t.minor};
    P.versioned->flags = t.flags;
    P.versioned->dl_tensor = dl;
    P.versioned->manager_ctx = &P;
    P.versioned->deleter = t.null_deleter ? NULL : versioned_deleter;
  }
  DLManagedTensor *legacy = P.legacy;
  DLManagedTensorVersioned *versioned = P.versioned;

  /* t.copy is the array API's -1 (None), 0 (False), 1 (True). */
  int copy = t.null_options ? -1 : t.copy;
  dlrun_import_options opts = {.target = t.null_options ? NULL : targets[t.target],
                               .copy = copy < 0   ? DLRUN_COPY_IF_NEEDED
                                       : copy ? DLRUN_COPY_ALWAYS
                                              : DLRUN_COPY_NEVER};

  /* What must happen. */
  bool one_tensor = t.mode == 0 || t.mode == 1;
  /* Packed data padded to whole bytes per element is refused (dlrun reads
   * DLPack 1.1's default, packed). */
  bool padded = t.mode == 1 && p.dt && packed(p.dt) &&
                (t.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  bool must_fail = !one_tensor || !tensor_ok || padded || opts.target == targets[T_TWO_DEVICES] ||
                   opts.target == targets[T_OTHER_RT];
  bool copied = false;
  dlrun_device *dest = NULL;
  dlrun_memory_kind dest_kind = DLRUN_MEM_DEVICE;
  if (one_tensor && version_ok && !must_fail) {
    dlrun_device *src = source_device(&t);
    dest = opts.target ? dlrun_sharding_device(opts.target, 0) : src;
    dest_kind = opts.target ? dlrun_sharding_memory_kind(opts.target) : DLRUN_MEM_DEVICE;
    bool host_src = src == dlrun_host_device(rt);
    bool same_place = host_src ? dest == dlrun_host_device(rt) || dest_kind == DLRUN_MEM_PINNED_HOST
                               : dest == src && dest_kind == DLRUN_MEM_DEVICE;
    bool compact = reading && !packed(p.dt) ? is_compact(&p, offs) : true;
    bool aligned = !reading || (uintptr_t)first % p.dt->size == 0;
    bool needs_copy = !same_place || !compact || !aligned;
    if (copy == 0 && needs_copy) must_fail = true;
    copied = copy == 1 || needs_copy;
  }
  DLTensor before = dl;

  dlrun_array *a = (dlrun_array *)(uintptr_t)1;
  fuzz_fault_arm(&t.fault);
  dlrun_import_outcome how = (dlrun_import_outcome)99;
  dlrun_status st = dlrun_import(rt, legacy, versioned, t.null_options ? NULL : &opts, &a, &how);
  bool injected = fuzz_fault_hit(&t.fault);
  fuzz_fault_disarm(&t.fault);
  int calls = atomic_load(&P.calls);
  bool has_deleter = !t.null_deleter;

  if (injected && one_tensor && version_ok && !must_fail) {
    /* An allocation failed: a clean ResourceExhausted, the tensor still
     * the producer's. */
    FUZZ_CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED,
               "import with a failed allocation returned %d, not ResourceExhausted", (int)st);
    FUZZ_CHECK(calls == 0, "import with a failed allocation called the deleter %d times", calls);
  } else if (one_tensor && !version_ok) {
    FUZZ_CHECK(st == DLRUN_ERR_BUFFER, "unknown major version %u: status %d, not BufferError",
               t.major, (int)st);
    FUZZ_CHECK(calls == (has_deleter ? 1 : 0), "unknown version: deleter called %d times", calls);
  } else if (must_fail) {
    FUZZ_CHECK(st != DLRUN_OK, "import accepted a tensor it must refuse (mode %d, ndim %d)",
               t.mode, t.ndim);
    FUZZ_CHECK(calls == 0, "failed import called the deleter %d times", calls);
  } else {
    FUZZ_CHECK(st == DLRUN_OK, "import refused a valid tensor: status %d: %s", (int)st,
               dlrun_last_error());
  }
  /* The outcome says who owns the tensor now, whatever happened. */
  if (st)
    FUZZ_CHECK(how == (one_tensor && !version_ok ? DLRUN_IMPORT_RELEASED : DLRUN_IMPORT_REFUSED),
               "failed import: outcome %d (deleter calls %d)", (int)how, calls);
  else
    FUZZ_CHECK(how == (copied ? DLRUN_IMPORT_COPIED : DLRUN_IMPORT_WRAPPED) &&
                   dlrun_array_import_outcome(a) == how,
               "import: outcome %d, array says %d, copied %d", (int)how,
               (int)dlrun_array_import_outcome(a), copied);
  if (st) {
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(codes_named(dlrun_last_error()), "a DLPack code shown bare: %s",
               dlrun_last_error());
    FUZZ_CHECK(a == NULL, "failed import left *out set");
    if (calls == 0) {
      const DLTensor *now = legacy ? &legacy->dl_tensor : versioned ? &versioned->dl_tensor : NULL;
      if (now)
        FUZZ_CHECK(memcmp(now, &before, sizeof before) == 0, "failed import changed the DLTensor");
      free_producer();
    }
    free(offs);
    free(expect);
    return 0;
  }

  /* Success. */
  if (has_deleter) {
    if (copy == 1)
      FUZZ_CHECK(calls == 1, "copy=1 import kept the tensor (deleter calls %d)", calls);
    if (copy == 0)
      FUZZ_CHECK(calls == 0, "copy=0 import released the tensor it wraps");
    FUZZ_CHECK(calls == (copied ? 1 : 0), "deleter calls %d after import, expected %d", calls,
               copied ? 1 : 0);
  }
  FUZZ_CHECK(a != NULL, "import succeeded without an array");
  FUZZ_CHECK(dlrun_array_dtype(a) == p.dt->dtype, "dtype %d, expected %d", (int)dlrun_array_dtype(a),
             (int)p.dt->dtype);
  FUZZ_CHECK(dlrun_array_ndim(a) == t.ndim, "ndim %d, expected %d", dlrun_array_ndim(a), t.ndim);
  for (int d = 0; d < t.ndim; d++)
    FUZZ_CHECK(dlrun_array_shape(a)[d] == t.dims[d], "dimension %d differs", d);
  FUZZ_CHECK(dlrun_array_size(a) == p.size, "size %lld, expected %lld",
             (long long)dlrun_array_size(a), (long long)p.size);
  FUZZ_CHECK(dlrun_array_device(a) == dest, "array on %s, expected %s",
             dlrun_device_name(dlrun_array_device(a)), dlrun_device_name(dest));
  FUZZ_CHECK(dlrun_sharding_memory_kind(dlrun_array_sharding(a)) == dest_kind, "memory kind differs");
  uint64_t nbytes = packed_bytes(&p);
  FUZZ_CHECK(dlrun_array_nbytes(a) == nbytes, "nbytes differs");
  unsigned char *got = malloc(nbytes ? nbytes : 1);
  st = dlrun_array_read(a, 0, nbytes, got);
  FUZZ_CHECK(st == DLRUN_OK, "reading the imported array failed");
  if (nbytes) FUZZ_CHECK(memcmp(got, expect, nbytes) == 0, "imported data differs from the tensor's");
  free(got);
  if (reading && atomic_load(&P.calls) == 0 && P.alloc) {
    /* Still the producer's memory: nothing may have written to it. */
    unsigned char *again = malloc(nbytes ? nbytes : 1);
    if (packed(p.dt)) memcpy(again, first, nbytes);
    else gather(again, first, offs, p.size, p.dt->size);
    FUZZ_CHECK(memcmp(again, expect, nbytes) == 0,
               "import or read wrote into the producer's memory");
    free(again);
  }
  dlrun_array_release(a);
  for (size_t i = 0; i < dlrun_device_count(rt, "sim"); i++)
    dlrun_device_synchronize(dlrun_device_get(rt, "sim", i));
  dlrun_device_synchronize(dlrun_host_device(rt));
  calls = atomic_load(&P.calls);
  if (has_deleter) FUZZ_CHECK(calls == 1, "deleter called %d times after release", calls);
  else free_producer();
  free(offs);
  free(expect);
  return 0;
}
