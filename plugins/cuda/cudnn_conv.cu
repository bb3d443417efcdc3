// Note [cuDNN convolutions]
// The CUDA plugin runs conv2d and conv2d_backward of the floating dtypes on
// cuDNN, as PyTorch does (batch_norm and pooling: Note [cuDNN batch norm and
// pooling] in cudnn_norm_pool.cu); the other GPU plugins, the integer dtypes, and
// calls cuDNN cannot take run our kernels (Note [conv2d on the GPU] in
// plugins/gpu/conv_pool.cu; conv2d_backward's composite).
//   * cuDNN is opened on the first convolution (Note [Libraries opened on
//     first use]): libcudnn.so.<major>, or the file BACKPLANE_CUDNN_LIBRARY
//     names. Without it, or with cuda::set_cudnn_enabled(false) (or
//     BACKPLANE_CUDA_CUDNN=0 when the plugin loads), our kernels run;
//     cuda::cudnn_version() says which cuDNN runs (0: none).
//   * The calls are cuDNN's convolution API (cudnnConvolutionForward,
//     BackwardData, BackwardFilter, BackwardBias), which cuDNN 9 still
//     serves though it marks it deprecated in favour of its graph API.
//   * Layouts: dense NCHW activations and OIHW weights (conv2d makes them
//     dense first), groups as cuDNN's group count, cross-correlation.
//     float16 and bfloat16 compute in float32, float64 in float64.
//   * Math: float32 never runs in TF32 unless cuda::set_allow_tf32(true)
//     (Note [TF32 matrix products]): only FMA-math algorithms are taken.
//   * Algorithms: the first of cuDNN's heuristic ranking
//     (cudnnGet*Algorithm_v7) whose workspace fits kWorkspaceLimit, a
//     deterministic one first for the backward passes. The plan (the
//     descriptors, the algorithm, its workspace) is kept per host thread
//     and shape, found without a lock; the workspace comes from the caching
//     allocator on the call's stream.
//   * Sizes past cuDNN's 32-bit descriptors, or no algorithm (a failed
//     algorithm query counts as none): our kernels, or for conv2d_backward
//     a decline to its composite, which also sums a 16-bit bias's gradient
//     (in float32, as the other reductions do).
//   * A plan is looked up once per op and held for the op: a lookup that
//     makes a plan may drop the thread's others (at most kMaxPlans).
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "cuda/cudnn_api.h"
#include "cuda/cudnn_conv.h"
#include "gpu/kernel_args.h"
#include "gpu/kernels.h"
#include "gpu/runtime.h"

namespace bp_gpu {
namespace {

using bp::ScalarType;
using bp_common::ConvGeometry;

// Workspace bytes an algorithm may ask for.
constexpr size_t kWorkspaceLimit = size_t{256} << 20;

// The three passes a plan may hold.
enum Pass { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

// What identifies a plan: the geometry, dtype, device and TF32 switch.
struct PlanKey {
  int64_t v[18];
  bool operator==(const PlanKey& o) const { return std::memcmp(v, o.v, sizeof v) == 0; }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t x : k.v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};
PlanKey keyOf(const ConvGeometry& g, ScalarType dtype, int device, bool tf32) {
  return PlanKey{{g.n, g.c, g.h, g.w, g.oc, g.kh, g.kw, g.stride[0], g.stride[1], g.padding[0], g.padding[1],
                  g.dilation[0], g.dilation[1], g.groups, static_cast<int64_t>(dtype), device, tf32 ? 1 : 0, 0}};
}

// The descriptors of one convolution and, per pass, its algorithm (planned
// on first use; -1: cuDNN has none that fits).
struct Plan {
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    const cudnn::Api& api = cudnn::api();
    if (x) api.cudnnDestroyTensorDescriptor(x);
    if (y) api.cudnnDestroyTensorDescriptor(y);
    if (bias) api.cudnnDestroyTensorDescriptor(bias);
    if (w) api.cudnnDestroyFilterDescriptor(w);
    for (cudnnConvolutionDescriptor_t c : conv)
      if (c) api.cudnnDestroyConvolutionDescriptor(c);
  }
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};
  bool planned[3] = {false, false, false};
  int algo[3] = {-1, -1, -1};
  size_t workspace[3] = {0, 0, 0};
  bool wide = false;  // float64: double scaling factors
  bool tf32 = false;  // planned with TF32 allowed
};

bool fitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v < 0 || v > INT_MAX) return false;
  return true;
}

// Whether an algorithm of math type `m` may run a convolution in `dtype`.
bool mathAllowed(cudnnMathType_t m, ScalarType dtype, bool tf32) {
  if (dtype != ScalarType::Float32 || tf32) return true;
  return m == CUDNN_FMA_MATH;
}

