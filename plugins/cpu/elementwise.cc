// Elementwise kernels of the CPU plugin (structured: each computes into the
// `out` the host has sized and dtype-checked with the op's shape rule, so a
// kernel computes in out's dtype, in its opmath type for float16/bfloat16).
// Loops: Note [Elementwise loops].
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "bp_common/arithmetic.h"
#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "cpu_common.h"
#include "dnnl_util.h"
#include "elementwise_loops.h"
#include "kernels.h"

namespace bp_cpu::elementwise {

// One copy of the dtype-pair loops for the plugin (elementwise_loops.h).
void copyCast(const bp::Tensor& src, const bp::Tensor& dst) {
  visitAnyDtype(dst.dtype(), [&](auto o) {
    using O = decltype(o);
    visitAnyDtype(src.dtype(), [&](auto i) {
      using I = decltype(i);
      unaryLoop<O, I>(dst, src, [](auto v) { return v; });
    });
  });
}

const bp::Tensor& as(const bp::Tensor& t, ScalarType dtype, bp::Tensor& holder) {
  if (t.dtype() == dtype) return t;
  holder = bp::Tensor::empty(t.sizes(), dtype, kCpuDevice);
  copyCast(t, holder);
  return holder;
}

void checkArgs(const char* op, std::initializer_list<std::pair<const bp::Tensor*, const char*>> args) {
  for (const auto& [t, name] : args) checkCpu(op, *t, name);
}

}  // namespace bp_cpu::elementwise

namespace {

using namespace bp_cpu;
using namespace bp_cpu::elementwise;

using bp_common::addWrap;
using bp_common::Cmp;
using bp_common::comparisonDtype;
using bp_common::mulWrap;
using bp_common::negWrap;
using bp_common::powOf;
using bp_common::subWrap;

// A Scalar as compute type M, converted to storage type T first (scalarTo:
// with wrap-around for integers, as PyTorch converts a clamp bound, an
// alpha or a comparison operand; the host has range-checked the bounds and
// alpha) so that it rounds as a value of that dtype would.
template <class T, class M = opmath_t<T>>
M scalarAs(const bp::Scalar& s) {
  return static_cast<M>(load(scalarTo<T>(s)));
}

// --- binary arithmetic: out = f(self, other) computed in out's dtype

template <class Body>
bp::Tensor binary(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out,
                  std::initializer_list<ScalarType> supported, Body body) {
  checkArgs(op, {{&self, "self"}, {&other, "other"}, {&out, "out"}});
  checkDtype(op, out, "out", supported);
  bp::Tensor a_holder, b_holder;
  const bp::Tensor& a = as(self, out.dtype(), a_holder);
  const bp::Tensor& b = as(other, out.dtype(), b_holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    body(T{}, a, b);
  });
  return out;
}

template <bool kSubtract>
bp::Tensor alphaOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha,
                    const bp::Tensor& out) {
  const std::initializer_list<ScalarType> dtypes = kSubtract ? bp::kNumericScalarTypes : bp::kAllScalarTypes;
  return binary(op, self, other, out, dtypes, [&](auto tag, const auto& a, const auto& b) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      // bool + alpha * bool is a logical or (alpha is true or false).
      const bool al = alpha.toBool();
      binaryLoop<T, T, T>(out, a, b, [al](bool x, bool y) { return x || (al && y); });
    } else {
      const M al = scalarAs<T>(alpha);
      if (al == M(1)) {  // the common case, without a multiply
        binaryLoop<T, T, T>(out, a, b, [](M x, M y) -> M { return kSubtract ? subWrap(x, y) : addWrap(x, y); });
      } else {
        binaryLoop<T, T, T>(out, a, b, [al](M x, M y) -> M {
          if constexpr (std::is_integral_v<M>)
            return kSubtract ? subWrap(x, mulWrap(al, y)) : addWrap(x, mulWrap(al, y));
          else
            return kSubtract ? x - al * y : x + al * y;
        });
      }
    }
  });
}

