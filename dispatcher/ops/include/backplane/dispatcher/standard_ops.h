#pragma once
// The standard operators: one table of PyTorch-compatible schemas in the
// namespace "bp", defined when the Dispatcher is created, each with its
// shape/dtype rule (a meta kernel, Note [Meta kernels]) where it has out=
// arguments and a backend-agnostic composite kernel where it can be written
// with other operators. Plugins implement them ("add.out" in a plugin means
// "bp::add.out"); the CPU plugin implements all of them, so CPU fallback
// covers every device. Note [The standard operator table] says how the
// table is organised.

#include <string>
#include <string_view>
#include <vector>

#include "backplane/dispatcher/kernel_function.h"
#include "backplane/tensor.h"

namespace backplane {

inline constexpr std::string_view kStandardNamespace = "bp";

struct StandardOp {
  std::string schema;        // without the namespace
  KernelFunction meta;       // optional: validates arguments, checks/resizes out=
  KernelFunction composite;  // optional: the op written with other standard ops
  const char* family = "";   // "elementwise", "reduction", ... for docs and reports
};

// Every standard operator, in definition order. Built once, on first use.
const std::vector<StandardOp>& standardOperators();

}  // namespace backplane
