// bp::Library, what a plugin's init function registers through (device
// types, operator definitions, kernels, fallbacks), and bp::Dtypes, the
// dtypes a kernel serves. Part of <backplane/plugin.hpp>; compiles on its
// own.
#ifndef BACKPLANE_PLUGIN_LIBRARY_HPP_
#define BACKPLANE_PLUGIN_LIBRARY_HPP_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/detail/device_trampolines.hpp"
#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/device_backend.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/host.hpp"
#include "backplane/plugin/kernel.hpp"
#include "backplane/plugin/scalar_type.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// The dtypes a kernel serves (BP_KernelDesc.dtypes, ABI 1.5):
//   m.impl("relu.out", toy, &relu_out, {bp::ScalarType::Float32});
// The host sends a call to the kernel only if every tensor argument's dtype
// is in the set (inputs and outputs, each element of a tensor list, optional
// tensors that are present); every other call goes where it would without
// the kernel, usually the CPU fallback. So a kernel handles only the dtypes
// it declares. Default-constructed: every dtype.
class Dtypes {
 public:
  constexpr Dtypes() noexcept = default;
  constexpr Dtypes(std::initializer_list<ScalarType> types) noexcept {
    for (ScalarType t : types) {
      const int32_t i = static_cast<int32_t>(t);
      // A number outside the enum sets bit 63, which the host refuses by name.
      mask_ |= (i >= 0 && i < 63) ? uint64_t{1} << i : uint64_t{1} << 63;
    }
  }
  static constexpr Dtypes all() noexcept { return Dtypes(); }
  constexpr bool isAll() const noexcept { return mask_ == 0; }
  constexpr bool contains(ScalarType t) const noexcept {
    const int32_t i = static_cast<int32_t>(t);
    return mask_ == 0 || (i >= 0 && i < 64 && ((mask_ >> i) & 1) != 0);
  }
  // BP_KernelDesc.dtypes: bit i = BP_ScalarType i; 0 = every dtype.
  constexpr uint64_t mask() const noexcept { return mask_; }
  friend constexpr bool operator==(Dtypes a, Dtypes b) noexcept { return a.mask_ == b.mask_; }

 private:
  uint64_t mask_ = 0;
};

// What the plugin's init function registers through (`m`). Made by
// BACKPLANE_PLUGIN; valid only during init, on the init thread (the host
// accepts registrations only then). Every method throws bp::Error if the
// host refuses; the error propagates out of init and fails the load.
class Library {
 public:
  explicit Library(BP_Plugin* plugin) noexcept : plugin_(plugin) {}

  BP_Plugin* plugin() const noexcept { return plugin_; }

  // Registers a device type from a raw descriptor; returns its device type
  // number. The host copies the descriptor and its name during the call;
  // its function pointers and ctx must stay valid until the plugin is
  // unloaded (Note [ABI rules] in plugin_api.h).
  int32_t registerDeviceType(const BP_DeviceTypeDesc& desc) {
    int32_t type = -1;
    throwIfError(detail::hostSlot(host().register_device_type, "register_device_type")(plugin_, &desc, &type));
    if (desc.host_accessible && type >= 0 && type < 64) detail::g_host_accessible_types |= uint64_t{1} << type;
    return type;
  }

  // Registers `backend` (not owned; must outlive the plugin) as device type
  // `name` (lowercase [a-z][a-z0-9_]*, at most 31 characters; copied);
  // returns its device type number. Streams and events when the backend
  // says it has them (DeviceBackend::hasStreams, hasEvents).
  int32_t registerDevice(const char* name, DeviceBackend* backend) {
    if (name == nullptr || backend == nullptr) fail(BP_INVALID_ARGUMENT, "registerDevice: NULL name or backend");
    using T = detail::DeviceTrampolines;
    BP_DeviceTypeDesc d;  // copied by the host (Note [ABI rules]); `backend` is the ctx it keeps
    std::memset(&d, 0, sizeof d);
    d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
    d.name = name;
    d.ctx = backend;
    d.host_accessible = backend->hostAccessible() ? 1 : 0;
    d.dlpack_device_type = backend->dlpackDeviceType();
    d.device_count = &T::deviceCount;
    d.unavailable_reason = &T::unavailableReason;
    d.get_properties = &T::getProperties;
    d.allocate = &T::allocate;
    d.deallocate = &T::deallocate;
    d.copy_host_to_device = &T::copyHostToDevice;
    d.copy_device_to_host = &T::copyDeviceToHost;
    d.copy_device_to_device = &T::copyDeviceToDevice;
    d.memset = &T::memset;
    d.synchronize = &T::synchronize;
    if (backend->hasStreams()) {
      d.stream_create = &T::streamCreate;
      d.stream_destroy = &T::streamDestroy;
      d.stream_synchronize = &T::streamSynchronize;
      d.get_current_stream = &T::getCurrentStream;
      d.set_current_stream = &T::setCurrentStream;
    }
    if (backend->hasEvents()) {
      d.event_create = &T::eventCreate;
      d.event_destroy = &T::eventDestroy;
      d.event_record = &T::eventRecord;
      d.event_wait = &T::eventWait;
      d.event_synchronize = &T::eventSynchronize;
      d.event_query = &T::eventQuery;
#if BP_ABI_MINOR >= 8
      if (backend->hasEventWaitDevice()) d.event_wait_device = &T::eventWaitDevice;
#endif
#if BP_ABI_MINOR >= 12
      if (backend->hasEventTiming()) {
        d.event_create_timed = &T::eventCreateTimed;
        d.event_elapsed_ms = &T::eventElapsedMs;
      }
#endif
    }
#if BP_ABI_MINOR >= 13
    if (backend->hasStreams() && backend->hasGraphs()) {
      d.graph_capture_begin = &T::graphCaptureBegin;
      d.graph_capture_end = &T::graphCaptureEnd;
      d.graph_replay = &T::graphReplay;
      d.graph_destroy = &T::graphDestroy;
    }
#endif
    backend->type_name_ = name;
    const int32_t type = registerDeviceType(d);
    backend->device_type_ = type;
    return type;
  }

