/* The runtime: builds devices from a spec, owns their contexts, pools and queues. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "config.h"
#include "device_impl.h"
#include "streaming.h"
#include "timeline.h"
#include "workers.h"
#include "distributed/distributed_impl.h"
#include "dlrun/stats.h"
#include "dlrun/trace.h"

/* The device spec and memory settings a runtime gets from `config`, else
 * from the environment (DLRUN_DEVICES, the memory variables), checked. */
static dlrun_status resolve_config(const dlrun_config *config, dlrun_device_spec *spec,
                                   dlrun_memory_settings *m) {
  dlrun_status st;
  if (config && config->devices) {
    if ((st = dlrun_parse_device_spec(config->devices, spec))) return st;
  } else {
    const char *env = getenv("DLRUN_DEVICES");
    if ((st = dlrun_parse_device_spec(env && *env ? env : "auto", spec)))
      return dlrun_fail_prefix(st, "DLRUN_DEVICES: ");
  }
  return dlrun_resolve_memory_settings(config, m);
}

dlrun_status dlrun_check_config(const dlrun_config *config) {
  dlrun_device_spec spec;
  dlrun_memory_settings memory;
  dlrun_status st = resolve_config(config, &spec, &memory);
  if (!st) st = dlrun_check_workers_setting();
  uint64_t stream_bytes;
  if (!st) st = dlrun_stream_setting(false, &stream_bytes);
  return st ? st : dlrun_platforms_check_config();
}

/* Devices go in three steps: every queue drains (work may read any
 * device's memory), then the pools, then the platforms' contexts. */
static void destroy_devices(dlrun_runtime *rt, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (rt->devices[i].local && rt->devices[i].impl) dlrun_device_synchronize(&rt->devices[i]);
  for (size_t i = 0; i < n; i++) {
    dlrun_device *d = &rt->devices[i];
    if (!d->local || !d->impl) continue;
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) dlrun_pool_destroy(d->pools[k]);
    d->platform->device_destroy(d, d->impl);
    d->impl = NULL;
  }
}

/* A pool's memory comes from its device's platform. */
typedef struct dlrun_pool_memory pool_memory;

static dlrun_status region_reserve(void *ctx, uint64_t size, void **base) {
  pool_memory *r = ctx;
  return r->dev->platform->reserve(r->dev, r->kind, size, base);
}

static void region_release(void *ctx, void *base, uint64_t size) {
  pool_memory *r = ctx;
  r->dev->platform->release(r->dev, r->kind, base, size);
}

/* Default capacities (README, "Devices and memory"): the memories that are
 * host RAM (every cpu and sim memory, pinned_host memory) together get at
 * most host RAM, since pools reserve address space without committing
 * memory, and overfilling RAM meets the OOM killer rather than an error.
 * Accelerators' device memories share half of it evenly (capped by the
 * platform's own default: 16 GiB for sim); the other memories but the host
 * memories (pinned_host memories, mostly) share a quarter of the rest, or
 * of all of it when there is no accelerator; the host memories (each
 * non-accelerator device's device memory: where device_get lands) share
 * what no other memory is promised. A share is rounded down to 4 KiB; none
 * is below DLRUN_DEVICE_MEMORY_MIN. A memory of its own (a real
 * accelerator's) gets its platform's default, a share of what the driver
 * reports. */
typedef struct capacity_inputs {
  uint64_t host_ram;
  uint64_t accelerators;   /* accelerator devices of this process */
  uint64_t hosts;          /* other devices of this process: a host memory each */
  uint64_t accelerator;    /* each accelerator's device memory's share of host RAM */
  uint64_t other;          /* each other memory's, but the host memories' */
  uint64_t host;           /* each host memory's: set once the others are made */
  const dlrun_memory_settings *settings;
} capacity_inputs;

static uint64_t round_share(uint64_t bytes) { return bytes & ~(uint64_t)4095; }

