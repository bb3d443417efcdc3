#pragma once
// The derivative formulas of the window ops (Note [Window op gradients] in
// derivatives_nn.cc), for derivatives.cc's table.

#include "backplane/ops/derivatives.h"

namespace backplane::ops {

void conv2dBackward(DerivativeContext& c);     // input, weight, bias
void maxPool2dBackward(DerivativeContext& c);  // self
void avgPool2dBackward(DerivativeContext& c);  // self

}  // namespace backplane::ops
