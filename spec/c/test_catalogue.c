/* A catalogue of bad input at the C API (README.md, "Development"): every
 * public function of include/dlrun/ called with NULL pointers (arrays,
 * shardings, meshes, devices, runtimes, out pointers, names, data), invalid
 * enum values (dtype 99, memory kind 7, ...), out-of-range indices, and
 * deleted arrays. Each case asserts the status code and the text of
 * dlrun_last_error(); functions without a status must not crash (release
 * functions with NULL are no-ops).
 *
 * Every bad call runs in a forked child, so that a crash fails one case (a
 * CHECK naming the function and the signal) instead of the whole binary. The
 * child reports the call's result, dlrun_last_error(), whether the call set a
 * message at all, what became of the out pointers, the bytes in use in every
 * device memory, the live exports and how many producer deleters ran, so each
 * case also checks that a failed call leaves nothing behind.
 *
 * The C API for host applications that embed Lua (include/dlrun/lua.h) needs
 * Lua, which the C tests do not link; its functions are covered through the
 * Lua specs (spec/arrays/catalogue_spec.lua, spec/cli/host_spec.lua). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlrun.h"

/* ---- the runtime and fixtures (made in the parent, before any fork) ---- */

static dlrun_runtime *rt, *rt2;
static dlrun_device *sim0, *sim1, *cpu0, *other_sim0;
static dlrun_mesh *mesh;
static dlrun_sharding *single, *split, *other_single;
static dlrun_array *live, *dead, *dead_split;
static const int64_t dims4[1] = {4};
static const int64_t dims2[1] = {2};
static float data4[4] = {1, 2, 3, 4};

/* ---- out pointers: set to a sentinel in the child before each call ---- */

#define SENTINEL ((void *)(uintptr_t)0x5e5e5e5e)
static dlrun_array *o_arr;
static dlrun_sharding *o_shard;
static dlrun_mesh *o_mesh;
static dlrun_runtime *o_rt;
static dlrun_exported o_exp;
static uint64_t ex_storage[64]; /* storage for dlrun_export_into (512 bytes) */
static int g_deleter_calls; /* deleters of hand-made DLPack tensors (child side) */

enum { OUT_NONE, OUT_ARRAY, OUT_SHARDING, OUT_MESH, OUT_RUNTIME, OUT_EXPORTED };
enum { SLOT_NULL, SLOT_SENTINEL, SLOT_OTHER };

typedef struct outcome {
  int crashed, sig, timed_out, lost; /* how the child ended */
  int exit_code;                     /* when lost: its exit status (a sanitizer's report?) */
  long long ret;                     /* the call's value: a status, a pointer, a count */
  int msg_set;                       /* the call replaced the sentinel message */
  char msg[1024];                    /* dlrun_last_error() after the call */
  int slot[6];                       /* OUT_*: SLOT_NULL, SLOT_SENTINEL or SLOT_OTHER */
  unsigned long long bytes_in_use;   /* every device memory of rt, after the call */
  long long live_exports;
  int deleter_calls;
} outcome;

static unsigned long long pool_bytes(void) {
  unsigned long long total = 0;
  const char *platforms[] = {"sim", "cpu"};
  for (int p = 0; p < 2; p++)
    for (size_t i = 0; i < dlrun_device_count(rt, platforms[p]); i++)
      for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
        dlrun_memory_stats s;
        if (dlrun_device_memory_stats(dlrun_device_get(rt, platforms[p], i), (dlrun_memory_kind)k,
                                      &s) == DLRUN_OK)
          total += s.bytes_in_use;
      }
  return total;
}

static int slot_of(const void *p) {
  return p == NULL ? SLOT_NULL : p == SENTINEL ? SLOT_SENTINEL : SLOT_OTHER;
}

static void child_prepare(void) {
  uint64_t v;
  alarm(10);
  (void)dlrun_parse_size("catalogue-sentinel", &v); /* a message the call must replace */
  o_arr = SENTINEL;
  o_shard = SENTINEL;
  o_mesh = SENTINEL;
  o_rt = SENTINEL;
  o_exp.legacy = SENTINEL;
  o_exp.versioned = SENTINEL;
  g_deleter_calls = 0;
}

static void child_report(int fd, long long ret) {
  outcome o;
  memset(&o, 0, sizeof o);
  o.ret = ret;
  const char *m = dlrun_last_error();
  snprintf(o.msg, sizeof o.msg, "%s", m ? m : "(dlrun_last_error returned NULL)");
  o.msg_set = m && strstr(m, "catalogue-sentinel") == NULL;
  o.slot[OUT_ARRAY] = slot_of(o_arr);
  o.slot[OUT_SHARDING] = slot_of(o_shard);
  o.slot[OUT_MESH] = slot_of(o_mesh);
  o.slot[OUT_RUNTIME] = slot_of(o_rt);
  o.slot[OUT_EXPORTED] = o_exp.legacy == SENTINEL && o_exp.versioned == SENTINEL ? SLOT_SENTINEL
                         : !o_exp.legacy && !o_exp.versioned                     ? SLOT_NULL
                                                                                 : SLOT_OTHER;
  o.bytes_in_use = pool_bytes();
  o.live_exports = dlrun_live_exports(rt);
  o.deleter_calls = g_deleter_calls;
  ssize_t n = write(fd, &o, sizeof o);
  _exit(n == (ssize_t)sizeof o ? 0 : 3);
}

