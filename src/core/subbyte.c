/* Sub-byte elements and packed storage (see subbyte_impl.h).
 *
 * The integers follow the rules of the byte-sized ones: exact or an error.
 * The MX floats follow ml_dtypes' conversion (float8.h's ConvertImpl with
 * mxfloat.h's limits), which saturates because these formats have no
 * infinity: numeric_limits<T>::infinity() is their largest value. */
#include "subbyte_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "status_impl.h"

/* An MX float: sign bit on top, then exponent, then mantissa. */
typedef struct mx_format {
  int exp_bits, mant_bits, bias;
} mx_format;

static bool mx_format_of(const dlrun_dtype_info *info, mx_format *out) {
  if (info->kind != DLRUN_KIND_FLOAT) return false;
  switch (info->dl_code) {
  case DLRUN_DL_CODE_FLOAT6_E2M3FN: *out = (mx_format){2, 3, 1}; return info->dl_bits == 6;
  case DLRUN_DL_CODE_FLOAT6_E3M2FN: *out = (mx_format){3, 2, 3}; return info->dl_bits == 6;
  case DLRUN_DL_CODE_FLOAT4_E2M1FN: *out = (mx_format){2, 1, 1}; return info->dl_bits == 4;
  default: return false;
  }
}

bool dlrun_subbyte_known(const dlrun_dtype_info *info) {
  if (!info) return false;
  mx_format f;
  if (info->kind == DLRUN_KIND_INT || info->kind == DLRUN_KIND_UINT)
    return info->dl_lanes == 1 && (info->dl_bits == 2 || info->dl_bits == 4);
  return info->dl_lanes == 1 && mx_format_of(info, &f);
}

/* ---- the MX floats ------------------------------------------------------- */

/* Round the exact value (-1)^negative * m * 2^exp to `f`, ties to even, in
 * one step; past the largest magnitude saturates. */
static unsigned mx_round(const mx_format *f, bool negative, uint64_t m, int exp) {
  unsigned sign = negative ? 1u << (f->exp_bits + f->mant_bits) : 0;
  unsigned max_bits = (1u << (f->exp_bits + f->mant_bits)) - 1;
  if (m == 0) return sign;
  int emin = 1 - f->bias;
  int emax = (int)((1u << f->exp_bits) - 1) - f->bias;
  int p = 63; /* m is in [2^p, 2^(p+1)) */
  while (!(m >> p)) p--;
  int e = p + exp;
  if (e > emax) return sign | max_bits;
  int scale = e < emin ? emin : e;
  int s = scale - f->mant_bits - exp; /* low bits of m to drop */
  uint64_t q;
  if (s <= 0) {
    q = m << -s;
  } else if (s > p + 1) {
    q = 0; /* below half the smallest subnormal */
  } else if (s == p + 1) {
    q = m == (UINT64_C(1) << p) ? 0 : 1; /* in [half, 1) of the smallest subnormal */
  } else {
    uint64_t rem = m & ((UINT64_C(1) << s) - 1);
    uint64_t half = UINT64_C(1) << (s - 1);
    q = m >> s;
    if (rem > half || (rem == half && (q & 1))) q++;
  }
  /* A normal number's leading 1 in q adds one to the biased exponent; a
   * carry past the largest binade saturates. */
  uint64_t bits = ((uint64_t)(scale - emin) << f->mant_bits) + q;
  if (bits > max_bits) bits = max_bits;
  return sign | (unsigned)bits;
}

static unsigned mx_from_double(const mx_format *f, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  bool negative = (u >> 63) != 0;
  unsigned expfield = (unsigned)(u >> 52) & 0x7FF;
  uint64_t frac = u & ((UINT64_C(1) << 52) - 1);
  unsigned sign_bit = 1u << (f->exp_bits + f->mant_bits);
  if (expfield == 0x7FF) {
    if (frac == 0) return (negative ? sign_bit : 0) | (sign_bit - 1); /* +-largest */
    return negative ? 0 : sign_bit; /* NaN: zero with the sign bit flipped */
  }
  if (expfield == 0) return mx_round(f, negative, frac, -1074);
  return mx_round(f, negative, frac | (UINT64_C(1) << 52), (int)expfield - 1075);
}

/* Exact: every MX value is a double. */
static double mx_to_double(const mx_format *f, unsigned bits) {
  unsigned sign_bit = 1u << (f->exp_bits + f->mant_bits);
  unsigned expfield = (bits & (sign_bit - 1)) >> f->mant_bits;
  unsigned frac = bits & ((1u << f->mant_bits) - 1);
  double v = expfield == 0 ? ldexp((double)frac, 1 - f->bias - f->mant_bits)
                           : ldexp((double)((1u << f->mant_bits) + frac),
                                   (int)expfield - f->bias - f->mant_bits);
  return (bits & sign_bit) ? -v : v;
}