static capacity_inputs default_shares(const dlrun_device_spec *full, uint64_t host_ram,
                                      const dlrun_memory_settings *m) {
  uint64_t accelerators = 0, memories = 0;
  for (size_t g = 0; g < full->ngroups; g++) {
    memories += DLRUN_MEM_KIND_COUNT * (uint64_t)full->groups[g].count;
    if (full->groups[g].platform->is_accelerator) accelerators += full->groups[g].count;
  }
  uint64_t hosts = memories / DLRUN_MEM_KIND_COUNT - accelerators; /* always a cpu device */
  capacity_inputs in = {.host_ram = host_ram, .accelerators = accelerators, .hosts = hosts,
                        .settings = m};
  uint64_t rest = host_ram;
  if (accelerators) {
    in.accelerator = round_share(host_ram / 2 / accelerators);
    rest -= host_ram / 2;
  }
  in.other = round_share(rest / 4 / (memories - accelerators - hosts));
  return in;
}

/* Each host memory's default, once every other memory is made (their
 * host-RAM capacities are in memory_total, but the hosts' own other
 * memory): the RAM left, split evenly; where explicit settings promised
 * more than RAM, the other memories' share. */
static uint64_t host_share(const capacity_inputs *in, uint64_t memory_total) {
  uint64_t promised = memory_total + in->hosts * in->other;
  if (promised >= in->host_ram || (in->host_ram - promised) / in->hosts < in->other)
    return in->other;
  return round_share((in->host_ram - promised) / in->hosts);
}

static uint64_t at_least_min(uint64_t cap) {
  return cap < DLRUN_DEVICE_MEMORY_MIN ? DLRUN_DEVICE_MEMORY_MIN : cap;
}

/* Which capacity setting sets d's `kind` memory (config.h), or -1: the
 * accelerators' memories by kind, and the host memories. */
static int setting_of(const dlrun_device *d, dlrun_memory_kind kind,
                      const dlrun_memory_info *info) {
  if (d->platform->is_accelerator) return (int)kind;
  return kind == DLRUN_MEM_DEVICE && info->host_ram ? DLRUN_SETTING_HOST : -1;
}

/* The capacity of d's `kind` memory; added to rt->memory_total (saturating:
 * a total past 2^64 must still over-commit, not wrap) when it is host RAM. */
static uint64_t capacity_of(dlrun_device *d, dlrun_memory_kind kind, size_t group_size,
                            const dlrun_memory_info *info, const capacity_inputs *in,
                            dlrun_runtime *rt) {
  const dlrun_platform *pl = d->platform;
  const dlrun_memory_settings *m = in->settings;
  int k = setting_of(d, kind, info);
  uint64_t cap;
  if (k >= 0 && m->bytes[k]) {
    cap = m->bytes[k];
  } else if (k >= 0 && m->fraction[k]) {
    /* A share of host RAM split among the memories it sets, or of the memory's own size. */
    uint64_t among = k == DLRUN_SETTING_HOST ? in->hosts : in->accelerators;
    uint64_t whole = info->host_ram ? in->host_ram / among : info->total;
    cap = at_least_min(round_share((uint64_t)((double)whole * m->fraction[k])));
  } else {
    cap = pl->default_capacity(d, kind, group_size);
    uint64_t share = k == DLRUN_SETTING_HOST                      ? in->host
                     : pl->is_accelerator && kind == DLRUN_MEM_DEVICE ? in->accelerator
                                                                  : in->other;
    if (info->host_ram && cap > share) cap = share;
    cap = at_least_min(cap);
  }
  if (info->host_ram &&
      __builtin_add_overflow(rt->memory_total, cap & ~(uint64_t)(DLRUN_POOL_ALIGN - 1),
                             &rt->memory_total))
    rt->memory_total = UINT64_MAX;
  return cap;
}

/* Preallocation failing says which settings would let the runtime start. */
static dlrun_status preallocate(dlrun_pool *pool, int k, uint64_t cap) {
  dlrun_status st = dlrun_pool_preallocate(pool);
  if (!st) return st;
  char human[32], why[512]; /* copied: the new message is written where the old one is */
  snprintf(why, sizeof why, "%s", dlrun_last_error());
  return dlrun_fail(st, "%s; lower %s (now %s) or set %s=false", why, dlrun_memory_hints[k],
                    dlrun_format_bytes(cap, human, sizeof human), dlrun_preallocate_names[k]);
}

static dlrun_status region_commit(void *ctx, void *data, uint64_t size) {
  pool_memory *r = ctx;
  return r->dev->platform->commit(r->dev, r->kind, data, size);
}

