/* "testnative": the skeleton of a platform with a queue of its own, and
 * the conformance suite's platform (spec/c/test_conformance.c).
 *
 * To add a platform (HIP, Level Zero, ...), copy this file's shape, in the
 * order of its sections (docs/architecture.md, "Adding a platform"):
 *   1. the device context: what device_init makes (device_impl reads it),
 *      an opq_queue among it;
 *   2. events: a point of the device's queue. Here they are the platform's
 *      own kind on purpose (below); a driver platform's are the library's
 *      timeline points instead, and it has no section 2;
 *   3. the queue: the op protocol (src/platforms/common/op_queue.h) keeps
 *      the op list, the waits (of any platform: svc->event_then, never a
 *      blocked thread), the order points complete in and the wording of
 *      failures; the platform fills its hooks (opq_driver) and runs the
 *      driver's commands (here host loops on a thread per device, in
 *      order; a GPU's copies and kernels on its stream);
 *   4. the work slots: copy_box, fill, record, inject_failure;
 *   5. devices: device_init, device_destroy (after every point completed);
 *   6. memory: device addresses a host must not read (svc->map_inaccessible),
 *      host memory for pinned_host; reserve, release, owns;
 *   7. DLPack: the (device_type, device_id) a memory exports as, and back;
 *   8. the vtable, then the module's open function, the one symbol the
 *      library looks up (it hands over the services: never link libdlrun).
 * Built as every module is, on the public headers and the common op
 * protocol alone (the Makefile's rule for it, the common .c files
 * compiled in); the conformance suite loads it from beside its binary,
 * registers it and runs every case on two of its devices.
 *
 * Why its own events: the library's handling of foreign events (another
 * platform's, read only through their slots) is exercised by them. Each is
 * a device and a sequence number, with the device's condition variable and
 * callback list; the op protocol begins and completes them through its
 * begin_point / complete_point hooks (a driver platform leaves them NULL:
 * timeline points). A command waits for other platforms' events through
 * svc->event_then (its thread never blocks on them), and one that waits on
 * a failed event fails with that event's message.
 *
 * Its device memory is not readable by the host at its device addresses
 * (an inaccessible range; the bytes live in a private mapping only this
 * file uses), pinned_host memory is host memory, and each device runs its
 * work on one thread of its own, in order. A test tool: never installed,
 * never found by "auto" (not an accelerator).
 *
 * Test hooks, found with dlsym: dlrun_testnative_hold(dev, 1) keeps dev's
 * thread from starting its next command until dlrun_testnative_hold(dev,
 * 0), so that a test can prove that work waiting on it has not run;
 * dlrun_testnative_ran(dev) counts the commands dev's thread ran. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dlrun/platform.h"
#include "platforms/common/op_queue.h"

#define DL_CPU 1
#define DL_EXT_DEV 12
#define MAX_REGIONS 8 /* per memory: a pool reserves once, more than enough */

/* ---- 1. the device context ---- */

/* The library's services (handed to the module's open) and the vtable. */
static const dlrun_platform_services *svc;
static const dlrun_platform platform;

/* A reserved memory: device addresses [base, base + size), bytes at view
 * (the same for pinned_host memory, which is host memory). */
typedef struct tn_region {
  unsigned char *base, *view;
  uint64_t size;
} tn_region;

typedef enum tn_kind { TN_COPY, TN_FILL, TN_MARK } tn_kind;

/* A command of a device's queue: an op of the protocol (first), what the
 * driver runs for it. Holds: its run, each wait, the enqueue's. */
typedef struct tn_cmd {
  opq_op base;
  tn_kind kind;
  bool ran;              /* under q.lock; it runs once base.gates is 0 */
  dlrun_copy_op *op;     /* TN_COPY: the caller's, valid until done */
  dlrun_memory_kind mem; /* TN_FILL */
  void *data;
  uint64_t nbytes;
  dlrun_fill fill;
} tn_cmd;

