// _fused_sgd_ and _fused_adamw_ on the GPU plugins (Note [Optimizer ops] in
// dispatcher/ops/src/optim.cc): multi-tensor kernels. One launch updates up
// to kTensorsPerLaunch parameters of one dtype, each thread walking the
// parameters' elements as one flat range, so a model's hundred small
// tensors cost a few launches, not a hundred. The arithmetic is
// bp_common/optim.h's, the CPU plugin's, in the opmath type. The meta
// kernel has checked the lists (lengths, devices, dtypes, shapes,
// contiguity) and the hyperparameters.
#include <cmath>
#include <cstdint>
#include <vector>

#include "bp_common/optim.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

constexpr int kTensorsPerLaunch = 24;
constexpr int kSlots = 5;  // parameter, gradient and up to three state tensors

// The tensors of one launch: slot s of tensor j is ptr[s][j]; tensor j's
// elements are [end[j - 1], end[j]) of the launch's flat range.
struct TensorBatch {
  void* ptr[kSlots][kTensorsPerLaunch];
  int64_t end[kTensorsPerLaunch];
  int count;
};

// The element of the flat range i is in tensor *j (advanced from the
// thread's last tensor: a thread's indices only grow) at offset *k.
__device__ inline void locate(const TensorBatch& b, int64_t i, int& j, int64_t& k) {
  while (i >= b.end[j]) ++j;
  k = i - (j == 0 ? 0 : b.end[j - 1]);
}

template <class T>
__global__ void sgdKernel(TensorBatch b, int64_t n, bp_common::SgdStep<opmath_t<T>> step) {
  using V = opmath_t<T>;
  int j = 0;
  gridStride(n, [&](int64_t i) {
    int64_t k;
    locate(b, i, j, k);
    T* p = static_cast<T*>(b.ptr[0][j]) + k;
    const T* g = static_cast<const T*>(b.ptr[1][j]) + k;
    T* buf = step.has_momentum ? static_cast<T*>(b.ptr[2][j]) + k : nullptr;
    V pv = load(*p);
    V bv = buf != nullptr ? load(*buf) : V(0);
    step(pv, load(*g), &bv);
    *p = store<T>(pv);
    if (buf != nullptr) *buf = store<T>(bv);
  });
}

template <class T>
__global__ void adamwKernel(TensorBatch b, int64_t n, bp_common::AdamwStep<opmath_t<T>> update) {
  using V = opmath_t<T>;
  int j = 0;
  gridStride(n, [&](int64_t i) {
    int64_t k;
    locate(b, i, j, k);
    T* p = static_cast<T*>(b.ptr[0][j]) + k;
    const T* g = static_cast<const T*>(b.ptr[1][j]) + k;
    T* m = static_cast<T*>(b.ptr[2][j]) + k;
    T* v = static_cast<T*>(b.ptr[3][j]) + k;
    T* vmax = update.amsgrad ? static_cast<T*>(b.ptr[4][j]) + k : nullptr;
    V pv = load(*p), mv = load(*m), vv = load(*v);
    V xv = vmax != nullptr ? load(*vmax) : V(0);
    update(pv, load(*g), mv, vv, &xv);
    *p = store<T>(pv);
    *m = store<T>(mv);
    *v = store<T>(vv);
    if (vmax != nullptr) *vmax = store<T>(xv);
  });
}

// Calls launch(dtype, batch, numel) for runs of up to kTensorsPerLaunch
// non-empty parameters of one dtype; lists[s][i] is slot s of parameter i
// (an empty list leaves its slot null).
template <class Launch>
void forEachBatch(const char* op, const std::vector<const std::vector<bp::Tensor>*>& lists, Launch&& launch) {
  const std::vector<bp::Tensor>& params = *lists[0];
  const bp::Device device = callDevice(op, params[0], "self");
  const char* names[kSlots] = {"self", "grads", "state", "state", "state"};
  TensorBatch batch{};
  ScalarType dtype = params[0].dtype();
  auto flush = [&] {
    if (batch.count > 0) launch(dtype, device.index, batch, batch.end[batch.count - 1]);
    batch = TensorBatch{};
  };
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t s = 0; s < lists.size(); ++s) {
      if (lists[s]->empty()) continue;
      checkOnDevice(op, (*lists[s])[i], names[s], device);
      checkDtype(op, (*lists[s])[i], names[s], kFloatDtypes);
    }
    if (params[i].numel() == 0) continue;
    if (params[i].dtype() != dtype || batch.count == kTensorsPerLaunch) flush();
    dtype = params[i].dtype();
    const int j = batch.count++;
    for (size_t s = 0; s < lists.size(); ++s) batch.ptr[s][j] = lists[s]->empty() ? nullptr : (*lists[s])[i].data_ptr();
    batch.end[j] = (j == 0 ? 0 : batch.end[j - 1]) + params[i].numel();
  }
  flush();
}

void fused_sgd(const std::vector<bp::Tensor>& self, const std::vector<bp::Tensor>& grads,
               const std::vector<bp::Tensor>& momentum_buffer_list, double weight_decay, double momentum, double lr,
               double dampening, bool nesterov, bool maximize, bool is_first_step) {
  static constexpr const char* kOp = "bp::_fused_sgd_";
  forEachBatch(kOp, {&self, &grads, &momentum_buffer_list},
               [&](ScalarType dtype, int device, const TensorBatch& batch, int64_t n) {
                 visitDtype(dtype, [&](auto tag) {
                   using T = decltype(tag);
                   if constexpr (kIsFloating<T>) {
                     using V = opmath_t<T>;
                     const auto step = bp_common::SgdStep<V>::make(lr, weight_decay, momentum, dampening, nesterov,
                                                                   maximize, is_first_step);
                     launchElements(&sgdKernel<T>, n, 1, device, batch, n, step);
                   }
                 });
               });
}

void fused_adamw(const std::vector<bp::Tensor>& self, const std::vector<bp::Tensor>& grads,
                 const std::vector<bp::Tensor>& exp_avgs, const std::vector<bp::Tensor>& exp_avg_sqs,
                 const std::vector<bp::Tensor>& max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize) {
  static constexpr const char* kOp = "bp::_fused_adamw_";
  forEachBatch(kOp, {&self, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs},
               [&](ScalarType dtype, int device, const TensorBatch& batch, int64_t n) {
                 visitDtype(dtype, [&](auto tag) {
                   using T = decltype(tag);
                   if constexpr (kIsFloating<T>) {
                     using V = opmath_t<T>;
                     const auto update =
                         bp_common::AdamwStep<V>::make(step, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize);
                     launchElements(&adamwKernel<T>, n, 1, device, batch, n, update);
                   }
                 });
               });
}

}  // namespace

void registerOptimKernels(bp::Library& m, int32_t type) {
  m.impl("_fused_sgd_", type, &fused_sgd);
  m.impl("_fused_adamw_", type, &fused_adamw);
}

}  // namespace bp_gpu
