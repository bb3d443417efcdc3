#pragma once
// The arguments of a boxed call, completed and checked against the schema.

#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/ivalue.h"

namespace backplane {

// What OperatorHandle::callBoxed() does to its stack before it dispatches,
// for other callers that hold a Stack (callAsTyped): fills in the defaults
// of the arguments left off, checks each argument's type against the schema
// and converts it to the schema's (Note [Boxed argument conversions]).
// Throws Error, naming the op and the argument, if one is missing or of the
// wrong type.
void completeBoxedArguments(const FunctionSchema& schema, Stack& stack);

}  // namespace backplane
