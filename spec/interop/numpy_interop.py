"""DLPack interop between dlrun (libdlrun.so, through ctypes) and NumPy.

Usage: python3 spec/interop/numpy_interop.py [path/to/libdlrun.so]
The library path comes from the first argument, else the DLRUN_LIB
environment variable, else build/libdlrun.so under the repository root.

NumPy 1.24 is the consumer and producer on the other side: it calls
__dlpack__() with no arguments and speaks only legacy `dltensor` capsules.

  export: a dlrun array exported (legacy DLManagedTensor) is wrapped in a
          `dltensor` capsule and read by numpy.from_dlpack; values must be
          identical and dlrun's deleter must run exactly once, after NumPy
          lets go (dlrun_live_exports counts exports whose deleter has not
          run).
  float8: NumPy 1.24 has none of the float8 family: dlrun's legacy export
          refuses them (BufferError naming the dtype); forced through, NumPy
          raises its own error ("Unsupported dtype in DLTensor.").
  sub-byte: int4 ... float6_e3m2fn, packed as DLPack 1.1 sets: dlrun's
          legacy export refuses them (BufferError naming dtype, code and
          bits); forced through, NumPy raises its own error.
  import: NumPy's own __dlpack__() capsule is handed to dlrun_import; values
          read back with dlrun_array_read must be identical (in logical
          row-major order) and NumPy's deleter must run exactly once: NumPy's
          manager context holds one reference to the exported array, so
          sys.getrefcount of that array returns to its value before the
          export exactly when the deleter has run.

Prints one line per check, "ok - NAME" or "not ok - NAME: DETAIL", and a
final "python interop: N passed, N failed"; exits 1 if any check failed.
"""


import ctypes as C
import gc
import os
import sys

import numpy as np

import dlrun_ctypes
from dlrun_ctypes import *  # noqa: F401,F403 - the shared declarations

# ---------------------------------------------------------------- export direction


def export_case(name, rt, sharding, dtname, shape, release_first):
    a = random_array(dtname, shape)
    arr = from_host(sharding, dtname, a)
    base = dlrun_live_exports(rt)
    managed = export_legacy(arr)
    t, tshape, tstrides = tensor_fields(managed)
    dt = np.dtype(dtname)
    problems = []
    if (t.device.device_type, t.device.device_id) != (1, 0):
        problems.append("device %r" % ((t.device.device_type, t.device.device_id),))
    if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (DL_CODE[dt.kind], dt.itemsize * 8, 1):
        problems.append("dtype %r" % ((t.dtype.code, t.dtype.bits, t.dtype.lanes),))
    if t.ndim != len(shape) or (shape and tshape != shape):
        problems.append("ndim %d shape %r" % (t.ndim, tshape))
    if t.byte_offset != 0:
        problems.append("byte_offset %d" % t.byte_offset)
    # DLPack 1.2: strides never NULL when ndim > 0 (dlrun sets them for 0-d too)
    row_major = tuple(int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape)))
    if tstrides is None or tstrides != row_major:
        problems.append("strides %r, want %r" % (tstrides, row_major))
    if a.size == 0 and t.data:
        problems.append("zero-size data not NULL")
    report(name + " tensor", not problems, ", ".join(problems))
    expect_equal(name + " live exports after export", dlrun_live_exports(rt) - base, 1)
    if release_first:
        # The export keeps its memory, whatever happens to the array.
        dlrun_array_delete(arr)
        dlrun_array_release(arr)
        arr = None
    x = np.from_dlpack(Producer(managed))
    gc.collect()
    if x.dtype != dt or x.shape != shape:
        report(name + " values", False, "got %s%r, want %s%r" % (x.dtype, x.shape, dt, shape))
    else:
        report(name + " values", x.tobytes() == a.tobytes(), "bytes differ")
    if a.size:
        expect_equal(name + " zero-copy", x.__array_interface__["data"][0], t.data)
    if arr is not None:
        dlrun_array_release(arr)
    expect_equal(name + " deleter not run while numpy holds it", dlrun_live_exports(rt) - base, 1)
    del x
    gc.collect()
    expect_equal(name + " deleter ran once after numpy let go", dlrun_live_exports(rt) - base, 0)


