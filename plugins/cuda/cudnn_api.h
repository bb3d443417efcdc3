#pragma once
// cuDNN for the CUDA plugin: the functions it calls, opened on first use
// (Note [Libraries opened on first use] in cublas_gemm.cu), a handle per
// host thread and device (Note [Per-thread library handles]), the on/off
// switch, and dtype mapping. Used by cudnn_conv.cu (Note [cuDNN
// convolutions]) and cudnn_norm_pool.cu (Note [cuDNN batch norm and
// pooling]).
#include <cudnn.h>

#include <atomic>
#include <string>

#include "backplane/plugin.hpp"
#include "cuda/cuda_libraries.h"
#include "cuda/thread_handles.h"
#include "gpu/runtime.h"

namespace bp_gpu::cudnn {

#define BP_CUDNN_STR(x) #x
#define BP_CUDNN_XSTR(x) BP_CUDNN_STR(x)

// The cuDNN functions the plugin calls, resolved from the library once.
#define BP_CUDNN_FUNCTIONS(X)                      \
  X(cudnnGetVersion)                               \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnSetTensor4dDescriptor)                    \
  X(cudnnSetTensor4dDescriptorEx)                  \
  X(cudnnDestroyTensorDescriptor)                  \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilter4dDescriptor)                    \
  X(cudnnDestroyFilterDescriptor)                  \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnSetConvolution2dDescriptor)               \
  X(cudnnSetConvolutionGroupCount)                 \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnDestroyConvolutionDescriptor)             \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnConvolutionForward)                       \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnConvolutionBackwardFilter)                \
  X(cudnnConvolutionBackwardBias)                  \
  X(cudnnDeriveBNTensorDescriptor)                 \
  X(cudnnBatchNormalizationForwardTraining)        \
  X(cudnnBatchNormalizationForwardInference)       \
  X(cudnnBatchNormalizationBackward)               \
  X(cudnnCreatePoolingDescriptor)                  \
  X(cudnnSetPooling2dDescriptor)                   \
  X(cudnnDestroyPoolingDescriptor)                 \
  X(cudnnPoolingForward)

struct Api {
#define BP_CUDNN_SLOT(f) decltype(&::f) f = nullptr;
  BP_CUDNN_FUNCTIONS(BP_CUDNN_SLOT)
#undef BP_CUDNN_SLOT
  size_t version = 0;
  std::string unavailable;  // why cuDNN cannot be used; empty when it can
};

inline Api load() {
  Api api;
  std::string opened;
  void* lib = bp_cuda::openLibrary("cuDNN", "BACKPLANE_CUDNN_LIBRARY", "libcudnn.so." BP_CUDNN_XSTR(CUDNN_MAJOR),
                                   "install cuDNN " BP_CUDNN_XSTR(CUDNN_MAJOR) ", put its directory on "
                                                                              "LD_LIBRARY_PATH, or name the file in "
                                                                              "BACKPLANE_CUDNN_LIBRARY",
                                   &opened, &api.unavailable);
  if (lib == nullptr) return api;
  bool ok = true;
#define BP_CUDNN_RESOLVE(f) ok = ok && bp_cuda::resolve(lib, #f, api.f);
  BP_CUDNN_FUNCTIONS(BP_CUDNN_RESOLVE)
#undef BP_CUDNN_RESOLVE
  if (!ok) {
    api.unavailable = "the cuDNN library " + opened + " lacks functions of cuDNN " BP_CUDNN_XSTR(CUDNN_MAJOR);
    return api;
  }
  api.version = api.cudnnGetVersion();
  if (api.version / 10000 != CUDNN_MAJOR) {
    api.unavailable = "the cuDNN library " + opened + " is version " + std::to_string(api.version) +
                      ", not the major version " BP_CUDNN_XSTR(CUDNN_MAJOR) " the plugin was built for";
  }
  return api;
}

// The API, opened on the first call (one instance in the plugin).
inline const Api& api() {
  static const Api loaded = load();
  return loaded;
}

// cuda::set_cudnn_enabled's switch (BACKPLANE_CUDA_CUDNN=0 at load: off).
inline std::atomic<bool>& enabledFlag() {
  static std::atomic<bool> enabled{true};
  return enabled;
}

// Whether cuDNN serves the calls it can take: opened and switched on.
inline bool usable() { return enabledFlag().load(std::memory_order_relaxed) && api().unavailable.empty(); }

inline void check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const bool memory = status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                      status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
  bp::fail(memory ? BP_RESOURCE_EXHAUSTED : BP_INTERNAL,
           bp::detail::concat(what, " failed on " BP_GPU_NAME ": ", api().cudnnGetErrorString(status)));
}

// Whether cuDNN took the call: false for a status that says it does not
// take these parameters or lacks the configuration (the BAD_PARAM and
// NOT_SUPPORTED families: nothing was queued, and the caller runs its own
// kernel); other failures throw.
inline bool taken(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (status >= CUDNN_STATUS_BAD_PARAM && status < CUDNN_STATUS_INTERNAL_ERROR) return false;
  check(status, what);
  return false;
}

struct HandleTraits {
  using Handle = cudnnHandle_t;
  static Handle create() {
    Handle h = nullptr;
    check(api().cudnnCreate(&h), "cudnnCreate");
    return h;
  }
  static void bind(Handle h, gpuStream_t stream) { check(api().cudnnSetStream(h, stream), "cudnnSetStream"); }
};

// This thread's handle for `device` (current), bound to its current stream.
inline cudnnHandle_t handle(int device) {
  return ThreadHandles<HandleTraits>::forThread(device, currentStream(device));
}

// The floating dtypes cuDNN computes in.
inline bool takesDtype(bp::ScalarType t) {
  return t == bp::ScalarType::Float32 || t == bp::ScalarType::Float64 || t == bp::ScalarType::Float16 ||
         t == bp::ScalarType::BFloat16;
}
inline cudnnDataType_t dataType(bp::ScalarType t) {
  switch (t) {
    case bp::ScalarType::Float64: return CUDNN_DATA_DOUBLE;
    case bp::ScalarType::Float16: return CUDNN_DATA_HALF;
    case bp::ScalarType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

// alpha = 1 and beta = 0 or 1 in the type cuDNN reads them as (double for
// float64 data, else float).
struct Scaling {
  Scaling(bool wide, bool accumulate) : wide(wide), f0(accumulate ? 1.0f : 0.0f), d0(f0) {}
  const void* one() const { return wide ? static_cast<const void*>(&d1) : &f1; }
  const void* beta() const { return wide ? static_cast<const void*>(&d0) : &f0; }
  bool wide;
  float f1 = 1.0f, f0;
  double d1 = 1.0, d0;
};

// A tensor descriptor made on construction and destroyed with the object.
class TensorDesc {
 public:
  TensorDesc() { check(api().cudnnCreateTensorDescriptor(&d_), "cudnnCreateTensorDescriptor"); }
  ~TensorDesc() { api().cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

}  // namespace bp_gpu::cudnn