static outcome child_collect(pid_t pid, int fd) {
  outcome o;
  memset(&o, 0, sizeof o);
  size_t got = 0;
  while (got < sizeof o) {
    ssize_t n = read(fd, (char *)&o + got, sizeof o - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    o.sig = WTERMSIG(status);
    if (o.sig == SIGALRM) o.timed_out = 1;
    else o.crashed = 1;
  } else if (got != sizeof o) {
    o.lost = 1;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return o;
}

/* Run `expr` in a child; its value (any integer or pointer) goes to o.ret. */
#define RUN(o, expr)                                                         \
  do {                                                                       \
    int fds_[2];                                                             \
    fflush(stdout);                                                          \
    if (pipe(fds_) != 0) {                                                   \
      memset(&(o), 0, sizeof(o));                                            \
      (o).lost = 1;                                                          \
      break;                                                                 \
    }                                                                        \
    pid_t pid_ = fork();                                                     \
    if (pid_ == 0) {                                                         \
      close(fds_[0]);                                                        \
      child_prepare();                                                       \
      long long r_ = (long long)(intptr_t)(expr);                            \
      child_report(fds_[1], r_);                                             \
    }                                                                        \
    close(fds_[1]);                                                          \
    (o) = child_collect(pid_, fds_[0]);                                      \
  } while (0)

static const char *status_text(long long st) {
  if (st < 0 || st >= DLRUN_STATUS_COUNT) return "(not a status)";
  return dlrun_status_name((dlrun_status)st);
}

/* The child ended normally; false (and a failed CHECK) otherwise. */
static int survived(const char *call, const outcome *o) {
  CHECK(!o->crashed, "%s crashed with signal %d (%s)", call, o->sig, strsignal(o->sig));
  CHECK(!o->timed_out, "%s did not return within 10 s", call);
  CHECK(!o->lost, "%s: the child died (exit status %d) without reporting (a sanitizer's report "
        "or an abort?)", call, o->exit_code);
  return !o->crashed && !o->timed_out && !o->lost;
}

/* The call returned `want`; when it failed, with a message of its own that
 * contains every needle, the out pointer of kind `out` NULL, and nothing
 * allocated, exported or released. */
static void expect_status(const char *call, const outcome *o, dlrun_status want, int out,
                          const char *const *needles, unsigned long long bytes_before,
                          long long exports_before) {
  if (!survived(call, o)) return;
  CHECK(o->ret == want, "%s returned %s (%lld), expected %s; message: \"%s\"", call,
        status_text(o->ret), o->ret, dlrun_status_name(want), o->msg_set ? o->msg : "");
  if (want == DLRUN_OK || o->ret == DLRUN_OK) return;
  CHECK(o->msg_set, "%s failed without setting a message (dlrun_last_error() is still \"%s\")",
        call, o->msg);
  for (const char *const *n = needles; n && *n; n++)
    CHECK(strstr(o->msg, *n) != NULL, "%s: message \"%s\" does not contain \"%s\"", call, o->msg,
          *n);
  if (out != OUT_NONE)
    CHECK(o->slot[out] == SLOT_NULL, "%s failed but did not set its out pointer to NULL (%s)",
          call, o->slot[out] == SLOT_SENTINEL ? "left unchanged" : "set to something");
  CHECK(o->bytes_in_use == bytes_before, "%s failed but device memory in use went from %llu to %llu",
        call, bytes_before, o->bytes_in_use);
  CHECK(o->live_exports == exports_before, "%s failed but live exports went from %lld to %lld",
        call, exports_before, o->live_exports);
}

/* One TEST per call. STATUS(call, want, out kind, needles...) */
#define STATUS(call, want, out, ...)                                         \
  TEST(#call) {                                                              \
    unsigned long long b_ = pool_bytes();                                    \
    long long e_ = dlrun_live_exports(rt);                                   \
    outcome o_;                                                              \
    RUN(o_, (call));                                                         \
    const char *n_[] = {__VA_ARGS__, NULL};                                  \
    expect_status(#call, &o_, (want), (out), n_, b_, e_);                    \
  }

/* A call without a status: it returns (no crash, no hang). */
#define NO_CRASH(call)                                                       \
  TEST(#call) {                                                              \
    outcome o_;                                                              \
    RUN(o_, ((call), 0));                                                    \
    survived(#call, &o_);                                                    \
  }

/* A call without a status that must return `want` (compared as integers). */
#define RETURNS(call, want)                                                  \
  TEST(#call) {                                                              \
    outcome o_;                                                              \
    RUN(o_, (call));                                                         \
    if (survived(#call, &o_))                                                \
      CHECK(o_.ret == (long long)(intptr_t)(want), "%s returned %lld, expected %s (%lld)", #call, \
            o_.ret, #want, (long long)(intptr_t)(want));                     \
  }

/* A call returning a string: it must return a non-empty one. */
#define RETURNS_TEXT(call)                                                   \
  TEST(#call) {                                                              \
    outcome o_;                                                              \
    RUN(o_, (call) && *(call));                                              \
    if (survived(#call, &o_))                                                \
      CHECK(o_.ret == 1, "%s returned NULL or \"\"", #call);                  \
  }

/* ---- hand-made DLPack tensors (deleters count, in the child) ---- */

static void count_deleter(DLManagedTensor *self) {
  (void)self;
  g_deleter_calls++;
}

static void count_deleter_v(DLManagedTensorVersioned *self) {
  (void)self;
  g_deleter_calls++;
}

static float tensor_data[4] = {1, 2, 3, 4};
static int64_t tensor_shape[1] = {4};
static int64_t tensor_negative_shape[1] = {-4};

/* A legacy float32[4] host tensor; `tweak` selects one bad field. */
enum { T_GOOD, T_NDIM_NEG, T_NDIM_33, T_SHAPE_NULL, T_DIM_NEG, T_CODE_99, T_LANES_4, T_BITS_7,
       T_DEVICE_99, T_DATA_NULL, T_OFFSET_HUGE, T_SIM_99 };
static DLManagedTensor legacy_tensor[16];

static DLManagedTensor *tensor(int tweak) {
  DLManagedTensor *m = &legacy_tensor[tweak];
  memset(m, 0, sizeof *m);
  m->dl_tensor.data = tensor_data;
  m->dl_tensor.device = (DLDevice){kDLCPU, 0};
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  m->dl_tensor.shape = tensor_shape;
  m->deleter = count_deleter;
  switch (tweak) {
  case T_NDIM_NEG: m->dl_tensor.ndim = -1; break;
  case T_NDIM_33: m->dl_tensor.ndim = 33; break;
  case T_SHAPE_NULL: m->dl_tensor.shape = NULL; break;
  case T_DIM_NEG: m->dl_tensor.shape = tensor_negative_shape; break;
  case T_CODE_99: m->dl_tensor.dtype.code = 99; break;
  case T_LANES_4: m->dl_tensor.dtype.lanes = 4; break;
  case T_BITS_7: m->dl_tensor.dtype.bits = 7; break;
  case T_DEVICE_99: m->dl_tensor.device.device_type = (DLDeviceType)99; break;
  case T_DATA_NULL: m->dl_tensor.data = NULL; break;
  case T_OFFSET_HUGE: m->dl_tensor.byte_offset = UINT64_MAX - 8; break;
  case T_SIM_99: m->dl_tensor.device = (DLDevice){kDLExtDev, 99}; break;
  }
  return m;
}

static DLManagedTensorVersioned versioned_tensor;

/* An import's status and the deleter calls it made, as status * 100 + calls. */
static long long import_result(dlrun_status st) { return st * 100LL + g_deleter_calls; }

static DLManagedTensorVersioned *tensor_v(uint32_t major) {
  DLManagedTensorVersioned *m = &versioned_tensor;
  memset(m, 0, sizeof *m);
  m->version.major = major;
  m->version.minor = 0;
  m->dl_tensor.data = tensor_data;
  m->dl_tensor.device = (DLDevice){kDLCPU, 0};
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  m->dl_tensor.shape = tensor_shape;
  m->deleter = count_deleter_v;
  return m;
}

/* ---- setup ---- */

static dlrun_runtime *make_runtime(const char *spec) {
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20};
  dlrun_runtime *r = NULL;
  if (dlrun_runtime_create(&cfg, &r)) printf("  runtime_create(%s): %s\n", spec, dlrun_last_error());
  return r;
}

static int setup(void) {
  rt = make_runtime("sim:2,cpu:1");
  rt2 = make_runtime("sim:1");
  if (!rt || !rt2) return 0;
  sim0 = dlrun_device_get(rt, "sim", 0);
  sim1 = dlrun_device_get(rt, "sim", 1);
  cpu0 = dlrun_host_device(rt);
  other_sim0 = dlrun_device_get(rt2, "sim", 0);
  dlrun_device *devs[2] = {sim0, sim1};
  const char *names[1] = {"x"};
  int64_t sizes[1] = {2};
  dlrun_partition_spec spec = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
  if (dlrun_mesh_create(devs, 2, 1, names, sizes, &mesh) ||
      dlrun_single_device_sharding_create(sim0, DLRUN_MEM_DEVICE, &single) ||
      dlrun_single_device_sharding_create(other_sim0, DLRUN_MEM_DEVICE, &other_single) ||
      dlrun_named_sharding_create(mesh, &spec, DLRUN_MEM_DEVICE, &split) ||
      dlrun_array_from_host(single, DLRUN_FLOAT32, 1, dims4, data4, sizeof data4, &live) ||
      dlrun_array_from_host(single, DLRUN_FLOAT32, 1, dims4, data4, sizeof data4, &dead) ||
      dlrun_array_from_host(split, DLRUN_FLOAT32, 1, dims4, data4, sizeof data4, &dead_split)) {
    printf("  setup: %s\n", dlrun_last_error());
    return 0;
  }
  dlrun_array_block_until_ready(live);
  dlrun_array_delete(dead);
  dlrun_array_delete(dead_split);
  /* Nothing may be in flight when a child is forked. */
  dlrun_device_synchronize(sim0);
  dlrun_device_synchronize(sim1);
  dlrun_device_synchronize(cpu0);
  return 1;
}

/* ---- status.h, dtype.h, shape.h ---- */

static void test_core(void) {
  uint64_t u64;
  int64_t i64;
  dlrun_dtype dt;
  char buf[64];
  unsigned char bytes[16];
  dlrun_scalar one = {.kind = DLRUN_SCALAR_INT, .i = 1};
  dlrun_scalar bad_kind = {.kind = (dlrun_scalar_kind)99, .i = 1};
  int64_t neg[1] = {-1}, huge[2] = {INT64_MAX, INT64_MAX};

  RETURNS_TEXT(dlrun_last_error());
  RETURNS_TEXT(dlrun_status_name((dlrun_status)99));
  RETURNS_TEXT(dlrun_status_name((dlrun_status)-1));

  RETURNS(dlrun_dtype_get((dlrun_dtype)99), NULL);
  RETURNS(dlrun_dtype_get((dlrun_dtype)-1), NULL);
  RETURNS(dlrun_dtype_get(DLRUN_DTYPE_COUNT), NULL);
  STATUS(dlrun_dtype_from_name(NULL, &dt), DLRUN_ERR_VALUE, OUT_NONE, "dtype name is missing");
  /* A lookup with no out pointer only validates. */
  STATUS(dlrun_dtype_from_name("float32", NULL), DLRUN_OK, OUT_NONE, NULL);
  STATUS(dlrun_dtype_from_name("bogus", &dt), DLRUN_ERR_VALUE, OUT_NONE, "unknown dtype \"bogus\"",
         "float32");
  STATUS(dlrun_dtype_from_name("", &dt), DLRUN_ERR_VALUE, OUT_NONE, "unknown dtype \"\"");
  STATUS(dlrun_dtype_from_dlpack(99, 32, 1, &dt), DLRUN_ERR_BUFFER, OUT_NONE, "99");
  STATUS(dlrun_dtype_from_dlpack(kDLFloat, 32, 4, &dt), DLRUN_ERR_BUFFER, OUT_NONE, "lanes");
  STATUS(dlrun_dtype_from_dlpack(kDLFloat, 7, 1, &dt), DLRUN_ERR_BUFFER, OUT_NONE, "7");
  STATUS(dlrun_dtype_from_dlpack(kDLFloat, 32, 1, NULL), DLRUN_OK, OUT_NONE, NULL);
  STATUS(dlrun_dtype_store((dlrun_dtype)99, bytes, &one), DLRUN_ERR_VALUE, OUT_NONE,
         "invalid dtype 99");
  STATUS(dlrun_dtype_store(DLRUN_FLOAT32, NULL, &one), DLRUN_ERR_VALUE, OUT_NONE, "destination",
         "NULL");
  STATUS(dlrun_dtype_store(DLRUN_FLOAT32, bytes, NULL), DLRUN_ERR_VALUE, OUT_NONE, "value", "NULL");
  STATUS(dlrun_dtype_store(DLRUN_FLOAT32, bytes, &bad_kind), DLRUN_ERR_VALUE, OUT_NONE, "99");
  NO_CRASH(dlrun_dtype_load((dlrun_dtype)99, bytes, &one));
  NO_CRASH(dlrun_dtype_load(DLRUN_FLOAT32, NULL, &one));
  NO_CRASH(dlrun_dtype_load(DLRUN_FLOAT32, bytes, NULL));

  TEST("float16 and bfloat16 conversions of NaN, infinities and huge values") {
    double nan_value = 0.0 / 0.0, inf = 1.0 / 0.0;
    uint16_t h = dlrun_float16_from_double(nan_value), b = dlrun_bfloat16_from_double(nan_value);
    CHECK((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0, "float16(NaN) = 0x%04x, not a NaN", h);
    CHECK((b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0, "bfloat16(NaN) = 0x%04x, not a NaN", b);
    CHECK(dlrun_float16_from_double(inf) == 0x7c00, "float16(inf)");
    CHECK(dlrun_float16_from_double(-inf) == 0xfc00, "float16(-inf)");
    CHECK(dlrun_float16_from_double(1e300) == 0x7c00, "float16(1e300) overflows to inf");
    CHECK(dlrun_bfloat16_from_double(inf) == 0x7f80, "bfloat16(inf)");
    CHECK(dlrun_bfloat16_from_double(-1e300) == 0xff80, "bfloat16(-1e300) overflows to -inf");
    double back = dlrun_float16_to_double(0x7e00);
    CHECK(back != back, "float16 0x7e00 reads back as %g, not NaN", back);
    back = dlrun_bfloat16_to_double(0xffc0);
    CHECK(back != back, "bfloat16 0xffc0 reads back as %g, not NaN", back);
  }

  STATUS(dlrun_shape_size(-1, dims4, &i64), DLRUN_ERR_VALUE, OUT_NONE, "-1");
  STATUS(dlrun_shape_size(33, dims4, &i64), DLRUN_ERR_VALUE, OUT_NONE, "33");
  STATUS(dlrun_shape_size(1, NULL, &i64), DLRUN_ERR_VALUE, OUT_NONE, "shape is NULL");
  STATUS(dlrun_shape_size(1, dims4, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");
  STATUS(dlrun_shape_size(1, neg, &i64), DLRUN_ERR_VALUE, OUT_NONE, "-1");
  STATUS(dlrun_shape_size(2, huge, &i64), DLRUN_ERR_VALUE, OUT_NONE, "overflows");
  STATUS(dlrun_shape_nbytes(1, dims4, (dlrun_dtype)99, &u64), DLRUN_ERR_VALUE, OUT_NONE, "99");
  STATUS(dlrun_shape_nbytes(1, NULL, DLRUN_FLOAT32, &u64), DLRUN_ERR_VALUE, OUT_NONE, "shape is NULL");
  STATUS(dlrun_shape_nbytes(1, dims4, DLRUN_FLOAT32, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out",
         "NULL");
  NO_CRASH(dlrun_shape_string((dlrun_dtype)99, 1, dims4, buf, sizeof buf));
  NO_CRASH(dlrun_shape_string(DLRUN_FLOAT32, 1, NULL, buf, sizeof buf));
  NO_CRASH(dlrun_shape_string(DLRUN_FLOAT32, 1, dims4, NULL, 0));
  NO_CRASH(dlrun_shape_string(DLRUN_FLOAT32, -1, dims4, buf, sizeof buf));
  NO_CRASH(dlrun_shape_string(DLRUN_FLOAT32, 99, dims4, buf, sizeof buf));
}

/* ---- runtime.h, device.h, debug.h, trace.h ---- */

static void test_runtime(void) {
  uint64_t u64, q, d;
  dlrun_memory_stats ms;
  dlrun_device_stats ds;
  dlrun_transfer_stats ts;
  char buf[64];
  dlrun_config tiny = {.devices = "sim:1", .device_memory = 1};
  dlrun_config bogus = {.devices = "bogus:1", .device_memory = 0};
  dlrun_config good = {.devices = "sim:1", .device_memory = 1 << 20};

  STATUS(dlrun_parse_size(NULL, &u64), DLRUN_ERR_VALUE, OUT_NONE, "memory size is missing");
  STATUS(dlrun_parse_size("1KiB", NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");
  STATUS(dlrun_check_device_spec(NULL), DLRUN_ERR_VALUE, OUT_NONE, "device spec is missing");
  STATUS(dlrun_runtime_create(&bogus, &o_rt), DLRUN_ERR_VALUE, OUT_RUNTIME,
         "unknown platform \"bogus\"");
  STATUS(dlrun_runtime_create(&tiny, &o_rt), DLRUN_ERR_VALUE, OUT_RUNTIME,
         "device memory of 1 bytes is too small");
  STATUS(dlrun_runtime_create(&good, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");
  NO_CRASH(dlrun_runtime_retain(NULL));
  NO_CRASH(dlrun_runtime_release(NULL));
  STATUS(dlrun_default_configure("bogus", 0), DLRUN_ERR_VALUE, OUT_NONE, "bogus");
  STATUS(dlrun_default_configure(NULL, 1), DLRUN_ERR_VALUE, OUT_NONE, "too small");
  STATUS(dlrun_default_runtime(NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");

  RETURNS(dlrun_device_count(NULL, NULL), 0);
  RETURNS(dlrun_device_count(rt, "bogus"), 0);
  RETURNS(dlrun_device_count(rt, ""), 0);
  RETURNS(dlrun_device_get(NULL, NULL, 0), NULL);
  RETURNS(dlrun_device_get(rt, NULL, 99), NULL);
  RETURNS(dlrun_device_get(rt, NULL, SIZE_MAX), NULL);
  RETURNS(dlrun_device_get(rt, "bogus", 0), NULL);
  NO_CRASH(dlrun_default_backend(NULL));
  RETURNS(dlrun_host_device(NULL), NULL);
  NO_CRASH(dlrun_runtime_platforms(NULL));
  NO_CRASH(dlrun_runtime_spec(NULL));
  NO_CRASH(dlrun_device_id(NULL));
  NO_CRASH(dlrun_device_platform(NULL));
  NO_CRASH(dlrun_device_process_index(NULL));
  NO_CRASH(dlrun_device_name(NULL));
  RETURNS(dlrun_device_runtime(NULL), NULL);
  STATUS(dlrun_device_memory_stats(NULL, DLRUN_MEM_DEVICE, &ms), DLRUN_ERR_VALUE, OUT_NONE,
         "device", "NULL");
  STATUS(dlrun_device_memory_stats(sim0, (dlrun_memory_kind)7, &ms), DLRUN_ERR_VALUE, OUT_NONE,
         "memory kind", "7");
  STATUS(dlrun_device_memory_stats(sim0, (dlrun_memory_kind)-1, &ms), DLRUN_ERR_VALUE, OUT_NONE,
         "memory kind", "-1");
  STATUS(dlrun_device_memory_stats(sim0, DLRUN_MEM_DEVICE, NULL), DLRUN_ERR_VALUE, OUT_NONE,
         "out", "NULL");
  NO_CRASH(dlrun_device_synchronize(NULL));

  NO_CRASH(dlrun_debug_fail_alloc((dlrun_alloc_kind)99, 1));
  NO_CRASH(dlrun_debug_fail_alloc((dlrun_alloc_kind)-1, 1));
  NO_CRASH(dlrun_debug_alloc_count((dlrun_alloc_kind)99));
  NO_CRASH(dlrun_debug_alloc_failed((dlrun_alloc_kind)99));
  NO_CRASH(dlrun_debug_fail_alloc(DLRUN_ALLOC_HOST, -5));

  STATUS(dlrun_trace_start(NULL), DLRUN_ERR_VALUE, OUT_NONE, "path", "NULL");
  STATUS(dlrun_trace_start("/nonexistent-dir/catalogue/trace.json"), DLRUN_ERR_RUNTIME, OUT_NONE,
         "cannot write the trace file \"/nonexistent-dir/catalogue/trace.json\"");
  STATUS(dlrun_trace_stop(), DLRUN_ERR_RUNTIME, OUT_NONE, "tracing is not on");
  RETURNS(dlrun_trace_is_on(), 0);
  STATUS(dlrun_trace_process_path(NULL, buf, sizeof buf), DLRUN_ERR_VALUE, OUT_NONE, "path",
         "NULL");
  STATUS(dlrun_trace_process_path("t.json", NULL, 8), DLRUN_ERR_VALUE, OUT_NONE, "buf", "NULL");
  STATUS(dlrun_trace_process_path("t.json", buf, 0), DLRUN_ERR_VALUE, OUT_NONE,
         "the trace file name \"t.json\" is too long");
  RETURNS(dlrun_runtime_report(NULL, NULL, 0), 0);
  RETURNS(dlrun_runtime_report(rt, NULL, 0), 3); /* sim:2,cpu:1 */
  RETURNS(dlrun_default_runtime_if_started(), NULL); /* this binary never starts it */
  NO_CRASH(dlrun_device_stats_get(NULL, &ds));
  NO_CRASH(dlrun_device_stats_get(sim0, NULL));
  NO_CRASH(dlrun_transfer_progress(NULL, &q, &d));
  NO_CRASH(dlrun_transfer_progress(rt, NULL, NULL));
  NO_CRASH(dlrun_transfer_stats_get(NULL, &ts));
  NO_CRASH(dlrun_transfer_stats_get(rt, NULL));
  NO_CRASH(dlrun_transfer_stats_reset(NULL));
}

/* ---- sharding.h ---- */

static void test_sharding(void) {
  char buf[256];
  int64_t out[1], lo[1], hi[1];
  const char *x[1] = {"x"}, *null_name[1] = {NULL}, *empty_name[1] = {""};
  const char *two[2] = {"x", "y"};
  int64_t two_sizes[1] = {2}, sizes_1[1] = {1}, neg_sizes[1] = {-2}, two_by_two[2] = {2, 2};
  dlrun_device *devs[2] = {sim0, sim1}, *with_null[2] = {sim0, NULL}, *twice[2] = {sim0, sim0};
  dlrun_device *mixed[2] = {sim0, other_sim0};
  dlrun_partition_spec spec_x = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
  dlrun_partition_spec spec_z = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"z"}}}};
  dlrun_partition_spec spec_null_axis = {.nentries = 1, .entries = {{.naxes = 1, .axes = {NULL}}}};
  dlrun_partition_spec spec_neg = {.nentries = -1};
  int64_t thirty_three[33];
  for (int i = 0; i < 33; i++) thirty_three[i] = 2;
  dlrun_partition_spec spec_33 = {.nentries = 33};
  /* 33 entries claimed, and what lies past the 32nd is poison: reading it crashes. */
  struct {
    dlrun_partition_spec spec;
    dlrun_spec_entry past_the_end;
  } poisoned = {.spec = {.nentries = 33},
                .past_the_end = {.naxes = 1, .axes = {(const char *)(uintptr_t)1}}};
  dlrun_partition_spec spec_17_axes = {.nentries = 1, .entries = {{.naxes = 17}}};
  dlrun_partition_spec spec_neg_axes = {.nentries = 1, .entries = {{.naxes = -1}}};

  STATUS(dlrun_mesh_create(NULL, 2, 1, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "devices", "NULL");
  STATUS(dlrun_mesh_create(with_null, 2, 1, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "mesh device 2 is NULL");
  STATUS(dlrun_mesh_create(devs, 2, 1, NULL, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "axis_names", "NULL");
  STATUS(dlrun_mesh_create(devs, 1, 1, null_name, sizes_1, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "mesh axis 1");
  STATUS(dlrun_mesh_create(devs, 1, 1, empty_name, sizes_1, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "mesh axis 1 has an empty name");
  STATUS(dlrun_mesh_create(devs, 2, 1, x, NULL, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "axis_sizes", "NULL");
  STATUS(dlrun_mesh_create(devs, 2, 1, x, two_sizes, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out",
         "NULL");
  STATUS(dlrun_mesh_create(devs, 2, -1, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH, "-1");
  STATUS(dlrun_mesh_create(devs, 2, 17, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH, "17");
  STATUS(dlrun_mesh_create(devs, 2, 1, x, neg_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH, "-2");
  STATUS(dlrun_mesh_create(devs, 2, 1, x, sizes_1, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH, "2");
  STATUS(dlrun_mesh_create(devs, 0, 0, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "a mesh needs at least one device");
  STATUS(dlrun_mesh_create(twice, 2, 1, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "Mesh contains duplicate devices: SimDevice(id=0) appears twice");
  STATUS(dlrun_mesh_create(mixed, 2, 1, x, two_sizes, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "runtime");
  STATUS(dlrun_mesh_create(devs, 2, 2, two, two_by_two, &o_mesh), DLRUN_ERR_VALUE, OUT_MESH,
         "4");
  NO_CRASH(dlrun_mesh_retain(NULL));
  NO_CRASH(dlrun_mesh_release(NULL));
  NO_CRASH(dlrun_mesh_naxes(NULL));
  RETURNS(dlrun_mesh_axis_name(NULL, 0), NULL);
  RETURNS(dlrun_mesh_axis_name(mesh, 1), NULL);
  RETURNS(dlrun_mesh_axis_name(mesh, -1), NULL);
  NO_CRASH(dlrun_mesh_axis_size(NULL, 0));
  NO_CRASH(dlrun_mesh_axis_size(mesh, 99));
  NO_CRASH(dlrun_mesh_axis_size(mesh, -1));
  RETURNS(dlrun_mesh_device_count(NULL), 0);
  RETURNS(dlrun_mesh_device(NULL, 0), NULL);
  RETURNS(dlrun_mesh_device(mesh, 2), NULL);
  RETURNS(dlrun_mesh_device(mesh, SIZE_MAX), NULL);
  NO_CRASH(dlrun_mesh_describe(NULL, buf, sizeof buf));
  NO_CRASH(dlrun_mesh_describe(mesh, NULL, 0));

  STATUS(dlrun_named_sharding_create(NULL, &spec_x, DLRUN_MEM_DEVICE, &o_shard), DLRUN_ERR_VALUE,
         OUT_SHARDING, "mesh is NULL");
  STATUS(dlrun_named_sharding_create(mesh, NULL, DLRUN_MEM_DEVICE, &o_shard), DLRUN_ERR_VALUE,
         OUT_SHARDING, "spec is NULL");
  STATUS(dlrun_named_sharding_create(mesh, &spec_x, (dlrun_memory_kind)7, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "memory kind", "7");
  STATUS(dlrun_named_sharding_create(mesh, &spec_x, DLRUN_MEM_DEVICE, NULL), DLRUN_ERR_VALUE,
         OUT_NONE, "out", "NULL");
  STATUS(dlrun_named_sharding_create(mesh, &spec_z, DLRUN_MEM_DEVICE, &o_shard), DLRUN_ERR_VALUE,
         OUT_SHARDING, "Resource axis: z of PartitionSpec('z',) is not found in mesh: ('x',).");
  STATUS(dlrun_named_sharding_create(mesh, &spec_null_axis, DLRUN_MEM_DEVICE, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "axis", "NULL");
  STATUS(dlrun_named_sharding_create(mesh, &spec_neg, DLRUN_MEM_DEVICE, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "-1");
  STATUS(dlrun_named_sharding_create(mesh, &spec_33, DLRUN_MEM_DEVICE, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "33");
  STATUS(dlrun_named_sharding_create(mesh, &spec_17_axes, DLRUN_MEM_DEVICE, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "17");
  STATUS(dlrun_named_sharding_create(mesh, &spec_neg_axes, DLRUN_MEM_DEVICE, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "-1");
  STATUS(dlrun_single_device_sharding_create(NULL, DLRUN_MEM_DEVICE, &o_shard), DLRUN_ERR_VALUE,
         OUT_SHARDING, "device is NULL");
  STATUS(dlrun_single_device_sharding_create(sim0, (dlrun_memory_kind)7, &o_shard),
         DLRUN_ERR_VALUE, OUT_SHARDING, "memory kind", "7");
  STATUS(dlrun_single_device_sharding_create(sim0, DLRUN_MEM_DEVICE, NULL), DLRUN_ERR_VALUE,
         OUT_NONE, "out", "NULL");
  NO_CRASH(dlrun_sharding_retain(NULL));
  NO_CRASH(dlrun_sharding_release(NULL));
  RETURNS(dlrun_sharding_is_named(NULL), 0);
  RETURNS(dlrun_sharding_mesh(NULL), NULL);
  RETURNS(dlrun_sharding_spec(NULL), NULL);
  NO_CRASH(dlrun_sharding_memory_kind(NULL));
  RETURNS(dlrun_sharding_device_count(NULL), 0);
  RETURNS(dlrun_sharding_device(NULL, 0), NULL);
  RETURNS(dlrun_sharding_device(split, 2), NULL);
  RETURNS(dlrun_sharding_device(split, SIZE_MAX), NULL);
  RETURNS(dlrun_sharding_device_position(NULL, sim0), -1);
  RETURNS(dlrun_sharding_device_position(split, NULL), -1);
  RETURNS(dlrun_sharding_is_fully_replicated(NULL), 0);
  NO_CRASH(dlrun_sharding_partitions(NULL, 0));
  RETURNS(dlrun_sharding_partitions(split, -1), 1);
  RETURNS(dlrun_sharding_partitions(split, 99), 1);
  STATUS(dlrun_sharding_check_shape(NULL, 1, dims4), DLRUN_ERR_VALUE, OUT_NONE, "sharding",
         "NULL");
  STATUS(dlrun_sharding_check_shape(split, 1, NULL), DLRUN_ERR_VALUE, OUT_NONE, "dims is NULL");
  STATUS(dlrun_sharding_check_shape(split, -1, dims4), DLRUN_ERR_VALUE, OUT_NONE,
         "ndim -1 is out of range (0 to 32)");
  STATUS(dlrun_sharding_check_shape(split, 33, thirty_three), DLRUN_ERR_VALUE, OUT_NONE,
         "ndim 33 is out of range (0 to 32)");
  STATUS(dlrun_sharding_check_shape(single, -1, dims4), DLRUN_ERR_VALUE, OUT_NONE,
         "ndim -1 is out of range (0 to 32)");
  STATUS(dlrun_sharding_check_shape(single, 33, thirty_three), DLRUN_ERR_VALUE, OUT_NONE,
         "ndim 33 is out of range (0 to 32)");
  NO_CRASH(dlrun_sharding_shard_shape(NULL, 1, dims4, out));
  NO_CRASH(dlrun_sharding_shard_shape(split, 1, NULL, out));
  NO_CRASH(dlrun_sharding_shard_shape(split, 1, dims4, NULL));
  NO_CRASH(dlrun_sharding_shard_index(NULL, 0, 1, dims4, lo, hi));
  NO_CRASH(dlrun_sharding_shard_index(split, 99, 1, dims4, lo, hi));
  NO_CRASH(dlrun_sharding_shard_index(split, 0, 1, dims4, NULL, NULL));
  NO_CRASH(dlrun_sharding_replica_id(NULL, 0, 1, dims4));
  NO_CRASH(dlrun_sharding_replica_id(split, 99, 1, dims4));
  RETURNS(dlrun_sharding_is_equivalent(NULL, split, 1), 0);
  RETURNS(dlrun_sharding_is_equivalent(split, NULL, 1), 0);
  NO_CRASH(dlrun_sharding_is_equivalent(split, split, -1));
  NO_CRASH(dlrun_sharding_is_equivalent(split, split, 99));
  RETURNS(dlrun_sharding_equal(NULL, split), 0);
  RETURNS(dlrun_sharding_equal(split, NULL), 0);
  NO_CRASH(dlrun_sharding_equal(NULL, NULL));
  NO_CRASH(dlrun_sharding_describe(NULL, buf, sizeof buf));
  NO_CRASH(dlrun_sharding_describe(split, NULL, 0));
  NO_CRASH(dlrun_partition_spec_describe(NULL, buf, sizeof buf));
  NO_CRASH(dlrun_partition_spec_describe(&spec_null_axis, buf, sizeof buf));
  NO_CRASH(dlrun_partition_spec_describe(&poisoned.spec, buf, sizeof buf));
  RETURNS_TEXT(dlrun_memory_kind_name((dlrun_memory_kind)7));
  RETURNS_TEXT(dlrun_memory_kind_name((dlrun_memory_kind)-1));
}

/* ---- array.h ---- */

static void test_array(void) {
  float buf[4];
  dlrun_device *dev;
  int64_t lo[1], hi[1], replica;
  int64_t neg[1] = {-4}, huge[2] = {INT64_MAX / 2, INT64_MAX / 2}, big[1] = {1ll << 40};
  dlrun_scalar one = {.kind = DLRUN_SCALAR_INT, .i = 1};
  dlrun_scalar zero = {.kind = DLRUN_SCALAR_INT, .i = 0};
  dlrun_scalar half = {.kind = DLRUN_SCALAR_FLOAT, .re = 0.5};
  dlrun_scalar nan_value = {.kind = DLRUN_SCALAR_FLOAT, .re = 0.0 / 0.0};
  dlrun_scalar bad_kind = {.kind = (dlrun_scalar_kind)99};
  dlrun_put_options bad_alias = {.may_alias = (dlrun_alias_mode)99};
  dlrun_array *none[2] = {NULL, NULL};

  STATUS(dlrun_array_from_host(NULL, DLRUN_FLOAT32, 1, dims4, data4, 16, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "sharding", "NULL");
  STATUS(dlrun_array_from_host(single, (dlrun_dtype)99, 1, dims4, data4, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "invalid dtype 99");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, -1, dims4, data4, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "-1");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 33, dims4, data4, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "33");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 1, NULL, data4, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "shape is NULL");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 1, neg, data4, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "-4");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 2, huge, data4, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "overflows");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 1, dims4, NULL, 16, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "data is NULL");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 1, dims4, data4, 15, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "got 15 bytes of data but the shape needs 16");
  STATUS(dlrun_array_from_host(single, DLRUN_FLOAT32, 1, dims4, data4, 16, NULL), DLRUN_ERR_VALUE,
         OUT_NONE, "out", "NULL");
  STATUS(dlrun_array_from_host(split, DLRUN_FLOAT32, 1, (int64_t[]){3}, data4, 12, &o_arr),
         DLRUN_ERR_INDIVISIBLE, OUT_ARRAY, "partitioned 2 times, but the dimension size is 3");
  STATUS(dlrun_array_full(NULL, DLRUN_FLOAT32, 1, dims4, &one, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "sharding", "NULL");
  STATUS(dlrun_array_full(single, (dlrun_dtype)99, 1, dims4, &one, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "invalid dtype 99");
  STATUS(dlrun_array_full(single, DLRUN_FLOAT32, 1, NULL, &one, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "shape is NULL");
  STATUS(dlrun_array_full(single, DLRUN_FLOAT32, 1, dims4, NULL, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "value", "NULL");
  STATUS(dlrun_array_full(single, DLRUN_FLOAT32, 1, dims4, &bad_kind, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "99");
  STATUS(dlrun_array_full(single, DLRUN_INT32, 1, dims4, &nan_value, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "nan", "int32");
  STATUS(dlrun_array_full(single, DLRUN_FLOAT32, 1, dims4, &one, NULL), DLRUN_ERR_VALUE, OUT_NONE,
         "out", "NULL");
  STATUS(dlrun_array_full(single, DLRUN_INT8, 1, big, &one, &o_arr),
         DLRUN_ERR_RESOURCE_EXHAUSTED, OUT_ARRAY,
         "Out of memory on SimDevice(id=0) while allocating 1099511627776 bytes");
  STATUS(dlrun_array_arange(NULL, DLRUN_INT32, &zero, &one, 4, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY,
         "sharding", "NULL");
  STATUS(dlrun_array_arange(single, (dlrun_dtype)99, &zero, &one, 4, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "invalid dtype 99");
  STATUS(dlrun_array_arange(single, DLRUN_INT32, NULL, &one, 4, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "start", "NULL");
  STATUS(dlrun_array_arange(single, DLRUN_INT32, &zero, NULL, 4, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "step", "NULL");
  STATUS(dlrun_array_arange(single, DLRUN_INT32, &zero, &one, -1, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "arange length -1 is negative");
  STATUS(dlrun_array_arange(single, DLRUN_INT32, &zero, &half, 4, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "int32");
  STATUS(dlrun_array_arange(single, DLRUN_INT32, &zero, &one, INT64_MAX, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "arange");
  STATUS(dlrun_array_arange(single, DLRUN_FLOAT32, &nan_value, &one, 4, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "arange start and step must be finite");
  STATUS(dlrun_array_arange(single, DLRUN_INT32, &zero, &one, 4, NULL), DLRUN_ERR_VALUE, OUT_NONE,
         "out", "NULL");

  NO_CRASH(dlrun_array_retain(NULL));
  NO_CRASH(dlrun_array_release(NULL));
  NO_CRASH(dlrun_array_dtype(NULL));
  NO_CRASH(dlrun_array_ndim(NULL));
  RETURNS(dlrun_array_shape(NULL), NULL);
  NO_CRASH(dlrun_array_size(NULL));
  NO_CRASH(dlrun_array_nbytes(NULL));
  RETURNS(dlrun_array_sharding(NULL), NULL);
  RETURNS(dlrun_array_device(NULL), NULL);
  STATUS(dlrun_array_check_live(NULL), DLRUN_ERR_VALUE, OUT_NONE, "array", "NULL");
  STATUS(dlrun_array_block_until_ready(NULL), DLRUN_ERR_VALUE, OUT_NONE, "array", "NULL");
  STATUS(dlrun_array_read(NULL, 0, 16, buf), DLRUN_ERR_VALUE, OUT_NONE, "array", "NULL");
  STATUS(dlrun_array_read(live, 0, 16, NULL), DLRUN_ERR_VALUE, OUT_NONE, "NULL");
  STATUS(dlrun_array_read(live, 0, 17, buf), DLRUN_ERR_VALUE, OUT_NONE, "17");
  STATUS(dlrun_array_read(live, 2, 4, buf), DLRUN_ERR_VALUE, OUT_NONE, "element");
  STATUS(dlrun_array_read(live, 16, 4, buf), DLRUN_ERR_VALUE, OUT_NONE, "16");
  STATUS(dlrun_array_read(live, UINT64_MAX - 3, 8, buf), DLRUN_ERR_VALUE, OUT_NONE, "outside");
  NO_CRASH(dlrun_array_delete(NULL));
  NO_CRASH(dlrun_array_is_deleted(NULL));
  RETURNS(dlrun_array_shard_count(NULL), 0);
  NO_CRASH(dlrun_array_shard_index(NULL, 0, &dev, lo, hi, &replica));
  NO_CRASH(dlrun_array_shard_index(live, 99, &dev, lo, hi, &replica));
  NO_CRASH(dlrun_array_shard_index(live, 0, NULL, NULL, NULL, NULL));
  STATUS(dlrun_array_shard_data(NULL, 0, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY, "array", "NULL");
  STATUS(dlrun_array_shard_data(live, 1, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY, "1");
  STATUS(dlrun_array_shard_data(live, SIZE_MAX, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY, "out of range",
         "1844674407370955161");
  STATUS(dlrun_array_shard_data(live, 0, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");

  STATUS(dlrun_array_from_single_device_arrays(NULL, 1, dims4, &live, 1, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "sharding is NULL");
  STATUS(dlrun_array_from_single_device_arrays(single, 1, NULL, &live, 1, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "shape is NULL");
  STATUS(dlrun_array_from_single_device_arrays(single, -1, dims4, &live, 1, &o_arr),
         DLRUN_ERR_VALUE, OUT_ARRAY, "-1");
  STATUS(dlrun_array_from_single_device_arrays(single, 1, dims4, NULL, 1, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "arrays", "NULL");
  STATUS(dlrun_array_from_single_device_arrays(split, 1, dims4, none, 2, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "NULL");
  STATUS(dlrun_array_from_single_device_arrays(split, 1, dims4, &live, 0, &o_arr), DLRUN_ERR_VALUE,
         OUT_ARRAY, "Expected 2 per-device arrays");
  STATUS(dlrun_array_from_single_device_arrays(single, 1, dims4, &live, 1, NULL), DLRUN_ERR_VALUE,
         OUT_NONE, "out", "NULL");

  STATUS(dlrun_device_put(NULL, single, NULL, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY,
         "device_put needs an array and a sharding");
  STATUS(dlrun_device_put(live, NULL, NULL, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY,
         "device_put needs an array and a sharding");
  STATUS(dlrun_device_put(live, single, NULL, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");
  STATUS(dlrun_device_put(live, split, &bad_alias, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY, "99");
  STATUS(dlrun_device_put(live, other_single, NULL, &o_arr), DLRUN_ERR_VALUE, OUT_ARRAY,
         "runtime");
}

/* ---- deleted arrays: JAX's RuntimeError text ---- */

static void test_deleted(void) {
  float buf[4];
  int32_t type, id;
  dlrun_export_options legacy = {.copy = DLRUN_COPY_IF_NEEDED};
  dlrun_export_options versioned = {.copy = DLRUN_COPY_IF_NEEDED, .has_max_version = true, .max_major = 1, .max_minor = 1};
  const char *gone = "Array has been deleted with shape=float32[4].";
  dlrun_array *pieces[2] = {NULL, NULL};
  dlrun_sharding *on_sim1 = NULL;

  STATUS(dlrun_array_check_live(dead), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_array_block_until_ready(dead), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_array_read(dead, 0, 16, buf), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_array_shard_data(dead, 0, &o_arr), DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_device_put(dead, split, NULL, &o_arr), DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_device_put(dead, single, NULL, &o_arr), DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_device_put(dead, single, &(dlrun_put_options){.may_alias = DLRUN_ALIAS_NEVER}, &o_arr),
         DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_device_put(dead, split, &(dlrun_put_options){.donate = true}, &o_arr),
         DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_export(dead, &legacy, &o_exp), DLRUN_ERR_RUNTIME, OUT_EXPORTED, gone);
  STATUS(dlrun_export(dead, &versioned, &o_exp), DLRUN_ERR_RUNTIME, OUT_EXPORTED, gone);
  STATUS(dlrun_export_device(dead, &type, &id), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_export_into(dead, &legacy, ex_storage, sizeof ex_storage, &o_exp), DLRUN_ERR_RUNTIME,
         OUT_EXPORTED, gone);
  STATUS(dlrun_array_check_live(dead_split), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_array_block_until_ready(dead_split), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_array_read(dead_split, 0, 16, buf), DLRUN_ERR_RUNTIME, OUT_NONE, gone);
  STATUS(dlrun_array_shard_data(dead_split, 1, &o_arr), DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_device_put(dead_split, single, NULL, &o_arr), DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_device_put(dead_split, split, NULL, &o_arr), DLRUN_ERR_RUNTIME, OUT_ARRAY, gone);
  STATUS(dlrun_export(dead_split, &legacy, &o_exp), DLRUN_ERR_RUNTIME, OUT_EXPORTED, gone);

  TEST("a deleted array's metadata stays readable; delete is idempotent") {
    CHECK(dlrun_array_dtype(dead) == DLRUN_FLOAT32, "dtype");
    CHECK(dlrun_array_ndim(dead) == 1 && dlrun_array_shape(dead)[0] == 4, "shape");
    CHECK(dlrun_array_size(dead) == 4 && dlrun_array_nbytes(dead) == 16, "size");
    CHECK(dlrun_array_sharding(dead) == single, "sharding");
    CHECK(dlrun_array_device(dead) == sim0, "device");
    CHECK(dlrun_array_is_deleted(dead), "is_deleted");
    CHECK(dlrun_array_shard_count(dead_split) == 2, "shard_count");
    dlrun_array_delete(dead);
    dlrun_array_delete(dead);
    CHECK(dlrun_array_is_deleted(dead), "is_deleted after a second delete");
  }

  /* A deleted piece among the single-device arrays of an assembly. */
  TEST("setup: two single-device pieces, the second one deleted") {
    dlrun_status st = dlrun_single_device_sharding_create(sim1, DLRUN_MEM_DEVICE, &on_sim1);
    if (!st) st = dlrun_array_from_host(single, DLRUN_FLOAT32, 1, dims2, data4, 8, &pieces[0]);
    if (!st) st = dlrun_array_from_host(on_sim1, DLRUN_FLOAT32, 1, dims2, data4, 8, &pieces[1]);
    CHECK(st == DLRUN_OK, "%s", dlrun_last_error());
    if (!st) {
      dlrun_array_block_until_ready(pieces[0]);
      dlrun_array_block_until_ready(pieces[1]);
      dlrun_array_delete(pieces[1]);
      dlrun_device_synchronize(sim0);
      dlrun_device_synchronize(sim1);
    }
  }
  if (pieces[0] && pieces[1]) {
    STATUS(dlrun_array_from_single_device_arrays(split, 1, dims4, pieces, 2, &o_arr),
           DLRUN_ERR_RUNTIME, OUT_ARRAY, "Array has been deleted with shape=float32[2].");
  }
  dlrun_array_release(pieces[0]);
  dlrun_array_release(pieces[1]);
  dlrun_sharding_release(on_sim1);
}

/* ---- dlpack.h ---- */

static void test_dlpack(void) {
  int32_t type, id;
  dlrun_export_options defaults = {.copy = DLRUN_COPY_IF_NEEDED};
  dlrun_export_options bad_version = {.copy = DLRUN_COPY_IF_NEEDED, .has_max_version = true, .max_major = 0, .max_minor = 4};
  dlrun_export_options bad_type = {.copy = DLRUN_COPY_IF_NEEDED, .has_dl_device = true, .device_type = 99};
  dlrun_export_options bad_id = {.copy = DLRUN_COPY_IF_NEEDED, .has_dl_device = true, .device_type = kDLExtDev, .device_id = 99};
  dlrun_export_options bad_copy = {.copy = 7};
  dlrun_export_options bad_stream = {.copy = DLRUN_COPY_IF_NEEDED, .has_stream = true, .stream = 12345};
  dlrun_import_options on_split = {.target = split, .copy = DLRUN_COPY_IF_NEEDED};
  dlrun_import_options copy_7 = {.copy = 7};
  dlrun_import_options elsewhere = {.target = other_single, .copy = DLRUN_COPY_IF_NEEDED};

  STATUS(dlrun_export(NULL, &defaults, &o_exp), DLRUN_ERR_VALUE, OUT_EXPORTED, "array", "NULL");
  STATUS(dlrun_export(live, NULL, &o_exp), DLRUN_OK, OUT_EXPORTED, NULL);
  STATUS(dlrun_export(live, &defaults, NULL), DLRUN_ERR_VALUE, OUT_NONE, "out", "NULL");
  STATUS(dlrun_export(live, &bad_version, &o_exp), DLRUN_ERR_BUFFER, OUT_EXPORTED,
         "dlrun does not support any version below (0, 5) but version (0, 4) was requested.");
  STATUS(dlrun_export(live, &bad_type, &o_exp), DLRUN_ERR_BUFFER, OUT_EXPORTED,
         "unsupported device type (DLDeviceType: 99 (unknown to DLPack 1.3))");
  STATUS(dlrun_export(live, &bad_id, &o_exp), DLRUN_ERR_BUFFER, OUT_EXPORTED, "device id 99");
  STATUS(dlrun_export(live, &bad_copy, &o_exp), DLRUN_ERR_VALUE, OUT_EXPORTED, "copy", "7");
  STATUS(dlrun_export(live, &bad_stream, &o_exp), DLRUN_ERR_BUFFER, OUT_EXPORTED, "12345");
  STATUS(dlrun_export_into(NULL, &defaults, ex_storage, sizeof ex_storage, &o_exp), DLRUN_ERR_VALUE,
         OUT_EXPORTED, "array", "NULL");
  STATUS(dlrun_export_into(live, &defaults, NULL, sizeof ex_storage, &o_exp), DLRUN_ERR_VALUE,
         OUT_EXPORTED, "storage", "NULL");
  STATUS(dlrun_export_into(live, &defaults, ex_storage, sizeof ex_storage, NULL), DLRUN_ERR_VALUE,
         OUT_NONE, "out", "NULL");
  STATUS(dlrun_export_into(live, &defaults, (char *)ex_storage + 1, 512, &o_exp), DLRUN_ERR_VALUE,
         OUT_EXPORTED, "8-byte aligned");
  STATUS(dlrun_export_into(live, &defaults, ex_storage, 8, &o_exp), DLRUN_ERR_VALUE, OUT_EXPORTED,
         "too small", "dlrun_export_size(1, options)");
  STATUS(dlrun_export_into(live, &bad_version, ex_storage, sizeof ex_storage, &o_exp),
         DLRUN_ERR_BUFFER, OUT_EXPORTED, "version (0, 4) was requested.");
  STATUS(dlrun_export_into(live, &bad_copy, ex_storage, sizeof ex_storage, &o_exp), DLRUN_ERR_VALUE,
         OUT_EXPORTED, "copy", "7");
  STATUS(dlrun_export_detach(NULL), DLRUN_ERR_VALUE, OUT_NONE, "NULL");
  STATUS(dlrun_export_detach(&(dlrun_exported){0}), DLRUN_ERR_VALUE, OUT_NONE,
         "not a live export of dlrun");
  RETURNS(dlrun_export_size(-1, NULL) == dlrun_export_size(DLRUN_MAX_NDIM, NULL), 1);
  RETURNS(dlrun_export_size(0, &bad_copy) == dlrun_export_size(0, NULL), 1);
  STATUS(dlrun_export_device(NULL, &type, &id), DLRUN_ERR_VALUE, OUT_NONE, "array", "NULL");
  STATUS(dlrun_export_device(live, NULL, NULL), DLRUN_ERR_VALUE, OUT_NONE, "NULL");
  RETURNS(dlrun_live_exports(NULL), 0);

  /* Imports: checked before dlrun takes ownership (no deleter call on failure). */
#define IMPORT_FAILS(legacy_, versioned_, options_, out_, has_out_, want_, needle_) \
  TEST("dlrun_import(" #legacy_ ", " #versioned_ ", " #options_ ", " #out_ ")") { \
    outcome o_;                                                              \
    RUN(o_, import_result(dlrun_import(rt, (legacy_), (versioned_), (options_), (out_), NULL))); \
    if (survived("dlrun_import(rt, " #legacy_ ", " #versioned_ ", " #options_ ", " #out_ ")", &o_)) { \
      CHECK(o_.ret / 100 == (want_), "dlrun_import returned %s, expected %s; message \"%s\"", \
            status_text(o_.ret / 100), dlrun_status_name(want_), o_.msg);    \
      CHECK(o_.ret % 100 == 0, "a failed import called the producer's deleter %lld times", \
            o_.ret % 100);                                                   \
      CHECK(strstr(o_.msg, (needle_)) != NULL, "message \"%s\" does not contain \"%s\"", o_.msg, \
            (needle_));                                                      \
      if (has_out_) CHECK(o_.slot[OUT_ARRAY] == SLOT_NULL, "the out pointer is not NULL"); \
    }                                                                        \
  }
  IMPORT_FAILS(NULL, NULL, NULL, &o_arr, 1, DLRUN_ERR_VALUE, "exactly one tensor");
  IMPORT_FAILS(tensor(T_GOOD), tensor_v(1), NULL, &o_arr, 1, DLRUN_ERR_VALUE, "exactly one tensor");
  IMPORT_FAILS(tensor(T_GOOD), NULL, NULL, NULL, 0, DLRUN_ERR_VALUE, "out");
  IMPORT_FAILS(tensor(T_NDIM_NEG), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER,
               "from_dlpack: ndim -1 is out of range (0 to 32)");
  IMPORT_FAILS(tensor(T_NDIM_33), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER,
               "from_dlpack: ndim 33 is out of range (0 to 32)");
  IMPORT_FAILS(tensor(T_SHAPE_NULL), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER,
               "from_dlpack: shape is NULL but ndim is 1");
  IMPORT_FAILS(tensor(T_DIM_NEG), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER,
               "from_dlpack: dimension 0 is negative (-4)");
  IMPORT_FAILS(tensor(T_CODE_99), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER, "from_dlpack: ");
  IMPORT_FAILS(tensor(T_LANES_4), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER, "from_dlpack: ");
  IMPORT_FAILS(tensor(T_BITS_7), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER, "from_dlpack: ");
  IMPORT_FAILS(tensor(T_DEVICE_99), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER, "99");
  IMPORT_FAILS(tensor(T_SIM_99), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER, "99");
  IMPORT_FAILS(tensor(T_DATA_NULL), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER,
               "from_dlpack: data is NULL but the tensor has 4 elements");
  IMPORT_FAILS(tensor(T_OFFSET_HUGE), NULL, NULL, &o_arr, 1, DLRUN_ERR_BUFFER, "byte_offset");
  IMPORT_FAILS(tensor(T_GOOD), NULL, &on_split, &o_arr, 1, DLRUN_ERR_VALUE,
               "from_dlpack can only unpack a dlpack tensor onto a singular device, but a "
               "Sharding with 2 devices was provided.");
  IMPORT_FAILS(tensor(T_GOOD), NULL, &copy_7, &o_arr, 1, DLRUN_ERR_VALUE,
               "dlrun_import: copy must be DLRUN_COPY_IF_NEEDED (0), DLRUN_COPY_NEVER (1) or "
               "DLRUN_COPY_ALWAYS (2), got 7");
  IMPORT_FAILS(tensor(T_GOOD), NULL, &elsewhere, &o_arr, 1, DLRUN_ERR_VALUE,
               "from_dlpack: the target device belongs to another runtime");
  IMPORT_FAILS(NULL, tensor_v(1), NULL, NULL, 0, DLRUN_ERR_VALUE, "out");
  /* An unknown major version: the one case where the deleter runs (once). */
  TEST("dlrun_import of major version 99 calls the deleter once") {
    outcome o_;
    RUN(o_, import_result(dlrun_import(rt, NULL, tensor_v(99), NULL, &o_arr, NULL)));
    if (survived("dlrun_import", &o_)) {
      CHECK(o_.ret / 100 == DLRUN_ERR_BUFFER, "returned %s; message \"%s\"",
            status_text(o_.ret / 100), o_.msg);
      CHECK(o_.ret % 100 == 1, "the deleter ran %lld times, expected once", o_.ret % 100);
    }
  }
  TEST("dlrun_import with NULL options imports with the defaults") {
    outcome o_;
    RUN(o_, import_result(dlrun_import(rt, tensor(T_GOOD), NULL, NULL, &o_arr, NULL)));
    if (survived("dlrun_import", &o_))
      CHECK(o_.ret / 100 == DLRUN_OK, "returned %s; message \"%s\"", status_text(o_.ret / 100),
            o_.msg);
  }
  TEST("dlrun_import into a NULL runtime") {
    outcome o_;
    RUN(o_, import_result(dlrun_import(NULL, tensor(T_GOOD), NULL, NULL, &o_arr, NULL)));
    if (survived("dlrun_import", &o_)) {
      CHECK(o_.ret / 100 == DLRUN_ERR_VALUE, "returned %s", status_text(o_.ret / 100));
      CHECK(o_.ret % 100 == 0, "the deleter ran");
    }
  }
}

int main(void) {
  TEST("setup: a runtime sim:2,cpu:1 with 1 MiB per device, and fixtures") {
    CHECK(setup(), "setup failed");
  }
  if (!rt || !live) return check_summary("catalogue");
  test_core();
  test_runtime();
  test_sharding();
  test_array();
  test_deleted();
  test_dlpack();

  TEST("the parent's runtime is intact after the catalogue") {
    float out[4] = {0};
    CHECK(dlrun_array_read(live, 0, sizeof out, out) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(out[3] == 4.0f, "data changed");
  }
  dlrun_array_release(live);
  dlrun_array_release(dead);
  dlrun_array_release(dead_split);
  dlrun_sharding_release(split);
  dlrun_sharding_release(single);
  dlrun_sharding_release(other_single);
  dlrun_mesh_release(mesh);
  TEST("every device memory is empty once the fixtures are released") {
    for (size_t i = 0; i < dlrun_device_count(rt, "sim"); i++) dlrun_device_synchronize(dlrun_device_get(rt, "sim", i));
    CHECK(pool_bytes() == 0, "%llu bytes still in use", pool_bytes());
    CHECK(dlrun_live_exports(rt) == 0, "%lld live exports", (long long)dlrun_live_exports(rt));
  }
  dlrun_runtime_release(rt2);
  dlrun_runtime_release(rt);
  return check_summary("catalogue");
}
