/* Anonymous host address ranges (pool.h): the default range source's
 * memory, and committing or giving back the pages of any host range. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/status_impl.h"
#include "mem/pool.h"

#define HUMAN_CAP 32

dlrun_status dlrun_map_range(uint64_t size, bool accessible, void **base) {
  char human[HUMAN_CAP];
  void *p = mmap(NULL, (size_t)size, accessible ? PROT_READ | PROT_WRITE : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                      "cannot reserve %llu bytes (%s) of address space: %s",
                      (unsigned long long)size, dlrun_format_bytes(size, human, sizeof human),
                      strerror(errno));
  *base = p;
  return DLRUN_OK;
}

void dlrun_unmap_range(void *base, uint64_t size) { munmap(base, (size_t)size); }

dlrun_status dlrun_commit_range(void *base, uint64_t size) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(base, (size_t)size, MADV_POPULATE_WRITE) == 0) return DLRUN_OK;
  if (errno != EINVAL) {
    char human[HUMAN_CAP];
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot commit %llu bytes (%s): %s",
                      (unsigned long long)size, dlrun_format_bytes(size, human, sizeof human),
                      strerror(errno));
  }
#endif
  /* An older kernel: touch every page (the OOM killer, not an error, if RAM is short). */
  long page = sysconf(_SC_PAGESIZE);
  for (uint64_t at = 0; at < size; at += (uint64_t)page) ((volatile unsigned char *)base)[at] = 0;
  return DLRUN_OK;
}

/* Resident pages of [base, base + size), counted in steps so that the
 * vector mincore fills stays small. */
static uint64_t resident_bytes(unsigned char *base, uint64_t size, uint64_t page) {
  unsigned char vec[4096];
  uint64_t n = 0, step = sizeof vec * page;
  for (uint64_t at = 0; at < size; at += step) {
    uint64_t len = size - at < step ? size - at : step;
    if (mincore(base + at, (size_t)len, vec) != 0) return size; /* unknown: say all */
    for (uint64_t i = 0; i < (len + page - 1) / page; i++) n += vec[i] & 1;
  }
  return n * page;
}

uint64_t dlrun_decommit_range(void *base, uint64_t size) {
  if (!size) return 0;
  uint64_t held = resident_bytes(base, size, (uint64_t)sysconf(_SC_PAGESIZE));
  madvise(base, (size_t)size, MADV_DONTNEED);
  return held;
}
