/* The OpenCL platform module (libdlrun_opencl.so) on its own: dlopened and
 * driven through its vtable, as the device layer will drive it, on pocl's
 * pthread devices (POCL_DEVICES="pthread pthread pthread pthread"). Skips
 * (passing) when the module was not built or no OpenCL device is here.
 *
 * The services are the library's (dlrun_platform_services_get), with the
 * device functions answering for this file's fake devices, and timelines
 * checked to complete their points in order. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/platform.h"

/* ---- services: the library's, on fake devices ---- */

typedef struct fake_device {
  void *impl;
  const dlrun_platform *pl;
  char name[64];
} fake_device;

static void *t_device_impl(const dlrun_device *dev) { return ((const fake_device *)dev)->impl; }
static const dlrun_platform *t_device_platform(const dlrun_device *dev) {
  return ((const fake_device *)dev)->pl;
}
static const char *t_device_name(const dlrun_device *dev) {
  return ((const fake_device *)dev)->name;
}

static dlrun_platform_services services;

/* Each timeline's last completed point: completions must come in order,
 * one point after the other (the module drains its queue's ops in order). */
static struct {
  pthread_mutex_t m;
  const dlrun_timeline *tl[16];
  uint64_t last[16];
  int skipped;
} order = {.m = PTHREAD_MUTEX_INITIALIZER};

static void t_timeline_complete(dlrun_timeline *tl, dlrun_event point, dlrun_status st,
                                const char *msg) {
  pthread_mutex_lock(&order.m);
  int i = 0;
  while (i < 16 && order.tl[i] && order.tl[i] != tl) i++;
  if (i < 16) {
    order.tl[i] = tl;
    if ((uint64_t)point.handle[1] != order.last[i] + 1) order.skipped++;
    order.last[i] = (uint64_t)point.handle[1];
  }
  pthread_mutex_unlock(&order.m);
  dlrun_platform_services_get()->timeline_complete(tl, point, st, msg);
}

static void pick_services(void) {
  services = *dlrun_platform_services_get();
  services.device_impl = t_device_impl;
  services.device_platform = t_device_platform;
  services.device_name = t_device_name;
  services.timeline_complete = t_timeline_complete;
}

/* The calling thread's last failure message, as the services keep it. */
#define last_msg (services.last_error())

/* Another platform's events (as sim's): points of a timeline of its own. */
static bool f_query(dlrun_event ev) { return services.timeline_query(ev); }
static dlrun_status f_wait(dlrun_event ev) { return services.timeline_wait(ev); }
static dlrun_status f_then(dlrun_event ev, void (*fn)(void *), void *ctx) {
  return services.timeline_then(ev, fn, ctx);
}

/* ---- the module ---- */

static const dlrun_platform *pl;
static fake_device devs[4];
static dlrun_device *dev[4];
static const dlrun_platform foreign = {.abi = DLRUN_PLATFORM_ABI,
                                       .name = "foreign",
                                       .event_query = f_query,
                                       .event_wait = f_wait,
                                       .event_then = f_then};

static const dlrun_platform *open_module(const char *path, void **handle) {
  *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!*handle) return NULL;
  dlrun_platform_module_open_fn open = (dlrun_platform_module_open_fn)(uintptr_t)dlsym(
      *handle, "dlrun_platform_module_open");
  const dlrun_platform *out = NULL;
  char err[200] = "";
  if (!open || open(DLRUN_PLATFORM_ABI, &services, &out, err, sizeof err)) return NULL;
  return out;
}

/* ---- helpers ---- */

static dlrun_status wait_ev(dlrun_event ev) { return pl->event_wait(ev); }

static const int64_t zeros[5] = {0, 0, 0, 0, 0};

/* Copy n bytes of dev d's memory at addr to host, on dev q's queue. */
static dlrun_status read_bytes(int q, int d, dlrun_memory_kind kind, const void *addr,
                               void *host, int64_t n) {
  const int64_t one = 1, hi = n;
  dlrun_copy_piece pc = {.src = {dev[d], kind, addr, zeros, &one}, .lo = zeros, .hi = &hi};
  dlrun_copy_op op = {.esize = 1, .ndim = 1, .dst = {NULL, 0, host, zeros, &one}, .npieces = 1,
                      .pieces = &pc};
  dlrun_event ev;
  dlrun_status st = pl->copy_box(dev[q], &op, NULL, 0, &ev);
  return st ? st : wait_ev(ev);
}

/* Copy n host bytes to dev d's memory at addr, on dev q's queue. */
static dlrun_status write_bytes(int q, int d, dlrun_memory_kind kind, void *addr,
                                const void *host, int64_t n, const dlrun_event *waits,
                                size_t nwaits, dlrun_event *done) {
  const int64_t one = 1, hi = n;
  dlrun_copy_piece pc = {.src = {NULL, 0, host, zeros, &one}, .lo = zeros, .hi = &hi};
  dlrun_copy_op op = {.esize = 1, .ndim = 1, .dst = {dev[d], kind, addr, zeros, &one},
                      .npieces = 1, .pieces = &pc};
  return pl->copy_box(dev[q], &op, waits, nwaits, done);
}

/* An array laid out with element strides `st` over a block: the byte
 * offset of element idx from element [0...]. */
static int64_t elem_off(int nd, const int64_t *idx, const int64_t *st, size_t esize) {
  int64_t o = 0;
  for (int k = 0; k < nd; k++) o += idx[k] * st[k];
  return o * (int64_t)esize;
}

