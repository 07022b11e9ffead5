/* x:__partitioned__([{max_version=, dl_device=, copy=}]): the description of
 * include/dlrun/partitioned.h as a Lua table. Starts and positions stay
 * 0-based, as the protocol is language-neutral. Without max_version the
 * tensors are versioned (1.1): shared read-only, so describing copies
 * nothing. */
#include "binding.h"
#include "dlrun/partitioned.h"

#define BOX_MT "dlrun.PartitionedBox"

/* Holds the C description while the tables are built: an error on the way
 * (memory) leaves it to __gc, which deletes the tensors not yet moved. */
static int box_gc(lua_State *L) {
  dlrun_partitioned **box = luaL_checkudata(L, 1, BOX_MT);
  dlrun_partitioned_release(*box);
  *box = NULL;
  return 0;
}

static void push_ints(lua_State *L, const int64_t *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static void push_location(lua_State *L, const dlrun_partition_location *l) {
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, l->process);
  lua_setfield(L, -2, "process");
  dlrun_lua_push_device(L, l->device);
  lua_setfield(L, -2, "device");
  lua_pushinteger(L, (lua_Integer)l->replica_id);
  lua_setfield(L, -2, "replica_id");
}

static void push_partition(lua_State *L, dlrun_partition *q, int ndim) {
  lua_createtable(L, 0, 5);
  push_ints(L, q->position, ndim);
  lua_setfield(L, -2, "position");
  push_ints(L, q->start, ndim);
  lua_setfield(L, -2, "start");
  push_ints(L, q->shape, ndim);
  lua_setfield(L, -2, "shape");
  lua_createtable(L, (int)q->nlocations, 0);
  for (size_t r = 0; r < q->nlocations; r++) {
    push_location(L, &q->locations[r]);
    lua_rawseti(L, -2, (lua_Integer)r + 1);
  }
  lua_setfield(L, -2, "location");
  if (q->data.legacy || q->data.versioned) {
    dlrun_lua_push_exported(L, &q->data);
    q->data = (dlrun_exported){0}; /* the capsule's now */
    lua_setfield(L, -2, "data");
  }
}

static int l_partitioned(lua_State *L) {
  static const char *fn = "__partitioned__";
  dlrun_array *a = dlrun_lua_check_array(L, 1, fn);
  dlrun_lua_check_nargs(L, fn, 2);
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    dlrun_lua_type_error(L, fn, 2, "options", "a table {max_version=, dl_device=, copy=}");
  static const char *const keys[] = {"max_version", "dl_device", "copy", NULL};
  if (lua_istable(L, 2)) dlrun_lua_check_option_keys(L, 2, fn, keys, "TypeError");
  dlrun_export_options o = dlrun_lua_check_export_options(L, 2, fn);
  if (!o.has_max_version) {
    o.has_max_version = true;
    o.max_major = DLRUN_DLPACK_MAJOR;
    o.max_minor = DLRUN_DLPACK_MINOR;
  }
  dlrun_partitioned **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, BOX_MT);
  int box_idx = lua_gettop(L);
  dlrun_lua_check(L, dlrun_array_partitioned(a, &o, box));
  dlrun_partitioned *p = *box;
  lua_createtable(L, 0, 4);
  push_ints(L, p->shape, p->ndim);
  lua_setfield(L, -2, "shape");
  push_ints(L, p->tiling, p->ndim);
  lua_setfield(L, -2, "partition_tiling");
  lua_createtable(L, (int)p->npartitions, 0);
  for (size_t k = 0; k < p->npartitions; k++) {
    push_partition(L, &p->partitions[k], p->ndim);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  lua_setfield(L, -2, "partitions");
  lua_createtable(L, (int)p->nlocals, 0);
  for (size_t i = 0; i < p->nlocals; i++) {
    push_ints(L, p->partitions[p->locals[i]].position, p->ndim);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "locals");
  dlrun_partitioned_release(p);
  *(dlrun_partitioned **)lua_touserdata(L, box_idx) = NULL;
  return 1;
}

void dlrun_lua_partitioned_open(lua_State *L) {
  luaL_newmetatable(L, BOX_MT);
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg methods[] = {{"__partitioned__", l_partitioned}, {NULL, NULL}};
  dlrun_lua_add_array_methods(L, methods, 0);
}
