/* Internal: memory files processes on one host share (memfd), the mem
 * layer's part of the one-copy path between processes: making one, and
 * mapping another process's through /proc/<pid>/fd. Whether regions made
 * from now on should be such files is one switch, set when a job finds
 * processes on this host that can map each other's (distributed/host_peers.c). */
#ifndef DLRUN_MEM_SHARED_FILE_H
#define DLRUN_MEM_SHARED_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "dlrun/status.h"

void dlrun_shared_files_set_wanted(bool on);
bool dlrun_shared_files_wanted(void);

/* A sparse memory file of `size` bytes (pages are made when touched),
 * close-on-exec, mapped read-write and shared at *mapping: its descriptor, or
 * -1 when none can be made or mapped (no memfd, no descriptor left). */
int dlrun_shared_file_create(uint64_t size, void **mapping);
/* Map `size` bytes of the file descriptor `fd` of process `pid` on this
 * host, read-only and shared, into *mapping: the file is opened through
 * /proc/<pid>/fd and must be at least `size` bytes. The mapping keeps the
 * file alive whatever its process does later. RuntimeError naming why. */
dlrun_status dlrun_shared_file_map(int pid, int64_t fd, uint64_t size, const void **mapping);
void dlrun_shared_file_unmap(const void *mapping, uint64_t size);

#endif