  // Declares an operator: "ns::name.overload(Tensor self, ...) -> Tensor".
  void def(const char* schema) { throwIfError(detail::hostSlot(host().def, "def")(plugin_, schema)); }

  // Registers a typed kernel `R f(P...)` for `op` on `device_type` (0 is
  // cpu), with its generated cpp_signature so the host checks it against
  // the schema. Captureless lambdas: pass +[](...) {...}. `dtypes`: the
  // dtypes it serves (bp::Dtypes); by default every one.
  template <class R, class... P>
  void impl(const char* op, int32_t device_type, R (*kernel_fn)(P...), Dtypes dtypes = Dtypes::all()) {
    impl(op, device_type, bp::kernel(kernel_fn), dtypes);
  }
  // Registers a kernel made by bp::kernel() / bp::kernel<&f>(), with its
  // flags (Kernel::takingCpuScalars()).
  void impl(const char* op, int32_t device_type, const Kernel& k, Dtypes dtypes = Dtypes::all()) {
    impl(op, device_type, k.fn, k.ctx, k.cpp_signature.c_str(), dtypes, k.flags, k.typed_fn);
  }
  // Registers a raw boxed kernel; `ctx` must outlive the registration.
  // `flags`: BP_KERNEL_* bits (ABI 1.13). `typed_fn`: its typed entry (ABI
  // 1.14, Note [Typed kernel entries]; needs cpp_signature), ignored by a
  // plugin built for an older ABI.
  void impl(const char* op, int32_t device_type, BP_KernelFn fn, void* ctx, const char* cpp_signature = nullptr,
            Dtypes dtypes = Dtypes::all(), uint64_t flags = 0, BP_TypedKernelFn typed_fn = nullptr) {
    requireFlags("impl", op, flags);
#if BP_ABI_MINOR < 5
    if (!dtypes.isAll()) {
      fail(
          BP_FAILED_PRECONDITION,
          detail::concat("impl(\"", op ? op : "", "\"): bp::Dtypes needs plugin ABI 1.5, but this plugin is built for ",
                         BP_ABI_MAJOR, ".", BP_ABI_MINOR,
                         " (BP_TARGET_ABI_MINOR), whose host gives its kernels the dtypes bool..float64 and "
                         "ignores declared ones; raise the target to 5 or more, or register without dtypes"));
    }
#endif
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, fn, ctx, cpp_signature, dtypes.mask(), flags, typedFn(typed_fn)};
    throwIfError(detail::hostSlot(host().impl, "impl")(plugin_, op, device_type, &d));
  }
