/* C tests of the hardware layer, through the public API as a consumer sees
 * it: sim device memory is not host-readable by default (a dereference of an
 * export's data faults), DLRUN_SIM_MEMORY=shared makes it readable, the
 * driver copies reach it either way, and host-memory kinds stay readable. */
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlrun.h"

static dlrun_runtime *make_runtime(const char *spec) {
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20};
  dlrun_runtime *rt = NULL;
  if (dlrun_runtime_create(&cfg, &rt)) printf("  runtime_create(%s): %s\n", spec, dlrun_last_error());
  return rt;
}

/* A float32 array 0, 1, ..., n-1 on dev's `kind` memory. */
static dlrun_array *iota(dlrun_device *dev, dlrun_memory_kind kind, int64_t n) {
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = (float)i;
  dlrun_sharding *s = NULL;
  dlrun_array *a = NULL;
  if (dlrun_single_device_sharding_create(dev, kind, &s) ||
      dlrun_array_from_host(s, DLRUN_FLOAT32, 1, &n, v, (uint64_t)n * sizeof *v, &a))
    printf("  iota: %s\n", dlrun_last_error());
  dlrun_sharding_release(s);
  free(v);
  return a;
}

/* Run read(p) in a child process: the signal that ended it, or 0 when it
 * exited normally with the value it read (in *value). */
