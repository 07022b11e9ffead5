/* Fills: a repeated element with clEnqueueFillBuffer, a sequence with a
 * kernel of kernels.c; what neither can write (a sequence needing doubles on
 * a device without them, an offset that is not a multiple of the element)
 * is computed on the host (svc->host_fill) and written with
 * clEnqueueWriteBuffer. A fill may span several segments: each gets its own
 * command. pinned_host memory is filled by the host in the queue's order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

static int log2_size(size_t esize) {
  switch (esize) {
  case 1: return 0;
  case 2: return 1;
  case 4: return 2;
  case 8: return 3;
  default: return -1;
  }
}

/* The kernel of a sequence of f's dtype, or -1 when the host must compute
 * it: doubles the device lacks, or a dtype after complex128 (the float8
 * family), which no kernel rounds: the host's bytes are the reference's,
 * bit for bit. */
static int sequence_kernel(const ocl_device *d, const dlrun_fill *f) {
  int lg = log2_size(f->esize);
  if (f->dtype > DLRUN_COMPLEX128) return -1;
  if (f->integral) return lg < 0 ? -1 : OCL_SEQ_I1 + lg;
  if (!d->fp64) return -1;
  switch (f->dtype) {
  case DLRUN_FLOAT16: return OCL_SEQ_F16;
  case DLRUN_BFLOAT16: return OCL_SEQ_BF16;
  case DLRUN_FLOAT32: return OCL_SEQ_F32;
  case DLRUN_FLOAT64: return OCL_SEQ_F64;
  case DLRUN_COMPLEX64: return OCL_SEQ_C64;
  case DLRUN_COMPLEX128: return OCL_SEQ_C128;
  default: return lg < 0 ? -1 : OCL_SEQ_D1 + lg; /* integers and bool, from doubles */
  }
}

/* How one segment's part is written. */
typedef enum how { BY_PATTERN, BY_KERNEL, BY_HOST } how;

typedef struct part_plan {
  how how;
  size_t psize; /* the pattern's size */
  unsigned char pattern[16];
} part_plan;

/* A repeated element at byte offset off, nbytes: one byte when all bytes
 * are equal (memset speed), else 16 bytes when aligned (pocl's 4-byte
 * patterns run at less than half of memset's), else the element. */
static part_plan plan_pattern(const dlrun_fill *f, size_t off, size_t nbytes) {
  part_plan p = {.how = BY_PATTERN};
  bool same = true;
  for (size_t i = 1; i < f->esize; i++) same &= f->pattern[i] == f->pattern[0];
  if (same || f->esize == 1) {
    p.psize = 1;
    p.pattern[0] = f->pattern[0];
  } else if (log2_size(f->esize) >= 0 || f->esize == 16) {
    p.psize = off % 16 == 0 && nbytes % 16 == 0 ? 16 : f->esize;
    for (size_t i = 0; i < p.psize; i++) p.pattern[i] = f->pattern[i % f->esize];
    if (off % p.psize || nbytes % p.psize) p.how = BY_HOST;
  } else {
    p.how = BY_HOST;
  }
  return p;
}

static cl_int enqueue_part(ocl_enqueue *q, const dlrun_fill *f, const part_plan *p,
                           cl_kernel k, const ocl_place *pl, size_t nbytes, int64_t first) {
  cl_event ev = NULL;
  cl_int err;
  cl_command_queue cq = q->d->queue;
  if (p->how == BY_PATTERN) {
    err = clEnqueueFillBuffer(cq, pl->mem, p->pattern, p->psize, pl->offset, nbytes,
                              ocl_wait_count(q), ocl_wait_list(q), &ev);
  } else if (p->how == BY_KERNEL) {
    cl_ulong off = pl->offset / f->esize;
    cl_long fst = first;
    size_t n = nbytes / f->esize;
    err = clSetKernelArg(k, 0, sizeof pl->mem, &pl->mem);
    if (!err) err = clSetKernelArg(k, 1, sizeof off, &off);
    if (f->integral) {
      cl_long a = f->start.i, b = f->step.i;
      if (!err) err = clSetKernelArg(k, 2, sizeof a, &a);
      if (!err) err = clSetKernelArg(k, 3, sizeof b, &b);
    } else {
      cl_double a = f->start.re, b = f->step.re;
      if (!err) err = clSetKernelArg(k, 2, sizeof a, &a);
      if (!err) err = clSetKernelArg(k, 3, sizeof b, &b);
    }
    if (!err) err = clSetKernelArg(k, 4, sizeof fst, &fst);
    if (!err)
      err = clEnqueueNDRangeKernel(cq, k, 1, NULL, &n, NULL, ocl_wait_count(q), ocl_wait_list(q),
                                   &ev);
  } else {
    unsigned char *bytes = malloc(nbytes);
    if (!bytes) return CL_OUT_OF_HOST_MEMORY;
    dlrun_fill g = *f;
    g.first = first;
    ocl_svc->host_fill(bytes, nbytes, &g);
    if (!ocl_keep(q, bytes)) {
      free(bytes);
      return CL_OUT_OF_HOST_MEMORY;
    }
    err = clEnqueueWriteBuffer(cq, pl->mem, CL_FALSE, pl->offset, nbytes, bytes,
                               ocl_wait_count(q), ocl_wait_list(q), &ev);
  }
  ocl_enqueued(q, err, ev);
  return err;
}

