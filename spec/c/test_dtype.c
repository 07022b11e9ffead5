/* The dtype table, name and DLPack lookups, scalar store/load and the
 * float16/bfloat16 conversions (include/dlrun/dtype.h). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/dtype_impl.h"
#include "dlrun/dtype.h"

/* ---- helpers ------------------------------------------------------------- */

static dlrun_scalar sbool(bool b) { return (dlrun_scalar){.kind = DLRUN_SCALAR_BOOL, .b = b}; }
static dlrun_scalar sint(int64_t i) { return (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = i}; }
static dlrun_scalar sfloat(double v) { return (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = v}; }
static dlrun_scalar scomplex(double re, double im) {
  return (dlrun_scalar){.kind = DLRUN_SCALAR_COMPLEX, .re = re, .im = im};
}

static dlrun_status store(dlrun_dtype dtype, void *dst, dlrun_scalar s) {
  return dlrun_dtype_store(dtype, dst, &s);
}

static dlrun_scalar load(dlrun_dtype dtype, const void *src) {
  dlrun_scalar out;
  dlrun_dtype_load(dtype, src, &out);
  return out;
}

/* Store then load through an element buffer; *st gets the store status. */
static dlrun_scalar round_trip(dlrun_dtype dtype, dlrun_scalar s, dlrun_status *st) {
  unsigned char buf[16] = {0};
  *st = store(dtype, buf, s);
  return load(dtype, buf);
}

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static bool f16_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }
static bool bf16_is_nan(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x007F) != 0; }

/* A small deterministic generator (xorshift64). */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Reference rounding: v lies in [to_double(lo), to_double(lo + 1)], both
 * finite non-negative patterns. Distances are exact (Sterbenz), so this picks
 * the nearest, ties to the even pattern, without any bit tricks. */
static uint16_t reference_round(double (*to_double)(uint16_t), uint16_t lo, double v) {
  double a = to_double(lo), b = to_double((uint16_t)(lo + 1));
  double da = v - a, db = b - v;
  if (da < db) return lo;
  if (db < da) return (uint16_t)(lo + 1);
  return (lo & 1) ? (uint16_t)(lo + 1) : lo;
}

/* ---- the table ----------------------------------------------------------- */

typedef struct expected_row {
  dlrun_dtype dtype;
  const char *name;
  size_t size;
  dlrun_dtype_kind kind;
  uint8_t code, bits;
} expected_row;

static const expected_row expected_rows[] = {
    {DLRUN_BOOL, "bool", 1, DLRUN_KIND_BOOL, 6, 8},
    {DLRUN_INT8, "int8", 1, DLRUN_KIND_INT, 0, 8},
    {DLRUN_INT16, "int16", 2, DLRUN_KIND_INT, 0, 16},
    {DLRUN_INT32, "int32", 4, DLRUN_KIND_INT, 0, 32},
    {DLRUN_INT64, "int64", 8, DLRUN_KIND_INT, 0, 64},
    {DLRUN_UINT8, "uint8", 1, DLRUN_KIND_UINT, 1, 8},
    {DLRUN_UINT16, "uint16", 2, DLRUN_KIND_UINT, 1, 16},
    {DLRUN_UINT32, "uint32", 4, DLRUN_KIND_UINT, 1, 32},
    {DLRUN_UINT64, "uint64", 8, DLRUN_KIND_UINT, 1, 64},
    {DLRUN_FLOAT16, "float16", 2, DLRUN_KIND_FLOAT, 2, 16},
    {DLRUN_BFLOAT16, "bfloat16", 2, DLRUN_KIND_FLOAT, 4, 16},
    {DLRUN_FLOAT32, "float32", 4, DLRUN_KIND_FLOAT, 2, 32},
    {DLRUN_FLOAT64, "float64", 8, DLRUN_KIND_FLOAT, 2, 64},
    {DLRUN_COMPLEX64, "complex64", 8, DLRUN_KIND_COMPLEX, 5, 64},
    {DLRUN_COMPLEX128, "complex128", 16, DLRUN_KIND_COMPLEX, 5, 128},
    {DLRUN_FLOAT8_E3M4, "float8_e3m4", 1, DLRUN_KIND_FLOAT, 7, 8},
    {DLRUN_FLOAT8_E4M3, "float8_e4m3", 1, DLRUN_KIND_FLOAT, 8, 8},
    {DLRUN_FLOAT8_E4M3B11FNUZ, "float8_e4m3b11fnuz", 1, DLRUN_KIND_FLOAT, 9, 8},
    {DLRUN_FLOAT8_E4M3FN, "float8_e4m3fn", 1, DLRUN_KIND_FLOAT, 10, 8},
    {DLRUN_FLOAT8_E4M3FNUZ, "float8_e4m3fnuz", 1, DLRUN_KIND_FLOAT, 11, 8},
    {DLRUN_FLOAT8_E5M2, "float8_e5m2", 1, DLRUN_KIND_FLOAT, 12, 8},
    {DLRUN_FLOAT8_E5M2FNUZ, "float8_e5m2fnuz", 1, DLRUN_KIND_FLOAT, 13, 8},
    {DLRUN_FLOAT8_E8M0FNU, "float8_e8m0fnu", 1, DLRUN_KIND_FLOAT, 14, 8},
    {DLRUN_INT4, "int4", 1, DLRUN_KIND_INT, 0, 4},
    {DLRUN_UINT4, "uint4", 1, DLRUN_KIND_UINT, 1, 4},
    {DLRUN_INT2, "int2", 1, DLRUN_KIND_INT, 0, 2},
    {DLRUN_UINT2, "uint2", 1, DLRUN_KIND_UINT, 1, 2},
    {DLRUN_FLOAT4_E2M1FN, "float4_e2m1fn", 1, DLRUN_KIND_FLOAT, 17, 4},
    {DLRUN_FLOAT6_E2M3FN, "float6_e2m3fn", 1, DLRUN_KIND_FLOAT, 15, 6},
    {DLRUN_FLOAT6_E3M2FN, "float6_e3m2fn", 1, DLRUN_KIND_FLOAT, 16, 6},
};
#define N_ROWS (sizeof expected_rows / sizeof expected_rows[0])

static const char *const all_names =
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, "
    "float32, float64, complex64, complex128, float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, "
    "float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, int4, uint4, "
    "int2, uint2, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn";

static void test_table(void) {
  TEST("every dtype has its table row") {
    CHECK(N_ROWS == DLRUN_DTYPE_COUNT, "%zu rows for %d dtypes", N_ROWS, DLRUN_DTYPE_COUNT);
    for (size_t r = 0; r < N_ROWS; r++) {
      const expected_row *e = &expected_rows[r];
      const dlrun_dtype_info *info = dlrun_dtype_get(e->dtype);
      CHECK(info != NULL, "no row for %s", e->name);
      if (!info) continue;
      CHECK(strcmp(info->name, e->name) == 0, "name %s, expected %s", info->name, e->name);
      CHECK(info->size == e->size, "%s size %zu", e->name, info->size);
      CHECK(info->kind == e->kind, "%s kind %d", e->name, (int)info->kind);
      CHECK(info->dl_code == e->code, "%s code %u", e->name, info->dl_code);
      CHECK(info->dl_bits == e->bits, "%s bits %u", e->name, info->dl_bits);
      CHECK(info->dl_lanes == 1, "%s lanes %u", e->name, info->dl_lanes);
      /* packed sub-byte types: itemsize 1, as NumPy's */
      CHECK(info->dl_bits < 8 ? info->size == 1 : info->dl_bits == 8 * info->size,
            "%s bits vs size", e->name);
    }
  }

  TEST("dlrun_dtype_get rejects non-dtypes") {
    CHECK(dlrun_dtype_get(DLRUN_DTYPE_COUNT) == NULL, "COUNT has a row");
    CHECK(dlrun_dtype_get((dlrun_dtype)-1) == NULL, "-1 has a row");
    CHECK(dlrun_dtype_get((dlrun_dtype)1000) == NULL, "1000 has a row");
  }

  TEST("every name and DLPack triple round-trips") {
    for (size_t r = 0; r < N_ROWS; r++) {
      const expected_row *e = &expected_rows[r];
      dlrun_dtype d = DLRUN_DTYPE_COUNT;
      CHECK(dlrun_dtype_from_name(e->name, &d) == DLRUN_OK, "from_name(%s): %s", e->name,
            dlrun_last_error());
      CHECK(d == e->dtype, "from_name(%s) gave %d", e->name, (int)d);
      d = DLRUN_DTYPE_COUNT;
      CHECK(dlrun_dtype_from_dlpack(e->code, e->bits, 1, &d) == DLRUN_OK,
            "from_dlpack(%s): %s", e->name, dlrun_last_error());
      CHECK(d == e->dtype, "from_dlpack(%s) gave %d", e->name, (int)d);
    }
  }
}

/* ---- lookup errors ------------------------------------------------------- */