static uint64_t region_decommit(void *ctx, void *data, uint64_t size) {
  pool_memory *r = ctx;
  return r->dev->platform->decommit(r->dev, r->kind, data, size);
}

/* Device k of process p in group grp; only this process's get a context,
 * memory and a queue. */
static dlrun_status init_device(dlrun_runtime *rt, dlrun_device *d, const dlrun_device_group *grp,
                                int p, size_t k, const capacity_inputs *in) {
  const dlrun_platform *pl = grp->platform;
  int id = (int)((size_t)p * grp->local_count + k);
  *d = (dlrun_device){.platform = pl, .rt = rt, .id = id, .process_index = p, .local_index = k,
                      .local = p == rt->process_index};
  snprintf(d->name, sizeof d->name, "%s(id=%d)", pl->class_name, id);
  if (!d->local) return DLRUN_OK;
  void *impl = NULL;
  dlrun_status st = pl->device_init(d, k, grp->local_count, &impl);
  if (st) return dlrun_fail_prefix(st, "%s: ", d->name);
  d->impl = impl;
  for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
    dlrun_memory_info info;
    pl->memory_info(d, (dlrun_memory_kind)k, &info);
    uint64_t cap = capacity_of(d, (dlrun_memory_kind)k, grp->local_count, &info, in, rt);
    char label[64];
    snprintf(label, sizeof label, k == DLRUN_MEM_DEVICE ? "%s" : "%s pinned_host memory",
             d->name);
    d->memories[k] = (pool_memory){d, (dlrun_memory_kind)k};
    dlrun_range_source src = {region_reserve, region_release, &d->memories[k],
                               pl->commit ? region_commit : NULL,
                               pl->decommit ? region_decommit : NULL,
                               /* a block never straddles the driver's largest allocation */
                               info.max_allocation & ~(uint64_t)(DLRUN_POOL_ALIGN - 1)};
    st = dlrun_pool_create_with(label, cap, &src, &d->pools[k]);
    int setting = setting_of(d, (dlrun_memory_kind)k, &info);
    if (!st && setting >= 0) st = dlrun_pool_set_hint(d->pools[k], dlrun_memory_hints[setting]);
    char counter[80];
    snprintf(counter, sizeof counter, "%s %s memory", d->name,
             dlrun_memory_kind_name((dlrun_memory_kind)k));
    if (!st) st = dlrun_pool_set_counter(d->pools[k], counter);
    if (!st && pl->is_accelerator && rt->settings.preallocate[k])
      st = preallocate(d->pools[k], k, cap);
    if (st) {
      dlrun_pool_destroy(d->pools[k]);
      for (int j = 0; j < k; j++) dlrun_pool_destroy(d->pools[j]);
      pl->device_destroy(d, impl);
      d->impl = NULL;
      return st;
    }
  }
  return DLRUN_OK;
}

/* When an explicit capacity makes the capacities add up to more than host
 * RAM, say so in rt->memory_note (naming the first setting set). */
static void note_overcommit(dlrun_runtime *rt, uint64_t host_ram) {
  const dlrun_memory_settings *m = &rt->settings;
  int k = 0; /* the accelerators' settings apply only where there are accelerators */
  for (; k < DLRUN_CAPACITY_SETTINGS; k++)
    if ((m->bytes[k] || m->fraction[k]) && (k == DLRUN_SETTING_HOST || rt->accelerator_memory))
      break;
  if (k == DLRUN_CAPACITY_SETTINGS || rt->memory_total <= host_ram) return;
  const dlrun_device_group *g = k == DLRUN_SETTING_HOST ? NULL : rt->default_group;
  for (size_t i = 0; !g && i < rt->ngroups; i++)
    if (rt->groups[i].platform == rt->host->platform) g = &rt->groups[i];
  char each[32], total[32], ram[32];
  snprintf(rt->memory_note, sizeof rt->memory_note,
           "%s memory of %s on each of %zu %s devices over-commits host RAM: the memories "
           "of all devices add up to %s%s, more than the %s of RAM, so filling them may get the "
           "process killed instead of raising ResourceExhaustedError",
           dlrun_setting_memory_names[k],
           dlrun_format_bytes(k == DLRUN_SETTING_HOST ? rt->host_cap : rt->accelerator_caps[k],
                              each, sizeof each),
           g->local_count, g->platform->name,
           rt->memory_total == UINT64_MAX ? "at least " : "",
           dlrun_format_bytes(rt->memory_total, total, sizeof total),
           dlrun_format_bytes(host_ram, ram, sizeof ram));
}

