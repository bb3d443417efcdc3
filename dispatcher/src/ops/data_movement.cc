#include "ops/families.h"
#include "ops/structured.h"

namespace backplane::ops {

void addDataMovementOps(std::vector<StandardOp>& ops) { (void)ops; }

}  // namespace backplane::ops
