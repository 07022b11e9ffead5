/* How many worker threads a runtime starts (worker_plan.h). */
#include "worker_plan.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status_impl.h"
#include "distributed/distributed_impl.h"

/* The cores this process may run on (its CPU affinity), and whether that is
 * fewer than the machine's: a launcher bound it (mpirun binds each of two
 * processes to a core of its own), so the cores are its alone. */
static int usable_cores(bool *bound) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1) online = 1;
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  *bound = n >= 1 && n < online;
  return n >= 1 ? n : (int)online;
}

/* $DLRUN_WORKERS: NULL or empty or "auto" (0), or a whole number from 1 to
 * DLRUN_MAX_WORKERS. */
static dlrun_status env_workers(int *out) {
  const char *text = getenv("DLRUN_WORKERS");
  *out = 0;
  if (!text || !*text || !strcmp(text, "auto")) return DLRUN_OK;
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !isdigit((unsigned char)*text) || *end || v < 1 || v > DLRUN_MAX_WORKERS)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "DLRUN_WORKERS=\"%s\" is not auto or a whole number from 1 to %d", text,
                      DLRUN_MAX_WORKERS);
  *out = (int)v;
  return DLRUN_OK;
}

dlrun_status dlrun_check_workers_setting(void) {
  int n;
  return env_workers(&n);
}

dlrun_status dlrun_plan_workers(dlrun_worker_plan *out) {
  int set;
  dlrun_status st = env_workers(&set);
  if (st) return st;
  bool bound;
  int cores = usable_cores(&bound);
  /* Unbound processes of one host share its cores evenly. */
  int sharing = bound ? 1 : dlrun_distributed_host_processes();
  out->count = set;
  out->crowded = sharing > cores;
  if (!set) {
    out->count = cores / sharing;
    if (out->count < 1) out->count = 1;
    if (out->count > DLRUN_MAX_WORKERS) out->count = DLRUN_MAX_WORKERS;
  }
  const char *s = out->count == 1 ? "" : "s", *cs = cores == 1 ? "" : "s";
  if (set)
    snprintf(out->note, sizeof out->note, "%d worker thread%s (DLRUN_WORKERS=%d)", out->count, s,
             set);
  else if (sharing > 1)
    snprintf(out->note, sizeof out->note,
             "%d worker thread%s: %d core%s this process may use, shared by the job's %d "
             "processes on this host (DLRUN_WORKERS sets it)",
             out->count, s, cores, cs, sharing);
  else
    snprintf(out->note, sizeof out->note,
             "%d worker thread%s: the %d core%s this process may use (DLRUN_WORKERS sets it)",
             out->count, s, cores, cs);
  return DLRUN_OK;
}
