/* The runtime: devices of every platform, their pools and streams.
 *
 * A runtime is reference counted. Host applications may create their own;
 * the Lua module and the dlrun command share one process-wide default
 * runtime, configured before its first use. */
#ifndef DLRUN_RUNTIME_H
#define DLRUN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlrun_runtime dlrun_runtime;
typedef struct dlrun_device dlrun_device;

/* The smallest device memory a configuration may ask for. */
#define DLRUN_DEVICE_MEMORY_MIN 4096u

/* Whether a memory is reserved and committed in full when the runtime
 * starts (as JAX's preallocation) or grows on demand. 0 is the default. */
typedef enum dlrun_preallocate {
  DLRUN_PREALLOCATE_DEFAULT = 0, /* the environment variable, else off */
  DLRUN_PREALLOCATE_OFF = 1,
  DLRUN_PREALLOCATE_ON = 2,
} dlrun_preallocate;

/* All zero (or a NULL pointer) asks for the defaults. Read during the call. */
typedef struct dlrun_config {
  /* Device spec: "sim:8", "cpu:4", "sim:8,cpu:2", "auto". NULL: the
   * DLRUN_DEVICES environment variable, else "auto". Copied. */
  const char *devices;
  /* Capacity of each sim device's memory in bytes, at least
   * DLRUN_DEVICE_MEMORY_MIN, rounded down to a multiple of 256. 0:
   * DLRUN_DEVICE_MEMORY (a size string such as "2GiB"), else the default:
   * the capacities of all memories of all devices together fit in host RAM
   * (see README, "Devices and memory"). */
  uint64_t device_memory;
  /* Or the share of host RAM, in (0, 1], that the sim devices' device
   * memories take together, split evenly (the default is 0.5, at most 16 GiB
   * each). 0: not set. Setting it and device_memory is DLRUN_ERR_VALUE.
   * DLRUN_DEVICE_MEMORY="25%" is the same from the environment. */
  double device_memory_fraction;
  /* Capacity of each sim device's pinned_host memory, and its share, as the
   * two above; 0: DLRUN_PINNED_HOST_MEMORY, else the default. */
  uint64_t pinned_host_memory;
  double pinned_host_memory_fraction;
  /* Preallocate the sim devices' device / pinned_host memories: reserve and
   * commit the whole capacity when the runtime starts, so that a shortage of
   * host RAM fails then, not later. DEFAULT: DLRUN_DEVICE_PREALLOCATE /
   * DLRUN_PINNED_HOST_PREALLOCATE ("true" or "false"), else off. */
  dlrun_preallocate device_preallocate;
  dlrun_preallocate pinned_host_preallocate;
  /* Capacity of each cpu device's memory (the host device, where
   * dlrun_device_get and DLPack imports of host data land), as device_memory;
   * 0: DLRUN_HOST_MEMORY, else the default: the host RAM that no other
   * memory is promised (README, "Devices and memory"). */
  uint64_t host_memory;
  /* Or the share of host RAM the cpu devices' memories take together, split
   * evenly, as device_memory_fraction; "50%" from the environment. */
  double host_memory_fraction;
} dlrun_config;

/* A capacity: a size as dlrun_parse_size (*bytes, *fraction 0) or a
 * percentage of host RAM, "25%" (*fraction 0.25, *bytes 0), above 0 and at
 * most 100. DLRUN_ERR_VALUE naming the text. */
DLRUN_API dlrun_status dlrun_parse_capacity(const char *text, uint64_t *bytes, double *fraction);
/* "true", "1", "on", "yes" or "false", "0", "off", "no" (any case).
 * DLRUN_ERR_VALUE naming the text. */
DLRUN_API dlrun_status dlrun_parse_preallocate(const char *text, dlrun_preallocate *out);

/* Parse a size: "1024", "64KiB", "2GiB", "1.5MiB", "1GB" (decimal units:
 * kB/KB, MB, GB, TB; binary: KiB, MiB, GiB, TiB; suffix "B" optional, case
 * of the unit letters as written); fractions of a byte are dropped.
 * DLRUN_ERR_VALUE naming the text. */
DLRUN_API dlrun_status dlrun_parse_size(const char *text, uint64_t *out);

/* Check a device spec without creating anything. DLRUN_ERR_VALUE naming the
 * bad part when malformed. */
DLRUN_API dlrun_status dlrun_check_device_spec(const char *spec);

/* Check a configuration as dlrun_runtime_create reads it, with its fallbacks
 * to DLRUN_DEVICES and DLRUN_DEVICE_MEMORY, without creating anything.
 * config may be NULL. DLRUN_ERR_VALUE naming the variable when one of them
 * is at fault. */
DLRUN_API dlrun_status dlrun_check_config(const dlrun_config *config);

/* Create a runtime. `config` NULL (or all zero): the defaults, as each
 * field says. *out is owned by the caller: dlrun_runtime_release. */
DLRUN_API dlrun_status dlrun_runtime_create(const dlrun_config *config,
                                            dlrun_runtime **out);
DLRUN_API void dlrun_runtime_retain(dlrun_runtime *rt);
/* NULL, or a one-line note when an explicit device memory makes the
 * capacities of all the runtime's memories add up to more than host RAM.
 * Valid while the runtime lives. */
DLRUN_API const char *dlrun_runtime_memory_note(const dlrun_runtime *rt);
/* The worker threads that run the runtime's host work (copies, fills on
 * host memory): by default one per core this process may use (its CPU
 * affinity), the cores shared by the job's processes on this host; at least
 * one. $DLRUN_WORKERS (auto, or 1 to 64) sets the number; a bad value fails
 * dlrun_runtime_create. *note (may be NULL) gets a one-line account, "2 worker
 * threads: the 2 cores this process may use (DLRUN_WORKERS sets it)", valid
 * while the runtime lives. 0 (and NULL) for a NULL runtime.
 * $DLRUN_STREAM_BYTES (auto: 16MiB, off, or a size) is the least a call must
 * write on a process for its host copies to use streaming stores; a bad
 * value fails dlrun_runtime_create and dlrun_check_config likewise. */
DLRUN_API int dlrun_runtime_workers(const dlrun_runtime *rt, const char **note);
/* Drop one reference; the last one waits for queued work and frees all. */
DLRUN_API void dlrun_runtime_release(dlrun_runtime *rt);

/* Set the configuration of the process-wide default runtime. Only before the
 * default runtime is first created: afterwards DLRUN_ERR_RUNTIME, unless the
 * configuration is the same. Either field may be NULL/0 for "unchanged". */
DLRUN_API dlrun_status dlrun_default_configure(const char *devices,
                                               uint64_t device_memory);

/* The same for every setting of `config` that is set (nonzero; devices
 * non-NULL); config is copied. Once the default runtime runs, a setting
 * that would change it is DLRUN_ERR_RUNTIME naming that setting and its
 * current value; one that matches is accepted. */
DLRUN_API dlrun_status dlrun_default_set_config(const dlrun_config *config);

/* The process-wide default runtime, created on first call. On success the
 * caller receives a new reference and must release it. Creating it first
 * starts the trace DLRUN_TRACE asks for (dlrun_trace_start_from_env), whose
 * error it returns. */
DLRUN_API dlrun_status dlrun_default_runtime(dlrun_runtime **out);

#ifdef __cplusplus
}
#endif
#endif
