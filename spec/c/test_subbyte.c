/* Sub-byte elements (src/core/subbyte_impl.h) and the storage geometry of
 * packed arrays (src/core/storage_impl.h): every pattern of every sub-byte
 * type against a decoder written here, ml_dtypes' rounding and saturation,
 * exact integer errors, packing bit for bit, which boxes map to bytes, and
 * the public element accessors (dlrun_dtype_store_at, load_at, nbytes). */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/storage_impl.h"
#include "core/subbyte_impl.h"
#include "dlrun/dtype.h"

#define ROW(NAME, KIND, CODE, BITS) \
  {.name = NAME, .size = 1, .kind = KIND, .dl_code = CODE, .dl_bits = BITS, .dl_lanes = 1}
static const dlrun_dtype_info INT4 = ROW("int4", DLRUN_KIND_INT, 0, 4);
static const dlrun_dtype_info UINT4 = ROW("uint4", DLRUN_KIND_UINT, 1, 4);
static const dlrun_dtype_info INT2 = ROW("int2", DLRUN_KIND_INT, 0, 2);
static const dlrun_dtype_info UINT2 = ROW("uint2", DLRUN_KIND_UINT, 1, 2);
static const dlrun_dtype_info F4 = ROW("float4_e2m1fn", DLRUN_KIND_FLOAT, 17, 4);
static const dlrun_dtype_info F6A = ROW("float6_e2m3fn", DLRUN_KIND_FLOAT, 15, 6);
static const dlrun_dtype_info F6B = ROW("float6_e3m2fn", DLRUN_KIND_FLOAT, 16, 6);
static const dlrun_dtype_info F32 = {.name = "float32", .size = 4, .kind = DLRUN_KIND_FLOAT,
                                     .dl_code = 2, .dl_bits = 32, .dl_lanes = 1};

static dlrun_scalar sint(int64_t i) { return (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = i}; }
static dlrun_scalar sfloat(double v) { return (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = v}; }
static dlrun_scalar sbool(bool b) { return (dlrun_scalar){.kind = DLRUN_SCALAR_BOOL, .b = b}; }

/* The pattern `v` encodes to, or -1 on failure. */
static int enc(const dlrun_dtype_info *t, dlrun_scalar v) {
  unsigned p = 0xFFFF;
  return dlrun_subbyte_encode(t, &v, &p) ? -1 : (int)p;
}

static double dec_real(const dlrun_dtype_info *t, unsigned p) {
  dlrun_scalar s;
  dlrun_subbyte_decode(t, p, &s);
  return s.re;
}

/* The test's own decoder: an MX float is sign | exponent (E bits, bias
 * 2^(E-1)-1) | mantissa (M bits), subnormal at exponent 0, no specials. */
static double ref_mx(int E, int M, unsigned p) {
  unsigned sign = p >> (E + M), e = (p >> M) & ((1u << E) - 1), m = p & ((1u << M) - 1);
  int bias = (1 << (E - 1)) - 1;
  double mag =
      e == 0 ? m * pow(2.0, 1 - bias - M) : (1.0 + m / pow(2.0, M)) * pow(2.0, (int)e - bias);
  return sign ? -mag : mag;
}

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Reference rounding to an MX format: the nearest of all patterns' values,
 * ties to the even pattern, past the largest saturating, keeping the sign. */
static int ref_round_mx(int E, int M, double v) {
  unsigned n = 1u << (E + M); /* non-negative patterns */
  double a = fabs(v);
  unsigned best = 0;
  for (unsigned p = 1; p < n; p++) {
    double d = fabs(ref_mx(E, M, p) - a), db = fabs(ref_mx(E, M, best) - a);
    if (d < db || (d == db && !(p & 1))) best = p;
  }
  return (int)(signbit(v) ? best | n : best);
}

