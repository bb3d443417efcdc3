#include "backplane/dispatcher/schema_signature.h"

namespace backplane {

std::string cppTypeName(const SchemaType& t) {
  std::string base;
  switch (t.base) {
    case BaseType::Tensor: base = "Tensor"; break;
    case BaseType::Int:
    case BaseType::Layout:
    case BaseType::MemoryFormat: base = "int"; break;
    case BaseType::Float: base = "float"; break;
    case BaseType::Bool: base = "bool"; break;
    case BaseType::Str: base = "str"; break;
    case BaseType::Scalar: base = "Scalar"; break;
    case BaseType::ScalarType: base = "ScalarType"; break;
    case BaseType::Device: base = "Device"; break;
  }
  if (t.is_list) {
    std::string list = base + (t.element_optional ? "?[]" : "[]");
    return t.is_optional ? list + "?" : list;
  }
  return t.is_optional ? base + "?" : base;
}

std::string cppSignatureForSchema(const FunctionSchema& schema) {
  std::string s = "(";
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (i) s += ", ";
    s += cppTypeName(schema.arguments()[i].type);
  }
  s += ") -> ";
  const auto& rets = schema.returns();
  if (rets.size() == 1) return s + cppTypeName(rets[0].type);
  s += "(";
  for (size_t i = 0; i < rets.size(); ++i) {
    if (i) s += ", ";
    s += cppTypeName(rets[i].type);
  }
  return s + ")";
}

}  // namespace backplane