// The first acceptable entry of a heuristic ranking (deterministic first
// when asked), or -1.
template <class Perf>
int pick(const Perf* perf, int count, ScalarType dtype, bool tf32, bool deterministic_first) {
  for (int pass = deterministic_first ? 0 : 1; pass < 2; ++pass) {
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kWorkspaceLimit || !mathAllowed(p.mathType, dtype, tf32))
        continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      return i;
    }
  }
  return -1;
}

class Plans {
 public:
  // The plan of `g` with its descriptors, made if there was none (which may
  // drop the thread's other plans: hold one plan per op, from one call);
  // null when the sizes exceed cuDNN's descriptors.
  Plan* get(const ConvGeometry& g, ScalarType dtype, int device, bool tf32) {
    const PlanKey key = keyOf(g, dtype, device, tf32);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.get();
    if (!fitsInt({g.n, g.c, g.h, g.w, g.oc, g.kh, g.kw, g.oh, g.ow, g.stride[0], g.stride[1], g.padding[0],
                  g.padding[1], g.dilation[0], g.dilation[1], g.groups, g.n * g.c * g.h * g.w, g.n * g.oc * g.oh * g.ow,
                  g.oc * (g.c / g.groups) * g.kh * g.kw}))
      return nullptr;
    auto made = std::make_unique<Plan>();
    describe(*made, g, dtype);  // a failure leaves nothing half-made in the cache
    made->tf32 = tf32;
    if (plans_.size() >= kMaxPlans) plans_.clear();  // a bound on what many shapes keep
    return plans_.emplace(key, std::move(made)).first->second.get();
  }

  // Whether `pass` of `p` has an algorithm (planned on first use).
  static bool hasAlgorithm(Plan& p, ScalarType dtype, int device, Pass pass) {
    if (!p.planned[pass]) planPass(p, dtype, p.tf32, device, pass);
    return p.algo[pass] >= 0;
  }

 private:
  static constexpr size_t kMaxPlans = 256;

  static void describe(Plan& p, const ConvGeometry& g, ScalarType dtype) {
    const cudnn::Api& api = cudnn::api();
    const cudnnDataType_t t = cudnn::dataType(dtype);
    p.wide = dtype == ScalarType::Float64;
    auto i32 = [](int64_t v) { return static_cast<int>(v); };
    cudnn::check(api.cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor");
    cudnn::check(api.cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, t, i32(g.n), i32(g.c), i32(g.h), i32(g.w)),
                 "cudnnSetTensor4dDescriptor");
    cudnn::check(api.cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor");
    cudnn::check(api.cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, t, i32(g.n), i32(g.oc), i32(g.oh), i32(g.ow)),
                 "cudnnSetTensor4dDescriptor");
    cudnn::check(api.cudnnCreateTensorDescriptor(&p.bias), "cudnnCreateTensorDescriptor");
    cudnn::check(api.cudnnSetTensor4dDescriptor(p.bias, CUDNN_TENSOR_NCHW, t, 1, i32(g.oc), 1, 1),
                 "cudnnSetTensor4dDescriptor");
    cudnn::check(api.cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor");
    cudnn::check(
        api.cudnnSetFilter4dDescriptor(p.w, t, CUDNN_TENSOR_NCHW, i32(g.oc), i32(g.c / g.groups), i32(g.kh), i32(g.kw)),
        "cudnnSetFilter4dDescriptor");
    const cudnnDataType_t compute = p.wide ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    for (cudnnConvolutionDescriptor_t& c : p.conv) {
      cudnn::check(api.cudnnCreateConvolutionDescriptor(&c), "cudnnCreateConvolutionDescriptor");
      cudnn::check(api.cudnnSetConvolution2dDescriptor(c, i32(g.padding[0]), i32(g.padding[1]), i32(g.stride[0]),
                                                       i32(g.stride[1]), i32(g.dilation[0]), i32(g.dilation[1]),
                                                       CUDNN_CROSS_CORRELATION, compute),
                   "cudnnSetConvolution2dDescriptor");
      cudnn::check(api.cudnnSetConvolutionGroupCount(c, i32(g.groups)), "cudnnSetConvolutionGroupCount");
    }
  }

  // Takes the first acceptable entry of cuDNN's ranking for `pass`, which
  // `rank(n, &count, perf)` fills, and sets the pass's math type to its. A
  // failed query is an empty ranking (e.g. a dtype this GPU's cuDNN kernels
  // lack): no algorithm, our kernels run the call.
  template <class Perf, class Rank>
  static void choose(Plan& p, Pass pass, ScalarType dtype, bool tf32, bool deterministic_first, Rank&& rank) {
    constexpr int kRanked = 8;
    Perf perf[kRanked];
    int count = 0;
    if (rank(kRanked, &count, perf) != CUDNN_STATUS_SUCCESS) count = 0;
    const int i = pick(perf, count, dtype, tf32, deterministic_first);
    if (i < 0) return;
    p.algo[pass] = perf[i].algo;
    p.workspace[pass] = perf[i].memory;
    cudnn::check(cudnn::api().cudnnSetConvolutionMathType(p.conv[pass], perf[i].mathType),
                 "cudnnSetConvolutionMathType");
  }

  static void planPass(Plan& p, ScalarType dtype, bool tf32, int device, Pass pass) {
    const cudnn::Api& api = cudnn::api();
    DeviceGuard guard(device);
    const cudnnHandle_t h = cudnn::handle(device);
    // The ranking for the math the call may use: FMA only for float32 without TF32.
    const cudnnMathType_t asked = dtype == ScalarType::Float32 && !tf32 ? CUDNN_FMA_MATH
                                  : dtype == ScalarType::Float64        ? CUDNN_DEFAULT_MATH
                                                                        : CUDNN_TENSOR_OP_MATH;
    cudnn::check(api.cudnnSetConvolutionMathType(p.conv[pass], asked), "cudnnSetConvolutionMathType");
    switch (pass) {
      case kForward:
        choose<cudnnConvolutionFwdAlgoPerf_t>(p, pass, dtype, tf32, false, [&](int n, int* count, auto* perf) {
          return api.cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv[pass], p.y, n, count, perf);
        });
        break;
      case kBackwardData:
        choose<cudnnConvolutionBwdDataAlgoPerf_t>(p, pass, dtype, tf32, true, [&](int n, int* count, auto* perf) {
          return api.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv[pass], p.x, n, count, perf);
        });
        break;
      case kBackwardFilter:
        choose<cudnnConvolutionBwdFilterAlgoPerf_t>(p, pass, dtype, tf32, true, [&](int n, int* count, auto* perf) {
          return api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv[pass], p.w, n, count, perf);
        });
        break;
    }
    p.planned[pass] = true;
  }

  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans_;
};

