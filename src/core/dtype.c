/* The dtype table and scalar conversions (see include/dlrun/dtype.h).
 *
 * Every fact about a dtype lives in `dtype_table`; the conversions switch on
 * the row's kind and size rather than repeating per-dtype code. Stores build
 * the element in a local buffer and copy it out only on success, so `dst` is
 * untouched on failure and may have any alignment. */
#include "dlrun/dtype.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dlpack_names.h"
#include "dtype_impl.h"
#include "status_impl.h"
#include "subbyte_impl.h"

static const dlrun_dtype_info dtype_table[DLRUN_DTYPE_COUNT] = {
    [DLRUN_BOOL] = {.name = "bool", .size = 1, .kind = DLRUN_KIND_BOOL,
                    .dl_code = 6, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_INT8] = {.name = "int8", .size = 1, .kind = DLRUN_KIND_INT,
                    .dl_code = 0, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_INT16] = {.name = "int16", .size = 2, .kind = DLRUN_KIND_INT,
                     .dl_code = 0, .dl_bits = 16, .dl_lanes = 1},
    [DLRUN_INT32] = {.name = "int32", .size = 4, .kind = DLRUN_KIND_INT,
                     .dl_code = 0, .dl_bits = 32, .dl_lanes = 1},
    [DLRUN_INT64] = {.name = "int64", .size = 8, .kind = DLRUN_KIND_INT,
                     .dl_code = 0, .dl_bits = 64, .dl_lanes = 1},
    [DLRUN_UINT8] = {.name = "uint8", .size = 1, .kind = DLRUN_KIND_UINT,
                     .dl_code = 1, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_UINT16] = {.name = "uint16", .size = 2, .kind = DLRUN_KIND_UINT,
                      .dl_code = 1, .dl_bits = 16, .dl_lanes = 1},
    [DLRUN_UINT32] = {.name = "uint32", .size = 4, .kind = DLRUN_KIND_UINT,
                      .dl_code = 1, .dl_bits = 32, .dl_lanes = 1},
    [DLRUN_UINT64] = {.name = "uint64", .size = 8, .kind = DLRUN_KIND_UINT,
                      .dl_code = 1, .dl_bits = 64, .dl_lanes = 1},
    [DLRUN_FLOAT16] = {.name = "float16", .size = 2, .kind = DLRUN_KIND_FLOAT,
                       .dl_code = 2, .dl_bits = 16, .dl_lanes = 1},
    [DLRUN_BFLOAT16] = {.name = "bfloat16", .size = 2, .kind = DLRUN_KIND_FLOAT,
                        .dl_code = 4, .dl_bits = 16, .dl_lanes = 1},
    [DLRUN_FLOAT32] = {.name = "float32", .size = 4, .kind = DLRUN_KIND_FLOAT,
                       .dl_code = 2, .dl_bits = 32, .dl_lanes = 1},
    [DLRUN_FLOAT64] = {.name = "float64", .size = 8, .kind = DLRUN_KIND_FLOAT,
                       .dl_code = 2, .dl_bits = 64, .dl_lanes = 1},
    [DLRUN_COMPLEX64] = {.name = "complex64", .size = 8, .kind = DLRUN_KIND_COMPLEX,
                         .dl_code = 5, .dl_bits = 64, .dl_lanes = 1},
    [DLRUN_COMPLEX128] = {.name = "complex128", .size = 16, .kind = DLRUN_KIND_COMPLEX,
                          .dl_code = 5, .dl_bits = 128, .dl_lanes = 1},
    [DLRUN_FLOAT8_E3M4] = {.name = "float8_e3m4", .size = 1, .kind = DLRUN_KIND_FLOAT,
                          .dl_code = 7, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E4M3] = {.name = "float8_e4m3", .size = 1, .kind = DLRUN_KIND_FLOAT,
                          .dl_code = 8, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E4M3B11FNUZ] = {.name = "float8_e4m3b11fnuz", .size = 1, .kind = DLRUN_KIND_FLOAT,
                                 .dl_code = 9, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E4M3FN] = {.name = "float8_e4m3fn", .size = 1, .kind = DLRUN_KIND_FLOAT,
                            .dl_code = 10, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E4M3FNUZ] = {.name = "float8_e4m3fnuz", .size = 1, .kind = DLRUN_KIND_FLOAT,
                              .dl_code = 11, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E5M2] = {.name = "float8_e5m2", .size = 1, .kind = DLRUN_KIND_FLOAT,
                          .dl_code = 12, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E5M2FNUZ] = {.name = "float8_e5m2fnuz", .size = 1, .kind = DLRUN_KIND_FLOAT,
                              .dl_code = 13, .dl_bits = 8, .dl_lanes = 1},
    [DLRUN_FLOAT8_E8M0FNU] = {.name = "float8_e8m0fnu", .size = 1, .kind = DLRUN_KIND_FLOAT,
                             .dl_code = 14, .dl_bits = 8, .dl_lanes = 1},
    /* The sub-byte types: packed, dl_bits below 8 (core/subbyte_impl.h). */
    [DLRUN_INT4] = {.name = "int4", .size = 1, .kind = DLRUN_KIND_INT,
                    .dl_code = 0, .dl_bits = 4, .dl_lanes = 1},
    [DLRUN_UINT4] = {.name = "uint4", .size = 1, .kind = DLRUN_KIND_UINT,
                     .dl_code = 1, .dl_bits = 4, .dl_lanes = 1},
    [DLRUN_INT2] = {.name = "int2", .size = 1, .kind = DLRUN_KIND_INT,
                    .dl_code = 0, .dl_bits = 2, .dl_lanes = 1},
    [DLRUN_UINT2] = {.name = "uint2", .size = 1, .kind = DLRUN_KIND_UINT,
                     .dl_code = 1, .dl_bits = 2, .dl_lanes = 1},
    [DLRUN_FLOAT4_E2M1FN] = {.name = "float4_e2m1fn", .size = 1, .kind = DLRUN_KIND_FLOAT,
                             .dl_code = 17, .dl_bits = 4, .dl_lanes = 1},
    [DLRUN_FLOAT6_E2M3FN] = {.name = "float6_e2m3fn", .size = 1, .kind = DLRUN_KIND_FLOAT,
                             .dl_code = 15, .dl_bits = 6, .dl_lanes = 1},
    [DLRUN_FLOAT6_E3M2FN] = {.name = "float6_e3m2fn", .size = 1, .kind = DLRUN_KIND_FLOAT,
                             .dl_code = 16, .dl_bits = 6, .dl_lanes = 1},
};

