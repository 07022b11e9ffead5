/* The dtype table and scalar conversions.
 *
 * One table describes every element type: its name, size and DLPack code,
 * bits and lanes. Conversions never wrap silently: a value that does not fit
 * the dtype is a DLRUN_ERR_VALUE with a message naming value and dtype. */
#ifndef DLRUN_DTYPE_H
#define DLRUN_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dlrun_dtype {
  DLRUN_BOOL,
  DLRUN_INT8,
  DLRUN_INT16,
  DLRUN_INT32,
  DLRUN_INT64,
  DLRUN_UINT8,
  DLRUN_UINT16,
  DLRUN_UINT32,
  DLRUN_UINT64,
  DLRUN_FLOAT16,
  DLRUN_BFLOAT16,
  DLRUN_FLOAT32,
  DLRUN_FLOAT64,
  DLRUN_COMPLEX64,
  DLRUN_COMPLEX128,
  /* The float8 family (ml_dtypes' names, DLPack 1.1's codes 7 to 14, in
   * code order). Each has its own rules for NaN, infinity and zero: see
   * dlrun_dtype_store and docs/lua-api.md. */
  DLRUN_FLOAT8_E3M4,
  DLRUN_FLOAT8_E4M3,
  DLRUN_FLOAT8_E4M3B11FNUZ,
  DLRUN_FLOAT8_E4M3FN,
  DLRUN_FLOAT8_E4M3FNUZ,
  DLRUN_FLOAT8_E5M2,
  DLRUN_FLOAT8_E5M2FNUZ,
  DLRUN_FLOAT8_E8M0FNU,
  /* Sub-byte types (ml_dtypes' names), stored packed as DLPack 1.1 sets:
   * element i is bits i*b .. i*b+b-1 of the run (dlrun_dtype_store_at). The
   * integers store exactly; the MX floats (DLPack codes 15 to 17) have no
   * infinity and no NaN and saturate (see dlrun_dtype_store). */
  DLRUN_INT4,
  DLRUN_UINT4,
  DLRUN_INT2,
  DLRUN_UINT2,
  DLRUN_FLOAT4_E2M1FN,
  DLRUN_FLOAT6_E2M3FN,
  DLRUN_FLOAT6_E3M2FN,
  DLRUN_DTYPE_COUNT
} dlrun_dtype;

typedef enum dlrun_dtype_kind {
  DLRUN_KIND_BOOL,
  DLRUN_KIND_INT,     /* signed integer */
  DLRUN_KIND_UINT,    /* unsigned integer */
  DLRUN_KIND_FLOAT,   /* float16, bfloat16, float32, float64, the float8 family */
  DLRUN_KIND_COMPLEX  /* complex64, complex128: two floats, real first */
} dlrun_dtype_kind;

typedef struct dlrun_dtype_info {
  const char *name;     /* "float32" */
  size_t size;          /* bytes per element (1 for the packed sub-byte types, as
                         * NumPy's itemsize; their bytes: dlrun_dtype_nbytes) */
  dlrun_dtype_kind kind;
  uint8_t dl_code;      /* DLDataTypeCode: Int 0, UInt 1, Float 2, Bfloat 4, Complex 5, Bool 6,
                         * float8 7 (e3m4) to 14 (e8m0fnu), float6 15 (e2m3fn) and
                         * 16 (e3m2fn), float4 17 (e2m1fn) */
  uint8_t dl_bits;      /* below 8: a packed sub-byte type */
  uint16_t dl_lanes;
} dlrun_dtype_info;

/* The table row of `dtype`, or NULL when it is not a dtype. Static storage. */
DLRUN_API const dlrun_dtype_info *dlrun_dtype_get(dlrun_dtype dtype);

/* Look up a dtype by name ("float32"). DLRUN_ERR_VALUE naming the bad name and
 * listing the valid ones when unknown. */
DLRUN_API dlrun_status dlrun_dtype_from_name(const char *name, dlrun_dtype *out);

/* Look up a dtype by its DLPack triple. DLRUN_ERR_BUFFER when unsupported. */
DLRUN_API dlrun_status dlrun_dtype_from_dlpack(uint8_t code, uint8_t bits,
                                               uint16_t lanes, dlrun_dtype *out);

