#include "backplane/dispatch/schema_signature.h"

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

std::string pluginParameterType(const SchemaType& t) {
  if (t.is_list) {
    std::string list;
    switch (t.base) {
      case BaseType::Tensor:
        list = t.element_optional ? "const std::vector<std::optional<bp::Tensor>>&" : "const std::vector<bp::Tensor>&";
        return t.is_optional ? std::string() : list;
      case BaseType::Int:
      case BaseType::Layout:
      case BaseType::MemoryFormat: list = "bp::IntList"; break;
      case BaseType::Float: list = "bp::DoubleList"; break;
      case BaseType::Bool: list = "bp::BoolList"; break;
      default: return std::string();
    }
    if (t.element_optional) return std::string();
    if (!t.is_optional) return list;
    return t.base == BaseType::Int || t.base == BaseType::Layout || t.base == BaseType::MemoryFormat
               ? "std::optional<" + list + ">"
               : std::string();
  }
  std::string base;
  bool by_reference = false;
  switch (t.base) {
    case BaseType::Tensor: base = "bp::Tensor", by_reference = true; break;
    case BaseType::Int:
    case BaseType::Layout:
    case BaseType::MemoryFormat: base = "int64_t"; break;
    case BaseType::Float: base = "double"; break;
    case BaseType::Bool: base = "bool"; break;
    case BaseType::Str: base = "std::string_view"; break;
    case BaseType::Scalar: base = "bp::Scalar", by_reference = true; break;
    case BaseType::ScalarType: base = "bp::ScalarType"; break;
    case BaseType::Device: base = "bp::Device"; break;
  }
  if (t.is_optional) base = "std::optional<" + base + ">";
  return by_reference ? "const " + base + "&" : base;
}

std::string pluginReturnType(const FunctionSchema& schema) {
  const auto& rets = schema.returns();
  const auto one = [](const SchemaType& t) -> std::string {
    if (t.is_list || t.is_optional) return std::string();
    switch (t.base) {
      case BaseType::Tensor: return "bp::Tensor";
      case BaseType::Int: return "int64_t";
      case BaseType::Float: return "double";
      case BaseType::Bool: return "bool";
      case BaseType::Scalar: return "bp::Scalar";
      default: return std::string();
    }
  };
  if (rets.empty()) return "void";
  if (rets.size() == 1) return one(rets[0].type);
  std::string s = "std::tuple<";
  for (size_t i = 0; i < rets.size(); ++i) {
    if (rets[i].type.base != BaseType::Tensor || one(rets[i].type).empty()) return std::string();
    s += (i ? ", " : "") + one(rets[i].type);
  }
  return s + ">";
}

std::string pluginKernelSignature(const FunctionSchema& schema) {
  std::string name = schema.name().name + (schema.name().overload.empty() ? "" : "_" + schema.name().overload);
  std::string ret = pluginReturnType(schema);
  if (ret.empty()) return std::string();
  std::string s = ret + " " + name + "(";
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const Argument& a = schema.arguments()[i];
    const std::string type = pluginParameterType(a.type);
    if (type.empty()) return std::string();
    s += (i ? ", " : "") + type + " " + a.name;
  }
  return s + ")";
}

}  // namespace backplane