/* DLPack's code for bool; its bit width is fixed at 8. */
#define DL_CODE_BOOL 6

/* Longest element (complex128) in bytes. */
#define MAX_ELEMENT_SIZE 16

/* Longest dtype name shown verbatim in an error message. */
#define MAX_SHOWN_NAME 64

const dlrun_dtype_info *dlrun_dtype_get(dlrun_dtype dtype) {
  if ((unsigned)dtype >= (unsigned)DLRUN_DTYPE_COUNT) return NULL;
  return &dtype_table[dtype];
}

/* "bool, int8, ..., complex128" into buf. */
static const char *dtype_name_list(char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int d = 0; d < DLRUN_DTYPE_COUNT; d++) {
    int w = snprintf(buf + used, n - used, "%s%s", d ? ", " : "", dtype_table[d].name);
    if (w < 0 || (size_t)w >= n - used) break;
    used += (size_t)w;
  }
  return buf;
}

dlrun_status dlrun_dtype_from_name(const char *name, dlrun_dtype *out) {
  char names[512];
  if (name == NULL)
    return dlrun_fail(DLRUN_ERR_VALUE, "dtype name is missing (expected one of: %s)",
                      dtype_name_list(names, sizeof names));
  for (int d = 0; d < DLRUN_DTYPE_COUNT; d++) {
    if (strcmp(name, dtype_table[d].name) == 0) {
      if (out) *out = (dlrun_dtype)d;
      return DLRUN_OK;
    }
  }
  size_t len = strlen(name);
  return dlrun_fail(DLRUN_ERR_VALUE, "unknown dtype \"%.*s%s\" (expected one of: %s)",
                    MAX_SHOWN_NAME, name, len > MAX_SHOWN_NAME ? "..." : "",
                    dtype_name_list(names, sizeof names));
}