Plans& threadPlans() {
  static thread_local Plans plans;
  return plans;
}

// The plan of `g` when cuDNN is usable for `dtype` and the sizes, else
// null. One lookup per op: a later lookup may drop this plan.
Plan* planFor(const ConvGeometry& g, ScalarType dtype, int device) {
  if (!cudnn::takesDtype(dtype) || !cudnn::usable()) return nullptr;
  return threadPlans().get(g, dtype, device, allowTf32());
}

// A workspace of `bytes` from the caching allocator on the current stream
// (kept alive by `holder` until the call is queued).
void* workspace(size_t bytes, bp::Device device, bp::Tensor& holder) {
  if (bytes == 0) return nullptr;
  holder = bp::Tensor::empty({static_cast<int64_t>(bytes)}, ScalarType::UInt8, device);
  return holder.data_ptr();
}

// conv2d_backward on cuDNN (the host's rule has checked shapes and dtypes);
// declines what cuDNN does not take, which the op's composite then serves.
std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> conv2dBackward(const bp::Tensor& grad_output, const bp::Tensor& input,
                                                              const bp::Tensor& weight, bp::IntList stride,
                                                              bp::IntList padding, bp::IntList dilation, int64_t groups,
                                                              bp::BoolList output_mask) {
  static constexpr const char* kOp = "bp::conv2d_backward";
  const bp::Device device = callDevice(kOp, input, "input");
  checkOnDevice(kOp, grad_output, "grad_output", device);
  checkOnDevice(kOp, weight, "weight", device);
  BP_PLUGIN_CHECK(output_mask.size() == 3, kOp, ": output_mask must have 3 values (input, weight, bias), got ",
                  output_mask.size());
  const ScalarType dtype = input.dtype();
  if (!cudnn::usable()) {
    bp::decline(cudnn::api().unavailable.empty() ? "cuDNN is disabled (cuda::set_cudnn_enabled(false))"
                                                 : cudnn::api().unavailable);
  }
  if (grad_output.numel() == 0 || input.numel() == 0 || weight.numel() == 0)
    bp::decline("an empty tensor: the composite gives its zeros and the bias's sum");
  if (output_mask[2] && dtype != ScalarType::Float32 && dtype != ScalarType::Float64)
    bp::decline("the bias's gradient of a 16-bit convolution: the composite sums it in float32");
  const ConvGeometry g = bp_common::convGeometry(input, weight, stride, padding, dilation, groups);
  Plan* plan = planFor(g, dtype, device.index);
  if (plan == nullptr) bp::decline("sizes past cuDNN's 32-bit descriptors");
  if ((output_mask[0] && !Plans::hasAlgorithm(*plan, dtype, device.index, kBackwardData)) ||
      (output_mask[1] && !Plans::hasAlgorithm(*plan, dtype, device.index, kBackwardFilter)))
    bp::decline("cuDNN has no algorithm for this convolution within the workspace limit");
  bp::Tensor holders[3];
  const bp::Tensor& go = dense(kOp, grad_output, dtype, holders[0]);
  const bp::Tensor& x = dense(kOp, input, dtype, holders[1]);
  const bp::Tensor& w = dense(kOp, weight, dtype, holders[2]);
  bp::Tensor gi, gw, gb;
  const cudnn::Api& api = cudnn::api();
  DeviceGuard guard(device.index);
  const cudnnHandle_t h = cudnn::handle(device.index);
  if (output_mask[0]) {
    gi = bp::Tensor::empty(input.sizes(), dtype, device);
    bp::Tensor ws;
    const cudnn::Scaling s(plan->wide, false);
    cudnn::check(api.cudnnConvolutionBackwardData(h, s.one(), plan->w, w.data_ptr(), plan->y, go.data_ptr(),
                                                  plan->conv[kBackwardData],
                                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algo[kBackwardData]),
                                                  workspace(plan->workspace[kBackwardData], device, ws),
                                                  plan->workspace[kBackwardData], s.beta(), plan->x, gi.data_ptr()),
                 "cudnnConvolutionBackwardData");
  }
  if (output_mask[1]) {
    gw = bp::Tensor::empty(weight.sizes(), dtype, device);
    bp::Tensor ws;
    const cudnn::Scaling s(plan->wide, false);
    cudnn::check(api.cudnnConvolutionBackwardFilter(
                     h, s.one(), plan->x, x.data_ptr(), plan->y, go.data_ptr(), plan->conv[kBackwardFilter],
                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algo[kBackwardFilter]),
                     workspace(plan->workspace[kBackwardFilter], device, ws), plan->workspace[kBackwardFilter],
                     s.beta(), plan->w, gw.data_ptr()),
                 "cudnnConvolutionBackwardFilter");
  }
  if (output_mask[2]) {
    gb = bp::Tensor::empty({g.oc}, dtype, device);
    const cudnn::Scaling s(plan->wide, false);
    cudnn::check(
        api.cudnnConvolutionBackwardBias(h, s.one(), plan->y, go.data_ptr(), s.beta(), plan->bias, gb.data_ptr()),
        "cudnnConvolutionBackwardBias");
  }
  return {std::move(gi), std::move(gw), std::move(gb)};
}