static int read_in_child(const float *p, float *value) {
  int fds[2];
  if (pipe(fds)) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    signal(SIGSEGV, SIG_DFL);
    float v = p[3]; /* the dereference under test */
    ssize_t w = write(fds[1], &v, sizeof v);
    _exit(w == (ssize_t)sizeof v ? 0 : 1);
  }
  close(fds[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  ssize_t r = read(fds[0], value, sizeof *value);
  close(fds[0]);
  if (WIFSIGNALED(status)) return WTERMSIG(status);
  return r == (ssize_t)sizeof *value ? 0 : -1;
}

/* A legacy export sharing a's memory (the test reads and writes it). */
static const float *exported_data(dlrun_array *a, dlrun_exported *e, int32_t *type) {
  dlrun_export_options share = {.legacy_sharing = DLRUN_LEGACY_SHARE};
  if (dlrun_export(a, &share, e)) {
    printf("  export: %s\n", dlrun_last_error());
    return NULL;
  }
  *type = (int32_t)e->legacy->dl_tensor.device.device_type;
  return e->legacy->dl_tensor.data;
}

static void release_export(dlrun_exported *e) {
  if (e->legacy) e->legacy->deleter(e->legacy);
}

static void test_private_memory(void) {
  TEST("default mode: a host read of a sim export's data faults at once") {
    dlrun_runtime *rt = make_runtime("sim:2");
    dlrun_array *a = iota(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE, 64);
    dlrun_exported e;
    int32_t type = -1;
    const float *p = exported_data(a, &e, &type);
    CHECK(type == 12, "device type %d, expected kDLExtDev", type);
    float v = -1;
    int sig = p ? read_in_child(p, &v) : -1;
    CHECK(sig == SIGSEGV, "the child ended with %d (signal %d expected), read %g", sig, SIGSEGV, v);
    /* the driver copy reads it */
    float got[64] = {0};
    CHECK(dlrun_device_copy_to_host(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE, p,
                                    sizeof got, got) == DLRUN_OK,
          "%s", dlrun_last_error());
    CHECK(got[0] == 0 && got[3] == 3 && got[63] == 63, "driver copy read %g %g %g", got[0],
          got[3], got[63]);
    /* and writes it: the array sees the write */
    float seven = 7;
    CHECK(dlrun_device_copy_from_host(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE,
                                      (void *)(p + 5), &seven, sizeof seven) == DLRUN_OK,
          "%s", dlrun_last_error());
    float back[64];
    CHECK(dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK && back[5] == 7 && back[4] == 4,
          "array reads %g after a driver write", back[5]);
    release_export(&e);
    dlrun_array_release(a);
    dlrun_runtime_release(rt);
  }
  TEST("driver copies refuse addresses outside the device's memory") {
    dlrun_runtime *rt = make_runtime("sim:2");
    dlrun_array *a = iota(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, 64);
    dlrun_exported e;
    int32_t type;
    const float *p = exported_data(a, &e, &type);
    float host[64];
    dlrun_status st =
        dlrun_device_copy_to_host(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE, p, 16, host);
    CHECK(st == DLRUN_ERR_VALUE && strstr(dlrun_last_error(), "are not in SimDevice(id=1)'s "
                                                              "device memory"),
          "another device's memory: %s", dlrun_last_error());
    st = dlrun_device_copy_to_host(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, host, 16,
                                   host);
    CHECK(st == DLRUN_ERR_VALUE, "host memory as device memory: status %d", (int)st);
    st = dlrun_device_copy_to_host(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, p,
                                   (uint64_t)1 << 40, host);
    CHECK(st == DLRUN_ERR_VALUE, "a range past the end: status %d", (int)st);
    CHECK(dlrun_device_copy_to_host(NULL, DLRUN_MEM_DEVICE, p, 4, host) == DLRUN_ERR_VALUE,
          "NULL device");
    CHECK(dlrun_device_copy_to_host(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, p, 0,
                                    NULL) == DLRUN_OK,
          "zero bytes");
    release_export(&e);
    dlrun_array_release(a);
    dlrun_runtime_release(rt);
  }
  TEST("host memories stay readable: cpu devices and pinned_host memory export as kDLCPU") {
    dlrun_runtime *rt = make_runtime("sim:2,cpu:2");
    dlrun_device *where[] = {dlrun_device_get(rt, "cpu", 1), dlrun_device_get(rt, "sim", 0)};
    dlrun_memory_kind kinds[] = {DLRUN_MEM_DEVICE, DLRUN_MEM_PINNED_HOST};
    for (int i = 0; i < 2; i++) {
      dlrun_array *a = iota(where[i], kinds[i], 16);
      dlrun_exported e;
      int32_t type = -1;
      const float *p = exported_data(a, &e, &type);
      CHECK(type == 1, "%s: device type %d, expected kDLCPU", dlrun_device_name(where[i]), type);
      float v = -1;
      CHECK(p && read_in_child(p, &v) == 0 && v == 3, "%s: read %g", dlrun_device_name(where[i]),
            v);
      release_export(&e);
      dlrun_array_release(a);
    }
    dlrun_runtime_release(rt);
  }
}

static void test_shared_memory(void) {
  TEST("DLRUN_SIM_MEMORY=shared: sim memory is host-readable, other rules alike") {
    setenv("DLRUN_SIM_MEMORY", "shared", 1);
    dlrun_runtime *rt = make_runtime("sim:2");
    unsetenv("DLRUN_SIM_MEMORY");
    dlrun_array *a = iota(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE, 64);
    dlrun_exported e;
    int32_t type = -1;
    const float *p = exported_data(a, &e, &type);
    CHECK(type == 12, "device type %d, expected kDLExtDev", type);
    float v = -1;
    CHECK(p && read_in_child(p, &v) == 0 && v == 3, "read %g", v);
    float host[4];
    CHECK(dlrun_device_copy_to_host(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, p, 16,
                                    host) == DLRUN_ERR_VALUE,
          "another device's memory is still refused");
    release_export(&e);
    dlrun_array_release(a);
    dlrun_runtime_release(rt);
  }
  TEST("a DLRUN_SIM_MEMORY that is neither private nor shared is refused") {
    setenv("DLRUN_SIM_MEMORY", "readable", 1);
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 1 << 20};
    dlrun_runtime *rt = NULL;
    dlrun_status st = dlrun_runtime_create(&cfg, &rt);
    CHECK(st == DLRUN_ERR_VALUE && !rt &&
              strcmp(dlrun_last_error(),
                     "DLRUN_SIM_MEMORY must be \"private\" or \"shared\", got \"readable\"") == 0,
          "status %d: %s", (int)st, dlrun_last_error());
    CHECK(dlrun_check_config(&cfg) == DLRUN_ERR_VALUE, "checked at start too");
    setenv("DLRUN_SIM_MEMORY", "private", 1);
    CHECK(dlrun_check_config(&cfg) == DLRUN_OK, "private: %s", dlrun_last_error());
    unsetenv("DLRUN_SIM_MEMORY");
  }
}