dlrun_status dlrun_dtype_from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes,
                                     dlrun_dtype *out) {
  if (lanes != 1)
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "DLPack dtype with lanes=%u is not supported (only lanes=1)",
                      (unsigned)lanes);
  if (code == DL_CODE_BOOL && bits != 8)
    return dlrun_fail(DLRUN_ERR_BUFFER, "DLPack bool dtype must have 8 bits, got %u",
                      (unsigned)bits);
  for (int d = 0; d < DLRUN_DTYPE_COUNT; d++) {
    const dlrun_dtype_info *info = &dtype_table[d];
    if (info->dl_code == code && info->dl_bits == bits && info->dl_lanes == lanes) {
      if (out) *out = (dlrun_dtype)d;
      return DLRUN_OK;
    }
  }
  char name[DLRUN_DL_CODE_TEXT];
  return dlrun_fail(DLRUN_ERR_BUFFER, "unsupported DLPack dtype (code=%s, bits=%u, lanes=%u)",
                    dlrun_dlpack_type_code_text(code, name, sizeof name), (unsigned)bits,
                    (unsigned)lanes);
}

void dlrun_dtype_dlpack_since(dlrun_dtype dtype, unsigned *major, unsigned *minor) {
  /* DLPack 1.1 brought codes 7 to 17 (float8, float6, float4) and defined
   * elements of fewer than 8 bits (packed). */
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  bool v1_1 = info && (info->dl_code >= 7 || info->dl_bits < 8);
  *major = v1_1 ? 1 : 0;
  *minor = v1_1 ? 1 : 0;
}

/* ---- float16 and bfloat16 ------------------------------------------------ */

/* A 16-bit binary float: sign bit 15, then exponent, then `mant_bits` of
 * fraction. `emin`/`emax` are the unbiased exponents of the smallest and
 * largest normal numbers. */
typedef struct small_float_format {
  int mant_bits;
  int emin, emax;
  uint16_t inf_bits;   /* exponent all ones, fraction 0 */
  uint16_t quiet_bit;  /* top fraction bit: set in a quiet NaN */
} small_float_format;

static const small_float_format float16_format = {
    .mant_bits = 10, .emin = -14, .emax = 15, .inf_bits = 0x7C00, .quiet_bit = 0x0200};
static const small_float_format bfloat16_format = {
    .mant_bits = 7, .emin = -126, .emax = 127, .inf_bits = 0x7F80, .quiet_bit = 0x0040};

#define SIGN_BIT16 0x8000u

/* The exact m * 2^exp (m > 0) in units of 2^(scale - mant_bits), rounded to
 * the nearest, ties to even, in one step: scale is the value's binade *e,
 * or emin below it (subnormals share the smallest normal scale). The caller
 * checks *e against its largest binade, and builds its bits from *scale and
 * the units (a carry past the fraction moves to the next binade). */
static uint64_t round_units(uint64_t m, int exp, int emin, int mant_bits, int *e, int *scale) {
  int p = 63; /* m is in [2^p, 2^(p+1)) */
  while (!(m >> p)) p--;
  *e = p + exp;
  *scale = *e < emin ? emin : *e;
  int s = *scale - mant_bits - exp; /* the low bits of m to drop */
  if (s <= 0) return m << -s;       /* exact: fits in mant_bits + 1 bits */
  if (s > p + 1) return 0;          /* below half the smallest subnormal */
  if (s == p + 1) return m == (UINT64_C(1) << p) ? 0 : 1; /* in [half, 1) of it */
  uint64_t rem = m & ((UINT64_C(1) << s) - 1), half = UINT64_C(1) << (s - 1), q = m >> s;
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

/* A finite double's value as (-1)^*negative * *m * 2^*exp; false for an
 * infinity or NaN (*m then holds the fraction: NaN when not 0). */
static bool double_parts(double v, bool *negative, uint64_t *m, int *exp) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  *negative = (u >> 63) != 0;
  unsigned expfield = (unsigned)(u >> 52) & 0x7FF;
  *m = u & ((UINT64_C(1) << 52) - 1);
  *exp = expfield == 0 ? -1074 : (int)expfield - 1075;
  if (expfield != 0 && expfield != 0x7FF) *m |= UINT64_C(1) << 52;
  return expfield != 0x7FF;
}

/* Round the exact value (-1)^negative * m * 2^exp to the nearest `f` number,
 * ties to even, overflowing to infinity. One rounding step from the exact
 * value, so callers never double-round. */
static uint16_t round_to_small_float(const small_float_format *f, bool negative, uint64_t m,
                                     int exp) {
  uint16_t sign = negative ? SIGN_BIT16 : 0;
  if (m == 0) return sign;
  int e, scale;
  uint64_t q = round_units(m, exp, f->emin, f->mant_bits, &e, &scale);
  if (e > f->emax) return (uint16_t)(sign | f->inf_bits);
  uint32_t bits = ((uint32_t)(scale - f->emin) << f->mant_bits) + (uint32_t)q;
  if (bits > f->inf_bits) bits = f->inf_bits;
  return (uint16_t)(sign | bits);
}

