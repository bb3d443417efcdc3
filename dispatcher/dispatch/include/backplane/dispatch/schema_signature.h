#pragma once
#include <string>

#include "backplane/dispatch/function_schema.h"

namespace backplane {
// The canonical C++ signature of `schema` in the notation of
// detail::cppSignatureString ("(Tensor, Scalar) -> Tensor"); see Note
// [Canonical C++ signatures].
std::string cppSignatureForSchema(const FunctionSchema& schema);
// The same notation for one argument or return type ("int[]?").
std::string cppTypeName(const SchemaType& type);

// Note [Plugin kernel types]
// The C++ types a plugin kernel written with plugin.hpp (bp::kernel<&f>())
// takes and returns for each schema type; docs/plugins.md's table is this one.
// bp::kernel<> spells a function's types back in the notation above, and
// the host checks that against cppSignatureForSchema, so a kernel written
// with these types registers. cli/cli_test.cc checks a few ops' printed
// signatures against what bp::kernel<> makes of them.
//   Tensor -> const bp::Tensor&         Tensor? -> const std::optional<bp::Tensor>&
//   int -> int64_t, float -> double, int[] -> bp::IntList, float[] -> bp::DoubleList, ...
// An empty string: a type plugin.hpp has no C++ type for.
std::string pluginParameterType(const SchemaType& type);
std::string pluginReturnType(const FunctionSchema& schema);
// "bp::Tensor add_out(const bp::Tensor& self, ..., const bp::Tensor& out)":
// the declaration of a plugin kernel for `schema` (the function's name is
// the op's, '.' -> '_').
std::string pluginKernelSignature(const FunctionSchema& schema);
}  // namespace backplane
