#include "backplane/dispatcher/standard_ops.h"

#include "ops/families.h"

namespace backplane {

// Note [The standard operator table]
// The one place the standard operators are declared, the analogue of
// PyTorch's native_functions.yaml. Names, arguments, defaults, broadcasting
// and type promotion follow PyTorch so that code and kernels port over.
// Each family (dispatcher/src/ops/<family>.cc) appends its entries:
//
//   * Structured ops come as a triple: `op.out(..., *, Tensor(a!) out)` is
//     the kernel plugins implement; its meta kernel runs the shape/dtype
//     rule and checks `out` (device, castable dtype, shape; an empty `out`
//     is resized). The functional `op(...)` and, where PyTorch has it, the
//     in-place `op_(...)` get composite kernels that apply the same rule,
//     allocate (or check `self`), and call `op.out`. So a plugin that
//     implements only `op.out` gets all three, and one that implements the
//     functional form too keeps its own (a native kernel beats a composite).
//   * Ops that are compositions of others (linear, addmm, silu, ...) get a
//     composite kernel built from standard ops only.
//   * Ops with neither are plain schemas that every backend implements.
const std::vector<StandardOp>& standardOperators() {
  static const std::vector<StandardOp>* ops = [] {
    auto* v = new std::vector<StandardOp>();
    ops::addCreationOps(*v);
    ops::addElementwiseOps(*v);
    ops::addReductionOps(*v);
    ops::addLinalgOps(*v);
    ops::addNNOps(*v);
    ops::addDataMovementOps(*v);
    return v;
  }();
  return *ops;
}

}  // namespace backplane
