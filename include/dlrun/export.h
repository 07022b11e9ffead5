/* The one visibility macro for every public symbol of libdlrun. */
#ifndef DLRUN_EXPORT_H
#define DLRUN_EXPORT_H

#if defined(__GNUC__)
#define DLRUN_API __attribute__((visibility("default")))
#else
#define DLRUN_API
#endif

#endif
