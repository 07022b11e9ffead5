/* Embedding dlrun in a host application's Lua state.
 *
 * Link the host with libdlrun_lua.a, libdlrun (`pkg-config --libs dlrun`) and
 * Lua 5.4. The pure-Lua part of the module (the lua/ folder of the source
 * tree, or share/lua/5.4 of an installed prefix) must be on the state's
 * package.path. */
#ifndef DLRUN_LUA_H
#define DLRUN_LUA_H

#include <lua.h>

#include "dlpack.h"
#include "dlrun.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The C half of `require "dlrun"` (normally loaded by lua/dlrun/init.lua). */
DLRUN_API int luaopen_dlrun_core(lua_State *L);

/* Open dlrun in L bound to the host's runtime `rt` (L keeps its own
 * reference until it closes) and push the module table, as
 * `require "dlrun"` would. L must have the standard libraries open (at
 * least `package`, e.g. by luaL_openlibs). Returns 1 (values pushed); raises a Lua error on
 * failure, so call it protected. dl.configure then refuses to reconfigure. */
DLRUN_API int dlrun_lua_open(lua_State *L, dlrun_runtime *rt);

/* Push an Array for `a`; L takes a reference of its own (the caller keeps
 * theirs). */
DLRUN_API void dlrun_lua_pusharray(lua_State *L, dlrun_array *a);
/* The array of the Array at idx, borrowed from L (valid while the value is
 * reachable), or NULL when the value is not an Array. */
DLRUN_API dlrun_array *dlrun_lua_toarray(lua_State *L, int idx);

/* Push a Capsule owning a tensor (exactly one of the two non-NULL); Lua
 * calls its deleter if the capsule is collected unconsumed. */
DLRUN_API void dlrun_lua_pushcapsule(lua_State *L, DLManagedTensor *legacy,
                                     DLManagedTensorVersioned *versioned);
/* Take the tensor out of the unconsumed Capsule at idx: the capsule becomes
 * "used_..." and the caller owns the tensor (and calls its deleter once).
 * Returns 1, or 0 (and sets nothing) when idx holds no unconsumed Capsule.
 * A Capsule of dlrun's export keeps its tensor inside it until then; taking
 * it moves it to memory of its own, and raises a Lua error (the capsule
 * unchanged) when that memory runs out. */
DLRUN_API int dlrun_lua_takecapsule(lua_State *L, int idx, DLManagedTensor **legacy,
                                    DLManagedTensorVersioned **versioned);

#ifdef __cplusplus
}
#endif
#endif