/* ---- encode and decode --------------------------------------------------- */

/* A real scalar as messages show it: true, 300, 1.5, nan, -inf. */
static const char *format_real(const dlrun_scalar *s, char *buf, size_t n) {
  if (s->kind == DLRUN_SCALAR_BOOL)
    snprintf(buf, n, "%s", s->b ? "true" : "false");
  else if (s->kind == DLRUN_SCALAR_INT)
    snprintf(buf, n, "%" PRId64, s->i);
  else if (isnan(s->re))
    snprintf(buf, n, "nan");
  else if (isinf(s->re))
    snprintf(buf, n, "%s", s->re < 0 ? "-inf" : "inf");
  else
    snprintf(buf, n, "%.17g", s->re);
  return buf;
}

static dlrun_status encode_integer(const dlrun_dtype_info *info, const dlrun_scalar *value,
                                   unsigned *pattern) {
  unsigned bits = info->dl_bits;
  bool is_signed = info->kind == DLRUN_KIND_INT;
  int64_t lo = is_signed ? -((int64_t)1 << (bits - 1)) : 0;
  int64_t hi = is_signed ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
  char shown[64];
  int64_t v;
  if (value->kind == DLRUN_SCALAR_BOOL) {
    v = value->b ? 1 : 0;
  } else if (value->kind == DLRUN_SCALAR_INT) {
    v = value->i;
  } else {
    double d = value->re;
    if (!isfinite(d) || floor(d) != d)
      return dlrun_fail(DLRUN_ERR_VALUE, "value %s is not an integer, cannot store in %s",
                        format_real(value, shown, sizeof shown), info->name);
    /* Beyond +-2^62 it cannot fit: keep the conversion to int64 defined. */
    v = fabs(d) < 0x1p62 ? (int64_t)d : (d < 0 ? INT64_MIN : INT64_MAX);
  }
  if (v < lo || v > hi)
    return dlrun_fail(DLRUN_ERR_VALUE, "value %s does not fit in %s (range %" PRId64
                      " to %" PRId64 ")",
                      format_real(value, shown, sizeof shown), info->name, lo, hi);
  *pattern = (unsigned)((uint64_t)v & ((1u << bits) - 1));
  return DLRUN_OK;
}

dlrun_status dlrun_subbyte_encode(const dlrun_dtype_info *info, const dlrun_scalar *value,
                                  unsigned *pattern) {
  if (!dlrun_subbyte_known(info))
    return dlrun_fail(DLRUN_ERR_VALUE, "%s is not a sub-byte dtype",
                      info && info->name ? info->name : "(null)");
  if (!value || !pattern)
    return dlrun_fail(DLRUN_ERR_VALUE, "cannot store in %s: %s is NULL", info->name,
                      !value ? "value" : "destination");
  char re[32], im[32];
  switch (value->kind) {
  case DLRUN_SCALAR_BOOL:
  case DLRUN_SCALAR_INT:
  case DLRUN_SCALAR_FLOAT: break;
  case DLRUN_SCALAR_COMPLEX: {
    dlrun_scalar r = {.kind = DLRUN_SCALAR_FLOAT, .re = value->re};
    dlrun_scalar i = {.kind = DLRUN_SCALAR_FLOAT, .re = value->im};
    format_real(&r, re, sizeof re);
    format_real(&i, im, sizeof im);
    return dlrun_fail(DLRUN_ERR_VALUE, "complex value (%s%s%sj) cannot be stored in %s", re,
                      im[0] == '-' ? "" : "+", im, info->name);
  }
  default:
    return dlrun_fail(DLRUN_ERR_VALUE, "cannot store in %s: invalid scalar kind %d",
                      info->name, (int)value->kind);
  }
  mx_format f;
  if (!mx_format_of(info, &f)) return encode_integer(info, value, pattern);
  if (value->kind == DLRUN_SCALAR_BOOL) {
    *pattern = mx_from_double(&f, value->b ? 1.0 : 0.0);
  } else if (value->kind == DLRUN_SCALAR_INT) {
    int64_t i = value->i;
    uint64_t m = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
    *pattern = mx_round(&f, i < 0, m, 0);
  } else {
    *pattern = mx_from_double(&f, value->re);
  }
  return DLRUN_OK;
}

