#pragma once
// Tensor: a strided view onto a Storage: sizes, strides (in elements), a
// storage offset, a dtype and a device. Copying a Tensor copies a handle;
// both refer to the same TensorImpl.
//
// Note [Views live in the core]
// view, reshape, transpose, permute, slice, select, expand, squeeze,
// unsqueeze, flatten and as_strided only compute new metadata over the same
// Storage, so they work on every device without a kernel and never fall back.
// The one exception is reshape (and contiguous) of a layout that no view can
// express: it copies, through copyElements below, which runs the device's
// own copy kernel (Note [Strided copies on the device]).
//
// Note [Tensor methods are operators]
// Methods such as add(), matmul() and to() are operators: they dispatch on
// the tensor's device and may run a plugin's kernel or the CPU fallback.
// They are declared here, so that `a.matmul(b)` reads as it does in
// PyTorch, and defined by the dispatcher library (dispatcher/runtime/src/
// ops.cc) next to the free functions of backplane/ops.h, which document
// them. The core never calls them, so it still links without the
// dispatcher; a program that calls them links the `backplane` library,
// which every application does.

#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "backplane/core/array_ref.h"
#include "backplane/core/device.h"
#include "backplane/core/error.h"
#include "backplane/core/intrusive_ptr.h"
#include "backplane/core/scalar.h"
#include "backplane/core/scalar_type.h"
#include "backplane/core/storage.h"

namespace backplane {

// Up to 5 dimensions are stored inline; more spill to the heap.
using DimVector = absl::InlinedVector<int64_t, 5>;

class TensorImpl final : public IntrusiveTarget {
 public:
  // Validates the layout against the storage: sizes and strides >= 0, offset
  // >= 0, and every element inside the storage. Throws Error otherwise.
  TensorImpl(Storage storage, int64_t storage_offset, IntArrayRef sizes, IntArrayRef strides,
             ScalarType dtype);
  // A fresh contiguous tensor over all of `storage` whose element count the
  // caller has computed and checked (emptyTensor): skips re-validating the
  // layout, which is most of the cost of creating a small tensor.
  struct FreshContiguous {
    int64_t numel;
  };
  TensorImpl(Storage storage, IntArrayRef sizes, IntArrayRef contiguous_strides, ScalarType dtype,
             FreshContiguous fresh);

  const Storage& storage() const { return storage_; }
  int64_t storageOffset() const { return storage_offset_; }
  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  int64_t numel() const { return numel_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool isContiguous() const { return is_contiguous_; }

  // Gives a tensor with no elements (an out= argument passed as an empty
  // placeholder) fresh contiguous storage of `sizes` on its device, keeping
  // its dtype. Throws Error if the tensor has elements: a non-empty output
  // of the wrong shape is an error, never silently reallocated.
  void resizeEmpty(IntArrayRef sizes);

 private:
  Storage storage_;
  int64_t storage_offset_;
  DimVector sizes_;
  DimVector strides_;
  int64_t numel_;
  ScalarType dtype_;
  Device device_;
  bool is_contiguous_;
};

class Tensor {
 public:
  // An undefined tensor (no storage): what an absent `Tensor?` holds.
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* unsafeGetImpl() const { return impl_.get(); }

