#pragma once
// The GPU plugin's kernel families. The same sources build the CUDA plugin
// (nvcc), the HIP plugin (hipcc) and the simulator test plugin (host
// compiler); gpu_port.h is the one portability header between them. Each
// family registers its kernels for the plugin's device type `type`.

#include <cstdint>

#include "backplane/plugin.hpp"

namespace bp_gpu {

void registerCreationKernels(bp::Library& m,
                             int32_t type);  // creation.cu: fill, arange, philox draws, _copy_on_device_
void registerElementwiseKernels(bp::Library& m, int32_t type);  // elementwise.cu: binary, comparison, where, unary
void registerElementwiseMoreKernels(bp::Library& m,
                                    int32_t type);  // elementwise_more.cu: rounding division, bitwise, ...
void registerDataMovementKernels(bp::Library& m,
                                 int32_t type);  // data_movement.cu: cat, index_select, gather, scatter_add
void registerReductionKernels(bp::Library& m,
                              int32_t type);  // reduction.cu: sum, mean, amax, ..., softmax, log_softmax
void registerNormKernels(bp::Library& m,
                         int32_t type);  // norm.cu: layer_norm, layer_norm_backward, batch_norm
void registerBackwardKernels(bp::Library& m,
                             int32_t type);                  // backward.cu: gelu_backward, _(log_)softmax_backward_data
void registerOptimKernels(bp::Library& m, int32_t type);     // optim.cu: _fused_sgd_, _fused_adamw_
void registerLinalgKernels(bp::Library& m, int32_t type);    // linalg.cu: mm, bmm, addmm, linear (BLAS or tiled GEMM)
void registerScanPadKernels(bp::Library& m, int32_t type);   // scan_pad.cu: cumsum, flip, pads
void registerSortKernels(bp::Library& m, int32_t type);      // sort.cu: sort.values_stable, topk.values
void registerConvPoolKernels(bp::Library& m, int32_t type);  // conv_pool.cu: conv2d, max_pool2d, avg_pool2d

// Whether float32 products and convolutions may run in TF32 (Note [TF32
// matrix products] in linalg.cu; <ns>::set_allow_tf32).
bool allowTf32();

}  // namespace bp_gpu