/* Each segment's part of [data, data + nbytes): checked and its buffer made
 * (q NULL), or enqueued. */
static dlrun_status each_part(ocl_device *d, dlrun_memory_kind kind, unsigned char *data,
                              uint64_t nbytes, const dlrun_fill *f, cl_kernel k,
                              ocl_enqueue *q, cl_int *err) {
  uint64_t done = 0;
  while (done < nbytes) {
    ocl_place pl;
    dlrun_status st = ocl_place_of(d, kind, data + done, &pl);
    if (st) return st;
    if (pl.room == 0)
      return ocl_svc->fail(DLRUN_ERR_VALUE, "%s: a fill of %llu bytes at %p runs past its memory",
                           d->name, (unsigned long long)nbytes, (void *)data);
    size_t len = (size_t)(nbytes - done < pl.room ? nbytes - done : pl.room);
    if (q) {
      part_plan p = {.how = BY_HOST};
      if (!f->sequence)
        p = plan_pattern(f, pl.offset, len);
      else if (k && pl.offset % f->esize == 0)
        p.how = BY_KERNEL;
      int64_t first = f->first + (int64_t)(done / f->esize);
      if ((*err = enqueue_part(q, f, &p, k, &pl, len, first))) return DLRUN_OK;
    }
    done += len;
  }
  return DLRUN_OK;
}

/* A fill of host memory (pinned_host), as host work in the queue's order. */
typedef struct host_fill_work {
  dlrun_fill f;
  void *data;
  uint64_t nbytes;
} host_fill_work;

static void host_fill_step(void *ctx) {
  host_fill_work *w = ctx;
  ocl_svc->host_fill(w->data, w->nbytes, &w->f);
}

static dlrun_status fill_host_memory(ocl_device *d, void *data, uint64_t nbytes,
                                     const dlrun_fill *f, const dlrun_event *waits, size_t nwaits,
                                     dlrun_event *done) {
  if (!ocl_owns(d->dev, DLRUN_MEM_PINNED_HOST, data, nbytes))
    return ocl_svc->fail(DLRUN_ERR_VALUE, "%s: %p is not in its pinned_host memory", d->name,
                         data);
  host_fill_work *w = malloc(sizeof *w);
  if (!w) return ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  *w = (host_fill_work){.f = *f, .data = data, .nbytes = nbytes};
  ocl_enqueue q;
  dlrun_status st = ocl_begin(d, "fill", DLRUN_WORK_FILL, waits, nwaits, &q);
  if (st) {
    free(w);
    return st;
  }
  cl_int err = CL_SUCCESS;
  if (!ocl_keep(&q, w)) {
    free(w);
    err = CL_OUT_OF_HOST_MEMORY;
  } else if (ocl_op_runs(&q) && nbytes) {
    err = ocl_enqueue_host(&q, host_fill_step, w);
  }
  return ocl_end(&q, err, done);
}

dlrun_status ocl_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
                      const dlrun_fill *f, const dlrun_event *waits, size_t nwaits,
                      dlrun_event *done) {
  ocl_device *d = ocl_dev(dev);
  if (f->esize == 0 || f->esize > 16 || nbytes % f->esize)
    return ocl_svc->fail(DLRUN_ERR_VALUE, "%s: a fill of %llu bytes of %zu-byte elements",
                         d->name, (unsigned long long)nbytes, f->esize);
  if (kind == DLRUN_MEM_PINNED_HOST)
    return fill_host_memory(d, data, nbytes, f, waits, nwaits, done);
  cl_kernel k = NULL;
  cl_int err = CL_SUCCESS;
  dlrun_status st = each_part(d, kind, data, nbytes, f, NULL, NULL, &err);
  int which = f->sequence && nbytes ? sequence_kernel(d, f) : -1;
  if (!st && which >= 0) st = ocl_kernel_of(d, which, &k);
  ocl_enqueue q;
  if (!st) st = ocl_begin(d, "fill", DLRUN_WORK_FILL, waits, nwaits, &q);
  if (st) return st;
  if (ocl_op_runs(&q)) each_part(d, kind, data, nbytes, f, k, &q, &err);
  return ocl_end(&q, err, done);
}
