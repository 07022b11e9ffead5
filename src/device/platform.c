/* The registry of device kinds. The built-in platforms are in
 * src/platforms/sim and src/platforms/cpu; hardware platforms are modules
 * (modules.c) or a host's own. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buffer.h"
#include "core/status_impl.h"
#include "platform_impl.h"

/* The registry: platforms registered at run time (hardware backends) come
 * first, so that "auto" prefers them, then the built-in ones. */
static const dlrun_platform *registry[DLRUN_MAX_PLATFORMS];
static size_t registry_count, registered;
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

/* The built-in platforms fill their vtables from the services when opened. */
static void open_builtins(void) {
  registry[registry_count++] = dlrun_sim_platform_open(dlrun_platform_services_get());
  registry[registry_count++] = dlrun_cpu_platform_open(dlrun_platform_services_get());
}

/* Lock the registry, its built-in platforms in. */
static void lock_registry(void) {
  pthread_once(&builtins_once, open_builtins);
  pthread_mutex_lock(&registry_mu);
}

static const dlrun_platform *find_locked(const char *name, size_t len) {
  for (size_t i = 0; i < registry_count; i++)
    if (strlen(registry[i]->name) == len && memcmp(registry[i]->name, name, len) == 0)
      return registry[i];
  return NULL;
}

const dlrun_platform *dlrun_platform_find(const char *name, size_t len) {
  lock_registry();
  const dlrun_platform *pl = find_locked(name, len);
  pthread_mutex_unlock(&registry_mu);
  return pl;
}

size_t dlrun_platform_list(const dlrun_platform **out, size_t max) {
  lock_registry();
  size_t n = registry_count < max ? registry_count : max;
  memcpy(out, registry, n * sizeof *out);
  pthread_mutex_unlock(&registry_mu);
  return n;
}

dlrun_status dlrun_platforms_check_config(void) {
  const dlrun_platform *pls[DLRUN_MAX_PLATFORMS];
  size_t n = dlrun_platform_list(pls, DLRUN_MAX_PLATFORMS);
  for (size_t i = 0; i < n; i++) {
    dlrun_status st = pls[i]->check_config ? pls[i]->check_config() : DLRUN_OK;
    if (st) return st;
  }
  return DLRUN_OK;
}

/* The slots every platform must fill (platform.h), by name for the error. */
static const char *missing_slot(const dlrun_platform *pl) {
#define REQUIRE(slot) if (!pl->slot) return #slot
  REQUIRE(class_name); REQUIRE(device_init); REQUIRE(device_destroy); REQUIRE(is_host_memory);
  REQUIRE(host_readable); REQUIRE(memory_info); REQUIRE(default_capacity); REQUIRE(reserve);
  REQUIRE(release); REQUIRE(owns); REQUIRE(copy_box); REQUIRE(fill); REQUIRE(record);
  REQUIRE(event_query); REQUIRE(event_wait); REQUIRE(event_then); REQUIRE(dlpack_device);
  REQUIRE(dlpack_lookup);
  if (pl->share) { /* what a peer maps it with */
    REQUIRE(map_shared);
    REQUIRE(unmap_shared);
  }
#undef REQUIRE
  return NULL;
}

/* The registry is full: say what fills it, the built-in platforms and the
 * loaded modules counting as the host's own do. Called locked. */
static dlrun_status registry_full(const char *name) {
  char names[DLRUN_MAX_PLATFORMS * 24] = "";
  size_t used = 0;
  for (size_t i = 0; i < registry_count && used < sizeof names; i++)
    used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                             registry[i]->name);
  return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                    "cannot register platform %s: the registry holds %d platforms at most, the "
                    "built-in sim and cpu and the loaded modules included, and holds %zu (%s); "
                    "unregister one first",
                    name, DLRUN_MAX_PLATFORMS, registry_count, names);
}

dlrun_status dlrun_platform_register(const dlrun_platform *pl) {
  if (!pl || !pl->name || !pl->name[0])
    return dlrun_fail(DLRUN_ERR_VALUE, "a platform needs a name");
  if (pl->abi != DLRUN_PLATFORM_ABI)
    return dlrun_fail(DLRUN_ERR_VALUE, "platform %s was built for platform ABI %d; this dlrun "
                      "has ABI %d (rebuild it against this dlrun/platform.h)",
                      pl->name, pl->abi, DLRUN_PLATFORM_ABI);
  const char *slot = missing_slot(pl);
  if (slot)
    return dlrun_fail(DLRUN_ERR_VALUE, "platform %s lacks the required slot %s", pl->name, slot);
  lock_registry();
  dlrun_status st = DLRUN_OK;
  if (find_locked(pl->name, strlen(pl->name)))
    st = dlrun_fail(DLRUN_ERR_VALUE, "platform %s is already registered", pl->name);
  else if (registry_count == DLRUN_MAX_PLATFORMS)
    st = registry_full(pl->name);
  if (!st) {
    memmove(registry + registered + 1, registry + registered,
            (registry_count - registered) * sizeof *registry);
    registry[registered++] = pl;
    registry_count++;
  }
  pthread_mutex_unlock(&registry_mu);
  return st;
}

void dlrun_platform_unregister(const dlrun_platform *pl) {
  lock_registry();
  for (size_t i = 0; i < registered; i++)
    if (registry[i] == pl) {
      memmove(registry + i, registry + i + 1, (registry_count - i - 1) * sizeof *registry);
      registered--;
      registry_count--;
      break;
    }
  pthread_mutex_unlock(&registry_mu);
}