static void test_lookup_errors(void) {
  TEST("unknown dtype names fail with the list of names") {
    const char *bad[] = {"float", "Float32", "float32 ", "", "int", "complex", "i4"};
    char want[512];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      dlrun_dtype d = DLRUN_INT8;
      CHECK(dlrun_dtype_from_name(bad[k], &d) == DLRUN_ERR_VALUE, "\"%s\" accepted", bad[k]);
      CHECK(d == DLRUN_INT8, "out changed on failure");
      snprintf(want, sizeof want, "unknown dtype \"%s\" (expected one of: %s)", bad[k], all_names);
      CHECK_STR_CONTAINS(dlrun_last_error(), want);
    }
  }

  TEST("a NULL dtype name is a ValueError") {
    dlrun_dtype d = DLRUN_INT8;
    CHECK(dlrun_dtype_from_name(NULL, &d) == DLRUN_ERR_VALUE, "NULL accepted");
    CHECK(d == DLRUN_INT8, "out changed on failure");
    CHECK_STR_CONTAINS(dlrun_last_error(), "expected one of: bool, int8,");
  }

  TEST("a very long unknown name is shortened in the message") {
    char name[300];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    CHECK(dlrun_dtype_from_name(name, NULL) == DLRUN_ERR_VALUE, "accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "xxx...\" (expected one of: bool,");
    CHECK_STR_CONTAINS(dlrun_last_error(), "complex128, float8_e3m4,");
    CHECK_STR_CONTAINS(dlrun_last_error(), "float6_e3m2fn)");
  }

  TEST("unsupported DLPack triples are BufferErrors") {
    struct {
      uint8_t code, bits;
      uint16_t lanes;
      const char *msg;
    } cases[] = {
        {7, 16, 1, "unsupported DLPack dtype (code=7 (kDLFloat8_e3m4), bits=16, lanes=1)"},
        {3, 64, 1, "unsupported DLPack dtype (code=3 (kDLOpaqueHandle), bits=64, lanes=1)"},
        {2, 8, 1, "unsupported DLPack dtype (code=2 (kDLFloat), bits=8, lanes=1)"},
        {0, 128, 1, "unsupported DLPack dtype (code=0 (kDLInt), bits=128, lanes=1)"},
        {4, 32, 1, "unsupported DLPack dtype (code=4 (kDLBfloat), bits=32, lanes=1)"},
        {5, 32, 1, "unsupported DLPack dtype (code=5 (kDLComplex), bits=32, lanes=1)"},
        {8, 16, 1, "unsupported DLPack dtype (code=8 (kDLFloat8_e4m3), bits=16, lanes=1)"},
        {9, 4, 1, "unsupported DLPack dtype (code=9 (kDLFloat8_e4m3b11fnuz), bits=4, lanes=1)"},
        {10, 6, 1, "unsupported DLPack dtype (code=10 (kDLFloat8_e4m3fn), bits=6, lanes=1)"},
        {11, 16, 1, "unsupported DLPack dtype (code=11 (kDLFloat8_e4m3fnuz), bits=16, lanes=1)"},
        {12, 7, 1, "unsupported DLPack dtype (code=12 (kDLFloat8_e5m2), bits=7, lanes=1)"},
        {13, 9, 1, "unsupported DLPack dtype (code=13 (kDLFloat8_e5m2fnuz), bits=9, lanes=1)"},
        {14, 32, 1, "unsupported DLPack dtype (code=14 (kDLFloat8_e8m0fnu), bits=32, lanes=1)"},
        {15, 8, 1, "unsupported DLPack dtype (code=15 (kDLFloat6_e2m3fn), bits=8, lanes=1)"},
        {16, 8, 1, "unsupported DLPack dtype (code=16 (kDLFloat6_e3m2fn), bits=8, lanes=1)"},
        {17, 8, 1, "unsupported DLPack dtype (code=17 (kDLFloat4_e2m1fn), bits=8, lanes=1)"},
        {18, 8, 1, "unsupported DLPack dtype (code=18 (unknown to DLPack 1.3), bits=8, lanes=1)"},
        {255, 8, 1, "unsupported DLPack dtype (code=255 (unknown to DLPack 1.3), bits=8, lanes=1)"},
        {14, 4, 1, "unsupported DLPack dtype (code=14 (kDLFloat8_e8m0fnu), bits=4, lanes=1)"},
        /* the sub-byte types' codes with widths they do not have */
        {17, 6, 1, "unsupported DLPack dtype (code=17 (kDLFloat4_e2m1fn), bits=6, lanes=1)"},
        {0, 3, 1, "unsupported DLPack dtype (code=0 (kDLInt), bits=3, lanes=1)"},
        {1, 6, 1, "unsupported DLPack dtype (code=1 (kDLUInt), bits=6, lanes=1)"},
        {2, 4, 1, "unsupported DLPack dtype (code=2 (kDLFloat), bits=4, lanes=1)"},
        {10, 8, 2, "DLPack dtype with lanes=2 is not supported (only lanes=1)"},
        {2, 32, 4, "DLPack dtype with lanes=4 is not supported (only lanes=1)"},
        {2, 32, 0, "DLPack dtype with lanes=0 is not supported (only lanes=1)"},
        {6, 8, 2, "DLPack dtype with lanes=2 is not supported (only lanes=1)"},
        {6, 1, 1, "DLPack bool dtype must have 8 bits, got 1"},
        {6, 16, 1, "DLPack bool dtype must have 8 bits, got 16"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      dlrun_dtype d = DLRUN_INT8;
      dlrun_status st = dlrun_dtype_from_dlpack(cases[k].code, cases[k].bits, cases[k].lanes, &d);
      CHECK(st == DLRUN_ERR_BUFFER, "(%u,%u,%u) gave %d", cases[k].code, cases[k].bits,
            cases[k].lanes, (int)st);
      CHECK(d == DLRUN_INT8, "out changed on failure");
      CHECK_STR_CONTAINS(dlrun_last_error(), cases[k].msg);
    }
  }
}

/* ---- integer ranges ------------------------------------------------------ */

typedef struct int_range {
  dlrun_dtype dtype;
  int64_t min;
  uint64_t max;
  const char *range; /* as the message shows it */
} int_range;

static const int_range int_ranges[] = {
    {DLRUN_INT8, INT8_MIN, INT8_MAX, "(range -128 to 127)"},
    {DLRUN_INT16, INT16_MIN, INT16_MAX, "(range -32768 to 32767)"},
    {DLRUN_INT32, INT32_MIN, INT32_MAX, "(range -2147483648 to 2147483647)"},
    {DLRUN_INT64, INT64_MIN, INT64_MAX,
     "(range -9223372036854775808 to 9223372036854775807)"},
    {DLRUN_UINT8, 0, UINT8_MAX, "(range 0 to 255)"},
    {DLRUN_UINT16, 0, UINT16_MAX, "(range 0 to 65535)"},
    {DLRUN_UINT32, 0, UINT32_MAX, "(range 0 to 4294967295)"},
    {DLRUN_UINT64, 0, UINT64_MAX, "(range 0 to 18446744073709551615)"},
};

/* Store must succeed and load back `want` as INT (or as FLOAT for uint64
 * values above INT64_MAX, compared through uint64). */
static void expect_int_ok(dlrun_dtype dtype, dlrun_scalar s, uint64_t want_bits) {
  dlrun_status st;
  dlrun_scalar got = round_trip(dtype, s, &st);
  const char *name = dlrun_dtype_get(dtype)->name;
  CHECK(st == DLRUN_OK, "store in %s failed: %s", name, dlrun_last_error());
  if (st != DLRUN_OK) return;
  if (got.kind == DLRUN_SCALAR_FLOAT) {
    CHECK(dtype == DLRUN_UINT64 && got.re >= 9223372036854775808.0 &&
              (uint64_t)got.re == want_bits,
          "%s loaded FLOAT %.17g", name, got.re);
  } else {
    CHECK(got.kind == DLRUN_SCALAR_INT && (uint64_t)got.i == want_bits,
          "%s loaded %" PRId64 ", expected %" PRIu64, name, got.i, want_bits);
  }
}

static void expect_fail(dlrun_dtype dtype, dlrun_scalar s, const char *msg) {
  unsigned char buf[16];
  memset(buf, 0xA5, sizeof buf);
  dlrun_status st = store(dtype, buf, s);
  CHECK(st == DLRUN_ERR_VALUE, "store in %s gave %d, expected ValueError (%s)",
        dlrun_dtype_get(dtype)->name, (int)st, msg);
  CHECK_STR_CONTAINS(dlrun_last_error(), msg);
  bool untouched = true;
  for (size_t k = 0; k < sizeof buf; k++) untouched = untouched && buf[k] == 0xA5;
  CHECK(untouched, "dst changed on a failed store (%s)", msg);
}