int64_t cudnnVersion() { return cudnn::api().unavailable.empty() ? static_cast<int64_t>(cudnn::api().version) : 0; }
void setCudnnEnabled(bool enabled) { cudnn::enabledFlag().store(enabled, std::memory_order_relaxed); }
bool cudnnEnabled() { return cudnn::enabledFlag().load(std::memory_order_relaxed); }

}  // namespace

const CudnnConvPlan* cudnnConv2dPlan(const ConvGeometry& g, ScalarType dtype, bp::Device device) {
  Plan* p = planFor(g, dtype, device.index);
  if (p == nullptr || !Plans::hasAlgorithm(*p, dtype, device.index, kForward)) return nullptr;
  return reinterpret_cast<const CudnnConvPlan*>(p);
}

void cudnnConv2d(const CudnnConvPlan* plan, bp::Device device, const void* x, const void* w, void* y, bool accumulate) {
  Plan* p = reinterpret_cast<Plan*>(const_cast<CudnnConvPlan*>(plan));
  DeviceGuard guard(device.index);
  bp::Tensor ws;
  const cudnn::Scaling s(p->wide, accumulate);
  cudnn::check(cudnn::api().cudnnConvolutionForward(
                   cudnn::handle(device.index), s.one(), p->x, x, p->w, w, p->conv[kForward],
                   static_cast<cudnnConvolutionFwdAlgo_t>(p->algo[kForward]),
                   workspace(p->workspace[kForward], device, ws), p->workspace[kForward], s.beta(), p->y, y),
               "cudnnConvolutionForward");
}

void registerCudnnKernels(bp::Library& m, int32_t type) {
  const char* env = std::getenv("BACKPLANE_CUDA_CUDNN");
  setCudnnEnabled(env == nullptr || std::strcmp(env, "0") != 0);
  m.def("cuda::cudnn_version() -> int");
  m.def("cuda::set_cudnn_enabled(bool enabled) -> ()");
  m.def("cuda::cudnn_enabled() -> bool");
  m.impl("cuda::cudnn_version", kCpuType, &cudnnVersion);
  m.impl("cuda::set_cudnn_enabled", kCpuType, &setCudnnEnabled);
  m.impl("cuda::cudnn_enabled", kCpuType, &cudnnEnabled);
  m.impl("conv2d_backward", type, &conv2dBackward,
         bp::Dtypes{ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16});
}

}  // namespace bp_gpu