static void check_mx(const dlrun_dtype_info *t, int E, int M, double max, double tiny) {
  unsigned n = 1u << (E + M + 1);
  int bad = 0, bad_rt = 0, bad_mid = 0;
  for (unsigned p = 0; p < n; p++) {
    double want = ref_mx(E, M, p);
    if (!same_bits(dec_real(t, p), want)) bad++;
    if (enc(t, sfloat(want)) != (int)p) bad_rt++;
  }
  CHECK(bad == 0, "%s: %d patterns decode wrong", t->name, bad);
  CHECK(bad_rt == 0, "%s: %d values do not round trip", t->name, bad_rt);
  /* Every midpoint, and points a quarter either side, of adjacent values. */
  unsigned half = n / 2;
  for (unsigned p = 0; p + 1 < half; p++) {
    double a = ref_mx(E, M, p), b = ref_mx(E, M, p + 1);
    double pts[3] = {(a + b) / 2, a + (b - a) / 4, b - (b - a) / 4};
    for (int i = 0; i < 3; i++)
      for (int s = 0; s < 2; s++) {
        double v = s ? -pts[i] : pts[i];
        if (enc(t, sfloat(v)) != ref_round_mx(E, M, v)) bad_mid++;
      }
  }
  CHECK(bad_mid == 0, "%s: %d points between values round wrong", t->name, bad_mid);
  unsigned maxp = half - 1, sign = half;
  CHECK(dec_real(t, maxp) == max, "%s max %g", t->name, dec_real(t, maxp));
  CHECK(dec_real(t, 1) == tiny, "%s smallest %g", t->name, dec_real(t, 1));
  /* Saturation: past the largest, infinities; NaN gives zero with the
   * sign bit flipped (ml_dtypes: -quiet_NaN() for a negative NaN). */
  CHECK(enc(t, sfloat(max * 1.5)) == (int)maxp, "%s 1.5*max", t->name);
  CHECK(enc(t, sfloat(1e300)) == (int)maxp, "%s 1e300", t->name);
  CHECK(enc(t, sfloat(-1e300)) == (int)(sign | maxp), "%s -1e300", t->name);
  CHECK(enc(t, sfloat(INFINITY)) == (int)maxp, "%s inf", t->name);
  CHECK(enc(t, sfloat(-INFINITY)) == (int)(sign | maxp), "%s -inf", t->name);
  CHECK(enc(t, sfloat(NAN)) == (int)sign, "%s nan -> %d", t->name, enc(t, sfloat(NAN)));
  CHECK(enc(t, sfloat(-NAN)) == 0, "%s -nan", t->name);
  CHECK(enc(t, sfloat(-0.0)) == (int)sign, "%s -0", t->name);
  CHECK(enc(t, sfloat(-tiny / 4)) == (int)sign, "%s tiny negative keeps its sign", t->name);
  CHECK(enc(t, sfloat(tiny / 2)) == 0, "%s half the smallest: tie to even 0", t->name);
  CHECK(enc(t, sfloat(tiny / 2 * 1.0000001)) == 1, "%s just past half the smallest", t->name);
  CHECK(enc(t, sint(1000000)) == (int)maxp, "%s int 1000000", t->name);
  CHECK(enc(t, sint(-3)) == ref_round_mx(E, M, -3.0), "%s int -3", t->name);
  CHECK(enc(t, sint(INT64_MIN)) == (int)(sign | maxp), "%s INT64_MIN", t->name);
  CHECK(enc(t, sbool(true)) == ref_round_mx(E, M, 1.0), "%s true", t->name);
}

static void check_int(const dlrun_dtype_info *t, int64_t lo, int64_t hi) {
  unsigned bits = t->dl_bits, n = 1u << bits;
  int bad = 0;
  for (unsigned p = 0; p < n; p++) {
    int64_t want = t->kind == DLRUN_KIND_INT && p >= n / 2 ? (int64_t)p - n : (int64_t)p;
    dlrun_scalar s;
    dlrun_subbyte_decode(t, p, &s);
    if (s.kind != DLRUN_SCALAR_INT || s.i != want) bad++;
    if (enc(t, sint(want)) != (int)p) bad++;
    if (enc(t, sfloat((double)want)) != (int)p) bad++;
  }
  CHECK(bad == 0, "%s: %d mismatches", t->name, bad);
  char want[160];
  unsigned p = 7;
  dlrun_scalar v = sint(hi + 1);
  CHECK(dlrun_subbyte_encode(t, &v, &p) == DLRUN_ERR_VALUE && p == 7, "%s hi+1", t->name);
  snprintf(want, sizeof want,
           "value %" PRId64 " does not fit in %s (range %" PRId64 " to %" PRId64 ")", hi + 1,
           t->name, lo, hi);
  CHECK(strcmp(dlrun_last_error(), want) == 0, "%s", dlrun_last_error());
  v = sint(lo - 1);
  CHECK(dlrun_subbyte_encode(t, &v, &p) == DLRUN_ERR_VALUE, "%s lo-1", t->name);
  v = sfloat(1.5);
  CHECK(dlrun_subbyte_encode(t, &v, &p) == DLRUN_ERR_VALUE, "%s 1.5", t->name);
  snprintf(want, sizeof want, "value 1.5 is not an integer, cannot store in %s", t->name);
  CHECK(strcmp(dlrun_last_error(), want) == 0, "%s", dlrun_last_error());
  v = sfloat(1e300);
  CHECK(dlrun_subbyte_encode(t, &v, &p) == DLRUN_ERR_VALUE, "%s 1e300", t->name);
  v = sfloat(NAN);
  CHECK(dlrun_subbyte_encode(t, &v, &p) == DLRUN_ERR_VALUE, "%s nan", t->name);
  CHECK(strstr(dlrun_last_error(), "value nan is not an integer") != NULL, "%s",
        dlrun_last_error());
  CHECK(enc(t, sbool(true)) == 1 && enc(t, sbool(false)) == 0, "%s bools", t->name);
}

