#include "ops/families.h"
#include "ops/structured.h"

namespace backplane::ops {

void addReductionOps(std::vector<StandardOp>& ops) {
  ops.push_back(StandardOp{"sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {}, {}, "reduction"});
}

}  // namespace backplane::ops