static void test_integer_ranges(void) {
  TEST("integer dtypes: min and max via INT and FLOAT, one past fails") {
    char msg[256];
    for (size_t r = 0; r < sizeof int_ranges / sizeof int_ranges[0]; r++) {
      const int_range *ir = &int_ranges[r];
      const char *name = dlrun_dtype_get(ir->dtype)->name;
      bool is_signed = ir->min < 0;
      bool wide = ir->max > (uint64_t)INT32_MAX * 2 + 1; /* 64-bit */
      /* INT scalars. */
      expect_int_ok(ir->dtype, sint(ir->min), (uint64_t)ir->min);
      if (ir->max <= (uint64_t)INT64_MAX)
        expect_int_ok(ir->dtype, sint((int64_t)ir->max), ir->max);
      else
        expect_int_ok(ir->dtype, sint(INT64_MAX), (uint64_t)INT64_MAX);
      if (ir->min > INT64_MIN) {
        snprintf(msg, sizeof msg, "value %" PRId64 " does not fit in %s %s", ir->min - 1, name,
                 ir->range);
        expect_fail(ir->dtype, sint(ir->min - 1), msg);
      }
      if (ir->max < (uint64_t)INT64_MAX) {
        snprintf(msg, sizeof msg, "value %" PRIu64 " does not fit in %s %s", ir->max + 1, name,
                 ir->range);
        expect_fail(ir->dtype, sint((int64_t)ir->max + 1), msg);
      }
      if (!is_signed) {
        snprintf(msg, sizeof msg, "value -1 does not fit in %s %s", name, ir->range);
        expect_fail(ir->dtype, sint(-1), msg);
        snprintf(msg, sizeof msg, "value -9223372036854775808 does not fit in %s %s", name,
                 ir->range);
        expect_fail(ir->dtype, sint(INT64_MIN), msg);
      }
      /* FLOAT scalars: the bounds are exact doubles below 64 bits. */
      if (!wide) {
        expect_int_ok(ir->dtype, sfloat((double)ir->min), (uint64_t)ir->min);
        expect_int_ok(ir->dtype, sfloat((double)ir->max), ir->max);
        snprintf(msg, sizeof msg, "value %" PRId64 " does not fit in %s %s", ir->min - 1, name,
                 ir->range);
        expect_fail(ir->dtype, sfloat((double)ir->min - 1.0), msg);
        snprintf(msg, sizeof msg, "value %" PRIu64 " does not fit in %s %s", ir->max + 1, name,
                 ir->range);
        expect_fail(ir->dtype, sfloat((double)ir->max + 1.0), msg);
      }
      /* Booleans are 0 and 1; -0.0 is 0. */
      expect_int_ok(ir->dtype, sbool(true), 1);
      expect_int_ok(ir->dtype, sbool(false), 0);
      expect_int_ok(ir->dtype, sfloat(-0.0), 0);
    }
  }

  TEST("the example message for uint8") {
    expect_fail(DLRUN_UINT8, sint(300), "value 300 does not fit in uint8 (range 0 to 255)");
    expect_fail(DLRUN_UINT8, sfloat(300.0), "value 300 does not fit in uint8 (range 0 to 255)");
    expect_fail(DLRUN_INT8, sint(-129), "value -129 does not fit in int8 (range -128 to 127)");
  }

  TEST("int64 edges via FLOAT are exact") {
    const char *range = "(range -9223372036854775808 to 9223372036854775807)";
    char msg[256];
    expect_int_ok(DLRUN_INT64, sint(9223372036854775807), (uint64_t)INT64_MAX);
    expect_int_ok(DLRUN_INT64, sint(-9223372036854775807 - 1), (uint64_t)INT64_MIN);
    expect_int_ok(DLRUN_INT64, sfloat(-9223372036854775808.0), (uint64_t)INT64_MIN);
    /* The largest double below 2^63. */
    expect_int_ok(DLRUN_INT64, sfloat(9223372036854774784.0), UINT64_C(9223372036854774784));
    /* (double)INT64_MAX is 2^63: out of range. */
    snprintf(msg, sizeof msg, "value 9.2233720368547758e+18 does not fit in int64 %s", range);
    expect_fail(DLRUN_INT64, sfloat(9223372036854775808.0), msg);
    expect_fail(DLRUN_INT64, sfloat((double)INT64_MAX), msg);
    /* The next double below -2^63. */
    snprintf(msg, sizeof msg, "value -9.2233720368547779e+18 does not fit in int64 %s", range);
    expect_fail(DLRUN_INT64, sfloat(-9223372036854777856.0), msg);
    expect_fail(DLRUN_INT64, sfloat(1e300), "does not fit in int64");
  }

  TEST("uint64 edges via FLOAT are exact; large values load as FLOAT") {
    const char *range = "(range 0 to 18446744073709551615)";
    char msg[256];
    /* 18446744073709551615.0 is the double 2^64. */
    snprintf(msg, sizeof msg, "value 1.8446744073709552e+19 does not fit in uint64 %s", range);
    expect_fail(DLRUN_UINT64, sfloat(18446744073709551615.0), msg);
    expect_fail(DLRUN_UINT64, sfloat(18446744073709551616.0), msg);
    expect_int_ok(DLRUN_UINT64, sfloat(18446744073709549568.0), UINT64_C(18446744073709549568));
    expect_int_ok(DLRUN_UINT64, sfloat(9223372036854775808.0), UINT64_C(9223372036854775808));
    snprintf(msg, sizeof msg, "value -1 does not fit in uint64 %s", range);
    expect_fail(DLRUN_UINT64, sfloat(-1.0), msg);

    unsigned char buf[8];
    CHECK(store(DLRUN_UINT64, buf, sfloat(18446744073709549568.0)) == DLRUN_OK, "store");
    uint64_t raw;
    memcpy(&raw, buf, 8);
    CHECK(raw == UINT64_C(18446744073709549568), "raw %" PRIu64, raw);
    dlrun_scalar s = load(DLRUN_UINT64, buf);
    CHECK(s.kind == DLRUN_SCALAR_FLOAT && s.re == 18446744073709549568.0, "kind %d re %.17g",
          (int)s.kind, s.re);
    raw = UINT64_MAX;
    memcpy(buf, &raw, 8);
    s = load(DLRUN_UINT64, buf);
    CHECK(s.kind == DLRUN_SCALAR_FLOAT && s.re == 18446744073709551616.0, "UINT64_MAX: %.17g",
          s.re);
    raw = UINT64_C(9223372036854775808);
    memcpy(buf, &raw, 8);
    s = load(DLRUN_UINT64, buf);
    CHECK(s.kind == DLRUN_SCALAR_FLOAT && s.re == 9223372036854775808.0, "2^63: %.17g", s.re);
    raw = (uint64_t)INT64_MAX;
    memcpy(buf, &raw, 8);
    s = load(DLRUN_UINT64, buf);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == INT64_MAX, "INT64_MAX loads as INT");
  }

  TEST("non-integral floats cannot be stored in integer dtypes") {
    expect_fail(DLRUN_INT32, sfloat(1.5), "value 1.5 is not an integer, cannot store in int32");
    expect_fail(DLRUN_UINT8, sfloat(0.1),
                "value 0.10000000000000001 is not an integer, cannot store in uint8");
    expect_fail(DLRUN_INT64, sfloat(NAN), "value nan is not an integer, cannot store in int64");
    expect_fail(DLRUN_INT64, sfloat(-NAN), "value nan is not an integer, cannot store in int64");
    expect_fail(DLRUN_INT64, sfloat(INFINITY),
                "value inf is not an integer, cannot store in int64");
    expect_fail(DLRUN_UINT16, sfloat(-INFINITY),
                "value -inf is not an integer, cannot store in uint16");
    expect_fail(DLRUN_INT8, sfloat(-0.5), "value -0.5 is not an integer, cannot store in int8");
    expect_fail(DLRUN_UINT64, sfloat(4.9e-324),
                "value 4.9406564584124654e-324 is not an integer, cannot store in uint64");
  }
}

/* ---- bool, complex and mixed stores -------------------------------------- */

