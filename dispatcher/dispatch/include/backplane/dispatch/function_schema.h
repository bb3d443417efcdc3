// PyTorch-style operator schemas ("aten::add.Tensor(Tensor self, ...) ->
// Tensor").
//
// A schema is the single source of truth for an operator's calling convention:
// the dispatcher uses it to validate registrations, box/unbox arguments and to
// find out= arguments, so parsing is strict and errors point at the offending
// character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace backplane {

// The plain structs below give every field a default member initializer so
// partial aggregate initialization (SchemaType{BaseType::Int}) stays clean
// under -Wextra -Werror (-Wmissing-field-initializers).

// Qualified operator name "ns::name.overload" (overload may be empty).
struct OperatorName {
  std::string ns{};        // "aten"
  std::string name{};      // "add"
  std::string overload{};  // "Tensor" or ""

  // "aten::add.Tensor", or "aten::add" when the overload is empty.
  std::string qualifiedName() const;

  // Parses "ns::name" or "ns::name.overload". The namespace is mandatory so
  // that operators from different libraries can never collide silently.
  static absl::StatusOr<OperatorName> parse(std::string_view text);

  friend bool operator==(const OperatorName&, const OperatorName&) = default;

  // Lets OperatorName key absl::flat_hash_map / flat_hash_set directly.
  template <typename H>
  friend H AbslHashValue(H h, const OperatorName& n) {
    return H::combine(std::move(h), n.ns, n.name, n.overload);
  }
};

enum class BaseType { Tensor, Int, Float, Bool, Str, Scalar, ScalarType, Device, Layout, MemoryFormat };

// Canonical schema spelling of a base type: "Tensor", "int", "float", ...
std::string_view baseTypeName(BaseType type);

struct SchemaType {
  BaseType base = BaseType::Tensor;
  bool is_list = false;                // T[]  (Tensor[], int[], float[], bool[] ...)
  std::optional<int64_t> list_size{};  // int[2] -> 2; at most 1024
  bool element_optional = false;       // Tensor?[]  (list of optional elements)
  bool is_optional = false;            // T? or T[]?  (the whole value may be None)

  // Canonical spelling, e.g. "Tensor?", "int[2]", "Tensor?[]", "int[]?".
  // SymInt is folded into Int, so it prints as "int".
  std::string str() const;

  friend bool operator==(const SchemaType&, const SchemaType&) = default;
};

// Tensor(a) -> {"a", false}; Tensor(a!) -> {"a", true}.
struct AliasInfo {
  std::string set{};
  bool is_write = false;

  friend bool operator==(const AliasInfo&, const AliasInfo&) = default;
};

// Parsed default literal; monostate is None. Strings hold both quoted `str` /
// `Device` defaults and bare enum names such as `contiguous_format` (the
// argument's type decides how they print). A bare default for a sized list
// (`int[2] stride=1`) is stored expanded (`[1, 1]`), as PyTorch does.
using DefaultValue = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                                  std::vector<double>, std::vector<bool>>;

struct Argument {
  std::string name{};  // may be empty for returns
  SchemaType type{};
  std::optional<DefaultValue> default_value{};
  bool kwarg_only = false;  // after '*'
  std::optional<AliasInfo> alias{};

  // True for out= arguments: keyword-only and written to through an alias.
  bool isOut() const;

  // Canonical text of this argument, e.g. "Tensor(a!) out" or "int dim=0".
  std::string str() const;

  friend bool operator==(const Argument&, const Argument&) = default;
};

class FunctionSchema {
 public:
  // Builds a schema without validation; use parse() for untrusted text.
  // Keyword-only arguments must come after all positional ones for
  // toString() to round-trip.
  FunctionSchema(OperatorName name, std::vector<Argument> arguments, std::vector<Argument> returns);

  // Parses `ns::name.overload(ARGS) -> RETURNS`. On failure returns
  // InvalidArgumentError naming what was expected, the position (0-based
  // byte offset into `text`), and the offending line with a caret under it.
  static absl::StatusOr<FunctionSchema> parse(std::string_view text);

  const OperatorName& name() const { return name_; }
  const std::vector<Argument>& arguments() const { return arguments_; }
  const std::vector<Argument>& returns() const { return returns_; }

  // True if any argument is written to in place (has an `(x!)` annotation).
  bool isMutable() const;

  // Index into arguments() of the argument called `name`, if any.
  std::optional<size_t> argumentIndex(std::string_view name) const;

  // Canonical text; parse(toString()) yields a schema equal to *this.
  std::string toString() const;

  friend bool operator==(const FunctionSchema&, const FunctionSchema&) = default;

 private:
  OperatorName name_;
  std::vector<Argument> arguments_;
  std::vector<Argument> returns_;
};

// Stream the canonical text; mainly so test failures print readably.
std::ostream& operator<<(std::ostream& os, const OperatorName& name);
std::ostream& operator<<(std::ostream& os, const SchemaType& type);
std::ostream& operator<<(std::ostream& os, const Argument& arg);
std::ostream& operator<<(std::ostream& os, const FunctionSchema& schema);

}  // namespace backplane