/* The reference copy of box [lo, hi) on the host. */
static void ref_copy(int nd, size_t esize, const int64_t *lo, const int64_t *hi, unsigned char *dst,
                     const int64_t *dst_st, const unsigned char *src, const int64_t *src_st) {
  int64_t idx[5];
  memcpy(idx, lo, sizeof(int64_t) * (size_t)nd);
  for (;;) {
    memcpy(dst + elem_off(nd, idx, dst_st, esize), src + elem_off(nd, idx, src_st, esize), esize);
    int k = nd - 1;
    for (; k >= 0; k--) {
      if (++idx[k] < hi[k]) break;
      idx[k] = lo[k];
    }
    if (k < 0) return;
  }
}

/* The span of an array of shape `shape` with strides st: the lowest
 * element offset (<= 0) and one past the highest byte. */
static void span_of(int nd, const int64_t *shape, const int64_t *st, size_t esize, int64_t *low,
                    int64_t *high) {
  *low = 0;
  *high = (int64_t)esize;
  for (int k = 0; k < nd; k++) {
    int64_t reach = (shape[k] - 1) * st[k] * (int64_t)esize;
    if (reach < 0) *low += reach;
    else *high += reach;
  }
}

/* One layout case: host A -> dev0 -> dev1 -> host B over box [lo, hi). */
typedef struct layout_case {
  int nd;
  size_t esize;
  int64_t shape[5], lo[5], hi[5];
  int64_t host_st[5], dev0_st[5], dev1_st[5], out_st[5];
  bool one_memory; /* the middle copy stays in dev0's memory (another place of it) */
} layout_case;

static unsigned char *dev_mem[4]; /* device memory reserved per device */
#define DEV_BYTES (8u << 20)

static void run_layout(const layout_case *c) {
  int nd = c->nd;
  size_t es = c->esize;
  int64_t lows[4], highs[4];
  const int64_t *sts[4] = {c->host_st, c->dev0_st, c->dev1_st, c->out_st};
  for (int i = 0; i < 4; i++) span_of(nd, c->shape, sts[i], es, &lows[i], &highs[i]);
  unsigned char *a = malloc((size_t)(highs[0] - lows[0]));
  unsigned char *b = malloc((size_t)(highs[3] - lows[3]));
  unsigned char *ref = malloc((size_t)(highs[3] - lows[3]));
  for (int64_t i = 0; i < highs[0] - lows[0]; i++) a[i] = (unsigned char)(i * 7 + 3);
  memset(b, 0xEE, (size_t)(highs[3] - lows[3]));
  memset(ref, 0xEE, (size_t)(highs[3] - lows[3]));
  unsigned char *a0 = a - lows[0], *b0 = b - lows[3], *r0 = ref - lows[3];
  /* device blocks start 4 KiB in, element [0...] placed past the low reach */
  int md = c->one_memory ? 0 : 1; /* the device whose memory the middle layout is in */
  unsigned char *d0 = dev_mem[0] + 4096 - lows[1], *d1 = dev_mem[md] + (1 << 20) - lows[2];
  ref_copy(nd, es, c->lo, c->hi, r0, c->out_st, a0, c->host_st);

  dlrun_copy_piece p0 = {.src = {NULL, 0, a0, zeros, c->host_st}, .lo = c->lo, .hi = c->hi};
  dlrun_copy_op op0 = {.esize = es, .ndim = nd, .dst = {dev[0], DLRUN_MEM_DEVICE, d0, zeros,
                                                         c->dev0_st}, .npieces = 1, .pieces = &p0};
  dlrun_copy_piece p1 = {.src = {dev[0], DLRUN_MEM_DEVICE, d0, zeros, c->dev0_st}, .lo = c->lo,
                         .hi = c->hi};
  dlrun_copy_op op1 = {.esize = es, .ndim = nd, .dst = {dev[md], DLRUN_MEM_DEVICE, d1, zeros,
                                                         c->dev1_st}, .npieces = 1, .pieces = &p1};
  dlrun_copy_piece p2 = {.src = {dev[md], DLRUN_MEM_DEVICE, d1, zeros, c->dev1_st}, .lo = c->lo,
                         .hi = c->hi};
  dlrun_copy_op op2 = {.esize = es, .ndim = nd, .dst = {NULL, 0, b0, zeros, c->out_st},
                       .npieces = 1, .pieces = &p2};
  dlrun_event e0, e1, e2;
  dlrun_status st = pl->copy_box(dev[0], &op0, NULL, 0, &e0);
  CHECK(!st, "host->dev0: %s", last_msg);
  if (!st) st = pl->copy_box(dev[1], &op1, &e0, 1, &e1); /* on dev1, after dev0's event */
  CHECK(!st, "dev0->dev1: %s", last_msg);
  if (!st) st = pl->copy_box(dev[1], &op2, &e1, 1, &e2);
  CHECK(!st, "dev1->host: %s", last_msg);
  if (!st) st = wait_ev(e2);
  CHECK(!st, "wait: %s", last_msg);
  int64_t n = highs[3] - lows[3], bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (b[i] != ref[i]) bad = i;
  CHECK(bad < 0, "rank %d esize %zu: byte %lld is %d, expected %d", nd, es, (long long)bad,
        bad >= 0 ? b[bad] : 0, bad >= 0 ? ref[bad] : 0);
  free(a);
  free(b);
  free(ref);
}

/* What a fill writes, computed here as the host's loop does (element i of
 * a sequence is start + (first + i) * step, stored in the dtype). */
static void ref_fill(void *data, uint64_t nbytes, const dlrun_fill *f) {
  unsigned char *p = data;
  for (uint64_t i = 0; i < nbytes / f->esize; i++) {
    if (!f->sequence) {
      memcpy(p + i * f->esize, f->pattern, f->esize);
      continue;
    }
    int64_t k = f->first + (int64_t)i;
    dlrun_scalar v = f->integral
                         ? (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = f->start.i + k * f->step.i}
                         : (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT,
                                          .re = f->start.re + (double)k * f->step.re};
    dlrun_dtype_store(f->dtype, p + i * f->esize, &v);
  }
}

