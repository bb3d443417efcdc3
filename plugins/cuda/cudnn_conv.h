#pragma once
// conv2d and conv2d_backward on cuDNN for the CUDA plugin (compiled only in
// the CUDA build, BP_GPU_CUDA); Note [cuDNN convolutions] in cudnn_conv.cu.
#include <cstdint>

#include "backplane/plugin.hpp"
#include "bp_common/windows.h"

namespace bp_gpu {

// This thread's plan of the forward convolution of `g` in `dtype` on
// `device`, or null when cuDNN will not run it (not opened or disabled, an
// integer dtype, sizes past its 32-bit descriptors, no algorithm within
// the workspace limit). Valid until this thread's next plan lookup.
struct CudnnConvPlan;
const CudnnConvPlan* cudnnConv2dPlan(const bp_common::ConvGeometry& g, bp::ScalarType dtype, bp::Device device);

// y = conv(x, w) (+ y when accumulate: y holds the bias) on the current
// stream, as `plan` says; x, w and y dense NCHW / OIHW / NCHW. Throws
// bp::Error on a cuDNN failure.
void cudnnConv2d(const CudnnConvPlan* plan, bp::Device device, const void* x, const void* w, void* y, bool accumulate);

// Registers cuda::cudnn_version, cuda::set_cudnn_enabled, cuda::cudnn_enabled
// and conv2d_backward's cuDNN kernel on `type`.
void registerCudnnKernels(bp::Library& m, int32_t type);

}  // namespace bp_gpu
