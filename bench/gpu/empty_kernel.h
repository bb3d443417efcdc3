#pragma once
// An empty kernel, the floor of what any kernel launch costs.
#include <cuda_runtime_api.h>

namespace backplane::bench {

// Queues one empty kernel (1 block of 1 thread) on `stream`; returns the
// launch's error.
cudaError_t launchEmptyKernel(cudaStream_t stream);

}  // namespace backplane::bench
