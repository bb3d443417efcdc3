// The standard operators as C++ functions and tensor methods (backplane/ops/ops.h,
// backplane/ops/tensor.h). Each body is one call through a typed handle that
// BP_STANDARD_OP looks up once per process.
#include "backplane/ops/ops.h"

#include <cstring>

#include "backplane/core/device_type_registry.h"

#include "meta.h"
#include "structured.h"

namespace backplane {
namespace {

using Opts = std::optional<ScalarType>;
using OptDevice = std::optional<Device>;
using FactorySig = Tensor(IntArrayRef, Opts, OptDevice);
using LikeSig = Tensor(const Tensor&, Opts, OptDevice);
using UnarySig = Tensor(const Tensor&);
using BinarySig = Tensor(const Tensor&, const Tensor&);
using AlphaSig = Tensor(const Tensor&, const Tensor&, const Scalar&);
using ScalarSig = Tensor(const Tensor&, const Scalar&);
using ReduceDtypeSig = Tensor(const Tensor&, Opts);
using ReduceDimSig = Tensor(const Tensor&, std::optional<IntArrayRef>, bool, Opts);
using ExtremumSig = Tensor(const Tensor&, IntArrayRef, bool);
using ArgExtremumSig = Tensor(const Tensor&, std::optional<int64_t>, bool);
using CorrectionSig = Tensor(const Tensor&, std::optional<IntArrayRef>, const std::optional<Scalar>&, bool);
using SoftmaxSig = Tensor(const Tensor&, int64_t, Opts);
using JoinSig = Tensor(TensorList, int64_t);
using ToSig = Tensor(const Tensor&, Opts, OptDevice, bool, bool);

// A number as the 0-d CPU tensor PyTorch makes of a Python number in an op
// with self (the Note in backplane/ops/ops.h), of the dtype that number promotes
// to. On the CPU whatever self's device: the functional binary ops take a
// 0-d CPU operand to self's device as a kernel argument, with no
// host<->device copy (Note [CPU scalars] in dispatcher/ops/src/meta.h).
Tensor wrapped(const Tensor& self, const Scalar& s) {
  Tensor t = emptyTensor({}, ops::resultType(self, s));
  visitScalarType(t.dtype(), [&]<typename T>() { *t.data_ptr<T>() = s.to<T>(); });
  return t;
}

}  // namespace

// ------------------------------------------------------------- factories

Tensor empty(IntArrayRef size, const TensorOptions& o) {
  return BP_STANDARD_OP("empty", FactorySig).call(size, o.dtype, o.device);
}
Tensor zeros(IntArrayRef size, const TensorOptions& o) {
  return BP_STANDARD_OP("zeros", FactorySig).call(size, o.dtype, o.device);
}
Tensor ones(IntArrayRef size, const TensorOptions& o) {
  return BP_STANDARD_OP("ones", FactorySig).call(size, o.dtype, o.device);
}
Tensor full(IntArrayRef size, const Scalar& fill_value, const TensorOptions& o) {
  return BP_STANDARD_OP("full", Tensor(IntArrayRef, const Scalar&, Opts, OptDevice))
      .call(size, fill_value, o.dtype, o.device);
}
Tensor arange(const Scalar& end, const TensorOptions& o) {
  return BP_STANDARD_OP("arange", Tensor(const Scalar&, Opts, OptDevice)).call(end, o.dtype, o.device);
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, const TensorOptions& o) {
  return BP_STANDARD_OP("arange.start_step", Tensor(const Scalar&, const Scalar&, const Scalar&, Opts, OptDevice))
      .call(start, end, step, o.dtype, o.device);
}
Tensor rand(IntArrayRef size, const TensorOptions& o) {
  return BP_STANDARD_OP("rand", FactorySig).call(size, o.dtype, o.device);
}
Tensor randn(IntArrayRef size, const TensorOptions& o) {
  return BP_STANDARD_OP("randn", FactorySig).call(size, o.dtype, o.device);
}
Tensor empty_like(const Tensor& self, const TensorOptions& o) {
  return BP_STANDARD_OP("empty_like", LikeSig).call(self, o.dtype, o.device);
}
Tensor zeros_like(const Tensor& self, const TensorOptions& o) {
  return BP_STANDARD_OP("zeros_like", LikeSig).call(self, o.dtype, o.device);
}
Tensor ones_like(const Tensor& self, const TensorOptions& o) {
  return BP_STANDARD_OP("ones_like", LikeSig).call(self, o.dtype, o.device);
}
Tensor full_like(const Tensor& self, const Scalar& fill_value, const TensorOptions& o) {
  return BP_STANDARD_OP("full_like", Tensor(const Tensor&, const Scalar&, Opts, OptDevice))
      .call(self, fill_value, o.dtype, o.device);
}
Tensor rand_like(const Tensor& self, const TensorOptions& o) {
  return BP_STANDARD_OP("rand_like", LikeSig).call(self, o.dtype, o.device);
}
Tensor randn_like(const Tensor& self, const TensorOptions& o) {
  return BP_STANDARD_OP("randn_like", LikeSig).call(self, o.dtype, o.device);
}

// ----------------------------------------------------------- elementwise

Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return BP_STANDARD_OP("add.Tensor", AlphaSig).call(self, other, alpha);
}
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return BP_STANDARD_OP("sub.Tensor", AlphaSig).call(self, other, alpha);
}
Tensor mul(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("mul.Tensor", BinarySig).call(self, other);
}
Tensor div(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("div.Tensor", BinarySig).call(self, other);
}
// A number operand goes to the op's .Scalar overload, which promotes it as
// a Python number and converts it where the op computes (div of int16 by
// 2**40 divides in float32, not by an int16-wrapped 0).
using ScalarAlphaSig = Tensor(const Tensor&, const Scalar&, const Scalar&);
Tensor add(const Tensor& self, const Scalar& other) {
  return BP_STANDARD_OP("add.Scalar", ScalarAlphaSig).call(self, other, Scalar(int64_t{1}));
}
Tensor sub(const Tensor& self, const Scalar& other) {
  return BP_STANDARD_OP("sub.Scalar", ScalarAlphaSig).call(self, other, Scalar(int64_t{1}));
}
Tensor mul(const Tensor& self, const Scalar& other) {
  return BP_STANDARD_OP("mul.Scalar", ScalarSig).call(self, other);
}
Tensor div(const Tensor& self, const Scalar& other) {
  return BP_STANDARD_OP("div.Scalar", ScalarSig).call(self, other);
}
Tensor pow(const Tensor& self, const Scalar& exponent) {
  return BP_STANDARD_OP("pow.Tensor_Scalar", ScalarSig).call(self, exponent);
}
Tensor pow(const Tensor& self, const Tensor& exponent) {
  return BP_STANDARD_OP("pow.Tensor_Tensor", BinarySig).call(self, exponent);
}
Tensor maximum(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("maximum", BinarySig).call(self, other);
}
Tensor minimum(const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("minimum", BinarySig).call(self, other);
}
Tensor clamp(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return BP_STANDARD_OP("clamp", Tensor(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&))
      .call(self, min, max);
}
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  return BP_STANDARD_OP("where.self", Tensor(const Tensor&, const Tensor&, const Tensor&)).call(condition, self, other);
}
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) {
  return BP_STANDARD_OP("masked_fill.Scalar", Tensor(const Tensor&, const Tensor&, const Scalar&))
      .call(self, mask, value);
}

