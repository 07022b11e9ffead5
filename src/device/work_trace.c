/* Trace events of device work (work_trace.h). */
#include "work_trace.h"

#include "core/trace_impl.h"
#include "peer_memory.h"

const char *dlrun_trace_end(const dlrun_box_end *e, int *process) {
  *process = -1;
  if (e->dev) return e->dev->name;
  const dlrun_device *peer = dlrun_peer_memory_device(e->data);
  if (!peer) return "host";
  *process = peer->process_index;
  return peer->name;
}

void dlrun_trace_transfer(const char *track, const char *name, uint64_t start, uint64_t bytes,
                          const char *src, int src_process, const char *dst) {
  if (src_process < 0)
    dlrun_trace_event(track, "transfer", name, start,
                      "\"bytes\": %llu, \"src\": \"%s\", \"dst\": \"%s\"",
                      (unsigned long long)bytes, src, dst);
  else
    dlrun_trace_event(track, "transfer", name, start,
                      "\"bytes\": %llu, \"src\": \"%s\", \"src_process\": %d, \"dst\": \"%s\"",
                      (unsigned long long)bytes, src, src_process, dst);
}

void dlrun_trace_copy(const dlrun_device *dev, uint64_t start, uint64_t bytes,
                      const dlrun_box_end *src, const dlrun_box_end *dst) {
  int src_process, ignored;
  const char *from = dlrun_trace_end(src, &src_process);
  dlrun_trace_transfer(dev->name, "copy", start, bytes, from, src_process,
                       dlrun_trace_end(dst, &ignored));
}

void dlrun_trace_work(const dlrun_device *dev, const char *name, uint64_t start,
                      uint64_t bytes) {
  dlrun_trace_event(dev->name, "compute", name, start, "\"bytes\": %llu",
                    (unsigned long long)bytes);
}