/* A scalar read from or written to one element. */
typedef enum dlrun_scalar_kind {
  DLRUN_SCALAR_BOOL,
  DLRUN_SCALAR_INT,    /* value in i */
  DLRUN_SCALAR_FLOAT,  /* value in re */
  DLRUN_SCALAR_COMPLEX /* value in re, im */
} dlrun_scalar_kind;

typedef struct dlrun_scalar {
  dlrun_scalar_kind kind;
  bool b;
  int64_t i;
  double re, im;
} dlrun_scalar;

/* Store one scalar into `dst` (dtype's size bytes, any alignment).
 * Rules: integers and bools convert exactly or fail; a float into an integer
 * dtype must be finite, integral and in range; a float into float16/bfloat16
 * rounds to nearest even (overflow gives +-inf, as IEEE); a float or an
 * integer into a float8 dtype rounds once to nearest even as ml_dtypes
 * does: a result past the largest finite value, an infinity or a NaN gives
 * the format's infinity where it has one, else its NaN (e4m3fn: S.1111.111;
 * the fnuz formats: 0x80; e8m0fnu: 0xFF); -0 and negative values that
 * round to zero give 0x00 in the fnuz formats (no negative zero); e8m0fnu
 * (unsigned powers of two 2^-127..2^127) gives NaN for zero and for
 * negative values, 2^-127 for every positive value at or below it; bool dtype accepts
 * bools and the integers 0 and 1; a complex scalar fits only complex dtypes;
 * a real scalar into a complex dtype gets imaginary part 0.
 * A sub-byte dtype (dl_bits below 8) takes its one element unpacked, as
 * ml_dtypes holds it: the pattern in the low bits of dst's one byte, the
 * rest zero (int4 -2: 0x0E); the integers store exactly, the MX floats
 * round once to nearest even and saturate: a value past the largest, or an
 * infinity, gives the largest with its sign, a NaN zero with its sign bit
 * flipped, as ml_dtypes converts. Packed runs: dlrun_dtype_store_at.
 * On failure `dst` is unchanged and the message names the value and dtype. */
DLRUN_API dlrun_status dlrun_dtype_store(dlrun_dtype dtype, void *dst,
                                         const dlrun_scalar *value);

/* Read one element. bool -> BOOL; int8..int64 and uint8..uint32 -> INT;
 * uint64 -> INT when <= INT64_MAX else FLOAT; floats -> FLOAT (as double,
 * exactly; a float8 NaN reads as a NaN with the pattern's sign bit);
 * complex -> COMPLEX. */
DLRUN_API void dlrun_dtype_load(dlrun_dtype dtype, const void *src, dlrun_scalar *out);

/* IEEE half and bfloat16 bit patterns, round to nearest even from double. */
DLRUN_API uint16_t dlrun_float16_from_double(double v);
DLRUN_API double dlrun_float16_to_double(uint16_t bits);
DLRUN_API uint16_t dlrun_bfloat16_from_double(double v);
DLRUN_API double dlrun_bfloat16_to_double(uint16_t bits);

/* ---- elements by index (packed sub-byte dtypes included) ----------------
 * A run of elements is row-major from `base`. For a dtype of whole bytes,
 * element i is the `size` bytes at base + i * size. A packed dtype (dl_bits
 * below 8) keeps element i in bits i*b .. i*b+b-1 of the run, from bit 0 of
 * byte 0 upward (DLPack 1.1's packed layout); its elements are reached only
 * through these functions. The caller owns `base`; nothing is allocated. */

/* Store `value` as element `index` (>= 0) of the run at `base`, with the
 * rules of dlrun_dtype_store; of a packed run only that element's bits are
 * written. On failure the run is unchanged. */
DLRUN_API dlrun_status dlrun_dtype_store_at(dlrun_dtype dtype, void *base, int64_t index,
                                            const dlrun_scalar *value);

/* Read element `index` (>= 0) of the run at `base`, as dlrun_dtype_load.
 * Misuse (invalid dtype, NULL base, negative index) reads a zeroed scalar. */
DLRUN_API void dlrun_dtype_load_at(dlrun_dtype dtype, const void *base, int64_t index,
                                   dlrun_scalar *out);

/* The bytes `count` (>= 0) elements of `dtype` take: count * size, or for a
 * packed dtype ceil(count * bits / 8). DLRUN_ERR_VALUE when that overflows
 * int64 or the dtype is invalid. */
DLRUN_API dlrun_status dlrun_dtype_nbytes(dlrun_dtype dtype, int64_t count, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
