/* Internal: finding a module, a shared library dlrun loads at run time
 * (the MPI transport libdlrun_mpi.so, platforms such as libdlrun_opencl.so),
 * where an installation puts it. */
#ifndef DLRUN_CORE_MODULE_H
#define DLRUN_CORE_MODULE_H

#include <stddef.h>

/* dlopen(path, flags); NULL with the loader's reason in `why`. */
void *dlrun_module_open(const char *path, int flags, char *why, size_t n);

/* The module `file_name`: at $env_var when that is set (there only); else
 * beside the code running this (libdlrun.so, or an executable linking it
 * statically) and beside the executable, each in its folder and in ../lib
 * from there; then on the loader's search path. NULL when none opens, with
 * what was tried in `tried`: "<env_var>: <reason>", or each place's reason
 * in that order, "; "-separated. */
void *dlrun_module_find(const char *file_name, const char *env_var, int flags, char *tried,
                        size_t n);

#endif
