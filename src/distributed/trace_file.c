/* Which file a process traces to: its own in a job of several processes,
 * and the one DLRUN_TRACE names. Here, not in core/trace.c, because the
 * name depends on the job. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "dlrun/distributed.h"

dlrun_status dlrun_trace_process_path(const char *path, char *buf, size_t n) {
  DLRUN_NONNULL(path, "dlrun_trace_process_path", "path");
  DLRUN_NONNULL(buf, "dlrun_trace_process_path", "buf");
  size_t len = strlen(path);
  int written;
  if (dlrun_process_count() < 2) {
    written = snprintf(buf, n, "%s", path);
  } else {
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    const char *dot = strrchr(name, '.');
    size_t stem = dot && dot > name ? (size_t)(dot - path) : len; /* ".trace" has no extension */
    written = snprintf(buf, n, "%.*s.%d%s", (int)stem, path, dlrun_process_index(), path + stem);
  }
  if (written < 0 || (size_t)written >= n)
    return dlrun_fail(DLRUN_ERR_VALUE, "the trace file name \"%s\" is too long", path);
  return DLRUN_OK;
}

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static int env_applied;

dlrun_status dlrun_trace_start_from_env(void) {
  pthread_mutex_lock(&env_mu);
  dlrun_status st = DLRUN_OK;
  const char *env = getenv("DLRUN_TRACE");
  if (!env_applied && env && *env && !dlrun_trace_was_started()) {
    char path[4096];
    st = dlrun_trace_process_path(env, path, sizeof path);
    if (!st) st = dlrun_trace_start(path);
    if (st) dlrun_fail_prefix(st, "DLRUN_TRACE: ");
  }
  /* Applied once; a failure stays, so that every way in says so. */
  env_applied = !st;
  pthread_mutex_unlock(&env_mu);
  return st;
}