/* The bytes of a box of packed elements, packed on their own. */
static void pack_box(unsigned bits, const uint8_t *src, int ndim, const int64_t *dims,
                     const int64_t *lo, const int64_t *hi, uint8_t *out) {
  int64_t idx[8], count = 0;
  for (int i = 0; i < ndim; i++) idx[i] = lo[i];
  for (;;) {
    int64_t flat = 0;
    for (int i = 0; i < ndim; i++) flat = flat * dims[i] + idx[i];
    dlrun_packed_set(out, bits, count++, dlrun_packed_get(src, bits, flat));
    int i = ndim - 1;
    while (i >= 0 && ++idx[i] == hi[i]) idx[i] = lo[i], i--;
    if (i < 0) break;
  }
}

/* The bytes of a storage box, row-major. */
static size_t copy_storage_box(const uint8_t *src, int n, const int64_t *sdims, const int64_t *slo,
                               const int64_t *shi, uint8_t *out) {
  int64_t idx[8];
  size_t used = 0;
  for (int i = 0; i < n; i++) idx[i] = slo[i];
  for (;;) {
    int64_t flat = 0;
    for (int i = 0; i < n; i++) flat = flat * sdims[i] + idx[i];
    out[used++] = src[flat];
    int i = n - 1;
    while (i >= 0 && ++idx[i] == shi[i]) idx[i] = slo[i], i--;
    if (i < 0) break;
  }
  return used;
}

static uint64_t rng = 0x243F6A8885A308D3u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

