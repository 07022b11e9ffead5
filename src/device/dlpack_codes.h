/* Internal: how the platforms name memory to DLPack: device codes,
 * tensor data and the stream protocol (dlpack_codes.c). */
#ifndef DLRUN_DEVICE_DLPACK_CODES_H
#define DLRUN_DEVICE_DLPACK_CODES_H

#include "device/buffer.h"

/* The (device_type, device_id) b's memory exports as. */
void dlrun_buffer_dlpack_device(const dlrun_buffer *b, int32_t *type, int32_t *id);
/* The (device_type, device_id) dev's `kind` memory exports as. */
void dlrun_memory_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                                int32_t *id);
/* The device and memory kind a producer's (device_type, device_id) names in
 * rt, or NULL when none of rt's platforms knows it. */
dlrun_device *dlrun_device_from_dlpack(dlrun_runtime *rt, int32_t type, int32_t id,
                                       dlrun_memory_kind *kind);
/* The device of this process whose device memory exports as (type, id): what
 * a consumer's dl_device may name, as the platforms say (host memory asked
 * for as (kDLCPU, 0) is the cpu device's). NULL when none; *type_known then
 * says whether some local device's memory exports with that type. */
dlrun_device *dlrun_device_exporting_as(dlrun_runtime *rt, int32_t type, int32_t id,
                                        bool *type_known);
/* The DLTensor (data, byte_offset) of b's memory (its platform's handle
 * and offset, or its address and 0). */
dlrun_status dlrun_buffer_export_data(const dlrun_buffer *b, void **data, uint64_t *byte_offset);
/* A producer's (data, byte_offset) in dev's `kind` memory, for a platform
 * whose memory is named by handles (import_data): *handled true, and the
 * address of element 0 in *elem0, whose tensor reaches `below` bytes
 * before it and spans `span` bytes in all; BufferError naming why when the
 * handle is not the platform's. *handled false: the platform's addresses
 * are plain (the caller checks them with dlrun_memory_owns). */
dlrun_status dlrun_memory_import(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                                 uint64_t byte_offset, uint64_t below, uint64_t span,
                                 const void **elem0, bool *handled);
/* The DLPack stream protocol: whether dev's platform has queues a consumer
 * names (else only stream nil or -1); make the consumer's queue `stream`
 * wait for ev; the handle of dev's queue, passed as `stream` to a
 * producer (0 when the platform has none). */
bool dlrun_device_has_streams(const dlrun_device *dev);
dlrun_status dlrun_device_stream_wait(const dlrun_device *dev, int64_t stream, dlrun_event ev);
int64_t dlrun_device_consumer_stream(const dlrun_device *dev);

#endif