static void test_bool_and_complex(void) {
  TEST("bool dtype takes true, false, 0 and 1 only") {
    unsigned char b = 0xFF;
    CHECK(store(DLRUN_BOOL, &b, sbool(true)) == DLRUN_OK && b == 1, "true -> %u", b);
    CHECK(store(DLRUN_BOOL, &b, sbool(false)) == DLRUN_OK && b == 0, "false -> %u", b);
    CHECK(store(DLRUN_BOOL, &b, sint(1)) == DLRUN_OK && b == 1, "1 -> %u", b);
    CHECK(store(DLRUN_BOOL, &b, sint(0)) == DLRUN_OK && b == 0, "0 -> %u", b);
    CHECK(store(DLRUN_BOOL, &b, sfloat(1.0)) == DLRUN_OK && b == 1, "1.0 -> %u", b);
    CHECK(store(DLRUN_BOOL, &b, sfloat(-0.0)) == DLRUN_OK && b == 0, "-0.0 -> %u", b);
    expect_fail(DLRUN_BOOL, sint(2),
                "value 2 does not fit in bool (expected true, false, 0 or 1)");
    expect_fail(DLRUN_BOOL, sint(-1),
                "value -1 does not fit in bool (expected true, false, 0 or 1)");
    expect_fail(DLRUN_BOOL, sfloat(0.5),
                "value 0.5 does not fit in bool (expected true, false, 0 or 1)");
    expect_fail(DLRUN_BOOL, sfloat(NAN),
                "value nan does not fit in bool (expected true, false, 0 or 1)");
    expect_fail(DLRUN_BOOL, scomplex(1, 0), "complex value (1+0j) cannot be stored in bool");

    b = 1;
    dlrun_scalar s = load(DLRUN_BOOL, &b);
    CHECK(s.kind == DLRUN_SCALAR_BOOL && s.b, "load 1");
    b = 0;
    s = load(DLRUN_BOOL, &b);
    CHECK(s.kind == DLRUN_SCALAR_BOOL && !s.b, "load 0");
    b = 2; /* imported bytes other than 0/1 read as true */
    s = load(DLRUN_BOOL, &b);
    CHECK(s.kind == DLRUN_SCALAR_BOOL && s.b, "load 2");
  }

  TEST("complex scalars fit only complex dtypes") {
    expect_fail(DLRUN_FLOAT32, scomplex(1, 2), "complex value (1+2j) cannot be stored in float32");
    expect_fail(DLRUN_FLOAT64, scomplex(1, -2),
                "complex value (1-2j) cannot be stored in float64");
    expect_fail(DLRUN_INT8, scomplex(0.5, NAN),
                "complex value (0.5+nanj) cannot be stored in int8");
    expect_fail(DLRUN_FLOAT16, scomplex(-INFINITY, -INFINITY),
                "complex value (-inf-infj) cannot be stored in float16");
    expect_fail(DLRUN_UINT64, scomplex(0, 0), "complex value (0+0j) cannot be stored in uint64");
    expect_fail(DLRUN_BFLOAT16, scomplex(0, -0.0),
                "complex value (0-0j) cannot be stored in bfloat16");
  }

  TEST("complex store and load") {
    dlrun_status st;
    dlrun_scalar s = round_trip(DLRUN_COMPLEX64, scomplex(1.5, -2.25), &st);
    CHECK(st == DLRUN_OK && s.kind == DLRUN_SCALAR_COMPLEX && s.re == 1.5 && s.im == -2.25,
          "complex64 (%g, %g)", s.re, s.im);
    s = round_trip(DLRUN_COMPLEX64, scomplex(0.1, 0.2), &st);
    CHECK(st == DLRUN_OK && s.re == (double)0.1f && s.im == (double)0.2f,
          "complex64 rounds parts to float: (%.17g, %.17g)", s.re, s.im);
    s = round_trip(DLRUN_COMPLEX128, scomplex(0.1, -0.2), &st);
    CHECK(st == DLRUN_OK && s.kind == DLRUN_SCALAR_COMPLEX && s.re == 0.1 && s.im == -0.2,
          "complex128 exact");
    s = round_trip(DLRUN_COMPLEX128, sfloat(3.5), &st);
    CHECK(st == DLRUN_OK && s.kind == DLRUN_SCALAR_COMPLEX && s.re == 3.5 && s.im == 0 &&
              !signbit(s.im),
          "real into complex128");
    s = round_trip(DLRUN_COMPLEX64, sint(16777217), &st);
    CHECK(st == DLRUN_OK && s.re == 16777216.0 && s.im == 0, "int into complex64: %.17g", s.re);
    s = round_trip(DLRUN_COMPLEX128, sint(-7), &st);
    CHECK(st == DLRUN_OK && s.re == -7.0 && s.im == 0, "int into complex128");
    s = round_trip(DLRUN_COMPLEX64, sbool(true), &st);
    CHECK(st == DLRUN_OK && s.re == 1.0 && s.im == 0, "bool into complex64");
    s = round_trip(DLRUN_COMPLEX128, scomplex(NAN, INFINITY), &st);
    CHECK(st == DLRUN_OK && isnan(s.re) && isinf(s.im), "nan/inf parts");

    unsigned char buf[16];
    CHECK(store(DLRUN_COMPLEX128, buf, scomplex(1.0, 2.0)) == DLRUN_OK, "store");
    double parts[2];
    memcpy(parts, buf, 16);
    CHECK(parts[0] == 1.0 && parts[1] == 2.0, "real part first");
    float fparts[2];
    CHECK(store(DLRUN_COMPLEX64, buf, scomplex(3.0, 4.0)) == DLRUN_OK, "store");
    memcpy(fparts, buf, 8);
    CHECK(fparts[0] == 3.0f && fparts[1] == 4.0f, "real part first (complex64)");
  }

  TEST("bools and ints into float dtypes") {
    dlrun_status st;
    dlrun_scalar s = round_trip(DLRUN_FLOAT32, sbool(true), &st);
    CHECK(st == DLRUN_OK && s.kind == DLRUN_SCALAR_FLOAT && s.re == 1.0, "true -> float32");
    s = round_trip(DLRUN_FLOAT64, sbool(false), &st);
    CHECK(st == DLRUN_OK && s.re == 0.0 && !signbit(s.re), "false -> float64");
    unsigned char buf[8];
    uint16_t h;
    CHECK(store(DLRUN_FLOAT16, buf, sbool(true)) == DLRUN_OK, "store");
    memcpy(&h, buf, 2);
    CHECK(h == 0x3C00, "true -> float16 %04x", h);
    CHECK(store(DLRUN_BFLOAT16, buf, sbool(true)) == DLRUN_OK, "store");
    memcpy(&h, buf, 2);
    CHECK(h == 0x3F80, "true -> bfloat16 %04x", h);

    /* float32 from int64: one C conversion (round to nearest even). */
    s = round_trip(DLRUN_FLOAT32, sint(16777217), &st);
    CHECK(st == DLRUN_OK && s.re == 16777216.0, "2^24+1 -> %.17g", s.re);
    s = round_trip(DLRUN_FLOAT32, sint(16777219), &st);
    CHECK(st == DLRUN_OK && s.re == 16777220.0, "2^24+3 -> %.17g", s.re);
    /* 2^53 + 2^29 + 1: via double it would tie at 2^53 + 2^29 and go to even
     * (2^53); directly it is above the float32 midpoint. */
    s = round_trip(DLRUN_FLOAT32, sint((INT64_C(1) << 53) + (INT64_C(1) << 29) + 1), &st);
    CHECK(st == DLRUN_OK && s.re == 9007200328482816.0, "int64 -> float32 %.17g", s.re);
    s = round_trip(DLRUN_FLOAT32, sint(INT64_MAX), &st);
    CHECK(st == DLRUN_OK && s.re == 9223372036854775808.0, "INT64_MAX -> float32");
    s = round_trip(DLRUN_FLOAT64, sint((INT64_C(1) << 53) + 1), &st);
    CHECK(st == DLRUN_OK && s.re == 9007199254740992.0, "2^53+1 -> float64 %.17g", s.re);
    s = round_trip(DLRUN_FLOAT64, sint(INT64_MIN), &st);
    CHECK(st == DLRUN_OK && s.re == -9223372036854775808.0, "INT64_MIN -> float64");
  }

  TEST("float32 and float64 stores") {
    dlrun_status st;
    dlrun_scalar s = round_trip(DLRUN_FLOAT32, sfloat(0.1), &st);
    CHECK(st == DLRUN_OK && s.kind == DLRUN_SCALAR_FLOAT && s.re == (double)0.1f, "0.1");
    s = round_trip(DLRUN_FLOAT32, sfloat(1e300), &st);
    CHECK(st == DLRUN_OK && isinf(s.re) && s.re > 0, "1e300 -> inf");
    s = round_trip(DLRUN_FLOAT32, sfloat(-0.0), &st);
    CHECK(st == DLRUN_OK && s.re == 0 && signbit(s.re), "-0.0");
    s = round_trip(DLRUN_FLOAT32, sfloat(NAN), &st);
    CHECK(st == DLRUN_OK && isnan(s.re), "nan");
    s = round_trip(DLRUN_FLOAT64, sfloat(0.1), &st);
    CHECK(st == DLRUN_OK && same_bits(s.re, 0.1), "0.1 exact in float64");
    s = round_trip(DLRUN_FLOAT64, sfloat(-INFINITY), &st);
    CHECK(st == DLRUN_OK && isinf(s.re) && s.re < 0, "-inf");
  }

  TEST("integer loads") {
    int8_t i8 = -128;
    dlrun_scalar s = load(DLRUN_INT8, &i8);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == -128, "int8");
    int16_t i16 = -32768;
    s = load(DLRUN_INT16, &i16);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == -32768, "int16");
    int32_t i32 = INT32_MIN;
    s = load(DLRUN_INT32, &i32);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == INT32_MIN, "int32");
    uint8_t u8 = 255;
    s = load(DLRUN_UINT8, &u8);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == 255, "uint8");
    uint16_t u16 = 65535;
    s = load(DLRUN_UINT16, &u16);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == 65535, "uint16");
    uint32_t u32 = UINT32_MAX;
    s = load(DLRUN_UINT32, &u32);
    CHECK(s.kind == DLRUN_SCALAR_INT && s.i == UINT32_MAX, "uint32");
  }

  TEST("misuse of store fails cleanly") {
    unsigned char buf[16];
    dlrun_scalar one = sint(1);
    CHECK(dlrun_dtype_store(DLRUN_DTYPE_COUNT, buf, &one) == DLRUN_ERR_VALUE, "bad dtype");
    CHECK_STR_CONTAINS(dlrun_last_error(), "invalid dtype");
    CHECK(dlrun_dtype_store(DLRUN_INT8, buf, NULL) == DLRUN_ERR_VALUE, "NULL value");
    CHECK(dlrun_dtype_store(DLRUN_INT8, NULL, &one) == DLRUN_ERR_VALUE, "NULL dst");
    dlrun_scalar bad = {.kind = (dlrun_scalar_kind)9};
    CHECK(dlrun_dtype_store(DLRUN_INT8, buf, &bad) == DLRUN_ERR_VALUE, "bad scalar kind");
  }
}