void dlrun_subbyte_decode(const dlrun_dtype_info *info, unsigned pattern, dlrun_scalar *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  out->kind = DLRUN_SCALAR_INT;
  if (!dlrun_subbyte_known(info)) return; /* misuse: a zeroed scalar */
  unsigned bits = info->dl_bits;
  pattern &= (1u << bits) - 1;
  mx_format f;
  if (mx_format_of(info, &f)) {
    out->kind = DLRUN_SCALAR_FLOAT;
    out->re = mx_to_double(&f, pattern);
  } else if (info->kind == DLRUN_KIND_INT && (pattern >> (bits - 1))) {
    out->i = (int64_t)pattern - ((int64_t)1 << bits);
  } else {
    out->i = (int64_t)pattern;
  }
}

/* ---- packed storage ------------------------------------------------------ */

unsigned dlrun_packed_get(const void *base, unsigned bits, int64_t index) {
  const uint8_t *p = base;
  uint64_t bit = (uint64_t)index * bits;
  size_t byte = (size_t)(bit / 8);
  unsigned shift = (unsigned)(bit % 8);
  unsigned word = p[byte];
  if (shift + bits > 8) word |= (unsigned)p[byte + 1] << 8;
  return (word >> shift) & ((1u << bits) - 1);
}

void dlrun_packed_set(void *base, unsigned bits, int64_t index, unsigned pattern) {
  uint8_t *p = base;
  uint64_t bit = (uint64_t)index * bits;
  size_t byte = (size_t)(bit / 8);
  unsigned shift = (unsigned)(bit % 8);
  unsigned mask = ((1u << bits) - 1) << shift;
  unsigned value = (pattern << shift) & mask;
  p[byte] = (uint8_t)((p[byte] & ~mask) | value);
  if (shift + bits > 8)
    p[byte + 1] = (uint8_t)((p[byte + 1] & ~(mask >> 8)) | (value >> 8));
}

dlrun_status dlrun_subbyte_store_at(const dlrun_dtype_info *info, void *base, int64_t index,
                                    const dlrun_scalar *value) {
  unsigned pattern;
  dlrun_status st = dlrun_subbyte_encode(info, value, &pattern);
  if (st) return st;
  if (!base || index < 0)
    return dlrun_fail(DLRUN_ERR_VALUE, "cannot store in %s: %s", info->name,
                      !base ? "destination is NULL" : "negative element index");
  dlrun_packed_set(base, info->dl_bits, index, pattern);
  return DLRUN_OK;
}

void dlrun_subbyte_load_at(const dlrun_dtype_info *info, const void *base, int64_t index,
                           dlrun_scalar *out) {
  if (!out) return;
  if (!dlrun_subbyte_known(info) || !base || index < 0) {
    memset(out, 0, sizeof *out); /* misuse: a zeroed scalar */
    out->kind = DLRUN_SCALAR_INT;
    return;
  }
  dlrun_subbyte_decode(info, dlrun_packed_get(base, info->dl_bits, index), out);
}

dlrun_status dlrun_packed_nbytes(unsigned bits, int64_t count, int64_t *out) {
  int64_t total;
  if (count < 0 || bits == 0 || bits > 64 || __builtin_mul_overflow(count, (int64_t)bits, &total) ||
      total > INT64_MAX - 7)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "%" PRId64 " elements of %u bits: the byte size is out of range", count,
                      bits);
  *out = (total + 7) / 8;
  return DLRUN_OK;
}

int64_t dlrun_gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

void dlrun_packed_group(unsigned bits, unsigned pattern, uint8_t group[8], size_t *nbytes) {
  unsigned g = (unsigned)dlrun_gcd(bits, 8);
  memset(group, 0, 8);
  for (unsigned i = 0; i < 8 / g; i++) dlrun_packed_set(group, bits, i, pattern);
  *nbytes = bits / g;
}

void dlrun_packed_fill(void *base, unsigned bits, int64_t count, unsigned pattern) {
  if (count <= 0) return;
  uint8_t group[8];
  size_t n;
  dlrun_packed_group(bits, pattern, group, &n);
  uint8_t *p = base;
  uint64_t total_bits = (uint64_t)count * bits;
  size_t whole = (size_t)(total_bits / 8); /* bytes every bit of which is an element's */
  for (size_t i = 0; i < whole; i++) p[i] = group[i % n];
  unsigned tail = (unsigned)(total_bits % 8);
  if (tail) p[whole] = (uint8_t)(group[whole % n] & ((1u << tail) - 1));
}
