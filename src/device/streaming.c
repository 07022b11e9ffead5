/* When host copies stream (streaming.h). */
#include "streaming.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/status_impl.h"
#include "dlrun/runtime.h"

/* The environment is the process's: every runtime reads the same value. */
static atomic_uint_least64_t threshold = DLRUN_STREAM_BYTES_DEFAULT;

dlrun_status dlrun_stream_setting(bool crowded, uint64_t *bytes) {
  const char *text = getenv("DLRUN_STREAM_BYTES");
  *bytes = crowded ? UINT64_MAX : DLRUN_STREAM_BYTES_DEFAULT;
  if (!text || !*text || !strcmp(text, "auto")) return DLRUN_OK;
  if (!strcmp(text, "off")) {
    *bytes = UINT64_MAX;
    return DLRUN_OK;
  }
  dlrun_status st = dlrun_parse_size(text, bytes);
  if (st)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "DLRUN_STREAM_BYTES=\"%s\" is not auto, off or a size (a positive number "
                      "with an optional unit: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB; e.g. "
                      "\"16MiB\")",
                      text);
  return DLRUN_OK;
}

dlrun_status dlrun_apply_stream_setting(bool crowded) {
  uint64_t bytes;
  dlrun_status st = dlrun_stream_setting(crowded, &bytes);
  if (!st) atomic_store(&threshold, bytes);
  return st;
}

bool dlrun_copy_streams(uint64_t bytes) {
  uint64_t t = atomic_load_explicit(&threshold, memory_order_relaxed);
  return t != UINT64_MAX && bytes >= t;
}
