/* Buffers as the transport between processes sees them: a box of a shard
 * as one strided message over the platform's transport view. */
#include "buffer.h"
#include "core/status_impl.h"

dlrun_status dlrun_buffer_piece(const dlrun_buffer *b, size_t esize, int ndim,
                                const int64_t *shard_dims, const int64_t *origin,
                                const int64_t *lo, const int64_t *hi, int peer,
                                dlrun_transport_piece *out) {
  const dlrun_platform *pl = b->dev->platform;
  unsigned char *view = pl->transport_view ? pl->transport_view(b->dev, b->kind, b->data) : NULL;
  if (!view)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "device_put between processes: the %s memory of %s cannot be reached by "
                      "the transport between processes",
                      dlrun_memory_kind_name(b->kind), b->dev->name);
  int64_t scratch[DLRUN_MAX_NDIM];
  const int64_t *strides = dlrun_buffer_layout(b, ndim, shard_dims, scratch);
  int64_t offset = 0;
  for (int d = 0; d < ndim; d++) offset += (lo[d] - origin[d]) * strides[d];
  /* Dimensions outermost first, in bytes, then one level for the bytes of
   * an element; extents of 1 say nothing. */
  int64_t count[DLRUN_TRANSPORT_MAX_DIMS + 1], stride[DLRUN_TRANSPORT_MAX_DIMS + 1];
  int k = 0;
  for (int d = 0; d < ndim; d++) {
    if (hi[d] - lo[d] == 1) continue;
    count[k] = hi[d] - lo[d];
    stride[k++] = strides[d] * (int64_t)esize;
  }
  count[k] = (int64_t)esize;
  stride[k++] = 1;
  /* Merge each dimension into the one inside it when that one is
   * contiguous within it, innermost first. */
  *out = (dlrun_transport_piece){.peer = peer, .base = view + offset * (int64_t)esize};
  int n = 0; /* merged dimensions, innermost first, in out */
  for (int i = k - 1; i >= 0; i--) {
    if (n && stride[i] == out->count[n - 1] * out->stride[n - 1]) {
      out->count[n - 1] *= count[i];
      continue;
    }
    out->count[n] = count[i];
    out->stride[n++] = stride[i];
  }
  /* Outermost first, as transport.h has it. */
  for (int i = 0; i < n / 2; i++) {
    int64_t c = out->count[i], s = out->stride[i];
    out->count[i] = out->count[n - 1 - i];
    out->stride[i] = out->stride[n - 1 - i];
    out->count[n - 1 - i] = c;
    out->stride[n - 1 - i] = s;
  }
  out->ndim = n;
  return DLRUN_OK;
}
