/* What the CUDA bandwidth program's parts share (gpu_bandwidth.c: copies
 * and fills by size; gpu_latency.c: small operations): its checks of dlrun
 * and driver calls, which end the program on a failure. */
#ifndef DLRUN_BENCH_GPU_BENCH_H
#define DLRUN_BENCH_GPU_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dlrun/dlrun.h"
#include "platforms/cuda/cu.h"

#define DL(call)                                                                           \
  do {                                                                                     \
    dlrun_status st_ = (call);                                                             \
    if (st_ != DLRUN_OK) {                                                                 \
      fprintf(stderr, "gpu_bandwidth: %s failed: %s: %s\n", #call, dlrun_status_name(st_),  \
              dlrun_last_error());                                                         \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define CU(call)                                                                           \
  do {                                                                                     \
    dlcu_result r_ = cu_api.call;                                                          \
    if (r_ != DLCU_SUCCESS) {                                                              \
      fprintf(stderr, "gpu_bandwidth: cu%s failed: %s (%d)\n", #call, cu_error_name(r_),   \
              r_);                                                                         \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

static inline double gpu_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A single-device sharding of d's `kind` memory; the caller releases it. */
static inline dlrun_sharding *gpu_bench_single(dlrun_device *d, dlrun_memory_kind kind) {
  dlrun_sharding *s;
  DL(dlrun_single_device_sharding_create(d, kind, &s));
  return s;
}

/* The latency lines (gpu_latency.c): `runs` timed operations of each kind
 * on CUDA device 0, whose primary context is current; the number of
 * operations that read back wrong values. */
int gpu_latency(int runs);

#endif