static uint16_t small_float_from_double(const small_float_format *f, double v) {
  bool negative;
  uint64_t m;
  int exp;
  if (double_parts(v, &negative, &m, &exp)) return round_to_small_float(f, negative, m, exp);
  uint16_t sign = negative ? SIGN_BIT16 : 0;
  if (m == 0) return (uint16_t)(sign | f->inf_bits);
  /* NaN: keep the sign and the top payload bits, force quiet. */
  uint16_t payload = (uint16_t)(m >> (52 - f->mant_bits));
  return (uint16_t)(sign | f->inf_bits | f->quiet_bit | payload);
}

static uint16_t small_float_from_int64(const small_float_format *f, int64_t i) {
  uint64_t m = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
  return round_to_small_float(f, i < 0, m, 0);
}

/* Exact: every 16-bit float is a double. NaN payloads are kept. */
static double small_float_to_double(const small_float_format *f, uint16_t bits) {
  bool negative = (bits & SIGN_BIT16) != 0;
  unsigned expfield = (unsigned)(bits & f->inf_bits) >> f->mant_bits;
  unsigned expmax = (unsigned)f->inf_bits >> f->mant_bits;
  unsigned frac = bits & ((1u << f->mant_bits) - 1);
  double v;
  if (expfield == expmax) {
    if (frac == 0) return negative ? -INFINITY : INFINITY;
    uint64_t u = ((uint64_t)negative << 63) | (UINT64_C(0x7FF) << 52) |
                 ((uint64_t)frac << (52 - f->mant_bits));
    memcpy(&v, &u, sizeof v);
    return v;
  }
  if (expfield == 0)
    v = ldexp((double)frac, f->emin - f->mant_bits);
  else
    v = ldexp((double)((1u << f->mant_bits) + frac),
              (int)expfield - 1 + f->emin - f->mant_bits);
  return negative ? -v : v;
}

uint16_t dlrun_float16_from_double(double v) {
  return small_float_from_double(&float16_format, v);
}

double dlrun_float16_to_double(uint16_t bits) {
  return small_float_to_double(&float16_format, bits);
}

uint16_t dlrun_bfloat16_from_double(double v) {
  return small_float_from_double(&bfloat16_format, v);
}

double dlrun_bfloat16_to_double(uint16_t bits) {
  return small_float_to_double(&bfloat16_format, bits);
}

/* ---- the float8 family --------------------------------------------------- */

/* Where a float8 format keeps its special values (ml_dtypes' float8.h). */
typedef enum float8_specials {
  F8_IEEE, /* exponent all ones: infinity (fraction 0) or NaN; -0 exists */
  F8_FN,   /* no infinity; NaN only S.1111...1; -0 exists */
  F8_FNUZ, /* no infinity, no -0: 0x80 is the one NaN */
  F8_E8M0  /* unsigned powers of two, no zero, no infinity; 0xFF is NaN */
} float8_specials;

typedef struct float8_format {
  int mant_bits;
  int bias;
  float8_specials specials;
  uint8_t max_bits; /* the largest finite magnitude */
  uint8_t nan_bits; /* the NaN a conversion gives (sign bit clear) */
  uint8_t inf_bits; /* F8_IEEE only */
} float8_format;

static const float8_format float8_formats[] = {
    [DLRUN_FLOAT8_E3M4 - DLRUN_FLOAT8_E3M4] = {4, 3, F8_IEEE, 0x6F, 0x78, 0x70},
    [DLRUN_FLOAT8_E4M3 - DLRUN_FLOAT8_E3M4] = {3, 7, F8_IEEE, 0x77, 0x7C, 0x78},
    [DLRUN_FLOAT8_E4M3B11FNUZ - DLRUN_FLOAT8_E3M4] = {3, 11, F8_FNUZ, 0x7F, 0x80, 0},
    [DLRUN_FLOAT8_E4M3FN - DLRUN_FLOAT8_E3M4] = {3, 7, F8_FN, 0x7E, 0x7F, 0},
    [DLRUN_FLOAT8_E4M3FNUZ - DLRUN_FLOAT8_E3M4] = {3, 8, F8_FNUZ, 0x7F, 0x80, 0},
    [DLRUN_FLOAT8_E5M2 - DLRUN_FLOAT8_E3M4] = {2, 15, F8_IEEE, 0x7B, 0x7E, 0x7C},
    [DLRUN_FLOAT8_E5M2FNUZ - DLRUN_FLOAT8_E3M4] = {2, 16, F8_FNUZ, 0x7F, 0x80, 0},
    [DLRUN_FLOAT8_E8M0FNU - DLRUN_FLOAT8_E3M4] = {0, 127, F8_E8M0, 0xFE, 0xFF, 0},
};

