#pragma once
// Library: the C++ registration API for in-process code (tests, apps,
// composites). It owns the handles of everything it registered; destroying
// the Library (or reset()) undoes all of it.
//
//   Library lib("myops");
//   throwIfError(lib.def("scale(Tensor self, float factor) -> Tensor"));
//   throwIfError(lib.impl("scale", DispatchKey::CPU, &scale_cpu));

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "backplane/dispatch/dispatcher.h"

namespace backplane {

class Library {
 public:
  // `ns` is the namespace of the operators this library defines, and the
  // namespace assumed for unqualified names given to impl(). `debug` names
  // the registrant in messages (defaults to "library <ns>").
  explicit Library(std::string ns, std::string debug = "");
  Library(Library&&) = default;
  Library& operator=(Library&&) = default;

  // Defines an operator. The schema may omit the namespace ("add(Tensor a,
  // Tensor b) -> Tensor"); if it names one, it must be this library's.
  [[nodiscard]] absl::Status def(std::string_view schema);

  // Registers `kernel` (function pointer, BP_FN(fn), lambda or
  // KernelFunction) for operator `op` ("add" or "ns::add.Tensor") at `key`.
  // `dtypes`: the dtypes it serves, e.g. {ScalarType::Float32}; calls with
  // others go where they would without it (Note [Declared dtypes]).
  template <typename F>
  [[nodiscard]] absl::Status impl(std::string_view op, DispatchKey key, F&& kernel, DtypeSet dtypes = DtypeSet::all()) {
    return keep(Dispatcher::singleton().registerImpl(qualify(op), key, KernelFunction::make(std::forward<F>(kernel)),
                                                     debug_, dtypes));
  }
  // The same for the backend key of a device type (e.g. a vendor's type).
  template <typename F>
  [[nodiscard]] absl::Status impl(std::string_view op, DeviceType type, F&& kernel, DtypeSet dtypes = DtypeSet::all()) {
    return impl(op, backendKey(type), std::forward<F>(kernel), dtypes);
  }
  // impl() for an operator that another library or plugin defines, possibly
  // later (Note [Kernels for operators defined later]): the kernel waits
  // until a def of `op` arrives, then serves calls if its C++ signature fits
  // the schema (else it stays inactive, with a warning). If `op` is defined
  // already, this is impl(). Opt-in: a misspelled name waits forever instead
  // of failing, so use impl() for operators that are defined first.
  template <typename F>
  [[nodiscard]] absl::Status implWhenDefined(std::string_view op, DispatchKey key, F&& kernel,
                                             DtypeSet dtypes = DtypeSet::all()) {
    return keep(Dispatcher::singleton().registerImplWhenDefined(
        qualify(op), key, KernelFunction::make(std::forward<F>(kernel)), debug_, dtypes));
  }
  template <typename F>
  [[nodiscard]] absl::Status implWhenDefined(std::string_view op, DeviceType type, F&& kernel,
                                             DtypeSet dtypes = DtypeSet::all()) {
    return implWhenDefined(op, backendKey(type), std::forward<F>(kernel), dtypes);
  }
  // Registers a backend-agnostic composite kernel, written with other ops.
  template <typename F>
  [[nodiscard]] absl::Status implComposite(std::string_view op, F&& kernel) {
    return keep(
        Dispatcher::singleton().registerComposite(qualify(op), KernelFunction::make(std::forward<F>(kernel)), debug_));
  }
  // Registers the op's meta kernel: its shape/dtype rule, run before any
  // kernel (Note [Meta kernels]). Same parameters as the schema; returns void,
  // or bool for an out= op whose meta may compute the result itself.
  template <typename F>
  [[nodiscard]] absl::Status meta(std::string_view op, F&& kernel) {
    return keep(
        Dispatcher::singleton().registerMeta(qualify(op), KernelFunction::make(std::forward<F>(kernel)), debug_));
  }
  // Registers a boxed fallback (or KernelFunction::makeFallthrough()) for
  // every operator at `key`.
  [[nodiscard]] absl::Status fallback(DispatchKey key, KernelFunction kernel);

  const std::string& ns() const { return ns_; }
  // Number of live registrations.
  size_t size() const { return handles_.size(); }
  // Undoes every registration, newest first.
  void reset();
  ~Library() { reset(); }

 private:
  std::string qualify(std::string_view op) const;
  absl::Status keep(absl::StatusOr<RegistrationHandle> handle);

  std::string ns_;
  std::string debug_;
  std::vector<RegistrationHandle> handles_;
};

}  // namespace backplane
