/* A CPU device's second queue (ocl.h: ocl_device.lane). A CPU driver (pocl)
 * runs one command of an in-order queue at a time on one of its threads,
 * so a big copy on one queue gets one core; split over two queues it gets
 * two. The lane's half is ordered inside the op by markers on the main
 * queue, which stays the one order everything else sees. */
#include "ocl.h"

/* Below this a copy stays one command: the markers would cost more than
 * the second thread gains. */
#define LANE_MIN_BYTES (4u << 20)

void ocl_lane_open(ocl_device *d) {
  cl_device_type type = 0;
  cl_uint units = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
  if (!(type & CL_DEVICE_TYPE_CPU) || units < 2) return;
  cl_int err;
  d->lane = clCreateCommandQueue(ocl_state.context, d->id, 0, &err); /* NULL: no lane */
}

void ocl_lane_close(ocl_device *d) {
  if (!d->lane) return;
  clFinish(d->lane);
  clReleaseCommandQueue(d->lane);
  d->lane = NULL;
}

/* Bytes [off, off + n) of a plain copy, on `cq`. */
static cl_int plain(cl_command_queue cq, const ocl_place *s, const ocl_place *d, size_t off,
                    size_t n, cl_uint nw, const cl_event *wl, cl_event *ev) {
  if (s->mem && d->mem)
    return clEnqueueCopyBuffer(cq, s->mem, d->mem, s->offset + off, d->offset + off, n, nw, wl,
                               ev);
  if (s->mem)
    return clEnqueueReadBuffer(cq, s->mem, CL_FALSE, s->offset + off, n, d->host + off, nw, wl,
                               ev);
  return clEnqueueWriteBuffer(cq, d->mem, CL_FALSE, d->offset + off, n, s->host + off, nw, wl,
                              ev);
}

cl_int ocl_plain_copy(ocl_enqueue *q, const ocl_place *s, const ocl_place *d, size_t n) {
  cl_command_queue cq = q->d->queue, lane = q->d->lane;
  cl_event ev = NULL, lev = NULL;
  cl_int err;
  if (!lane || n < LANE_MIN_BYTES) {
    err = plain(cq, s, d, 0, n, ocl_wait_count(q), ocl_wait_list(q), &ev);
    ocl_enqueued(q, err, ev);
    return err;
  }
  if (!q->last) { /* the lane's half starts after what the main queue's first command would */
    err = clEnqueueMarkerWithWaitList(cq, ocl_wait_count(q), ocl_wait_list(q), &ev);
    ocl_enqueued(q, err, ev);
    if (err) return err;
  }
  size_t half = n / 2 & ~(size_t)63;
  err = plain(lane, s, d, half, n - half, 1, &q->last, &lev);
  if (err) { /* no lane after all: the whole copy on the main queue */
    err = plain(cq, s, d, 0, n, 0, NULL, &ev);
    ocl_enqueued(q, err, ev);
    return err;
  }
  clFlush(lane); /* submitted now, to run beside the main queue's half */
  ev = NULL;
  err = plain(cq, s, d, 0, half, 0, NULL, &ev);
  ocl_enqueued(q, err, ev);
  ev = NULL;
  cl_int merr = clEnqueueMarkerWithWaitList(cq, 1, &lev, &ev); /* the op ends after both */
  ocl_enqueued(q, merr, ev);
  if (merr) clWaitForEvents(1, &lev); /* nothing orders it: the op must not end before it */
  clReleaseEvent(lev);
  clFlush(cq);
  return err ? err : merr;
}