#define BP_COMPARISON(NAME)                                                                  \
  Tensor NAME(const Tensor& self, const Tensor& other) {                                     \
    return BP_STANDARD_OP(#NAME ".Tensor", BinarySig).call(self, other);                     \
  }                                                                                          \
  Tensor NAME(const Tensor& self, const Scalar& other) {                                     \
    return BP_STANDARD_OP(#NAME ".Scalar", ScalarSig).call(self, other);                     \
  }                                                                                          \
  Tensor Tensor::NAME(const Tensor& other) const { return ::backplane::NAME(*this, other); } \
  Tensor Tensor::NAME(const Scalar& other) const { return ::backplane::NAME(*this, other); }
BP_COMPARISON(eq)
BP_COMPARISON(ne)
BP_COMPARISON(lt)
BP_COMPARISON(le)
BP_COMPARISON(gt)
BP_COMPARISON(ge)
#undef BP_COMPARISON

#define BP_UNARY(NAME)                                                                   \
  Tensor NAME(const Tensor& self) { return BP_STANDARD_OP(#NAME, UnarySig).call(self); } \
  Tensor Tensor::NAME() const { return ::backplane::NAME(*this); }
BP_UNARY(neg)
BP_UNARY(abs)
BP_UNARY(exp)
BP_UNARY(log)
BP_UNARY(sqrt)
BP_UNARY(rsqrt)
BP_UNARY(sin)
BP_UNARY(cos)
BP_UNARY(tanh)
BP_UNARY(sigmoid)
BP_UNARY(relu)
BP_UNARY(silu)
#undef BP_UNARY

Tensor gelu(const Tensor& self, std::string_view approximate) {
  return BP_STANDARD_OP("gelu", Tensor(const Tensor&, std::string_view)).call(self, approximate);
}

// --------------------------------------------------------- linear algebra

Tensor matmul(const Tensor& self, const Tensor& other) { return BP_STANDARD_OP("matmul", BinarySig).call(self, other); }
Tensor mm(const Tensor& self, const Tensor& mat2) { return BP_STANDARD_OP("mm", BinarySig).call(self, mat2); }
Tensor bmm(const Tensor& self, const Tensor& mat2) { return BP_STANDARD_OP("bmm", BinarySig).call(self, mat2); }
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
  return BP_STANDARD_OP("addmm", Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&))
      .call(self, mat1, mat2, beta, alpha);
}
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  return BP_STANDARD_OP("linear", Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&))
      .call(input, weight, bias);
}
Tensor _addmm_activation(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                         const Scalar& alpha, bool use_gelu) {
  return BP_STANDARD_OP("_addmm_activation",
                        Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&, bool))
      .call(self, mat1, mat2, beta, alpha, use_gelu);
}

