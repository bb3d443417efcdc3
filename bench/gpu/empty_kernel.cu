// The empty kernel of BM_Cuda_EmptyKernelLaunch (cuda_bench.cc), compiled by
// nvcc apart so that the benchmarks themselves are plain host C++.
#include "empty_kernel.h"

namespace backplane::bench {
namespace {

__global__ void emptyKernel() {}

}  // namespace

cudaError_t launchEmptyKernel(cudaStream_t stream) {
  emptyKernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace backplane::bench