/* A callback of event_then. */
typedef struct tn_callback {
  struct tn_callback *next;
  uint64_t seq;
  void (*fn)(void *);
  void *ctx;
} tn_callback;

/* A failed point, kept as long as the device lives. */
typedef struct tn_failure {
  struct tn_failure *next;
  uint64_t seq;
  dlrun_status status;
  char msg[512];
} tn_failure;

typedef struct tn_device {
  dlrun_device *dev;
  size_t index;            /* among this process's devices of the platform */
  opq_queue q;             /* its commands; q.lock guards the fields below too */
  pthread_cond_t work;     /* the thread: a command may be ready, or stop */
  pthread_cond_t complete; /* event_wait: a point completed */
  pthread_t thread;
  bool stop, held;
  uint64_t begun;
  _Atomic uint64_t completed; /* points complete (event_query) */
  uint64_t settled;           /* and their callbacks run (event_wait) */
  atomic_uint ran;
  tn_callback *callbacks;
  tn_failure *failures;
  tn_region regions[DLRUN_MEM_KIND_COUNT][MAX_REGIONS];
} tn_device;

static tn_device *tn_of(const dlrun_device *dev) { return svc->device_impl(dev); }

/* ---- 2. events: (device, sequence number); point n is complete once
 * the device completed n commands. A driver platform has none of this: its
 * points are timeline points (svc->timeline_*) ---- */

static dlrun_event event_of(tn_device *t, uint64_t seq) {
  return (dlrun_event){.platform = &platform, .handle = {(uintptr_t)t, (uintptr_t)seq}};
}
static tn_device *event_device(dlrun_event ev) { return (tn_device *)ev.handle[0]; }

static bool tn_event_query(dlrun_event ev) {
  return atomic_load(&event_device(ev)->completed) >= (uint64_t)ev.handle[1];
}

static dlrun_status tn_event_wait(dlrun_event ev) {
  tn_device *t = event_device(ev);
  uint64_t seq = (uint64_t)ev.handle[1];
  pthread_mutex_lock(&t->q.lock);
  /* Its own thread (a callback asking) cannot wait for its callbacks. */
  bool own = pthread_equal(pthread_self(), t->thread);
  while ((own ? atomic_load(&t->completed) : t->settled) < seq)
    pthread_cond_wait(&t->complete, &t->q.lock);
  const tn_failure *f = t->failures;
  while (f && f->seq != seq) f = f->next;
  dlrun_status st = f ? f->status : DLRUN_OK;
  char msg[sizeof f->msg];
  if (f) memcpy(msg, f->msg, sizeof msg);
  pthread_mutex_unlock(&t->q.lock);
  return st ? svc->fail(st, "%s", msg) : DLRUN_OK;
}

static dlrun_status tn_event_then(dlrun_event ev, void (*fn)(void *), void *ctx) {
  tn_device *t = event_device(ev);
  uint64_t seq = (uint64_t)ev.handle[1];
  pthread_mutex_lock(&t->q.lock);
  if (atomic_load(&t->completed) >= seq) {
    pthread_mutex_unlock(&t->q.lock);
    fn(ctx);
    return DLRUN_OK;
  }
  tn_callback *c = malloc(sizeof *c);
  if (!c) {
    pthread_mutex_unlock(&t->q.lock);
    return svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "testnative: out of host memory");
  }
  *c = (tn_callback){.next = t->callbacks, .seq = seq, .fn = fn, .ctx = ctx};
  t->callbacks = c;
  pthread_mutex_unlock(&t->q.lock);
  return DLRUN_OK;
}

/* Take the callbacks of points up to seq off the list (q.lock held). */
static tn_callback *take_callbacks(tn_device *t, uint64_t seq) {
  tn_callback *ready = NULL;
  for (tn_callback **p = &t->callbacks; *p;) {
    tn_callback *cb = *p;
    if (cb->seq > seq) {
      p = &cb->next;
      continue;
    }
    *p = cb->next;
    cb->next = ready;
    ready = cb;
  }
  return ready;
}