/* ---- unaligned access ---------------------------------------------------- */

static void test_unaligned(void) {
  TEST("store and load at odd addresses, neighbours untouched") {
    dlrun_scalar values[DLRUN_DTYPE_COUNT] = {
        [DLRUN_BOOL] = sbool(true),
        [DLRUN_INT8] = sint(-100),
        [DLRUN_INT16] = sint(-30000),
        [DLRUN_INT32] = sint(-2000000000),
        [DLRUN_INT64] = sint(INT64_MIN + 12345),
        [DLRUN_UINT8] = sint(200),
        [DLRUN_UINT16] = sint(60000),
        [DLRUN_UINT32] = sint(4000000000),
        [DLRUN_UINT64] = sint(INT64_MAX - 7),
        [DLRUN_FLOAT16] = sfloat(-1.5),
        [DLRUN_BFLOAT16] = sfloat(3.0),
        [DLRUN_FLOAT32] = sfloat(0.25),
        [DLRUN_FLOAT64] = sfloat(0.1),
        [DLRUN_COMPLEX64] = scomplex(1.25, -8.0),
        [DLRUN_COMPLEX128] = scomplex(0.1, 0.3),
        [DLRUN_FLOAT8_E3M4] = sfloat(-0.9375),
        [DLRUN_FLOAT8_E4M3] = sfloat(-1.5),
        [DLRUN_FLOAT8_E4M3B11FNUZ] = sfloat(30.0),
        [DLRUN_FLOAT8_E4M3FN] = sfloat(448.0),
        [DLRUN_FLOAT8_E4M3FNUZ] = sfloat(-0.125),
        [DLRUN_FLOAT8_E5M2] = sfloat(57344.0),
        [DLRUN_FLOAT8_E5M2FNUZ] = sfloat(-0.75),
        [DLRUN_FLOAT8_E8M0FNU] = sfloat(0x1p-127),
        [DLRUN_INT4] = sint(-7),
        [DLRUN_UINT4] = sint(13),
        [DLRUN_INT2] = sint(-2),
        [DLRUN_UINT2] = sint(3),
        [DLRUN_FLOAT4_E2M1FN] = sfloat(-1.5),
        [DLRUN_FLOAT6_E2M3FN] = sfloat(7.5),
        [DLRUN_FLOAT6_E3M2FN] = sfloat(-0.0625),
    };
    for (int d = 0; d < DLRUN_DTYPE_COUNT; d++) {
      size_t size = dlrun_dtype_get((dlrun_dtype)d)->size;
      for (size_t off = 1; off < 8; off += 2) {
        unsigned char buf[40];
        memset(buf, 0x5A, sizeof buf);
        dlrun_status st = dlrun_dtype_store((dlrun_dtype)d, buf + off, &values[d]);
        CHECK(st == DLRUN_OK, "%s at +%zu: %s", dlrun_dtype_get((dlrun_dtype)d)->name, off,
              dlrun_last_error());
        dlrun_scalar got;
        dlrun_dtype_load((dlrun_dtype)d, buf + off, &got);
        const dlrun_scalar *want = &values[d];
        bool same = got.kind == want->kind && got.b == want->b && got.i == want->i &&
                    got.re == want->re && got.im == want->im;
        CHECK(same, "%s at +%zu loaded kind %d i %" PRId64 " re %.17g im %.17g",
              dlrun_dtype_get((dlrun_dtype)d)->name, off, (int)got.kind, got.i, got.re, got.im);
        bool neighbours = true;
        for (size_t k = 0; k < sizeof buf; k++)
          if (k < off || k >= off + size) neighbours = neighbours && buf[k] == 0x5A;
        CHECK(neighbours, "%s at +%zu wrote outside its element",
              dlrun_dtype_get((dlrun_dtype)d)->name, off);
      }
    }
  }
}

/* ---- float16 ------------------------------------------------------------- */

