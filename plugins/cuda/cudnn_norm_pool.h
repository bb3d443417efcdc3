#pragma once
// batch_norm, batch_norm_backward and the pooling forwards on cuDNN for the
// CUDA plugin (compiled only in the CUDA build with cuDNN, BP_CUDA_CUDNN);
// Note [cuDNN batch norm and pooling] in cudnn_norm_pool.cu. Each returns
// false, having queued nothing, for a call cuDNN does not take: the
// plugin's own kernel then runs it.
#include <cstdint>

#include "backplane/plugin.hpp"
#include "gpu/pool_args.h"

namespace bp_gpu {

// batch_norm's output `y` of `x` (both dense, 2-D to 4-D, in x's dtype) with
// per-channel weight, bias and (both or neither) running statistics, dense
// and in the parameter dtype (float64 for float64 inputs, else float32).
bool cudnnBatchNorm(const bp::Tensor& x, const bp::Tensor& y, const void* weight, const void* bias, void* running_mean,
                    void* running_var, bool training, double momentum, double eps);

// batch_norm_backward in training (the batch's statistics): gi, gw, gb
// (dense, allocated by the caller; any may be undefined when not asked
// for) from go and x (dense, float32 or float64) and the weight (dense, x's
// dtype).
bool cudnnBatchNormBackward(const bp::Tensor& go, const bp::Tensor& x, const void* weight, double eps,
                            const bp::Tensor& gi, const bp::Tensor& gw, const bp::Tensor& gb);

// max_pool2d (max) or avg_pool2d into `out` (dense) of `self` read through
// its strides, as `a` describes.
bool cudnnPool2d(const PoolArgs& a, bool max, const bp::Tensor& self, const bp::Tensor& out);

}  // namespace bp_gpu
