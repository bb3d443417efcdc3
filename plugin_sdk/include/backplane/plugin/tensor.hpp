// bp::Tensor: a counted reference to a host tensor, its metadata, its
// element addresses (Note [Host and device addresses]) and allocation of new
// tensors. Part of <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_TENSOR_HPP_
#define BACKPLANE_PLUGIN_TENSOR_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/element_types.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/host.hpp"
#include "backplane/plugin/scalar_type.hpp"
#include "backplane/plugin/value_types.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// Owns one reference to a host tensor (BP_Tensor*), or none ("undefined").
// Copy retains, destruction releases, move transfers. Metadata comes from
// ONE host call (tensor_info) made on first use and cached in the object: a
// host tensor's metadata never changes.
// Thread-safety: distinct Tensor objects may be used concurrently (even for
// the same host tensor); one Tensor object may not be used from two threads
// at once, not even through const methods, because the cache fills lazily.
class Tensor;
namespace detail {
template <class D, bool kByReference>
struct ArgFetch;
}  // namespace detail

class Tensor {
 public:
  // An undefined tensor (get() == nullptr).
  Tensor() noexcept = default;

  // Shares `t` (retains it); the caller keeps its own reference. NULL gives
  // an undefined tensor.
  static Tensor borrow(BP_Tensor* t) {
    Tensor r;
    if (t != nullptr) r.t_ = retain(t);
    return r;
  }
  // Takes over a reference the caller owns (e.g. an op_call return); NULL
  // gives an undefined tensor.
  static Tensor adopt(BP_Tensor* t) noexcept {
    Tensor r;
    r.t_ = t;
    return r;
  }

