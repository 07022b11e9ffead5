/* Internal: sub-byte elements (int4, uint4, int2, uint2, float4_e2m1fn,
 * float6_e2m3fn, float6_e3m2fn) and the packed layout DLPack 1.1 sets for
 * them: element i of a buffer is bits i*b .. i*b+b-1 (b the width), counted
 * from bit 0 of byte 0 upward, so an element may straddle two bytes (b = 6).
 *
 * A row of the dtype table describes a sub-byte type by dl_bits < 8 with its
 * kind (INT, UINT or FLOAT) and DLPack code (Int 0, UInt 1; 15
 * float6_e2m3fn, 16 float6_e3m2fn, 17 float4_e2m1fn). These functions take
 * such a row, so that the table stays the one place that names a type. */
#ifndef DLRUN_SUBBYTE_IMPL_H
#define DLRUN_SUBBYTE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlrun/dtype.h"

/* DLPack 1.1's codes of the MX floats. */
#define DLRUN_DL_CODE_FLOAT6_E2M3FN 15
#define DLRUN_DL_CODE_FLOAT6_E3M2FN 16
#define DLRUN_DL_CODE_FLOAT4_E2M1FN 17

/* Whether `info` is a sub-byte row the functions below know: INT or UINT of
 * 2 or 4 bits, or one of the three MX floats with its own width. */
bool dlrun_subbyte_known(const dlrun_dtype_info *info);

/* The bit pattern (in the low dl_bits bits of *pattern) that `value` stores
 * as, with dlrun_dtype_store's rules for integers (exact or a
 * DLRUN_ERR_VALUE naming value, dtype and range) and ml_dtypes' for the MX
 * floats, which have no infinity and no NaN: one round to nearest even from
 * the exact value; a result past the largest magnitude, and an infinity,
 * give the largest magnitude with the value's sign (float4_e2m1fn: +-6,
 * float6_e2m3fn: +-7.5, float6_e3m2fn: +-28); zero and values that round to
 * zero keep their sign; a NaN gives the pattern of zero with the NaN's sign
 * bit flipped (ml_dtypes' conversion returns -quiet_NaN() = +0 for a
 * negative NaN and quiet_NaN() = -0 for a positive one). A complex value is
 * a DLRUN_ERR_VALUE. On failure *pattern is unchanged. */
dlrun_status dlrun_subbyte_encode(const dlrun_dtype_info *info, const dlrun_scalar *value,
                                  unsigned *pattern);

/* The value of `pattern` (its low dl_bits bits): INT for the integers,
 * FLOAT (exact; -0 for a negative zero) for the MX floats. */
void dlrun_subbyte_decode(const dlrun_dtype_info *info, unsigned pattern, dlrun_scalar *out);

/* Element `index`'s pattern in packed storage at `base` (bits 1 to 8).
 * Reads only the one or two bytes that hold it. */
unsigned dlrun_packed_get(const void *base, unsigned bits, int64_t index);

/* Write the low `bits` bits of `pattern` as element `index`, leaving every
 * other bit of the storage as it was. */
void dlrun_packed_set(void *base, unsigned bits, int64_t index, unsigned pattern);

/* Store `value` as element `index` of packed storage at `base`; on failure
 * (see dlrun_subbyte_encode) the storage is unchanged. */
dlrun_status dlrun_subbyte_store_at(const dlrun_dtype_info *info, void *base, int64_t index,
                                    const dlrun_scalar *value);

/* Read element `index` of packed storage at `base`. */
void dlrun_subbyte_load_at(const dlrun_dtype_info *info, const void *base, int64_t index,
                           dlrun_scalar *out);

/* Bytes of packed storage that `count` elements of `bits` bits take:
 * ceil(count * bits / 8). DLRUN_ERR_VALUE when that overflows int64. */
dlrun_status dlrun_packed_nbytes(unsigned bits, int64_t count, int64_t *out);

/* The greatest common divisor of a and b (non-negative). */
int64_t dlrun_gcd(int64_t a, int64_t b);

/* The smallest run of whole bytes that a fill repeats: `pattern` written
 * 8/gcd(bits, 8) times is bits/gcd(bits, 8) bytes (1 for 2 and 4 bits, 3
 * for 6). Writes them to group[0..*nbytes-1]; group holds 8 bytes. */
void dlrun_packed_group(unsigned bits, unsigned pattern, uint8_t group[8], size_t *nbytes);

/* Fill `count` elements of packed storage at `base` with `pattern` and
 * clear the bits after the last element up to the end of its byte, so that
 * equal arrays have equal bytes. */
void dlrun_packed_fill(void *base, unsigned bits, int64_t count, unsigned pattern);

#endif