// ------------------------------------------------------------- reductions

Tensor sum(const Tensor& self, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("sum", ReduceDtypeSig).call(self, dtype);
}
Tensor sum(const Tensor& self, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("sum.dim_IntList", ReduceDimSig).call(self, dim, keepdim, dtype);
}
Tensor mean(const Tensor& self, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("mean", ReduceDtypeSig).call(self, dtype);
}
Tensor mean(const Tensor& self, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("mean.dim", ReduceDimSig).call(self, dim, keepdim, dtype);
}
Tensor amax(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return BP_STANDARD_OP("amax", ExtremumSig).call(self, dim, keepdim);
}
Tensor amin(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return BP_STANDARD_OP("amin", ExtremumSig).call(self, dim, keepdim);
}
Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return BP_STANDARD_OP("argmax", ArgExtremumSig).call(self, dim, keepdim);
}
Tensor argmin(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return BP_STANDARD_OP("argmin", ArgExtremumSig).call(self, dim, keepdim);
}
Tensor var(const Tensor& self, IntArrayRef dim, bool keepdim, int64_t correction) {
  return BP_STANDARD_OP("var.correction", CorrectionSig).call(self, dim, Scalar(correction), keepdim);
}
Tensor std(const Tensor& self, IntArrayRef dim, bool keepdim, int64_t correction) {
  return BP_STANDARD_OP("std.correction", CorrectionSig).call(self, dim, Scalar(correction), keepdim);
}
Tensor norm(const Tensor& self, double p, std::optional<IntArrayRef> dim, bool keepdim) {
  using NormSig = Tensor(const Tensor&, double, std::optional<IntArrayRef>, bool);
  return BP_STANDARD_OP("norm", NormSig).call(self, p, dim, keepdim);
}

// ------------------------ products, logical reductions, scans and sorts

using SortPair = std::tuple<Tensor, Tensor>;
using LogicalDimsSig = Tensor(const Tensor&, std::optional<IntArrayRef>, bool);