/* Fill n elements at dev0 offset `at` with f and compare to the reference. */
static void run_fill(const char *what, const dlrun_fill *f, size_t at, size_t n) {
  size_t nbytes = n * f->esize;
  unsigned char *got = malloc(nbytes + 64), *want = malloc(nbytes);
  ref_fill(want, nbytes, f);
  dlrun_event ev;
  dlrun_status st = pl->fill(dev[0], DLRUN_MEM_DEVICE, dev_mem[0] + at, nbytes, f, NULL, 0, &ev);
  if (!st) st = wait_ev(ev);
  CHECK(!st, "%s: %s", what, last_msg);
  if (!st) st = read_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0] + at, got, (int64_t)nbytes);
  CHECK(!st, "%s: read: %s", what, last_msg);
  size_t bad = SIZE_MAX;
  for (size_t i = 0; i < nbytes && bad == SIZE_MAX; i++)
    if (got[i] != want[i]) bad = i;
  CHECK(bad == SIZE_MAX, "%s: byte %zu is 0x%02x, expected 0x%02x", what, bad,
        bad != SIZE_MAX ? got[bad] : 0, bad != SIZE_MAX ? want[bad] : 0);
  free(got);
  free(want);
}

static dlrun_fill sequence(dlrun_dtype dt, bool integral, double start, double step,
                           int64_t first) {
  dlrun_fill f = {.sequence = true, .esize = dlrun_dtype_get(dt)->size, .dtype = dt,
                  .integral = integral, .first = first};
  if (integral) {
    f.start = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = (int64_t)start};
    f.step = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = (int64_t)step};
  } else {
    f.start = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = start};
    f.step = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = step};
  }
  return f;
}

/* Two threads enqueue copies on devices 0 and 1, each after the other's
 * latest event (cross-device native waits, completions racing). */
typedef struct race {
  pthread_mutex_t m;
  dlrun_event last[2];
  int failures;
} race;
static race the_race = {.m = PTHREAD_MUTEX_INITIALIZER};

static void *racer(void *arg) {
  int me = (int)(intptr_t)arg, other = 1 - me;
  static unsigned char srcs[2][256]; /* read by the copies after this returns */
  unsigned char *src = srcs[me];
  memset(src, me + 1, 256);
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock(&the_race.m);
    dlrun_event w = the_race.last[other];
    pthread_mutex_unlock(&the_race.m);
    dlrun_event ev;
    unsigned char *at = dev_mem[me] + 32768 + (size_t)(i % 8) * 256;
    dlrun_status st = write_bytes(me, me, DLRUN_MEM_DEVICE, at, src, 256, &w, 1, &ev);
    pthread_mutex_lock(&the_race.m);
    if (st) the_race.failures++;
    else the_race.last[me] = ev;
    pthread_mutex_unlock(&the_race.m);
  }
  return NULL;
}

/* probe in a child whose ICD loader finds no vendor: its reason. */
static void probe_without_icd(const char *path, char *why, size_t n) {
  int fd[2];
  why[0] = '\0';
  if (pipe(fd)) return;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    setenv("OCL_ICD_VENDORS", "/nonexistent", 1);
    void *h;
    const dlrun_platform *p = open_module(path, &h);
    char buf[200] = "module did not open";
    size_t nd = 0;
    if (p && p->probe(false, &nd, buf, sizeof buf)) snprintf(buf, sizeof buf, "available");
    ssize_t w = write(fd[1], buf, strlen(buf));
    _exit(w < 0);
  }
  close(fd[1]);
  ssize_t r = read(fd[0], why, n - 1);
  why[r > 0 ? r : 0] = '\0';
  close(fd[0]);
  waitpid(pid, NULL, 0);
}

/* Whether the host may read addr: its mapping's permissions in
 * /proc/self/maps (a read of a "---p" mapping faults). */
static bool host_can_read(const void *addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  bool readable = false;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && (uintptr_t)addr >= lo &&
        (uintptr_t)addr < hi)
      readable = perms[0] == 'r';
  }
  if (f) fclose(f);
  return readable;
}

