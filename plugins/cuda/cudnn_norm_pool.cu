// Note [cuDNN batch norm and pooling]
// On CUDA, with cuDNN usable (Note [cuDNN convolutions]):
//   * batch_norm runs cudnnBatchNormalizationForwardTraining (the batch's
//     statistics, the running ones updated with the unbiased variance, as
//     PyTorch's) or ForwardInference (the running statistics), spatial
//     mode, for 2-D to 4-D inputs with a weight and a bias whose running
//     statistics, when given, are in the parameter dtype (float32, or
//     float64 for float64 inputs). batch_norm_backward in training runs
//     cudnnBatchNormalizationBackward (it recomputes the batch's statistics)
//     when a weight is given. Other calls (no weight, bfloat16 as in
//     PyTorch, float64 running statistics of a float32 input, 5-D inputs,
//     evaluation-mode gradients, which are elementwise) run the plugin's
//     kernels (norm.cu, backward.cu).
//   * max_pool2d and avg_pool2d run cudnnPoolingForward (max with NaN
//     propagated; average with or without the padding counted) when the
//     output has floor mode's size, with no dilation and no
//     divisor_override; the input is read through its strides. The pooling
//     backward ops stay on the plugin's kernels: a maximum's gradient goes
//     to the first maximum of its window, as the CPU plugin and PyTorch
//     send it, and cuDNN does not say which of equal values it picks.
// A call cuDNN answers with BAD_PARAM or NOT_SUPPORTED (nothing queued) also
// runs the plugin's kernel (cudnn::taken). Descriptors are made per call (a
// few host microseconds, no device work).
#include <climits>
#include <initializer_list>

#include "cuda/cudnn_api.h"
#include "cuda/cudnn_norm_pool.h"
#include "gpu/runtime.h"

namespace bp_gpu {
namespace {

using bp::ScalarType;

bool fitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v < 0 || v > INT_MAX) return false;
  return true;
}

// x's sizes as N, C, H, W (2-D: H = W = 1; 3-D: W = 1); false past 4-D or int.
bool nchw(const bp::Tensor& x, int (&d)[4]) {
  if (x.dim() < 2 || x.dim() > 4) return false;
  const int64_t n = x.size(0), c = x.size(1), h = x.dim() > 2 ? x.size(2) : 1, w = x.dim() > 3 ? x.size(3) : 1;
  if (!fitsInt({n, c, h, w, x.numel()})) return false;
  d[0] = static_cast<int>(n), d[1] = static_cast<int>(c), d[2] = static_cast<int>(h), d[3] = static_cast<int>(w);
  return true;
}

// What every cuDNN batch-norm call of `x` sets up: x's device current,
// this thread's handle, x's descriptor (N, C, H, W) and the per-channel
// parameters' (cuDNN's spatial-mode derivation: 1, C, 1, 1 in float or
// double), the scaling factors. ok is false when cuDNN does not take x's
// shape (past 4-D, sizes past int, empty) or the descriptors.
struct BatchNormCall {
  explicit BatchNormCall(const bp::Tensor& in)
      : guard(in.device().index), wide(in.dtype() == ScalarType::Float64), s(wide, false) {
    int d[4];
    if (!nchw(in, d) || in.numel() == 0) return;
    const cudnn::Api& api = cudnn::api();
    h = cudnn::handle(in.device().index);
    ok = cudnn::taken(api.cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, cudnn::dataType(in.dtype()), d[0],
                                                     d[1], d[2], d[3]),
                      "cudnnSetTensor4dDescriptor") &&
         cudnn::taken(api.cudnnDeriveBNTensorDescriptor(params.get(), x.get(), CUDNN_BATCHNORM_SPATIAL),
                      "cudnnDeriveBNTensorDescriptor");
  }
  DeviceGuard guard;
  bool wide;
  cudnn::Scaling s;
  cudnnHandle_t h = nullptr;
  cudnn::TensorDesc x, params;
  bool ok = false;
};

}  // namespace

bool cudnnBatchNorm(const bp::Tensor& x, const bp::Tensor& y, const void* weight, const void* bias, void* running_mean,
                    void* running_var, bool training, double momentum, double eps) {
  const ScalarType dtype = x.dtype();
  // bfloat16 stays on the plugin's kernel, as in PyTorch.
  if (!cudnn::takesDtype(dtype) || dtype == ScalarType::BFloat16 || !cudnn::usable() || weight == nullptr ||
      bias == nullptr)
    return false;
  if ((running_mean == nullptr) != (running_var == nullptr)) return false;
  if (!training && running_mean == nullptr) return false;  // evaluation without running statistics: the batch's
  const BatchNormCall c(x);
  if (!c.ok) return false;
  const cudnn::Api& api = cudnn::api();
  const cudnnTensorDescriptor_t xd = c.x.get(), pd = c.params.get();
  const cudnnHandle_t h = c.h;
  const cudnn::Scaling& s = c.s;
  if (training) {
    return cudnn::taken(api.cudnnBatchNormalizationForwardTraining(
                            h, CUDNN_BATCHNORM_SPATIAL, s.one(), s.beta(), xd, x.data_ptr(), xd, y.data_ptr(), pd,
                            weight, bias, momentum, running_mean, running_var, eps, nullptr, nullptr),
                        "cudnnBatchNormalizationForwardTraining");
  }
  return cudnn::taken(
      api.cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, s.one(), s.beta(), xd, x.data_ptr(), xd,
                                                  y.data_ptr(), pd, weight, bias, running_mean, running_var, eps),
      "cudnnBatchNormalizationForwardInference");
}

