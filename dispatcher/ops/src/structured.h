#pragma once
// Generators for structured standard ops (Note [The standard operator
// table]): from an op's rule, the meta kernel of `op.out` and the composite
// kernels of the functional `op` and in-place `op_`.

#include <algorithm>
#include <cstddef>

#include "meta.h"

namespace backplane::ops {

// A string usable as a template argument: FixedString{"add"}.
template <size_t N>
struct FixedString {
  char s[N];
  constexpr FixedString(const char (&str)[N]) { std::copy_n(str, N, s); }  // NOLINT: implicit by design
  constexpr const char* c_str() const { return s; }
};

// "bp::<name>" for messages, built once per op.
template <FixedString Name>
const std::string& qualified() {
  static const std::string q = std::string(kStandardNamespace) + "::" + Name.c_str();
  return q;
}

// The table's entry for standard op Name, looked up once: its dtype rule
// (Note [Dtype rules live in metas]).
const StandardOp& standardOpEntry(std::string_view name);
template <FixedString Name>
const StandardOp& standardOp() {
  static const StandardOp& s = standardOpEntry(Name.c_str());
  return s;
}

}  // namespace backplane::ops

// A cached typed handle for standard op NAME (e.g. "add.out") with the
// canonical signature given as the remaining arguments, for composite
// kernels: BP_STANDARD_OP("add.out", Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)).
#define BP_STANDARD_OP(NAME, ...)                                                                   \
  ([]() -> const ::backplane::TypedOperatorHandle<__VA_ARGS__>& {                                   \
    static const ::backplane::TypedOperatorHandle<__VA_ARGS__> handle =                             \
        ::backplane::Dispatcher::singleton()                                                        \
            .findOpOrThrow(std::string(::backplane::kStandardNamespace) + "::" + std::string(NAME)) \
            .template typed<__VA_ARGS__>();                                                         \
    return handle;                                                                                  \
  }())
