/* The runtime: builds devices from a spec, owns their pools and streams. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "device_impl.h"
#include "dlrun/trace.h"

#define MAX_WORKERS 64

static int worker_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 2) n = 2;
  if (n > MAX_WORKERS) n = MAX_WORKERS;
  return (int)n;
}

/* DLRUN_DEVICE_MEMORY, when set, must parse. */
static dlrun_status capacity_from_env(uint64_t *out) {
  *out = 0;
  const char *env = getenv("DLRUN_DEVICE_MEMORY");
  if (!env || !*env) return DLRUN_OK;
  dlrun_status st = dlrun_parse_size(env, out);
  if (st) return dlrun_fail_prefix(st, "DLRUN_DEVICE_MEMORY: ");
  return DLRUN_OK;
}

static void destroy_devices(dlrun_runtime *rt, size_t n) {
  for (size_t i = 0; i < n; i++) {
    dlrun_device *d = &rt->devices[i];
    dlrun_stream_destroy(&d->stream);
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) dlrun_pool_destroy(d->pools[k]);
  }
}

static dlrun_status init_device(dlrun_runtime *rt, dlrun_device *d, const dlrun_platform *pl,
                                int id, size_t group_size, uint64_t device_memory,
                                uint64_t host_ram) {
  *d = (dlrun_device){.platform = pl, .rt = rt, .id = id};
  snprintf(d->name, sizeof d->name, "%s(id=%d)", pl->class_name, id);
  for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
    uint64_t cap = pl->default_capacity((dlrun_memory_kind)k, group_size, host_ram);
    if (k == DLRUN_MEM_DEVICE && pl->is_accelerator && device_memory) cap = device_memory;
    char label[64];
    snprintf(label, sizeof label, k == DLRUN_MEM_DEVICE ? "%s" : "%s pinned_host memory",
             d->name);
    dlrun_status st = dlrun_pool_create(label, cap, &d->pools[k]);
    if (st) {
      for (int j = 0; j < k; j++) dlrun_pool_destroy(d->pools[j]);
      return st;
    }
  }
  dlrun_stream_init(&d->stream, rt->workers);
  return DLRUN_OK;
}

/* Lay out devices per spec group, adding the host cpu device when absent. */
static dlrun_status build_devices(dlrun_runtime *rt, const dlrun_device_spec *spec,
                                  uint64_t device_memory) {
  dlrun_device_spec full = *spec;
  dlrun_complete_device_spec(&full);
  dlrun_format_device_spec(&full, rt->spec, sizeof rt->spec);

  size_t total = 0;
  for (size_t g = 0; g < full.ngroups; g++) total += full.groups[g].count;
  rt->devices = dlrun_calloc(total, sizeof *rt->devices);
  if (!rt->devices) return dlrun_fail_oom_host(total * sizeof *rt->devices);

  uint64_t host_ram = dlrun_host_ram_bytes();
  size_t at = 0;
  for (size_t g = 0; g < full.ngroups; g++) {
    dlrun_device_group *grp = &rt->groups[g];
    *grp = (dlrun_device_group){.platform = full.groups[g].platform, .first = at,
                                .count = full.groups[g].count};
    for (size_t i = 0; i < grp->count; i++, at++) {
      dlrun_status st = init_device(rt, &rt->devices[at], grp->platform, (int)i, grp->count,
                                    device_memory, host_ram);
      if (st) {
        destroy_devices(rt, at);
        dlrun_free(rt->devices);
        rt->devices = NULL;
        return st;
      }
    }
    strncat(rt->platforms, g ? "," : "", sizeof rt->platforms - strlen(rt->platforms) - 1);
    strncat(rt->platforms, grp->platform->name, sizeof rt->platforms - strlen(rt->platforms) - 1);
  }
  rt->ngroups = full.ngroups;
  rt->ndevices = total;
  for (size_t g = 0; g < rt->ngroups; g++) {
    if (strcmp(rt->groups[g].platform->name, "cpu") == 0 && !rt->host)
      rt->host = &rt->devices[rt->groups[g].first];
    if (rt->groups[g].platform->is_accelerator && !rt->default_group) {
      rt->default_group = &rt->groups[g];
      dlrun_pool_stats stats;
      dlrun_pool_get_stats(rt->devices[rt->groups[g].first].pools[DLRUN_MEM_DEVICE], &stats);
      rt->accelerator_memory = stats.bytes_limit;
    }
  }
  if (!rt->default_group)
    for (size_t g = 0; g < rt->ngroups; g++)
      if (&rt->devices[rt->groups[g].first] == rt->host) rt->default_group = &rt->groups[g];
  return DLRUN_OK;
}

