/* Copying N-d boxes between strided blocks of host-addressable memory: the
 * one copy loop of dlrun, used by the platforms whose memory the host (or
 * the platform's own private view) can address. Inner dimensions that are
 * contiguous in both blocks merge into one run, so contiguous data moves
 * with a single memcpy; a copy that streams (a call writing more than the
 * caches hold) writes long runs with non-temporal stores instead. */
#include <stdatomic.h>
#include <string.h>

#include "boxes.h"
#include "host_loops.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAMING_STORES 1
#else
#define HAVE_STREAMING_STORES 0
#endif

/* Rows shorter than this are copied through the caches even when the copy
 * streams: their unaligned head and tail would be much of them. */
#define STREAM_MIN_RUN 256

/* How far ahead the copy of spaced-apart runs asks for the source. */
#define PREFETCH_ROWS 2

static atomic_uint_least64_t streamed; /* bytes copied with streaming stores */

uint64_t dlrun_host_streamed_bytes(void) { return atomic_load(&streamed); }

#if HAVE_STREAMING_STORES
/* One row with non-temporal stores: written lines go to memory without
 * being read into the cache first (which a plain store must do), and do not
 * evict what the cache holds. Unaligned loads; the stores aligned to 16. */
static void stream_run(char *d, const char *s, size_t n) {
  size_t head = (size_t)(-(uintptr_t)d & 15);
  memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
    _mm_stream_si128((__m128i *)(void *)d, a);
    _mm_stream_si128((__m128i *)(void *)(d + 16), b);
    _mm_stream_si128((__m128i *)(void *)(d + 32), c);
    _mm_stream_si128((__m128i *)(void *)(d + 48), e);
  }
  memcpy(d, s, n);
}
#endif

uint64_t dlrun_box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi) {
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  return bytes;
}

void dlrun_row_major_strides(int ndim, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    /* Only a zero-size shape can overflow here (sizes are checked), and it
     * has no element to address: any stride will do. */
    if (__builtin_mul_overflow(s, dims[d], &s)) s = 0;
  }
}

/* Copy n elements of `esize` bytes with the given byte strides: the inner
 * loop when the innermost dimension is not contiguous (a strided slice),
 * with fixed-size copies the compiler turns into plain loads and stores. */
static void strided_elements(char *d, const char *s, int64_t n, int64_t ds, int64_t ss,
                             size_t esize) {
#define STRIDED(bytes)                                                                    \
  for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, bytes);                  \
  return
  switch (esize) {
  case 1: STRIDED(1);
  case 2: STRIDED(2);
  case 4: STRIDED(4);
  case 8: STRIDED(8);
  case 16: STRIDED(16);
  default: STRIDED(esize);
  }
#undef STRIDED
}

void dlrun_host_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                         const int64_t *dst_origin, const int64_t *dst_strides, const void *src,
                         const int64_t *src_origin, const int64_t *src_strides, bool stream) {
  int64_t extent[DLRUN_MAX_NDIM] = {0};
  for (int d = 0; d < ndim; d++) {
    extent[d] = hi[d] - lo[d];
    if (extent[d] <= 0) return;
  }
  char *d0 = (char *)dst;
  const char *s0 = (const char *)src;
  for (int d = 0; d < ndim; d++) {
    d0 += (lo[d] - dst_origin[d]) * dst_strides[d] * (int64_t)esize;
    s0 += (lo[d] - src_origin[d]) * src_strides[d] * (int64_t)esize;
  }
  /* The run: the innermost dimensions contiguous in both blocks. */
  int k = ndim; /* dimensions k.. form the run */
  int64_t run = (int64_t)esize;
  if (ndim > 0 && dst_strides[ndim - 1] == 1 && src_strides[ndim - 1] == 1) {
    k = ndim - 1;
    run *= extent[k];
    while (k > 0 && dst_strides[k - 1] == dst_strides[k] * extent[k] &&
           src_strides[k - 1] == src_strides[k] * extent[k]) {
      k--;
      run *= extent[k];
    }
  }
  /* A strided innermost dimension: copy that dimension element by element
   * in one tight loop; so too short runs of a power-of-two size, as
   * elements of that size along the next dimension out. */
  bool strided = k == ndim && ndim > 0;
  if (strided) k = ndim - 1;
  size_t elem = esize;
  int64_t inner = ndim > 0 ? extent[ndim - 1] : 1;
  int64_t dstep = ndim > 0 ? dst_strides[ndim - 1] * (int64_t)esize : 0;
  int64_t sstep = ndim > 0 ? src_strides[ndim - 1] * (int64_t)esize : 0;
  if (!strided && k > 0 && run <= 16 && (run & (run - 1)) == 0) {
    strided = true;
    elem = (size_t)run;
    k--;
    inner = extent[k];
    dstep = dst_strides[k] * (int64_t)esize;
    sstep = src_strides[k] * (int64_t)esize;
  }
  stream = stream && HAVE_STREAMING_STORES && !strided && run >= STREAM_MIN_RUN;
  /* Long runs spaced apart in the source (a column block of wide rows): the
   * hardware's prefetch stops at each run's end, so ask for the run
   * PREFETCH_ROWS rows on while this one is copied. */
  int64_t gap = k > 0 ? src_strides[k - 1] * (int64_t)esize : 0;
  bool ahead = stream && k > 0 && gap != run;
  /* Odometer over the outer dimensions 0..k-1. */
  int64_t idx[DLRUN_MAX_NDIM] = {0};
  for (;;) {
    if (ahead && idx[k - 1] + PREFETCH_ROWS < extent[k - 1])
      for (int64_t o = 0; o < run; o += 64) __builtin_prefetch(s0 + PREFETCH_ROWS * gap + o);
    if (strided)
      strided_elements(d0, s0, inner, dstep, sstep, elem);
#if HAVE_STREAMING_STORES
    else if (stream)
      stream_run(d0, s0, (size_t)run);
#endif
    else
      memcpy(d0, s0, (size_t)run);
    int d = k - 1;
    while (d >= 0) {
      d0 += dst_strides[d] * (int64_t)esize;
      s0 += src_strides[d] * (int64_t)esize;
      if (++idx[d] < extent[d]) break;
      d0 -= extent[d] * dst_strides[d] * (int64_t)esize;
      s0 -= extent[d] * src_strides[d] * (int64_t)esize;
      idx[d] = 0;
      d--;
    }
    if (d < 0) break;
  }
#if HAVE_STREAMING_STORES
  /* Non-temporal stores are weakly ordered: whoever learns that the copy
   * is done (through the release of a lock or an atomic) must see them. */
  if (stream) {
    _mm_sfence();
    atomic_fetch_add_explicit(&streamed, dlrun_box_bytes(esize, ndim, lo, hi),
                              memory_order_relaxed);
  }
#endif
}