  // --- Metadata. All throw Error on an undefined tensor except defined().
  int64_t dim() const { return static_cast<int64_t>(impl().sizes().size()); }
  IntArrayRef sizes() const { return impl().sizes(); }
  IntArrayRef strides() const { return impl().strides(); }
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t numel() const { return impl().numel(); }
  ScalarType dtype() const { return impl().dtype(); }
  ScalarType scalar_type() const { return dtype(); }
  Device device() const { return impl().device(); }
  const Storage& storage() const { return impl().storage(); }
  int64_t storage_offset() const { return impl().storageOffset(); }
  size_t itemsize() const { return elementSize(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  // Row-major with no gaps (size-1 dims may have any stride).
  bool is_contiguous() const { return impl().isContiguous(); }
  // True if the two tensors share storage.
  bool is_alias_of(const Tensor& o) const { return storage().isAliasOf(o.storage()); }
  uint32_t use_count() const { return impl_ ? impl_->useCount() : 0; }

  // Address of the first element: storage base + offset * itemsize. For a
  // device the host cannot read it is an opaque device address (see Note
  // [The host never dereferences device memory]).
  void* data_ptr() const;
  // Typed address; throws if T is not the tensor's dtype.
  template <typename T>
  T* data_ptr() const {
    BP_CHECK(CppTypeToScalarType<std::remove_const_t<T>>::value == dtype(), "data_ptr<",
             scalarTypeName(CppTypeToScalarType<std::remove_const_t<T>>::value),
             ">() called on a tensor of dtype ", scalarTypeName(dtype()));
    return static_cast<T*>(data_ptr());
  }

  // The value of a one-element tensor converted to T; copies it to the host
  // through the device's copy function when needed.
  template <typename T>
  T item() const;
  // Every element in row-major order, converted to T, on the host.
  template <typename T>
  std::vector<T> toVector() const;

  // --- Views (metadata only, share storage). Dims may be negative.
  Tensor view(IntArrayRef sizes) const;        // one size may be -1; throws if not viewable
  Tensor reshape(IntArrayRef sizes) const;     // a view when possible, else a copy
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;                            // transpose of a <= 2-d tensor
  Tensor permute(IntArrayRef dims) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(IntArrayRef sizes) const;      // -1 keeps a size; new dims go in front
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  // This tensor if contiguous, else a contiguous copy on the same device.
  Tensor contiguous() const;
  // A contiguous copy on the same device.
  Tensor clone() const;

  // "Tensor[2, 3] float32 cpu" (or "Tensor[undefined]"): the one-line form
  // that operator<< and error messages use.
  std::string str() const;
  // The values, PyTorch-style, followed by dtype and device:
  //   tensor([[ 1.0000, -2.5000],
  //           [ 3.0000,  4.0000]], float32, cpu)
  // Tensors of more than `threshold` elements are summarised: `edge_items`
  // at each end of every dimension, "..." between, and only those elements
  // are copied to the host.
  struct FormatOptions {
    int64_t threshold = 1000;
    int64_t edge_items = 3;
    int precision = 4;  // digits after the point for floating types
  };
  std::string format(const FormatOptions& options) const;
  std::string format() const { return format(FormatOptions{}); }

  // --- Operators as methods (Note [Tensor methods are operators]). Defined
  // by the dispatcher library with the free functions of backplane/ops.h,
  // which documents them; each dispatches like the free function does.
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

 private:
  const TensorImpl& impl() const {
    if (!impl_) [[unlikely]] throwUndefined();
    return *impl_;
  }
  [[noreturn]] static void throwUndefined();
  void readElementsToHost(void* dst) const;  // row-major, as dtype()
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// --- Creation and data movement that need no operator.

// A new tensor with uninitialised contiguous storage on `device` (index -1 is
// resolved to 0). Throws if the device type has no interface or the index is
// out of range.
Tensor emptyTensor(IntArrayRef sizes, ScalarType dtype = ScalarType::Float32,
                   Device device = Device(DeviceType::CPU));
// Like emptyTensor with explicit strides (>= 0); storage covers every element.
Tensor emptyStridedTensor(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype,
                          Device device = Device(DeviceType::CPU));

// A tensor of `sizes` holding `values` (row-major) on `device`; the dtype is
// T's. Throws if the count does not match the shape.
template <typename T>
Tensor tensorFromVector(const std::vector<T>& values, IntArrayRef sizes,
                        Device device = Device(DeviceType::CPU));

// Copies the elements of `src` into `dst`: same dtype, same sizes, any
// strides, any two devices. Goes through the devices' copy functions, and
// through the strided copy below when one side is a device the host cannot
// read and the two layouts differ.
void copyElements(const Tensor& dst, const Tensor& src);

// Note [Strided copies on the device]
// contiguous(), clone(), reshape() that must copy, and copyElements
// live in the core, which knows devices only through their byte copies
// (DeviceInterface). A strided copy on a device the host cannot read needs a
// kernel, and kernels are reached through the dispatcher, a layer above. So
// the dispatcher installs a StridedCopyFn when its standard operators are
// registered (it runs bp::copy_, whose same-device part is the device's
// _copy_on_device_ kernel, Note [Copies between devices]), and copyElements
// calls it for every copy whose layouts differ and that involves such a
// device. The arrow still points one way: core calls a function pointer,
// never a dispatcher symbol. For a device with no _copy_on_device_ kernel
// of its own, and with no function installed (core alone, as in core's
// tests), copyElements stages the spans through the host itself (Note [Span
// staging]); that staging is counted (Note [Counting host<->device transfers]),
// inside an op as that op's. A copy made while the function runs on the same
// thread stages too, so a device's copy kernel cannot recurse through it. When TensorBase and Tensor split (PyTorch's
// layering), contiguous() and clone() move to the ops layer and call the
// operator directly; this hook then goes.
//
// The function copies src into dst (same dtype and sizes, any strides, any
// two devices) and returns true, or throws Error; it returns false, having
// done nothing, when the devices have no copy kernel of their own, and
// copyElements then stages the spans itself.
using StridedCopyFn = bool (*)(const Tensor& dst, const Tensor& src);
// Installs (or, with nullptr, removes) the strided copy. Thread-safe; the
// dispatcher calls it once, before any op can run.
void setStridedCopy(StridedCopyFn fn);
// The strided copy installed now, or nullptr.
StridedCopyFn installedStridedCopy();

// Note [Span staging]
// The bytes between a tensor's first and last element (its span) can be
// copied to another device as a block; a tensor with the same sizes and
// strides over the copy then holds the same elements. The CPU fallback uses
// this to move strided views without kernels.
//
// stageSpan: a tensor on `device` with t's sizes, strides and values.
Tensor stageSpan(const Tensor& t, Device device);
// writeSpanBack: copies the span of `staged` (made by stageSpan(original, ..))
// back over the span of `original`.
void writeSpanBack(const Tensor& original, const Tensor& staged);
// Bytes stageSpan(t, ...) moves.
size_t spanBytes(const Tensor& t);

// ---------------------------------------------------------------- inline

template <typename T>
T Tensor::item() const {
  BP_CHECK(numel() == 1, "item() needs a tensor with exactly one element, but this one has ",
           numel(), " (sizes ", ::backplane::ArrayRef<int64_t>(sizes()), ")");
  alignas(8) unsigned char raw[8];
  readElementsToHost(raw);
  return visitScalarType(dtype(), [&]<typename S>() -> T {
    S v;
    std::memcpy(&v, raw, sizeof(S));
    if constexpr (std::is_same_v<S, T>) return v;
    else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>)
      return Scalar(static_cast<float>(v)).template to<T>();
    else return Scalar(v).template to<T>();
  });
}

template <typename T>
std::vector<T> Tensor::toVector() const {
  std::vector<unsigned char> raw(nbytes());
  readElementsToHost(raw.data());
  std::vector<T> out(static_cast<size_t>(numel()));
  visitScalarType(dtype(), [&]<typename S>() {
    for (size_t i = 0; i < out.size(); ++i) {
      S v;
      std::memcpy(&v, raw.data() + i * sizeof(S), sizeof(S));
      if constexpr (std::is_same_v<S, T>) out[i] = v;
      else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>)
        out[i] = Scalar(static_cast<float>(v)).template to<T>();
      else out[i] = Scalar(v).template to<T>();
    }
  });
  return out;
}

namespace detail {
void fillFromHost(const Tensor& dst, const void* src, size_t nbytes);
}

template <typename T>
Tensor tensorFromVector(const std::vector<T>& values, IntArrayRef sizes, Device device) {
  Tensor t = emptyTensor(sizes, CppTypeToScalarType<T>::value, device);
  BP_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "tensorFromVector: ", values.size(),
           " values do not fill sizes ", sizes, " (", t.numel(), " elements)");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<unsigned char> bytes(values.begin(), values.end());
    detail::fillFromHost(t, bytes.data(), bytes.size());
  } else {
    detail::fillFromHost(t, values.data(), values.size() * sizeof(T));
  }
  return t;
}

}  // namespace backplane
