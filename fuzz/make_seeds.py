#!/usr/bin/python3
"""Writes the seed corpora fuzz/corpus/<target>/ and the hand-made
regression inputs fuzz/regressions/<target>/ (inputs the fuzzers found are
saved there by hand and left alone).

Each encoder below mirrors how its target reads the input bytes (see the
read_* functions of fuzz/fuzz_<target>.c); change both together. Run from
the repository root:  /usr/bin/python3 fuzz/make_seeds.py
The outputs are committed; rerunning rewrites the same files."""

import os
import struct
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))


def u8(v):
    return bytes([v & 0xFF])


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def write(kind, target, name, data):
    d = os.path.join(ROOT, kind, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fault_part(fault):
    """fuzz_fault_read: None, or (kind, k): the k-th (1..24) "host" or
    "pool" allocation fails."""
    if fault is None:
        return u8(0)
    kind, k = fault
    return u8(0xF0 | (1 if kind == "pool" else 0)) + u8(k - 1)


# ---- dlpack_import ---------------------------------------------------------

# Index of each (code, bits) in dtype_choices of fuzz_dlpack_import.c.
DL_DTYPES = {
    "bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint8": 5, "uint16": 6,
    "uint32": 7, "uint64": 8, "float16": 9, "bfloat16": 10, "float32": 11, "float64": 12,
    "complex64": 13, "complex128": 14, "float8": 15, "bool16": 16,
    "float8_e3m4_16": 23, "float4_e2m1fn_8": 33, "float4_e2m1fn": 36, "code18": 37,
}
# Index into the device type table: kDLCPU, kDLExtDev, kDLCUDAHost,
# kDLROCMHost, kDLCUDA, kDLCUDAManaged, oneAPI, 0, then kDLOpenCL, kDLVulkan,
# kDLMetal, kDLVPI, kDLROCM, kDLWebGPU, kDLHexagon, kDLMAIA, kDLTrn, 19, 99, 5.
DEV = {"cpu": 0, "sim": 1, "cuda_host": 2, "rocm_host": 3, "cuda": 4, "managed": 5,
       "oneapi": 6, "zero": 7, "opencl": 8, "vulkan": 9, "maia": 15, "trn": 16, "type19": 17,
       "type99": 18}
TARGETS = {None: 0, "sim0": 1, "sim1": 2, "cpu": 3, "sim0_pinned": 4, "cpu_pinned": 5,
           "two_devices": 6, "other_runtime": 7}


def dl_dim(v):
    if 0 <= v <= 6:
        return u8(v)
    if 7 <= v <= 22:
        return u8(0xE0 + v - 7)
    if -8 <= v <= -1:
        return u8(0xF0 - v - 1)
    return u8(0xF8) + u64(v)


def dl_stride(v):
    if -8 <= v <= 16:
        return u8(v + 8)
    return u8(0xF0) + u64(v)


def dlpack(mode="legacy", null_deleter=False, null_shape=False, null_data=False,
           null_options=False, major=1, minor=0, flags=0, ndim=None, device="cpu",
           device_id=0, dtype="float32", raw_dtype=None, byte_offset=0, misalign=0,
           dims=(), strides=None, perm=None, pad=None, negate=None, copy=-1, target=None,
           fault=None, data=b""):
    if ndim is None:
        ndim = len(dims)
    f = {"legacy": 0, "versioned": 1, "both": 2, "neither": 3}[mode]
    if null_deleter:
        f |= 7 << 2
    if null_shape:
        f |= 3 << 5
    out = u8(f)
    out += u8((0x0F if null_data else 0) | (0xF0 if null_options else 0))
    if major == 1:
        out += u8(0)
    elif 0 <= major <= 30:
        out += u8(0xE0 + major)
    else:
        out += u8(0xFF) + u32(major)
    out += u8(minor) + u8(flags)
    if 0 <= ndim <= 7:
        out += u8(ndim)
    elif 8 <= ndim <= 39:
        out += u8(0xC0 + ndim - 8)
    elif -16 <= ndim <= -1:
        out += u8(0xE0 - ndim - 1)
    else:
        out += u8(0xF0) + u32(ndim)
    out += u8(DEV[device]) if isinstance(device, str) else u8(0xF0) + u32(device)
    out += u8(device_id) if 0 <= device_id <= 2 else u8(0xF0) + u32(device_id)
    if raw_dtype:
        code, bits, lanes = raw_dtype
        out += u8(0xF0) + u8(code) + u8(bits) + u16(lanes)
    else:
        out += u8(DL_DTYPES[dtype])
    if byte_offset < 64:
        out += u8(byte_offset)
    elif byte_offset < 0x10000:
        out += u8(0xC0) + u16(byte_offset)
    else:
        out += u8(0xF0) + u64(byte_offset)
    out += u8(misalign)
    for d in dims:
        out += dl_dim(d)
    n = max(0, min(ndim, 64))
    if strides is not None:  # arbitrary strides
        out += u8(3)
        for s in strides:
            out += dl_stride(s)
    elif perm is not None:  # row-major over a permutation, by Fisher-Yates bytes
        out += u8(2)
        for b in perm:
            out += u8(b)
    elif pad is not None:  # padded row-major (a strided slice), maybe negated
        out += u8(4)
        for p in pad:
            out += u8(p)
        out += u8(1 if negate is not None else 0)
        if negate is not None:
            out += u8(negate)
    else:
        out += u8(0)  # no strides: row-major
    out += u8(copy + 1) + u8(TARGETS[target]) + fault_part(fault)
    return out + data


def dlpack_seeds():
    S = lambda name, **kw: write("corpus", "dlpack_import", name, dlpack(**kw))
    pattern = bytes(range(1, 97))
    S("legacy_f32_2x3_cpu_wrap", dims=(2, 3), data=pattern)
    S("versioned_i64_4_sim1_copy0", mode="versioned", device="sim", device_id=1,
      dtype="int64", dims=(4,), copy=0, data=pattern)
    S("versioned_f64_3x4_colmajor", mode="versioned", dtype="float64", dims=(3, 4),
      perm=(1,), data=pattern)
    S("legacy_i16_5_negative_stride", dtype="int16", dims=(5,), pad=(0,), negate=0,
      data=pattern)
    S("legacy_u8_4x3_padded_slice", dtype="uint8", dims=(4, 3), pad=(2, 1), data=pattern)
    S("legacy_f32_3x3_broadcast_zero_stride", dims=(3, 3), strides=(0, 1), data=pattern)
    # byte_offset moves the data pointer back, not the first element: the
    # first element is misaligned by `misalign` bytes.
    S("legacy_i32_offset_5", dtype="int32", dims=(3,), byte_offset=5, data=pattern)
    S("legacy_i32_misaligned_copy", dtype="int32", dims=(3,), misalign=1, data=pattern)
    S("legacy_i32_misaligned_copy0_error", dtype="int32", dims=(3,), misalign=2, copy=0,
      data=pattern)
    S("legacy_colmajor_copy0_wrap", dims=(2, 3), perm=(0,), copy=0, data=pattern)
    S("legacy_padded_copy0_error", dims=(2, 3), pad=(1, 0), copy=0, data=pattern)
    S("legacy_c128_2x2_misalign", dtype="complex128", dims=(2, 2), misalign=8, data=pattern)
    S("versioned_bool_6_cpu_to_sim0", mode="versioned", dtype="bool", dims=(6,),
      target="sim0", data=pattern)
    S("versioned_bf16_2x2_sim0_pinned", mode="versioned", dtype="bfloat16", dims=(2, 2),
      target="sim0_pinned", data=pattern)
    S("legacy_f16_3_cuda_host_copy1", device="cuda_host", dtype="float16", dims=(3,), copy=1,
      data=pattern)
    S("legacy_sim_to_cpu_copy0_error", device="sim", dims=(2,), target="cpu", copy=0,
      data=pattern)
    S("legacy_two_device_target_error", dims=(2,), target="two_devices", data=pattern)
    S("legacy_other_runtime_target_error", dims=(2,), target="other_runtime", data=pattern)
    S("legacy_cpu_pinned_target", dims=(2, 2), target="cpu_pinned", data=pattern)
    S("versioned_major2_unknown", mode="versioned", major=2, dims=(2,), data=pattern)
    S("versioned_major0_unknown_null_deleter", mode="versioned", major=0, null_deleter=True,
      dims=(2,), data=pattern)
    S("legacy_zero_size_null_data", dims=(0, 3), null_data=True)
    S("legacy_scalar_u64", dtype="uint64", dims=(), data=pattern)
    S("legacy_ndim_negative", ndim=-1)
    S("legacy_ndim_33", ndim=33, dims=(1,) * 33)
    S("legacy_ndim_huge", ndim=0x7FFFFFFF)
    S("legacy_null_shape", null_shape=True, ndim=2)
    S("legacy_negative_dim", dims=(2, -3))
    S("legacy_lanes4_error", raw_dtype=(2, 32, 4), dims=(2,), data=pattern)
    S("legacy_bool16_error", dtype="bool16", dims=(2,), data=pattern)
    S("legacy_cuda_device_error", device="cuda", dims=(2,), data=pattern)
    # DLPack 1.1 and 1.2 codes: refused, named in the message
    S("legacy_trn_device_error", device="trn", dims=(2,), data=pattern)
    S("versioned_maia_device_error", mode="versioned", minor=2, device="maia", dims=(2,),
      data=pattern)
    S("legacy_device_type_19_error", device="type19", dims=(2,), data=pattern)
    S("legacy_float4_bits8_error", dtype="float4_e2m1fn_8", dims=(2,), data=pattern)
    S("versioned_float4_error", mode="versioned", minor=1, dtype="float4_e2m1fn", dims=(2,),
      data=pattern)
    S("legacy_float8_e3m4_bits16_error", dtype="float8_e3m4_16", dims=(2,), data=pattern)
    S("legacy_code18_error", dtype="code18", dims=(2,), data=pattern)
    # DLPack 1.2 forbids NULL strides for ndim > 0; dlrun still reads them as row-major
    S("versioned_minor2_null_strides_wrap", mode="versioned", minor=2, dims=(2, 3),
      data=pattern)
    S("versioned_minor3_null_strides_copy1", mode="versioned", minor=3, dims=(3, 2), copy=1,
      data=pattern)
    S("legacy_sim_id2_error", device="sim", device_id=2, dims=(2,), data=pattern)
    S("legacy_null_data_error", null_data=True, dims=(2,))
    S("legacy_byte_offset_overflow", dims=(2,), byte_offset=0xFFFFFFFFFFFFFFF0, data=pattern)
    S("legacy_stride_overflow", dims=(2, 2), strides=(2**62, 1), data=pattern)
    S("legacy_nbytes_overflow", dims=(2**62, 4), data=pattern)
    S("both_pointers_error", mode="both", dims=(2,), data=pattern)
    S("neither_pointer_error", mode="neither", dims=(2,), data=pattern)
    S("legacy_null_deleter_wrap", null_deleter=True, dims=(2, 2), data=pattern)
    S("legacy_null_options", null_options=True, dims=(3,), data=pattern)
    S("versioned_readonly_flag", mode="versioned", flags=1, dims=(2,), data=pattern)
    S("legacy_4d_permuted", dtype="int8", dims=(2, 3, 1, 2), perm=(1, 0, 2), data=pattern)
    S("fail_host_alloc_1_wrap", dims=(2, 2), fault=("host", 1), data=pattern)
    S("fail_host_alloc_3_copy", dims=(2, 2), copy=1, fault=("host", 3), data=pattern)
    S("fail_pool_alloc_1_copy_to_sim", dims=(4,), target="sim0", fault=("pool", 1),
      data=pattern)

    # Zero-size tensor whose other dimensions multiply past int64: row-major
    # strides overflow (signed overflow in dlrun_row_major_strides).
    write("regressions", "dlpack_import", "zero_size_row_major_strides_overflow",
          dlpack(dims=(0, 2**40, 2**40), null_data=True))


# ---- device_spec -----------------------------------------------------------

def device_spec_seeds():
    specs = {
        "sim8": "sim:8", "cpu4": "cpu:4", "sim8_cpu2": "sim:8,cpu:2", "auto": "auto",
        "spaces": " sim : 2 , cpu : 1 ", "sim2_64MiB": "sim:2|64MiB", "cpu1_1.5GiB": "cpu:1|1.5GiB",
        "sim4_1024": "sim:4|1024", "sim3_cpu2_2GB": "sim:3,cpu:2|2GB", "sim1_255_too_small":
        "sim:1|255", "sim1_256": "sim:1|256", "sim0": "sim:0", "sim65537": "sim:65537",
        "sim65536": "sim:65536", "gpu": "gpu:2", "sim_twice": "sim:2,sim:2",
        "auto_not_alone": "auto,sim:1", "empty": "", "comma": ",", "no_count": "sim:",
        "negative": "sim:-1", "trailing": "sim:1x", "sim16_memory": "sim:16|1MiB",
        "hex_size": "sim:1|0x10", "exp_size": "sim:1|1e3KiB", "negative_size": "sim:1|-5",
        "nan_size": "sim:1|nan", "inf_size": "sim:1|inf", "huge_size": "sim:1|1e400",
        "size_64KiB": "64KiB", "size_1TB": "1 TB", "size_spaces": "sim:1| 64 KB ",
        "size_T": "sim:1|2T", "long_count": "sim:0000000000000000000000000000001",
        "cpu_first": "cpu:1,sim:2|4MiB", "sim17": "sim:17",
        "too_many_devices": "sim:65536,cpu:1", "size_too_large": "sim:1|20000000TiB",
    }
    for name, text in specs.items():
        write("corpus", "device_spec", name, text.encode())


# ---- mesh_spec -------------------------------------------------------------

POOL = ["x", "y", "z", "data", "model", "x ", "X", ""]


def m_name(name):
    """A name as read_name reads it (pool entry, NULL, raw bytes, long run)."""
    if name is None:
        return u8(0xE0)
    if isinstance(name, tuple):  # ("long", char, length)
        _, ch, n = name
        return u8(0xF0) + u8(0xF0 + (ord(ch) - ord("a")) % 16) + u16(n)
    if name in POOL:
        return u8(POOL.index(name))
    raw = name.encode()
    assert len(raw) <= 8
    return u8(0xF0) + u8(len(raw)) + raw


def mesh_part(naxes, sizes=None, total=None, splits=None, names=None, ndevices=None,
              shuffle=None, corrupt=None):
    """Mesh bytes. Either total (a factorisation chosen by `splits` bytes) or
    explicit sizes; names None = the defaults x, y, z, data, model."""
    out = u8(naxes) if 0 <= naxes <= 4 else u8(0xF0) + u8(naxes)
    n = max(0, min(naxes, 64))
    if total is not None:
        out += u8([1, 2, 4, 8, 16, 6, 12].index(total))
        for b in (splits or [0] * (naxes - 1)):
            out += u8(b)
    else:
        out += u8(0xC0)
        for s in sizes:
            out += u8(s) if 0 <= s <= 16 else u8(0xF0) + u64(s)
    for a in range(n):
        if names is None or names[a] == "default":
            out += u8(0)
        else:
            out += u8(0xA0) + m_name(names[a])
    # The device count: the product of the sizes, or a byte >= 0xE0 whose
    # value mod 17 is the count.
    out += u8(0) if ndevices is None else u8(0xE0 + (ndevices - 0xE0) % 17)
    if shuffle is None:
        out += u8(0)
    else:
        out += u8(1) + bytes(shuffle)
    if corrupt is None:
        out += u8(0)
    else:
        how, i, j = corrupt  # how: 0 NULL, 1 other runtime, 2 duplicate of j
        out += u8(0xF0 | how) + u8(i) + (u8(j) if how >= 2 else b"")
    return out


def spec_part(entries, mesh_names, nentries=None):
    """entries: list of lists of axis names (mesh axis by name when in
    mesh_names, else read_name); None entry = no axes."""
    n = len(entries) if nentries is None else nentries
    out = u8(n) if 0 <= n <= 4 else u8(0xF0) + u8(n)
    for e in entries:
        e = e or []
        naxes = len(e) if not isinstance(e, int) else e
        out += u8(naxes) if 0 <= naxes <= 2 else u8(0xF0) + u8(naxes)
        if isinstance(e, int):  # a count only: the axes read are mesh axis 0
            out += bytes(max(0, min(e, 16)))
            continue
        for name in e:
            if name in mesh_names:
                out += u8(mesh_names.index(name))
            else:
                out += u8(0xC0) + m_name(name)
    return out


def shape_part(shapes, nentries):
    out = u8(len(shapes) - 1)
    for dims in shapes:
        nd = len(dims)
        delta = nd - nentries + 1
        if 0 <= delta <= 3:
            out += u8(delta)
        else:
            out += u8(0xF0) + u8(nd)
        for d in dims:
            if 0 <= d <= 32:
                out += u8(d)
            else:
                out += u8(0xF0) + u64(d)
            out += u8(0xC0)  # keep the dimension as written
    return out


def mesh_case(mesh, mesh_names, entries, shapes, kind=0, describe=199, second=None,
              nentries=None, fault=None):
    out = mesh + fault_part(fault) + spec_part(entries, mesh_names, nentries)
    out += u8(kind) if kind in (0, 1) else u8(0xF0) + u8(kind)
    out += u8(describe)
    out += shape_part(shapes, len(entries) if nentries is None else nentries)
    if second is not None:
        out += second
    return out


def mesh_spec_seeds():
    S = lambda name, data: write("corpus", "mesh_spec", name, data)
    xy = ["x", "y"]
    m42 = mesh_part(2, total=8, splits=[2])  # sizes (4, 2): 2 + 2 % 3 = 4
    S("mesh4x2_P_x_y_8x2", mesh_case(m42, xy, [["x"], ["y"]], [(8, 2), (8, 4, 3)]))
    S("mesh4x2_fail_alloc_2", mesh_case(m42, xy, [["x"]], [(8,)], fault=("host", 2)))
    S("mesh4x2_fail_alloc_6", mesh_case(m42, xy, [["x"]], [(8,)], fault=("host", 6)))
    S("mesh4x2_P_y", mesh_case(m42, xy, [["y"]], [(6,), (2, 5)]))
    S("mesh4x2_P_xy_multi", mesh_case(m42, xy, [["x", "y"]], [(16,), (8,), (0,)]))
    S("mesh4x2_P_None_y", mesh_case(m42, xy, [None, ["y"]], [(3, 4)]))
    S("mesh4x2_replicated", mesh_case(m42, xy, [], [(), (5, 5)]))
    S("mesh4x2_pinned", mesh_case(m42, xy, [["x"]], [(4,)], kind=1))
    S("mesh4x2_bad_kind", mesh_case(m42, xy, [["x"]], [(4,)], kind=5))
    m16 = mesh_part(1, total=16)
    S("mesh16_P_x", mesh_case(m16, ["x"], [["x"]], [(32,), (16, 3), (0, 7)]))
    m224 = mesh_part(3, total=16, splits=[0, 0])  # (2, 2, 4)
    xyz = ["x", "y", "z"]
    S("mesh2x2x4_P_zx_y", mesh_case(m224, xyz, [["z", "x"], ["y"]], [(8, 2, 1), (16, 4)]))
    S("mesh2x2x4_shuffled", mesh_case(mesh_part(3, total=16, splits=[0, 0],
                                                shuffle=list(range(15, 0, -1))),
                                      xyz, [["y"], None, ["z"]], [(2, 1, 4)]))
    m1 = mesh_part(0, sizes=[])
    S("mesh_one_device_no_axes", mesh_case(m1, [], [], [(), (3,)]))
    S("unknown_axis", mesh_case(m42, xy, [["w"]], [(4,)]))
    S("null_axis", mesh_case(m42, xy, [[None]], [(4,)]))
    S("duplicate_axis", mesh_case(m42, xy, [["x"], ["x"]], [(4, 4)]))
    S("duplicate_in_entry", mesh_case(m42, xy, [["y", "y"]], [(4,)]))
    S("indivisible_shape", mesh_case(m42, xy, [["x"]], [(6,), (4,)]))
    S("rank_too_small", mesh_case(m42, xy, [["x"], ["y"]], [(8,)]))
    S("spec_33_entries", mesh_case(m42, xy, [], [(4,)], nentries=33))
    S("entry_17_axes", mesh_case(m42, xy, [17], [(4,)]))
    S("mesh_product_mismatch", mesh_part(2, sizes=[3, 2], ndevices=5))
    S("mesh_zero_size", mesh_part(1, sizes=[0], ndevices=1))
    S("mesh_empty_name", mesh_part(2, total=4, splits=[0], names=["default", ""]))
    S("mesh_duplicate_names", mesh_part(2, total=4, splits=[0], names=["default", "x"]))
    S("mesh_null_name", mesh_part(1, total=2, names=[None]))
    S("mesh_duplicate_device", mesh_part(1, total=4, corrupt=(2, 3, 0)))
    S("mesh_null_device", mesh_part(1, total=4, corrupt=(0, 1, 0)))
    S("mesh_other_runtime_device", mesh_part(1, total=4, corrupt=(1, 2, 0)))
    S("mesh_17_axes", mesh_part(17, sizes=[1] * 17))
    S("mesh_negative_axes", mesh_part(-1, sizes=[]))
    S("mesh_huge_size", mesh_part(2, sizes=[2**62, 4], ndevices=4))
    # A second sharding of the same devices in another mesh shape.
    second = u8(1 | (1 << 1) | 0x20) + u8(0) + bytes(range(7, 0, -1))  # 2 axes, shuffled
    second += spec_part([["y"], ["x"]], ["x", "y"]) + u8(0) + shape_part([(4, 4)], 2)
    S("equivalence_reshaped", mesh_case(m42, xy, [["x"], ["y"]], [(8, 2)], second=second))
    second = u8(0) + spec_part([["x", "y"]], xy) + u8(0) + shape_part([(8,)], 1)
    S("equivalence_same_mesh", mesh_case(m42, xy, [["x", "y"]], [(8,)], second=second))

    R = lambda name, data: write("regressions", "mesh_spec", name, data)
    # Found by the fuzzer: describing P('x', None) into 18 bytes. After
    # "PartitionSpec('x'" (17 characters) the ", " separator takes the
    # count past the buffer, and "None" is then written with size n - used
    # wrapped around (heap-buffer-overflow in dlrun_partition_spec_describe).
    R("partition_spec_describe_small_buffer",
      mesh_case(m42, xy, [["x"], None], [(8, 1)], describe=17))
    # Found by the fuzzer: check_shape of a rank-33 shape whose first
    # dimension does not divide: the message's factors[DLRUN_MAX_NDIM] was
    # filled for all 33 dimensions (stack-buffer-overflow). Fixed: ranks
    # above DLRUN_MAX_NDIM are now a ValueError.
    R("check_shape_rank_above_max", mesh_case(m42, xy, [["x"]], [(3,) + (1,) * 32]))
    # A 495-character axis name makes "PartitionSpec('aaa…'" exactly 511
    # characters, so describing P(name, None) overruns dlrun's 512-byte
    # buffer: here in the message of the indivisible shape (8 % 2 != 0 is
    # false, so use 3).
    long = ("long", "a", 495)
    m_long = mesh_part(1, total=2, names=[long])
    R("long_axis_name_describe_overflow",
      mesh_case(m_long, [], [[long], None], [(3, 1)]))
    # An unknown axis in entry 1, entry 2 claiming 100 axes: the error
    # message describes the whole spec and reads past entries[1].axes.
    R("error_message_reads_unvalidated_entry",
      mesh_case(m42, xy, [["w"], 100], [(4, 4)]))


# ---- frombytes -------------------------------------------------------------

FB_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
FB_LAYOUTS = {"sim0": 0, "sim1": 1, "cpu": 2, "sim0_pinned": 3, "cpu_pinned": 4, "split": 5,
              "replicated": 6}


def fb_dim(d):
    if 0 <= d <= 8:
        return u8(d)
    return u8(0xF0) + u64(d)


def frombytes(dtype="float32", dims=(), layout="sim0", length=None, delta=0, null=False,
              reads=(), data=b"", ndim=None, fault=None):
    out = u8(FB_DTYPES.index(dtype)) if isinstance(dtype, str) else u8(0xF0) + u32(dtype)
    nd = len(dims) if ndim is None else ndim
    if 0 <= nd <= 5:
        out += u8(nd)
    else:
        out += u8(0xF0) + u8(nd)
    for d in dims:
        out += fb_dim(d)
    out += u8(FB_LAYOUTS[layout])
    if length is not None:
        out += u8(0xF0) + u8(0) + u64(length)
    elif delta:
        out += u8(0xD0) + u8(delta)
    else:
        out += u8(0) + u8(0)
    out += u8(0xF8 if null else 0)
    out += u8(len(reads)) + fault_part(fault)
    # Reads use bytes after the data pattern starts: the pattern is the
    # whole rest of the input, reads included.
    for off, ln in reads:
        out += u8(1) + u64(off) + u8(1) + u64(ln)
    return out + data


def frombytes_seeds():
    S = lambda name, **kw: write("corpus", "frombytes", name, frombytes(**kw))
    pat = bytes(range(7, 250, 3))
    S("f32_2x3_sim0", dims=(2, 3), data=pat)
    S("i8_scalar_cpu", dtype="int8", dims=(), layout="cpu", data=pat)
    S("c128_2x2_split", dtype="complex128", dims=(2, 2), layout="split", data=pat)
    S("bool_4_replicated", dtype="bool", dims=(4,), layout="replicated", data=pat)
    S("bf16_8x1_sim0_pinned", dtype="bfloat16", dims=(8, 1), layout="sim0_pinned", data=pat)
    S("f16_3x2x2_cpu_pinned", dtype="float16", dims=(3, 2, 2), layout="cpu_pinned", data=pat)
    S("u64_4x2_split_reads", dtype="uint64", dims=(4, 2), layout="split",
      reads=((8, 16), (0, 64), (60, 8), (2**63, 8)), data=pat)
    S("i32_5_sim1_reads", dtype="int32", dims=(5,), layout="sim1",
      reads=((4, 8), (3, 4), (20, 0)), data=pat)
    S("zero_size_0x5", dims=(0, 5), null=True)
    S("zero_size_split", dims=(0, 3), layout="split")
    S("dtype_15_invalid", dtype=15, dims=(2,), data=pat)
    S("dtype_negative", dtype=-1, dims=(2,), data=pat)
    S("ndim_33", ndim=33, dims=(1,) * 33, data=pat)
    S("ndim_negative", ndim=0xFF, dims=(), data=pat)
    S("negative_dim", dims=(2, 2**64 - 3), data=pat)
    S("overflow_dims", dims=(2**40, 2**40), data=pat)
    S("length_short", dims=(2, 2), delta=-1, data=pat)
    S("length_long", dims=(2, 2), delta=4, data=pat)
    S("length_huge", dims=(2,), length=2**64 - 1, data=pat)
    S("null_data_error", dims=(3,), null=True)
    S("split_odd_error", dims=(3, 2), layout="split", data=pat)
    S("split_scalar_error", dims=(), layout="split", data=pat)
    S("fail_pool_alloc_2_split", dims=(4, 2), layout="split", fault=("pool", 2), data=pat)
    S("fail_host_alloc_1", dims=(3,), fault=("host", 1), data=pat)

    write("regressions", "frombytes", "zero_size_row_major_strides_overflow_2",
          frombytes(dtype="uint8", dims=(0, 2**40, 2**40)))


def main():
    if len(sys.argv) > 1:
        sys.exit("usage: fuzz/make_seeds.py")
    dlpack_seeds()
    device_spec_seeds()
    mesh_spec_seeds()
    frombytes_seeds()


if __name__ == "__main__":
    main()