static void run_callbacks(tn_callback *ready) {
  while (ready) {
    tn_callback *cb = ready;
    ready = cb->next;
    cb->fn(cb->ctx);
    free(cb);
  }
}

/* ---- 3. the queue: the op protocol (common/op_queue.h) keeps the order,
 * the waits and the failures' wording; the driver's part is its hooks, the
 * commands and when they run: here one thread per device, in order ---- */

/* Not called: the host loops never fail (a driver's text for its code). */
static const char *error_text(int code) {
  (void)code;
  return "TESTNATIVE_ERROR";
}

static void cmd_free(opq_op *o) {
  opq_op_destroy(o);
  free(o);
}

/* A command became complete, or a gate of one opened: the device's thread
 * completes its point, or runs it. */
static void cmd_wake(opq_queue *q) { pthread_cond_signal(&((tn_device *)q->owner)->work); }

static dlrun_event point_begin(opq_queue *q) {
  tn_device *t = q->owner;
  return event_of(t, ++t->begun);
}

/* Complete a point: it reads complete, its callbacks run (outside the
 * lock; one registered meanwhile runs at once, the point being complete),
 * then host waits on it return. Waits return after the callbacks so that
 * a host thread that waited never races them (a callback may drop the
 * last hold on a buffer, and with it on the runtime). */
static void point_complete(opq_queue *q, dlrun_event point, dlrun_status st, const char *msg) {
  tn_device *t = q->owner;
  uint64_t seq = (uint64_t)point.handle[1];
  tn_failure *f = NULL;
  if (st && (f = calloc(1, sizeof *f))) {
    f->seq = seq;
    f->status = st;
    snprintf(f->msg, sizeof f->msg, "%s", msg);
  }
  pthread_mutex_lock(&t->q.lock);
  if (f) {
    f->next = t->failures;
    t->failures = f;
  }
  atomic_store(&t->completed, seq);
  tn_callback *ready = take_callbacks(t, seq);
  pthread_mutex_unlock(&t->q.lock);
  run_callbacks(ready);
  pthread_mutex_lock(&t->q.lock);
  t->settled = seq;
  pthread_cond_broadcast(&t->complete);
  pthread_mutex_unlock(&t->q.lock);
}

static const opq_driver tn_driver = {.error_name = error_text,
                                     .free_op = cmd_free,
                                     .wake = cmd_wake,
                                     .begin_point = point_begin,
                                     .complete_point = point_complete};

static void *view_of(const dlrun_device *dev, dlrun_memory_kind kind, const void *data) {
  tn_device *t = tn_of(dev);
  const unsigned char *p = data;
  for (int i = 0; i < MAX_REGIONS; i++) {
    tn_region *r = &t->regions[kind][i];
    if (r->base && p >= r->base && p <= r->base + r->size) return r->view + (p - r->base);
  }
  return (void *)data; /* not reserved here: host memory the caller named */
}

static void *end_view(const dlrun_box_end *e) {
  return e->dev ? view_of(e->dev, e->kind, e->data) : (void *)e->data;
}

/* The driver's work of a command (a GPU's copy or fill kernel). */
static void run(tn_cmd *c) {
  tn_device *t = c->base.q->owner;
  if (c->kind == TN_FILL) {
    svc->host_fill(view_of(t->dev, c->mem, c->data), c->nbytes, &c->fill);
  } else if (c->kind == TN_COPY) {
    const dlrun_copy_op *op = c->op;
    void *dst = end_view(&op->dst);
    for (size_t i = 0; i < op->npieces; i++) {
      const dlrun_copy_piece *p = &op->pieces[i];
      svc->host_copy_box(op->esize, op->ndim, p->lo, p->hi, dst, op->dst.origin,
                         op->dst.strides, end_view(&p->src), p->src.origin, p->src.strides,
                         op->stream);
    }
  }
}

/* The first command not yet run (q.lock held), or NULL. */
static tn_cmd *next_to_run(tn_device *t) {
  opq_op *o = t->q.head;
  while (o && ((tn_cmd *)o)->ran) o = o->next;
  return (tn_cmd *)o;
}