Tensor prod(const Tensor& self, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("prod", ReduceDtypeSig).call(self, dtype);
}
Tensor prod(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("prod.dim_int", Tensor(const Tensor&, int64_t, bool, Opts)).call(self, dim, keepdim, dtype);
}
Tensor all(const Tensor& self) { return BP_STANDARD_OP("all", UnarySig).call(self); }
Tensor all(const Tensor& self, int64_t dim, bool keepdim) {
  return BP_STANDARD_OP("all.dim", Tensor(const Tensor&, int64_t, bool)).call(self, dim, keepdim);
}
Tensor all(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return BP_STANDARD_OP("all.dims", LogicalDimsSig).call(self, dim, keepdim);
}
Tensor any(const Tensor& self) { return BP_STANDARD_OP("any", UnarySig).call(self); }
Tensor any(const Tensor& self, int64_t dim, bool keepdim) {
  return BP_STANDARD_OP("any.dim", Tensor(const Tensor&, int64_t, bool)).call(self, dim, keepdim);
}
Tensor any(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return BP_STANDARD_OP("any.dims", LogicalDimsSig).call(self, dim, keepdim);
}
Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("cumsum", SoftmaxSig).call(self, dim, dtype);
}
Tensor einsum(std::string_view equation, TensorList tensors) {
  using EinsumSig = Tensor(std::string_view, TensorList, std::optional<IntArrayRef>);
  return BP_STANDARD_OP("einsum", EinsumSig).call(equation, tensors, std::nullopt);
}
Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("cumprod", SoftmaxSig).call(self, dim, dtype);
}
SortPair sort(const Tensor& self, int64_t dim, bool descending) {
  return BP_STANDARD_OP("sort", SortPair(const Tensor&, int64_t, bool)).call(self, dim, descending);
}
SortPair topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  return BP_STANDARD_OP("topk", SortPair(const Tensor&, int64_t, int64_t, bool, bool))
      .call(self, k, dim, largest, sorted);
}

// ---------------------------------------------------------- nn layers

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("softmax.int", SoftmaxSig).call(self, dim, dtype);
}
Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return BP_STANDARD_OP("log_softmax.int", SoftmaxSig).call(self, dim, dtype);
}
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  return BP_STANDARD_OP("layer_norm", Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&,
                                             const std::optional<Tensor>&, double, bool))
      .call(input, normalized_shape, weight, bias, eps, true);
}
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  return BP_STANDARD_OP("embedding", Tensor(const Tensor&, const Tensor&, int64_t, bool, bool))
      .call(weight, indices, padding_idx, false, false);
}
Tensor dropout(const Tensor& input, double p, bool train) {
  return BP_STANDARD_OP("dropout", Tensor(const Tensor&, double, bool)).call(input, p, train);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return BP_STANDARD_OP("conv2d", Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&, IntArrayRef,
                                         IntArrayRef, IntArrayRef, int64_t))
      .call(input, weight, bias, stride, padding, dilation, groups);
}
Tensor max_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding) {
  return BP_STANDARD_OP("max_pool2d", Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool))
      .call(self, kernel_size, stride, padding, {1, 1}, false);
}
Tensor avg_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding) {
  return BP_STANDARD_OP("avg_pool2d", Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool,
                                             std::optional<int64_t>))
      .call(self, kernel_size, stride, padding, false, true, std::nullopt);
}

// ---------------------------------------------------- indexing and joining

Tensor cat(TensorList tensors, int64_t dim) { return BP_STANDARD_OP("cat", JoinSig).call(tensors, dim); }
Tensor stack(TensorList tensors, int64_t dim) { return BP_STANDARD_OP("stack", JoinSig).call(tensors, dim); }
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  return BP_STANDARD_OP("index_select", Tensor(const Tensor&, int64_t, const Tensor&)).call(self, dim, index);
}
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  return BP_STANDARD_OP("gather", Tensor(const Tensor&, int64_t, const Tensor&, bool)).call(self, dim, index, false);
}
Tensor flip(const Tensor& self, IntArrayRef dims) {
  return BP_STANDARD_OP("flip", Tensor(const Tensor&, IntArrayRef)).call(self, dims);
}
void _fused_sgd_(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                 double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step) {
  using Sig = void(TensorList, TensorList, TensorList, double, double, double, double, bool, bool, bool);
  BP_STANDARD_OP("_fused_sgd_", Sig)
      .call(self, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov, maximize,
            is_first_step);
}

void _fused_adamw_(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                   TensorList max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2, double weight_decay,
                   double eps, bool amsgrad, bool maximize) {
  using Sig = void(TensorList, TensorList, TensorList, TensorList, TensorList, int64_t, double, double, double, double,
                   double, bool, bool);
  BP_STANDARD_OP("_fused_adamw_", Sig)
      .call(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1, beta2, weight_decay, eps, amsgrad,
            maximize);
}

