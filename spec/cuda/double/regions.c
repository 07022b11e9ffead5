/* Sorted arrays of non-overlapping memory regions, and the search for free
 * device addresses. */
#include <stdlib.h>
#include <string.h>

#include "double.h"

/* The index of the first region starting after addr. */
static size_t upper(const dbl_regions *r, uint64_t addr) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r->at[mid]->start <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

dbl_region *dbl_regions_find(const dbl_regions *r, uint64_t addr) {
  size_t i = upper(r, addr);
  if (i == 0) return NULL;
  dbl_region *reg = r->at[i - 1];
  return addr - reg->start < reg->size ? reg : NULL;
}

dlcu_result dbl_regions_insert(dbl_regions *r, dbl_region *reg) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    dbl_region **at = realloc(r->at, cap * sizeof *at);
    if (!at) return DLCU_ERROR_OUT_OF_MEMORY;
    r->at = at;
    r->cap = cap;
  }
  size_t i = upper(r, reg->start);
  memmove(r->at + i + 1, r->at + i, (r->n - i) * sizeof *r->at);
  r->at[i] = reg;
  r->n++;
  return DLCU_SUCCESS;
}

void dbl_regions_remove(dbl_regions *r, dbl_region *reg) {
  for (size_t i = 0; i < r->n; i++)
    if (r->at[i] == reg) {
      memmove(r->at + i, r->at + i + 1, (r->n - i - 1) * sizeof *r->at);
      if (--r->n == 0) {
        free(r->at);
        *r = (dbl_regions){0};
      }
      return;
    }
}

/* First fit over the gaps between the address space's regions. */
bool dbl_va_find(uint64_t size, uint64_t align, uint64_t *out) {
  uint64_t base = (uint64_t)(uintptr_t)dbl.va, end = base + dbl.va_size;
  uint64_t at = (base + align - 1) & ~(align - 1);
  for (size_t i = 0; i <= dbl.space.n; i++) {
    uint64_t gap_end = i < dbl.space.n ? dbl.space.at[i]->start : end;
    if (at <= gap_end && gap_end - at >= size) {
      *out = at;
      return true;
    }
    if (i < dbl.space.n) {
      uint64_t next = dbl.space.at[i]->start + dbl.space.at[i]->size;
      if (next > at) at = (next + align - 1) & ~(align - 1);
    }
  }
  return false;
}
