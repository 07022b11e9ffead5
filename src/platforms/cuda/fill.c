/* Fills on the device's stream: a repeated element with cuMemsetD8Async
 * (every byte equal), cuMemsetD16Async or cuMemsetD32Async, 8- and 16-byte
 * elements and sequences with dlrun's PTX kernels (kernels.ptx); what
 * neither can write (an address not aligned to its element, a sequence of a
 * dtype after complex128: the float8 family) is computed on the host and
 * copied (cuMemcpyAsync; the bytes are kept until the fill is done). A fill
 * may span several segments: each part gets its own calls.
 * pinned_host memory is reached at its host pointers (mapped, portable). */
#include <stdlib.h>
#include <string.h>

#include "cu.h"

typedef struct fill_work {
  dlrun_memory_kind kind;
  unsigned char *data;
  uint64_t nbytes;
  dlrun_fill f;
  void **host; /* host-computed bytes, freed when done */
  size_t nhost;
} fill_work;

static void fill_work_free(void *arg) {
  fill_work *w = arg;
  for (size_t i = 0; i < w->nhost; i++) free(w->host[i]);
  free(w->host);
  free(w);
}

static unsigned blocks_for(uint64_t n) {
  uint64_t b = (n + 255) / 256;
  return (unsigned)(b == 0 ? 1 : b > 65536 ? 65536 : b);
}

static dlcu_result launch(cu_device *d, int which, void **params, uint64_t n) {
  dlcu_function fn;
  dlcu_result r = cu_kernel_of(d, which, &fn);
  if (r) return r;
  return cu_api.LaunchKernel(fn, blocks_for(n), 1, 1, 256, 1, 1, 0, d->stream, params, NULL);
}

/* The part's bytes computed on the host and copied. */
static dlcu_result by_host(cu_device *d, fill_work *w, dlcu_ptr at, uint64_t len, int64_t first) {
  unsigned char *bytes = malloc(len ? len : 1);
  void **more = realloc(w->host, (w->nhost + 1) * sizeof *more);
  if (!bytes || !more) {
    free(bytes);
    if (more) w->host = more;
    return DLCU_ERROR_OUT_OF_MEMORY;
  }
  w->host = more;
  w->host[w->nhost++] = bytes;
  dlrun_fill g = w->f;
  g.first = first;
  cu_svc->host_fill(bytes, len, &g);
  return cu_api.MemcpyAsync(at, (dlcu_ptr)(uintptr_t)bytes, len, d->stream);
}

static dlcu_result fill_part(cu_device *d, fill_work *w, dlcu_ptr at, uint64_t len,
                             int64_t first) {
  const dlrun_fill *f = &w->f;
  size_t es = f->esize;
  uint64_t n = len / es;
  if (at % es || w->kind == DLRUN_MEM_PINNED_HOST) return by_host(d, w, at, len, first);
  /* The sequence kernel knows the dtypes up to complex128 (its enum); the
   * float8 family is rounded by the host's code, so bytes agree bit for bit. */
  if (f->sequence && f->dtype > DLRUN_COMPLEX128) return by_host(d, w, at, len, first);
  if (f->sequence) {
    uint64_t fst = (uint64_t)first;
    uint32_t code = (uint32_t)f->dtype, integral = f->integral;
    int64_t si = f->start.i, sti = f->step.i;
    double sf = f->start.re, stf = f->step.re;
    void *params[] = {&at, &n, &fst, &code, &integral, &si, &sti, &sf, &stf};
    return launch(d, CU_K_SEQUENCE, params, n);
  }
  bool same = true;
  for (size_t i = 1; i < es; i++) same &= f->pattern[i] == f->pattern[0];
  if (same) return cu_api.MemsetD8Async(at, f->pattern[0], len, d->stream);
  uint64_t lo, hi;
  memcpy(&lo, f->pattern, sizeof lo);
  switch (es) {
  case 2: {
    uint16_t v;
    memcpy(&v, f->pattern, 2);
    return cu_api.MemsetD16Async(at, v, n, d->stream);
  }
  case 4: {
    uint32_t v;
    memcpy(&v, f->pattern, 4);
    return cu_api.MemsetD32Async(at, v, n, d->stream);
  }
  case 8: {
    void *params[] = {&at, &n, &lo};
    return launch(d, CU_K_FILL8, params, n);
  }
  case 16: {
    memcpy(&hi, f->pattern + 8, sizeof hi);
    void *params[] = {&at, &n, &lo, &hi};
    return launch(d, CU_K_FILL16, params, n);
  }
  default:
    return by_host(d, w, at, len, first);
  }
}