/* Lay out devices per spec group, adding the host cpu device when absent. */
static dlrun_status build_devices(dlrun_runtime *rt, const dlrun_device_spec *spec) {
  dlrun_device_spec full = *spec;
  dlrun_complete_device_spec(&full);
  dlrun_format_device_spec(&full, rt->spec, sizeof rt->spec);

  /* Every process has the same devices (checked when the runtime is made):
   * the job has process_count times each group. */
  size_t nproc = (size_t)rt->process_count, total = 0;
  for (size_t g = 0; g < full.ngroups; g++) total += full.groups[g].count * nproc;
  rt->devices = dlrun_calloc(total, sizeof *rt->devices);
  if (!rt->devices) return dlrun_fail_oom_host(total * sizeof *rt->devices);

  uint64_t host_ram = dlrun_host_ram_bytes();
  capacity_inputs in = default_shares(&full, host_ram, &rt->settings);
  size_t at = 0;
  for (size_t g = 0; g < full.ngroups; g++) {
    size_t k_count = full.groups[g].count;
    rt->groups[g] = (dlrun_device_group){.platform = full.groups[g].platform, .first = at,
                                         .count = k_count * nproc, .local_count = k_count};
    at += k_count * nproc;
    strncat(rt->platforms, g ? "," : "", sizeof rt->platforms - strlen(rt->platforms) - 1);
    strncat(rt->platforms, rt->groups[g].platform->name,
            sizeof rt->platforms - strlen(rt->platforms) - 1);
  }
  /* Accelerators first, then the other devices: the host memories get what
   * the others were not promised. */
  for (int pass = 0; pass < 2; pass++) {
    if (pass) in.host = host_share(&in, rt->memory_total);
    for (size_t g = 0; g < full.ngroups; g++) {
      dlrun_device_group *grp = &rt->groups[g];
      if (grp->platform->is_accelerator != !pass) continue;
      for (size_t i = 0; i < grp->count; i++) {
        size_t p = i / grp->local_count, k = i % grp->local_count;
        dlrun_status st = init_device(rt, &rt->devices[grp->first + i], grp, (int)p, k, &in);
        if (st) {
          destroy_devices(rt, total); /* those not made have no context */
          dlrun_free(rt->devices);
          rt->devices = NULL;
          return st;
        }
      }
    }
  }
  rt->ngroups = full.ngroups;
  rt->ndevices = total;
  for (size_t g = 0; g < rt->ngroups; g++) {
    /* This process's first device of the group. */
    dlrun_device *mine = &rt->devices[rt->groups[g].first +
                                      (size_t)rt->process_index * rt->groups[g].local_count];
    if (strcmp(rt->groups[g].platform->name, "cpu") == 0 && !rt->host) rt->host = mine;
    if (mine == rt->host) {
      dlrun_pool_stats stats;
      dlrun_pool_get_stats(mine->pools[DLRUN_MEM_DEVICE], &stats);
      rt->host_cap = stats.bytes_limit;
    }
    if (rt->groups[g].platform->is_accelerator && !rt->default_group) {
      rt->default_group = &rt->groups[g];
      for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
        dlrun_pool_stats stats;
        dlrun_pool_get_stats(mine->pools[k], &stats);
        rt->accelerator_caps[k] = stats.bytes_limit;
      }
      rt->accelerator_memory = rt->accelerator_caps[DLRUN_MEM_DEVICE];
    }
  }
  if (!rt->default_group)
    for (size_t g = 0; g < rt->ngroups; g++)
      if (rt->groups[g].platform == rt->host->platform) rt->default_group = &rt->groups[g];
  note_overcommit(rt, host_ram);
  return DLRUN_OK;
}

static void release_last(dlrun_ref *ref);

