/* The values of a sequence fill (fill.h) and the host fill loop, under the
 * fill slot of host-executed platforms. */
#include <string.h>

#include "fill.h"
#include "host_loops.h"

dlrun_scalar dlrun_fill_value(const dlrun_fill *f, int64_t i) {
  if (f->integral)
    return (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = f->start.i + (f->first + i) * f->step.i};
  return (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT,
                        .re = f->start.re + (double)(f->first + i) * f->step.re};
}

/* A repeated element: written once, then the filled prefix doubles. */
void dlrun_host_fill(void *data, uint64_t nbytes, const dlrun_fill *f) {
  unsigned char *p = data;
  if (f->sequence) {
    uint64_t n = nbytes / f->esize;
    for (uint64_t i = 0; i < n; i++) {
      dlrun_scalar v = dlrun_fill_value(f, (int64_t)i);
      dlrun_dtype_store(f->dtype, p + i * f->esize, &v); /* checked when planned */
    }
    return;
  }
  bool zero = true;
  for (size_t i = 0; i < f->esize; i++) zero &= f->pattern[i] == 0;
  if (zero) {
    memset(p, 0, nbytes);
    return;
  }
  memcpy(p, f->pattern, f->esize);
  uint64_t done = f->esize;
  while (done < nbytes) {
    uint64_t chunk = done < nbytes - done ? done : nbytes - done;
    memcpy(p + done, p, chunk);
    done += chunk;
  }
}