#if BP_ABI_MINOR >= 4
  // impl() for an operator that another plugin defines, possibly one that
  // loads after this one (BP_HostApi.impl_when_defined, ABI 1.4): a device
  // plugin implementing another plugin's operators, e.g.
  //   m.implWhenDefined("spconv::indice_conv", cuda, &indiceConvCuda);
  // If `op` is defined this is impl(). If not, the kernel waits and serves
  // calls once a def of `op` arrives whose schema its cpp_signature fits;
  // one that does not fit stays inactive and the host logs why (the def
  // still succeeds). Use impl() for operators defined before this plugin's
  // kernels: it reports a misspelled name at once, this does not.
  template <class R, class... P>
  void implWhenDefined(const char* op, int32_t device_type, R (*kernel_fn)(P...), Dtypes dtypes = Dtypes::all()) {
    implWhenDefined(op, device_type, bp::kernel(kernel_fn), dtypes);
  }
  // The same with a kernel made by bp::kernel() / bp::kernel<&f>().
  void implWhenDefined(const char* op, int32_t device_type, const Kernel& k, Dtypes dtypes = Dtypes::all()) {
    implWhenDefined(op, device_type, k.fn, k.ctx, k.cpp_signature.c_str(), dtypes, k.flags, k.typed_fn);
  }
  // The same with a raw boxed kernel; `ctx` must outlive the registration.
  // Without cpp_signature, a kernel registered before its operator's
  // definition is called boxed and never checked against the schema.
  void implWhenDefined(const char* op, int32_t device_type, BP_KernelFn fn, void* ctx,
                       const char* cpp_signature = nullptr, Dtypes dtypes = Dtypes::all(), uint64_t flags = 0,
                       BP_TypedKernelFn typed_fn = nullptr) {
    requireFlags("implWhenDefined", op, flags);
    const BP_HostApi& h = host();
    if (h.impl_when_defined == nullptr) {
      fail(BP_UNIMPLEMENTED,
           detail::concat("implWhenDefined(\"", op ? op : "", "\"): the host provides plugin ABI ", h.abi_major, ".",
                          h.abi_minor,
                          ", which has no impl_when_defined (added in ABI 1.4); upgrade the host, or "
                          "register the kernel with impl() and load the plugin that defines the operator first"));
    }
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, fn, ctx, cpp_signature, dtypes.mask(), flags, typedFn(typed_fn)};
    throwIfError(h.impl_when_defined(plugin_, op, device_type, &d));
  }
#endif
#if BP_ABI_MINOR >= 6
  // Declares how operator `op` differentiates, as data (BP_HostApi.derivative,
  // ABI 1.6; docs/plugins.md "Training"): "non_differentiable",
  // "not_implemented", or the call of a backward op and the inputs its
  // results are the gradients of, e.g.
  //   m.derivative("spconv::indice_maxpool",
  //                "spconv::indice_maxpool_backward(features, result, grad, indice_pairs, indice_pair_num) "
  //                "-> features");
  // With a device type, the declaration is that device's own and replaces
  // the general one (or the standard table's) for calls on it: a fused
  // backward op for a standard op on this plugin's device.
  void derivative(const char* op, const char* declaration) { derivative(op, BP_ANY_DEVICE_TYPE, declaration); }
  void derivative(const char* op, int32_t device_type, const char* declaration) {
    const BP_HostApi& h = host();
    if (h.derivative == nullptr) {
      fail(BP_UNIMPLEMENTED,
           detail::concat("derivative(\"", op ? op : "", "\"): the host provides plugin ABI ", h.abi_major, ".",
                          h.abi_minor,
                          ", which has no derivative declarations (added in ABI 1.6); upgrade the host, or leave "
                          "the op without one (backward through it then raises)"));
    }
    throwIfError(h.derivative(plugin_, op, device_type, declaration));
  }
