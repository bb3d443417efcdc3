#pragma once
#include <string>

#include "backplane/dispatcher/function_schema.h"

namespace backplane {
// The canonical C++ signature of `schema` in the notation of
// detail::cppSignatureString ("(Tensor, Scalar) -> Tensor"); see Note
// [Canonical C++ signatures].
std::string cppSignatureForSchema(const FunctionSchema& schema);
// The same notation for one argument or return type ("int[]?").
std::string cppTypeName(const SchemaType& type);
}  // namespace backplane