dlrun_status dlrun_runtime_create(const dlrun_config *config, dlrun_runtime **out) {
  DLRUN_NONNULL(out, "dlrun_runtime_create", "out");
  *out = NULL;
  dlrun_device_spec spec;
  dlrun_memory_settings settings;
  dlrun_worker_plan workers;
  dlrun_status st = resolve_config(config, &spec, &settings);
  if (!st) st = dlrun_plan_workers(&workers); /* the join counted this host's processes */
  if (!st) st = dlrun_apply_stream_setting(workers.crowded);
  if (!st) st = dlrun_platforms_check_config(); /* checked before any collective */
  if (st) return st;

  /* In a job, every process must lay out the same devices: agreeing is the
   * first collective of a runtime. */
  dlrun_device_spec full = spec;
  char canonical[128];
  dlrun_complete_device_spec(&full);
  dlrun_format_device_spec(&full, canonical, sizeof canonical);
  if ((st = dlrun_distributed_agree_config("device spec", canonical))) return st;

  dlrun_runtime *rt = dlrun_calloc(1, sizeof *rt);
  if (!rt) return dlrun_fail_oom_host(sizeof *rt);
  rt->settings = settings;
  rt->process_index = dlrun_process_index();
  rt->process_count = dlrun_process_count();
  dlrun_ref_init(&rt->ref, release_last);
  rt->worker_plan = workers;
  if ((st = dlrun_workers_create(workers.count, &rt->workers))) {
    dlrun_free(rt);
    return st;
  }
  if ((st = build_devices(rt, &spec))) {
    dlrun_workers_destroy(rt->workers);
    dlrun_free(rt);
    return st;
  }
  *out = rt;
  return DLRUN_OK;
}

const char *dlrun_runtime_memory_note(const dlrun_runtime *rt) {
  return rt && rt->memory_note[0] ? rt->memory_note : NULL;
}

int dlrun_runtime_workers(const dlrun_runtime *rt, const char **note) {
  if (note) *note = rt ? rt->worker_plan.note : NULL;
  return rt ? rt->worker_plan.count : 0;
}

void dlrun_runtime_retain(dlrun_runtime *rt) {
  if (rt) dlrun_ref_retain(&rt->ref);
}

static void destroy_runtime(dlrun_runtime *rt) {
  /* No reference to a kept sharding is left but the device's: every other
   * held the runtime. */
  for (size_t i = 0; i < rt->ndevices; i++)
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
      dlrun_ref *kept = atomic_load(&rt->devices[i].kept_sharding[k]);
      if (kept) dlrun_ref_release(kept);
    }
  destroy_devices(rt, rt->ndevices);
  dlrun_workers_destroy(rt->workers);
  dlrun_free(rt->devices);
  dlrun_free(rt);
}

static void *destroy_in_background(void *rt) {
  destroy_runtime(rt);
  return NULL;
}

/* The last reference may go on one of the runtime's own workers (a task
 * dropping the last buffer): it cannot wait for itself or join itself, so
 * another thread tears the runtime down. */