#endif
#if BP_ABI_MINOR >= 9
  // The shape, dtype and device rule of an operator this plugin defines
  // (BP_HostApi.meta, ABI 1.9; Note [A plugin's own operators] in
  // plugin_api.h): a function with the operator's parameters returning
  // void that throws bp::Error (bp::fail) naming what is wrong. The host
  // runs it before the operator's kernel on every call, on any device, so
  // no kernel sees an x on one device and a bias on another, e.g.
  //   m.meta("toyaccel::bias_relu", +[](const bp::Tensor& x, const bp::Tensor& bias) { ... });
  template <class... P>
  void meta(const char* op, void (*rule)(P...)) {
    const Kernel k = bp::kernel(rule);
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, k.fn, k.ctx, k.cpp_signature.c_str(), 0, 0, nullptr};
    throwIfError(abi19Slot(host().meta, "meta", op)(plugin_, op, &d));
  }
  // Conformance samples for an operator this plugin defines (BP_HostApi.spec,
  // ABI 1.9), in the sample notation (docs/conformance.md, "Samples of a
  // plugin's own operator"): `backplane conformance` then certifies the
  // operator on each backend that serves it against `reference` (a function
  // with the operator's signature, called with host tensors), or without
  // one against the operator's cpu kernel. atol/rtol: tolerance for
  // floating results; 0 and 0 for the result dtype's default.
  void spec(const char* op, const char* samples, double atol = 0, double rtol = 0) {
    BP_SpecDesc d{BP_SpecDesc_STRUCT_SIZE, samples, nullptr, atol, rtol};
    throwIfError(abi19Slot(host().spec, "spec", op)(plugin_, op, &d));
  }
  template <class R, class... P>
  void spec(const char* op, const char* samples, R (*reference)(P...), double atol = 0, double rtol = 0) {
    const Kernel k = bp::kernel(reference);
    BP_KernelDesc ref{BP_KernelDesc_STRUCT_SIZE, k.fn, k.ctx, k.cpp_signature.c_str(), 0, 0, nullptr};
    BP_SpecDesc d{BP_SpecDesc_STRUCT_SIZE, samples, &ref, atol, rtol};
    throwIfError(abi19Slot(host().spec, "spec", op)(plugin_, op, &d));
  }
  // The out= and in-place forms of an operator this plugin defines, derived
  // from it by the host (BP_HostApi.derive_forms, ABI 1.9; Note [Derived
  // forms]): `forms` is BP_FORM_OUT, BP_FORM_INPLACE or both. The host
  // defines "ns::name.out" and "ns::name_" with kernels that call the
  // operator and copy its result, on every device; a spec of the operator
  // certifies them too.
  void deriveForms(const char* op, uint32_t forms) {
    throwIfError(abi19Slot(host().derive_forms, "deriveForms", op)(plugin_, op, forms));
  }
  // The composite of an operator this plugin defines (impl with
  // BP_ANY_DEVICE_TYPE, ABI 1.9): a kernel for every device that has none
  // of its own, written with other operators (bp::call...).
  template <class R, class... P>
  void composite(const char* op, R (*kernel_fn)(P...)) {
    const Kernel k = bp::kernel(kernel_fn);
    const BP_HostApi& h = host();
    if (h.abi_minor < 9) {
      fail(BP_UNIMPLEMENTED,
           detail::concat("composite(\"", op ? op : "", "\"): the host provides plugin ABI ", h.abi_major, ".",
                          h.abi_minor, ", which has no plugin composites (added in ABI 1.9); upgrade the host"));
    }
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, k.fn, k.ctx, k.cpp_signature.c_str(), 0, 0, typedFn(k.typed_fn)};
    throwIfError(detail::hostSlot(h.impl, "impl")(plugin_, op, BP_ANY_DEVICE_TYPE, &d));
  }
#endif
  // Registers a boxed kernel for every operator on `device_type` that has no
  // kernel there.
  void fallback(int32_t device_type, BP_KernelFn fn, void* ctx) {
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, fn, ctx, nullptr, 0, 0, nullptr};
    throwIfError(detail::hostSlot(host().fallback, "fallback")(plugin_, device_type, &d));
  }

  // The number of device type `name` ("cpu", "cuda"); throws if unknown.
  int32_t findDeviceType(const char* name) const {
    int32_t type = -1;
    throwIfError(detail::hostSlot(host().device_type_find, "device_type_find")(name, &type));
    return type;
  }

  // Logs through the host, prefixed with the plugin's name.
  void log(BP_LogLevel level, const std::string& message) const {
    detail::hostSlot(host().log, "log")(plugin_, level, message.c_str());
  }

 private:
  // BP_KernelDesc.flags as this plugin's ABI allows them. (An older host
  // ignores them, which is safe: it puts CPU scalars on the device first.)
  static void requireFlags(const char* what, const char* op, uint64_t flags) {
    if (flags == 0) return;
#if BP_ABI_MINOR < 13
    fail(BP_FAILED_PRECONDITION,
         detail::concat(what, "(\"", op ? op : "",
                        "\"): kernel flags need plugin ABI 1.13, but this plugin is built for ", BP_ABI_MAJOR, ".",
                        BP_ABI_MINOR, " (BP_TARGET_ABI_MINOR); raise the target to 13 or more"));
#else
    if ((flags & ~BP_KERNEL_CPU_SCALARS) != 0) {
      fail(BP_INVALID_ARGUMENT, detail::concat(what, "(\"", op ? op : "", "\"): unknown kernel flags ", flags,
                                               " (BP_KERNEL_CPU_SCALARS is the only one)"));
    }
#endif
  }
  // A typed entry as this plugin's ABI allows it: none before 1.14 (the
  // host would not read the field).
  static BP_TypedKernelFn typedFn(BP_TypedKernelFn typed_fn) {
#if BP_ABI_MINOR >= 14
    return typed_fn;
#else
    (void)typed_fn;
    return nullptr;
#endif
  }
#if BP_ABI_MINOR >= 9
  // A slot added in ABI 1.9, or a clear error from an older host.
  template <class F>
  F abi19Slot(F slot, const char* what, const char* op) const {
    if (slot == nullptr) {
      const BP_HostApi& h = host();
      fail(BP_UNIMPLEMENTED,
           detail::concat(what, "(\"", op ? op : "", "\"): the host provides plugin ABI ", h.abi_major, ".",
                          h.abi_minor, ", which has no ", what, " (added in ABI 1.9); upgrade the host"));
    }
    return slot;
  }
#endif
  BP_Plugin* plugin_;
};

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_LIBRARY_HPP_