static int deleted;
static void count_delete(DLManagedTensor *self) {
  (void)self;
  deleted++;
}

static void test_dlpack_codes(void) {
  TEST("imports: host memory under any kDLCPU id is the host's; a dl_device must be (1, 0)") {
    dlrun_runtime *rt = make_runtime("sim:2,cpu:2");
    float data[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    for (int32_t id = 0; id < 3; id++) {
      DLManagedTensor m = {
          .dl_tensor = {.data = data, .device = {kDLCPU, id}, .ndim = 1,
                        .dtype = {kDLFloat, 32, 1}, .shape = shape},
          .deleter = count_delete};
      dlrun_array *a = NULL;
      deleted = 0;
      CHECK(dlrun_import(rt, &m, NULL, NULL, &a, NULL) == DLRUN_OK, "id %d: %s", id, dlrun_last_error());
      CHECK(a && dlrun_array_device(a) == dlrun_host_device(rt), "id %d: not on the host", id);
      float back[4] = {0};
      CHECK(a && dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK && back[3] == 4,
            "id %d: read %g", id, back[3]);
      dlrun_array_release(a);
      CHECK(deleted == 1, "id %d: deleter ran %d times", id, deleted);
    }
    dlrun_array *x = iota(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, 4);
    dlrun_export_options o = {.copy = DLRUN_COPY_IF_NEEDED, .has_dl_device = true, .device_type = kDLCPU,
                              .device_id = 1};
    dlrun_exported e;
    CHECK(dlrun_export(x, &o, &e) == DLRUN_ERR_BUFFER &&
              strstr(dlrun_last_error(), "names device id 1, which does not exist for "
                                         "DLDeviceType 1 (kDLCPU)"),
          "dl_device (1, 1): %s", dlrun_last_error());
    o.device_type = kDLCUDAHost;
    o.device_id = 0;
    CHECK(dlrun_export(x, &o, &e) == DLRUN_ERR_BUFFER &&
              strstr(dlrun_last_error(), "unsupported device type (DLDeviceType: 3 (kDLCUDAHost))"),
          "dl_device (3, 0): %s", dlrun_last_error());
    dlrun_array_release(x);
    dlrun_runtime_release(rt);
  }
  TEST("a dl_device type that no device of the runtime exports as is unsupported, whoever has it") {
    /* kDLExtDev is sim's: a runtime without sim does not have it. */
    dlrun_runtime *rt = make_runtime("cpu:1");
    dlrun_array *x = iota(dlrun_host_device(rt), DLRUN_MEM_DEVICE, 4);
    dlrun_export_options o = {.copy = DLRUN_COPY_IF_NEEDED, .has_dl_device = true,
                              .device_type = kDLExtDev, .device_id = 0};
    dlrun_exported e;
    CHECK(dlrun_export(x, &o, &e) == DLRUN_ERR_BUFFER &&
              strstr(dlrun_last_error(), "unsupported device type (DLDeviceType: 12 (kDLExtDev))"),
          "dl_device (12, 0) on cpu:1: %s", dlrun_last_error());
    o.device_type = kDLCPU;
    CHECK(dlrun_export(x, &o, &e) == DLRUN_OK && e.legacy, "dl_device (1, 0): %s",
          dlrun_last_error());
    e.legacy->deleter(e.legacy);
    dlrun_array_release(x);
    dlrun_runtime_release(rt);
  }
}

int main(void) {
  unsetenv("DLRUN_SIM_MEMORY");
  test_private_memory();
  test_shared_memory();
  test_dlpack_codes();
  return check_summary("device");
}
