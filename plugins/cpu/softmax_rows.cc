// Note [Softmax kernels]
//
// softmax and log_softmax of float32 rows in three passes over a row, which
// stays in L1 between them: the max; exp(x - max) and its sum; the result,
// e * (1 / sum) or (x - max) - log(sum). The passes run on vectors of 16
// floats (GCC vector extensions; the build has no -march flags, so the
// entry points are compiled per instruction set with target_clones and
// picked at load, as the sparse convolution's are).
//
// exp: n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts, the first
// with few enough bits that n times it is exact, so r is exact up to the
// second part's rounding), exp(r) = 1 + r + r^2 q(r) on |r| <= ln(2) / 2,
// where q is a degree-4 polynomial fitted to (exp(r) - 1 - r) / r^2
// (approximation error 0.06 ulp), then times 2^n as two powers of two, so
// that results below float's normal range round once, correctly, into
// subnormals. The whole is within 1 ulp of exp's float64 value rounded to
// float32. n comes from adding 1.5 * 2^23, whose bits then hold it as an
// integer: no float-to-int conversion, so a NaN stays NaN without undefined
// behaviour. exp(0) is exactly 1.
//
// The sum: four vectors' terms are added per lane in float (two
// roundings, 4 terms), then into float64 lanes, so the sum's relative error
// stays near float's unit roundoff whatever the row's length. The row's
// max contributes exp(0) = 1 exactly, so sum >= 1 and every
// log-probability (x - max) - log(sum) is <= 0: a sum of two non-positive
// terms, so neither rounding cancels. Where one element dominates, its
// log-probability is -log(1 + rest) with rest tiny, which 1 + rest would
// round away (PyTorch's float32 gives 0 for row [30, 0], oneDNN's
// approximate exp gave +1.4e-6): log_softmax therefore counts the terms
// equal to 1 (the max and its ties) apart from the rest and takes
// log1p(rest) when there is one, giving -9.36e-14 there. Measured against
// the exact values (Softmax.Float32WithinStatedUlpsOfExact): log_softmax
// within 2 ulps where |y| >= 0.01, and 3 + |ln |y|| ulps closer to 0,
// where the rounding of x - max in the few terms that make up `rest`
// shows; softmax within 3 + |x - max| ulps, the rounding of x - max that
// every float32 softmax carries into its exponent. Computing x - max
// exactly (a two-sum per element) removes both but costs a quarter of
// log_softmax's speed.
//
// Non-finite rows: PyTorch gives NaN for the whole row when the row holds a
// NaN or +inf or only -inf. Here the max skips NaNs; then a NaN element, or
// +inf - +inf, or -inf - -inf, puts a NaN into the sum, and every element
// of the row is multiplied by or offset from it.
#include "softmax_rows.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace bp_cpu {
namespace {

using Floats = float __attribute__((vector_size(64)));  // 16 lanes
using Half = float __attribute__((vector_size(32)));
using Doubles = double __attribute__((vector_size(64)));
using Bits = uint32_t __attribute__((vector_size(64)));
using SignedBits = int32_t __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;
static_assert(kLanes == kSoftmaxColumns);

// The helpers take and give vectors by reference: returning one by value
// from a function compiled for the baseline instruction set changes the ABI
// (GCC warns, Clang refuses), even where every call is inlined.

[[gnu::always_inline]] inline void load(Floats& v, const float* p) { std::memcpy(&v, p, sizeof v); }
[[gnu::always_inline]] inline void store(float* p, const Floats& v) { std::memcpy(p, &v, sizeof v); }

// The first w < kLanes lanes from p, the others `fill`.
[[gnu::always_inline]] inline void loadPart(Floats& v, const float* p, int64_t w, float fill) {
  float tmp[kLanes];
  for (int64_t c = 0; c < kLanes; ++c) tmp[c] = c < w ? p[c] : fill;
  load(v, tmp);
}
[[gnu::always_inline]] inline void storePart(float* p, const Floats& v, int64_t w) {
  float tmp[kLanes];
  store(tmp, v);
  for (int64_t c = 0; c < w; ++c) p[c] = tmp[c];
}

// m = max(m, v) per lane; a NaN in v is skipped.
[[gnu::always_inline]] inline void keepMax(Floats& m, const Floats& v) { m = v > m ? v : m; }

// Adds the 16 floats of v, as float64, into two accumulators of 8.
[[gnu::always_inline]] inline void accumulate(Doubles& lo, Doubles& hi, const Floats& v) {
  Half a, b;
  std::memcpy(&a, &v, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
  lo += __builtin_convertvector(a, Doubles);
  hi += __builtin_convertvector(b, Doubles);
}

// log_softmax's sum: lanes of e equal to 1 (the max, and any tie) are
// counted in `ones` and set to 0 (see Note [Softmax kernels]).
[[gnu::always_inline]] inline void dropOnes(SignedBits& ones, Floats& e) {
  const SignedBits is_one = e == 1.0f;  // -1 where true
  ones -= is_one;
  e = __builtin_bit_cast(Floats, __builtin_bit_cast(SignedBits, e) & ~is_one);
}

// log(ones + rest), rounded to float: with one 1, log1p(rest), whose
// small values keep their digits where 1 + rest would lose them.
inline float logSum(int64_t ones, double rest) {
  return static_cast<float>(ones == 1 ? std::log1p(rest) : std::log(static_cast<double>(ones) + rest));
}

[[gnu::always_inline]] inline double total(const Doubles& v) {
  double s = 0;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}
[[gnu::always_inline]] inline float largest(const Floats& v) {
  float m = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// x = exp(x), lane by lane; with NonPositive, for x <= 0 or NaN only.
template <bool NonPositive = false>
[[gnu::always_inline]] inline void expInPlace(Floats& x) {
  constexpr float kLog2e = 1.44269504f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194442e-4f;
  // Below -110 exp is 0 in float (and -inf lands there); above 89, inf.
  // (Written as max and min with x second, so that a NaN stays.)
  const Floats lowest = Floats{} - 110.0f, highest = Floats{} + 89.0f;
  x = lowest > x ? lowest : x;
  if constexpr (!NonPositive) x = highest < x ? highest : x;
  const Floats t = x * kLog2e + kRound;
  const Floats n = t - kRound;
  Floats r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  Floats q = Floats{} + 1.375140739e-3f;
  q = q * r + 8.368915878e-3f;
  q = q * r + 4.166953266e-2f;
  q = q * r + 1.666651815e-1f;
  q = q * r + 4.999998808e-1f;
  // n in [-159, 128] as an integer, then 2^n = 2^n1 * 2^n2 with both
  // halves in float's normal range.
  constexpr uint32_t kRoundBits = 0x4b400000u;
  const Bits k = __builtin_bit_cast(Bits, t) - kRoundBits;
  const Bits k1 = __builtin_bit_cast(Bits, __builtin_bit_cast(SignedBits, k) >> 1);
  const Bits k2 = k - k1;
  const Bits b1 = (k1 + 127u) << 23, b2 = (k2 + 127u) << 23;
  x = (1.0f + (r + r * r * q)) * __builtin_bit_cast(Floats, b1) * __builtin_bit_cast(Floats, b2);
}

template <bool Log>
[[gnu::always_inline]] inline void rowImpl(const float* x, float* y, int64_t n) {
  const int64_t full = n / kLanes * kLanes, rest = n - full;
  const float inf = std::numeric_limits<float>::infinity();
  // Max, four vectors at a time (independent chains).
  Floats m0 = Floats{} - inf, m1 = m0, m2 = m0, m3 = m0, v0, v1, v2, v3;
  int64_t j = 0;
  for (; j + 4 * kLanes <= full; j += 4 * kLanes) {
    load(v0, x + j);
    load(v1, x + j + kLanes);
    load(v2, x + j + 2 * kLanes);
    load(v3, x + j + 3 * kLanes);
    keepMax(m0, v0);
    keepMax(m1, v1);
    keepMax(m2, v2);
    keepMax(m3, v3);
  }
  for (; j < full; j += kLanes) {
    load(v0, x + j);
    keepMax(m0, v0);
  }
  keepMax(m0, m1);
  keepMax(m2, m3);
  keepMax(m0, m2);
  float mx = largest(m0);
  for (; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  // exp(x - max) (kept in y for softmax) and its sum; the last partial
  // vector is padded with -inf, whose exp is 0.
  const Floats mv = Floats{} + mx;
  Doubles s0{}, s1{};
  SignedBits ones{};
  auto add = [&](Floats& e) {
    if constexpr (Log) dropOnes(ones, e);
    accumulate(s0, s1, e);
  };
  for (j = 0; j + 4 * kLanes <= full; j += 4 * kLanes) {
    load(v0, x + j);
    load(v1, x + j + kLanes);
    load(v2, x + j + 2 * kLanes);
    load(v3, x + j + 3 * kLanes);
    v0 -= mv;
    v1 -= mv;
    v2 -= mv;
    v3 -= mv;
    expInPlace<true>(v0);
    expInPlace<true>(v1);
    expInPlace<true>(v2);
    expInPlace<true>(v3);
    if constexpr (!Log) {
      store(y + j, v0);
      store(y + j + kLanes, v1);
      store(y + j + 2 * kLanes, v2);
      store(y + j + 3 * kLanes, v3);
    }
    if constexpr (Log) {
      dropOnes(ones, v0);
      dropOnes(ones, v1);
      dropOnes(ones, v2);
      dropOnes(ones, v3);
    }
    // Four terms per lane in float (two roundings), then in float64.
    accumulate(s0, s1, (v0 + v1) + (v2 + v3));
  }
  for (; j < full; j += kLanes) {
    load(v0, x + j);
    v0 -= mv;
    expInPlace<true>(v0);
    if constexpr (!Log) store(y + j, v0);
    add(v0);
  }
  if (rest > 0) {
    loadPart(v0, x + full, rest, -inf);
    v0 -= mv;
    expInPlace<true>(v0);
    if constexpr (!Log) storePart(y + full, v0, rest);
    add(v0);
  }
  const double sum = total(s0 + s1);
  if constexpr (Log) {
    int64_t count = 0;
    for (int i = 0; i < kLanes; ++i) count += ones[i];
    const float lse = logSum(count, sum);
    for (j = 0; j < full; j += kLanes) {
      load(v0, x + j);
      store(y + j, (v0 - mv) - lse);
    }
    for (; j < n; ++j) y[j] = (x[j] - mx) - lse;
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (j = 0; j < full; j += kLanes) {
      load(v0, y + j);
      store(y + j, v0 * inv);
    }
    for (; j < n; ++j) y[j] *= inv;
  }
}

template <bool Log, bool Full>
[[gnu::always_inline]] inline void columnsImpl(const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t w) {
  const float inf = std::numeric_limits<float>::infinity();
  Floats v;
  auto in = [&](Floats& to, const float* p) {
    if constexpr (Full)
      load(to, p);
    else
      loadPart(to, p, w, 0.0f);
  };
  auto out = [&](float* p, const Floats& from) {
    if constexpr (Full)
      store(p, from);
    else
      storePart(p, from, w);
  };
  // Max in two chains; exp and its sum four steps at a time, as rowImpl.
  Floats m = Floats{} - inf, m1 = m, v1, v2, v3;
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    in(v, x + j * xs);
    in(v1, x + (j + 1) * xs);
    keepMax(m, v);
    keepMax(m1, v1);
  }
  if (j < n) {
    in(v, x + j * xs);
    keepMax(m, v);
  }
  keepMax(m, m1);
  Doubles lo{}, hi{};
  SignedBits ones{};
  auto expOf = [&](Floats& e, int64_t j) {
    in(e, x + j * xs);
    e -= m;
    expInPlace<true>(e);
    if constexpr (Log)
      dropOnes(ones, e);
    else
      out(y + j * ys, e);
  };
  for (j = 0; j + 4 <= n; j += 4) {
    expOf(v, j);
    expOf(v1, j + 1);
    expOf(v2, j + 2);
    expOf(v3, j + 3);
    accumulate(lo, hi, (v + v1) + (v2 + v3));
  }
  for (; j < n; ++j) {
    expOf(v, j);
    accumulate(lo, hi, v);
  }
  float s[kLanes];
  for (int c = 0; c < kLanes / 2; ++c) {
    s[c] = Log ? logSum(ones[c], lo[c]) : static_cast<float>(1.0 / lo[c]);
    s[c + kLanes / 2] = Log ? logSum(ones[c + kLanes / 2], hi[c]) : static_cast<float>(1.0 / hi[c]);
  }
  Floats sv;
  load(sv, s);
  for (j = 0; j < n; ++j) {
    if constexpr (Log) {
      in(v, x + j * xs);
      v = (v - m) - sv;
    } else {
      in(v, y + j * ys);
      v *= sv;
    }
    out(y + j * ys, v);
  }
}

#define BP_SOFTMAX_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))

BP_SOFTMAX_MULTIVERSION void softmaxRowClones(bool log, const float* x, float* y, int64_t n) {
  log ? rowImpl<true>(x, y, n) : rowImpl<false>(x, y, n);
}

BP_SOFTMAX_MULTIVERSION void softmaxColumnsClones(bool log, const float* x, int64_t xs, float* y, int64_t ys, int64_t n,
                                                  int64_t w) {
  if (w == kLanes)
    log ? columnsImpl<true, true>(x, xs, y, ys, n, w) : columnsImpl<false, true>(x, xs, y, ys, n, w);
  else
    log ? columnsImpl<true, false>(x, xs, y, ys, n, w) : columnsImpl<false, false>(x, xs, y, ys, n, w);
}

BP_SOFTMAX_MULTIVERSION void expClones(const float* x, float* y, int64_t n) {
  Floats v;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    load(v, x + j);
    expInPlace(v);
    store(y + j, v);
  }
  if (j < n) {
    loadPart(v, x + j, n - j, 0.0f);
    expInPlace(v);
    storePart(y + j, v, n - j);
  }
}

#undef BP_SOFTMAX_MULTIVERSION

}  // namespace

void softmaxRow(bool log, const float* x, float* y, int64_t n) { softmaxRowClones(log, x, y, n); }

void softmaxColumns(bool log, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t w) {
  softmaxColumnsClones(log, x, xs, y, ys, n, w);
}

void expFloats(const float* x, float* y, int64_t n) { expClones(x, y, n); }

}  // namespace bp_cpu