static const float8_format *float8_format_of(dlrun_dtype dtype) {
  if (dtype < DLRUN_FLOAT8_E3M4 || dtype > DLRUN_FLOAT8_E8M0FNU) return NULL;
  return &float8_formats[dtype - DLRUN_FLOAT8_E3M4];
}

/* NaN (negative: with the sign bit, where the format has one). */
static uint8_t float8_nan(const float8_format *f, bool negative) {
  if (f->specials == F8_IEEE || f->specials == F8_FN)
    return (uint8_t)((negative ? 0x80 : 0) | f->nan_bits);
  return f->nan_bits;
}

/* What an infinity or a finite value past the largest becomes: infinity
 * where the format has one, else NaN (ml_dtypes without saturation). */
static uint8_t float8_overflow(const float8_format *f, bool negative) {
  if (f->specials == F8_IEEE) return (uint8_t)((negative ? 0x80 : 0) | f->inf_bits);
  return float8_nan(f, negative);
}

/* Round the exact value (-1)^negative * m * 2^exp to `f`, ties to even, in
 * one step, as ml_dtypes' conversion from double does bit for bit. Exponent
 * field 0 holds subnormals (for e8m0fnu: 2^-127, which ml_dtypes rounds to
 * as if it were the subnormal 0.5 * 2^-126). One difference: e8m0fnu values
 * in [1.5 * 2^128, 2^129) overflow to NaN here, where ml_dtypes' 8-bit sum
 * wraps around to 0x00. */
static uint8_t float8_round(const float8_format *f, bool negative, uint64_t m, int exp) {
  if (f->specials == F8_E8M0 && (negative || m == 0)) return f->nan_bits;
  uint8_t sign = negative ? 0x80 : 0;
  if (m == 0) return f->specials == F8_FNUZ ? 0 : sign;
  int emin = 1 - f->bias;
  int emax = (f->max_bits >> f->mant_bits) - f->bias;
  int e, scale;
  uint64_t q = round_units(m, exp, emin, f->mant_bits, &e, &scale);
  if (e > emax) return float8_overflow(f, negative);
  uint32_t bits = ((uint32_t)(scale - emin) << f->mant_bits) + (uint32_t)q;
  if (bits > f->max_bits) return float8_overflow(f, negative);
  if (bits == 0 && f->specials == F8_FNUZ) return 0;
  return (uint8_t)(sign | bits);
}

static uint8_t float8_from_double(const float8_format *f, double v) {
  bool negative;
  uint64_t m;
  int exp;
  if (double_parts(v, &negative, &m, &exp)) return float8_round(f, negative, m, exp);
  return m ? float8_nan(f, negative) : float8_overflow(f, negative);
}

static uint8_t float8_from_int64(const float8_format *f, int64_t i) {
  uint64_t m = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
  return float8_round(f, i < 0, m, 0);
}

/* Exact: every float8 value is a double. */
static double float8_to_double(const float8_format *f, uint8_t bits) {
  if (f->specials == F8_E8M0) return bits == 0xFF ? NAN : ldexp(1.0, (int)bits - f->bias);
  bool negative = (bits & 0x80) != 0;
  unsigned mag = bits & 0x7Fu;
  bool nan = f->specials == F8_FNUZ ? bits == 0x80
             : f->specials == F8_FN ? mag == 0x7F
                                    : mag > f->inf_bits;
  if (nan) return negative ? -NAN : NAN;
  if (f->specials == F8_IEEE && mag == f->inf_bits) return negative ? -INFINITY : INFINITY;
  unsigned expfield = mag >> f->mant_bits;
  unsigned frac = mag & ((1u << f->mant_bits) - 1);
  double v = expfield == 0
                 ? ldexp((double)frac, 1 - f->bias - f->mant_bits)
                 : ldexp((double)((1u << f->mant_bits) + frac),
                         (int)expfield - f->bias - f->mant_bits);
  return negative ? -v : v;
}

