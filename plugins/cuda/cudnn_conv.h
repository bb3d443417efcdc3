#pragma once
// conv2d and conv2d_backward on cuDNN for the CUDA plugin (compiled only in
// the CUDA build, BP_GPU_CUDA); Note [cuDNN convolutions] in cudnn_conv.cu.
#include <cstdint>

#include "backplane/plugin.hpp"
#include "bp_common/windows.h"

namespace bp_gpu {

// Whether cuDNN will run the forward convolution of `g` in `dtype` on
// `device` (the current device): cuDNN opened and enabled, a floating
// dtype, sizes within its 32-bit descriptors and an algorithm within the
// workspace limit. Plans the call (kept per thread), so cudnnConv2d after it
// finds the plan at once.
bool cudnnTakesConv2d(const bp_common::ConvGeometry& g, bp::ScalarType dtype, bp::Device device);

// y = conv(x, w) (+ y when accumulate: y holds the bias) on the current
// stream; x, w and y dense NCHW / OIHW / NCHW in `dtype`. Only after
// cudnnTakesConv2d said yes. Throws bp::Error on a cuDNN failure.
void cudnnConv2d(const bp_common::ConvGeometry& g, bp::ScalarType dtype, bp::Device device, const void* x,
                 const void* w, void* y, bool accumulate);

// Registers cuda::cudnn_version, cuda::set_cudnn_enabled, cuda::cudnn_enabled
// and conv2d_backward's cuDNN kernel on `type`.
void registerCudnnKernels(bp::Library& m, int32_t type);

}  // namespace bp_gpu