static void test_float16(void) {
  TEST("float16: known values") {
    CHECK(dlrun_float16_from_double(1.0) == 0x3C00, "1.0");
    CHECK(dlrun_float16_from_double(-2.0) == 0xC000, "-2.0");
    CHECK(dlrun_float16_from_double(0.0) == 0x0000, "0.0");
    CHECK(dlrun_float16_from_double(-0.0) == 0x8000, "-0.0");
    CHECK(dlrun_float16_from_double(65504.0) == 0x7BFF, "65504");
    CHECK(dlrun_float16_from_double(65519.99) == 0x7BFF, "65519.99");
    CHECK(dlrun_float16_from_double(nextafter(65520.0, 0)) == 0x7BFF, "below 65520");
    CHECK(dlrun_float16_from_double(65520.0) == 0x7C00, "65520 -> inf");
    CHECK(dlrun_float16_from_double(-65520.0) == 0xFC00, "-65520 -> -inf");
    CHECK(dlrun_float16_from_double(1e300) == 0x7C00, "1e300 -> inf");
    CHECK(dlrun_float16_from_double(DBL_MAX) == 0x7C00, "DBL_MAX -> inf");
    CHECK(dlrun_float16_from_double(INFINITY) == 0x7C00, "inf");
    CHECK(dlrun_float16_from_double(-INFINITY) == 0xFC00, "-inf");
    CHECK(dlrun_float16_from_double(ldexp(1, -14)) == 0x0400, "smallest normal");
    CHECK(dlrun_float16_from_double(ldexp(1, -24)) == 0x0001, "smallest subnormal 2^-24");
    CHECK(dlrun_float16_from_double(ldexp(1, -25)) == 0x0000, "2^-25 ties to 0");
    CHECK(dlrun_float16_from_double(-ldexp(1, -25)) == 0x8000, "-2^-25 ties to -0");
    CHECK(dlrun_float16_from_double(nextafter(ldexp(1, -25), 1)) == 0x0001, "above 2^-25");
    CHECK(dlrun_float16_from_double(nextafter(ldexp(1, -25), 0)) == 0x0000, "below 2^-25");
    CHECK(dlrun_float16_from_double(3 * ldexp(1, -25)) == 0x0002, "1.5 * 2^-24 ties to 2");
    CHECK(dlrun_float16_from_double(ldexp(1023.5, -24)) == 0x0400, "subnormal carry to normal");
    CHECK(dlrun_float16_from_double(4.9e-324) == 0x0000, "double subnormal -> 0");
    CHECK(dlrun_float16_from_double(-4.9e-324) == 0x8000, "-double subnormal -> -0");
    CHECK(dlrun_float16_from_double(0.1) == 0x2E66, "0.1");
    CHECK(dlrun_float16_from_double(1.0 / 3) == 0x3555, "1/3");
    CHECK(dlrun_float16_to_double(0x7BFF) == 65504.0, "to_double 65504");
    CHECK(dlrun_float16_to_double(0x0001) == ldexp(1, -24), "to_double 2^-24");
    CHECK(dlrun_float16_to_double(0x03FF) == ldexp(1023, -24), "largest subnormal");
    CHECK(same_bits(dlrun_float16_to_double(0x8000), -0.0), "to_double -0");
    CHECK(dlrun_float16_to_double(0xFC00) == -INFINITY, "to_double -inf");
  }

  TEST("float16: NaN stays NaN, quiet, with its sign") {
    uint16_t h = dlrun_float16_from_double(NAN);
    CHECK(f16_is_nan(h) && (h & 0x0200) && !(h & 0x8000), "nan -> %04x", h);
    h = dlrun_float16_from_double(-NAN);
    CHECK(f16_is_nan(h) && (h & 0x0200) && (h & 0x8000), "-nan -> %04x", h);
    /* A double NaN whose payload sits only in low bits still gives a NaN. */
    uint64_t u = UINT64_C(0x7FF0000000000001);
    double snan;
    memcpy(&snan, &u, 8);
    h = dlrun_float16_from_double(snan);
    CHECK(f16_is_nan(h) && (h & 0x0200), "low-payload nan -> %04x", h);
    CHECK(isnan(dlrun_float16_to_double(0x7E00)), "to_double 7e00");
    CHECK(isnan(dlrun_float16_to_double(0xFC01)) && signbit(dlrun_float16_to_double(0xFC01)),
          "to_double fc01");
  }

  TEST("float16: all 65536 patterns round-trip through double") {
    int bad = 0;
    for (uint32_t p = 0; p < 65536; p++) {
      uint16_t h = (uint16_t)p;
      double d = dlrun_float16_to_double(h);
      uint16_t back = dlrun_float16_from_double(d);
      bool ok;
      if (f16_is_nan(h))
        ok = isnan(d) && f16_is_nan(back) && (back & 0x0200) && (back & 0x8000) == (h & 0x8000) &&
             (!(h & 0x0200) || back == h);
      else
        ok = back == h && !isnan(d);
      if (!ok && bad++ < 5) CHECK(ok, "%04x -> %.17g -> %04x", h, d, back);
    }
    CHECK(bad == 0, "%d patterns failed", bad);
  }

  TEST("float16: finite values are increasing") {
    int bad = 0;
    for (uint32_t p = 0; p < 0x7BFF; p++)
      if (!(dlrun_float16_to_double((uint16_t)p) < dlrun_float16_to_double((uint16_t)(p + 1))))
        bad++;
    CHECK(bad == 0, "%d pairs out of order", bad);
  }

  TEST("float16: midpoints round to even, neighbours to nearest") {
    int bad = 0;
    for (uint32_t p = 0; p < 0x7C00; p++) {
      double a = dlrun_float16_to_double((uint16_t)p);
      double b = p + 1 == 0x7C00 ? 65536.0 : dlrun_float16_to_double((uint16_t)(p + 1));
      double mid = (a + b) / 2; /* exact: 12 significant bits */
      uint16_t even = (p & 1) ? (uint16_t)(p + 1) : (uint16_t)p;
      uint16_t got = dlrun_float16_from_double(mid);
      uint16_t neg = dlrun_float16_from_double(-mid);
      uint16_t up = dlrun_float16_from_double(nextafter(mid, INFINITY));
      uint16_t down = dlrun_float16_from_double(nextafter(mid, 0));
      bool ok = got == even && neg == (even | 0x8000) && up == p + 1 && down == p;
      if (!ok && bad++ < 5)
        CHECK(ok, "pair %04x: mid %.17g -> %04x, -mid %04x, up %04x, down %04x", p, mid, got,
              neg, up, down);
    }
    CHECK(bad == 0, "%d midpoints failed", bad);
  }

  TEST("float16: random doubles match a reference rounding") {
    int bad = 0;
    for (int k = 0; k < 200000; k++) {
      uint64_t r = rng_next();
      uint16_t lo = (uint16_t)(r % 0x7BFF); /* lo + 1 is finite */
      double a = dlrun_float16_to_double(lo), b = dlrun_float16_to_double((uint16_t)(lo + 1));
      double t = (double)(r >> 11) * 0x1p-53;
      double v = a + (b - a) * t;
      if (v < a) v = a;
      if (v > b) v = b;
      uint16_t want = reference_round(dlrun_float16_to_double, lo, v);
      uint16_t got = dlrun_float16_from_double(v);
      if (got != want && bad++ < 5) CHECK(got == want, "%.17g -> %04x, want %04x", v, got, want);
    }
    CHECK(bad == 0, "%d random values failed", bad);
  }

  TEST("float16: no double rounding through float32") {
    /* Just above the midpoint of 1 and 1+2^-10; float32 rounds it onto the
     * midpoint, which would then tie down to 1.0. */
    double v = 1.0 + ldexp(1, -11) + ldexp(1, -40);
    CHECK((double)(float)v == 1.0 + ldexp(1, -11), "the case is a double-rounding trap");
    CHECK(dlrun_float16_from_double(v) == 0x3C01, "got %04x", dlrun_float16_from_double(v));
  }

  TEST("float16: store and load") {
    unsigned char buf[2];
    uint16_t h;
    struct {
      dlrun_scalar s;
      uint16_t bits;
    } cases[] = {
        {sfloat(65504.0), 0x7BFF}, {sfloat(65520.0), 0x7C00}, {sfloat(-65520.0), 0xFC00},
        {sint(65504), 0x7BFF},     {sint(65519), 0x7BFF},     {sint(65520), 0x7C00},
        {sint(-65520), 0xFC00},    {sint(INT64_MAX), 0x7C00}, {sint(INT64_MIN), 0xFC00},
        {sint(2049), 0x6800},      {sint(2051), 0x6802},      {sint(-3), 0xC200},
        {sint(0), 0x0000},         {sfloat(-0.0), 0x8000},    {sfloat(ldexp(1, -25)), 0x0000},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      CHECK(store(DLRUN_FLOAT16, buf, cases[k].s) == DLRUN_OK, "case %zu", k);
      memcpy(&h, buf, 2);
      CHECK(h == cases[k].bits, "case %zu: %04x, want %04x", k, h, cases[k].bits);
    }
    h = 0x3555;
    dlrun_scalar s = load(DLRUN_FLOAT16, &h);
    CHECK(s.kind == DLRUN_SCALAR_FLOAT && s.re == dlrun_float16_to_double(0x3555), "load");
  }
}

/* ---- bfloat16 ------------------------------------------------------------ */

