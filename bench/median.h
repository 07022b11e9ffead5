/* The median of n timings, shared by the benchmark programs. Needs the
 * including file's xmalloc (which never returns NULL). */
#ifndef DLRUN_BENCH_MEDIAN_H
#define DLRUN_BENCH_MEDIAN_H

#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n);

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double *s = xmalloc((size_t)n * sizeof *s);
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

#endif