/* Runs the commands in order, each once its gates opened (and the device
 * is not held), and completes the points of those complete (opq_drain). A
 * command that already fails (a failed wait, an injected failure) skips
 * its work: its point fails, worded by the protocol. */
static void *device_thread(void *arg) {
  tn_device *t = arg;
  pthread_mutex_lock(&t->q.lock);
  for (;;) {
    if (t->q.head && t->q.head->complete) {
      pthread_mutex_unlock(&t->q.lock);
      opq_drain(&t->q);
      pthread_mutex_lock(&t->q.lock);
      continue;
    }
    tn_cmd *c = next_to_run(t);
    if (c && !t->held && c->base.gates == 0) {
      c->ran = true;
      pthread_mutex_unlock(&t->q.lock);
      if (!opq_failing(&c->base)) run(c);
      atomic_fetch_add(&t->ran, 1);
      pthread_mutex_lock(&t->q.lock);
      opq_release_locked(&c->base); /* its run */
      continue;
    }
    if (!t->q.head && t->stop) break;
    pthread_cond_wait(&t->work, &t->q.lock);
  }
  pthread_mutex_unlock(&t->q.lock);
  return NULL;
}

/* Whether the queue orders a command after ev already: an earlier point of
 * its own device (the queue is in order). A wait on it only tells the
 * command its failure; one on elsewhere gates it. */
static bool own_point(opq_op *op, dlrun_event ev) {
  return ev.platform == &platform && event_device(ev) == op->q->owner;
}

/* Queue c (zeroed but for the driver's fields) after its waits; sets
 * *done. The waits are resolved before the lock: asking a complete event
 * of this device for its failure takes it. */
static dlrun_status enqueue(tn_device *t, tn_cmd *c, const char *what, int inject_kind,
                            const dlrun_event *waits, size_t nwaits, dlrun_event *done) {
  opq_wait **ws = calloc(nwaits ? nwaits : 1, sizeof *ws);
  if (!ws) {
    free(c);
    return svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "testnative: out of host memory");
  }
  opq_op_init(&c->base, &t->q, what, 2); /* its run, the enqueue's hold */
  size_t nws = opq_waits_gate(&c->base, waits, nwaits, own_point, ws);
  pthread_mutex_lock(&t->q.lock);
  c->base.injected = opq_take_injected(&t->q, inject_kind);
  opq_push(&c->base);
  pthread_cond_signal(&t->work);
  pthread_mutex_unlock(&t->q.lock);
  if (done) *done = c->base.point;
  opq_waits_then(ws, nws);
  free(ws);
  opq_release(&c->base); /* the enqueue's hold */
  return DLRUN_OK;
}

static tn_cmd *new_cmd(tn_kind kind) {
  tn_cmd *c = calloc(1, sizeof *c);
  if (!c) svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "testnative: out of host memory");
  else c->kind = kind;
  return c;
}

/* ---- 4. the work slots: each makes a command and queues it ---- */

static dlrun_status tn_copy_box(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                                size_t nwaits, dlrun_event *done) {
  tn_cmd *c = new_cmd(op->npieces ? TN_COPY : TN_MARK);
  if (!c) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  c->op = op;
  c->base.on_complete = op->complete; /* before its point completes: it may free op */
  c->base.ctx = op->complete_ctx;
  return enqueue(tn_of(dev), c, "copy", op->npieces ? DLRUN_WORK_COPY : -1, waits, nwaits,
                 done);
}

static dlrun_status tn_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                            uint64_t nbytes, const dlrun_fill *f, const dlrun_event *waits,
                            size_t nwaits, dlrun_event *done) {
  tn_cmd *c = new_cmd(TN_FILL);
  if (!c) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  c->mem = kind;
  c->data = data;
  c->nbytes = nbytes;
  c->fill = *f;
  return enqueue(tn_of(dev), c, "fill", DLRUN_WORK_FILL, waits, nwaits, done);
}

