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

# ---------------------------------------------------------------- reporting

PASSED = 0
FAILED = 0


def report(name, ok, detail=""):
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print("ok - " + name)
    else:
        FAILED += 1
        print("not ok - %s: %s" % (name, detail))
    sys.stdout.flush()
    return ok


def expect_equal(name, got, want):
    if got == want:
        return report(name, True)
    g, w = repr(got), repr(want)
    if len(g) + len(w) > 240:  # long byte strings: the first difference
        at = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
        return report(name, False, "differ at byte %d of %d (want %d bytes)" % (at, len(got), len(want)))
    return report(name, False, "got %s, want %s" % (g, w))


# ---------------------------------------------------------------- the library


def library_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    if os.environ.get("DLRUN_LIB"):
        return os.environ["DLRUN_LIB"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, "build", "libdlrun.so")


LIB = C.CDLL(library_path())


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", DLDevice),
        ("ndim", C.c_int32),
        ("dtype", DLDataType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


class DLManagedTensor(C.Structure):
    pass


DELETER = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", C.c_void_p),
    ("deleter", DELETER),
]


class DLManagedTensorVersioned(C.Structure):
    pass  # dlrun exports it only when asked for max_version >= 1: never here


class dlrun_config(C.Structure):
    _fields_ = [("devices", C.c_char_p), ("device_memory", C.c_uint64),
                ("device_memory_fraction", C.c_double), ("pinned_host_memory", C.c_uint64),
                ("pinned_host_memory_fraction", C.c_double),
                ("device_preallocate", C.c_int), ("pinned_host_preallocate", C.c_int)]


class dlrun_export_options(C.Structure):
    _fields_ = [
        ("has_max_version", C.c_bool),
        ("max_major", C.c_uint32),
        ("max_minor", C.c_uint32),
        ("has_dl_device", C.c_bool),
        ("device_type", C.c_int32),
        ("device_id", C.c_int32),
        ("copy", C.c_int),
        ("has_stream", C.c_bool),
        ("stream", C.c_int64),
        ("stats", C.c_void_p),
    ]


class dlrun_exported(C.Structure):
    _fields_ = [
        ("legacy", C.POINTER(DLManagedTensor)),
        ("versioned", C.POINTER(DLManagedTensorVersioned)),
    ]


class dlrun_import_options(C.Structure):
    _fields_ = [("target", C.c_void_p), ("copy", C.c_int)]


assert C.sizeof(DLTensor) == 48 and DLTensor.shape.offset == 24
assert C.sizeof(DLManagedTensor) == 64 and DLManagedTensor.deleter.offset == 56

P = C.c_void_p  # opaque dlrun handles
STATUS = C.c_int
DLRUN_MEM_DEVICE = 0


