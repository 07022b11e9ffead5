/* The registry of device kinds, and the cpu platform (real host memory).
 * The sim platform (simulated accelerators) is in sim.c. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "buffer.h"
#include "core/status_impl.h"
#include "platform_impl.h"

uint64_t dlrun_host_ram_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 1ull << 32;
  return (uint64_t)pages * (uint64_t)page;
}

static uint64_t cpu_capacity(dlrun_memory_kind kind, size_t ndevices, uint64_t host_ram) {
  (void)kind;
  (void)ndevices;
  return host_ram;
}

/* ---- slots shared by platforms whose memory is host memory ---- */

static dlrun_status host_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size,
                                 void **base) {
  (void)dev;
  (void)kind;
  return dlrun_map_range(size, true, base);
}

static void host_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  (void)dev;
  (void)kind;
  dlrun_unmap_range(base, size);
}

static dlrun_status host_commit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t size) {
  (void)dev;
  (void)kind;
  return dlrun_commit_range(data, size);
}

static uint64_t host_decommit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                              uint64_t size) {
  (void)dev;
  (void)kind;
  return dlrun_decommit_range(data, size);
}

static bool host_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                      uint64_t n) {
  (void)dev;
  (void)kind;
  (void)data;
  (void)n;
  return true; /* any host address */
}

static bool host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  (void)dev;
  (void)kind;
  return true;
}

static void host_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                          const dlrun_box_end *dst, const dlrun_box_end *src) {
  dlrun_host_copy_box(esize, ndim, lo, hi, (void *)dst->data, dst->origin, dst->strides,
                      src->data, src->origin, src->strides);
}

static void host_fill(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                      uint64_t nbytes, const dlrun_fill *f) {
  (void)dev;
  (void)kind;
  dlrun_host_fill(data, nbytes, f);
}

/* Host memory: the transport reaches it where the host does. */
static void *host_transport_view(const dlrun_device *dev, dlrun_memory_kind kind,
                                 const void *data) {
  (void)dev;
  (void)kind;
  return (void *)data;
}

/* Work and events on the runtime's host worker threads: each device's
 * stream is a dlrun_stream, an event a point on it. A dependency is an
 * event of any platform whose events are such points (every platform
 * today); one with native events would wait for them in its submit. */
dlrun_status dlrun_host_submit(dlrun_device *dev, dlrun_task *node, const dlrun_event *deps,
                               size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *done) {
  return dlrun_stream_submit(&dev->stream, node, deps, ndeps, fn, ctx, done);
}

dlrun_event dlrun_host_event_record(dlrun_device *dev) { return dlrun_stream_record(&dev->stream); }

/* Every cpu device's memory is the host's: (kDLCPU, 0), as JAX. */
static void cpu_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                              int32_t *id) {
  (void)dev;
  (void)kind;
  *type = DL_CPU;
  *id = 0;
}

/* Host memory, pinned host memory included, is read on the first cpu device,
 * whatever device_id the producer gives it. */
static ptrdiff_t cpu_dlpack_lookup(int32_t type, int32_t id, size_t ndevices,
                                   dlrun_memory_kind *kind) {
  (void)id;
  *kind = DLRUN_MEM_DEVICE;
  if (type == DL_CPU || type == DL_CUDA_HOST || type == DL_ROCM_HOST) return ndevices ? 0 : -1;
  return -1;
}

static const dlrun_platform cpu_platform = {
    .name = "cpu",
    .class_name = "CpuDevice",
    .is_accelerator = false,
    .default_capacity = cpu_capacity,
    .reserve = host_reserve,
    .release = host_release,
    .commit = host_commit,
    .decommit = host_decommit,
    .owns = host_owns,
    .host_readable = host_readable,
    .copy_box = host_copy_box,
    .fill = host_fill,
    .submit = dlrun_host_submit,
    .event_record = dlrun_host_event_record,
    .event_query = dlrun_stream_reached,
    .event_synchronize = dlrun_stream_wait,
    .transport_view = host_transport_view,
    .dlpack_device = cpu_dlpack_device,
    .dlpack_lookup = cpu_dlpack_lookup,
};

/* The registry: platforms registered at run time (hardware backends) come
 * first, so that "auto" prefers them, then the built-in ones. */
#define MAX_PLATFORMS 8
static const dlrun_platform *registry[MAX_PLATFORMS] = {&dlrun_sim_platform, &cpu_platform};
static size_t registry_count = 2, registered;
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;

static const dlrun_platform *find_locked(const char *name, size_t len) {
  for (size_t i = 0; i < registry_count; i++)
    if (strlen(registry[i]->name) == len && memcmp(registry[i]->name, name, len) == 0)
      return registry[i];
  return NULL;
}

const dlrun_platform *dlrun_platform_find(const char *name, size_t len) {
  pthread_mutex_lock(&registry_mu);
  const dlrun_platform *pl = find_locked(name, len);
  pthread_mutex_unlock(&registry_mu);
  return pl;
}

size_t dlrun_platform_list(const dlrun_platform **out, size_t max) {
  pthread_mutex_lock(&registry_mu);
  size_t n = registry_count < max ? registry_count : max;
  memcpy(out, registry, n * sizeof *out);
  pthread_mutex_unlock(&registry_mu);
  return n;
}

dlrun_status dlrun_platform_register(const dlrun_platform *pl) {
  if (!pl || !pl->name || !pl->name[0])
    return dlrun_fail(DLRUN_ERR_VALUE, "a platform needs a name");
  pthread_mutex_lock(&registry_mu);
  dlrun_status st = DLRUN_OK;
  if (find_locked(pl->name, strlen(pl->name)))
    st = dlrun_fail(DLRUN_ERR_VALUE, "platform %s is already registered", pl->name);
  else if (registry_count == MAX_PLATFORMS)
    st = dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot register platform %s: %d platforms "
                    "at most", pl->name, MAX_PLATFORMS);
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
  pthread_mutex_lock(&registry_mu);
  for (size_t i = 0; i < registered; i++)
    if (registry[i] == pl) {
      memmove(registry + i, registry + i + 1, (registry_count - i - 1) * sizeof *registry);
      registered--;
      registry_count--;
      break;
    }
  pthread_mutex_unlock(&registry_mu);
}
