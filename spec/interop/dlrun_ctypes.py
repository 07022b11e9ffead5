"""The ctypes side of dlrun's DLPack interop specs (numpy_interop.py,
torch_interop.py): reporting, libdlrun's declarations, Python capsules,
and helpers that make, export and read dlrun arrays.

The library path comes from the first argument of the script, else the
DLRUN_LIB environment variable, else build/libdlrun.so under the
repository root.
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
                ("device_preallocate", C.c_int), ("pinned_host_preallocate", C.c_int),
                ("host_memory", C.c_uint64), ("host_memory_fraction", C.c_double)]


# dlrun_copy_mode, dlrun_legacy_sharing, dlrun_import_outcome (dlpack.h).
COPY_IF_NEEDED, COPY_NEVER, COPY_ALWAYS = 0, 1, 2
LEGACY_PROTECT, LEGACY_SHARE = 0, 1
IMPORT_REFUSED, IMPORT_RELEASED, IMPORT_WRAPPED, IMPORT_COPIED = 0, 1, 2, 3


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
        ("legacy_sharing", C.c_int),
        ("legacy_knows_1_1", C.c_bool),
    ]


class dlrun_exported(C.Structure):
    _fields_ = [
        ("legacy", C.POINTER(DLManagedTensor)),
        ("versioned", C.POINTER(DLManagedTensorVersioned)),
        ("copied", C.c_bool),
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
                       C.POINTER(P), C.POINTER(C.c_int))
dlrun_array_import_outcome = declare("dlrun_array_import_outcome", C.c_int, P)


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


def export_legacy(arr, share=False, with_copied=False):
    """A legacy export of arr (all-zero options but legacy_sharing); with
    with_copied, also whether dlrun copied."""
    opts = dlrun_export_options(legacy_sharing=LEGACY_SHARE if share else LEGACY_PROTECT)
    ex = dlrun_exported()
    check(dlrun_export(arr, C.byref(opts), C.byref(ex)), "dlrun_export")
    if not ex.legacy or ex.versioned:
        raise DlrunError("dlrun_export without max_version did not give a legacy tensor")
    return (ex.legacy, ex.copied) if with_copied else ex.legacy


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


def summary(name):
    """The closing line; the exit status."""
    print("%s: %d passed, %d failed" % (name, PASSED, FAILED))
    return 1 if FAILED else 0


# ---------------------------------------------------------------- the float8 family

FLOAT8 = ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
          "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"]


def legacy_refusal(name, rt, arr, want, code, bits, from_dlpack):
    """arr (released here) to a legacy consumer: dlrun's legacy export
    refuses it with a BufferError starting with `want`, so the consumer never
    sees the bytes. Forced through (legacy_knows_1_1, the caller vouching
    wrongly), the consumer must raise its own error, never read the bytes as
    another type; either way the deleter runs once."""
    base = dlrun_live_exports(rt)
    try:
        export_legacy(arr)
        got = "exported"
    except DlrunError as e:
        got = str(e)
    report(name + " refused by dlrun's legacy export", got.startswith(want),
           "got %r, want it to start with %r" % (got, want))
    opts = dlrun_export_options(legacy_knows_1_1=True)
    ex = dlrun_exported()
    check(dlrun_export(arr, C.byref(opts), C.byref(ex)), "dlrun_export")
    dlrun_array_release(arr)
    dt = ex.legacy.contents.dl_tensor.dtype if ex.legacy else None
    report(name + " forced export is legacy with (%d, %d, 1)" % (code, bits),
           dt is not None and (dt.code, dt.bits, dt.lanes) == (code, bits, 1))
    raised = None
    prod = Producer(ex.legacy)
    try:
        from_dlpack(prod)
    except Exception as e:  # noqa: BLE001 - the consumer's own error type
        raised = "%s: %s" % (type(e).__name__, e)  # not e: its traceback holds the capsule
    report(name + " forced export refused by the consumer",
           raised is not None and not raised.startswith("SystemError"),
           "the consumer read it" if raised is None else raised)
    if raised is not None:
        print("#   %s: %s" % (name, raised))
    del prod
    gc.collect()
    expect_equal(name + " deleter ran once", dlrun_live_exports(rt) - base, 0)


# ---------------------------------------------------------------- the float8 family

FLOAT8 = ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
          "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"]


def float8_refused_case(name, rt, sharding, dtname, from_dlpack):
    """A float8 dtype (DLPack 1.1's codes 7-14) to a legacy consumer."""
    arr = from_host(sharding, dtname, np.array([0x38, 0x40, 0x7E], dtype=np.uint8))
    code = 7 + FLOAT8.index(dtname)
    want = ("dlrun_export: BufferError %s has DLPack type code %d (kDLFloat8_%s), which DLPack "
            "1.1 added: the consumer of a legacy DLPack tensor (no max_version) may predate it."
            % (dtname, code, dtname[len("float8_"):]))
    legacy_refusal(name, rt, arr, want, code, 8, from_dlpack)


# ---------------------------------------------------------------- the sub-byte types

# name: (DLPack code, bits, element count, the packed bytes)
SUBBYTE = {
    "int4": (0, 4, 3, [0xE1, 0x03]),
    "uint4": (1, 4, 3, [0xE1, 0x03]),
    "int2": (0, 2, 4, [0xE4]),
    "uint2": (1, 2, 4, [0xE4]),
    "float4_e2m1fn": (17, 4, 3, [0xE1, 0x03]),
    "float6_e2m3fn": (15, 6, 4, [0xDF, 0xF7, 0x7D]),
    "float6_e3m2fn": (16, 6, 4, [0xDF, 0xF7, 0x7D]),
}


def subbyte_refused_case(name, rt, sharding, dtname, from_dlpack):
    """A packed sub-byte dtype (DLPack 1.1's layout) to a legacy consumer,
    which would read one element a byte."""
    code, bits, count, packed = SUBBYTE[dtname]
    data = np.array(packed, dtype=np.uint8)
    dims = (C.c_int64 * 1)(count)
    arr = P()
    check(dlrun_array_from_host(sharding, dlrun_dtype(dtname), 1, dims,
                                data.ctypes.data_as(C.c_void_p), data.nbytes, C.byref(arr)),
          "dlrun_array_from_host")
    code_names = {0: "kDLInt", 1: "kDLUInt", 15: "kDLFloat6_e2m3fn", 16: "kDLFloat6_e3m2fn",
                  17: "kDLFloat4_e2m1fn"}
    want = ("dlrun_export: BufferError %s is a packed sub-byte type (code=%d (%s), bits=%d), "
            "whose layout DLPack 1.1 set: the consumer of a legacy DLPack tensor (no "
            "max_version) may predate it." % (dtname, code, code_names[code], bits))
    legacy_refusal(name, rt, arr, want, code, bits, from_dlpack)