def declare(name, restype, *argtypes):
    fn = getattr(LIB, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


dlrun_last_error = declare("dlrun_last_error", C.c_char_p)
dlrun_status_name = declare("dlrun_status_name", C.c_char_p, STATUS)
dlrun_runtime_create = declare("dlrun_runtime_create", STATUS, C.POINTER(dlrun_config),
                               C.POINTER(P))
dlrun_runtime_release = declare("dlrun_runtime_release", None, P)
dlrun_host_device = declare("dlrun_host_device", P, P)
dlrun_device_get = declare("dlrun_device_get", P, P, C.c_char_p, C.c_size_t)
dlrun_single_device_sharding_create = declare("dlrun_single_device_sharding_create", STATUS, P,
                                              C.c_int, C.POINTER(P))
dlrun_sharding_release = declare("dlrun_sharding_release", None, P)
dlrun_dtype_from_name = declare("dlrun_dtype_from_name", STATUS, C.c_char_p, C.POINTER(C.c_int))
dlrun_array_from_host = declare("dlrun_array_from_host", STATUS, P, C.c_int, C.c_int,
                                C.POINTER(C.c_int64), C.c_void_p, C.c_uint64, C.POINTER(P))
dlrun_array_release = declare("dlrun_array_release", None, P)
dlrun_array_delete = declare("dlrun_array_delete", None, P)
dlrun_array_dtype = declare("dlrun_array_dtype", C.c_int, P)
dlrun_array_ndim = declare("dlrun_array_ndim", C.c_int, P)
dlrun_array_shape = declare("dlrun_array_shape", C.POINTER(C.c_int64), P)
dlrun_array_nbytes = declare("dlrun_array_nbytes", C.c_uint64, P)
dlrun_array_read = declare("dlrun_array_read", STATUS, P, C.c_uint64, C.c_uint64, C.c_void_p)
dlrun_export = declare("dlrun_export", STATUS, P, C.POINTER(dlrun_export_options),
                       C.POINTER(dlrun_exported))
dlrun_live_exports = declare("dlrun_live_exports", C.c_int64, P)
dlrun_import = declare("dlrun_import", STATUS, P, C.POINTER(DLManagedTensor),
                       C.POINTER(DLManagedTensorVersioned), C.POINTER(dlrun_import_options),
                       C.POINTER(P))


class DlrunError(Exception):
    pass


def check(status, what):
    if status != 0:
        raise DlrunError("%s: %s %s" % (what, dlrun_status_name(status).decode(),
                                        dlrun_last_error().decode()))


# ---------------------------------------------------------------- capsules

PyCapsule_Destructor = C.CFUNCTYPE(None, C.c_void_p)
PyCapsule_New = C.pythonapi.PyCapsule_New
PyCapsule_New.restype = C.py_object
PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, PyCapsule_Destructor]
PyCapsule_IsValid = C.pythonapi.PyCapsule_IsValid
PyCapsule_IsValid.restype = C.c_int
PyCapsule_IsValid.argtypes = [C.c_void_p, C.c_char_p]
PyCapsule_GetPointer = C.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = C.c_void_p
PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
# The same function on a raw PyObject*, for the destructor (a fresh object:
# indexing does not share the attribute's argtypes).
PyCapsule_GetPointerRaw = C.pythonapi["PyCapsule_GetPointer"]
PyCapsule_GetPointerRaw.restype = C.c_void_p
PyCapsule_GetPointerRaw.argtypes = [C.c_void_p, C.c_char_p]
PyCapsule_SetName = C.pythonapi.PyCapsule_SetName
PyCapsule_SetName.restype = C.c_int
PyCapsule_SetName.argtypes = [C.py_object, C.c_char_p]

# A capsule keeps a pointer to its name: these live as long as the module.
NAME_DLTENSOR = C.create_string_buffer(b"dltensor")
NAME_USED = C.create_string_buffer(b"used_dltensor")
CAPSULE_NAME = C.cast(NAME_DLTENSOR, C.c_char_p)
USED_NAME = C.cast(NAME_USED, C.c_char_p)


@PyCapsule_Destructor
def capsule_destructor(capsule):
    # An unconsumed capsule still owns the tensor: call its deleter once. A
    # consumer that took it renamed the capsule "used_dltensor".
    if PyCapsule_IsValid(capsule, b"dltensor"):
        ptr = PyCapsule_GetPointerRaw(capsule, b"dltensor")
        m = C.cast(ptr, C.POINTER(DLManagedTensor))
        if m.contents.deleter:
            m.contents.deleter(m)


class Producer:
    """What numpy.from_dlpack is given: hands out one dltensor capsule.

    The producer keeps the capsule and drops it in __del__, where Python has
    set aside any exception in flight: NumPy's from_dlpack releases its
    reference to the capsule while its own error (an unsupported dtype or
    device) is pending, and a destructor written in Python cannot run
    properly then (ctypes sees the pending error and the exception is lost:
    "SystemError: ... returned NULL without setting an exception"). Dropped
    from here, the capsule's destructor runs in a clean state and calls the
    deleter when nobody consumed the tensor."""

    def __init__(self, managed):
        self.managed = managed
        self.capsule = None
        self.handed = False

    def __dlpack__(self, stream=None):
        if self.handed:
            raise BufferError("this export was already handed out")
        self.handed = True
        self.capsule = PyCapsule_New(C.cast(self.managed, C.c_void_p), CAPSULE_NAME,
                                     capsule_destructor)
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, 0: dlrun exports host arrays there

    def __del__(self):
        if not self.handed:
            if self.managed.contents.deleter:
                self.managed.contents.deleter(self.managed)
            return
        cap, self.capsule = self.capsule, None
        del cap  # the destructor runs here unless a consumer still holds it


# ---------------------------------------------------------------- dlrun helpers

SUPPORTED = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "complex64", "complex128"]
SHAPES = [(), (4,), (3, 4), (2, 3, 4), (0,), (0, 4)]
DL_CODE = {"i": 0, "u": 1, "f": 2, "c": 5}
RNG = np.random.default_rng(20240501)