int main(int argc, char **argv) {
  (void)argc;
  setenv("POCL_DEVICES", "pthread pthread pthread pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0); /* 1 GiB: 256 MiB buffers at most */
  char path[4096];
  snprintf(path, sizeof path, "%s", argv[0]);
  char *slash = strrchr(path, '/');
  snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0),
           "../libdlrun_opencl.so");
  pick_services();
  if (access(path, R_OK)) {
    printf("skip - %s not built (no OpenCL headers or ICD loader)\n", path);
    return check_summary("opencl_module");
  }

  TEST("probe: no ICD gives clGetPlatformIDs' -1001 as the reason") {
    char why[256];
    probe_without_icd(path, why, sizeof why);
    CHECK(!strcmp(why, "no OpenCL driver (ICD) is installed (clGetPlatformIDs: -1001)"), "%s",
          why);
  }

  void *handle;
  pl = open_module(path, &handle);
  TEST("open: the vtable") {
    CHECK(pl != NULL, "%s", dlerror());
    if (!pl) return check_summary("opencl_module");
    CHECK(!strcmp(pl->name, "opencl") && !strcmp(pl->class_name, "OpenclDevice"), "%s",
          pl->name);
    CHECK(pl->is_accelerator && pl->abi == DLRUN_PLATFORM_ABI, "abi %d", pl->abi);
    dlrun_platform_module_open_fn open = (dlrun_platform_module_open_fn)(uintptr_t)dlsym(
        handle, "dlrun_platform_module_open");
    const dlrun_platform *out = NULL;
    char err[200];
    CHECK(open(DLRUN_PLATFORM_ABI + 1, &services, &out, err, sizeof err) != 0 && !out,
          "another ABI accepted");
    CHECK_STR_CONTAINS(err, "platform ABI");
  }

  size_t ndev = 0;
  char no_device[256] = "";
  if (!pl->probe(false, &ndev, no_device, sizeof no_device) || ndev < 4) {
    /* an ICD loader with no driver (pocl is installed by scripts/deps.sh) */
    printf("skip - %zu OpenCL devices, 4 needed: %s\n", ndev, no_device);
    return check_summary("opencl_module");
  }
  TEST("probe: 4 pthread devices by name, none for auto") {
    char why[256] = "";
    CHECK(pl->probe(false, &ndev, why, sizeof why) && ndev == 4, "%zu devices: %s", ndev, why);
    size_t na = 99;
    CHECK(!pl->probe(true, &na, why, sizeof why), "auto took %zu devices", na);
    CHECK_STR_CONTAINS(why, "has no GPU or accelerator");
    setenv("DLRUN_OPENCL_PLATFORM", "7", 1);
    CHECK(!pl->probe(false, &na, why, sizeof why), "platform 7 accepted");
    CHECK_STR_CONTAINS(why, "DLRUN_OPENCL_PLATFORM=7 is not a platform index (have 0: ");
    setenv("DLRUN_OPENCL_PLATFORM", "no such driver", 1);
    CHECK(!pl->probe(false, &na, why, sizeof why), "a bad name accepted");
    CHECK_STR_CONTAINS(why, "DLRUN_OPENCL_PLATFORM=no such driver names no OpenCL platform");
    setenv("DLRUN_OPENCL_PLATFORM", "portable", 1);
    CHECK(pl->probe(false, &na, why, sizeof why) && na == 4, "by name: %s", why);
    setenv("DLRUN_OPENCL_PLATFORM", "0", 1);
    CHECK(pl->probe(false, &na, why, sizeof why) && na == 4, "by index: %s", why);
    unsetenv("DLRUN_OPENCL_PLATFORM");
  }

  TEST("device_init: 4 devices, their memory") {
    for (int i = 0; i < 4; i++) {
      devs[i].pl = pl;
      snprintf(devs[i].name, sizeof devs[i].name, "OpenclDevice(id=%d)", i);
      dev[i] = (dlrun_device *)&devs[i];
      dlrun_status st = pl->device_init(dev[i], (size_t)i, 4, &devs[i].impl);
      CHECK(!st, "init %d: %s", i, last_msg);
    }
    dlrun_memory_info mi;
    pl->memory_info(dev[0], DLRUN_MEM_DEVICE, &mi);
    CHECK(mi.total > 0 && mi.max_allocation > 0 && mi.max_allocation <= mi.total && !mi.host_ram,
          "total %llu max %llu", (unsigned long long)mi.total,
          (unsigned long long)mi.max_allocation);
    uint64_t cap = pl->default_capacity(dev[0], DLRUN_MEM_DEVICE, 4);
    CHECK(cap == (mi.total / 2 / 4 & ~4095ull), "capacity %llu of %llu", (unsigned long long)cap,
          (unsigned long long)mi.total); /* pocl's devices share host RAM */
    pl->memory_info(dev[0], DLRUN_MEM_PINNED_HOST, &mi);
    CHECK(mi.host_ram && pl->is_host_memory(dev[0], DLRUN_MEM_PINNED_HOST) &&
              !pl->is_host_memory(dev[0], DLRUN_MEM_DEVICE),
          "pinned_host is host memory");
  }

  TEST("reserve: device addresses are not readable on the host, owns") {
    for (int i = 0; i < 2; i++) {
      void *b = NULL;
      CHECK(!pl->reserve(dev[i], DLRUN_MEM_DEVICE, DEV_BYTES, &b), "%s", last_msg);
      dev_mem[i] = b;
    }
    CHECK(!host_can_read(dev_mem[0] + 100), "device memory is readable on the host");
    CHECK(pl->owns(dev[0], DLRUN_MEM_DEVICE, dev_mem[0] + 10, 100), "owns");
    CHECK(!pl->owns(dev[0], DLRUN_MEM_DEVICE, dev_mem[1], 1), "owns dev1's memory");
    CHECK(!pl->owns(dev[0], DLRUN_MEM_DEVICE, dev_mem[0] + DEV_BYTES - 4, 8), "owns past the end");
  }

  TEST("copy: host -> dev0 -> dev1 -> host, 1-D to 5-D boxes, odd and negative strides") {
    const layout_case cases[] = {
        {1, 4, {100}, {3}, {97}, {1}, {1}, {1}, {1}, false},
        {1, 2, {50}, {0}, {50}, {3}, {-1}, {2}, {-5}, false},
        /* dev0 -> dev1 reverses: the kernel */
        {1, 8, {300}, {5}, {290}, {1}, {1}, {-1}, {1}, false},
        /* within one buffer, other pitches (OpenCL's rects refuse them): the kernel, rows */
        {2, 4, {6, 10}, {1, 0}, {6, 9}, {10, 1}, {10, 1}, {16, 1}, {10, 1}, true},
        {5, 2, {2, 3, 2, 3, 4}, {0, 0, 0, 0, 0}, {2, 3, 2, 3, 4}, {72, 24, 12, 4, 1},
         {200, 60, 25, 7, 1}, {150, 48, 20, 5, 1}, {72, 24, 12, 4, 1}, true},
        /* host -> dev0 reverses, transposes: staged, the kernel; dev1 -> host: back */
        {1, 4, {300}, {0}, {300}, {-1}, {1}, {1}, {1}, false},
        {2, 4, {20, 30}, {1, 2}, {19, 30}, {1, 20}, {30, 1}, {30, 1}, {-1, -20}, false},
        {2, 2, {20, 30}, {0, 0}, {20, 30}, {30, 1}, {30, 1}, {30, 1}, {-1, -20}, false},
        {3, 2, {6, 7, 8}, {0, 1, 0}, {6, 7, 8}, {56, 8, 1}, {1, 6, 42}, {-56, 8, -1}, {56, 8, 1},
         false},
        {2, 4, {7, 9}, {1, 2}, {6, 9}, {9, 1}, {11, 1}, {1, 7}, {-10, 1}, false},
        {2, 8, {5, 6}, {0, 0}, {5, 6}, {6, 1}, {-6, -1}, {6, 1}, {1, 5}, false},
        {3, 4, {4, 5, 6}, {1, 0, 1}, {4, 5, 5}, {30, 6, 1}, {48, 8, 1}, {1, 4, 20}, {-40, 8, -1},
         false},
        {3, 1, {3, 4, 5}, {0, 1, 0}, {3, 4, 5}, {20, 5, 1}, {-7, -100, 21}, {20, 5, 1}, {33, 7, 1},
         false},
        {4, 2, {3, 4, 5, 6}, {1, 0, 1, 2}, {3, 3, 5, 6}, {120, 30, 6, 1}, {160, 35, 7, 1},
         {1, 3, 12, 60}, {-200, 40, -8, 1}, false},
        {4, 16, {2, 3, 2, 5}, {0, 0, 0, 0}, {2, 3, 2, 5}, {30, 10, 5, 1}, {30, 10, 5, 1},
         {-31, 10, -5, 1}, {1, 2, 6, 12}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_layout(&cases[i]);
  }

  TEST("copy: several pieces into one destination, and a pinned_host end") {
    void *pin = NULL;
    CHECK(!pl->reserve(dev[0], DLRUN_MEM_PINNED_HOST, 1 << 20, &pin), "%s", last_msg);
    CHECK(pin && host_can_read(pin), "pinned_host memory is host memory");
    unsigned char src[64], out[64];
    for (int i = 0; i < 64; i++) src[i] = (unsigned char)(200 - i);
    memset(pin, 0, 64);
    const int64_t one = 1, lo0 = 0, hi0 = 32, lo1 = 32, hi1 = 64;
    dlrun_copy_piece pcs[2] = {
        {.src = {NULL, 0, src, zeros, &one}, .lo = &lo0, .hi = &hi0},
        {.src = {NULL, 0, src, zeros, &one}, .lo = &lo1, .hi = &hi1},
    };
    dlrun_copy_op op = {.esize = 1, .ndim = 1, .dst = {dev[0], DLRUN_MEM_PINNED_HOST, pin, zeros,
                                                       &one}, .npieces = 2, .pieces = pcs};
    dlrun_event ev;
    dlrun_status st = pl->copy_box(dev[0], &op, NULL, 0, &ev);
    if (!st) st = wait_ev(ev);
    CHECK(!st && !memcmp(pin, src, 64), "host -> pinned_host: %s", last_msg);
    st = write_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0] + 512, pin, 64, NULL, 0, &ev);
    if (!st) st = wait_ev(ev);
    if (!st) st = read_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0] + 512, out, 64);
    CHECK(!st && !memcmp(out, src, 64), "pinned_host -> device -> host: %s", last_msg);
    pl->release(dev[0], DLRUN_MEM_PINNED_HOST, pin, 1 << 20);
  }

  TEST("copy: big copies, split over a CPU device's two queues, keep the queue's order") {
    const int64_t n = DEV_BYTES - 4099, one = 1, hi = n; /* an odd size, over 4 MiB */
    unsigned char *a = malloc((size_t)n), *b = malloc((size_t)n), *out = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
      a[i] = (unsigned char)(i * 7);
      b[i] = (unsigned char)(i * 13 + 5);
    }
    memset(out, 0, (size_t)n);
    /* a then b into dev0, queued back to back: b must be what is left */
    dlrun_event e1, e2, e3;
    dlrun_status st = write_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0], a, n, NULL, 0, &e1);
    if (!st) st = write_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0], b, n, NULL, 0, &e2);
    dlrun_copy_piece pc = {.src = {dev[0], DLRUN_MEM_DEVICE, dev_mem[0], zeros, &one},
                           .lo = zeros, .hi = &hi};
    dlrun_copy_op op = {.esize = 1, .ndim = 1,
                        .dst = {dev[1], DLRUN_MEM_DEVICE, dev_mem[1], zeros, &one},
                        .npieces = 1, .pieces = &pc};
    if (!st) st = pl->copy_box(dev[1], &op, &e2, 1, &e3); /* dev0 -> dev1 after b */
    if (!st) st = read_bytes(1, 1, DLRUN_MEM_DEVICE, dev_mem[1], out, n);
    CHECK(!st && !memcmp(out, b, (size_t)n), "host -> dev0 twice -> dev1 -> host: %s", last_msg);
    CHECK(!st && pl->event_query(e1) && pl->event_query(e3), "every point complete");
    free(a);
    free(b);
    free(out);
  }

  TEST("copy and fill between host memories: host work in the queue's order, seeing every "
       "write") {
    unsigned char *pin[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
      CHECK(!pl->reserve(dev[i], DLRUN_MEM_PINNED_HOST, 1 << 20, (void **)&pin[i]), "%s",
            last_msg);
    const int64_t one = 1, lo = 0, hi = 4096;
    dlrun_copy_piece pc = {.src = {dev[0], DLRUN_MEM_PINNED_HOST, pin[0], zeros, &one},
                           .lo = &lo, .hi = &hi};
    dlrun_copy_op op = {.esize = 1, .ndim = 1,
                        .dst = {dev[1], DLRUN_MEM_PINNED_HOST, pin[1], zeros, &one},
                        .npieces = 1, .pieces = &pc};
    for (int round = 0; round < 3; round++) {
      memset(pin[0], 0x30 + round, 4096); /* written by the host between copies */
      dlrun_event ev;
      dlrun_status st = pl->copy_box(dev[round % 2], &op, NULL, 0, &ev);
      if (!st) st = wait_ev(ev);
      CHECK(!st && pin[1][0] == 0x30 + round && pin[1][4095] == 0x30 + round,
            "round %d: %02x %s", round, pin[1][0], st ? last_msg : "");
    }
    dlrun_fill f = {.esize = 2, .pattern = {0xAB, 0xCD}};
    dlrun_event fe, ce;
    dlrun_status st = pl->fill(dev[0], DLRUN_MEM_PINNED_HOST, pin[0], 4096, &f, NULL, 0, &fe);
    if (!st) st = pl->copy_box(dev[1], &op, &fe, 1, &ce); /* on dev1, after dev0's fill */
    if (!st) st = wait_ev(ce);
    CHECK(!st && pin[1][0] == 0xAB && pin[1][4095] == 0xCD, "fill then copy: %02x %02x %s",
          pin[1][0], pin[1][4095], st ? last_msg : "");
    for (int i = 0; i < 2; i++) pl->release(dev[i], DLRUN_MEM_PINNED_HOST, pin[i], 1 << 20);
  }

  TEST("fill: repeated elements of every size, aligned and not") {
    for (size_t es = 1; es <= 16; es *= 2) {
      dlrun_fill f = {.esize = es};
      for (size_t i = 0; i < es; i++) f.pattern[i] = (unsigned char)(0x11 * (i + 1));
      char what[64];
      snprintf(what, sizeof what, "%zu-byte pattern", es);
      run_fill(what, &f, 4096, 1000);
      snprintf(what, sizeof what, "%zu-byte pattern at an odd offset", es);
      run_fill(what, &f, 8192 + 1, 333);
      memset(f.pattern, 0x7C, es);
      snprintf(what, sizeof what, "%zu-byte uniform pattern", es);
      run_fill(what, &f, 16384, 777);
    }
  }

  TEST("fill: sequences of every dtype (kernels), at an offset of the sequence") {
    struct {
      dlrun_dtype dt;
      bool integral;
      double start, step;
    } seqs[] = {
        {DLRUN_BOOL, true, 0, 1},          {DLRUN_INT8, true, -100, 1},
        {DLRUN_INT16, true, 30000, -29},   {DLRUN_INT32, true, -7, 123457},
        {DLRUN_INT64, true, -5e15, 3e12},  {DLRUN_UINT8, true, 3, 1},
        {DLRUN_UINT16, true, 60000, -11},  {DLRUN_UINT32, true, 7, 4000000},
        {DLRUN_UINT64, true, 1, 1e15},     {DLRUN_INT32, false, -300, 3},
        {DLRUN_UINT64, false, 2, 5e14},    {DLRUN_FLOAT16, false, -3.3, 0.0123},
        {DLRUN_BFLOAT16, false, 1.1, 0.37}, {DLRUN_FLOAT32, false, 0.1, 1.0 / 3},
        {DLRUN_FLOAT64, false, 1e-3, 2.5e-7}, {DLRUN_COMPLEX64, false, -1, 0.3},
        {DLRUN_COMPLEX128, false, 5, -0.1},
    };
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
      dlrun_fill f = sequence(seqs[i].dt, seqs[i].integral, seqs[i].start, seqs[i].step, 17);
      char what[64];
      snprintf(what, sizeof what, "arange %s%s", dlrun_dtype_get(seqs[i].dt)->name,
               seqs[i].integral ? "" : " (doubles)");
      size_t n = seqs[i].dt == DLRUN_BOOL                                   ? 2
                 : seqs[i].dt == DLRUN_INT8 || seqs[i].dt == DLRUN_UINT8 ? 200
                                                                         : 900;
      f.first = seqs[i].dt == DLRUN_BOOL ? 0 : 17;
      run_fill(what, &f, 65536, n);
    }
    dlrun_fill f = sequence(DLRUN_INT16, true, 5, 3, 0);
    run_fill("arange int16 at an odd offset (computed on the host)", &f, 4097, 100);
  }

  TEST("DLPack: export as (cl_mem, offset), import back, refuse unknown pointers") {
    int32_t type, id;
    pl->dlpack_device(dev[2], DLRUN_MEM_DEVICE, &type, &id);
    CHECK(type == 4 && id == 2, "(%d, %d)", type, id);
    pl->dlpack_device(dev[2], DLRUN_MEM_PINNED_HOST, &type, &id);
    CHECK(type == 1 && id == 0, "(%d, %d)", type, id);
    dlrun_memory_kind k = DLRUN_MEM_PINNED_HOST;
    CHECK(pl->dlpack_lookup(4, 3, 4, &k) == 3 && k == DLRUN_MEM_DEVICE, "lookup (4, 3)");
    CHECK(pl->dlpack_lookup(4, 4, 4, &k) == -1 && pl->dlpack_lookup(2, 0, 4, &k) == -1,
          "lookup refuses (4, 4) and (2, 0)");
    void *data = NULL, *addr = NULL;
    uint64_t off = 0;
    CHECK(!pl->export_data(dev[0], DLRUN_MEM_DEVICE, dev_mem[0] + 12288, &data, &off), "%s",
          last_msg);
    CHECK(data && off == 12288, "offset %llu", (unsigned long long)off);
    CHECK(!pl->import_data(dev[0], DLRUN_MEM_DEVICE, data, off, 256, &addr), "%s", last_msg);
    CHECK(addr == dev_mem[0] + 12288, "import gave %p, not %p", addr, (void *)(dev_mem[0] + 12288));
    int local = 0;
    dlrun_status st = pl->import_data(dev[0], DLRUN_MEM_DEVICE, &local, 0, 4, &addr);
    CHECK(st == DLRUN_ERR_BUFFER, "an unknown pointer: status %d", st);
    CHECK_STR_CONTAINS(last_msg, "is not an OpenCL buffer of dlrun");
    st = pl->import_data(dev[1], DLRUN_MEM_DEVICE, data, off, 256, &addr);
    CHECK(st == DLRUN_ERR_BUFFER, "another device's buffer: status %d", st);
    CHECK_STR_CONTAINS(last_msg, "belongs to OpenclDevice(id=0)");
    st = pl->import_data(dev[0], DLRUN_MEM_DEVICE, data, DEV_BYTES - 8, 16, &addr);
    CHECK(st == DLRUN_ERR_BUFFER, "past the end: status %d", st);
    CHECK_STR_CONTAINS(last_msg, "past the end of the OpenCL buffer");
  }

  TEST("segments: a range of several buffers of the maximum allocation") {
    dlrun_memory_info mi;
    pl->memory_info(dev[2], DLRUN_MEM_DEVICE, &mi);
    uint64_t seg = mi.max_allocation, size = 2 * seg + (1 << 20);
    CHECK(seg == 256u << 20, "max allocation %llu (POCL_MEMORY_LIMIT=1: 256 MiB)",
          (unsigned long long)seg);
    unsigned char *base = NULL;
    CHECK(!pl->reserve(dev[2], DLRUN_MEM_DEVICE, size, (void **)&base), "%s", last_msg);
    /* a sequence across the first boundary: two commands, the second one
     * starting at element 1024 of the sequence */
    dlrun_fill f = sequence(DLRUN_INT32, true, 7, 3, 0);
    dlrun_event ev;
    dlrun_status st = pl->fill(dev[2], DLRUN_MEM_DEVICE, base + seg - 4096, 8192, &f, NULL, 0, &ev);
    if (!st) st = wait_ev(ev);
    CHECK(!st, "fill: %s", last_msg);
    int32_t got[2048];
    st = read_bytes(2, 2, DLRUN_MEM_DEVICE, base + seg - 4096, got, 4096);
    if (!st) st = read_bytes(2, 2, DLRUN_MEM_DEVICE, base + seg, got + 1024, 4096);
    CHECK(!st, "read: %s", last_msg);
    int bad = -1;
    for (int i = 0; i < 2048 && bad < 0; i++)
      if (got[i] != 7 + 3 * i) bad = i;
    CHECK(bad < 0, "element %d is %d", bad, bad >= 0 ? got[bad] : 0);
    /* a block never straddles a boundary (the pool's rule): a copy that does is refused */
    st = read_bytes(2, 2, DLRUN_MEM_DEVICE, base + seg - 8, got, 16);
    CHECK(st == DLRUN_ERR_VALUE, "status %d", st);
    CHECK_STR_CONTAINS(last_msg, "OpenclDevice(id=2): a copy of 16 bytes at ");
    CHECK_STR_CONTAINS(last_msg, "would cross the end of an OpenCL buffer");
    void *data = NULL, *addr = NULL;
    uint64_t off = 0;
    CHECK(!pl->export_data(dev[2], DLRUN_MEM_DEVICE, base + 2 * seg + 256, &data, &off) &&
              off == 256,
          "export in the third buffer: offset %llu", (unsigned long long)off);
    CHECK(!pl->import_data(dev[2], DLRUN_MEM_DEVICE, data, off, 1024, &addr) &&
              addr == base + 2 * seg + 256,
          "import: %s", last_msg);
    st = pl->import_data(dev[2], DLRUN_MEM_DEVICE, data, off, 1 << 20, &addr);
    CHECK(st == DLRUN_ERR_BUFFER, "past the last buffer's 1 MiB: status %d", st);
    pl->release(dev[2], DLRUN_MEM_DEVICE, base, size);
  }

  TEST("waits: a foreign event gates the queue; failed waits fail the op") {
    dlrun_timeline *ftl;
    services.timeline_create(&foreign, &ftl);
    unsigned char src[32], out[32];
    for (int i = 0; i < 32; i++) src[i] = (unsigned char)(i + 1);
    dlrun_event fe = services.timeline_begin(ftl), ev;
    dlrun_status st = write_bytes(2, 0, DLRUN_MEM_DEVICE, dev_mem[0] + 20480, src, 32, &fe, 1, &ev);
    CHECK(!st, "%s", last_msg);
    if (st) return check_summary("opencl_module");
    usleep(50000);
    CHECK(!pl->event_query(ev), "the copy completed before the foreign event");
    services.timeline_complete(ftl, fe, DLRUN_OK, NULL);
    st = wait_ev(ev);
    if (!st) st = read_bytes(2, 0, DLRUN_MEM_DEVICE, dev_mem[0] + 20480, out, 32);
    CHECK(!st && !memcmp(src, out, 32), "after the foreign event: %s", last_msg);

    fe = services.timeline_begin(ftl);
    st = write_bytes(2, 0, DLRUN_MEM_DEVICE, dev_mem[0] + 20480, src, 32, &fe, 1, &ev);
    services.timeline_complete(ftl, fe, DLRUN_ERR_RUNTIME, "Foreign(id=0): copy failed: boom");
    st = wait_ev(ev);
    CHECK(st == DLRUN_ERR_RUNTIME, "status %d", st);
    CHECK(st == DLRUN_ERR_RUNTIME && !strcmp(last_msg, "Foreign(id=0): copy failed: boom"), "%s",
          last_msg); /* the failure waited on, as it was */
    /* already failed when the op is enqueued */
    st = write_bytes(3, 1, DLRUN_MEM_DEVICE, dev_mem[1], src, 32, &fe, 1, &ev);
    CHECK(!st, "%s", last_msg);
    st = wait_ev(ev);
    CHECK(st == DLRUN_ERR_RUNTIME && !strcmp(last_msg, "Foreign(id=0): copy failed: boom"), "%s",
          last_msg); /* the failure waited on, as it was */
    /* the queue goes on */
    st = write_bytes(3, 1, DLRUN_MEM_DEVICE, dev_mem[1], src, 32, NULL, 0, &ev);
    if (!st) st = wait_ev(ev);
    CHECK(!st, "after a failed wait: %s", last_msg);
    services.timeline_destroy(ftl);
  }

  TEST("inject_failure: a copy and a fill fail through the completion path") {
    unsigned char src[16] = {1, 2, 3}, out[16];
    dlrun_event ev = {0}, ev2 = {0};
    CHECK(!pl->inject_failure(dev[0], DLRUN_WORK_COPY, 1), "%s", last_msg);
    dlrun_status st = write_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0], src, 16, NULL, 0, &ev);
    CHECK(!st, "enqueue: %s", last_msg);
    /* dev1 waits for the failed copy */
    if (!st) st = write_bytes(1, 1, DLRUN_MEM_DEVICE, dev_mem[1], src, 16, &ev, 1, &ev2);
    st = wait_ev(ev);
    CHECK(st == DLRUN_ERR_RUNTIME, "status %d", st);
    CHECK(!strcmp(last_msg, "OpenclDevice(id=0): copy failed: injected device failure"), "%s",
          last_msg);
    st = wait_ev(ev2);
    CHECK(st == DLRUN_ERR_RUNTIME &&
              !strcmp(last_msg, "OpenclDevice(id=0): copy failed: injected device failure"),
          "dev1's copy after it: %s", last_msg);
    st = read_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0], out, 16); /* the next one works */
    CHECK(!st, "the copy after: %s", last_msg);

    CHECK(!pl->inject_failure(dev[0], DLRUN_WORK_FILL, 1), "%s", last_msg);
    dlrun_fill f = {.esize = 4, .pattern = {1, 2, 3, 4}};
    st = pl->fill(dev[0], DLRUN_MEM_DEVICE, dev_mem[0], 64, &f, NULL, 0, &ev);
    CHECK(!st, "enqueue: %s", last_msg);
    st = wait_ev(ev);
    CHECK(!strcmp(last_msg, "OpenclDevice(id=0): fill failed: injected device failure"), "%s",
          last_msg);
    st = pl->fill(dev[0], DLRUN_MEM_DEVICE, dev_mem[0], 64, &f, NULL, 0, &ev);
    if (!st) st = wait_ev(ev);
    CHECK(!st, "the fill after: %s", last_msg);
  }

  TEST("two threads, two devices, each op after the other device's latest") {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, racer, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(the_race.failures == 0, "%d enqueues failed: %s", the_race.failures, last_msg);
    for (int i = 0; i < 2; i++) {
      dlrun_status st = wait_ev(the_race.last[i]);
      CHECK(!st, "device %d: %s", i, last_msg);
    }
    unsigned char out[256];
    dlrun_status st = read_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0] + 32768, out, 256);
    CHECK(!st && out[0] == 1 && out[255] == 1, "dev0's bytes: %d %d: %s", out[0], out[255],
          st ? last_msg : "");
  }

  TEST("record, stream protocol, native handles, completion order") {
    dlrun_event ev;
    CHECK(!pl->record(dev[3], NULL, 0, &ev) && !wait_ev(ev), "record: %s", last_msg);
    int64_t s = pl->consumer_stream(dev[1]);
    CHECK(s != 0, "stream");
    unsigned char src[8] = {9, 8, 7}, out[8];
    dlrun_event w;
    dlrun_status st = write_bytes(0, 0, DLRUN_MEM_DEVICE, dev_mem[0], src, 8, NULL, 0, &w);
    CHECK(!st && !pl->stream_wait(dev[0], s, w), "stream_wait: %s", last_msg);
    st = pl->stream_wait(dev[0], 12345, w);
    CHECK(st == DLRUN_ERR_BUFFER, "a bad stream: status %d", st);
    CHECK(!strcmp(last_msg, "stream must be nil (wait for the array), -1 (do not wait) or the "
                            "cl_command_queue of an OpenCL device of dlrun for arrays on "
                            "OpenclDevice(id=0), got 12345"),
          "%s", last_msg);
    CHECK(!read_bytes(1, 0, DLRUN_MEM_DEVICE, dev_mem[0], out, 8) && !memcmp(src, out, 8), "%s",
          last_msg);
    void *h[4] = {0};
    CHECK(pl->native_handles && !pl->native_handles(dev[1], h, 4) && h[0] &&
              (intptr_t)h[1] == s && h[2] && !h[3],
          "handles");
    void *h0[4] = {0};
    CHECK(!pl->native_handles(dev[0], h0, 2) && h0[0] == h[0] && h0[1] != h[1] && !h0[2],
          "2 handles of dev0: the shared context, its own queue");
  }

  TEST("device_destroy: every point completed, in order") {
    pl->release(dev[0], DLRUN_MEM_DEVICE, dev_mem[0], DEV_BYTES);
    pl->release(dev[1], DLRUN_MEM_DEVICE, dev_mem[1], DEV_BYTES);
    for (int i = 0; i < 4; i++) {
      dlrun_event last;
      CHECK(!pl->record(dev[i], NULL, 0, &last), "%s", last_msg);
      wait_ev(last);
      CHECK(order.skipped == 0, "%d completions skipped a point", order.skipped);
      pl->device_destroy(dev[i], devs[i].impl);
    }
  }
  /* the module stays loaded: pocl's threads outlive its context, and
   * valgrind names the module's frames only while it is mapped */
  return check_summary("opencl_module");
}
