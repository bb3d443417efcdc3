#include "backplane/dispatch/library.h"

#include "backplane/core/str_cat.h"

namespace backplane {

Library::Library(std::string ns, std::string debug)
    : ns_(std::move(ns)), debug_(debug.empty() ? "library " + ns_ : std::move(debug)) {}

std::string Library::qualify(std::string_view op) const {
  if (op.find("::") != std::string_view::npos) return std::string(op);
  return strCat(ns_, "::", op);
}

absl::Status Library::keep(absl::StatusOr<RegistrationHandle> handle) {
  if (!handle.ok()) return handle.status();
  handles_.push_back(*std::move(handle));
  return absl::OkStatus();
}

absl::Status Library::def(std::string_view schema) {
  size_t paren = schema.find('(');
  size_t colons = schema.find("::");
  if (colons != std::string_view::npos && colons < paren) {
    std::string_view given = schema.substr(0, colons);
    if (given != ns_) {
      return absl::InvalidArgumentError(strCat("Library(\"", ns_, "\") cannot define '", schema,
                                               "': it belongs to namespace '", given,
                                               "'; use a Library for that namespace"));
    }
    return keep(Dispatcher::singleton().registerDef(schema, debug_));
  }
  return keep(Dispatcher::singleton().registerDef(strCat(ns_, "::", schema), debug_));
}

absl::Status Library::fallback(DispatchKey key, KernelFunction kernel) {
  return keep(Dispatcher::singleton().registerFallback(key, std::move(kernel), debug_));
}

void Library::reset() {
  while (!handles_.empty()) handles_.pop_back();  // newest first
}

}  // namespace backplane