/* ---- store and load ------------------------------------------------------ */

/* A double as messages show it: %.17g, with nan (any sign), inf and -inf. */
static const char *format_double(double v, char *buf, size_t n) {
  if (isnan(v))
    snprintf(buf, n, "nan");
  else if (isinf(v))
    snprintf(buf, n, "%s", v < 0 ? "-inf" : "inf");
  else
    snprintf(buf, n, "%.17g", v);
  return buf;
}

/* The scalar as messages show it: true, 300, 1.5, (1+2j). */
static const char *format_scalar(const dlrun_scalar *s, char *buf, size_t n) {
  char re[32], im[32];
  switch (s->kind) {
  case DLRUN_SCALAR_BOOL: snprintf(buf, n, "%s", s->b ? "true" : "false"); break;
  case DLRUN_SCALAR_INT: snprintf(buf, n, "%" PRId64, s->i); break;
  case DLRUN_SCALAR_FLOAT: format_double(s->re, buf, n); break;
  case DLRUN_SCALAR_COMPLEX:
    format_double(s->re, re, sizeof re);
    format_double(s->im, im, sizeof im);
    snprintf(buf, n, "(%s%s%sj)", re, im[0] == '-' ? "" : "+", im);
    break;
  }
  return buf;
}

/* Write the low `size` bytes' worth of `v` as a native integer of that size. */
static void put_uint(unsigned char *buf, size_t size, uint64_t v) {
  uint8_t v8 = (uint8_t)v;
  uint16_t v16 = (uint16_t)v;
  uint32_t v32 = (uint32_t)v;
  switch (size) {
  case 1: memcpy(buf, &v8, 1); break;
  case 2: memcpy(buf, &v16, 2); break;
  case 4: memcpy(buf, &v32, 4); break;
  default: memcpy(buf, &v, 8); break;
  }
}

/* An integer dtype's element from a real scalar, checked exactly. */
static dlrun_status store_integer(const dlrun_dtype_info *info, unsigned char *buf,
                                  const dlrun_scalar *value) {
  unsigned bits = (unsigned)info->size * 8;
  bool is_signed = info->kind == DLRUN_KIND_INT;
  int64_t smin = is_signed ? -(int64_t)(UINT64_MAX >> (65 - bits)) - 1 : 0;
  uint64_t max = is_signed ? UINT64_MAX >> (65 - bits) : UINT64_MAX >> (64 - bits);
  char shown[64];
  uint64_t raw; /* two's complement bits of the value */
  bool fits;
  switch (value->kind) {
  case DLRUN_SCALAR_BOOL:
    raw = value->b ? 1 : 0;
    fits = true;
    break;
  case DLRUN_SCALAR_INT:
    raw = (uint64_t)value->i;
    fits = value->i < 0 ? is_signed && value->i >= smin : (uint64_t)value->i <= max;
    break;
  case DLRUN_SCALAR_FLOAT: {
    double v = value->re;
    if (!isfinite(v) || floor(v) != v)
      return dlrun_fail(DLRUN_ERR_VALUE, "value %s is not an integer, cannot store in %s",
                        format_double(v, shown, sizeof shown), info->name);
    /* Exact bounds: -2^(bits-1) <= v < 2^(bits-1), or 0 <= v < 2^bits. Both
     * powers of two are doubles, unlike INT64_MAX or UINT64_MAX. */
    if (is_signed) {
      double limit = ldexp(1.0, (int)bits - 1);
      fits = v >= -limit && v < limit;
      raw = fits ? (uint64_t)(int64_t)v : 0;
    } else {
      fits = v >= 0 && v < ldexp(1.0, (int)bits);
      raw = fits ? (uint64_t)v : 0;
    }
    break;
  }
  default:
    return DLRUN_ERR_VALUE; /* complex: rejected by the caller */
  }
  if (!fits) {
    if (is_signed)
      return dlrun_fail(DLRUN_ERR_VALUE, "value %s does not fit in %s (range %" PRId64
                        " to %" PRIu64 ")",
                        format_scalar(value, shown, sizeof shown), info->name, smin, max);
    return dlrun_fail(DLRUN_ERR_VALUE, "value %s does not fit in %s (range 0 to %" PRIu64 ")",
                      format_scalar(value, shown, sizeof shown), info->name, max);
  }
  put_uint(buf, info->size, raw);
  return DLRUN_OK;
}

