#pragma once
// Tensor: a TensorBase (core: metadata, storage, views) with the operators
// as methods, `a.matmul(b).relu()` as PyTorch reads.
//
// Note [Tensor and TensorBase]
// The layers split the tensor as PyTorch does:
//   core      TensorBase: sizes, strides, dtype, device, storage, data_ptr,
//             item/toVector, str/format, and the views that only compute
//             metadata (Note [Views live in the core]); emptyTensor,
//             tensorFromVector, stageSpan and copyElements, which copy
//             through the devices' byte copies only.
//   dispatch  IValue holds TensorBase; boxing treats any class derived
//             from TensorBase as a tensor and builds the type a kernel
//             declares from the boxed value; the CPU fallback works on
//             TensorBase.
//   ops       Tensor (here): the same handle, no extra data, with every
//             operator as a method, defined with the free functions of
//             backplane/ops/ops.h (ops_api.cc), which document them; and
//             reshape, flatten, contiguous and clone, which may copy.
// A TensorBase converts to a Tensor implicitly (both ways cost a handle
// copy or move), so core's functions compose with Tensor code:
// `Tensor t = emptyTensor(...)`. They return TensorBase, so an operator
// called on their result directly needs the conversion spelled,
// `Tensor(tensorFromVector(...)).to(dev)`, and a kernel lambda that returns
// one declares `-> Tensor` (kernels take and return Tensor, boxing.h).
//
// contiguous(), clone() and a reshape() or flatten() no view can express
// make a contiguous copy on the tensor's own device. When that device is
// one the host cannot read and has a _copy_on_device_ kernel of its own (a
// plugin's, or a composite: not Missing and not the CPU fallback), the copy
// runs it, through copy_ (Note [Copies between devices]), and the bytes stay
// on the device. Otherwise core's copyElements copies: on the host for a
// host-readable device, else staging the spans through the host (Note [Span
// staging]), counted as transfers (Note [Counting host<->device
// transfers]) and never a fallback warning or a BACKPLANE_FALLBACK=error
// refusal, since a view's copy is no operator the user called. A copy made
// while a device's copy kernel runs on the same thread (a kernel that calls
// contiguous() itself) stages too, instead of recursing without end.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "backplane/core/tensor_base.h"

namespace backplane {

class Tensor : public TensorBase {
 public:
  // An undefined tensor (no storage): what an absent `Tensor?` holds.
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : TensorBase(std::move(impl)) {}
  Tensor(const TensorBase& base) : TensorBase(base) {}        // NOLINT: implicit by design
  Tensor(TensorBase&& base) : TensorBase(std::move(base)) {}  // NOLINT: implicit by design

  // --- Views: TensorBase's, as Tensors (Note [Views live in the core]).
  Tensor view(IntArrayRef sizes) const { return TensorBase::view(sizes); }
  Tensor transpose(int64_t dim0, int64_t dim1) const { return TensorBase::transpose(dim0, dim1); }
  Tensor t() const { return TensorBase::t(); }
  Tensor permute(IntArrayRef dims) const { return TensorBase::permute(dims); }
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const {
    return TensorBase::slice(dim, start, end, step);
  }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const { return TensorBase::narrow(dim, start, length); }
  Tensor select(int64_t dim, int64_t index) const { return TensorBase::select(dim, index); }
  Tensor expand(IntArrayRef sizes) const { return TensorBase::expand(sizes); }
  Tensor squeeze() const { return TensorBase::squeeze(); }
  Tensor squeeze(int64_t dim) const { return TensorBase::squeeze(dim); }
  Tensor unsqueeze(int64_t dim) const { return TensorBase::unsqueeze(dim); }
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const {
    return TensorBase::as_strided(sizes, strides, storage_offset);
  }

  // --- Views when possible, else copies (Note [Tensor and TensorBase]).
  Tensor reshape(IntArrayRef sizes) const;  // one size may be -1
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // This tensor if contiguous, else a contiguous copy on the same device.
  Tensor contiguous() const { return is_contiguous() ? *this : clone(); }
  // A contiguous copy on the same device.
  Tensor clone() const;

  // --- Operators as methods. Defined with the free functions of
  // backplane/ops/ops.h, which documents them; each dispatches like the free
  // function does.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor add(const Scalar& other) const;
  Tensor sub(const Scalar& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Scalar& other) const;
  const Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& div_(const Tensor& other) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(std::string_view approximate = "none") const;
  Tensor silu() const;
  Tensor div(const Tensor& other, std::optional<std::string_view> rounding_mode) const;
  Tensor floor_divide(const Tensor& other) const;
  Tensor remainder(const Tensor& other) const;
  Tensor fmod(const Tensor& other) const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor trunc() const;
  Tensor round() const;
  Tensor round(int64_t decimals) const;
  Tensor sign() const;
  Tensor erf() const;
  Tensor bitwise_not() const;
  Tensor logical_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& mat2) const;
  Tensor bmm(const Tensor& mat2) const;
  Tensor sum(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dim, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dim, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor amax(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor prod(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor prod(int64_t dim, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor cumprod(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;
  Tensor nonzero() const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor roll(IntArrayRef shifts, IntArrayRef dims = {}) const;
  Tensor repeat(IntArrayRef repeats) const;
  const Tensor& fill_(const Scalar& value) const;
  const Tensor& zero_() const;
  const Tensor& copy_(const Tensor& src) const;
  // This tensor when it already has that device/dtype (copy = false), else a
  // converted copy. A device string ("cuda:0") is parsed with Device::parse.
  Tensor to(Device device, bool copy = false) const;
  Tensor to(ScalarType dtype, bool copy = false) const;
  Tensor to(Device device, ScalarType dtype, bool copy = false) const;
  Tensor to(std::string_view device, bool copy = false) const;
  Tensor cpu() const { return to(Device(DeviceType::CPU)); }

  // --- Autograd (docs/autograd.md), served by the autograd layer through
  // the core's hooks (Note [Autograd in the core]).
  // Makes this tensor a leaf that gradients flow to (or stops it being
  // one); only for a leaf, and only for floating dtypes.
  const Tensor& requires_grad_(bool requires_grad = true) const;
  // The gradient accumulated into this leaf (or a non-leaf that called
  // retain_grad()) by backward(); undefined before the first one.
  Tensor grad() const;
  // Replaces (or with an undefined tensor, clears) the accumulated gradient.
  void set_grad(const Tensor& grad) const;
  // True for tensors that no differentiable op made (requires_grad_ leaves,
  // and every tensor that does not require grad).
  bool is_leaf() const;
  // The name of the node that made this tensor ("MulBackward"), "" for a leaf.
  std::string grad_fn_name() const;
  // The same data, cut from the graph: does not require grad.
  Tensor detach() const;
  // Keeps the gradient of this non-leaf in grad() after backward().
  void retain_grad() const;
  // Computes the gradients of this tensor with respect to the leaves that
  // require grad and accumulates them into their grad(). `gradient` may be
  // left out only for a one-element tensor (it is then 1).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false, bool create_graph = false) const;
};

static_assert(sizeof(Tensor) == sizeof(TensorBase), "Tensor adds methods, never data");

// A Tensor[] and a Tensor?[] argument (Note [Canonical C++ signatures]).
using TensorList = ArrayRef<Tensor>;
using OptionalTensorList = ArrayRef<std::optional<Tensor>>;

}  // namespace backplane