/* Each part of the fill (one per segment it spans): checked (run false:
 * memory backed, bounds) or enqueued. */
static dlrun_status each_part(cu_device *d, fill_work *w, bool run, dlcu_result *err,
                              bool *enqueued) {
  uint64_t done = 0;
  while (done < w->nbytes) {
    dlcu_ptr at;
    uint64_t room;
    dlrun_status st = cu_place_of(d, w->kind, w->data + done, w->nbytes - done, &at, &room);
    if (st) return st;
    if (room == 0)
      return cu_svc->fail(DLRUN_ERR_VALUE, "%s: a fill of %llu bytes at %p runs past its memory",
                          d->name, (unsigned long long)w->nbytes, (void *)w->data);
    uint64_t len = w->nbytes - done < room ? w->nbytes - done : room;
    if (run) {
      if ((*err = fill_part(d, w, at, len, w->f.first + (int64_t)(done / w->f.esize))))
        return DLRUN_OK;
      *enqueued = true;
    }
    done += len;
  }
  return DLRUN_OK;
}

static dlcu_result fill_run(cu_device *d, void *arg, bool *enqueued) {
  dlcu_result err = DLCU_SUCCESS;
  if (each_part(d, arg, true, &err, enqueued) && !err) err = DLCU_ERROR_OUT_OF_MEMORY;
  return err;
}

dlrun_status cu_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
                     const dlrun_fill *f, const dlrun_event *waits, size_t nwaits,
                     dlrun_event *done) {
  cu_device *d = cu_dev(dev);
  dlrun_status st = cu_usable(d, "fill");
  if (st) return st;
  if (f->esize == 0 || f->esize > 16 || nbytes % f->esize)
    return cu_svc->fail(DLRUN_ERR_VALUE, "%s: a fill of %llu bytes of %zu-byte elements",
                        d->name, (unsigned long long)nbytes, f->esize);
  if (kind == DLRUN_MEM_PINNED_HOST && !cu_owns(dev, kind, data, nbytes))
    return cu_svc->fail(DLRUN_ERR_VALUE, "%s: %p is not in its pinned_host memory", d->name,
                        data);
  fill_work *w = calloc(1, sizeof *w);
  if (!w) return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  *w = (fill_work){.kind = kind, .data = data, .nbytes = nbytes, .f = *f};
  dlcu_result unused;
  bool none;
  st = each_part(d, w, false, &unused, &none);
  if (!st && f->sequence && nbytes) { /* the kernels loaded now: a failure enqueues nothing */
    dlcu_function fn;
    pthread_mutex_lock(&d->q.lock);
    dlcu_result r = cu_make_current(d->ctx);
    if (!r) r = cu_kernel_of(d, CU_K_SEQUENCE, &fn);
    pthread_mutex_unlock(&d->q.lock);
    if (r)
      st = cu_svc->fail(DLRUN_ERR_RUNTIME, "%s: loading dlrun's kernels failed: %s (%d)", d->name,
                        cu_error_name(r), r);
  }
  if (st) {
    fill_work_free(w);
    return st;
  }
  return cu_enqueue(d, "fill", DLRUN_WORK_FILL, nbytes ? fill_run : NULL, w, fill_work_free, NULL,
                    NULL, waits, nwaits, done);
}
