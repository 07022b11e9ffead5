/* Buffers as the transport between processes sees them: a box of a shard
 * as one strided message over the platform's transport view. */
#include "buffer_transport.h"
#include "boxes.h"
#include "copy_route.h"
#include "core/status_impl.h"

static unsigned char *view_of(const dlrun_buffer *b) {
  const dlrun_platform *pl = b->dev->platform;
  return pl->transport_view ? pl->transport_view(b->dev, b->kind, b->data) : NULL;
}

/* The refusal of a memory the transport cannot reach. */
static dlrun_status unreachable(const dlrun_buffer *b) {
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "device_put between processes: the %s memory of %s cannot be reached by "
                    "the transport between processes",
                    dlrun_memory_kind_name(b->kind), b->dev->name);
}

dlrun_status dlrun_buffer_reach(const dlrun_buffer *b, dlrun_reach reach, bool *direct) {
  const dlrun_platform *pl = b->dev->platform;
  bool view = view_of(b) != NULL;
  bool host = pl->is_host_memory(b->dev, b->kind);
  switch (reach) {
  case DLRUN_REACH_DIRECT:
    *direct = true;
    return view ? DLRUN_OK : unreachable(b);
  case DLRUN_REACH_DIRECT_HOST:
    *direct = true;
    if (view && !host && pl->transport_view_device)
      return dlrun_fail(DLRUN_ERR_RUNTIME,
                        "device_put between processes: DLRUN_DISTRIBUTED_DEVICE_MEMORY=direct, "
                        "but the MPI says it cannot reach device memory (it is not CUDA-aware); "
                        "the %s memory of %s needs auto or staged",
                        dlrun_memory_kind_name(b->kind), b->dev->name);
    return view ? DLRUN_OK : unreachable(b);
  case DLRUN_REACH_STAGED: *direct = view && host; break;
  case DLRUN_REACH_DEVICE_VIEWS: *direct = view; break;
  case DLRUN_REACH_HOST_VIEWS: *direct = view && (host || !pl->transport_view_device); break;
  }
  return DLRUN_OK;
}

dlrun_status dlrun_buffer_stage(const dlrun_buffer *b, size_t esize, int ndim,
                                const int64_t *shard_dims, const int64_t *origin,
                                const int64_t *lo, const int64_t *hi, void *block, bool out) {
  int64_t scratch[DLRUN_MAX_NDIM], dims[DLRUN_MAX_NDIM], block_strides[DLRUN_MAX_NDIM];
  const int64_t *strides = dlrun_buffer_layout(b, ndim, shard_dims, scratch);
  for (int d = 0; d < ndim; d++) dims[d] = hi[d] - lo[d];
  dlrun_row_major_strides(ndim, dims, block_strides);
  dlrun_box_end dev = dlrun_buffer_end(b, origin, strides);
  dlrun_box_end host = dlrun_host_end(block, lo, block_strides);
  return out ? dlrun_copy_sync(esize, ndim, lo, hi, &host, &dev)
             : dlrun_copy_sync(esize, ndim, lo, hi, &dev, &host);
}

dlrun_status dlrun_buffer_message(const dlrun_buffer *b, size_t esize, int ndim,
                                  const int64_t *shard_dims, const int64_t *origin,
                                  const int64_t *lo, const int64_t *hi, int peer,
                                  dlrun_transport_message *out) {
  unsigned char *view = view_of(b);
  if (!view) return unreachable(b);
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
  *out = (dlrun_transport_message){.peer = peer, .base = view + offset * (int64_t)esize};
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

void dlrun_buffer_count_message(const dlrun_buffer *b, uint64_t bytes, bool in) {
  atomic_fetch_add(in ? &b->dev->bytes_in : &b->dev->bytes_out, bytes);
}