static void release_last(dlrun_ref *ref) {
  dlrun_runtime *rt = (dlrun_runtime *)ref;
  /* Not on a thread that runs the runtime's work or a driver's callbacks:
   * tearing down would wait for (or free) the thread itself. */
  if (dlrun_workers_is_current(rt->workers) || dlrun_in_event_callback()) {
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

void dlrun_runtime_release(dlrun_runtime *rt) {
  if (rt) dlrun_ref_release(&rt->ref);
}

/* The process-wide default runtime and its configuration. */
static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
static dlrun_runtime *default_rt;
static char *default_devices;
static dlrun_config default_cfg; /* devices: default_devices */

/* Fail naming `setting`, which would change the running runtime. */
static dlrun_status refuse_change(const dlrun_runtime *rt, const char *setting,
                                  const char *now) {
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "configure must be called before the runtime is first used (it is already "
                    "running with devices %s): %s cannot change once it runs (it is %s)",
                    rt->spec, setting, now);
}

/* DLRUN_OK when every setting of c is what the running runtime has, else
 * the error naming the first that differs. */
static dlrun_status check_unchanged(const dlrun_runtime *rt, const dlrun_config *c) {
  if (c->devices) {
    dlrun_device_spec spec;
    char canonical[sizeof rt->spec];
    if (dlrun_parse_device_spec(c->devices, &spec)) return DLRUN_ERR_VALUE;
    dlrun_complete_device_spec(&spec);
    if (strcmp(dlrun_format_device_spec(&spec, canonical, sizeof canonical), rt->spec) != 0)
      return dlrun_fail(DLRUN_ERR_RUNTIME,
                        "configure must be called before the runtime is first used "
                        "(it is already running with devices %s)",
                        rt->spec);
  }
  for (int k = 0; k < DLRUN_CAPACITY_SETTINGS; k++) {
    uint64_t bytes;
    double fraction;
    dlrun_preallocate pre;
    dlrun_config_kind(c, k, &bytes, &fraction, &pre);
    bool host = k == DLRUN_SETTING_HOST;
    uint64_t cap = host ? rt->host_cap : rt->accelerator_caps[k];
    char now[64], human[32];
    snprintf(now, sizeof now, "%s per %s device", dlrun_format_bytes(cap, human, sizeof human),
             host ? rt->host->platform->name : rt->default_group->platform->name);
    if (bytes && (bytes & ~(uint64_t)(DLRUN_POOL_ALIGN - 1)) != cap)
      return refuse_change(rt, dlrun_setting_names[k], now);
    if (fraction && fraction != rt->settings.fraction[k]) {
      char name[40];
      snprintf(name, sizeof name, "%s_fraction", dlrun_setting_names[k]);
      return refuse_change(rt, name, now);
    }
    if (pre && (pre == DLRUN_PREALLOCATE_ON) != rt->settings.preallocate[k])
      return refuse_change(rt, dlrun_preallocate_names[k], rt->settings.preallocate[k] ? "true" : "false");
  }
  return DLRUN_OK;
}

/* Fold the settings of c that are set into the stored configuration. */
static dlrun_status store_config(const dlrun_config *c) {
  if (c->devices) {
    char *copy = dlrun_strdup(c->devices);
    if (!copy) return dlrun_fail_oom_host(strlen(c->devices) + 1);
    dlrun_free(default_devices);
    default_devices = copy;
  }
  for (int k = 0; k < DLRUN_CAPACITY_SETTINGS; k++) {
    uint64_t bytes, *b;
    double fraction, *f;
    dlrun_preallocate pre, *p;
    dlrun_config_kind(c, k, &bytes, &fraction, &pre);
    dlrun_config_fields(&default_cfg, k, &b, &f, &p);
    if (bytes || fraction) *b = bytes, *f = fraction; /* the later setting replaces both */
    if (pre && p) *p = pre;
  }
  return DLRUN_OK;
}

dlrun_status dlrun_default_set_config(const dlrun_config *config) {
  DLRUN_NONNULL(config, "dlrun_default_set_config", "config");
  dlrun_status st = DLRUN_OK;
  if (config->devices && (st = dlrun_check_device_spec(config->devices))) return st;
  for (int k = 0; k < DLRUN_CAPACITY_SETTINGS; k++) {
    uint64_t bytes;
    double fraction;
    dlrun_preallocate pre;
    dlrun_config_kind(config, k, &bytes, &fraction, &pre);
    if ((st = dlrun_check_kind(k, bytes, fraction, pre))) return st;
  }
  pthread_mutex_lock(&default_mu);
  st = default_rt ? check_unchanged(default_rt, config) : store_config(config);
  pthread_mutex_unlock(&default_mu);
  return st;
}

dlrun_status dlrun_default_configure(const char *devices, uint64_t device_memory) {
  dlrun_config c = {.devices = devices, .device_memory = device_memory};
  return dlrun_default_set_config(&c);
}

static void release_default(void) {
  pthread_mutex_lock(&default_mu);
  dlrun_runtime *rt = default_rt;
  default_rt = NULL;
  dlrun_free(default_devices);
  default_devices = NULL;
  default_cfg = (dlrun_config){0};
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
    dlrun_config cfg = default_cfg;
    cfg.devices = default_devices;
    /* Traced from its start: the allocations of preallocation too. */
    st = dlrun_trace_start_from_env();
    if (!st) st = dlrun_runtime_create(&cfg, &default_rt);
    if (!st && !registered) registered = atexit(release_default) == 0;
  }
  if (!st) {
    dlrun_runtime_retain(default_rt);
    *out = default_rt;
  }
  pthread_mutex_unlock(&default_mu);
  return st;
}