bp::Tensor add_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  return alphaOut<false>("bp::add.out", self, other, alpha, out);
}

bp::Tensor sub_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  return alphaOut<true>("bp::sub.out", self, other, alpha, out);
}

bp::Tensor mul_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary("bp::mul.out", self, other, out, bp::kAllScalarTypes, [&](auto tag, const auto& a, const auto& b) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>)
      binaryLoop<T, T, T>(out, a, b, [](bool x, bool y) { return x && y; });
    else
      binaryLoop<T, T, T>(out, a, b, [](M x, M y) -> M { return mulWrap(x, y); });
  });
}

bp::Tensor div_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary("bp::div.out", self, other, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a, const auto& b) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) binaryLoop<T, T, T>(out, a, b, [](M x, M y) -> M { return x / y; });
  });
}

// maximum/minimum propagate NaN, as PyTorch. Otherwise they are
// std::max/std::min, as PyTorch's CPU kernel's scalar form: of two equal
// values (0.0 and -0.0) the first, self, wins.
template <bool kMax>
bp::Tensor extremumOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary(op, self, other, out, bp::kAllScalarTypes, [&](auto tag, const auto& a, const auto& b) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    binaryLoop<T, T, T>(out, a, b, [](M x, M y) -> M {
      if constexpr (std::is_floating_point_v<M>) {
        if (x != x) return x;
        if (y != y) return y;
      }
      return (kMax ? x < y : y < x) ? y : x;
    });
  });
}

bp::Tensor maximum_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return extremumOut<true>("bp::maximum.out", self, other, out);
}

bp::Tensor minimum_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return extremumOut<false>("bp::minimum.out", self, other, out);
}

bp::Tensor pow_tensor_out(const bp::Tensor& self, const bp::Tensor& exponent, const bp::Tensor& out) {
  return binary("bp::pow.Tensor_Tensor_out", self, exponent, out, bp::kNumericScalarTypes,
                [&](auto tag, const auto& a, const auto& b) {
                  using T = decltype(tag);
                  using M = opmath_t<T>;
                  if constexpr (!std::is_same_v<T, bool>)
                    binaryLoop<T, T, T>(out, a, b, [](M x, M e) { return powOf<M>(x, e); });
                });
}

// --- unary: out = f(self) computed in out's dtype

bp::Tensor pow_scalar_out(const bp::Tensor& self, const bp::Scalar& exponent, const bp::Tensor& out) {
  return unary("bp::pow.Tensor_Scalar_out", self, out, bp::kNumericScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      const M e = scalarAs<T>(exponent);
      if (e == M(2))
        unaryLoop<T, T>(out, a, [](M x) -> M { return mulWrap(x, x); });  // the common square, vectorised
      else
        unaryLoop<T, T>(out, a, [e](M x) { return powOf<M>(x, e); });
    }
  });
}

// A unary op defined for floating out dtypes only (integral inputs arrive
// converted: the host's rule makes their result float32).
#define BP_FLOATING_UNARY(NAME, EXPR)                                                                     \
  bp::Tensor NAME##_out(const bp::Tensor& self, const bp::Tensor& out) {                                  \
    return unary("bp::" #NAME ".out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) { \
      using T = decltype(tag);                                                                            \
      using M = opmath_t<T>;                                                                              \
      if constexpr (std::is_floating_point_v<M>) unaryLoop<T, T>(out, a, [](M x) -> M { return EXPR; });  \
    });                                                                                                   \
  }

BP_FLOATING_UNARY(exp, std::exp(x))
BP_FLOATING_UNARY(log, std::log(x))
BP_FLOATING_UNARY(sqrt, std::sqrt(x))
BP_FLOATING_UNARY(rsqrt, M(1) / std::sqrt(x))
BP_FLOATING_UNARY(sin, std::sin(x))
BP_FLOATING_UNARY(cos, std::cos(x))
BP_FLOATING_UNARY(tanh, std::tanh(x))
BP_FLOATING_UNARY(sigmoid, M(1) / (M(1) + std::exp(-x)))
BP_FLOATING_UNARY(silu, x / (M(1) + std::exp(-x)))
#undef BP_FLOATING_UNARY

