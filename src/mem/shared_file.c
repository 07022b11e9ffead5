/* Memory files shared between processes on one host (shared_file.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status_impl.h"
#include "mem/shared_file.h"

static atomic_bool wanted;

void dlrun_shared_files_set_wanted(bool on) { atomic_store(&wanted, on); }
bool dlrun_shared_files_wanted(void) { return atomic_load(&wanted); }

int dlrun_shared_file_create(uint64_t size, void **mapping) {
  int fd = memfd_create("dlrun", MFD_CLOEXEC);
  if (fd < 0) return -1;
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)size) == 0)
    p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return -1;
  }
  *mapping = p;
  return fd;
}

dlrun_status dlrun_shared_file_map(int pid, int64_t fd, uint64_t size, const void **mapping) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%lld", pid, (long long)fd);
  int own = open(path, O_RDONLY | O_CLOEXEC);
  if (own < 0)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "cannot open the memory of process id %d on this host (%s): %s", pid, path,
                      strerror(errno));
  struct stat s;
  if (fstat(own, &s) != 0 || (uint64_t)s.st_size < size) {
    close(own);
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "the memory of process id %d on this host (%s) is not the region it "
                      "shared (%llu bytes)",
                      pid, path, (unsigned long long)size);
  }
  void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED | MAP_NORESERVE, own, 0);
  int e = errno;
  close(own); /* the mapping keeps the file */
  if (p == MAP_FAILED)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "cannot map the memory of process id %d on this host: %s", pid,
                      strerror(e));
  *mapping = p;
  return DLRUN_OK;
}

void dlrun_shared_file_unmap(const void *mapping, uint64_t size) {
  munmap((void *)mapping, (size_t)size);
}
