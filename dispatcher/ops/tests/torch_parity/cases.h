#pragma once
// The case tables' shared declarations (Note [Differential tests against
// PyTorch] in harness.h).
#include <cmath>
#include <limits>

#include "harness.h"

namespace backplane::torch_parity {

using Args = std::vector<std::pair<std::string, Arg>>;

Family binaryFamily();
Family scalarFamily();
Family unaryFamily();
Family clampFamily();
Family creationFamily();
Family reductionFamily();
Family linalgFamily();
Family nnFamily();
Family dataMovementFamily();

}  // namespace backplane::torch_parity