bp::Tensor neg_out(const bp::Tensor& self, const bp::Tensor& out) {
  return unary("bp::neg.out", self, out, bp::kNumericScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) unaryLoop<T, T>(out, a, [](M x) -> M { return negWrap(x); });
  });
}

bp::Tensor abs_out(const bp::Tensor& self, const bp::Tensor& out) {
  return unary("bp::abs.out", self, out, bp::kAllScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<M>)
      unaryLoop<T, T>(out, a, [](M x) { return x; });
    else if constexpr (std::is_floating_point_v<M>)
      unaryLoop<T, T>(out, a, [](M x) -> M { return std::fabs(x); });  // abs(-0.0) is +0.0
    else
      unaryLoop<T, T>(out, a, [](M x) -> M { return x < M(0) ? negWrap(x) : x; });
  });
}

bp::Tensor relu_out(const bp::Tensor& self, const bp::Tensor& out) {
  return unary("bp::relu.out", self, out, bp::kNumericScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>)
      unaryLoop<T, T>(out, a, [](M x) { return x < M(0) ? M(0) : x; });  // keeps NaN, as PyTorch
  });
}

// Note [oneDNN gelu]
// gelu is erf (or tanh) per element, which the compiler does not vectorise
// (glibc's vector erf is only declared under -ffast-math), so a large dense
// float32 or bfloat16 gelu runs oneDNN's JIT eltwise kernel instead
// (BM_Gelu_3M_f32 against BM_Gelu_3M_f32_Loop), within a few float32 ulps
// of the loop. Non-finite inputs give what the loop's formula x / 2 * (1 +
// erf(x / sqrt 2)) gives: NaN for NaN and -inf, +inf for +inf (the tests
// hold both paths to it). The primitives are cached per thread, as the
// streams are: no lock on the hot path.
constexpr int64_t kDnnlGeluMinNumel = 4096;  // below it the primitive's call costs more than it saves

const dnnl::eltwise_forward* dnnlGelu(dnnl::memory::data_type type, bool tanh_form, int64_t n) {
  const std::array<int64_t, 3> key{static_cast<int64_t>(type), tanh_form, n};
  const auto& prim = dnnl_util::cachedPerThread(key, 64, [&] {
    std::optional<dnnl::eltwise_forward> made;
    try {
      const dnnl::memory::desc md({n}, type, dnnl::memory::dims{1});
      const dnnl::eltwise_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference,
           tanh_form ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf, md, 0.f, 0.f},
          dnnl_util::engine());
      if (!dnnl_util::isReference(pd)) made.emplace(pd);
    } catch (const dnnl::error&) {
      // This oneDNN build has no such kernel (e.g. bf16 on an old CPU): the loop runs.
    }
    return made;
  });
  return prim ? &*prim : nullptr;
}

// Runs gelu through oneDNN when Note [oneDNN gelu] applies; false: it does
// not, nothing was written.
bool geluDnnl(bool tanh_form, const bp::Tensor& a, const bp::Tensor& out) {
  const ScalarType dt = out.dtype();
  if (a.dtype() != dt || (dt != ScalarType::Float32 && dt != ScalarType::BFloat16)) return false;
  if (out.numel() < kDnnlGeluMinNumel || !a.is_contiguous() || !out.is_contiguous()) return false;
  const dnnl::eltwise_forward* prim = dnnlGelu(dnnl_util::dataType(dt), tanh_form, out.numel());
  if (prim == nullptr) return false;
  const dnnl::memory::desc md({out.numel()}, dnnl_util::dataType(dt), dnnl::memory::dims{1});
  const dnnl::engine& eng = dnnl_util::engine();
  dnnl::memory src(md, eng, a.data_ptr()), dst(md, eng, out.data_ptr());
  ThreadScope threads;
  dnnl::stream& s = dnnl_util::stream();
  prim->execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  s.wait();
  // gelu(x) = x * Phi(x) has x's sign (-0.0 for -0.0 and for the negative
  // x whose product underflows, as PyTorch's kernel gives); oneDNN's gives
  // +0.0 there. Copying the sign bit over restores it and changes nothing
  // else.
  const int64_t n = out.numel();
  if (dt == ScalarType::Float32) {
    const float* x = static_cast<const float*>(a.data_ptr());
    float* o = static_cast<float*>(out.data_ptr());
#pragma omp parallel for simd if (n > kDnnlGeluMinNumel * 16)
    for (int64_t i = 0; i < n; ++i) o[i] = std::copysign(o[i], x[i]);
  } else {
    const uint16_t* x = static_cast<const uint16_t*>(a.data_ptr());
    uint16_t* o = static_cast<uint16_t*>(out.data_ptr());
#pragma omp parallel for simd if (n > kDnnlGeluMinNumel * 16)
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint16_t>((o[i] & 0x7fffu) | (x[i] & 0x8000u));
  }
  return true;
}

