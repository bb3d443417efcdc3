#pragma once
// `backplane ops --schemas [REGEX]`: what a plugin author needs to write a
// kernel for an op: its schema, the dtypes its arguments accept (Note [Dtype
// rules live in metas]) and the C++ declaration of its kernel (Note [Plugin
// kernel types]).

#include <ostream>
#include <string>

#include "commands.h"

namespace backplane::cli {

// Lists every defined op whose qualified name `regex` (RE2, Note [Name
// patterns]) matches anywhere; every op when empty. Returns the exit code:
// 0, or 2 (with a message on `err`) for a malformed or too large regex or
// no matching op.
int runOpsSchemas(std::ostream& out, std::ostream& err, OpsFormat format, const std::string& regex);

}  // namespace backplane::cli