static void test_bfloat16(void) {
  TEST("bfloat16: known values") {
    CHECK(dlrun_bfloat16_from_double(1.0) == 0x3F80, "1.0");
    CHECK(dlrun_bfloat16_from_double(-2.0) == 0xC000, "-2.0");
    CHECK(dlrun_bfloat16_from_double(-0.0) == 0x8000, "-0.0");
    CHECK(dlrun_bfloat16_from_double(0.1) == 0x3DCD, "0.1");
    CHECK(dlrun_bfloat16_from_double(3.0) == 0x4040, "3.0");
    double max = dlrun_bfloat16_to_double(0x7F7F);
    CHECK(max == ldexp(255, 120), "max %.17g", max);
    CHECK(dlrun_bfloat16_from_double(max) == 0x7F7F, "max");
    CHECK(dlrun_bfloat16_from_double(ldexp(511, 119)) == 0x7F80, "max/inf midpoint -> inf");
    CHECK(dlrun_bfloat16_from_double(nextafter(ldexp(511, 119), 0)) == 0x7F7F, "below it");
    CHECK(dlrun_bfloat16_from_double(FLT_MAX) == 0x7F80, "FLT_MAX -> inf");
    CHECK(dlrun_bfloat16_from_double(-1e300) == 0xFF80, "-1e300 -> -inf");
    CHECK(dlrun_bfloat16_from_double(INFINITY) == 0x7F80, "inf");
    CHECK(dlrun_bfloat16_from_double(ldexp(1, -126)) == 0x0080, "smallest normal");
    CHECK(dlrun_bfloat16_from_double(ldexp(1, -133)) == 0x0001, "smallest subnormal");
    CHECK(dlrun_bfloat16_from_double(ldexp(1, -134)) == 0x0000, "2^-134 ties to 0");
    CHECK(dlrun_bfloat16_from_double(nextafter(ldexp(1, -134), 1)) == 0x0001, "above 2^-134");
    CHECK(dlrun_bfloat16_from_double(-ldexp(3, -134)) == 0x8002, "-1.5 * 2^-133 ties to 2");
    CHECK(dlrun_bfloat16_from_double(4.9e-324) == 0x0000, "double subnormal -> 0");
    CHECK(dlrun_bfloat16_to_double(0x0001) == ldexp(1, -133), "to_double smallest");
    CHECK(same_bits(dlrun_bfloat16_to_double(0x8000), -0.0), "to_double -0");
    uint16_t h = dlrun_bfloat16_from_double(NAN);
    CHECK(bf16_is_nan(h) && (h & 0x0040) && !(h & 0x8000), "nan -> %04x", h);
    h = dlrun_bfloat16_from_double(-NAN);
    CHECK(bf16_is_nan(h) && (h & 0x0040) && (h & 0x8000), "-nan -> %04x", h);
  }

  TEST("bfloat16: all 65536 patterns round-trip through double") {
    int bad = 0;
    for (uint32_t p = 0; p < 65536; p++) {
      uint16_t h = (uint16_t)p;
      double d = dlrun_bfloat16_to_double(h);
      uint16_t back = dlrun_bfloat16_from_double(d);
      bool ok;
      if (bf16_is_nan(h))
        ok = isnan(d) && bf16_is_nan(back) && (back & 0x0040) &&
             (back & 0x8000) == (h & 0x8000) && (!(h & 0x0040) || back == h);
      else
        ok = back == h && !isnan(d);
      /* bfloat16 is the top half of a float32: check to_double against that. */
      uint32_t f32 = (uint32_t)h << 16;
      float f;
      memcpy(&f, &f32, 4);
      ok = ok && (bf16_is_nan(h) ? isnan(f) : (double)f == d);
      if (!ok && bad++ < 5) CHECK(ok, "%04x -> %.17g -> %04x", h, d, back);
    }
    CHECK(bad == 0, "%d patterns failed", bad);
  }

  TEST("bfloat16: midpoints round to even, neighbours to nearest") {
    int bad = 0;
    for (uint32_t p = 0; p < 0x7F80; p++) {
      double a = dlrun_bfloat16_to_double((uint16_t)p);
      double b = p + 1 == 0x7F80 ? ldexp(1, 128) : dlrun_bfloat16_to_double((uint16_t)(p + 1));
      double mid = (a + b) / 2;
      uint16_t even = (p & 1) ? (uint16_t)(p + 1) : (uint16_t)p;
      uint16_t got = dlrun_bfloat16_from_double(mid);
      uint16_t neg = dlrun_bfloat16_from_double(-mid);
      uint16_t up = dlrun_bfloat16_from_double(nextafter(mid, INFINITY));
      uint16_t down = dlrun_bfloat16_from_double(nextafter(mid, 0));
      bool ok = got == even && neg == (even | 0x8000) && up == p + 1 && down == p;
      if (!ok && bad++ < 5)
        CHECK(ok, "pair %04x: mid %.17g -> %04x, -mid %04x, up %04x, down %04x", p, mid, got,
              neg, up, down);
    }
    CHECK(bad == 0, "%d midpoints failed", bad);
  }

  TEST("bfloat16: random doubles match a reference rounding") {
    int bad = 0;
    for (int k = 0; k < 200000; k++) {
      uint64_t r = rng_next();
      uint16_t lo = (uint16_t)(r % 0x7F7F);
      double a = dlrun_bfloat16_to_double(lo), b = dlrun_bfloat16_to_double((uint16_t)(lo + 1));
      double t = (double)(r >> 11) * 0x1p-53;
      double v = a + (b - a) * t;
      if (v < a) v = a;
      if (v > b) v = b;
      uint16_t want = reference_round(dlrun_bfloat16_to_double, lo, v);
      uint16_t got = dlrun_bfloat16_from_double(v);
      if (got != want && bad++ < 5) CHECK(got == want, "%.17g -> %04x, want %04x", v, got, want);
    }
    CHECK(bad == 0, "%d random values failed", bad);
  }

  TEST("bfloat16: no double rounding through float32") {
    /* Just above the midpoint of 1 and 1+2^-7; float32 rounds it onto the
     * midpoint, which would then tie down to 1.0. */
    double v = 1.0 + ldexp(1, -8) + ldexp(1, -30);
    CHECK((double)(float)v == 1.0 + ldexp(1, -8), "the case is a double-rounding trap");
    CHECK(dlrun_bfloat16_from_double(v) == 0x3F81, "got %04x", dlrun_bfloat16_from_double(v));
    CHECK(dlrun_bfloat16_from_double(-v) == 0xBF81, "negative");
    unsigned char buf[2];
    uint16_t h;
    CHECK(store(DLRUN_BFLOAT16, buf, sfloat(v)) == DLRUN_OK, "store");
    memcpy(&h, buf, 2);
    CHECK(h == 0x3F81, "stored %04x", h);
  }

  TEST("bfloat16: int64 values round once") {
    unsigned char buf[2];
    uint16_t h;
    struct {
      int64_t i;
      uint16_t bits;
    } cases[] = {
        {257, 0x4380},
        {259, 0x4382},
        {-3, 0xC040},
        {INT64_MAX, 0x5F00},
        {INT64_MIN, 0xDF00},
        /* 2^62 + 2^54 + 1: via double it lands on the bfloat16 midpoint 2^62
         * + 2^54 and ties down to 2^62; the exact value rounds up. */
        {(INT64_C(1) << 62) + (INT64_C(1) << 54) + 1, 0x5E81},
        {(INT64_C(1) << 62) + (INT64_C(1) << 54), 0x5E80},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      CHECK(store(DLRUN_BFLOAT16, buf, sint(cases[k].i)) == DLRUN_OK, "case %zu", k);
      memcpy(&h, buf, 2);
      CHECK(h == cases[k].bits, "%" PRId64 ": %04x, want %04x", cases[k].i, h, cases[k].bits);
    }
    CHECK(dlrun_bfloat16_from_double((double)((INT64_C(1) << 62) + (INT64_C(1) << 54) + 1)) ==
              0x5E80,
          "the int64 case is a double-rounding trap");
    h = 0x4049;
    dlrun_scalar s = load(DLRUN_BFLOAT16, &h);
    CHECK(s.kind == DLRUN_SCALAR_FLOAT && s.re == 3.140625, "load %.17g", s.re);
  }
}

/* ---- comparing by value (np.equal) ---------------------------------------- */

/* Three elements of a real or complex dtype: {1, v, 2} (v + v*i for complex). */
static void three(dlrun_dtype dtype, double v, unsigned char *out) {
  size_t size = dlrun_dtype_get(dtype)->size;
  bool cplx = dlrun_dtype_get(dtype)->kind == DLRUN_KIND_COMPLEX;
  double values[3] = {1, v, 2};
  memset(out, 0, 3 * size); /* packed dtypes write bit by bit */
  for (int k = 0; k < 3; k++) {
    dlrun_scalar v = cplx ? scomplex(values[k], values[k]) : sfloat(values[k]);
    dlrun_dtype_store_at(dtype, out, k, &v); /* packed dtypes: a packed run */
  }
}

static void test_compare(void) {
  TEST("floats and complex numbers compare by value: -0.0 equals 0.0, NaN equals nothing") {
    for (int d = 0; d < DLRUN_DTYPE_COUNT; d++) {
      dlrun_dtype_kind kind = dlrun_dtype_get((dlrun_dtype)d)->kind;
      if (kind != DLRUN_KIND_FLOAT && kind != DLRUN_KIND_COMPLEX) continue;
      unsigned char a[48], b[48];
      const char *name = dlrun_dtype_get((dlrun_dtype)d)->name;
      three((dlrun_dtype)d, 0.0, a);
      three((dlrun_dtype)d, -0.0, b);
      /* the fnuz formats have no -0 (0x80 is NaN); e8m0fnu has no zero */
      bool fnuz = d == DLRUN_FLOAT8_E4M3B11FNUZ || d == DLRUN_FLOAT8_E4M3FNUZ ||
                  d == DLRUN_FLOAT8_E5M2FNUZ;
      if (d == DLRUN_FLOAT8_E8M0FNU) {
        CHECK(dlrun_dtype_first_unequal((dlrun_dtype)d, a, b, 3) == 1, "%s: 0 is NaN", name);
      } else {
        CHECK((memcmp(a, b, 3 * dlrun_dtype_get((dlrun_dtype)d)->size) != 0) != fnuz,
              "%s: bytes differ (same in fnuz formats)", name);
        CHECK(dlrun_dtype_first_unequal((dlrun_dtype)d, a, b, 3) == -1, "%s: -0.0 == 0.0", name);
      }
      three((dlrun_dtype)d, NAN, a);
      /* the sub-byte floats have no NaN: it stores as a zero */
      bool has_nan = dlrun_dtype_get((dlrun_dtype)d)->dl_bits >= 8;
      CHECK(dlrun_dtype_first_unequal((dlrun_dtype)d, a, a, 3) == (has_nan ? 1 : -1),
            "%s: NaN != NaN", name);
      CHECK(dlrun_dtype_first_unequal((dlrun_dtype)d, a, a, 1) == -1, "%s: before the NaN", name);
      three((dlrun_dtype)d, 0.5, b);
      CHECK(dlrun_dtype_first_unequal((dlrun_dtype)d, b, b, 3) == -1, "%s: equal", name);
      CHECK(dlrun_dtype_first_unequal((dlrun_dtype)d, a, b, 0) == -1, "%s: no elements", name);
    }
    unsigned char c[16];
    store(DLRUN_COMPLEX128, c, scomplex(1, NAN));
    CHECK(dlrun_dtype_first_unequal(DLRUN_COMPLEX128, c, c, 1) == 0, "a NaN imaginary part");
  }

  TEST("integers and bools compare exactly, uint64 beyond 2^53 too") {
    uint64_t u[2] = {UINT64_MAX, UINT64_MAX - 1}, v[2] = {UINT64_MAX, UINT64_MAX};
    CHECK(dlrun_dtype_first_unequal(DLRUN_UINT64, u, v, 2) == 1, "uint64 near 2^64");
    int32_t i[2] = {5, 6}, j[2] = {5, 7};
    CHECK(dlrun_dtype_first_unequal(DLRUN_INT32, i, j, 2) == 1, "int32");
    CHECK(dlrun_dtype_first_unequal(DLRUN_INT32, i, i, 2) == -1, "int32 equal");
    uint8_t t[2] = {1, 0}, f[2] = {1, 1};
    CHECK(dlrun_dtype_first_unequal(DLRUN_BOOL, t, f, 2) == 1, "bool");
  }
}