dlrun_status dlrun_runtime_create(const dlrun_config *config, dlrun_runtime **out) {
  DLRUN_NONNULL(out, "dlrun_runtime_create", "out");
  *out = NULL;
  const char *spec_text = config && config->devices ? config->devices : getenv("DLRUN_DEVICES");
  if (!spec_text || !*spec_text) spec_text = "auto";
  dlrun_device_spec spec;
  dlrun_status st = dlrun_parse_device_spec(spec_text, &spec);
  if (st && !(config && config->devices)) return dlrun_fail_prefix(st, "DLRUN_DEVICES: ");
  if (st) return st;
  uint64_t device_memory = config ? config->device_memory : 0;
  if (!device_memory && (st = capacity_from_env(&device_memory))) return st;
  if (device_memory && device_memory < DLRUN_POOL_ALIGN)
    return dlrun_fail(DLRUN_ERR_VALUE, "device memory of %llu bytes is too small (at least %u)",
                      (unsigned long long)device_memory, DLRUN_POOL_ALIGN);

  dlrun_runtime *rt = dlrun_calloc(1, sizeof *rt);
  if (!rt) return dlrun_fail_oom_host(sizeof *rt);
  atomic_init(&rt->refs, 1);
  if ((st = dlrun_workers_create(worker_count(), &rt->workers))) {
    dlrun_free(rt);
    return st;
  }
  if ((st = build_devices(rt, &spec, device_memory))) {
    dlrun_workers_destroy(rt->workers);
    dlrun_free(rt);
    return st;
  }
  *out = rt;
  return DLRUN_OK;
}

void dlrun_runtime_retain(dlrun_runtime *rt) {
  if (rt) atomic_fetch_add(&rt->refs, 1);
}

static void destroy_runtime(dlrun_runtime *rt) {
  destroy_devices(rt, rt->ndevices);
  dlrun_workers_destroy(rt->workers);
  dlrun_free(rt->devices);
  dlrun_free(rt);
}

static void *destroy_in_background(void *rt) {
  destroy_runtime(rt);
  return NULL;
}

void dlrun_runtime_release(dlrun_runtime *rt) {
  if (!rt || atomic_fetch_sub(&rt->refs, 1) != 1) return;
  /* The last reference may go on one of the runtime's own workers (a task
   * dropping the last buffer): it cannot wait for itself or join itself, so
   * another thread tears the runtime down. */
  if (dlrun_workers_is_current(rt->workers)) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Without a thread, leaking the runtime beats deadlocking the process. */
    pthread_create(&t, &attr, destroy_in_background, rt);
    pthread_attr_destroy(&attr);
    return;
  }
  destroy_runtime(rt);
}

/* The process-wide default runtime and its configuration. */
static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
static dlrun_runtime *default_rt;
static char *default_devices;
static uint64_t default_memory;

/* Whether a configure call asks for what the running runtime already is. */
static bool same_configuration(const dlrun_runtime *rt, const char *devices, uint64_t memory) {
  if (devices) {
    dlrun_device_spec spec;
    char canonical[sizeof rt->spec];
    if (dlrun_parse_device_spec(devices, &spec)) return false;
    dlrun_complete_device_spec(&spec);
    if (strcmp(dlrun_format_device_spec(&spec, canonical, sizeof canonical), rt->spec) != 0)
      return false;
  }
  return !memory || (memory & ~(uint64_t)(DLRUN_POOL_ALIGN - 1)) == rt->accelerator_memory;
}

dlrun_status dlrun_default_configure(const char *devices, uint64_t device_memory) {
  dlrun_status st = DLRUN_OK;
  if (devices && (st = dlrun_check_device_spec(devices))) return st;
  if (device_memory && device_memory < DLRUN_POOL_ALIGN)
    return dlrun_fail(DLRUN_ERR_VALUE, "device memory of %llu bytes is too small (at least %u)",
                      (unsigned long long)device_memory, DLRUN_POOL_ALIGN);
  pthread_mutex_lock(&default_mu);
  if (default_rt) {
    if (!same_configuration(default_rt, devices, device_memory))
      st = dlrun_fail(DLRUN_ERR_RUNTIME,
                      "configure must be called before the runtime is first used "
                      "(it is already running with devices %s)",
                      default_rt->spec);
  } else {
    if (devices) {
      char *copy = dlrun_strdup(devices);
      if (!copy) st = dlrun_fail_oom_host(strlen(devices) + 1);
      else {
        dlrun_free(default_devices);
        default_devices = copy;
      }
    }
    if (!st && device_memory) default_memory = device_memory;
  }
  pthread_mutex_unlock(&default_mu);
  return st;
}

static void release_default(void) {
  pthread_mutex_lock(&default_mu);
  dlrun_runtime *rt = default_rt;
  default_rt = NULL;
  dlrun_free(default_devices);
  default_devices = NULL;
  pthread_mutex_unlock(&default_mu);
  dlrun_runtime_release(rt);
}

dlrun_runtime *dlrun_default_runtime_if_started(void) {
  pthread_mutex_lock(&default_mu);
  dlrun_runtime *rt = default_rt;
  if (rt) dlrun_runtime_retain(rt);
  pthread_mutex_unlock(&default_mu);
  return rt;
}

dlrun_status dlrun_default_runtime(dlrun_runtime **out) {
  DLRUN_NONNULL(out, "dlrun_default_runtime", "out");
  static bool registered;
  dlrun_status st = DLRUN_OK;
  pthread_mutex_lock(&default_mu);
  if (!default_rt) {
    dlrun_config cfg = {.devices = default_devices, .device_memory = default_memory};
    st = dlrun_runtime_create(&cfg, &default_rt);
    if (!st && !registered) registered = atexit(release_default) == 0;
  }
  if (!st) {
    dlrun_runtime_retain(default_rt);
    *out = default_rt;
  }
  pthread_mutex_unlock(&default_mu);
  return st;
}
