/* Internal: how many worker threads a runtime starts. By default one per
 * core this process may use: the cores of its CPU affinity when a launcher
 * bound it to fewer than the machine's, else the machine's shared evenly by
 * the job's processes on this host, so that a job of several processes on
 * one host does not run more copying threads than it has cores; at least
 * one. $DLRUN_WORKERS (auto, or 1 to DLRUN_MAX_WORKERS) overrides it, as
 * OMP_NUM_THREADS does for OpenMP. */
#ifndef DLRUN_DEVICE_WORKER_PLAN_H
#define DLRUN_DEVICE_WORKER_PLAN_H

#include <stdbool.h>

#include "dlrun/status.h"

#define DLRUN_MAX_WORKERS 64

typedef struct dlrun_worker_plan {
  int count;      /* the worker threads to start */
  bool crowded;   /* the job's unbound processes on this host outnumber its cores */
  char note[160]; /* "2 worker threads: the 2 cores this process may use (...)" */
} dlrun_worker_plan;

/* DLRUN_ERR_VALUE naming $DLRUN_WORKERS when it is wrong. */
dlrun_status dlrun_check_workers_setting(void);
/* The plan for a runtime made now (after the join, when in a job), or
 * dlrun_check_workers_setting's error. */
dlrun_status dlrun_plan_workers(dlrun_worker_plan *out);

#endif