/* A float or complex part of dtype `dtype` from a real scalar, rounded once. */
static void store_real(dlrun_dtype dtype, unsigned char *buf, const dlrun_scalar *value) {
  bool is_int = value->kind == DLRUN_SCALAR_INT;
  double d = value->kind == DLRUN_SCALAR_BOOL ? (value->b ? 1.0 : 0.0) : value->re;
  uint16_t h;
  float f;
  const float8_format *f8 = float8_format_of(dtype);
  if (f8) {
    buf[0] = is_int ? float8_from_int64(f8, value->i) : float8_from_double(f8, d);
    return;
  }
  switch (dtype) {
  case DLRUN_FLOAT16:
    h = is_int ? small_float_from_int64(&float16_format, value->i)
               : small_float_from_double(&float16_format, d);
    memcpy(buf, &h, sizeof h);
    break;
  case DLRUN_BFLOAT16:
    h = is_int ? small_float_from_int64(&bfloat16_format, value->i)
               : small_float_from_double(&bfloat16_format, d);
    memcpy(buf, &h, sizeof h);
    break;
  case DLRUN_FLOAT32:
  case DLRUN_COMPLEX64:
    f = is_int ? (float)value->i : (float)d;
    memcpy(buf, &f, sizeof f);
    break;
  default: /* float64, complex128 */
    d = is_int ? (double)value->i : d;
    memcpy(buf, &d, sizeof d);
    break;
  }
}

dlrun_status dlrun_dtype_store(dlrun_dtype dtype, void *dst, const dlrun_scalar *value) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (info == NULL) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  if (value == NULL || dst == NULL)
    return dlrun_fail(DLRUN_ERR_VALUE, "cannot store in %s: %s is NULL", info->name,
                      value == NULL ? "value" : "destination");
  if ((unsigned)value->kind > (unsigned)DLRUN_SCALAR_COMPLEX)
    return dlrun_fail(DLRUN_ERR_VALUE, "cannot store in %s: invalid scalar kind %d",
                      info->name, (int)value->kind);

  if (info->dl_bits < 8) { /* one sub-byte element, unpacked: low bits, rest zero */
    unsigned pattern;
    dlrun_status st = dlrun_subbyte_encode(info, value, &pattern);
    if (st) return st;
    *(unsigned char *)dst = (unsigned char)pattern;
    return DLRUN_OK;
  }
  unsigned char buf[MAX_ELEMENT_SIZE] = {0};
  char shown[96];
  if (value->kind == DLRUN_SCALAR_COMPLEX && info->kind != DLRUN_KIND_COMPLEX)
    return dlrun_fail(DLRUN_ERR_VALUE, "complex value %s cannot be stored in %s",
                      format_scalar(value, shown, sizeof shown), info->name);

  switch (info->kind) {
  case DLRUN_KIND_BOOL: {
    bool b;
    if (value->kind == DLRUN_SCALAR_BOOL)
      b = value->b;
    else if (value->kind == DLRUN_SCALAR_INT && (value->i == 0 || value->i == 1))
      b = value->i == 1;
    else if (value->kind == DLRUN_SCALAR_FLOAT && (value->re == 0.0 || value->re == 1.0))
      b = value->re == 1.0;
    else
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "value %s does not fit in bool (expected true, false, 0 or 1)",
                        format_scalar(value, shown, sizeof shown));
    buf[0] = b ? 1 : 0;
    break;
  }
  case DLRUN_KIND_INT:
  case DLRUN_KIND_UINT: {
    dlrun_status st = store_integer(info, buf, value);
    if (st != DLRUN_OK) return st;
    break;
  }
  case DLRUN_KIND_FLOAT:
    store_real(dtype, buf, value);
    break;
  case DLRUN_KIND_COMPLEX: {
    size_t half = info->size / 2;
    if (value->kind == DLRUN_SCALAR_COMPLEX) {
      dlrun_scalar part = {.kind = DLRUN_SCALAR_FLOAT, .re = value->re};
      store_real(dtype, buf, &part);
      part.re = value->im;
      store_real(dtype, buf + half, &part);
    } else {
      dlrun_scalar zero = {.kind = DLRUN_SCALAR_FLOAT, .re = 0.0};
      store_real(dtype, buf, value);
      store_real(dtype, buf + half, &zero);
    }
    break;
  }
  }
  memcpy(dst, buf, info->size);
  return DLRUN_OK;
}

