/* Device memory the host cannot read, as dlrun's sim devices model it: the
 * device addresses (dbl.va) are reserved PROT_NONE, so a host dereference
 * faults; the bytes live in private mappings only the double reaches
 * (dbl_resolve). cuMemAlloc regions, cuMemHostAlloc host memory, the
 * capacity, and the translation the queued work uses. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "double.h"

#define ALLOC_ALIGN 256

bool dbl_in_va(uint64_t addr) {
  uint64_t base = (uint64_t)(uintptr_t)dbl.va;
  return dbl.va && addr >= base && addr - base < dbl.va_size;
}

unsigned char *dbl_bytes_new(uint64_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

dlcu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  DBL_ENTER(MemGetInfo);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!free_bytes || !total) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  *total = dbl.cfg.memory;
  *free_bytes = dbl.cfg.memory - dbl.used[ctx->device];
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuMemAlloc_v2(dlcu_ptr *dptr, size_t bytes) {
  DBL_ENTER(MemAlloc);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!dptr || bytes == 0) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  uint64_t charged = ((uint64_t)bytes + ALLOC_ALIGN - 1) & ~(uint64_t)(ALLOC_ALIGN - 1);
  uint64_t start;
  if (charged < bytes || charged > dbl.cfg.memory - dbl.used[ctx->device] ||
      !dbl_va_find(charged, ALLOC_ALIGN, &start))
    return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  dbl_region *r = calloc(1, sizeof *r);
  unsigned char *bytes_at = r ? dbl_bytes_new(bytes) : NULL;
  if (bytes_at)
    *r = (dbl_region){.start = start, .size = bytes, .kind = DBL_ALLOC, .device = ctx->device,
                      .ctx = ctx, .bytes = bytes_at};
  if (!bytes_at || dbl_regions_insert(&dbl.space, r)) {
    if (bytes_at) munmap(bytes_at, bytes);
    free(r);
    return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  }
  dbl.used[ctx->device] += charged;
  *dptr = start;
  return dbl_leave(DLCU_SUCCESS);
}

static uint64_t charged_of(const dbl_region *r) {
  return (r->size + ALLOC_ALIGN - 1) & ~(uint64_t)(ALLOC_ALIGN - 1);
}

static void alloc_free(dbl_region *r) {
  dbl_regions_remove(&dbl.space, r);
  dbl.used[r->device] -= charged_of(r);
  munmap(r->bytes, r->size);
  free(r);
}

/* Waits for the context's queued work first, as the real driver's free
 * synchronises: work already queued on the memory still sees it. */
dlcu_result cuMemFree_v2(dlcu_ptr dptr) {
  DBL_ENTER(MemFree);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  dbl_region *r = dbl_regions_find(&dbl.space, dptr);
  if (!r || r->kind != DBL_ALLOC || r->start != dptr) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  for (;;) {
    bool busy = false;
    for (dlcu_stream s = dbl.streams; s; s = s->next) busy |= s->ctx == ctx && s->head;
    if (!busy) break;
    pthread_cond_wait(&dbl.changed, &dbl.lock);
  }
  if ((r = dbl_regions_find(&dbl.space, dptr)) && r->kind == DBL_ALLOC && r->start == dptr)
    alloc_free(r);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
  DBL_ENTER(MemHostAlloc);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!pp || bytes == 0 || flags & ~7u) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  void *p = NULL;
  dbl_region *r = calloc(1, sizeof *r);
  if (r && !posix_memalign(&p, 4096, bytes))
    *r = (dbl_region){.start = (uint64_t)(uintptr_t)p, .size = bytes, .kind = DBL_HOST,
                      .device = ctx->device, .ctx = ctx, .bytes = p};
  if (!p || dbl_regions_insert(&dbl.host, r)) {
    free(p);
    free(r);
    return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  }
  *pp = p;
  return dbl_leave(DLCU_SUCCESS);
}

static void host_free(dbl_region *r) {
  dbl_regions_remove(&dbl.host, r);
  free(r->bytes);
  free(r);
}

dlcu_result cuMemFreeHost(void *p) {
  DBL_ENTER(MemFreeHost);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  dbl_region *r = dbl_regions_find(&dbl.host, (uint64_t)(uintptr_t)p);
  if (!r || r->bytes != p) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  host_free(r);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result dbl_resolve(uint64_t addr, uint64_t n, int accessor, bool write, unsigned char **host,
                        uint64_t *len) {
  dbl_region *r = dbl_regions_find(&dbl.space, addr);
  if (r && r->kind == DBL_RESERVE) {
    r = dbl_regions_find(&dbl.maps, addr);
    if (!r) return DLCU_ERROR_ILLEGAL_ADDRESS; /* reserved, not mapped */
    int who = accessor < 0 ? r->device : accessor;
    if (!((write ? r->writable : r->readable) >> who & 1)) return DLCU_ERROR_ILLEGAL_ADDRESS;
  }
  if (!r) return DLCU_ERROR_ILLEGAL_ADDRESS; /* never allocated, or freed */
  uint64_t left = r->start + r->size - addr;
  *len = n < left ? n : left;
  *host = r->bytes + (addr - r->start);
  return DLCU_SUCCESS;
}

bool dbl_known_range(uint64_t addr, uint64_t n, int *device, bool *host) {
  uint64_t last = addr + (n ? n - 1 : 0);
  if (last < addr) return false;
  dbl_region *r = dbl_in_va(addr) ? dbl_regions_find(&dbl.space, addr)
                                  : dbl_regions_find(&dbl.host, addr);
  if (!r || last - r->start >= r->size) return false;
  *device = r->kind == DBL_ALLOC ? r->device : -1;
  *host = r->kind == DBL_HOST;
  return true;
}

static void report(const char *what, const dbl_region *r) {
  if (dbl.cfg.report_leaks)
    fprintf(stderr, "cuda double: %s of %llu bytes at 0x%llx still held\n", what,
            (unsigned long long)r->size, (unsigned long long)r->start);
}

void dbl_memory_teardown(dlcu_context ctx) {
  for (size_t i = dbl.space.n; i-- > 0;) {
    dbl_region *r = dbl.space.at[i];
    if (r->kind != DBL_ALLOC || (ctx && r->ctx != ctx)) continue;
    report("cuMemAlloc memory", r);
    alloc_free(r);
  }
  for (size_t i = dbl.host.n; i-- > 0;) {
    dbl_region *r = dbl.host.at[i];
    if (ctx && r->ctx != ctx) continue;
    report("cuMemHostAlloc memory", r);
    host_free(r);
  }
  if (!ctx) dbl_vmm_teardown();
}