int main(void) {
  TEST("float4_e2m1fn: the 16 patterns, rounding and saturation as ml_dtypes") {
    static const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (unsigned p = 0; p < 16; p++) {
      double want = p & 8 ? -values[p & 7] : values[p & 7];
      CHECK(same_bits(dec_real(&F4, p), want), "pattern %u: %g", p, dec_real(&F4, p));
    }
    check_mx(&F4, 2, 1, 6.0, 0.5);
    CHECK(enc(&F4, sfloat(5.0)) == 6, "5 is a tie between 4 and 6: even is 4 (pattern 6)");
    CHECK(enc(&F4, sfloat(7.0)) == 7, "7 saturates to 6");
    CHECK(enc(&F4, sfloat(0.25)) == 0 && enc(&F4, sfloat(0.75)) == 2, "subnormal ties");
  }
  TEST("float6_e2m3fn: the 64 patterns, max 7.5, smallest 0.125") {
    check_mx(&F6A, 2, 3, 7.5, 0.125);
  }
  TEST("float6_e3m2fn: the 64 patterns, max 28, smallest 0.0625") {
    check_mx(&F6B, 3, 2, 28.0, 0.0625);
  }
  TEST("int4, uint4, int2, uint2: every pattern, exact stores, range errors") {
    check_int(&INT4, -8, 7);
    check_int(&UINT4, 0, 15);
    check_int(&INT2, -2, 1);
    check_int(&UINT2, 0, 3);
  }
  TEST("encode refuses complex values and rows that are not sub-byte") {
    unsigned p = 5;
    dlrun_scalar c = {.kind = DLRUN_SCALAR_COMPLEX, .re = 1, .im = -2};
    CHECK(dlrun_subbyte_encode(&F4, &c, &p) == DLRUN_ERR_VALUE && p == 5, "complex");
    CHECK(strcmp(dlrun_last_error(), "complex value (1-2j) cannot be stored in float4_e2m1fn") == 0,
          "%s", dlrun_last_error());
    dlrun_scalar one = sint(1);
    CHECK(dlrun_subbyte_encode(&F32, &one, &p) == DLRUN_ERR_VALUE, "float32 is not sub-byte");
    CHECK(strcmp(dlrun_last_error(), "float32 is not a sub-byte dtype") == 0, "%s",
          dlrun_last_error());
    dlrun_dtype_info odd = INT4;
    odd.dl_bits = 3;
    CHECK(!dlrun_subbyte_known(&odd), "int3 is unknown");
    odd = F6A;
    odd.dl_bits = 8;
    CHECK(!dlrun_subbyte_known(&odd), "code 15 with 8 bits is unknown");
    CHECK(dlrun_subbyte_known(&F4) && dlrun_subbyte_known(&UINT2), "known rows");
  }
  TEST("packing: element i is bits i*b .. i*b+b-1, little-endian") {
    uint8_t buf[4] = {0};
    int64_t vals[3] = {1, -2, 3};
    for (int i = 0; i < 3; i++) {
      dlrun_scalar v = sint(vals[i]);
      CHECK(dlrun_subbyte_store_at(&INT4, buf, i, &v) == DLRUN_OK, "store %d", i);
    }
    CHECK(buf[0] == 0xE1 && buf[1] == 0x03 && buf[2] == 0, "int4 [1,-2,3]: %02x %02x", buf[0],
          buf[1]);
    dlrun_scalar v = sint(8);
    CHECK(dlrun_subbyte_store_at(&INT4, buf, 1, &v) == DLRUN_ERR_VALUE && buf[0] == 0xE1,
          "a failed store leaves the bytes");
    for (int i = 0; i < 3; i++) {
      dlrun_scalar s;
      dlrun_subbyte_load_at(&INT4, buf, i, &s);
      CHECK(s.kind == DLRUN_SCALAR_INT && s.i == vals[i], "load %d: %" PRId64, i, s.i);
    }
    /* float6: four elements in three bytes, the second and third straddle. */
    uint8_t b6[4] = {0, 0, 0, 0xAA};
    for (int i = 0; i < 4; i++) dlrun_packed_set(b6, 6, i, (unsigned)(0x21 + i));
    /* 0x21 | 0x22 << 6 | 0x23 << 12 | 0x24 << 18 = 0x908A21... */
    uint32_t want = 0x21u | 0x22u << 6 | 0x23u << 12 | 0x24u << 18;
    CHECK(b6[0] == (want & 0xFF) && b6[1] == ((want >> 8) & 0xFF) && b6[2] == (want >> 16) &&
              b6[3] == 0xAA,
          "float6 bytes %02x %02x %02x %02x", b6[0], b6[1], b6[2], b6[3]);
    for (int i = 0; i < 4; i++) CHECK(dlrun_packed_get(b6, 6, i) == 0x21u + i, "get %d", i);
    dlrun_packed_set(b6, 6, 1, 0x3F);
    CHECK(dlrun_packed_get(b6, 6, 0) == 0x21 && dlrun_packed_get(b6, 6, 1) == 0x3F &&
              dlrun_packed_get(b6, 6, 2) == 0x23,
          "a set leaves its neighbours");
    uint8_t b2[1] = {0};
    for (int i = 0; i < 4; i++) dlrun_packed_set(b2, 2, i, (unsigned)i);
    CHECK(b2[0] == 0xE4, "uint2 [0,1,2,3] is 0xE4: %02x", b2[0]);
  }
  TEST("fill groups and fills clear the padding after the last element") {
    uint8_t g[8];
    size_t n;
    dlrun_packed_group(4, 0x9, g, &n);
    CHECK(n == 1 && g[0] == 0x99, "int4 group");
    dlrun_packed_group(2, 0x1, g, &n);
    CHECK(n == 1 && g[0] == 0x55, "int2 group");
    dlrun_packed_group(6, 0x2D, g, &n);
    CHECK(n == 3 && dlrun_packed_get(g, 6, 0) == 0x2D && dlrun_packed_get(g, 6, 3) == 0x2D,
          "float6 group of 3 bytes");
    uint8_t buf[8];
    memset(buf, 0xFF, sizeof buf);
    dlrun_packed_fill(buf, 6, 5, 0x2D); /* 30 bits: 3 whole bytes and 6 bits */
    for (int i = 0; i < 5; i++) CHECK(dlrun_packed_get(buf, 6, i) == 0x2D, "element %d", i);
    CHECK((buf[3] & 0xC0) == 0 && buf[4] == 0xFF, "padding cleared, next byte kept: %02x %02x",
          buf[3], buf[4]);
    int64_t nb;
    CHECK(dlrun_packed_nbytes(6, 5, &nb) == DLRUN_OK && nb == 4, "nbytes 5 x 6 bits");
    CHECK(dlrun_packed_nbytes(4, INT64_MAX / 2, &nb) == DLRUN_ERR_VALUE, "nbytes overflow");
  }
  TEST("storage geometry: shapes") {
    dlrun_storage s;
    CHECK(dlrun_storage_of(&INT4, 2, (int64_t[]){6, 3}, &s) == DLRUN_OK, "int4[6,3]");
    CHECK(s.split == 0 && s.sndim == 1 && s.sdims[0] == 9 && s.nbytes == 9 && s.step == 2 &&
              s.row_bits == 12 && s.esize == 1,
          "int4[6,3] -> [9], split 0, step 2");
    dlrun_storage_of(&INT4, 2, (int64_t[]){4, 6}, &s);
    CHECK(s.split == 1 && s.sndim == 2 && s.sdims[0] == 4 && s.sdims[1] == 3 && s.step == 2,
          "int4[4,6] -> [4,3]");
    dlrun_storage_of(&INT4, 1, (int64_t[]){3}, &s);
    CHECK(s.split == 0 && s.sdims[0] == 2 && s.nbytes == 2, "int4[3] -> [2], padded");
    dlrun_storage_of(&INT4, 0, NULL, &s);
    CHECK(s.sndim == 1 && s.sdims[0] == 1 && s.nbytes == 1, "int4[] -> [1]");
    dlrun_storage_of(&INT2, 3, (int64_t[]){2, 3, 4}, &s);
    CHECK(s.split == 2 && s.sdims[0] == 2 && s.sdims[1] == 3 && s.sdims[2] == 1 && s.step == 4,
          "int2[2,3,4] -> [2,3,1]");
    dlrun_storage_of(&F6A, 1, (int64_t[]){4}, &s);
    CHECK(s.sdims[0] == 3 && s.step == 4, "float6[4] -> [3], step 4");
    dlrun_storage_of(&F6B, 2, (int64_t[]){2, 2}, &s);
    CHECK(s.split == 0 && s.sdims[0] == 3 && s.step == 2, "float6[2,2] -> [3]");
    dlrun_storage_of(&UINT2, 2, (int64_t[]){5, 0}, &s);
    CHECK(s.split == 1 && s.sdims[0] == 5 && s.sdims[1] == 0 && s.nbytes == 0, "uint2[5,0]");
    dlrun_storage_of(&F32, 2, (int64_t[]){2, 3}, &s);
    CHECK(s.split == -1 && s.sndim == 2 && s.esize == 4 && s.nbytes == 24,
          "float32 maps to itself");
    CHECK(dlrun_storage_of(&INT4, 1, (int64_t[]){-1}, &s) == DLRUN_ERR_VALUE, "negative dim");
    CHECK(dlrun_storage_of(&INT4, 1, (int64_t[]){INT64_MAX / 2}, &s) == DLRUN_ERR_VALUE,
          "too large");
  }
  TEST("storage geometry: boxes that map and the rule's errors") {
    dlrun_storage s;
    int64_t slo[4], shi[4];
    dlrun_storage_of(&INT4, 2, (int64_t[]){6, 3}, &s);
    CHECK(dlrun_storage_box(&s, (int64_t[]){2, 0}, (int64_t[]){6, 3}, slo, shi) == DLRUN_OK &&
              slo[0] == 3 && shi[0] == 9,
          "rows 2..5 of int4[6,3] are bytes 3..8");
    CHECK(dlrun_storage_box(&s, (int64_t[]){0, 0}, (int64_t[]){6, 2}, slo, shi) == DLRUN_ERR_VALUE,
          "splitting dim 1");
    CHECK(
        strcmp(dlrun_last_error(),
               "shard [0:6, 0:2] of int4[6,3] does not start and end on a byte: packed int4 (4 "
               "bits each) lays out dims 0 to 1 as one run of bits, so a shard must hold dim 1 "
               "whole; it may split dim 0 at multiples of 2 (each index of dim 0 holds 12 bits)") ==
            0,
        "%s", dlrun_last_error());
    CHECK(dlrun_storage_box(&s, (int64_t[]){3, 0}, (int64_t[]){6, 3}, slo, shi) == DLRUN_ERR_VALUE,
          "starting at row 3");
    CHECK(strcmp(dlrun_last_error(),
                 "shard [3:6, 0:3] of int4[6,3] does not start and end on a byte: packed int4 (4 "
                 "bits each) holds 12 bits in each index of dim 0, so a shard may split dim 0 only "
                 "at multiples of 2 (index 3 is not one)") == 0,
          "%s", dlrun_last_error());
    dlrun_storage_of(&INT4, 2, (int64_t[]){4, 6}, &s);
    CHECK(dlrun_storage_box(&s, (int64_t[]){1, 2}, (int64_t[]){3, 6}, slo, shi) == DLRUN_OK &&
              slo[0] == 1 && shi[0] == 3 && slo[1] == 1 && shi[1] == 3,
          "int4[4,6] [1:3, 2:6] -> [1:3, 1:3]");
    CHECK(dlrun_storage_box(&s, (int64_t[]){0, 0}, (int64_t[]){4, 3}, slo, shi) == DLRUN_ERR_VALUE,
          "int4[4,6] split at 3");
    CHECK(strstr(dlrun_last_error(),
                 "split dim 1 only at multiples of 2 (index 3 is not one); "
                 "the dims before it may split anywhere") != NULL,
          "%s", dlrun_last_error());
    dlrun_storage_of(&INT4, 1, (int64_t[]){3}, &s);
    CHECK(dlrun_storage_box(&s, (int64_t[]){2}, (int64_t[]){3}, slo, shi) == DLRUN_OK &&
              slo[0] == 1 && shi[0] == 2,
          "the last, padded element of int4[3] is byte 1");
    CHECK(dlrun_storage_box(&s, (int64_t[]){1}, (int64_t[]){3}, slo, shi) == DLRUN_ERR_VALUE,
          "int4[3] from 1");
    CHECK(dlrun_storage_box(&s, (int64_t[]){0}, (int64_t[]){4}, slo, shi) == DLRUN_ERR_VALUE,
          "a box past the end");
    CHECK(strcmp(dlrun_last_error(), "box [0:4] is not inside int4[3]") == 0, "%s",
          dlrun_last_error());
    dlrun_storage_of(&F32, 2, (int64_t[]){2, 3}, &s);
    CHECK(dlrun_storage_box(&s, (int64_t[]){1, 1}, (int64_t[]){2, 2}, slo, shi) == DLRUN_OK &&
              slo[0] == 1 && shi[1] == 2,
          "float32 boxes map to themselves");
  }
  TEST("storage geometry: every mapped box's bytes are its own packed array") {
    const dlrun_dtype_info *types[3] = {&INT2, &INT4, &F6A};
    int mapped = 0, refused = 0, bad = 0;
    uint8_t global[256], sub[256], own[256]; /* 6*6*6 float6: 162 bytes */
    for (int trial = 0; trial < 3000; trial++) {
      const dlrun_dtype_info *t = types[next() % 3];
      int ndim = 1 + (int)(next() % 3);
      int64_t dims[3], lo[3], hi[3];
      for (int i = 0; i < ndim; i++) dims[i] = 1 + (int64_t)(next() % 6);
      for (int i = 0; i < ndim; i++) {
        lo[i] = (int64_t)(next() % (uint64_t)dims[i]);
        hi[i] = lo[i] + 1 + (int64_t)(next() % (uint64_t)(dims[i] - lo[i]));
        if (next() % 2) lo[i] = 0, hi[i] = dims[i];
      }
      dlrun_storage s, b;
      dlrun_storage_of(t, ndim, dims, &s);
      int64_t total = 1;
      for (int i = 0; i < ndim; i++) total *= dims[i];
      memset(global, 0, sizeof global);
      for (int64_t e = 0; e < total; e++) dlrun_packed_set(global, t->dl_bits, e, (unsigned)next());
      int64_t slo[3], shi[3], bdims[3];
      if (dlrun_storage_box(&s, lo, hi, slo, shi) != DLRUN_OK) {
        refused++;
        continue;
      }
      mapped++;
      for (int i = 0; i < ndim; i++) bdims[i] = hi[i] - lo[i];
      dlrun_storage_of(t, ndim, bdims, &b);
      bool shape_ok = b.sndim == s.sndim;
      for (int i = 0; shape_ok && i < s.sndim; i++) shape_ok = b.sdims[i] == shi[i] - slo[i];
      memset(own, 0, sizeof own);
      pack_box(t->dl_bits, global, ndim, dims, lo, hi, own);
      size_t n = copy_storage_box(global, s.sndim, s.sdims, slo, shi, sub);
      /* the padded tail of the array's last byte is zero in both */
      if (!shape_ok || (int64_t)n != b.nbytes || memcmp(sub, own, n)) {
        bad++;
        printf(
            "  %s ndim %d dims %lld %lld %lld lo %lld %lld %lld hi %lld %lld %lld shape_ok %d n "
            "%zu nb %lld\n",
            t->name, ndim, (long long)dims[0], (long long)dims[1], (long long)dims[2],
            (long long)lo[0], (long long)lo[1], (long long)lo[2], (long long)hi[0],
            (long long)hi[1], (long long)hi[2], shape_ok, n, (long long)b.nbytes);
      }
    }
    CHECK(bad == 0, "%d of %d mapped boxes differ", bad, mapped);
    CHECK(mapped > 500 && refused > 500, "mapped %d, refused %d", mapped, refused);
  }
  TEST("dlrun_dtype_store_at/load_at/nbytes on whole-byte dtypes") {
    int16_t run[4] = {0};
    dlrun_scalar v = sint(-300);
    CHECK(dlrun_dtype_store_at(DLRUN_INT16, run, 2, &v) == DLRUN_OK && run[2] == -300 &&
              run[1] == 0 && run[3] == 0,
          "int16 element 2");
    dlrun_scalar s;
    dlrun_dtype_load_at(DLRUN_INT16, run, 2, &s);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == -300, "load element 2");
    v = sint(40000);
    CHECK(dlrun_dtype_store_at(DLRUN_INT16, run, 1, &v) == DLRUN_ERR_VALUE && run[1] == 0,
          "out of range leaves the run");
    CHECK(strcmp(dlrun_last_error(), "value 40000 does not fit in int16 (range -32768 to 32767)") ==
              0,
          "%s", dlrun_last_error());
    CHECK(dlrun_dtype_store_at(DLRUN_INT16, run, -1, &v) == DLRUN_ERR_VALUE, "negative index");
    CHECK(strcmp(dlrun_last_error(), "cannot store in int16: element index -1 is negative") == 0,
          "%s", dlrun_last_error());
    CHECK(dlrun_dtype_store_at(DLRUN_INT16, NULL, 0, &v) == DLRUN_ERR_VALUE, "NULL base");
    CHECK(dlrun_dtype_store_at((dlrun_dtype)999, run, 0, &v) == DLRUN_ERR_VALUE, "bad dtype");
    dlrun_dtype_load_at(DLRUN_INT16, NULL, 0, &s);
    CHECK(s.kind == DLRUN_SCALAR_BOOL && !s.b, "misuse reads a zeroed scalar");
    double d[3] = {0};
    v = sfloat(2.5);
    CHECK(dlrun_dtype_store_at(DLRUN_FLOAT64, d, 1, &v) == DLRUN_OK && d[1] == 2.5, "float64");
    uint64_t nb = 7;
    CHECK(dlrun_dtype_nbytes(DLRUN_FLOAT32, 5, &nb) == DLRUN_OK && nb == 20, "5 float32");
    CHECK(dlrun_dtype_nbytes(DLRUN_COMPLEX128, 0, &nb) == DLRUN_OK && nb == 0, "0 complex128");
    CHECK(dlrun_dtype_nbytes(DLRUN_FLOAT64, INT64_MAX / 4, &nb) == DLRUN_ERR_VALUE, "overflow");
    CHECK(dlrun_dtype_nbytes(DLRUN_FLOAT64, -1, &nb) == DLRUN_ERR_VALUE, "negative count");
  }
  return check_summary("subbyte");
}