static dlrun_status tn_record(dlrun_device *dev, const dlrun_event *waits, size_t nwaits,
                              dlrun_event *done) {
  tn_device *t = tn_of(dev);
  if (nwaits == 0) { /* the point of the last command queued */
    pthread_mutex_lock(&t->q.lock);
    if (done) *done = event_of(t, t->begun);
    pthread_mutex_unlock(&t->q.lock);
    return DLRUN_OK;
  }
  tn_cmd *c = new_cmd(TN_MARK);
  return c ? enqueue(t, c, "record", -1, waits, nwaits, done) : DLRUN_ERR_RESOURCE_EXHAUSTED;
}

static dlrun_status tn_inject(dlrun_device *dev, dlrun_work_kind what, unsigned count) {
  tn_device *t = tn_of(dev);
  pthread_mutex_lock(&t->q.lock);
  t->q.inject[what] = count;
  pthread_mutex_unlock(&t->q.lock);
  return DLRUN_OK;
}

/* ---- 5. devices ---- */

static dlrun_status tn_device_init(dlrun_device *dev, size_t local_index, size_t ndevices,
                                   void **impl) {
  (void)ndevices;
  tn_device *t = calloc(1, sizeof *t);
  if (!t) return svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "testnative: out of host memory");
  t->dev = dev;
  t->index = local_index;
  opq_queue_init(&t->q, svc, &tn_driver, t, svc->device_name(dev));
  pthread_cond_init(&t->work, NULL);
  pthread_cond_init(&t->complete, NULL);
  if (pthread_create(&t->thread, NULL, device_thread, t)) {
    pthread_cond_destroy(&t->complete);
    pthread_cond_destroy(&t->work);
    opq_queue_destroy(&t->q);
    free(t);
    return svc->fail(DLRUN_ERR_RUNTIME, "testnative: cannot start the device's thread");
  }
  *impl = t;
  return DLRUN_OK;
}

/* Called once every point completed: the thread stops. */
static void tn_device_destroy(dlrun_device *dev, void *impl) {
  (void)dev;
  tn_device *t = impl;
  pthread_mutex_lock(&t->q.lock);
  t->stop = true;
  t->held = false;
  pthread_cond_signal(&t->work);
  pthread_mutex_unlock(&t->q.lock);
  pthread_join(t->thread, NULL);
  while (t->failures) {
    tn_failure *f = t->failures;
    t->failures = f->next;
    free(f);
  }
  pthread_cond_destroy(&t->complete);
  pthread_cond_destroy(&t->work);
  opq_queue_destroy(&t->q);
  free(t);
}

/* ---- 6. memory ---- */

static bool tn_is_host_memory(const dlrun_device *dev, dlrun_memory_kind kind) {
  (void)dev;
  return kind == DLRUN_MEM_PINNED_HOST;
}

static void tn_memory_info(const dlrun_device *dev, dlrun_memory_kind kind,
                           dlrun_memory_info *out) {
  (void)dev, (void)kind;
  *out = (dlrun_memory_info){.total = svc->host_ram(), .host_ram = true};
}

static uint64_t tn_default_capacity(const dlrun_device *dev, dlrun_memory_kind kind,
                                    size_t ndevices) {
  (void)dev, (void)kind, (void)ndevices;
  return 64u << 20;
}

static dlrun_status map_host(uint64_t size, void **out) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED)
    return svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "testnative: cannot map %llu bytes",
                     (unsigned long long)size);
  *out = p;
  return DLRUN_OK;
}

static dlrun_status tn_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size,
                               void **base) {
  tn_device *t = tn_of(dev);
  tn_region *r = NULL;
  for (int i = 0; i < MAX_REGIONS && !r; i++)
    if (!t->regions[kind][i].base) r = &t->regions[kind][i];
  if (!r) return svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "testnative: too many regions");
  void *view = NULL, *addr = NULL;
  dlrun_status st = map_host(size, &view);
  if (st) return st;
  addr = view;
  if (kind == DLRUN_MEM_DEVICE && (st = svc->map_inaccessible(size, &addr))) {
    munmap(view, size);
    return st;
  }
  pthread_mutex_lock(&t->q.lock);
  *r = (tn_region){.base = addr, .view = view, .size = size};
  pthread_mutex_unlock(&t->q.lock);
  *base = addr;
  return DLRUN_OK;
}

