#pragma once
// The CPU plugin's kernel families; each file registers its kernels.

#include "backplane/plugin.hpp"

namespace bp_cpu {

void registerCreationKernels(bp::Library& m);         // creation.cc: fills, arange, philox draws, same-device copy
void registerElementwiseKernels(bp::Library& m);      // elementwise.cc: binary, comparison, where, unary
void registerElementwiseMoreKernels(bp::Library& m);  // elementwise_more.cc: rounding division, bitwise, ...
void registerReductionKernels(bp::Library& m);        // reduction.cc: sum, mean, ..., softmax (softmax_rows.cc)
void registerLinalgKernels(bp::Library& m);           // linalg.cc: mm, bmm, matmul, addmm (oneDNN)
void registerNNKernels(bp::Library& m);               // nn.cc: conv2d, pooling, batch_norm, layer_norm; backward ops
void registerOptimKernels(bp::Library& m);            // optim.cc: _fused_sgd_, _fused_adamw_
void registerDataMovementKernels(bp::Library& m);     // data_movement.cc: cat, stack, index_select, ...
void registerSortScanPadKernels(bp::Library& m);      // sort_scan_pad.cc: cumsum, sort, topk, flip, pads

}  // namespace bp_cpu