const dnnl::eltwise_backward* dnnlGeluBackward(bool tanh_form, int64_t n) {
  const std::array<int64_t, 2> key{tanh_form, n};
  const auto& prim = dnnl_util::cachedPerThread(key, 64, [&] {
    std::optional<dnnl::eltwise_backward> made;
    try {
      const dnnl::algorithm alg = tanh_form ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
      const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1});
      const dnnl::eltwise_forward::primitive_desc hint({dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f},
                                                       dnnl_util::engine());
      const dnnl::eltwise_backward::primitive_desc pd({alg, md, md, 0.f, 0.f}, dnnl_util::engine(), hint);
      if (!dnnl_util::isReference(pd)) made.emplace(pd);
    } catch (const dnnl::error&) {
      // No such kernel in this oneDNN build: the loop runs.
    }
    return made;
  });
  return prim ? &*prim : nullptr;
}

bp::Tensor gelu_out(const bp::Tensor& self, std::string_view approximate, const bp::Tensor& out) {
  // The host's rule has checked `approximate`; this guards direct callers.
  const bool tanh_form = approximate == "tanh";
  BP_PLUGIN_CHECK(tanh_form || approximate == "none",
                  "bp::gelu.out: approximate must be 'none' or 'tanh', but got '" + std::string(approximate) + "'");
  return unary("bp::gelu.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) {
      if (geluDnnl(tanh_form, a, out)) return;
      if (tanh_form) {
        const M k = M(0.7978845608028654);  // sqrt(2 / pi)
        unaryLoop<T, T>(out, a,
                        [k](M x) -> M { return M(0.5) * x * (M(1) + std::tanh(k * (x + M(0.044715) * x * x * x))); });
      } else {
        unaryLoop<T, T>(out, a, [](M x) -> M { return M(0.5) * x * (M(1) + std::erf(x * M(0.7071067811865476))); });
      }
    }
  });
}

bp::Tensor clamp_out(const bp::Tensor& self, const std::optional<bp::Scalar>& min, const std::optional<bp::Scalar>& max,
                     const bp::Tensor& out) {
  BP_PLUGIN_CHECK(min.has_value() || max.has_value(), "bp::clamp.out: at least one of 'min' or 'max' must not be None");
  return unary("bp::clamp.out", self, out, bp::kNumericScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      // NaN inputs stay NaN (no comparison is true); min > max gives max, as PyTorch.
      if (min && max) {
        const M lo = scalarAs<T>(*min), hi = scalarAs<T>(*max);
        unaryLoop<T, T>(out, a, [lo, hi](M x) -> M {
          x = x < lo ? lo : x;
          return x > hi ? hi : x;
        });
      } else if (min) {
        const M lo = scalarAs<T>(*min);
        unaryLoop<T, T>(out, a, [lo](M x) -> M { return x < lo ? lo : x; });
      } else {
        const M hi = scalarAs<T>(*max);
        unaryLoop<T, T>(out, a, [hi](M x) -> M { return x > hi ? hi : x; });
      }
    }
  });
}