Tensor pad(const Tensor& self, IntArrayRef pad, std::string_view mode, std::optional<double> value) {
  return BP_STANDARD_OP("pad", Tensor(const Tensor&, IntArrayRef, std::string_view, std::optional<double>))
      .call(self, pad, mode, value);
}

// -------------------------------------------------------------- operators

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
// PyTorch's rsub.Scalar: sub's rule, the number promoting as a Python number.
Tensor operator-(const Scalar& a, const Tensor& b) {
  return BP_STANDARD_OP("rsub.Scalar", ScalarAlphaSig).call(b, a, Scalar(int64_t{1}));
}
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(wrapped(b, a), b); }
Tensor operator-(const Tensor& a) { return neg(a); }
const Tensor& operator+=(const Tensor& a, const Tensor& b) { return a.add_(b); }
const Tensor& operator-=(const Tensor& a, const Tensor& b) { return a.sub_(b); }
const Tensor& operator*=(const Tensor& a, const Tensor& b) { return a.mul_(b); }
const Tensor& operator/=(const Tensor& a, const Tensor& b) { return a.div_(b); }

// ---------------------------------------------------------- tensor methods

namespace {

// Whether contiguous() and clone() copy on `device` with its own
// _copy_on_device_ kernel (Note [Tensor and TensorBase]): a device the host
// cannot read, whose kernel is neither missing nor the CPU fallback.
bool copiesOnDevice(Device device) {
  if (DeviceTypeRegistry::global().interfaceOrThrow(device.type).isHostAccessible()) return false;
  const KernelKind kind = BP_STANDARD_OP("_copy_on_device_", BinarySig).kernelKind(backendKey(device.type));
  return kind != KernelKind::Missing && kind != KernelKind::CpuFallback;
}

// Set while contiguous() or clone() runs a device's copy kernel on this
// thread: a copy that kernel makes itself stages, instead of recursing.
thread_local bool tls_in_device_copy = false;

}  // namespace

Tensor Tensor::clone() const {
  Tensor out = emptyTensor(sizes(), dtype(), device());
  if (is_contiguous() || tls_in_device_copy || !copiesOnDevice(device())) {
    copyElements(out, *this);
  } else {
    struct Reset {
      ~Reset() { tls_in_device_copy = false; }
    } reset;
    tls_in_device_copy = true;
    ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);  // the copy is recorded below, once
    out.copy_(*this);
  }
  if (requires_grad()) autogradHooks().recordCopy(*this, out);
  return out;
}

// --- Autograd: the autograd layer's, through the core's hooks.
const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  autogradHooks().setRequiresGrad(*this, requires_grad);
  return *this;
}
Tensor Tensor::grad() const { return autogradHooks().grad(*this); }
void Tensor::set_grad(const Tensor& grad) const { autogradHooks().setGrad(*this, grad); }
bool Tensor::is_leaf() const { return autogradHooks().isLeaf(*this); }
std::string Tensor::grad_fn_name() const { return autogradHooks().gradFnName(*this); }
Tensor Tensor::detach() const { return autogradHooks().detach(*this); }
void Tensor::retain_grad() const { autogradHooks().retainGrad(*this); }
void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autogradHooks().backward(*this, gradient, retain_graph, create_graph);
}