/* ---- the float8 family -------------------------------------------------- */

static void test_float8(void) {
  TEST("float8: ml_dtypes' limits, overflow, NaN and zero rules through dlrun_dtype_store") {
    static const struct {
      dlrun_dtype dt;
      double v;
      uint8_t want;
    } cases[] = {
        {DLRUN_FLOAT8_E4M3FN, 448.0, 0x7E},       {DLRUN_FLOAT8_E4M3FN, 464.0, 0x7E},
        {DLRUN_FLOAT8_E4M3FN, 464.5, 0x7F},       {DLRUN_FLOAT8_E4M3FN, -1e300, 0xFF},
        {DLRUN_FLOAT8_E4M3FN, INFINITY, 0x7F},    {DLRUN_FLOAT8_E4M3FN, -0.0, 0x80},
        {DLRUN_FLOAT8_E4M3FN, 0x1p-9, 0x01},      {DLRUN_FLOAT8_E4M3FN, 0x1p-10, 0x00},
        {DLRUN_FLOAT8_E4M3FN, 0x1.8p-10, 0x01},   {DLRUN_FLOAT8_E4M3FN, 0.1, 0x1D},
        {DLRUN_FLOAT8_E4M3, 240.0, 0x77},         {DLRUN_FLOAT8_E4M3, 248.0, 0x78},
        {DLRUN_FLOAT8_E4M3, -INFINITY, 0xF8},     {DLRUN_FLOAT8_E4M3, NAN, 0x7C},
        {DLRUN_FLOAT8_E3M4, 15.5, 0x6F},          {DLRUN_FLOAT8_E3M4, 15.75, 0x70},
        {DLRUN_FLOAT8_E3M4, 0x1p-6, 0x01},        {DLRUN_FLOAT8_E3M4, NAN, 0x78},
        {DLRUN_FLOAT8_E5M2, 57344.0, 0x7B},       {DLRUN_FLOAT8_E5M2, 61440.0, 0x7C},
        {DLRUN_FLOAT8_E5M2, 0x1p-16, 0x01},       {DLRUN_FLOAT8_E5M2, NAN, 0x7E},
        {DLRUN_FLOAT8_E5M2FNUZ, 57344.0, 0x7F},   {DLRUN_FLOAT8_E5M2FNUZ, 61440.0, 0x80},
        {DLRUN_FLOAT8_E5M2FNUZ, -0.0, 0x00},      {DLRUN_FLOAT8_E5M2FNUZ, -0x1p-19, 0x00},
        {DLRUN_FLOAT8_E5M2FNUZ, 0x1p-17, 0x01},   {DLRUN_FLOAT8_E5M2FNUZ, -INFINITY, 0x80},
        {DLRUN_FLOAT8_E4M3FNUZ, 240.0, 0x7F},     {DLRUN_FLOAT8_E4M3FNUZ, 248.0, 0x80},
        {DLRUN_FLOAT8_E4M3FNUZ, 0x1p-10, 0x01},   {DLRUN_FLOAT8_E4M3FNUZ, -1.0, 0xC0},
        {DLRUN_FLOAT8_E4M3B11FNUZ, 30.0, 0x7F},   {DLRUN_FLOAT8_E4M3B11FNUZ, 31.0, 0x80},
        {DLRUN_FLOAT8_E4M3B11FNUZ, 0x1p-13, 0x01}, {DLRUN_FLOAT8_E4M3B11FNUZ, 1.0, 0x58},
        {DLRUN_FLOAT8_E8M0FNU, 1.0, 0x7F},        {DLRUN_FLOAT8_E8M0FNU, 0x1p127, 0xFE},
        {DLRUN_FLOAT8_E8M0FNU, 0x1.8p127, 0xFF},  {DLRUN_FLOAT8_E8M0FNU, 0x1p-127, 0x00},
        {DLRUN_FLOAT8_E8M0FNU, 0x1p-200, 0x00},   {DLRUN_FLOAT8_E8M0FNU, 0.0, 0xFF},
        {DLRUN_FLOAT8_E8M0FNU, -2.0, 0xFF},       {DLRUN_FLOAT8_E8M0FNU, 3.0, 0x81},
        {DLRUN_FLOAT8_E8M0FNU, 2.9, 0x80},        {DLRUN_FLOAT8_E8M0FNU, INFINITY, 0xFF},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      uint8_t b = 0x5A;
      CHECK(store(cases[k].dt, &b, sfloat(cases[k].v)) == DLRUN_OK, "store: %s",
            dlrun_last_error());
      CHECK(b == cases[k].want, "%s(%a) = 0x%02X, want 0x%02X",
            dlrun_dtype_get(cases[k].dt)->name, cases[k].v, b, cases[k].want);
    }
  }

  TEST("float8: integers round once (int64 extremes included), bools are 0 and 1") {
    uint8_t b = 0;
    CHECK(store(DLRUN_FLOAT8_E4M3FN, &b, sint(465)) == DLRUN_OK && b == 0x7F, "465 -> %02X", b);
    CHECK(store(DLRUN_FLOAT8_E4M3FN, &b, sint(464)) == DLRUN_OK && b == 0x7E, "464 -> %02X", b);
    CHECK(store(DLRUN_FLOAT8_E5M2, &b, sint(INT64_MIN)) == DLRUN_OK && b == 0xFC, "min -> %02X",
          b);
    CHECK(store(DLRUN_FLOAT8_E8M0FNU, &b, sint(INT64_MAX)) == DLRUN_OK && b == 0xBE,
          "max -> %02X", b);
    CHECK(store(DLRUN_FLOAT8_E8M0FNU, &b, sint(0)) == DLRUN_OK && b == 0xFF, "0 -> %02X", b);
    CHECK(store(DLRUN_FLOAT8_E4M3FNUZ, &b, sbool(true)) == DLRUN_OK && b == 0x40, "true -> %02X",
          b);
    CHECK(store(DLRUN_FLOAT8_E4M3FNUZ, &b, sbool(false)) == DLRUN_OK && b == 0x00,
          "false -> %02X", b);
    b = 0x11;
    CHECK(store(DLRUN_FLOAT8_E4M3FN, &b, scomplex(1, 2)) == DLRUN_ERR_VALUE, "complex accepted");
    CHECK(b == 0x11, "dst changed on failure");
    CHECK_STR_CONTAINS(dlrun_last_error(),
                       "complex value (1+2j) cannot be stored in float8_e4m3fn");
  }

  TEST("float8: every pattern loads as a FLOAT and stores back to itself (NaNs: the format's)") {
    for (int dt = DLRUN_FLOAT8_E3M4; dt <= DLRUN_FLOAT8_E8M0FNU; dt++) {
      const char *name = dlrun_dtype_get((dlrun_dtype)dt)->name;
      int nans = 0;
      for (int p = 0; p < 256; p++) {
        uint8_t in = (uint8_t)p, out = 0;
        dlrun_scalar v = load((dlrun_dtype)dt, &in);
        CHECK(v.kind == DLRUN_SCALAR_FLOAT, "%s 0x%02X kind %d", name, p, (int)v.kind);
        if (isnan(v.re)) {
          nans++;
          CHECK(signbit(v.re) == ((p & 0x80) != 0 && dt != DLRUN_FLOAT8_E8M0FNU),
                "%s 0x%02X: NaN sign", name, p);
          continue;
        }
        CHECK(store((dlrun_dtype)dt, &out, v) == DLRUN_OK && out == in, "%s 0x%02X -> %g -> 0x%02X",
              name, p, v.re, out);
      }
      int want = dt == DLRUN_FLOAT8_E3M4 ? 30 : dt == DLRUN_FLOAT8_E4M3 ? 14
                 : dt == DLRUN_FLOAT8_E4M3FN ? 2 : dt == DLRUN_FLOAT8_E5M2 ? 6 : 1;
      CHECK(nans == want, "%s: %d NaN patterns, want %d", name, nans, want);
    }
  }
}

int main(void) {
  test_table();
  test_lookup_errors();
  test_integer_ranges();
  test_bool_and_complex();
  test_unaligned();
  test_float16();
  test_bfloat16();
  test_compare();
  test_float8();
  return check_summary("dtype");
}
