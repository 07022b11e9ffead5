/* DLRUN_TRACE read by the C API's default runtime: a host that never calls
 * dlrun_trace_start gets a whole trace of its allocations and copies, and
 * the file is complete when the process exits without stopping it. The
 * traced work runs in a child process (DLRUN_TRACE is read once per
 * process, and the trace is finished at its exit); the parent reads the
 * file afterwards. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlrun.h"

/* The child's work: arange 16 float32 (64 bytes) on sim device 0, put them
 * on device 1; returns the number of failed steps (its exit status). The
 * trace is left on: exit finishes it. */
static int traced_child(const char *path) {
  setenv("DLRUN_TRACE", path, 1);
  setenv("DLRUN_DEVICES", "sim:2", 1);
  int failed = 0;
  if (dlrun_trace_is_on()) failed++; /* nothing before the runtime starts */
  dlrun_runtime *rt;
  if (dlrun_default_runtime(&rt) != DLRUN_OK) return 100;
  if (!dlrun_trace_is_on()) failed++;
  /* Applied once; a program's own start then meets the trace that is on. */
  if (dlrun_trace_start_from_env() != DLRUN_OK) failed++;
  if (dlrun_trace_start("/dev/null") != DLRUN_ERR_RUNTIME ||
      !strstr(dlrun_last_error(), "tracing is already on (writing \"")) failed++;
  dlrun_sharding *on0, *on1;
  dlrun_array *x, *y;
  dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 0}, step = {.kind = DLRUN_SCALAR_INT, .i = 1};
  if (dlrun_single_device_sharding_create(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, &on0) ||
      dlrun_single_device_sharding_create(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE, &on1) ||
      dlrun_array_arange(on0, DLRUN_FLOAT32, &start, &step, 16, &x) ||
      dlrun_device_put(x, on1, NULL, &y) || dlrun_array_block_until_ready(y))
    return 100;
  dlrun_array_release(y);
  dlrun_array_release(x);
  dlrun_sharding_release(on1);
  dlrun_sharding_release(on0);
  dlrun_runtime_release(rt);
  return failed;
}

int main(void) {
  TEST("DLRUN_TRACE: the default runtime traces, and exit completes the file") {
    char path[] = "/tmp/dlrun_test_trace_env_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) exit(traced_child(path));
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    const char *text = check_slurp(path);
    CHECK(text != NULL, "no trace file");
    if (text) {
      CHECK_STR_CONTAINS(text, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
      CHECK_STR_CONTAINS(text, "\"name\": \"alloc\"");
      CHECK_STR_CONTAINS(text, "\"name\": \"arange\"");
      CHECK_STR_CONTAINS(text, "\"name\": \"copy\"");
      CHECK_STR_CONTAINS(text, "\"bytes\": 64, \"src\": \"SimDevice(id=0)\", "
                               "\"dst\": \"SimDevice(id=1)\"");
      size_t len = strlen(text);
      CHECK(len > 4 && strcmp(text + len - 4, "\n]}\n") == 0, "not finished: %s",
            len > 200 ? text + len - 200 : text);
    }
    remove(path);
  }
  TEST("DLRUN_TRACE: an unwritable file is the default runtime's error, naming the variable") {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      setenv("DLRUN_TRACE", "/nonexistent-dir/t.json", 1);
      setenv("DLRUN_DEVICES", "sim:2", 1);
      dlrun_runtime *rt;
      dlrun_status st = dlrun_default_runtime(&rt);
      exit(st == DLRUN_ERR_RUNTIME &&
                   strcmp(dlrun_last_error(), "DLRUN_TRACE: cannot write the trace file "
                                              "\"/nonexistent-dir/t.json\": No such file or "
                                              "directory") == 0 &&
                   !dlrun_default_runtime_if_started()
               ? 0
               : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  }
  TEST("dlrun_trace_process_path: alone, the path itself; too small a buffer is refused") {
    char buf[32];
    CHECK(dlrun_trace_process_path("out/t.json", buf, sizeof buf) == DLRUN_OK &&
              strcmp(buf, "out/t.json") == 0,
          "%s", buf);
    CHECK(dlrun_trace_process_path("out/t.json", buf, 5) == DLRUN_ERR_VALUE, "accepted");
    CHECK(strcmp(dlrun_last_error(), "the trace file name \"out/t.json\" is too long") == 0, "%s",
          dlrun_last_error());
  }
  return check_summary("trace_env");
}
