/* The per-device report behind `dlrun --stats` and dl.stats(): one place
 * that walks this process's devices and reads their figures. */
#include <stdio.h>
#include <string.h>

#include "dlrun/stats.h"

size_t dlrun_runtime_report(dlrun_runtime *rt, dlrun_device_report *rows, size_t n) {
  size_t count = 0;
  if (!rt) return 0;
  for (const char *p = dlrun_runtime_platforms(rt); *p;) {
    size_t len = strcspn(p, ",");
    char platform[32];
    snprintf(platform, sizeof platform, "%.*s", (int)len, p);
    p += len + (p[len] == ',');
    size_t local = dlrun_local_device_count(rt, platform);
    for (size_t i = 0; i < local; i++, count++) {
      if (count >= n) continue;
      dlrun_device_report *r = &rows[count];
      r->device = dlrun_local_device_get(rt, platform, i);
      dlrun_device_memory_stats(r->device, DLRUN_MEM_DEVICE, &r->memory);
      dlrun_device_stats_get(r->device, &r->traffic);
    }
  }
  return count;
}
