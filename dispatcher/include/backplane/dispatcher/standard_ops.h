#pragma once
// The standard operators: one table of PyTorch-compatible schemas in the
// namespace "bp", defined when the Dispatcher is created. Plugins implement
// them ("add.Tensor" in a plugin means "bp::add.Tensor"); the CPU plugin
// implements all of them, so CPU fallback covers every device.

#include <span>
#include <string_view>

namespace backplane {

inline constexpr std::string_view kStandardNamespace = "bp";

struct StandardOp {
  const char* schema;  // without the namespace
};

// Every standard operator, in definition order.
std::span<const StandardOp> standardOperators();

}  // namespace backplane
