#pragma once
// TensorBase: a strided view onto a Storage: sizes, strides (in elements), a
// storage offset, a dtype and a device. Copying a TensorBase copies a handle;
// both refer to the same TensorImpl. Applications use Tensor
// (backplane/ops/tensor.h, the ops layer), which adds the operators as methods
// (Note [Tensor and TensorBase]).
//
// Note [Views live in the core]
// view, transpose, permute, slice, select, expand, squeeze, unsqueeze and
// as_strided only compute new metadata over the same Storage, so they work
// on every device without a kernel and never fall back. What may copy
// (reshape and flatten of a layout no view can express, contiguous, clone)
// needs a device's copy kernel, which only the layers above can reach: those
// are Tensor's.

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "backplane/core/array_ref.h"
#include "backplane/core/autograd_hooks.h"
#include "backplane/core/device.h"
#include "backplane/core/error.h"
#include "backplane/core/intrusive_ptr.h"
#include "backplane/core/scalar.h"
#include "backplane/core/scalar_type.h"
#include "backplane/core/storage.h"

namespace backplane {

// Up to 5 dimensions are stored inline; more spill to the heap.
using DimVector = absl::InlinedVector<int64_t, 5>;

// Note [Rank limit]
// A tensor has at most kMaxTensorDims (64) dimensions, as PyTorch in many
// places (TensorIterator, DLPack, NumPy 2's NPY_MAXDIMS). TensorImpl's
// constructors are the one place every tensor's sizes and strides are set
// (creation, every view, resizeEmpty, DLPack import, tensors a plugin makes
// through the host API), and each refuses a longer shape with
// "a tensor has at most 64 dimensions; got 65" before reading it, so a
// corrupt ndim never makes the host read a huge shape array. Code that walks
// the dimensions recursively (format(), Python's tolist()) relies on it for
// a bounded depth, and the conversions to NumPy and DLPack are correct for
// every rank up to it.
inline constexpr int64_t kMaxTensorDims = 64;

// Throws Error(kInvalidArgument) naming the limit when ndim > kMaxTensorDims
// (Note [Rank limit]).
void checkTensorRank(size_t ndim);

class TensorImpl final : public IntrusiveTarget {
 public:
  // Validates the layout against the storage: sizes and strides >= 0, offset
  // >= 0, and every element inside the storage. Throws Error otherwise.
  TensorImpl(Storage storage, int64_t storage_offset, IntArrayRef sizes, IntArrayRef strides, ScalarType dtype);
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

  // Autograd (Note [Autograd in the core]): the bit the dispatcher reads,
  // and the autograd layer's state, which only that layer sets.
  bool requiresGrad() const { return requires_grad_; }
  AutogradMetaInterface* autogradMeta() const { return autograd_meta_.get(); }
  void setAutogradMeta(std::unique_ptr<AutogradMetaInterface> meta, bool requires_grad) {
    autograd_meta_ = std::move(meta);
    requires_grad_ = requires_grad;
  }
  void setRequiresGradBit(bool requires_grad) { requires_grad_ = requires_grad; }