bool cudnnBatchNormBackward(const bp::Tensor& go, const bp::Tensor& x, const void* weight, double eps,
                            const bp::Tensor& gi, const bp::Tensor& gw, const bp::Tensor& gb) {
  const ScalarType dtype = x.dtype();
  if ((dtype != ScalarType::Float32 && dtype != ScalarType::Float64) || !cudnn::usable() || weight == nullptr)
    return false;
  const BatchNormCall c(x);
  if (!c.ok) return false;
  // cuDNN writes all three: what was not asked for goes to scratch.
  const bp::Device device = x.device();
  const bp::Tensor dx = gi.defined() ? gi : bp::Tensor::empty(x.sizes(), dtype, device);
  const bp::Tensor dw = gw.defined() ? gw : bp::Tensor::empty({x.size(1)}, dtype, device);
  const bp::Tensor db = gb.defined() ? gb : bp::Tensor::empty({x.size(1)}, dtype, device);
  const cudnn::Api& api = cudnn::api();
  const cudnnTensorDescriptor_t xd = c.x.get(), pd = c.params.get();
  const cudnnHandle_t h = c.h;
  const cudnn::Scaling& s = c.s;
  return cudnn::taken(
      api.cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, s.one(), s.beta(), s.one(), s.beta(), xd,
                                          x.data_ptr(), xd, go.data_ptr(), xd, dx.data_ptr(), pd, weight, dw.data_ptr(),
                                          db.data_ptr(), eps, nullptr, nullptr),
      "cudnnBatchNormalizationBackward");
}

bool cudnnPool2d(const PoolArgs& a, bool max, const bp::Tensor& self, const bp::Tensor& out) {
  const ScalarType dtype = self.dtype();
  if (!cudnn::takesDtype(dtype) || !cudnn::usable() || out.numel() == 0) return false;
  if (a.dh != 1 || a.dw != 1 || (!max && a.divisor != 0)) return false;
  // Floor mode's output size only (a ceil-mode window past the input is not cuDNN's).
  if (a.oh != (a.h + 2 * a.ph - a.kh) / a.sh + 1 || a.ow != (a.w + 2 * a.pw - a.kw) / a.sw + 1) return false;
  const int64_t images = self.dim() == 4 ? self.size(0) : 1;
  if (a.stride_c <= 0 || a.stride_h <= 0 || a.stride_w <= 0 || (images > 1 && a.stride_n <= 0))
    return false;  // an expanded (0-stride) or reversed input: the plugin's kernel reads it
  if (!fitsInt({images, a.channels, a.h, a.w, a.oh, a.ow, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.stride_n, a.stride_c,
                a.stride_h, a.stride_w, self.numel(), out.numel()}))
    return false;
  const bp::Device device = self.device();
  const cudnn::Api& api = cudnn::api();
  DeviceGuard guard(device.index);
  const cudnnHandle_t h = cudnn::handle(device.index);
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  const cudnnDataType_t t = cudnn::dataType(dtype);
  cudnn::TensorDesc xd, yd;
  if (!cudnn::taken(api.cudnnSetTensor4dDescriptorEx(xd.get(), t, i32(images), i32(a.channels), i32(a.h), i32(a.w),
                                                     i32(images == 1 ? a.channels * a.stride_c : a.stride_n),
                                                     i32(a.stride_c), i32(a.stride_h), i32(a.stride_w)),
                    "cudnnSetTensor4dDescriptorEx") ||
      !cudnn::taken(api.cudnnSetTensor4dDescriptor(yd.get(), CUDNN_TENSOR_NCHW, t, i32(images), i32(a.channels),
                                                   i32(a.oh), i32(a.ow)),
                    "cudnnSetTensor4dDescriptor"))
    return false;
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnn::check(api.cudnnCreatePoolingDescriptor(&pool), "cudnnCreatePoolingDescriptor");
  struct Destroy {
    cudnnPoolingDescriptor_t p;
    ~Destroy() { cudnn::api().cudnnDestroyPoolingDescriptor(p); }
  } destroy{pool};
  const cudnnPoolingMode_t mode = max                   ? CUDNN_POOLING_MAX
                                  : a.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  if (!cudnn::taken(api.cudnnSetPooling2dDescriptor(pool, mode, CUDNN_PROPAGATE_NAN, i32(a.kh), i32(a.kw), i32(a.ph),
                                                    i32(a.pw), i32(a.sh), i32(a.sw)),
                    "cudnnSetPooling2dDescriptor"))
    return false;
  const cudnn::Scaling s(dtype == ScalarType::Float64, false);
  return cudnn::taken(
      api.cudnnPoolingForward(h, pool, s.one(), xd.get(), self.data_ptr(), s.beta(), yd.get(), out.data_ptr()),
      "cudnnPoolingForward");
}

}  // namespace bp_gpu
