/* Internal to src/device: the memory settings of a configuration, per kind
 * (config.c), as the runtime resolves and checks them. */
#ifndef DLRUN_DEVICE_CONFIG_H
#define DLRUN_DEVICE_CONFIG_H

#include "device_impl.h"

/* Per capacity setting (the kinds of accelerators' memories, then the host
 * memory, DLRUN_SETTING_HOST): "device_memory", "device_preallocate" (the
 * kinds only), and the one-line name of the setting with its ways in, for
 * out-of-memory advice. */
extern const char *const dlrun_setting_names[DLRUN_CAPACITY_SETTINGS];
extern const char *const dlrun_preallocate_names[DLRUN_MEM_KIND_COUNT];
extern const char *const dlrun_memory_hints[DLRUN_CAPACITY_SETTINGS];
/* "device", "pinned_host", "host": how messages name setting k's memory. */
extern const char *const dlrun_setting_memory_names[DLRUN_CAPACITY_SETTINGS];

/* Where setting k lives in c; *pre is NULL for the host memory (it has no
 * preallocation). */
void dlrun_config_fields(dlrun_config *c, int k, uint64_t **bytes, double **fraction,
                         dlrun_preallocate **pre);

/* Setting k's values as c gives them (c may be NULL: none set); the host
 * memory has no preallocation (*pre is DEFAULT). */
void dlrun_config_kind(const dlrun_config *c, int k, uint64_t *bytes, double *fraction,
                       dlrun_preallocate *pre);
/* DLRUN_ERR_VALUE naming the setting when setting k's values are wrong. */
dlrun_status dlrun_check_kind(int k, uint64_t bytes, double fraction, dlrun_preallocate pre);
/* Every setting: the config's, else the environment's, checked; a bad
 * variable is named. */
dlrun_status dlrun_resolve_memory_settings(const dlrun_config *config,
                                           dlrun_memory_settings *m);

#endif