Tensor Tensor::reshape(IntArrayRef shape) const {
  if (std::optional<TensorBase> view = tryView(shape, "reshape")) return std::move(*view);
  return clone().view(shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return reshape(flattenedSizes(start_dim, end_dim)); }

Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const { return ::backplane::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const { return ::backplane::sub(*this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return ::backplane::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return ::backplane::div(*this, other); }
Tensor Tensor::add(const Scalar& other) const { return ::backplane::add(*this, other); }
Tensor Tensor::sub(const Scalar& other) const { return ::backplane::sub(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return ::backplane::mul(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return ::backplane::div(*this, other); }
const Tensor& Tensor::add_(const Tensor& other, const Scalar& alpha) const {
  BP_STANDARD_OP("add_.Tensor", AlphaSig).call(*this, other, alpha);
  return *this;
}
const Tensor& Tensor::sub_(const Tensor& other, const Scalar& alpha) const {
  BP_STANDARD_OP("sub_.Tensor", AlphaSig).call(*this, other, alpha);
  return *this;
}
const Tensor& Tensor::mul_(const Tensor& other) const {
  BP_STANDARD_OP("mul_.Tensor", BinarySig).call(*this, other);
  return *this;
}
const Tensor& Tensor::div_(const Tensor& other) const {
  BP_STANDARD_OP("div_.Tensor", BinarySig).call(*this, other);
  return *this;
}
Tensor Tensor::pow(const Scalar& exponent) const { return ::backplane::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return ::backplane::pow(*this, exponent); }
Tensor Tensor::maximum(const Tensor& other) const { return ::backplane::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return ::backplane::minimum(*this, other); }
Tensor Tensor::clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max) const {
  return ::backplane::clamp(*this, min, max);
}
Tensor Tensor::gelu(std::string_view approximate) const { return ::backplane::gelu(*this, approximate); }
Tensor Tensor::matmul(const Tensor& other) const { return ::backplane::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& mat2) const { return ::backplane::mm(*this, mat2); }
Tensor Tensor::bmm(const Tensor& mat2) const { return ::backplane::bmm(*this, mat2); }
Tensor Tensor::sum(std::optional<ScalarType> dtype) const { return ::backplane::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return ::backplane::sum(*this, dim, keepdim, dtype);
}
Tensor Tensor::mean(std::optional<ScalarType> dtype) const { return ::backplane::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return ::backplane::mean(*this, dim, keepdim, dtype);
}
Tensor Tensor::amax(IntArrayRef dim, bool keepdim) const { return ::backplane::amax(*this, dim, keepdim); }
Tensor Tensor::amin(IntArrayRef dim, bool keepdim) const { return ::backplane::amin(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return ::backplane::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return ::backplane::argmin(*this, dim, keepdim);
}
Tensor Tensor::softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return ::backplane::softmax(*this, dim, dtype);
}
Tensor Tensor::log_softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return ::backplane::log_softmax(*this, dim, dtype);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return ::backplane::masked_fill(*this, mask, value);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return ::backplane::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return ::backplane::gather(*this, dim, index); }
Tensor Tensor::prod(std::optional<ScalarType> dtype) const { return ::backplane::prod(*this, dtype); }
Tensor Tensor::prod(int64_t dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return ::backplane::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::all() const { return ::backplane::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return ::backplane::all(*this, dim, keepdim); }
Tensor Tensor::any() const { return ::backplane::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return ::backplane::any(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim, std::optional<ScalarType> dtype) const {
  return ::backplane::cumsum(*this, dim, dtype);
}
Tensor Tensor::cumprod(int64_t dim, std::optional<ScalarType> dtype) const {
  return ::backplane::cumprod(*this, dim, dtype);
}
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return ::backplane::sort(*this, dim, descending);
}
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return ::backplane::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::flip(IntArrayRef dims) const { return ::backplane::flip(*this, dims); }
const Tensor& Tensor::fill_(const Scalar& value) const {
  BP_STANDARD_OP("fill_.Scalar", ScalarSig).call(*this, value);
  return *this;
}
const Tensor& Tensor::zero_() const {
  BP_STANDARD_OP("zero_", UnarySig).call(*this);
  return *this;
}
const Tensor& Tensor::copy_(const Tensor& src) const {
  BP_STANDARD_OP("copy_", Tensor(const Tensor&, const Tensor&, bool)).call(*this, src, false);
  return *this;
}
Tensor Tensor::to(Device device, bool copy) const {
  return BP_STANDARD_OP("to.dtype_layout", ToSig).call(*this, std::nullopt, device, false, copy);
}
Tensor Tensor::to(ScalarType dtype, bool copy) const {
  return BP_STANDARD_OP("to.dtype_layout", ToSig).call(*this, dtype, std::nullopt, false, copy);
}
Tensor Tensor::to(Device device, ScalarType dtype, bool copy) const {
  return BP_STANDARD_OP("to.dtype_layout", ToSig).call(*this, dtype, device, false, copy);
}
Tensor Tensor::to(std::string_view device, bool copy) const { return to(Device::fromString(device), copy); }

}  // namespace backplane