// --- comparisons: bool results, compared in the comparison dtype (Note
// [Comparison dtype]). An out of another dtype (in-place on a float tensor,
// say) receives the bools converted.

// The comparison dtype: Note [Comparison dtype] in plugins/common (the GPU
// plugins apply the same rule).

template <Cmp C>
bp::Tensor compareTensorOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  checkArgs(op, {{&self, "self"}, {&other, "other"}, {&out, "out"}});
  const ScalarType common = comparisonDtype(self, other);
  bp::Tensor a_holder, b_holder;
  const bp::Tensor& a = as(self, common, a_holder);
  const bp::Tensor& b = as(other, common, b_holder);
  return intoBoolOut(out, [&](const bp::Tensor& res) {
    visitAnyDtype(common, [&](auto tag) {
      using T = decltype(tag);
      using M = opmath_t<T>;
      binaryLoop<bool, T, T>(res, a, b, [](M x, M y) { return bp_common::compare(C, x, y); });
    });
  });
}

template <Cmp C>
bp::Tensor compareScalarOut(const char* op, const bp::Tensor& self, const bp::Scalar& other, const bp::Tensor& out) {
  checkArgs(op, {{&self, "self"}, {&out, "out"}});
  const ScalarType common = comparisonDtype(self, other);
  bp::Tensor a_holder;
  const bp::Tensor& a = as(self, common, a_holder);
  return intoBoolOut(out, [&](const bp::Tensor& res) {
    visitAnyDtype(common, [&](auto tag) {
      using T = decltype(tag);
      using M = opmath_t<T>;
      const M y = scalarAs<T>(other);
      unaryLoop<bool, T>(res, a, [y](M x) { return bp_common::compare(C, x, y); });
    });
  });
}

// where(condition, self, other): condition is bool (checked by the host).
bp::Tensor where_out(const bp::Tensor& condition, const bp::Tensor& self, const bp::Tensor& other,
                     const bp::Tensor& out) {
  const char* op = "bp::where.self_out";
  checkArgs(op, {{&condition, "condition"}, {&self, "self"}, {&other, "other"}, {&out, "out"}});
  checkDtype(op, condition, "condition", {ScalarType::Bool});
  bp::Tensor a_holder, b_holder;
  const bp::Tensor& a = as(self, out.dtype(), a_holder);
  const bp::Tensor& b = as(other, out.dtype(), b_holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    ternaryLoop<T>(out, condition, a, b, [](bool c, M x, M y) { return c ? x : y; });
  });
  return out;
}

}  // namespace

namespace bp_cpu {

// gelu_backward's float32 form through oneDNN (Note [oneDNN gelu]): the
// same formula, vectorised; false when it does not apply (nothing written).
bool geluBackwardDnnl(bool tanh_form, const bp::Tensor& grad, const bp::Tensor& x, const bp::Tensor& out) {
  const int64_t n = out.numel();
  if (out.dtype() != ScalarType::Float32 || grad.dtype() != ScalarType::Float32 || x.dtype() != ScalarType::Float32)
    return false;
  if (n < kDnnlGeluMinNumel || !grad.is_contiguous() || !x.is_contiguous() || !out.is_contiguous()) return false;
  const dnnl::eltwise_backward* prim = dnnlGeluBackward(tanh_form, n);
  if (prim == nullptr) return false;
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1});
  const dnnl::engine& eng = dnnl_util::engine();
  dnnl::memory src(md, eng, x.data_ptr()), diff_dst(md, eng, grad.data_ptr()), diff_src(md, eng, out.data_ptr());
  ThreadScope threads;
  dnnl::stream& s = dnnl_util::stream();
  prim->execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
  s.wait();
  return true;
}

void registerElementwiseKernels(bp::Library& m) {
  // add, sub, mul and div bound at compile time: the tiny-tensor path.
  BP_REGISTER_ELEMENTWISE_KERNELS(m, kCpu, BP_BIND_AT_COMPILE_TIME, BP_OPERANDS_ON_DEVICE);
}

}  // namespace bp_cpu
