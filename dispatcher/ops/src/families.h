#pragma once
// The families of the standard operator table (Note [The standard operator
// table]); each appends its entries in dispatcher/ops/src/<family>.cc.

#include <string>
#include <utility>
#include <vector>

#include "backplane/ops/standard_ops.h"

namespace backplane::ops {

// An out= form derived from `functional` (Note [Derived out= forms]); its
// family and dtypes are filled in from that op's entry.
inline StandardOp derivedOut(std::string schema, std::string functional) {
  StandardOp op;
  op.schema = std::move(schema);
  op.derived_from = std::move(functional);
  return op;
}

// The functional form of in-place-only op `inplace`, which writes every
// element of self without reading it (Note [Derived out= forms]).
inline StandardOp derivedFunctional(std::string schema, std::string inplace) {
  StandardOp op = derivedOut(std::move(schema), std::move(inplace));
  op.derived_functional = true;
  return op;
}

void addCreationOps(std::vector<StandardOp>& ops);     // empty, zeros, ..., rand, randn, dropout; copy_, to
void addElementwiseOps(std::vector<StandardOp>& ops);  // binary, comparison, where, unary, clamp
// (elementwise_more.cc) rounding division, remainder/fmod, rounding, bitwise/logical, activations, Scalar forms
void addElementwiseMoreOps(std::vector<StandardOp>& ops);
void addReductionOps(std::vector<StandardOp>& ops);  // sum, mean, amax, ..., softmax
void addLinalgOps(std::vector<StandardOp>& ops);     // mm, bmm, matmul, addmm, linear
void addNNOps(std::vector<StandardOp>& ops);         // conv2d, pooling, batch_norm, layer_norm
// cat, stack, index_select, gather, ..., embedding
void addDataMovementOps(std::vector<StandardOp>& ops);
// gelu_backward, _softmax_backward_data, ... (Note [Backward ops])
void addBackwardOps(std::vector<StandardOp>& ops);
// (backward_nn.cc) conv2d_backward, max_pool2d_backward, avg_pool2d_backward (Note [Window op gradients])
void addBackwardNNOps(std::vector<StandardOp>& ops);
// index.Tensor, index_put_, nonzero, masked_select, index_add, tril/triu, roll, repeat, isclose
void addIndexingOps(std::vector<StandardOp>& ops);
void addOptimOps(std::vector<StandardOp>& ops);  // _fused_sgd_, _fused_adamw_ (Note [Optimizer ops])

}  // namespace backplane::ops
