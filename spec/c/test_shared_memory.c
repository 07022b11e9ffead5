/* C tests of the memory processes on one host share (src/platforms/host/
 * region.c): a shareable region is a memfd whose device addresses stay
 * inaccessible when hidden, a peer maps it once through /proc/<pid>/fd and
 * reads what the owner wrote, given-back pages read as zeros (never a
 * fault), the mapping outlives the owner's region, and what is not the
 * region it claims to be is refused with a message. This process stands in
 * for the peer (its own pid). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "platforms/host/host_services.h"
#include "platforms/host/region.h"
#include "mem/shared_file.h"

#define SIZE ((uint64_t)1 << 20)

/* Whether reading p in a child process faults. */
static bool faults(const unsigned char *p) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    volatile unsigned char v = p[0];
    (void)v;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static void test_shared_region(void) {
  TEST("a shareable hidden region: device addresses fault, a peer's mapping reads the bytes") {
    dlrun_shared_files_set_wanted(true);
    dlrun_host_region r = {.fd = -1};
    void *base = NULL;
    CHECK(dlrun_host_region_reserve(&r, SIZE, true, &base) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(r.fd >= 0, "no memfd behind a shareable region");
    CHECK(base && faults(base), "the device address is readable");
    unsigned char *v = dlrun_host_region_view(&r, (unsigned char *)base + 4096);
    CHECK(v == r.view + 4096, "the view of base+4096 is %p, not %p", (void *)v,
          (void *)(r.view + 4096));
    memset(v, 0x5a, 8192);
    dlrun_shared_region h;
    uint64_t off = 0;
    CHECK(dlrun_host_region_share(&r, (unsigned char *)base + 4096, 8192, &h, &off),
          "not shared");
    CHECK(off == 4096 && h.size == SIZE && h.handle == r.fd && h.id == r.id,
          "offset %llu size %llu handle %lld", (unsigned long long)off,
          (unsigned long long)h.size, (long long)h.handle);
    CHECK(!dlrun_host_region_share(&r, (unsigned char *)base + SIZE - 8, 16, &h, &off),
          "a range past the end was shared");
    const void *peer = NULL;
    CHECK(dlrun_host_region_map_peer(&h, getpid(), &peer) == DLRUN_OK, "%s", dlrun_last_error());
    const unsigned char *p = peer;
    CHECK(p && p[4096] == 0x5a && p[4096 + 8191] == 0x5a && p[0] == 0,
          "the peer reads %d %d %d", p ? p[4096] : -1, p ? p[4096 + 8191] : -1, p ? p[0] : -1);
    /* given back: the pages read as zeros on both sides, without a fault */
    uint64_t held = dlrun_host_region_decommit(&r, (unsigned char *)base + 4096, 8192);
    CHECK(held == 8192, "%llu bytes were resident, 8192 expected", (unsigned long long)held);
    CHECK(p[4096] == 0 && p[4096 + 8191] == 0, "the peer reads %d after a decommit", p[4096]);
    CHECK(v[0] == 0, "the view reads %d after a decommit", v[0]);
    v[0] = 9;
    CHECK(p[4096] == 9, "a write after the decommit is not seen by the peer");
    /* the owner goes: the mapping still reads */
    dlrun_host_region_release(&r);
    CHECK(p[4096] == 9, "the mapping lost its bytes when the owner released the region");
    dlrun_host_region_unmap_peer(&h, peer);
    dlrun_shared_files_set_wanted(false);
  }
}

static void test_refusals(void) {
  TEST("a region that is not what it claims is refused with the reason") {
    dlrun_shared_files_set_wanted(true);
    dlrun_host_region r = {.fd = -1};
    void *base = NULL;
    CHECK(dlrun_host_region_reserve(&r, SIZE, false, &base) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(base == r.view, "an unhidden region's device addresses are its view");
    dlrun_shared_region h;
    uint64_t off;
    CHECK(dlrun_host_region_share(&r, base, 64, &h, &off), "not shared");
    dlrun_shared_region big = h;
    big.size = 2 * SIZE;
    const void *peer = NULL;
    CHECK(dlrun_host_region_map_peer(&big, getpid(), &peer) == DLRUN_ERR_RUNTIME, "mapped");
    CHECK(strstr(dlrun_last_error(), "is not the region it shared (2097152 bytes)") != NULL,
          "%s", dlrun_last_error());
    dlrun_shared_region closed = h;
    closed.handle = 100000;
    CHECK(dlrun_host_region_map_peer(&closed, getpid(), &peer) == DLRUN_ERR_RUNTIME, "mapped");
    CHECK(strstr(dlrun_last_error(), "cannot open the memory of process id") != NULL, "%s",
          dlrun_last_error());
    dlrun_host_region_release(&r);
    dlrun_shared_files_set_wanted(false);
  }
  TEST("regions made while sharing is off are anonymous and never shared") {
    dlrun_host_region r = {.fd = -1};
    void *base = NULL;
    CHECK(dlrun_host_region_reserve(&r, SIZE, true, &base) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_shared_region h;
    uint64_t off;
    CHECK(r.fd < 0 && !dlrun_host_region_share(&r, base, 64, &h, &off), "shared");
    CHECK(faults(base), "a hidden anonymous region's device address is readable");
    dlrun_host_region_release(&r);
  }
}

int main(void) {
  /* No runtime opens the built-in platforms here: hand their regions the
   * services as the registry would. */
  dlrun_host_services_set(dlrun_platform_services_get());
  test_shared_region();
  test_refusals();
  return check_summary("shared_memory");
}