def export_refused_case(name, rt, sharding, dtname, values):
    """bool and bfloat16: NumPy 1.24 cannot read them: a Python exception,
    and the unconsumed capsule's destructor runs the deleter once."""
    a = np.asarray(values, dtype=np.uint16 if dtname == "bfloat16" else np.bool_)
    arr = from_host(sharding, dtname, a)
    base = dlrun_live_exports(rt)
    managed = export_legacy(arr)
    dlrun_array_release(arr)
    raised = None
    prod = Producer(managed)
    try:
        np.from_dlpack(prod)
    except Exception as e:  # noqa: BLE001
        raised = e
    report(name + " raises a clean Python exception",
           raised is not None and not isinstance(raised, SystemError),
           "numpy.from_dlpack accepted it" if raised is None else
           "%s: %s" % (type(raised).__name__, raised))
    if raised is not None:
        print("#   %s: %s: %s" % (name, type(raised).__name__, raised))
    expect_equal(name + " deleter not run while the capsule is unconsumed",
                 dlrun_live_exports(rt) - base, 1)
    del prod, raised
    gc.collect()
    expect_equal(name + " deleter ran once", dlrun_live_exports(rt) - base, 0)


def export_sim_case(name, rt):
    """An array on a sim device exports to (kDLExtDev, id): NumPy refuses it
    cleanly, and the capsule's destructor releases the export."""
    sim = dlrun_device_get(rt, b"sim", 1)
    s = P()
    check(dlrun_single_device_sharding_create(sim, DLRUN_MEM_DEVICE, C.byref(s)),
          "dlrun_single_device_sharding_create(sim)")
    arr = from_host(s, "float32", np.arange(6, dtype=np.float32))
    dlrun_sharding_release(s)
    base = dlrun_live_exports(rt)
    managed = export_legacy(arr)
    dlrun_array_release(arr)
    t = managed.contents.dl_tensor
    expect_equal(name + " device", (t.device.device_type, t.device.device_id), (12, 1))
    raised = None
    prod = Producer(managed)
    try:
        np.from_dlpack(prod)
    except Exception as e:  # noqa: BLE001
        raised = e
    report(name + " raises a clean Python exception",
           raised is not None and not isinstance(raised, SystemError),
           "numpy.from_dlpack accepted a kDLExtDev tensor" if raised is None else
           "%s: %s" % (type(raised).__name__, raised))
    if raised is not None:
        print("#   %s: %s: %s" % (name, type(raised).__name__, raised))
    del prod, raised
    gc.collect()
    expect_equal(name + " deleter ran once", dlrun_live_exports(rt) - base, 0)


def export_outlives_runtime_case(name):
    """The export keeps its memory (and what it needs of the runtime) after the
    array and the caller's runtime reference are gone."""
    cfg = dlrun_config(devices=b"sim:1", device_memory=0)
    rt = P()
    check(dlrun_runtime_create(C.byref(cfg), C.byref(rt)), "dlrun_runtime_create")
    s = P()
    check(dlrun_single_device_sharding_create(dlrun_host_device(rt), DLRUN_MEM_DEVICE,
                                              C.byref(s)), "sharding")
    a = random_array("float64", (3, 4))
    arr = from_host(s, "float64", a)
    managed = export_legacy(arr)
    dlrun_array_release(arr)
    dlrun_sharding_release(s)
    dlrun_runtime_release(rt)
    x = np.from_dlpack(Producer(managed))
    expect_equal(name + " values", x.tobytes(), a.tobytes())
    del x
    gc.collect()  # the deleter runs here, after the runtime's last user reference
    report(name + " deleter ran without a crash", True)


# ---------------------------------------------------------------- import direction