void dlrun_dtype_load(dlrun_dtype dtype, const void *src, dlrun_scalar *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (info == NULL || src == NULL) return; /* misuse: a zeroed scalar (false) */
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  float f[2];
  double d[2];
  if (info->dl_bits < 8) {
    dlrun_subbyte_decode(info, *(const unsigned char *)src, out);
    return;
  }
  out->kind = DLRUN_SCALAR_INT;
  switch (dtype) {
  case DLRUN_BOOL:
    memcpy(&u8, src, 1);
    out->kind = DLRUN_SCALAR_BOOL;
    out->b = u8 != 0;
    break;
  case DLRUN_INT8: memcpy(&i8, src, 1); out->i = i8; break;
  case DLRUN_INT16: memcpy(&i16, src, 2); out->i = i16; break;
  case DLRUN_INT32: memcpy(&i32, src, 4); out->i = i32; break;
  case DLRUN_INT64: memcpy(&i64, src, 8); out->i = i64; break;
  case DLRUN_UINT8: memcpy(&u8, src, 1); out->i = u8; break;
  case DLRUN_UINT16: memcpy(&u16, src, 2); out->i = u16; break;
  case DLRUN_UINT32: memcpy(&u32, src, 4); out->i = u32; break;
  case DLRUN_UINT64:
    memcpy(&u64, src, 8);
    if (u64 <= (uint64_t)INT64_MAX) {
      out->i = (int64_t)u64;
    } else {
      out->kind = DLRUN_SCALAR_FLOAT;
      out->re = (double)u64;
    }
    break;
  case DLRUN_FLOAT16:
    memcpy(&u16, src, 2);
    out->kind = DLRUN_SCALAR_FLOAT;
    out->re = dlrun_float16_to_double(u16);
    break;
  case DLRUN_BFLOAT16:
    memcpy(&u16, src, 2);
    out->kind = DLRUN_SCALAR_FLOAT;
    out->re = dlrun_bfloat16_to_double(u16);
    break;
  case DLRUN_FLOAT32:
    memcpy(f, src, 4);
    out->kind = DLRUN_SCALAR_FLOAT;
    out->re = f[0];
    break;
  case DLRUN_FLOAT64:
    memcpy(d, src, 8);
    out->kind = DLRUN_SCALAR_FLOAT;
    out->re = d[0];
    break;
  case DLRUN_COMPLEX64:
    memcpy(f, src, 8);
    out->kind = DLRUN_SCALAR_COMPLEX;
    out->re = f[0];
    out->im = f[1];
    break;
  case DLRUN_COMPLEX128:
    memcpy(d, src, 16);
    out->kind = DLRUN_SCALAR_COMPLEX;
    out->re = d[0];
    out->im = d[1];
    break;
  default: { /* the float8 family (packed sub-byte types are read above) */
    const float8_format *f8 = float8_format_of(dtype);
    if (!f8) break;
    memcpy(&u8, src, 1);
    out->kind = DLRUN_SCALAR_FLOAT;
    out->re = float8_to_double(f8, u8);
    break;
  }
  case DLRUN_DTYPE_COUNT: break;
  }
}

/* ---- comparing by value ------------------------------------------------- */

int64_t dlrun_dtype_first_unequal(dlrun_dtype dtype, const void *a, const void *b, int64_t count) {
  const dlrun_dtype_info *info = &dtype_table[dtype];
  if (info->dl_bits < 8) { /* packed runs of `count` elements */
    for (int64_t i = 0; i < count; i++) {
      dlrun_scalar x, y;
      dlrun_subbyte_load_at(info, a, i, &x);
      dlrun_subbyte_load_at(info, b, i, &y);
      if (x.kind == DLRUN_SCALAR_INT ? x.i != y.i : x.re != y.re) return i;
    }
    return -1;
  }
  const unsigned char *p = a, *q = b;
  bool by_value = info->kind == DLRUN_KIND_FLOAT || info->kind == DLRUN_KIND_COMPLEX;
  if (!by_value && !memcmp(p, q, (size_t)count * info->size)) return -1;
  for (int64_t i = 0; i < count; i++, p += info->size, q += info->size) {
    if (!by_value) {
      if (memcmp(p, q, info->size)) return i;
      continue;
    }
    dlrun_scalar x, y;
    dlrun_dtype_load(dtype, p, &x);
    dlrun_dtype_load(dtype, q, &y);
    if (x.re != y.re || x.im != y.im) return i;
  }
  return -1;
}