  // Copies and moves do not carry the metadata cache: it is refilled by one
  // host call when first needed, and a kernel returning a tensor never pays
  // for copying it.
  Tensor(const Tensor& o) : t_(o.t_ ? retain(o.t_) : nullptr) {}
  Tensor(Tensor&& o) noexcept : t_(o.t_), owned_(o.owned_) {
    o.t_ = nullptr;
    o.has_info_ = false;
    o.owned_ = true;
  }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) *this = Tensor(o);
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      reset();
      t_ = o.t_;
      has_info_ = false;
      owned_ = o.owned_;
      o.t_ = nullptr;
      o.has_info_ = false;
      o.owned_ = true;
    }
    return *this;
  }
  ~Tensor() { reset(); }

  // Releases the reference (if any); the tensor becomes undefined.
  void reset() noexcept {
    if (t_ != nullptr && owned_) releaseReference();
    t_ = nullptr;
    has_info_ = false;
    owned_ = true;
  }
  // The host tensor, still owned by this object (borrowed by the caller).
  BP_Tensor* get() const noexcept { return t_; }
  // Gives up ownership: returns the reference (the caller now owns it, e.g.
  // to store into a kernel's returns) and leaves this tensor undefined.
  BP_Tensor* release() {
    BP_Tensor* t = t_;
    if (t != nullptr && !owned_) t = retain(t);  // a view of a kernel argument: make a real reference
    t_ = nullptr;
    has_info_ = false;
    owned_ = true;
    return t;
  }
  bool defined() const noexcept { return t_ != nullptr; }

  // All metadata; pointers inside are valid while this tensor lives. Throws
  // bp::Error(BP_FAILED_PRECONDITION) on an undefined tensor (so do the
  // accessors below).
  const BP_TensorInfo& info() const {
    if (!has_info_) [[unlikely]]
      fetchInfo();
    return info_;
  }
  int64_t dim() const { return info().dim; }
  // Size of dimension `d`; negative `d` counts from the end. Throws
  // bp::Error(BP_OUT_OF_RANGE) outside [-dim(), dim()).
  int64_t size(int64_t d) const { return info().sizes[wrapDim(d)]; }
  // Stride of dimension `d` in elements; `d` as for size().
  int64_t stride(int64_t d) const { return info().strides[wrapDim(d)]; }
  IntList sizes() const { return IntList(info().sizes, static_cast<size_t>(info().dim)); }
  IntList strides() const { return IntList(info().strides, static_cast<size_t>(info().dim)); }
  int64_t numel() const { return info().numel; }
  ScalarType dtype() const { return static_cast<ScalarType>(info().dtype); }
  size_t element_size() const { return elementSize(dtype()); }
  Device device() const { return Device::fromC(info().device); }
  int64_t storage_offset() const { return info().storage_offset; }
  bool is_contiguous() const { return info().is_contiguous != 0; }
  // Note [Host and device addresses]
  // A tensor's first element has one address, but whether the host may
  // dereference it depends on the device, so the SDK spells the two uses
  // differently:
  // - data_ptr<T>() is for code that reads and writes the elements on the
  //   host. It refuses (BP_FAILED_PRECONDITION) unless the tensor is on the
  //   cpu or on a device type this plugin registered with host-accessible
  //   memory (DeviceBackend::hostAccessible, BP_DeviceTypeDesc
  //   .host_accessible): a pointer it returns is safe to dereference.
  // - device_ptr<T>() is the address on the tensor's device, unchecked: to
  //   hand to a driver or a device kernel, or for a plugin to translate
  //   into its own memory (samples/vendor_plugin). Dereferencing it on the
  //   host is wrong unless the memory is host memory.
  // - data_ptr() and device_ptr() without T are that raw address as void*,
  //   unchecked (data_ptr() is kept under its old name for the GPU plugins,
  //   which pass it to their drivers).
  // The check is a compare (cpu first) and a bit test on cached metadata:
  // about 0.2 ns a call. A device type of
  // another plugin (e.g. "cuda" seen from a plugin adding kernels to it) is
  // not known to be host memory: use device_ptr<T>() there.

  // The address of the first element (storage + offset) on the tensor's
  // device; see Note [Host and device addresses]. Unchecked.
  void* data_ptr() const { return info().data; }
  void* device_ptr() const { return info().data; }
  // The first element as a host pointer T* (T may be const), for the host to
  // dereference. Throws bp::Error(BP_INVALID_ARGUMENT) if T's ScalarType is
  // not dtype(), and bp::Error(BP_FAILED_PRECONDITION) if the tensor's
  // memory is not known to be host memory (Note [Host and device
  // addresses]).
  template <class T>
  T* data_ptr() const {
    T* p = typedAddress<T>("data_ptr");
    const int32_t type = info().device.type;
    if (type != 0 && !detail::isHostAccessibleType(type)) [[unlikely]]  // cpu first: the common case
      notHostMemory(scalarTypeOf<T>());
    return p;
  }
  // The first element's device address as T* (T may be const), not to be
  // dereferenced on the host unless the memory is host memory. Throws
  // bp::Error(BP_INVALID_ARGUMENT) if T's ScalarType is not dtype().
  template <class T>
  T* device_ptr() const {
    return typedAddress<T>("device_ptr");
  }

  // A new contiguous tensor on `device`, allocated by that device's
  // allocator; contents uninitialized.
  static Tensor empty(IntList sizes, ScalarType dtype, Device device) {
    BP_Tensor* out = nullptr;
    throwIfError(detail::hostSlot(host().tensor_empty, "tensor_empty")(
        sizes.data(), sizes.size(), nullptr, static_cast<BP_ScalarType>(dtype), device.toC(), &out));
    return adoptResult(out, "tensor_empty");
  }
  // As empty(), with explicit strides (in elements).
  static Tensor empty_strided(IntList sizes, IntList strides, ScalarType dtype, Device device) {
    checkSameRank(sizes, strides, "empty_strided");
    BP_Tensor* out = nullptr;
    throwIfError(detail::hostSlot(host().tensor_empty, "tensor_empty")(
        sizes.data(), sizes.size(), strides.data(), static_cast<BP_ScalarType>(dtype), device.toC(), &out));
    return adoptResult(out, "tensor_empty");
  }
  // A view sharing this tensor's storage (offset and strides in elements).
  Tensor as_strided(IntList sizes, IntList strides, int64_t storage_offset) const {
    if (t_ == nullptr) fail(BP_FAILED_PRECONDITION, "as_strided() called on an undefined bp::Tensor");
    checkSameRank(sizes, strides, "as_strided");
    BP_Tensor* out = nullptr;
    throwIfError(detail::hostSlot(host().tensor_view, "tensor_view")(t_, sizes.data(), strides.data(), sizes.size(),
                                                                     storage_offset, &out));
    return adoptResult(out, "tensor_view");
  }

 private:
  // A non-owning view of a kernel argument the host keeps alive for the
  // call: no retain, no release. Only the kernel adapter makes these, for
  // `const bp::Tensor&` parameters (Note [Borrowed kernel arguments]).
  static Tensor unowned(BP_Tensor* t) noexcept {
    Tensor r;
    r.t_ = t;
    r.owned_ = false;
    return r;
  }
  template <class D, bool kByReference>
  friend struct detail::ArgFetch;

  template <class T>
  T* typedAddress(const char* accessor) const {
    constexpr ScalarType want = scalarTypeOf<T>();
    if (dtype() != want) [[unlikely]]
      wrongDtype(accessor, want);
    return static_cast<T*>(info().data);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void wrongDtype(const char* accessor, ScalarType want) const {
    fail(BP_INVALID_ARGUMENT,
         detail::concat(accessor, "<", name(want), ">() called on a tensor of dtype ", name(dtype())));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void notHostMemory(ScalarType want) const {
    const Device d = device();
    const char* type_name = nullptr;
#if BP_ABI_MINOR >= 1
    if (detail::g_host != nullptr && detail::g_host->device_type_name != nullptr)
      type_name = detail::g_host->device_type_name(d.type);
#endif
    fail(BP_FAILED_PRECONDITION,
         detail::concat("data_ptr<", name(want), ">() called on a tensor on ",
                        type_name ? std::string(type_name) : "device type " + std::to_string(d.type), ":", d.index,
                        ", whose memory this plugin does not know to be host memory; a host pointer to it would not "
                        "be safe to dereference. Use device_ptr<",
                        name(want),
                        ">() for the device address (to pass to the device or translate), or register the device "
                        "type with hostAccessible() true if the host may read it"));
  }

  // Out of line, so that the common case of reset() and info() stays small
  // enough to inline into every kernel.
  [[gnu::noinline]] void releaseReference() noexcept {
    // Read g_host directly: destructors must not throw, and a Tensor made
    // before init (impossible for a defined one) has nothing to release.
    if (detail::g_host != nullptr && detail::g_host->tensor_release != nullptr) detail::g_host->tensor_release(t_);
  }
  [[gnu::noinline]] void fetchInfo() const {
    if (t_ == nullptr) fail(BP_FAILED_PRECONDITION, "metadata of an undefined bp::Tensor was requested");
    // Filled in place: copying a freshly written local struct would stall on
    // store forwarding, and this runs for every argument of a kernel. The
    // host writes struct_size (what it filled, at most our buffer), then
    // the fields it knows; a field an older host lacks reads as zero.
    info_.struct_size = BP_TensorInfo_STRUCT_SIZE;  // the fields we know (Note [ABI rules])
    detail::hostSlot(host().tensor_info, "tensor_info")(t_, &info_);
    const size_t filled = info_.struct_size;
    if (filled < BP_TensorInfo_STRUCT_SIZE) [[unlikely]] {
      if (filled < sizeof(size_t)) fail(BP_INTERNAL, "the host's tensor_info wrote an invalid struct_size");
      std::memset(reinterpret_cast<char*>(&info_) + filled, 0, sizeof(BP_TensorInfo) - filled);
    }
    has_info_ = true;
  }

  static BP_Tensor* retain(BP_Tensor* t) {
    BP_Tensor* r = detail::hostSlot(host().tensor_retain, "tensor_retain")(t);
    if (r == nullptr) fail(BP_INTERNAL, "the host's tensor_retain returned NULL");
    return r;
  }
  static Tensor adoptResult(BP_Tensor* out, const char* what) {
    if (out == nullptr) fail(BP_INTERNAL, std::string("the host's ") + what + " succeeded but returned no tensor");
    return adopt(out);
  }
  static void checkSameRank(IntList sizes, IntList strides, const char* what) {
    if (sizes.size() != strides.size()) {
      fail(BP_INVALID_ARGUMENT, detail::concat(what, ": ", sizes.size(), " sizes but ", strides.size(), " strides"));
    }
  }
  size_t wrapDim(int64_t d) const {
    const int64_t n = info().dim;
    const int64_t w = d < 0 ? d + n : d;
    if (w < 0 || w >= n) {
      fail(BP_OUT_OF_RANGE, detail::concat("dimension ", d, " is out of range for a tensor with ", n,
                                           " dimensions (expected ", -n, " to ", n - 1, ")"));
    }
    return static_cast<size_t>(w);
  }

  BP_Tensor* t_ = nullptr;
  mutable BP_TensorInfo info_;  // valid only while has_info_; left uninitialised (hot path)
  mutable bool has_info_ = false;
  bool owned_ = true;  // false only for views of kernel arguments (unowned())
};

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_TENSOR_HPP_
