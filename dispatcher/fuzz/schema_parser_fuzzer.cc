// Fuzz target fuzz_schema_parser (Note [Fuzzing] in docs/design.md): the
// operator schema parser (FunctionSchema::parse, OperatorName::parse) on
// arbitrary text.
//
// Properties checked (a violation aborts, which libFuzzer and the replay
// ctest report as a crash):
//   * text that does not parse gives InvalidArgument with a message that
//     names the position (the parser's contract in function_schema.h);
//   * a schema that parses prints (toString) to text that parses back to an
//     equal schema, which prints to the same text: the round trip
//     function_schema.h promises, and what the plugin host, `backplane ops`
//     and the Python package rely on when they pass schemas around as text;
//   * its operator name round-trips through OperatorName::parse;
//   * what other code derives from a schema (the canonical C++ signature,
//     the plugin kernel declaration) does not crash.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/schema_signature.h"

namespace {

using backplane::Argument;
using backplane::DefaultValue;
using backplane::FunctionSchema;

[[noreturn]] void fail(std::string_view what, std::string_view input, std::string_view detail) {
  std::fprintf(stderr, "fuzz_schema_parser: %.*s\n  input:  %.*s\n  detail: %.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(input.size()), input.data(), static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// Doubles compare equal when both are NaN: a `float x=nan` default prints
// as "nan" and parses back to a NaN, which operator== calls unequal.
bool sameDouble(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool sameDefault(const DefaultValue& a, const DefaultValue& b) {
  if (a.index() != b.index()) return false;
  if (const double* d = std::get_if<double>(&a)) return sameDouble(*d, std::get<double>(b));
  if (const auto* v = std::get_if<std::vector<double>>(&a)) {
    const auto& w = std::get<std::vector<double>>(b);
    if (v->size() != w.size()) return false;
    for (size_t i = 0; i < v->size(); ++i)
      if (!sameDouble((*v)[i], w[i])) return false;
    return true;
  }
  return a == b;
}

bool sameArgument(const Argument& a, const Argument& b) {
  if (a.name != b.name || a.type != b.type || a.kwarg_only != b.kwarg_only || a.alias != b.alias) return false;
  if (a.default_value.has_value() != b.default_value.has_value()) return false;
  return !a.default_value || sameDefault(*a.default_value, *b.default_value);
}

bool sameArguments(const std::vector<Argument>& a, const std::vector<Argument>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!sameArgument(a[i], b[i])) return false;
  return true;
}

bool sameSchema(const FunctionSchema& a, const FunctionSchema& b) {
  return a.name() == b.name() && sameArguments(a.arguments(), b.arguments()) && sameArguments(a.returns(), b.returns());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The operator name parser alone (what Dispatcher::findOp and every
  // registration by name use).
  if (absl::StatusOr<backplane::OperatorName> name = backplane::OperatorName::parse(text); name.ok()) {
    const std::string printed = name->qualifiedName();
    absl::StatusOr<backplane::OperatorName> again = backplane::OperatorName::parse(printed);
    if (!again.ok()) fail("a parsed operator name does not parse back", text, std::string(again.status().message()));
    if (!(*again == *name)) fail("an operator name changed across a round trip", text, printed);
  }

  absl::StatusOr<FunctionSchema> schema = FunctionSchema::parse(text);
  if (!schema.ok()) {
    const absl::Status& s = schema.status();
    if (s.code() != absl::StatusCode::kInvalidArgument)
      fail("a parse error that is not InvalidArgument", text, std::string(s.message()));
    if (s.message().find(" at position ") == absl::string_view::npos)
      fail("a parse error that does not name its position", text, std::string(s.message()));
    return 0;
  }

  const std::string printed = schema->toString();
  absl::StatusOr<FunctionSchema> again = FunctionSchema::parse(printed);
  if (!again.ok())
    fail("a parsed schema prints to text that does not parse", text, std::string(again.status().message()));
  if (!sameSchema(*schema, *again)) fail("a schema changed across a round trip", text, printed);
  const std::string reprinted = again->toString();
  if (reprinted != printed) fail("a schema prints differently after a round trip", printed, reprinted);

  absl::StatusOr<backplane::OperatorName> name = backplane::OperatorName::parse(schema->name().qualifiedName());
  if (!name.ok() || !(*name == schema->name()))
    fail("a schema's operator name does not round-trip", text, schema->name().qualifiedName());

  // What the dispatcher and the tools derive from a schema.
  const std::string cpp = backplane::cppSignatureForSchema(*schema);
  if (cpp != backplane::cppSignatureForSchema(*again)) fail("the C++ signature changed across a round trip", text, cpp);
  (void)backplane::pluginKernelSignature(*schema);
  (void)schema->isMutable();
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    const Argument& a = schema->arguments()[i];
    if (schema->argumentIndex(a.name) != i) fail("argumentIndex does not find an argument", text, a.name);
    (void)a.isOut();
  }
  return 0;
}
