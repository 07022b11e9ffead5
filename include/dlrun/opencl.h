/* OpenCL interop: the handles a host application needs to use dlrun's
 * OpenCL buffers (an array exported with DLPack as kDLOpenCL, whose `data`
 * is a cl_mem and `byte_offset` the offset of the array inside it).
 *
 * Declared with void pointers so that this header needs no OpenCL header;
 * cast them to cl_context, cl_command_queue and cl_device_id. */
#ifndef DLRUN_OPENCL_H
#define DLRUN_OPENCL_H

#include "device.h"
#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cl_context shared by all of dlrun's OpenCL devices, dev's in-order
 * cl_command_queue and its cl_device_id. Borrowed: valid while the runtime
 * lives; do not release them (retain them to keep them longer). Any of the
 * out pointers may be NULL.
 *
 * Ordering a host's work after dlrun's: export with `stream` set to this
 * queue (as an integer; DLPack's stream protocol): dlrun makes the queue
 * wait, device-side, for the array's pending writes, so that work enqueued
 * on it afterwards sees them. Work on another queue of the context waits
 * for an event recorded on this queue after the export
 * (clEnqueueMarkerWithWaitList, then that event in the command's wait
 * list). With no stream the export returns once the data is written; with
 * -1 it does not wait, and ordering is the host's.
 *
 * DLRUN_ERR_VALUE when dev is not an OpenCL device (its platform is named)
 * or NULL; DLRUN_ERR_RUNTIME for a device of another process. */
DLRUN_API dlrun_status dlrun_opencl_handles(dlrun_device *dev, void **context, void **queue,
                                            void **device_id);

#ifdef __cplusplus
}
#endif
#endif
