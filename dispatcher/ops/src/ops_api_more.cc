// The ops of dispatcher/ops/src/elementwise_more.cc as C++ functions and
// tensor methods (backplane/ops/ops.h, backplane/ops/tensor.h): one call each
// through a typed handle that BP_STANDARD_OP looks up once per process.
#include "backplane/ops/ops.h"
#include "structured.h"

namespace backplane {
namespace {

using UnarySig = Tensor(const Tensor&);
using BinarySig = Tensor(const Tensor&, const Tensor&);
using ScalarSig = Tensor(const Tensor&, const Scalar&);
using OptStr = std::optional<std::string_view>;
using OptDouble = std::optional<double>;

}  // namespace

Tensor div(const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode) {
  return BP_STANDARD_OP("div.Tensor_mode", Tensor(const Tensor&, const Tensor&, OptStr))
      .call(self, other, rounding_mode);
}
Tensor div(const Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode) {
  return BP_STANDARD_OP("div.Scalar_mode", Tensor(const Tensor&, const Scalar&, OptStr))
      .call(self, other, rounding_mode);
}
Tensor true_divide(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("true_divide.Tensor", BinarySig).call(self, other);
}
Tensor floor_divide(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("floor_divide", BinarySig).call(self, other);
}
Tensor floor_divide(const Tensor& self, const Scalar& other) {
  return BP_STANDARD_OP("floor_divide.Scalar", ScalarSig).call(self, other);
}

// Ops with NAME.Tensor and NAME.Scalar forms.
#define BP_TENSOR_SCALAR(NAME)                                           \
  Tensor NAME(const Tensor& self, const Tensor& other) {                 \
    return BP_STANDARD_OP(#NAME ".Tensor", BinarySig).call(self, other); \
  }                                                                      \
  Tensor NAME(const Tensor& self, const Scalar& other) {                 \
    return BP_STANDARD_OP(#NAME ".Scalar", ScalarSig).call(self, other); \
  }
BP_TENSOR_SCALAR(remainder)
BP_TENSOR_SCALAR(fmod)
BP_TENSOR_SCALAR(bitwise_and)
BP_TENSOR_SCALAR(bitwise_or)
BP_TENSOR_SCALAR(bitwise_xor)
#undef BP_TENSOR_SCALAR

Tensor logical_and(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("logical_and", BinarySig).call(self, other);
}
Tensor logical_or(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("logical_or", BinarySig).call(self, other);
}
Tensor logical_xor(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("logical_xor", BinarySig).call(self, other);
}

#define BP_UNARY(NAME)                                                                   \
  Tensor NAME(const Tensor& self) { return BP_STANDARD_OP(#NAME, UnarySig).call(self); } \
  Tensor Tensor::NAME() const { return ::backplane::NAME(*this); }
BP_UNARY(floor)
BP_UNARY(ceil)
BP_UNARY(trunc)
BP_UNARY(round)
BP_UNARY(sign)
BP_UNARY(erf)
BP_UNARY(bitwise_not)
BP_UNARY(logical_not)
BP_UNARY(isnan)
BP_UNARY(isinf)
BP_UNARY(isfinite)
#undef BP_UNARY

Tensor round(const Tensor& self, int64_t decimals) {
  return BP_STANDARD_OP("round.decimals", Tensor(const Tensor&, int64_t)).call(self, decimals);
}
Tensor leaky_relu(const Tensor& self, const Scalar& negative_slope) {
  return BP_STANDARD_OP("leaky_relu", ScalarSig).call(self, negative_slope);
}
Tensor hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  return BP_STANDARD_OP("hardtanh", Tensor(const Tensor&, const Scalar&, const Scalar&)).call(self, min_val, max_val);
}
Tensor elu(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  return BP_STANDARD_OP("elu", Tensor(const Tensor&, const Scalar&, const Scalar&, const Scalar&))
      .call(self, alpha, scale, input_scale);
}
Tensor softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  return BP_STANDARD_OP("softplus", Tensor(const Tensor&, const Scalar&, const Scalar&)).call(self, beta, threshold);
}
Tensor nan_to_num(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  return BP_STANDARD_OP("nan_to_num", Tensor(const Tensor&, OptDouble, OptDouble, OptDouble))
      .call(self, nan, posinf, neginf);
}

Tensor Tensor::div(const Tensor& other, std::optional<std::string_view> rounding_mode) const {
  return ::backplane::div(*this, other, rounding_mode);
}
Tensor Tensor::floor_divide(const Tensor& other) const { return ::backplane::floor_divide(*this, other); }
Tensor Tensor::remainder(const Tensor& other) const { return ::backplane::remainder(*this, other); }
Tensor Tensor::fmod(const Tensor& other) const { return ::backplane::fmod(*this, other); }
Tensor Tensor::round(int64_t decimals) const { return ::backplane::round(*this, decimals); }

}  // namespace backplane