def import_numpy(rt, v, copy=COPY_IF_NEEDED):
    """dlrun_import of v.__dlpack__(). Returns (array or None, error text,
    outcome). The capsule is renamed "used_dltensor" only when dlrun took
    the tensor (the outcome says so); else NumPy's capsule destructor
    releases it."""
    cap = v.__dlpack__()
    ptr = PyCapsule_GetPointer(cap, CAPSULE_NAME)
    if not ptr:
        raise DlrunError("NumPy's capsule is not a dltensor")
    opts = dlrun_import_options(target=None, copy=copy)
    out = P()
    how = C.c_int(99)
    st = dlrun_import(rt, C.cast(ptr, C.POINTER(DLManagedTensor)), None, C.byref(opts),
                      C.byref(out), C.byref(how))
    if how.value != IMPORT_REFUSED and PyCapsule_SetName(cap, USED_NAME) != 0:
        raise DlrunError("PyCapsule_SetName failed")
    if st != 0:
        return None, "%s %s" % (dlrun_status_name(st).decode(),
                                dlrun_last_error().decode()), how.value
    return out, None, how.value


def import_case(name, rt, v, copied, check_alias=False):
    """Import view v; copied: whether dlrun must copy (then NumPy's deleter
    runs during the import) or wrap (then it runs at release)."""
    before = sys.getrefcount(v)
    arr, err, how = import_numpy(rt, v)
    if arr is None:
        report(name + " import", False, err)
        gc.collect()
        return
    want = IMPORT_COPIED if copied else IMPORT_WRAPPED
    expect_equal(name + " outcome", how, want)
    expect_equal(name + " the array says it", dlrun_array_import_outcome(arr), want)
    held = sys.getrefcount(v) - before
    if copied:
        expect_equal(name + " copied: numpy deleter ran at import", held, 0)
    else:
        expect_equal(name + " wrapped: numpy deleter not run while imported", held, 1)
    meta_ok = (dlrun_array_dtype(arr) == dlrun_dtype(v.dtype.name)
               and dlrun_shape(arr) == v.shape)
    report(name + " dtype and shape", meta_ok, "dtype %d shape %r" % (
        dlrun_array_dtype(arr), dlrun_shape(arr)))
    data = read_all(arr)
    expect_equal(name + " values", data, v.tobytes())
    if check_alias:
        # Re-export: a legacy export of NumPy's memory is a copy by default
        # (NumPy sees what a consumer writes); shared when asked for, with
        # the same memory and NumPy's strides.
        base = dlrun_live_exports(rt)
        managed, was_copied = export_legacy(arr, with_copied=True)
        t, _, _ = tensor_fields(managed)
        report(name + " default re-export is a copy", was_copied and t.data and
               t.data != v.__array_interface__["data"][0] or v.size == 0, "shared")
        managed.contents.deleter(managed)
        managed, was_copied = export_legacy(arr, share=True, with_copied=True)
        report(name + " shared re-export is not a copy", not was_copied, "copied")
        t, _, tstrides = tensor_fields(managed)
        expect_equal(name + " shares numpy's memory", (t.data or 0) + t.byte_offset,
                     v.__array_interface__["data"][0])
        expect_equal(name + " keeps numpy's strides", tstrides,
                     tuple(s // v.itemsize for s in v.strides))
        managed.contents.deleter(managed)
        expect_equal(name + " re-export deleter", dlrun_live_exports(rt) - base, 0)
    dlrun_array_release(arr)
    gc.collect()
    expect_equal(name + " numpy deleter ran once after release", sys.getrefcount(v) - before, 0)


def import_refused_case(name, rt, v):
    """copy=0 with strides that need a copy: refused; dlrun must not call the
    deleter (the capsule still owns it and releases it once)."""
    before = sys.getrefcount(v)
    cap = v.__dlpack__()
    ptr = PyCapsule_GetPointer(cap, CAPSULE_NAME)
    opts = dlrun_import_options(target=None, copy=COPY_NEVER)
    out = P()
    how = C.c_int(99)
    st = dlrun_import(rt, C.cast(ptr, C.POINTER(DLManagedTensor)), None, C.byref(opts),
                      C.byref(out), C.byref(how))
    report(name + " refused", st != 0 and not out.value,
           "status %d" % st)
    expect_equal(name + " outcome: still the caller's", how.value, IMPORT_REFUSED)
    expect_equal(name + " deleter not called by dlrun", sys.getrefcount(v) - before, 1)
    del cap
    gc.collect()
    expect_equal(name + " capsule released it once", sys.getrefcount(v) - before, 0)


def round_trip_case(name, rt):
    """NumPy -> dlrun (wrapped) -> NumPy: same memory, both deleters once."""
    a = random_array("float32", (3, 4)).T
    before = sys.getrefcount(a)
    arr, err, _ = import_numpy(rt, a)
    if arr is None:
        report(name, False, err)
        return
    base = dlrun_live_exports(rt)
    x = np.from_dlpack(Producer(export_legacy(arr, share=True)))
    dlrun_array_release(arr)
    ok = x.shape == a.shape and x.tobytes() == a.tobytes()
    report(name + " values", ok, "differ")
    expect_equal(name + " same memory", x.__array_interface__["data"][0],
                 a.__array_interface__["data"][0])
    expect_equal(name + " numpy held while dlrun export lives", sys.getrefcount(a) - before, 1)
    del x
    gc.collect()
    expect_equal(name + " dlrun deleter once", dlrun_live_exports(rt) - base, 0)
    expect_equal(name + " numpy deleter once", sys.getrefcount(a) - before, 0)


# ---------------------------------------------------------------- main


def main():
    print("# numpy %s, library %s" % (np.__version__, os.path.basename(library_path())))
    cfg = dlrun_config(devices=b"sim:2", device_memory=0)
    rt = P()
    check(dlrun_runtime_create(C.byref(cfg), C.byref(rt)), "dlrun_runtime_create")
    host = dlrun_host_device(rt)
    sharding = P()
    check(dlrun_single_device_sharding_create(host, DLRUN_MEM_DEVICE, C.byref(sharding)),
          "dlrun_single_device_sharding_create")

    # dlrun -> NumPy
    for dtname in SUPPORTED:
        for shape in SHAPES:
            run_case("export %s%s" % (dtname, shape_text(shape)), export_case, rt, sharding,
                     dtname, shape, False)
        run_case("export %s[3,4] array released first" % dtname, export_case, rt, sharding,
                 dtname, (3, 4), True)
    run_case("export bool[4]", export_refused_case, rt, sharding, "bool",
             [True, False, True, True])
    run_case("export bfloat16[3]", export_refused_case, rt, sharding, "bfloat16",
             [0x3F80, 0xC000, 0x7F80])
    for dtname in FLOAT8:
        run_case("export %s[3]" % dtname, float8_refused_case, rt, sharding, dtname,
                 np.from_dlpack)
    for dtname in SUBBYTE:
        run_case("export %s" % dtname, subbyte_refused_case, rt, sharding, dtname,
                 np.from_dlpack)
    run_case("export sim device", export_sim_case, rt)
    run_case("export outlives runtime", export_outlives_runtime_case)

    # NumPy -> dlrun
    for dtname in SUPPORTED:
        for shape in SHAPES:
            a = random_array(dtname, shape)
            run_case("import %s%s" % (dtname, shape_text(shape)), import_case, rt, a, False)
        a2 = random_array(dtname, (3, 4))
        a3 = random_array(dtname, (2, 3, 4))
        b = random_array(dtname, (5, 6))
        run_case("import %s[3,4].T" % dtname, import_case, rt, a2.T, False, True)
        run_case("import %s[2,3,4].T" % dtname, import_case, rt, a3.T, False, True)
        run_case("import %s transpose(1,0,2)" % dtname, import_case, rt,
                 np.transpose(a3, (1, 0, 2)), False, True)
        run_case("import %s[5,6][:, ::2]" % dtname, import_case, rt, b[:, ::2], True)
        run_case("import %s[5,6][::-1]" % dtname, import_case, rt, b[::-1], True)
        run_case("import %s[6][::-1]" % dtname, import_case, rt, b[0][::-1], True)
        run_case("import %s[5,6][1:]" % dtname, import_case, rt, b[1:], False, True)
    run_case("import copy=0 of a[:, ::2]", import_refused_case, rt,
             random_array("float32", (5, 6))[:, ::2])
    run_case("round trip numpy -> dlrun -> numpy", round_trip_case, rt)

    gc.collect()
    expect_equal("no export left alive", dlrun_live_exports(rt), 0)
    dlrun_sharding_release(sharding)
    dlrun_runtime_release(rt)
    return dlrun_ctypes.summary("python interop")


if __name__ == "__main__":
    sys.exit(main())