def shape_text(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def random_array(dtname, shape):
    """Random bit patterns of dtype (every value NumPy can hold, NaN payloads
    included), so that any conversion on the way would show."""
    dt = np.dtype(dtname)
    n = int(np.prod(shape, dtype=np.int64))
    raw = RNG.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def dlrun_dtype(name):
    out = C.c_int()
    check(dlrun_dtype_from_name(name.encode(), C.byref(out)), "dlrun_dtype_from_name(%s)" % name)
    return out.value


def from_host(sharding, dtname, a):
    a = np.require(a, requirements="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    dims = (C.c_int64 * max(1, a.ndim))(*a.shape)
    out = P()
    check(dlrun_array_from_host(sharding, dlrun_dtype(dtname), a.ndim, dims,
                                a.ctypes.data_as(C.c_void_p), a.nbytes, C.byref(out)),
          "dlrun_array_from_host")
    return out


def export_legacy(arr):
    opts = dlrun_export_options(has_max_version=False, has_dl_device=False, copy=-1,
                                has_stream=False)
    ex = dlrun_exported()
    check(dlrun_export(arr, C.byref(opts), C.byref(ex)), "dlrun_export")
    if not ex.legacy or ex.versioned:
        raise DlrunError("dlrun_export without max_version did not give a legacy tensor")
    return ex.legacy


def read_all(arr):
    n = dlrun_array_nbytes(arr)
    buf = C.create_string_buffer(max(1, n))
    check(dlrun_array_read(arr, 0, n, buf), "dlrun_array_read")
    return buf.raw[:n]


def dlrun_shape(arr):
    nd = dlrun_array_ndim(arr)
    dims = dlrun_array_shape(arr)
    return tuple(dims[i] for i in range(nd))


def tensor_fields(managed):
    t = managed.contents.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim)) if t.shape else None
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return t, shape, strides


def run_case(name, fn, *args):
    """Run one case; an unexpected exception is one failed check."""
    try:
        fn(name, *args)
    except Exception as e:  # noqa: BLE001 - reported, not swallowed
        report(name, False, "%s: %s" % (type(e).__name__, e))


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


def import_numpy(rt, v, copy=-1):
    """dlrun_import of v.__dlpack__(). Returns (array or None, error text).
    The capsule is renamed "used_dltensor" only when dlrun took the tensor;
    on failure NumPy's capsule destructor releases it."""
    cap = v.__dlpack__()
    ptr = PyCapsule_GetPointer(cap, CAPSULE_NAME)
    if not ptr:
        raise DlrunError("NumPy's capsule is not a dltensor")
    opts = dlrun_import_options(target=None, copy=copy)
    out = P()
    st = dlrun_import(rt, C.cast(ptr, C.POINTER(DLManagedTensor)), None, C.byref(opts),
                      C.byref(out))
    if st != 0:
        return None, "%s %s" % (dlrun_status_name(st).decode(), dlrun_last_error().decode())
    if PyCapsule_SetName(cap, USED_NAME) != 0:
        raise DlrunError("PyCapsule_SetName failed")
    return out, None


def import_case(name, rt, v, copied, check_alias=False):
    """Import view v; copied: whether dlrun must copy (then NumPy's deleter
    runs during the import) or wrap (then it runs at release)."""
    before = sys.getrefcount(v)
    arr, err = import_numpy(rt, v)
    if arr is None:
        report(name + " import", False, err)
        gc.collect()
        return
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
        # Re-export: the same memory and NumPy's strides, not a copy.
        base = dlrun_live_exports(rt)
        managed = export_legacy(arr)
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
    opts = dlrun_import_options(target=None, copy=0)
    out = P()
    st = dlrun_import(rt, C.cast(ptr, C.POINTER(DLManagedTensor)), None, C.byref(opts),
                      C.byref(out))
    report(name + " refused", st != 0 and not out.value,
           "status %d" % st)
    expect_equal(name + " deleter not called by dlrun", sys.getrefcount(v) - before, 1)
    del cap
    gc.collect()
    expect_equal(name + " capsule released it once", sys.getrefcount(v) - before, 0)


def round_trip_case(name, rt):
    """NumPy -> dlrun (wrapped) -> NumPy: same memory, both deleters once."""
    a = random_array("float32", (3, 4)).T
    before = sys.getrefcount(a)
    arr, err = import_numpy(rt, a)
    if arr is None:
        report(name, False, err)
        return
    base = dlrun_live_exports(rt)
    x = np.from_dlpack(Producer(export_legacy(arr)))
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
    print("python interop: %d passed, %d failed" % (PASSED, FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