static void tn_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  tn_device *t = tn_of(dev);
  for (int i = 0; i < MAX_REGIONS; i++) {
    tn_region *r = &t->regions[kind][i];
    if (r->base != base) continue;
    if (r->view != r->base) svc->unmap(r->base, size);
    munmap(r->view, size);
    *r = (tn_region){0};
  }
}

static bool tn_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                    uint64_t n) {
  if (kind != DLRUN_MEM_DEVICE || n == 0) return true; /* host memory */
  const tn_device *t = tn_of(dev);
  const unsigned char *p = data;
  for (int i = 0; i < MAX_REGIONS; i++) {
    const tn_region *r = &t->regions[kind][i];
    if (r->base && p >= r->base && (uint64_t)(p - r->base) <= r->size &&
        n <= r->size - (uint64_t)(p - r->base))
      return true;
  }
  return false;
}

/* ---- 7. DLPack: device memory as (kDLExtDev, local index), pinned_host
 * as the host's ---- */

static void tn_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                             int32_t *id) {
  bool host = kind == DLRUN_MEM_PINNED_HOST;
  *type = host ? DL_CPU : DL_EXT_DEV;
  *id = host ? 0 : (int32_t)tn_of(dev)->index; /* a process-local ordinal */
}

static ptrdiff_t tn_dlpack_lookup(int32_t type, int32_t id, size_t ndevices,
                                  dlrun_memory_kind *kind) {
  *kind = DLRUN_MEM_DEVICE;
  return type == DL_EXT_DEV && id >= 0 && (size_t)id < ndevices ? id : -1;
}

/* ---- 8. the vtable (optional slots left NULL: platform.h says what the
 * library does without them) and the module's open ---- */

static const dlrun_platform platform = {
    .abi = DLRUN_PLATFORM_ABI,
    .name = "testnative",
    .class_name = "TestNativeDevice",
    .is_accelerator = false,
    .device_init = tn_device_init,
    .device_destroy = tn_device_destroy,
    .is_host_memory = tn_is_host_memory,
    .host_readable = tn_is_host_memory,
    .memory_info = tn_memory_info,
    .default_capacity = tn_default_capacity,
    .reserve = tn_reserve,
    .release = tn_release,
    .owns = tn_owns,
    .copy_box = tn_copy_box,
    .fill = tn_fill,
    .record = tn_record,
    .event_query = tn_event_query,
    .event_wait = tn_event_wait,
    .event_then = tn_event_then,
    .dlpack_device = tn_dlpack_device,
    .dlpack_lookup = tn_dlpack_lookup,
    .inject_failure = tn_inject,
};

/* The module's entry point: refuse another ABI (the library says why),
 * keep the services, hand over the vtable. */
DLRUN_API int dlrun_platform_module_open(int abi, const dlrun_platform_services *services,
                                         const dlrun_platform **out, char *err, size_t n) {
  if (abi != DLRUN_PLATFORM_ABI || services->abi != DLRUN_PLATFORM_ABI) {
    snprintf(err, n, "testnative was built for platform ABI %d", DLRUN_PLATFORM_ABI);
    return 1;
  }
  svc = services;
  *out = &platform;
  return 0;
}

/* ---- test hooks ---- */

DLRUN_API void dlrun_testnative_hold(dlrun_device *dev, int hold) {
  tn_device *t = tn_of(dev);
  pthread_mutex_lock(&t->q.lock);
  t->held = hold != 0;
  pthread_cond_signal(&t->work);
  pthread_mutex_unlock(&t->q.lock);
}

DLRUN_API unsigned dlrun_testnative_ran(dlrun_device *dev) { return atomic_load(&tn_of(dev)->ran); }
