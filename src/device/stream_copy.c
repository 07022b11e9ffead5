/* Streaming copies (stream_copy.h). */
#include "stream_copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

bool dlrun_stream_copy_supported(void) {
  static int known; /* 0: not asked yet; 1: no; 2: yes (a race only asks twice) */
  if (!known) known = __builtin_cpu_supports("avx2") ? 2 : 1;
  return known == 2;
}

__attribute__((target("avx2"))) void dlrun_stream_copy(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  size_t head = (32 - ((uintptr_t)d & 31)) & 31; /* streaming stores need aligned lines */
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)s);
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s + 64));
    __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(s + 96));
    _mm256_stream_si256((__m256i *)(void *)d, a);
    _mm256_stream_si256((__m256i *)(void *)(d + 32), b);
    _mm256_stream_si256((__m256i *)(void *)(d + 64), c);
    _mm256_stream_si256((__m256i *)(void *)(d + 96), e);
  }
  memcpy(d, s, n);
}

void dlrun_stream_copy_end(void) { _mm_sfence(); }

#else

bool dlrun_stream_copy_supported(void) { return false; }
void dlrun_stream_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void dlrun_stream_copy_end(void) {}

#endif
