/* Internal: when host copies stream. A call that writes more bytes on this
 * process than the caches hold (DLRUN_STREAM_BYTES, 16 MiB by default)
 * copies with non-temporal stores: each written line then goes to memory
 * without first being read into the cache, which a plain store costs, and
 * the cache keeps what it held. memcpy does the same for its largest
 * copies, from a threshold of its own (glibc's: 3/4 of a share of the last
 * level cache, which a virtual machine may report far larger than the share
 * it gets). Not by default where the job's processes on this host
 * outnumber its cores: a process's time slices then end in mid-copy, and
 * each switch drains its half-written lines to memory one store at a time
 * (on 2 cores, 4 processes streamed no faster and, on one machine, half as
 * fast). */
#ifndef DLRUN_DEVICE_STREAMING_H
#define DLRUN_DEVICE_STREAMING_H

#include <stdbool.h>
#include <stdint.h>

#include "dlrun/status.h"

#define DLRUN_STREAM_BYTES_DEFAULT ((uint64_t)16 << 20)

/* $DLRUN_STREAM_BYTES: unset, empty or "auto" (the default; off when
 * `crowded`: more processes than cores), "off" (never: UINT64_MAX), or a size
 * as dlrun_parse_size reads it; else DLRUN_ERR_VALUE naming the variable. */
dlrun_status dlrun_stream_setting(bool crowded, uint64_t *bytes);
/* Read the setting for the calls from now on (a runtime starts). */
dlrun_status dlrun_apply_stream_setting(bool crowded);
/* Whether a call that writes `bytes` on this process streams. */
bool dlrun_copy_streams(uint64_t bytes);

#endif