 private:
  Storage storage_;
  int64_t storage_offset_;
  DimVector sizes_;
  DimVector strides_;
  int64_t numel_;
  ScalarType dtype_;
  Device device_;
  bool is_contiguous_;
  bool requires_grad_ = false;
  std::unique_ptr<AutogradMetaInterface> autograd_meta_;
};

class TensorBase {
 public:
  // An undefined tensor (no storage): what an absent `Tensor?` holds.
  TensorBase() = default;
  explicit TensorBase(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* unsafeGetImpl() const { return impl_.get(); }

  // --- Metadata. All throw Error on an undefined tensor except defined().
  int64_t dim() const { return static_cast<int64_t>(impl().sizes().size()); }
  IntArrayRef sizes() const { return impl().sizes(); }
  IntArrayRef strides() const { return impl().strides(); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
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
  bool is_alias_of(const TensorBase& o) const { return storage().isAliasOf(o.storage()); }
  uint32_t use_count() const { return impl_ ? impl_->useCount() : 0; }

  // --- Autograd (Note [Autograd in the core]; docs/apps.md#autograd). The
  // mutators are const, as PyTorch's: they change the shared TensorImpl.
  // Whether gradients flow to this tensor: a leaf set so by requires_grad_,
  // or the result of a differentiable op on such tensors.
  bool requires_grad() const { return impl_ && impl_->requiresGrad(); }
  // How many times an operator has written this tensor's storage.
  uint64_t _version() const { return storage().unsafeGetImpl()->version(); }

  // Address of the first element: storage base + offset * itemsize. For a
  // device the host cannot read it is an opaque device address (see Note
  // [The host never dereferences device memory]).
  void* data_ptr() const;
  // Typed address; throws if T is not the tensor's dtype.
  template <typename T>
  T* data_ptr() const {
    BP_CHECK(CppTypeToScalarType<std::remove_const_t<T>>::value == dtype(), "data_ptr<",
             scalarTypeName(CppTypeToScalarType<std::remove_const_t<T>>::value), ">() called on a tensor of dtype ",
             scalarTypeName(dtype()));
    return static_cast<T*>(data_ptr());
  }

  // The value of a one-element tensor converted to T; copies it to the host
  // through the device's copy function when needed.
  template <typename T>
  T item() const;
  // Every element in row-major order, converted to T, on the host.
  template <typename T>
  std::vector<T> toVector() const;

  // --- Views (metadata only, share storage). Dims may be negative. Tensor
  // re-declares each returning Tensor, and adds reshape, flatten, contiguous
  // and clone, which may copy (Note [Views live in the core]).
  TensorBase view(IntArrayRef sizes) const;  // one size may be -1; throws if not viewable
  // view() when the layout allows one, else nullopt (reshape then copies).
  // Throws, naming `op`, when `sizes` does not fit numel().
  std::optional<TensorBase> tryView(IntArrayRef sizes, const char* op) const;
  TensorBase transpose(int64_t dim0, int64_t dim1) const;
  TensorBase t() const;  // transpose of a <= 2-d tensor
  TensorBase permute(IntArrayRef dims) const;
  TensorBase slice(int64_t dim, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
                   int64_t step = 1) const;
  TensorBase narrow(int64_t dim, int64_t start, int64_t length) const;
  TensorBase select(int64_t dim, int64_t index) const;
  TensorBase expand(IntArrayRef sizes) const;  // -1 keeps a size; new dims go in front
  TensorBase squeeze() const;
  TensorBase squeeze(int64_t dim) const;
  TensorBase unsqueeze(int64_t dim) const;
  TensorBase as_strided(IntArrayRef sizes, IntArrayRef strides,
                        std::optional<int64_t> storage_offset = std::nullopt) const;
  // The sizes flatten(start_dim, end_dim) gives: dims start_dim..end_dim
  // merged into one ({1} for a 0-d tensor).
  DimVector flattenedSizes(int64_t start_dim, int64_t end_dim) const;

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

 private:
  const TensorImpl& impl() const {
    if (!impl_) [[unlikely]]
      throwUndefined();
    return *impl_;
  }
  [[noreturn]] static void throwUndefined();
  void readElementsToHost(void* dst) const;  // row-major, as dtype()
  // A view of this tensor over the same storage, not yet recorded.
  TensorBase makeView(IntArrayRef sizes, IntArrayRef strides,
                      std::optional<int64_t> storage_offset = std::nullopt) const;
  // Returns `view`, recorded for autograd when this tensor requires grad
  // (Note [Autograd in the core]): make_replay() returns a ViewReplay that
  // makes the same view of another tensor. It runs only then, so a view of
  // a tensor without grad copies nothing for it.
  template <typename MakeReplay>
  TensorBase finishView(TensorBase view, const char* name, MakeReplay&& make_replay) const {
    if (impl_->requiresGrad()) [[unlikely]]
      autogradHooks().recordView(*this, view, name, make_replay());
    return view;
  }
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const TensorBase& t);

// --- Creation and data movement that need no operator.

// A new tensor with uninitialised contiguous storage on `device` (index -1 is
// resolved to 0). Throws if the device type has no interface or the index is
// out of range.
TensorBase emptyTensor(IntArrayRef sizes, ScalarType dtype = ScalarType::Float32,
                       Device device = Device(DeviceType::CPU));
// Like emptyTensor with explicit strides (>= 0); storage covers every element.
TensorBase emptyStridedTensor(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype,
                              Device device = Device(DeviceType::CPU));

// A tensor of `sizes` holding `values` (row-major) on `device`; the dtype is
// T's. Throws if the count does not match the shape.
template <typename T>
TensorBase tensorFromVector(const std::vector<T>& values, IntArrayRef sizes, Device device = Device(DeviceType::CPU));

// Copies the elements of `src` into `dst`: same dtype, same sizes, any
// strides, any two devices, through the devices' byte copies. When one side
// is a device the host cannot read and a layout is strided, the spans are
// staged through the host (Note [Span staging]), counted as transfers (Note
// [Counting host<->device transfers]): the core knows devices only through
// DeviceInterface. Tensor's contiguous() and clone() run the device's copy
// kernel instead when it has one (Note [Tensor and TensorBase]).
void copyElements(const TensorBase& dst, const TensorBase& src);

// Note [Span staging]
// The bytes between a tensor's first and last element (its span) can be
// copied to another device as a block; a tensor with the same sizes and
// strides over the copy then holds the same elements. The CPU fallback uses
// this to move strided views without kernels.
//
// stageSpan: a tensor on `device` with t's sizes, strides and values.
TensorBase stageSpan(const TensorBase& t, Device device);
// writeSpanBack: copies the span of `staged` (made by stageSpan(original, ..))
// back over the span of `original`.
void writeSpanBack(const TensorBase& original, const TensorBase& staged);
// Bytes stageSpan(t, ...) moves.
size_t spanBytes(const TensorBase& t);

// ---------------------------------------------------------------- inline

template <typename T>
T TensorBase::item() const {
  BP_CHECK(numel() == 1, "item() needs a tensor with exactly one element, but this one has ", numel(), " (sizes ",
           ::backplane::ArrayRef<int64_t>(sizes()), ")");
  alignas(8) unsigned char raw[8];
  readElementsToHost(raw);
  return visitScalarType(dtype(), [&]<typename S>() -> T {
    S v;
    std::memcpy(&v, raw, sizeof(S));
    if constexpr (std::is_same_v<S, T>)
      return v;
    else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>)
      return Scalar(static_cast<float>(v)).template to<T>();
    else
      return Scalar(v).template to<T>();
  });
}

template <typename T>
std::vector<T> TensorBase::toVector() const {
  std::vector<unsigned char> raw(nbytes());
  readElementsToHost(raw.data());
  std::vector<T> out(static_cast<size_t>(numel()));
  visitScalarType(dtype(), [&]<typename S>() {
    for (size_t i = 0; i < out.size(); ++i) {
      S v;
      std::memcpy(&v, raw.data() + i * sizeof(S), sizeof(S));
      if constexpr (std::is_same_v<S, T>)
        out[i] = v;
      else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>)
        out[i] = Scalar(static_cast<float>(v)).template to<T>();
      else if constexpr (std::is_same_v<S, uint64_t> && !std::is_same_v<T, bool>)
        out[i] = static_cast<T>(v);  // a Scalar's int64 would wrap values from 2^63 on
      else
        out[i] = Scalar(v).template to<T>();
    }
  });
  return out;
}

namespace detail {
void fillFromHost(const TensorBase& dst, const void* src, size_t nbytes);
}

template <typename T>
TensorBase tensorFromVector(const std::vector<T>& values, IntArrayRef sizes, Device device) {
  TensorBase t = emptyTensor(sizes, CppTypeToScalarType<T>::value, device);
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
