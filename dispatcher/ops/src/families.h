#pragma once
// The families of the standard operator table (Note [The standard operator
// table]); each appends its entries in dispatcher/ops/src/<family>.cc.

#include <vector>

#include "backplane/dispatcher/standard_ops.h"

namespace backplane::ops {

void addCreationOps(std::vector<StandardOp>& ops);      // empty, zeros, ..., rand, randn, dropout; copy_, to
void addElementwiseOps(std::vector<StandardOp>& ops);   // binary, comparison, where, unary, clamp
void addReductionOps(std::vector<StandardOp>& ops);     // sum, mean, amax, ..., softmax
void addLinalgOps(std::vector<StandardOp>& ops);        // mm, bmm, matmul, addmm, linear
void addNNOps(std::vector<StandardOp>& ops);            // conv2d, pooling, batch_norm, layer_norm
void addDataMovementOps(std::vector<StandardOp>& ops);  // cat, stack, index_select, gather, ..., embedding

// The strided copy the dispatcher installs into the core (Note [Strided
// copies on the device] in core/tensor.h): bp::copy_, so a same-device
// copy runs the device's _copy_on_device_ kernel (creation.cc). False when
// _copy_on_device_ has no kernel, not even the CPU fallback, for a device.
bool stridedCopy(const Tensor& dst, const Tensor& src);

}  // namespace backplane::ops
