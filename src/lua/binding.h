/* Internal: shared pieces of the Lua binding. Only this layer calls Lua, and
 * only lerror.c turns dlrun statuses into Lua errors. */
#ifndef DLRUN_LUA_BINDING_H
#define DLRUN_LUA_BINDING_H

#include <lauxlib.h>
#include <lua.h>

#include "dlrun/dlrun.h"
#include "dlrun/lua.h"
#include "lhelpers.h"

#define DLRUN_DEVICE_MT "dlrun.Device"
#define DLRUN_ARRAY_MT "dlrun.Array"
#define DLRUN_MESH_MT "dlrun.Mesh"
#define DLRUN_SHARDING_MT "dlrun.Sharding"
#define DLRUN_CAPSULE_MT "dlrun.Capsule"


/* ---- errors (lerror.c) ---- */
/* Raise the Lua error value for `status` with the thread's last message.
 * Returns only when status is DLRUN_OK. */
void dlrun_lua_check(lua_State *L, dlrun_status status);
/* dlrun_lua_check naming the function: "<fn>: <message>" (a message that
 * already starts with fn, as arange's own do, is left as it is). */
void dlrun_lua_check_in(lua_State *L, const char *fn, dlrun_status status);
/* Raise an error of class `class_name` ("TypeError") with a formatted message. */
int dlrun_lua_raise(lua_State *L, const char *class_name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The type of the value at idx as messages name it: its metatable's __name
 * when that is a string ("FILE*", "Device", "Array"), else its Lua type. */
const char *dlrun_lua_typename(lua_State *L, int idx);
/* Push and return how messages show the value at idx where a number was
 * wanted: "-1", "1.5", string "0", boolean true, else its typename
 * (errors.describe in lua/dlrun/errors.lua). */
const char *dlrun_lua_describe(lua_State *L, int idx);
/* How a message shows the value at idx where a number was wanted: a
 * number by its value ("1.5", "-nan", as dlrun_lua_describe, pushing it),
 * anything else by its type. */
const char *dlrun_lua_value_text(lua_State *L, int idx);
/* TypeError: "<fn>: argument <n> (<what>) must be <expected>, got <type>". */
int dlrun_lua_type_error(lua_State *L, const char *fn, int arg, const char *what,
                         const char *expected);
/* The same, but a number is shown by its value ("got 1.5", "got inf", as
 * dlrun_lua_describe): for arguments that must be particular numbers. */
int dlrun_lua_number_error(lua_State *L, const char *fn, int arg, const char *what,
                           const char *expected);
/* TypeError "<fn>: expected at most <max> arguments, got <n>" when the
 * function was given more than max arguments (a method's self counts). */
void dlrun_lua_check_nargs(lua_State *L, const char *fn, int max);
/* Refuse keys of the options table at idx that are not in `keys` (NULL
 * terminated): "<fn>: unexpected option '<key>' (expected a, b)" as a
 * TypeError, or "unknown option" as a ValueError (configure, device_put). */
void dlrun_lua_check_option_keys(lua_State *L, int idx, const char *fn, const char *const *keys,
                                 const char *class_name);
/* The same, answering which keys are there: bit i for keys[i] (at most 32),
 * so that a caller looks up only those. */
unsigned dlrun_lua_option_keys_present(lua_State *L, int idx, const char *fn,
                                       const char *const *keys, const char *class_name);
/* The string at idx (the caller checked that it is one) as C receives
 * it: a ValueError "<fn>: embedded null byte in <what>" when it holds a
 * NUL, at which C would cut a path or a name short (as Python's open). */
const char *dlrun_lua_check_cstring(lua_State *L, int idx, const char *fn, const char *what);
/* The string key at idx of an __index, or "" (no field's name) when it
 * holds a NUL: x["shape\0"] is no field, not x.shape. */
const char *dlrun_lua_field_name(lua_State *L, int idx);
/* RuntimeError for a dlrun userdata at idx whose __gc has already run. */
int dlrun_lua_released_error(lua_State *L, int idx);
void dlrun_lua_errors_open(lua_State *L);

/* AttributeError for reading the field at key_idx that the object at idx
 * does not have: "'<shown>' object has no attribute '<key>'. Did you mean:
 * '<name>'?", the name suggested from `fields` (NULL terminated) and the
 * keys of the table at methods_idx (0: none) by Python's rule. A key that
 * is not a string reads as nil (returns 0, pushing nothing). */
int dlrun_lua_attribute_error(lua_State *L, const char *shown, int key_idx,
                              const char *const *fields, int methods_idx);
/* Push v[key] for the value at idx, or nil where reading it raises an
 * AttributeError (Python's hasattr): for code that probes optional fields
 * of any value. Returns the pushed value's type; other errors pass on. */
int dlrun_lua_probe_field(lua_State *L, int idx, const char *key);

/* ---- printed forms of table results (lprinting.c) ---- */
/* Give the table on top the metatable of `form` in lua/dlrun/printing.lua
 * ("tuple", "list", "set", "slice", "whole_slice", "index_map", "shard",
 * "mesh_devices", "record"). */
void dlrun_lua_set_printed(lua_State *L, const char *form);
/* The same for the OrderedDict form, keys in the order of the list at keys_idx. */
void dlrun_lua_set_ordered(lua_State *L, int keys_idx);
/* Whether the value at idx carries one of those metatables (it is then
 * still a plain table to trees and specs). */
int dlrun_lua_is_printed(lua_State *L, int idx);
/* A table without a metatable, or with a printed form's only. */
int dlrun_lua_is_plain_table(lua_State *L, int idx);
void dlrun_lua_printing_open(lua_State *L);

/* ---- DLPack (ldlpack.c, lpartitioned.c) ---- */
/* __dlpack__'s options table at idx (nil: the defaults), with its errors. */
dlrun_export_options dlrun_lua_check_export_options(lua_State *L, int idx, const char *fn);
/* Push a Capsule owning e's tensor; the caller must not delete it again.
 * Raises only on memory exhaustion, before taking it over. */
void dlrun_lua_push_exported(lua_State *L, const dlrun_exported *e);
void dlrun_lua_partitioned_open(lua_State *L);

/* ---- collective entry points (lagree.c) ---- */
/* The error value on top of the stack is this process's failed check of
 * collective `call`: join the call's agreement with it (every other process
 * then raises "<call> failed on process N: <Class>: <message>") and raise
 * it here. Never returns. */
int dlrun_lua_join_failed(lua_State *L, const char *call);
/* Run checks(arguments...) protected, leaving its nresults results on top;
 * its error joins the agreement of `call` (dlrun_lua_join_failed). */
void dlrun_lua_collective_checks(lua_State *L, const char *call, lua_CFunction checks,
                                 int nresults);
void dlrun_lua_agree_open(lua_State *L);

/* ---- runtime and devices (lruntime.c, ldevice.c) ---- */
/* The runtime of this Lua state (the process default), created on first use. */
dlrun_runtime *dlrun_lua_runtime(lua_State *L);
/* Make rt, a host's, L's runtime (L holds a reference of its own). */
void dlrun_lua_bind_host_runtime(lua_State *L, dlrun_runtime *rt);
void dlrun_lua_push_device(lua_State *L, dlrun_device *dev);
dlrun_device *dlrun_lua_test_device(lua_State *L, int idx); /* NULL if not a Device */
/* "device" (also for nil) or "pinned_host" at idx; ValueError otherwise. */
dlrun_memory_kind dlrun_lua_check_memory_kind(lua_State *L, int idx, const char *fn);
void dlrun_lua_runtime_open(lua_State *L);
void dlrun_lua_device_open(lua_State *L);
void dlrun_lua_distributed_open(lua_State *L);

/* ---- conversions (lconvert.c) ---- */
/* The length of the table at idx as # gives it (honouring __len): a
 * TypeError when that is not an integer, a ValueError when it is negative.
 * `what` names the table in messages ("shape", "devices"). */
lua_Integer dlrun_lua_check_len(lua_State *L, int idx, const char *fn, const char *what);
/* An integral number at idx (2 or 2.0) into *out; false for anything else. */
int dlrun_lua_to_integer(lua_State *L, int idx, lua_Integer *out);
/* Whether the value at idx can be called (a function or has __call). */
int dlrun_lua_is_callable(lua_State *L, int idx);
/* Read a list of non-negative integers named `what` into dims; returns its
 * length. A "shape" may also be one integer; other lists ("axis_sizes")
 * must be tables. */
int dlrun_lua_check_shape(lua_State *L, int idx, const char *fn, const char *what, int64_t *dims);
dlrun_dtype dlrun_lua_check_dtype(lua_State *L, int idx, const char *fn);
/* "[2][1]": where an element of nested tables is, from its 0-based index
 * at each of the first `depth` levels. Returns buf. */
const char *dlrun_lua_position(const int64_t *index, int depth, char *buf, size_t n);
/* Whether the value at idx may be data for dl.array: a number, a boolean
 * or a table (checked further when converted). */
int dlrun_lua_is_data(lua_State *L, int idx);
/* Whether the table at idx has a raw key that array data cannot have: one
 * outside 1..n, or, in a complex element {re=, im=} (one holding re), other
 * than re and im. If so, pushes such a key (the least in the order of
 * dlrun_lua_push_tree_keys when `least`, else the first found) and returns
 * 2 for a complex element, 1 for a list; else 0. */
int dlrun_lua_find_stray_key(lua_State *L, int idx, lua_Integer n, int least);
/* Convert the Lua value at idx into a scalar; false if it is not one. */
int dlrun_lua_to_scalar(lua_State *L, int idx, dlrun_scalar *out);
void dlrun_lua_push_scalar(lua_State *L, const dlrun_scalar *s);
/* JAX's default dtype for a value: int32, float32, bool or complex64. */
dlrun_dtype dlrun_lua_default_dtype(const dlrun_scalar *s);
/* Push the elements of host data (row-major) as nested tables. */
void dlrun_lua_push_nested(lua_State *L, dlrun_dtype dtype, int ndim, const int64_t *dims,
                           const void *data);
/* Convert nested tables at idx to host data; infers shape, and dtype when
 * *dtype is DLRUN_DTYPE_COUNT. Pushes a userdata holding the bytes (freed by
 * Lua) and returns its pointer. */
void *dlrun_lua_nested_to_host(lua_State *L, int idx, const char *fn, dlrun_dtype *dtype,
                               int *ndim, int64_t *dims, uint64_t *nbytes);

/* ---- meshes and shardings (lsharding.c) ---- */
void dlrun_lua_check_spec(lua_State *L, int idx, const char *fn, dlrun_partition_spec *spec);
dlrun_sharding *dlrun_lua_test_sharding(lua_State *L, int idx); /* NULL if not one */
/* Push the Sharding userdata for s, taking over one reference to s: a new
 * one, or the state's userdata for an equal sharding (shardings are
 * interned; s is then released). Returns the pushed userdata's sharding,
 * borrowed: use it, not s, afterwards. */
dlrun_sharding *dlrun_lua_push_sharding(lua_State *L, dlrun_sharding *s);
/* Push the (cached) SingleDeviceSharding of dev; returns it, borrowed. */
dlrun_sharding *dlrun_lua_push_device_sharding(lua_State *L, dlrun_device *dev);
/* Push the Sharding userdata for a target at idx (a Device, a Sharding, or
 * nil for the default device) and return it, borrowed from that userdata. */
dlrun_sharding *dlrun_lua_push_target(lua_State *L, int idx, const char *fn);
/* Push an index into an array of shape dims: a list of {first, last}
 * pairs (1-based, inclusive), printed as a tuple of slices. */
void dlrun_lua_push_index(lua_State *L, int ndim, const int64_t *dims, const int64_t *lo,
                          const int64_t *hi);
/* Push the sharding's devices as a list ordered by platform and id. */
void dlrun_lua_push_device_set(lua_State *L, dlrun_sharding *s);
void dlrun_lua_sharding_open(lua_State *L);

/* ---- arrays (larray.c, ltransfer.c) ---- */
/* Push a new Array userdata that owns a: it takes over the caller's
 * reference (the public dlrun_lua_pusharray retains one of its own instead).
 * Its sharding userdata (for x.sharding) is the value at sharding_idx, or
 * made anew when sharding_idx is 0. */
void dlrun_lua_push_array_owned(lua_State *L, dlrun_array *a, int sharding_idx);
dlrun_array *dlrun_lua_check_array(lua_State *L, int idx, const char *fn);
dlrun_array *dlrun_lua_test_array(lua_State *L, int idx); /* NULL if not one */
/* dlrun_lua_check_array for callers that hold Array's metatable at mt_idx
 * (an upvalue): no lookup of it by name, for functions called per element. */
dlrun_array *dlrun_lua_check_array_mt(lua_State *L, int idx, int mt_idx, const char *fn);
/* Push a Lua-owned host buffer holding a's whole value, read from this
 * process's shards (raises the fetch error when they do not cover it);
 * returns it. */
void *dlrun_lua_read_all(lua_State *L, dlrun_array *a);
void dlrun_lua_array_open(lua_State *L);
/* Add methods to Array (after dlrun_lua_array_open): other files' methods,
 * such as __dlpack__ and __partitioned__, sharing the nup upvalues on top of
 * the stack (popped), as luaL_setfuncs. */
void dlrun_lua_add_array_methods(lua_State *L, const luaL_Reg *methods, int nup);
/* x:__cuda_array_interface__() (lcuda.c): the CUDA Array Interface, v3. */
int dlrun_lua_cuda_array_interface(lua_State *L);
/* Push the result of putting the Array x (at idx) onto the Sharding
 * userdata at sharding_idx (ltransfer.c): x itself when nothing had to
 * change, else a new Array. Returns the pushed array, anchored by it. */
dlrun_array *dlrun_lua_push_put(lua_State *L, int idx, dlrun_array *x, int sharding_idx,
                                const dlrun_put_options *o);
/* ---- trees of tables (ltree.c) ---- */
/* Pushes the value mapped from the leaf at idx; may raise. */
typedef void (*dlrun_lua_leaf_fn)(lua_State *L, int idx, void *ctx);
/* Push the tree at idx mapped leaf by leaf: a new table for every plain
 * table from which an Array is reachable, or with `keyed` one that is not
 * array data (dlrun_lua_find_stray_key) (keys kept), leaf() of every other
 * value. Iterative (any depth); each table and each leaf object maps once,
 * so shared subtrees stay shared and cycles stay cycles. Leaves map in the
 * same order on every process: breadth-first, keys in tree order; `fn`
 * names the call in errors about keys. */
void dlrun_lua_map_tree(lua_State *L, int idx, const char *fn, int keyed, dlrun_lua_leaf_fn leaf,
                        void *ctx);
/* Push a list of the keys of the table at idx in the one order every
 * process walks trees in (lkeys.c): numbers by value, then strings
 * byte-wise, then false and true, then Devices by id; returns how many.
 * TypeError naming `fn` for a key of another type. */
lua_Integer dlrun_lua_push_tree_keys(lua_State *L, int idx, const char *fn);
/* The number of keys of the table at idx (raw, as lua_next finds them). */
lua_Integer dlrun_lua_count_keys(lua_State *L, int idx);
/* Whether the key at a comes before the one at b in that order (keys of
 * other types come last, by type name alone). */
int dlrun_lua_key_less(lua_State *L, int a, int b);
/* How messages name the key at idx: `the key "w"`, `the key 2`, `a key of
 * type function`. Returns buf. */
const char *dlrun_lua_key_text(lua_State *L, int idx, char *buf, size_t n);

void dlrun_lua_transfer_open(lua_State *L);
void dlrun_lua_dlpack_open(lua_State *L);
void dlrun_lua_debug_open(lua_State *L);
/* The name of a script this state is running that the file at path is
 * (a Lua function's file on the call stack, or arg[0]), or NULL. */
const char *dlrun_lua_running_script(lua_State *L, const char *path);
/* RuntimeError "<fn>: the trace file ... is the running script ..." when
 * tracing to path would overwrite one. */
void dlrun_lua_check_trace_path(lua_State *L, const char *fn, const char *path);
/* dl.trace_start, dl.trace_stop, dl.stats (lprofile.c). */
void dlrun_lua_profile_open(lua_State *L);

#endif
